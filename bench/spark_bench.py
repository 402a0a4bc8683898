"""Throughput of the scale-out paths: Spark (local cores x state partitions) and ``cep run`` on Kafka.

Why a separate benchmark: these paths pay for a JVM, a broker and micro-batches, so their figures answer "when is
Spark worth it" rather than "how fast is the engine". Each Spark configuration runs in a fresh process (the number
of local cores is fixed per session): a small warm-up query first (the first micro-batch of a session costs 10-20 s
of JIT and Python worker start), then the timed query over the whole input with ``availableNow``. Events/s =
input events / wall time of the timed query (startup excluded). The CLI Kafka figure is the wall time of one
``cep run -i kafka://...&until=end -o kafka://...`` process (Python start included), next to the same run on files.

    python -m bench.spark_bench                       # default: 60 000 events, local[1]/local[2] x 2/8 partitions
    python -m bench.spark_bench --events 20000 --cores 2 --partitions 4
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATTERN = str(ROOT / "patterns" / "card_testing.pattern")


def make_events(n: int, keys: int = 1000, seed: int = 1) -> list[dict]:
    rnd = random.Random(seed)
    t = 1_700_000_000
    out = []
    for _ in range(n):
        t += rnd.randint(0, 2)
        amt = rnd.choice([rnd.uniform(1, 99), rnd.uniform(1, 99), rnd.uniform(100, 900)])
        out.append({"type": "Txn", "ts": t, "card": f"c{rnd.randrange(keys)}", "amount": round(amt, 2)})
    return out


def write_dir(d: Path, events: list[dict], files: int) -> None:
    d.mkdir(parents=True, exist_ok=True)
    size = -(-len(events) // files)
    for i in range(files):
        (d / f"part{i:03d}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events[i * size:(i + 1) * size]))


def spark_child(args: argparse.Namespace) -> None:
    """One Spark configuration (runs in its own process): warm up, then time the full query."""
    from connectors.spark import make_session
    from connectors.spark_cli import build_parser, start_query

    work = Path(args.work)
    spark = make_session(f"local[{args.cores}]", args.partitions, kafka=False, app="cep-bench")

    def run(inp: Path, tag: str) -> tuple[float, int, int]:
        extra = ["--max-per-batch", str(args.files_per_batch)] if args.files_per_batch else []
        a = build_parser().parse_args([PATTERN, "-i", str(inp), "-o", str(work / f"out-{tag}"),
                                       "--checkpoint", str(work / f"ck-{tag}"), "--available-now", *extra])
        t0 = time.perf_counter()
        q = start_query(spark, a)
        q.awaitTermination()
        el = time.perf_counter() - t0
        if q.exception() is not None:
            raise SystemExit(f"query failed: {q.exception()}")
        outs = sum(1 for f in (work / f"out-{tag}").glob("part-*") for _ in open(f))
        return el, len(q.recentProgress), outs

    run(work / "warm", f"warm-{args.cores}-{args.partitions}")
    el, batches, outs = run(work / "in", f"main-{args.cores}-{args.partitions}")
    print(json.dumps({"path": "spark files->files", "cores": args.cores, "partitions": args.partitions,
                      "events": args.events, "batches": batches, "outputs": outs, "seconds": round(el, 2),
                      "events_per_s": round(args.events / el)}), flush=True)
    spark.stop()


def cli_kafka(events: list[dict], work: Path) -> list[dict]:
    from kafka import KafkaProducer

    from connectors.broker import KafkaBroker

    rows = []
    inp = work / "cli-input.jsonl"
    inp.write_text("".join(json.dumps(e) + "\n" for e in events))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "cep.cli", "run", PATTERN, "-i", str(inp), "-o", str(work / "cli.out"),
                    "-q"], check=True, cwd=ROOT)
    el = time.perf_counter() - t0
    rows.append({"path": "cep run file->file", "events": len(events), "seconds": round(el, 2),
                 "events_per_s": round(len(events) / el)})
    with KafkaBroker(work / "broker", partitions=3) as b:
        tin, tout = b.create_topic("bench-in"), b.create_topic("bench-out")
        p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=20, batch_size=256 * 1024)
        t0 = time.perf_counter()
        for e in events:
            p.send(tin, key=e["card"].encode(), value=json.dumps(e).encode())
        p.flush()
        p.close()
        prod = time.perf_counter() - t0
        rows.append({"path": "kafka-python produce (setup)", "events": len(events), "seconds": round(prod, 2),
                     "events_per_s": round(len(events) / prod)})
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cep.cli", "run", PATTERN, "-i",
                        f"kafka://{b.bootstrap}/{tin}?from=earliest&until=end", "-o",
                        f"kafka://{b.bootstrap}/{tout}", "-q"], check=True, cwd=ROOT)
        el = time.perf_counter() - t0
        rows.append({"path": "cep run kafka->kafka", "events": len(events), "seconds": round(el, 2),
                     "events_per_s": round(len(events) / el)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.spark_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--files", type=int, default=12, help="input files (one micro-batch reads all of them)")
    ap.add_argument("--files-per-batch", type=int, default=0, help="files per micro-batch (0: all in one)")
    ap.add_argument("--cores", default="1,2", help="comma list of local cores")
    ap.add_argument("--partitions", default="2,8", help="comma list of state partitions")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--no-kafka", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        args.cores, args.partitions = int(args.cores), int(args.partitions)
        spark_child(args)
        return 0

    events = make_events(args.events, args.keys)
    results = []
    with tempfile.TemporaryDirectory(prefix="cep-spark-bench-") as tmp:
        work = Path(tmp)
        if not args.no_spark:
            write_dir(work / "in", events, args.files)
            write_dir(work / "warm", make_events(2000, args.keys, seed=2), 2)
            env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
            for c in args.cores.split(","):
                for p in args.partitions.split(","):
                    r = subprocess.run([sys.executable, "-m", "bench.spark_bench", "--child", "--cores", c,
                                        "--partitions", p, "--events", str(args.events), "--work", str(work),
                                        "--files-per-batch", str(args.files_per_batch)],
                                       cwd=ROOT, env=env, capture_output=True, text=True)
                    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
                    if r.returncode != 0 or not lines:
                        print(r.stderr[-3000:], file=sys.stderr)
                        return 1
                    results.append(json.loads(lines[-1]))
                    print(lines[-1], flush=True)
        if not args.no_kafka:
            for row in cli_kafka(events, work):
                results.append(row)
                print(json.dumps(row), flush=True)
    print("\n| path | local cores | state partitions | events | seconds | events/s |\n|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['path']} | {r.get('cores', '-')} | {r.get('partitions', '-')} | {r['events']} | "
              f"{r['seconds']} | {r['events_per_s']:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
