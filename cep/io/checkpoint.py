"""Checkpoints of a ``cep run``: source position, engine state and output sizes, saved atomically.

Why: a stopped or crashed run restarts from the last checkpoint with no
composite event lost (issue 5).  The file is written to a temporary name,
fsynced and renamed over the old one, so a crash leaves either the old or the
new checkpoint, never half of one.  Layout: one JSON header line (format
version, a fingerprint of the patterns and options, the source position, the
bytes each output file held, the run's counters, the length of the state)
followed by the engine state bytes from ``Engine.dumps()``.

Output files are flushed and fsynced before the checkpoint that names their
sizes is written; on resume the run truncates them back to those sizes, so the
lines written after the checkpoint are written again exactly once (a stream
output such as stdout or Kafka gets them again, with the same ids).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

import orjson

FORMAT_VERSION = 1
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
        "state_len": len(cp.state),
    }
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(orjson.dumps(header) + b"\n")
        f.write(cp.state)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
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
    )
