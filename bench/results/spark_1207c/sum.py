"""Per pair and label: tree CPU s per steady micro-batch, and the medians by process kind.

    python bench/results/spark_1207c/sum.py [GLOB]      # default: *.json in the current directory (ab.sh's $OUT)
"""

import glob
import json
import re
import statistics
import sys

rows: dict[int, dict[str, tuple[float, dict[str, float]]]] = {}
for f in sorted(glob.glob(sys.argv[1] if len(sys.argv) > 1 else "*.json")):
    try:
        d = json.load(open(f))
    except ValueError:
        continue
    m = re.search(r"-(kg\w+)-(\d+)\.json", f)
    label, pair = m.group(1), int(m.group(2))
    n = d["steady_batches"]
    parts = {k: round(sum(v) / n, 3) for k, v in d["steady_cpu_user_sys"].items()}
    rows.setdefault(pair, {})[label] = (d["steady_cpu_total"] / n, parts)
labels = sorted({lab for r in rows.values() for lab in r})
for p in sorted(rows):
    print(p, {lab: round(rows[p][lab][0], 3) for lab in rows[p]})
for lab in labels:
    per = [rows[p][lab] for p in rows if lab in rows[p]]
    print(lab, "median", round(statistics.median(v for v, _ in per), 3), sorted(round(v, 3) for v, _ in per))
    for kind in per[0][1]:
        print("   ", kind, round(statistics.median(parts[kind] for _, parts in per), 3))
