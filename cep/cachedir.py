"""``private_dir(name)``: a per-user cache directory nobody else can write, or None.

Why one home: cep keeps two caches across runs (Lark's LALR tables, ``cep.lang.grammar_cache``;
the compiled generated code of ``cep run``, ``cep.codegen``), and both load what they find
there as code (a pickle, marshalled code objects).  A cache under a predictable name in a
shared temp directory could be planted by any local user and run as whoever runs cep next.
So a cache lives in ``$XDG_CACHE_HOME/cep`` (default ``~/.cache/cep``), created with mode
0700, and is used only when that directory (and the named one inside it) is a directory of
the current user that nobody else can write to; otherwise there is no cache (start-up is
slower, nothing else changes).  A base utility with no import from the rest of cep.
"""

from __future__ import annotations

import os
import stat

__all__ = ["private_dir"]


def _private(directory: str) -> bool:
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        st = os.stat(directory, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def private_dir(name: str = "") -> str | None:
    """The private cache directory ``cep`` (``name`` empty) or ``cep/<name>``, made if missing; None
    when it cannot be made or someone else could write to it."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = os.path.join(base, "cep")
    if not _private(directory):
        return None
    if name:
        directory = os.path.join(directory, name)
        if not _private(directory):
            return None
    return directory
