"""What a Spark micro-batch writes to the state store, measured without Spark: the state-layout decision.

Why: the Spark path keeps one engine state per (pattern, key group) and writes it whole each micro-batch; a state
per key would write only the keys a batch touches. This runs the Spark handler (``connectors/spark.py``
``_handler``, the same routing) in-process over micro-batches of ``card_testing`` events and reports, per batch,
the handler's CPU time, the bytes written to the state store, the events the states retain, the CPU time of the
writes (``Engine.dumps``), of a reload on a worker-cache miss (``Engine.loads``), and how many keys the batch
touched (what a per-key layout would rewrite).

    python -m bench.spark_state --batch 100000 --batches 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import pandas as pd

from bench.spark_bench import PATTERN, make_events


class FakeGroupState:
    """The part of PySpark's GroupState the handler uses, kept in memory between batches."""

    hasTimedOut = False

    def __init__(self) -> None:
        self.exists = False
        self.get: tuple | None = None
        self.watermark_ms = 0

    def getCurrentWatermarkMs(self) -> int:  # noqa: N802 - PySpark's name
        return self.watermark_ms

    def update(self, value: tuple) -> None:
        self.get, self.exists = value, True

    def remove(self) -> None:
        self.get, self.exists = None, False

    def setTimeoutTimestamp(self, ms: int) -> None:  # noqa: N802 - PySpark's name
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.spark_state", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--lateness", type=int, default=120)
    args = ap.parse_args(argv)
    from cep.connectors import spark as S

    spec = S.pattern_spec(PATTERN, lateness=args.lateness)
    events = make_events(args.batch * args.batches, args.keys)
    handler, route = S._handler(spec), S._route_batches(spec)
    states: dict[tuple, FakeGroupState] = {}
    max_ts = None
    print("| batch | handler CPU s | state written (MB) | groups | retained events | dumps CPU s | loads CPU s | "
          "keys touched |\n|---|---|---|---|---|---|---|---|")
    for b in range(args.batches):
        part = events[b * args.batch:(b + 1) * args.batch]
        records = pd.DataFrame({"pos": [f"in:{b}:{i}" for i in range(len(part))],
                                "value": [json.dumps(e) for e in part]})
        df = pd.concat(list(route(iter([records]))))
        wm = 0 if max_ts is None else S.spark_watermark_after(spec, max_ts)
        t = time.process_time()
        for key, rows in df.groupby(["g", "kg"]):
            st = states.setdefault(key, FakeGroupState())
            st.watermark_ms = wm
            list(handler(key, [rows], st))
        handler_s = time.process_time() - t
        blobs = [(k, st.get[1]) for k, st in states.items() if st.exists]
        t = time.process_time()
        engines = [spec.load_engine(k[0], bytes(blob)) for k, blob in blobs]
        loads_s = time.process_time() - t
        t = time.process_time()
        for eng in engines:
            eng.dumps()
        dumps_s = time.process_time() - t
        max_ts = max(e["ts"] for e in part)
        print(f"| {b} | {handler_s:.2f} | {sum(len(x) for _, x in blobs) / 1e6:.2f} | {len(blobs)} | "
              f"{sum(e.retained_events for e in engines)} | {dumps_s:.3f} | {loads_s:.2f} | "
              f"{len({e['card'] for e in part})} of {args.keys} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
