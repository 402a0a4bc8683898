"""has_long_digit_run_numpy over a whole 10^5-record file at once (the base's way) against 256 KiB windows:
CPU ms and minor page faults per call, after malloc_trim (a worker's heap between batches) and warm.

    PYTHONPATH=. python bench/results/spark_1207p/digit_windows.py
"""
import ctypes
import json
import resource
import time

from bench.spark_bench import make_events
from cep.longints import has_long_digit_run_numpy

libc = ctypes.CDLL("libc.so.6")
raw = "".join(json.dumps(e) + "\n" for e in make_events(100000)).encode()
has_long_digit_run_numpy(raw)


def faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


for name, chunk in (("whole file", len(raw)), ("256 KiB windows", 1 << 18)):
    for trim in (False, True):
        ts, fs = [], []
        for _ in range(7):
            if trim:
                libc.malloc_trim(0)
            f0, t = faults(), time.process_time()
            has_long_digit_run_numpy(raw, chunk)
            ts.append(time.process_time() - t)
            fs.append(faults() - f0)
        print(f"{name:16s} {'trimmed' if trim else 'warm':8s} median {1e3 * sorted(ts)[3]:.2f} ms, faults {sorted(fs)[3]}")
