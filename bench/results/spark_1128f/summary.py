"""CPU s per steady micro-batch by kind of process (and JVM thread) from bench.spark_profile's JSON lines."""

import json
import sys

for path in sys.argv[1:]:
    for line in open(path):
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        n = d["steady_batches"]
        per = {k: round(sum(v) / n, 3) for k, v in d["steady_cpu_user_sys"].items() if sum(v)}
        jvms = sum(v for k, v in per.items() if "JVM" in k)
        print(f"{path}: {d['master']} {d['conf']} {n} batches of {d['batch_events']}: total "
              f"{d['steady_cpu_total'] / n:.3f}, JVMs {jvms:.3f}, {per}")
        print("    JVM threads:", [(k, round(sum(v) / n, 3)) for k, v in d.get("jvm_threads_user_sys", [])][:10])
