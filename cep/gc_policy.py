"""The garbage collector's settings around a record loop: ``stream_gc`` (``cep run``'s loop,
``cep run --workers``' workers, and the Spark connector's route and state steps).

CPython starts a collection of the youngest generation every 700 net allocations of container
objects, and every tenth of those also scans the middle generation. A batch of input records on
an output-heavy stream holds tens of thousands of composite events (an ``Output`` tuple each)
until they are written, so a batch triggered dozens of collections that free nothing (composite
events and engine state are acyclic: reference counting frees them), and the full collections
they lead to walked every object made at start-up (parser tables, compiled patterns, imported
modules). So, while the loop runs, what exists when it starts is frozen (``gc.freeze``: never
scanned again) and the youngest generation's threshold is ``GEN0`` allocations: about one
collection per batch of output-heavy input, not one per 700 composite events. Memory stays
bounded: the collector still runs, and only cyclic garbage (which the engine does not make per
event) waits longer to be found, at most ``GEN0`` objects' worth.

In a Spark Python worker (reused by other tasks) the same holds for a micro-batch's group: the
settings are undone when it ends.  A base utility with no import from the rest of cep, so the
connectors and the commands share it.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

GEN0 = 50_000  # the youngest generation's threshold while the record loop runs


@contextmanager
def stream_gc() -> Iterator[None]:
    """Freeze what exists and raise the youngest generation's threshold to ``GEN0``; both undone
    on exit (tests run many loops in one process; a Spark worker runs other tasks after)."""
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(GEN0, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
