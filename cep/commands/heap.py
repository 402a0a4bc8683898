"""Keep glibc from handing heap memory back to the kernel between records (``cep run``).

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
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys

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
