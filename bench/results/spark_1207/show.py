"""One line per spark_profile JSON: driver JVM allocation (MB) and CPU s per steady micro-batch by kind."""
import json
import sys

for f in sorted(sys.argv[1:]):
    try:
        d = json.load(open(f))
    except ValueError:
        print(f, "no result")
        continue
    n = d["steady_batches"]
    cpu = {k.split()[-1] if k != "python workers" else "workers": round(sum(v) / n, 3)
           for k, v in d["steady_cpu_user_sys"].items() if sum(v)}
    print(f, "alloc MB", d.get("driver_jvm_alloc_mb_per_batch"), "tree", round(d["steady_cpu_total"] / n, 3), cpu)
