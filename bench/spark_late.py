"""Issue 11's reproducer: does the Spark path lose records when Kafka partitions are skewed in time?

A 3-partition topic keyed by card, card-testing-like records whose partitions are skewed in event time within the
lateness (partition p runs ``p * skew`` seconds behind), ``detect(..., lateness=120)`` through ``cep spark`` with
``maxOffsetsPerTrigger`` 5000. The reference is ``cep run`` on the same records in time order. Prints both
output counts, the late counts of both, and Spark's ``numRowsDroppedByWatermark``: every record either shapes
the output or is counted late (on both paths), none vanishes.

    python -m bench.spark_late                 # 50 000 records, skew 40 s, lateness 120 s
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATTERN = str(ROOT / "patterns" / "card_testing.pattern")


def skewed_records(n: int, cards: int, parts: int, skew: int, seed: int = 11) -> list[list[dict]]:
    """Per partition (card -> partition by hash), records in time order, partition p ``p * skew`` s behind."""
    rnd = random.Random(seed)
    out: list[list[dict]] = [[] for _ in range(parts)]
    t = 1_700_000_000
    for _ in range(n):
        t += rnd.randint(0, 2)
        card = f"c{rnd.randrange(cards)}"
        amt = rnd.choice([rnd.uniform(1, 99), rnd.uniform(1, 99), rnd.uniform(100, 900)])
        p = sum(card.encode()) % parts
        out[p].append({"type": "Txn", "ts": t - p * skew, "card": card, "amount": round(amt, 2)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.spark_late", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=50_000)
    ap.add_argument("--cards", type=int, default=500)
    ap.add_argument("--skew", type=int, default=40)
    ap.add_argument("--lateness", type=int, default=120)
    ap.add_argument("--per-trigger", type=int, default=5000)
    args = ap.parse_args(argv)

    from cep.connectors.broker import KafkaBroker
    from cep.connectors.spark_cli import Progress, build_parser, start_query
    from cep.connectors.spark_session import make_session
    from kafka import KafkaProducer

    parts = skewed_records(args.events, args.cards, 3, args.skew)
    with tempfile.TemporaryDirectory(prefix="cep-spark-late-") as tmp:
        work = Path(tmp)
        inp = work / "events.jsonl"
        inp.write_text("".join(json.dumps(e) + "\n" for e in sorted((e for p in parts for e in p),
                                                                      key=lambda e: e["ts"])))
        r = subprocess.run([sys.executable, "-m", "cep.cli", "run", PATTERN, "-i", str(inp), "-o",
                            str(work / "ref.out"), "--lateness", str(args.lateness)], capture_output=True, text=True,
                           check=True, cwd=ROOT)
        ref = sum(1 for _ in open(work / "ref.out"))
        ref_late = int(re.search(r"\((\d+) late", r.stderr).group(1))
        broker = KafkaBroker(work / "broker", partitions=3).start()
        try:
            topic = broker.create_topic("late-in")
            prod = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=20)
            for p, evs in enumerate(parts):
                for e in evs:
                    prod.send(topic, partition=p, key=e["card"].encode(), value=json.dumps(e).encode())
            prod.flush()
            prod.close()
            spark = make_session("local[2]", 2, kafka=True, app="cep-bench-late")
            a = build_parser().parse_args([PATTERN, "--lateness", str(args.lateness), "-i",
                                           f"kafka://{broker.bootstrap}/{topic}?from=earliest&until=end",
                                           "-o", str(work / "out"), "--checkpoint", str(work / "ck"),
                                           "--max-per-batch", str(args.per_trigger)])
            t0 = time.perf_counter()
            q = start_query(spark, a)
            q.awaitTermination()
            el = time.perf_counter() - t0
            progress = Progress()
            progress.collect(q)
            outs = sum(1 for f in (work / "out").glob("part-*") for line in open(f) if line.strip())
            spark.stop()
        finally:
            broker.stop()
    print(json.dumps({"records": args.events, "skew_s": args.skew, "lateness_s": args.lateness,
                      "cep_run_outputs": ref, "cep_run_late": ref_late, "spark_outputs": outs,
                      "spark_late_records": progress.metric("late_records"),
                      "spark_dropped_by_watermark": progress.dropped_by_spark(),
                      "spark_batches": len(progress.batches), "spark_seconds": round(el, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
