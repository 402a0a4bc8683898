"""Per steady micro-batch CPU of the A/B runs: python ab.py ab-*.json"""
import json
import sys

rows = []
for f in [a for a in sys.argv[1:] if open(a).read().strip()]:
    d = json.load(open(f))
    n = d["steady_batches"]
    c = {k: sum(v) / n for k, v in d["steady_cpu_user_sys"].items()}
    jvm = c["driver JVM"] + c["executor JVMs"] + c["cluster master+worker JVMs"]
    load = [x.split(",")[0].strip() for x in open(f[:-5] + ".load").read().split("load average:")[1:]]
    daemon = "pyspark" if d["conf"] else "cep"
    rows.append((d["master"], daemon, f, c["python workers"], jvm, d["steady_cpu_total"] / n, load))
    print(f"| {d['master']} | {daemon} | {f.split('-')[-1][:-5]} | {c['python workers']:.2f} | {jvm:.2f} | "
          f"{d['steady_cpu_total'] / n:.2f} | {' -> '.join(load)} |")
for m in dict.fromkeys(r[0] for r in rows):
    for dm in ("cep", "pyspark"):
        rs = [r for r in rows if r[0] == m and r[1] == dm]
        if rs:
            print(m, dm, "mean workers %.2f JVMs %.2f tree %.2f (n=%d)" % tuple(
                [sum(r[i] for r in rs) / len(rs) for i in (3, 4, 5)] + [len(rs)]))
