"""CPU s per micro-batch by kind of process, in blocks of ten micro-batches, of ``bench.spark_profile`` JSON files
(the 60-micro-batch runs with and without the executors' heap pre-touched).

    python bench/results/spark_1207e/long_runs.py bench/results/spark_1207e/pretouch/profiles/long_*.json
"""

import json
import sys

KINDS = ("driver JVM", "executor JVMs", "python workers")

for path in sys.argv[1:]:
    d = json.load(open(path))
    batches = d["batch_cpu"]
    n = d["steady_batches"]
    print(path, "| steady tree", round(d["steady_cpu_total"] / n, 3), "CPU s per micro-batch, executor faults",
          d["steady_minor_faults"]["executor JVMs"] // n, "per micro-batch")
    for lo in range(0, len(batches), 10):
        part = batches[lo:lo + 10]
        by_kind = {k: round(sum(b[k] for b in part) / len(part), 3) for k in KINDS}
        print(f"  micro-batches {lo + 2}-{lo + 1 + len(part)}", by_kind,
              "tree", round(sum(sum(b.values()) for b in part) / len(part), 3))
