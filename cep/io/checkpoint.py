"""Checkpoints of a ``cep run``: source position, engine state and output sizes, saved atomically.

Why: a stopped or crashed run restarts from the last checkpoint with no
composite event lost (issue 5).  The file is written to a temporary name,
fsynced and renamed over the old one, so a crash leaves either the old or the
new checkpoint, never half of one.  Layout: one JSON header line (format
version, a fingerprint of the patterns and options, the source position, the
bytes each output file held, the run's counters, the length of the state)
followed by the engine state bytes from ``Engine.dumps()`` (plain data that
cannot run code: ``cep.runtime.state``; nothing here unpickles).

A checkpoint also records what a resume must verify (issue 12): the input's
path, size and a hash of its bytes around the position (``input_identity``),
and the path of every output.  A resume with another output, a deleted or
shortened output file, or an input that is shorter or other than the one
read is refused with the reason (``verify_resume``), instead of silently
missing matches.

Output files are flushed and fsynced before the checkpoint that names their
sizes is written; on resume the run truncates them back to those sizes, so the
lines written after the checkpoint are written again exactly once (a stream
output such as stdout or Kafka gets them again, with the same ids).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from typing import Any

import orjson

FORMAT_VERSION = 2  # 2: plain-data engine state, input identity and output paths
MAGIC = "cep-checkpoint"


class CheckpointError(Exception):
    """A checkpoint that cannot be read or does not fit this run."""


@dataclass
class Checkpoint:
    fingerprint: str
    position: Any  # the source's JSON-serialisable position
    state: bytes  # Engine.dumps()
    outputs: int = 0  # composite events emitted so far (all runs)
    sizes: dict[str, int] = field(default_factory=dict)  # output file -> bytes
    counters: dict[str, Any] = field(default_factory=dict)
    paths: dict[str, str] = field(default_factory=dict)  # output role -> where it was written
    input: dict[str, Any] | None = None  # input_identity() of a file input


def fingerprint(pattern_paths: list[str], options: dict[str, Any]) -> str:
    """A hash of the pattern files' text and the options that change results."""
    h = hashlib.sha256()
    for p in pattern_paths:
        with open(p, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    h.update(orjson.dumps(options, option=orjson.OPT_SORT_KEYS))
    return h.hexdigest()[:32]


def save(path: str, cp: Checkpoint) -> None:
    """Write ``cp`` to ``path`` atomically (temporary file, fsync, rename)."""
    header = {
        "magic": MAGIC,
        "version": FORMAT_VERSION,
        "fingerprint": cp.fingerprint,
        "position": cp.position,
        "outputs": cp.outputs,
        "sizes": cp.sizes,
        "counters": cp.counters,
        "paths": cp.paths,
        "input": cp.input,
        "state_len": len(cp.state),
    }
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(orjson.dumps(header) + b"\n")
            f.write(cp.state)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise CheckpointError(f"cannot write checkpoint {path}: {e.strerror or e}") from None
    try:  # make the rename itself durable
        dfd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def load(path: str) -> Checkpoint:
    """Read a checkpoint; ``CheckpointError`` with a clear message if it is not one this cep reads."""
    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise CheckpointError(f"checkpoint {path} is not a regular file")
            data = f.read()
    except OSError as e:
        raise CheckpointError(f"cannot read checkpoint {path}: {e.strerror or e}") from None
    nl = data.find(b"\n")
    try:
        header = orjson.loads(data[:nl]) if nl >= 0 else None
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("magic") != MAGIC:
        raise CheckpointError(f"{path} is not a cep checkpoint")
    if header.get("version") != FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path} has format version {header.get('version')}; this cep reads version "
            f"{FORMAT_VERSION} (start without it, or use the cep release that wrote it)"
        )
    state = data[nl + 1:]
    if len(state) != header.get("state_len"):
        raise CheckpointError(f"checkpoint {path} is truncated")
    return Checkpoint(
        fingerprint=header["fingerprint"],
        position=header["position"],
        state=state,
        outputs=header.get("outputs", 0),
        sizes=header.get("sizes", {}),
        counters=header.get("counters", {}),
        paths=header.get("paths") or {},
        input=header.get("input"),
    )


# ------------------------------------------------------------ resume checks

_SAMPLE = 4096  # bytes hashed at the start of the input and just before the position


def _sample_hash(f: Any, offset: int) -> str:
    h = hashlib.sha256()
    f.seek(0)
    h.update(f.read(min(offset, _SAMPLE)))
    tail = max(_SAMPLE, offset - _SAMPLE)
    if tail < offset:
        f.seek(tail)
        h.update(f.read(offset - tail))
    return h.hexdigest()[:32]


def input_identity(path: str, offset: int) -> dict[str, Any]:
    """What identifies a file input up to ``offset``: its path, size and a hash of its first bytes
    and of the bytes just before ``offset`` (cheap at every checkpoint, whatever the file's size)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return {"path": os.path.abspath(path), "size": size, "offset": offset,
                "sample": _sample_hash(f, offset)}


def where(spec: str | None) -> str | None:
    """An output as a checkpoint records it: files by absolute resolved path, others as written."""
    if spec is None or spec == "-" or spec.startswith("kafka://"):
        return spec
    return os.path.realpath(spec)


_OPTION = {"output": "-o", "late": "--late-output", "errors": "--errors"}


def verify_resume(cp: Checkpoint, path: str, input_path: str | None, outputs: dict[str, str | None]) -> None:
    """Refuse (``CheckpointError`` with the reason) a resume that would silently miss matches.

    ``input_path``: the run's file input (None for Kafka); ``outputs``: role -> spec of this run.
    """
    for role, option in _OPTION.items():
        was, now = cp.paths.get(role), where(outputs.get(role))
        if was != now:
            raise CheckpointError(
                f"checkpoint {path} was written with {option} {was or '(none)'}, this run has "
                f"{option} {outputs.get(role) or '(none)'}: resume with the same outputs, or delete "
                "the checkpoint to start over")
    for role, size in cp.sizes.items():
        spec = outputs.get(role)
        if spec is None:
            continue
        try:
            now_size: int | None = os.stat(spec).st_size
        except OSError:
            now_size = None
        if now_size is None or now_size < size:
            state = "is gone" if now_size is None else f"holds {now_size} bytes"
            raise CheckpointError(
                f"{_OPTION.get(role, role)} {spec} {state} but held {size} bytes at checkpoint {path}: "
                "resuming would miss matches; restore it or delete the checkpoint to start over")
    ident = cp.input
    if input_path is None or ident is None:
        return
    offset = ident["offset"]
    try:
        with open(input_path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            same = size >= offset and _sample_hash(f, offset) == ident["sample"]
    except OSError as e:
        raise CheckpointError(f"cannot read input {input_path}: {e.strerror or e}") from None
    if size < offset:
        raise CheckpointError(
            f"input {input_path} holds {size} bytes but checkpoint {path} was taken after byte {offset} "
            f"of {ident['path']}: it is shorter than the input that was read; delete the checkpoint "
            "to start over")
    if not same:
        raise CheckpointError(
            f"input {input_path} is not the input checkpoint {path} was taken on ({ident['path']}, "
            "its bytes differ before the checkpoint's position); delete the checkpoint to start over")
