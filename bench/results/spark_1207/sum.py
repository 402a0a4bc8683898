"""Per steady micro-batch: CPU s of the tree and per kind of process, the JVM threads above 0.02 s, the
executors' log lines (``bench.spark_profile`` JSON, one run per file).

    python sum.py FILE...
"""

import json
import sys


def main() -> None:
    for f in sorted(sys.argv[1:]):
        try:
            d = json.loads(open(f).read())
        except ValueError as e:
            print(f, "no result:", e)
            continue
        n = d["steady_batches"]
        kinds = {k: round(sum(v) / n, 3) for k, v in d["steady_cpu_user_sys"].items() if sum(v)}
        threads = {k: round(sum(v) / n, 3) for k, v in d.get("jvm_threads_user_sys", []) if sum(v) / n > 0.02}
        print(f, n, "tree", round(d["steady_cpu_total"] / n, 3), kinds, "log lines", d.get("executor_log_lines"))
        print("   ", threads)


if __name__ == "__main__":
    main()
