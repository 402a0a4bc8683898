"""Compact view of spark_profile JSONs: python show.py A.json [B.json ...] [--every N]"""
import json
import sys

every = 5
files = [a for a in sys.argv[1:] if a.endswith(".json")]
if "--every" in sys.argv:
    every = int(sys.argv[sys.argv.index("--every") + 1])
for f in files:
    d = json.load(open(f))
    n = d["steady_batches"]
    cpu = {k: round(sum(v) / n, 3) for k, v in d["steady_cpu_user_sys"].items() if sum(v)}
    print(f"== {f}: {d['master']} conf={d['conf']} batch={d['batch_events']} steady={n} "
          f"tree/batch={d['steady_cpu_total'] / n:.3f} {cpu}")
    load = open(f[:-5] + ".load").read().split("load average:")
    print("   load", " -> ".join(x.split("\n")[0].strip() for x in load[1:]))
    mem = d["python_workers_memory_mb"]
    pids = sorted({p for m in mem for p in m}, key=lambda p: -max(m.get(p, [0])[0] for m in mem))
    for p in pids:
        rss = [m[p][0] if p in m else None for m in mem]
        print(f"   pid {p} RSS every {every}: {rss[::every]} last {rss[-1]}")
        print(f"      summary {d['python_workers_memory_summary'][p]}")
    for p, g in d.get("gc_log", {}).items():
        old = g["old_objects"]
        print(f"   gc {p}: old objects every {every}: {old[::every]} last {old[-1]}")
        print(f"      {({k: v for k, v in g.items() if k != 'old_objects'})}")
