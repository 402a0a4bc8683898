"""Refuse the path mistakes of ``cep run`` that would destroy data, before anything is opened for writing.

Why: ``-i v.jsonl -o v.jsonl`` would truncate the input before reading it,
``-o X --checkpoint X`` would replace the output with the checkpoint, and so
on.  Two names are the same file when ``os.stat`` gives the same device and
inode (symlinks, hard links, ``./x`` and ``x`` alike); a name that does not
exist yet is compared by its resolved path.  Devices and pipes (``/dev/null``,
``/dev/stdout``) hold no data to lose and may be named twice, except as a
checkpoint, which must be a regular file: it is read whole on resume and
replaced by rename.
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple


class PathClash(Exception):
    """Two roles of one run name the same file, or a checkpoint is not a regular file (one line)."""


class Role(NamedTuple):
    option: str  # as the user wrote it: "-i", "-o", "--checkpoint", "pattern file"
    spec: str
    writes: bool  # opened for writing (truncated, appended to or replaced)


def _identity(spec: str, writes: bool) -> tuple | None:
    """What makes two names one file: (dev, ino) of a regular file, or the resolved path of a new one.

    ``-`` is stdin (reading) or stdout (writing): ``cep run -i v.jsonl >> v.jsonl`` would read
    its own output forever, and ``cep run < v.jsonl -o v.jsonl`` would truncate its input.
    """
    if spec.startswith("kafka://"):
        return None
    try:
        st = os.fstat(1 if writes else 0) if spec == "-" else os.stat(spec)
    except FileNotFoundError:
        return ("new", os.path.realpath(spec))
    except OSError:
        return None  # unreadable: opening it reports the reason
    if stat.S_ISREG(st.st_mode):
        return ("file", st.st_dev, st.st_ino)
    return None


def check_checkpoint_path(spec: str) -> None:
    """A checkpoint is a regular file or a name not yet taken (``/dev/full`` would be read forever)."""
    try:
        st = os.stat(spec)
    except FileNotFoundError:
        return
    except OSError as e:
        raise PathClash(f"--checkpoint {spec}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise PathClash(f"--checkpoint {spec} is not a regular file (a checkpoint is read whole and "
                        "replaced by rename)")


def _show(role: Role) -> str:
    if role.spec == "-":
        return f"{role.option} - ({'stdout' if role.writes else 'stdin'})"
    return f"{role.option} {role.spec}"


def check_roles(roles: list[Role]) -> None:
    """Raise ``PathClash`` naming the first two roles that share a file where one of them writes."""
    seen: dict[tuple, Role] = {}
    for role in roles:
        ident = _identity(role.spec, role.writes)
        if ident is None:
            continue
        other = seen.get(ident)
        if other is not None and (other.writes or role.writes) and not (other.spec == role.spec == "-"):
            raise PathClash(f"{_show(other)} and {_show(role)} name the same file: "
                            "refusing to overwrite it (name different files)")
        seen.setdefault(ident, role)
