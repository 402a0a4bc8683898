"""Per steady micro-batch: CPU s of the tree, the driver JVM, the Python workers, the JVM threads above 0.01 s
(``bench.spark_profile`` JSON, one run per file); medians per label (file name LABEL-ROUND.json).

    python sum.py FILE...
"""

import collections
import json
import statistics
import sys
from pathlib import Path


def row(d: dict) -> dict:
    n = d["steady_batches"]
    kinds = {k: sum(v) / n for k, v in d["steady_cpu_user_sys"].items()}
    threads = dict((k, sum(v) / n) for k, v in d.get("jvm_threads_user_sys", []))
    return {"tree": d["steady_cpu_total"] / n, "driver": kinds["driver JVM"], "exec": kinds["executor JVMs"],
            "workers": kinds["python workers"], "alloc": d.get("driver_jvm_alloc_mb_per_batch"),
            "reaped": sum(v for k, v in threads.items() if "reaped" in k),
            "gc": sum(v for k, v in threads.items() if "GC Thread" in k or "VM Thread" in k),
            "jit": sum(v for k, v in threads.items() if "Compiler" in k), "n": n}


def main() -> None:
    by: dict[str, list] = collections.defaultdict(list)
    for f in sys.argv[1:]:
        try:
            r = row(json.loads(Path(f).read_text()))
        except (ValueError, KeyError) as e:
            print(f, "no result:", e)
            continue
        by[Path(f).stem.rsplit("-", 1)[0]].append(r)
        print(Path(f).stem, " ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in r.items()))
    print()
    for label, rs in by.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0] if rs[0][k] is not None and k != "n"}
        rng = {k: (min(r[k] for r in rs), max(r[k] for r in rs)) for k in ("tree", "driver", "exec")}
        print(f"{label:10} runs {len(rs)} " + " ".join(f"{k} {v:.3f}" for k, v in med.items())
              + "  | ranges " + " ".join(f"{k} {a:.2f}-{b:.2f}" for k, (a, b) in rng.items()))


if __name__ == "__main__":
    main()
