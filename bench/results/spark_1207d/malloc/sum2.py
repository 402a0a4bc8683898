"""Per label of ``spark_profile`` JSON files named ``...-kg<label>-<round>.json``: the tree's CPU s per steady
micro-batch, and the executors', Python workers' and driver JVM's user s, system s and minor faults per micro-batch.

    python bench/results/spark_1207d/malloc/sum2.py 'DIR/*.json'
"""

import glob
import json
import re
import statistics
import sys

rows: dict[str, list] = {}
for f in sorted(glob.glob(sys.argv[1])):
    d = json.load(open(f))
    n = d["steady_batches"]
    m = re.search(r"-(kg\w+)-(\d+)\.json", f)
    per_kind = {k: (round(v[0] / n, 3), round(v[1] / n, 3), round(d["steady_minor_faults"][k] / n))
                for k, v in d["steady_cpu_user_sys"].items()}
    rows.setdefault(m.group(1), []).append((round(d["steady_cpu_total"] / n, 3), per_kind))
for label, runs in sorted(rows.items()):
    print(label, "tree", [r[0] for r in runs], "median", statistics.median(r[0] for r in runs))
    for kind in ("executor JVMs", "python workers", "driver JVM"):
        print("   ", kind, "user/sys/faults", [r[1][kind] for r in runs])
