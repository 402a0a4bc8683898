"""The Python workers' CPU by phase per steady Spark micro-batch: process-time marks, not samples (issue 11).

Why: ``bench.spark_profile`` says how much CPU the Python workers take per micro-batch, and its ``--py-spy``
which functions are on the stack when they run; neither sees CPU a worker spends in long C calls or between
tasks (py-spy counts wall-active samples): PySpark's full ``gc.collect()`` after every task, ~0.28 CPU s per
micro-batch, went unseen that way (bench/results/spark.md, 2026-12-07b). This runs ``bench.spark_profile`` with
``bench/worker_site`` on ``PYTHONPATH`` (the local masters' Python workers inherit it; its ``sitecustomize`` marks
each worker's tasks, see there) and prints, per steady micro-batch (the main query's batches after the first,
by Spark's batch id of each task), each mark's exclusive CPU seconds and minor page faults (the innermost open mark's: ``main`` alone
is PySpark's own code in a task, ``between tasks`` what a worker does after a task and before the next,
``udf_handler``/``udf_route_batches`` cep's UDF bodies outside the functions marked inside them).

    python -m bench.worker_marks -- --master 'local[1]' --events 500000 --files 5 --key-groups 16
    python -m bench.worker_marks --logs /tmp/me/wl -- --master 'local-cluster[2,1,1024]' --events 500000 --files 5 --key-groups 16
    python -m bench.worker_marks --analyse /tmp/me/wl          # the logs of an earlier run again

The last line is spark_profile's JSON (its ``python workers`` CPU includes the marks' own cost: ~1-2 %).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SITE = Path(__file__).resolve().parent / "worker_site"
GAP = "between tasks"
ROUTE_UDF = "udf_route_batches"  # the sitecustomize's mark of the route step's UDF


def tasks_of(log: Path) -> list[tuple[tuple[str, str], collections.Counter, collections.Counter]]:
    """One worker's tasks in order: ((query id, batch id), exclusive CPU s per mark, exclusive minor page
    faults per mark), each task with the gap after it (up to the next task's start; the marks' own writing left
    out)."""
    out: list[tuple[tuple[str, str], collections.Counter, collections.Counter]] = []
    stack: list[str] = []
    prev = None
    for line in log.read_text().splitlines():
        t_s, f_s, tag = line.split(" ", 2)
        t, f = float(t_s), int(f_s)
        kind, name = tag[0], tag[1:]
        if kind == "=":
            parts = name.split()
            if out and parts[0] == "task":
                out[-1] = ((parts[1], parts[2]), *out[-1][1:])
            continue
        if prev is not None and out:
            where = stack[-1] if stack else GAP
            if where != "marks.write":
                out[-1][1][where] += t - prev[0]
                out[-1][2][where] += f - prev[1]
        prev = (t, f)
        if kind in "+>":
            if name == "main":
                out.append((("-", "-"), collections.Counter(), collections.Counter()))
                stack = []
            stack.append(name)
        else:
            while stack and stack[-1] != name:
                stack.pop()
            if stack:
                stack.pop()
    return out


def per_batch(logs: list[Path]) -> tuple[dict[str, dict[str, tuple[float, float]]], int]:
    """Exclusive CPU s per mark per steady micro-batch, apart for route tasks (those that ran cep's route UDF)
    and the other tasks (the state step's), and the number of steady batches: the query with the most batches
    that routed records (a no-data batch, for timeouts, is left out), its batches after the first."""
    tasks = [task for log in logs for task in tasks_of(log)]
    routed: dict[str, set[int]] = collections.defaultdict(set)
    for (q, b), c, _f in tasks:
        if q != "-" and b != "-" and ROUTE_UDF in c:
            routed[q].add(int(b))
    if not routed:
        raise SystemExit("no route task of a streaming query in the logs")
    query = max(routed, key=lambda q: len(routed[q]))
    steady = sorted(routed[query])[1:]
    n = max(len(steady), 1)
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for kind in ("route tasks", "state tasks"):
        total: collections.Counter = collections.Counter()
        faults: collections.Counter = collections.Counter()
        n_tasks = 0
        for (q, b), c, f in tasks:
            if q == query and b != "-" and int(b) in steady and (ROUTE_UDF in c) == (kind == "route tasks"):
                total.update(c)
                faults.update(f)
                n_tasks += 1
        out[f"{kind} ({n_tasks / n:.1f} per batch)"] = {k: (v / n, faults[k] / n) for k, v in total.most_common()}
    return out, len(steady)


def report(logs: list[Path]) -> None:
    """Print ``per_batch``'s tables: each mark's exclusive CPU s per steady micro-batch."""
    by_kind, n = per_batch(logs)
    every = sum(v for m in by_kind.values() for v, _f in m.values())
    faults = sum(f for m in by_kind.values() for _v, f in m.values())
    print(f"steady micro-batches {n}, workers {len(logs)}, worker CPU s per batch {every:.3f}, "
          f"minor page faults per batch {faults:.0f}")
    for kind, by_mark in by_kind.items():
        print(f"{kind}: {sum(v for v, _f in by_mark.values()):.3f} CPU s, {sum(f for _v, f in by_mark.values()):.0f} faults")
        for k, (v, f) in by_mark.items():
            if v >= 0.0005:
                print(f"{v:8.4f} {v / every * 100:5.1f}% {f:7.0f} {k}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.worker_marks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--logs", help="directory for the workers' logs (kept; default: a temporary one)")
    ap.add_argument("--analyse", help="only analyse the logs in this directory")
    ap.add_argument("profile_args", nargs=argparse.REMAINDER, help="-- then bench.spark_profile's arguments")
    args = ap.parse_args(argv)
    if args.analyse:
        report(sorted(Path(args.analyse).glob("wlog-*.txt")))
        return 0
    rest = args.profile_args[1:] if args.profile_args[:1] == ["--"] else args.profile_args
    with tempfile.TemporaryDirectory(prefix="cep-wmarks-") as tmp:
        logs = Path(args.logs or tmp)
        logs.mkdir(parents=True, exist_ok=True)
        for old in logs.glob("wlog-*.txt"):
            old.unlink()
        env = {**os.environ, "CEP_WMARKS": str(logs.resolve()),
               "PYTHONPATH": os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH")) if p)}
        r = subprocess.run([sys.executable, "-m", "bench.spark_profile", *rest], env=env,
                           cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stderr[-6000:], file=sys.stderr)
            return 1
        report(sorted(logs.glob("wlog-*.txt")))
        profile = json.loads(r.stdout.splitlines()[-1])
        print(json.dumps(profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
