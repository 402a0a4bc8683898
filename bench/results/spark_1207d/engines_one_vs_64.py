"""CPU s per 10^5 card-testing events: 64 bucket engines (the Spark path's layout, ``push_batch`` per bucket) against
one engine (``push_batch``) and one engine's fused records loop (``push_records``, ``cep run``'s path over a file).

All in lines mode with their own watermark; the micro-batches after the first of four, alternating the order each
round, ``process_time``. Why: whether the Spark path's engine work costs more than ``cep run``'s.

    PYTHONPATH=. python bench/results/spark_1207d/engines_one_vs_64.py ROUNDS
"""

import statistics
import sys
import time
import zlib

import orjson
from cep.connectors.spark_spec import pattern_spec

from bench.spark_bench import PATTERN, make_events
from cep.gc_policy import stream_gc
from cep.io.readers import make_decoder

N = 100_000
BUCKETS = 64
LINES = [orjson.dumps(e) for e in make_events(4 * N)]
SPEC = pattern_spec(PATTERN, lateness=120)
DECODE = make_decoder("type", "ts", "s", "op")
BATCHES = [[DECODE(str(lo + i), line) for i, line in enumerate(LINES[lo:lo + N])] for lo in range(0, 4 * N, N)]
RECORDS = [[orjson.loads(line) for line in LINES[lo:lo + N]] for lo in range(0, 4 * N, N)]
BUCKET_OF = [[zlib.crc32(orjson.dumps(e.fields["card"])) % BUCKETS for e in b] for b in BATCHES]


def one() -> tuple[list[float], int]:
    eng = SPEC.new_engine(0, lines=True)
    times, n = [], 0
    for batch in BATCHES:
        t0 = time.process_time()
        n = len(eng.push_batch(batch, True))
        times.append(time.process_time() - t0)
    return times[1:], n


def many() -> tuple[list[float], int]:
    engines = [SPEC.new_engine(0, lines=True) for _ in range(BUCKETS)]
    times, n = [], 0
    for batch, buckets in zip(BATCHES, BUCKET_OF, strict=True):
        t0 = time.process_time()
        parts: list[list] = [[] for _ in range(BUCKETS)]
        for e, k in zip(batch, buckets, strict=True):
            parts[k].append(e)
        n = sum(len(eng.push_batch(part, True)) for eng, part in zip(engines, parts, strict=True))
        times.append(time.process_time() - t0)
    return times[1:], n


def fused() -> tuple[list[float], int]:
    eng = SPEC.new_engine(0, lines=True)
    times, n, first = [], 0, 1  # (line numbers from 1: ``first`` 0 is not the fused loop)
    for records in RECORDS:
        t0 = time.process_time()
        took, outs = eng.push_records(records, first)
        times.append(time.process_time() - t0)
        assert took == len(records), took
        first += took
        n = len(outs)
    return times[1:], n


def main(rounds: int) -> None:
    runs = {"one": one, "64": many, "fused": fused}
    got: dict[str, list[float]] = {name: [] for name in runs}
    outputs: dict[str, int] = {}
    for r in range(rounds):
        for name in runs if r % 2 == 0 else reversed(runs):
            with stream_gc():
                times, outputs[name] = runs[name]()
            got[name] += times
    assert len(set(outputs.values())) == 1, outputs  # the same composite events of the last micro-batch
    for name, times in got.items():
        print(name, "median", round(statistics.median(times), 3), "min", round(min(times), 3), len(times))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
