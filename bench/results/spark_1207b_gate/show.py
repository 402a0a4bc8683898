"""The daemon-gate A/B table (bench/results/spark.md, 2026-12-07b): per steady micro-batch, the process tree's CPU,
the Python workers', the JVMs', the workers' CPU between tasks (the daemon's after-task collection) and
``Engine.push_batch``'s, per run (MASTER-SIDE-PAIR.txt here; l1 = two first local[1] pairs run by hand).

    python bench/results/spark_1207b_gate/show.py
"""
import collections
import json
import statistics
from pathlib import Path

rows = collections.defaultdict(list)
for f in sorted(Path(__file__).parent.glob("*-*-*.txt")):
    master, side, pair = f.stem.rsplit("-", 2)
    lines = f.read_text().splitlines()
    d = json.loads(lines[-1])
    n, cpu = d["steady_batches"], d["steady_cpu_user_sys"]
    workers = sum(cpu["python workers"]) / n
    jvms = sum(sum(cpu[k]) for k in ("driver JVM", "executor JVMs", "cluster master+worker JVMs")) / n
    between = sum(float(x.split()[0]) for x in lines if "between tasks" in x)
    push = sum(float(x.split()[0]) for x in lines if "Engine.push_batch" in x)
    rows[(master, side)].append((pair, d["steady_cpu_total"] / n, workers, jvms, between, push))
print("| master | side | pair: tree / workers / JVMs / between tasks / push_batch (CPU s per batch) | median tree |")
print("|---|---|---|---|")
for (master, side), runs in sorted(rows.items()):
    cells = "; ".join(f"{p}: {t:.2f} / {w:.2f} / {j:.2f} / {b:.3f} / {pb:.2f}" for p, t, w, j, b, pb in runs)
    print(f"| {master} | {side} | {cells} | {statistics.median(r[1] for r in runs):.2f} |")
