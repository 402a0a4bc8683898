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

The garbage collector around the record loop (``stream_gc``, ``GEN0``): ``cep.gc_policy``
(shared with the Spark connector's Python workers).
"""

from __future__ import annotations

import ctypes
import gc
import os
import platform
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from cep.gc_policy import GEN0, stream_gc  # noqa: F401 - (their home: cep.gc_policy; imported from here too)

M_TRIM_THRESHOLD = -1  # glibc <malloc.h>
M_MMAP_THRESHOLD = -3

TRIM_THRESHOLD = 512 * 1024 * 1024  # free memory at the heap top kept before trimming
MMAP_THRESHOLD = 32 * 1024 * 1024  # blocks below this come from the heap (glibc's dynamic maximum)


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
