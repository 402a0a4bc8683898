"""The A/B table of bench/results/spark.md (2026-12-07b, soak helper): per steady micro-batch CPU of the Python
workers, the JVMs and the whole tree, cep's daemon (PREFIX-MASTER-cep-I.json) against PySpark's
(PREFIX-MASTER-pyspark-I.json)

    python ab.py [PREFIX PAIRS]        (from this directory; ab 5: 500k/5 files, ab10 3: 1M/10 files)
"""
import json
import statistics
import sys

prefix, count = (sys.argv[1], int(sys.argv[2])) if len(sys.argv) > 2 else ("ab", 5)


def figures(f: str) -> tuple[float, float, float, list[str]]:
    d = json.load(open(f))
    n = d["steady_batches"]
    c = {k: sum(v) / n for k, v in d["steady_cpu_user_sys"].items()}
    jvm = c["driver JVM"] + c["executor JVMs"] + c["cluster master+worker JVMs"]
    load = [x.split(",")[0].strip() for x in open(f[:-5] + ".load").read().split("load average:")[1:]]
    return c["python workers"], jvm, d["steady_cpu_total"] / n, load


for master, tag in (("local[2]", "local2"), ("local-cluster[2,1,1024]", "localcluster2")):
    pairs = [(figures(f"{prefix}-{tag}-cep-{i}.json"), figures(f"{prefix}-{tag}-pyspark-{i}.json"))
             for i in range(1, count + 1)]
    for i, (a, b) in enumerate(pairs, 1):
        first, second = (a, b) if i % 2 else (b, a)  # odd pairs ran cep's daemon first
        print(f"| {master} | {i} | {a[0]:.2f} / {a[1]:.2f} / {a[2]:.2f} | {b[0]:.2f} / {b[1]:.2f} / {b[2]:.2f} | "
              f"{a[2] / b[2]:.3f} | {first[3][0]} -> {second[3][1]} |")
    mean = [[statistics.mean(p[k][j] for p in pairs) for j in range(3)] for k in (0, 1)]
    print(f"{master}: means cep {mean[0]}, pyspark {mean[1]}; median tree ratio "
          f"{statistics.median(a[2] / b[2] for a, b in pairs):.3f}")
