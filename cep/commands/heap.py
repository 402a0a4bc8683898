"""The process's memory settings for ``cep run``: glibc's heap and the garbage collector.

Keep glibc from handing heap memory back to the kernel between records (``tune_heap``).

Why: an output-heavy run allocates and frees match tuples, dicts and output
lines in waves.  glibc's default trims the top of the heap whenever more than
its (adaptive) trim threshold is free and serves large blocks with mmap, so
every wave gives pages back and faults them in again: measured on 1.34
million matches, about a third of the run was system time (1.4 million minor
page faults).  Raising the trim threshold and fixing the mmap threshold once,
at the start of the run, keeps those pages in the process; the peak RSS does
not change, because the pages are reused rather than returned and retaken
(bench/results/heap_tuning.md, ``python -m bench.heap_tuning``).

It is process-wide, so only the ``cep run`` command (which owns its process)
calls it; the engine as a library leaves the allocator alone.  Elsewhere than
glibc (macOS, musl, Windows) it does nothing.  ``CEP_HEAP_TUNING=0`` in the
environment switches it off (for measurements).

The garbage collector (``stream_gc``, around the record loop only): CPython starts a
collection of the youngest generation every 700 net allocations of container objects, and
every tenth of those also scans the middle generation.  A batch of input records on an
output-heavy stream holds tens of thousands of composite events (an ``Output`` tuple each)
until they are written, so a batch triggered dozens of collections that free nothing
(composite events and engine state are acyclic: reference counting frees them), and the
full collections they lead to walked every object made at start-up (parser tables,
compiled patterns, imported modules).  So, while the loop runs, what exists when it starts
is frozen (``gc.freeze``: never scanned again) and the youngest generation's threshold is
``GEN0`` allocations: about one collection per batch of output-heavy input, not one per 700
composite events.  Memory stays bounded: the collector still runs, and only cyclic garbage
(which the engine does not make per event) waits longer to be found, at most ``GEN0``
objects' worth.
"""

from __future__ import annotations

import ctypes
import gc
import os
import platform
import sys
from collections.abc import Iterator
from contextlib import contextmanager

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3

TRIM_THRESHOLD = 512 * 1024 * 1024  # free memory at the heap top kept before trimming
MMAP_THRESHOLD = 32 * 1024 * 1024  # blocks below this come from the heap (glibc's dynamic maximum)
GEN0 = 50_000  # the youngest generation's threshold while the record loop runs


def tune_heap() -> bool:
    """Set glibc's trim and mmap thresholds for this process; True when they were set."""
    if os.environ.get("CEP_HEAP_TUNING", "1") == "0":
        return False
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success; the mmap threshold first, so no block is ever mmapped
    # under the fixed (no longer adaptive) threshold glibc keeps once either is set
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


@contextmanager
def setup_gc() -> Iterator[None]:
    """No automatic collection while start-up runs (issue 15): imports, parsing, planning and
    the generated code make some 10^5 objects that the run keeps, so the collections their
    allocations trigger (dozens in a short run, a tenth of its instructions) find nothing to free.
    What start-up made is then frozen (``gc.freeze``) as ``stream_gc`` would freeze it, so the
    first collection after it does not walk it either; ``stream_gc`` unfreezes it at the end of
    the run.  The collector is enabled again on exit if it was (tests run many in one process)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if was:
            gc.enable()


@contextmanager
def stream_gc() -> Iterator[None]:
    """Freeze what start-up made and raise the youngest generation's threshold to ``GEN0``;
    both undone on exit (tests run many loops in one process)."""
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(GEN0, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
