"""Per label of ``spark_profile`` JSON files named ``...-kg<label>-<round>.json``: the JVMs' CPU s (driver and
executors, user + system) per steady micro-batch, the tree's, and the Python workers' median, by round.

    python bench/results/spark_1207d/jvmsum.py 'DIR/*.json'
"""

import glob
import json
import re
import statistics
import sys

rows: dict[str, dict[int, tuple[float, float, float]]] = {}
for f in sorted(glob.glob(sys.argv[1])):
    d = json.load(open(f))
    n = d["steady_batches"]
    m = re.search(r"-kg(\w+)-(\d+)\.json", f)
    c = d["steady_cpu_user_sys"]
    jvm = (sum(c["driver JVM"]) + sum(c["executor JVMs"])) / n
    rows.setdefault(m.group(1), {})[int(m.group(2))] = (round(jvm, 3), round(d["steady_cpu_total"] / n, 3),
                                                          round(sum(c["python workers"]) / n, 3))
for label, by_round in sorted(rows.items()):
    r = [by_round[k] for k in sorted(by_round)]
    print(label, "JVMs", [v[0] for v in r], "median", round(statistics.median(v[0] for v in r), 3),
          "| tree", [v[1] for v in r], "median", round(statistics.median(v[1] for v in r), 3),
          "| workers median", round(statistics.median(v[2] for v in r), 3))
