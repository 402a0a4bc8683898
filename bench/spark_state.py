"""What a Spark micro-batch writes to the state store, measured without Spark: the state-layout decision.

Why: the Spark path keeps one engine state per (pattern, key group) and writes it whole each micro-batch; a state
per key would write only the keys a batch touches. This runs the Spark handler (``connectors/spark_state.py``
``_handler``, the same routing) in-process over micro-batches of ``card_testing`` events and reports, per batch,
the handler's CPU time, the bytes written to the state store, the events the states retain, the CPU time of the
writes (``Engine.dumps``), of a reload on a worker-cache miss (``Engine.loads``), and how many keys the batch
touched (what a per-key layout would rewrite).

    python -m bench.spark_state --batch 100000 --batches 3
    python -m bench.spark_state --phases --batches 4     # CPU s per 10^5 events of each part of the two steps

``--phases``: the route step (whole-file batches, as ``cep spark`` reads a directory) and the state step
(``pack_output``, as ``cep spark`` writes one) over the batches after the first, each part of the steps timed
(``process_time`` around the functions of ``connectors/spark_state.py`` and the engine's): where the Python steps'
CPU goes without PySpark and the JVM.
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


PHASES = ("_group_step", "_lines_of", "_decode_group", "_out_rows", "_frame", "_save", "_engines_for", "_push_values", "_by_bucket")
ENGINE_PHASES = ("push_batch", "advance_watermark", "dumps")


def phases(batch: int, batches: int, keys: int, lateness: int, key_groups: int | None = None,
           group_engines: int | None = None) -> dict[str, float]:
    """CPU s per 10^5 events of the route step, the state step and each timed part (see ``--phases``)."""
    import functools

    from cep.connectors import spark_route as RT
    from cep.connectors import spark_spec as SP
    from cep.connectors import spark_state as ST

    from cep.runtime.engine import Engine

    spec = SP.pattern_spec(PATTERN, lateness=lateness, key_groups=key_groups, group_engines=group_engines)
    spec.match_column, spec.pack_output = False, True
    events = make_events(batch * batches, keys)
    acc: dict[str, float] = {}
    on = [False]
    saved = []

    def timed(owner, name: str, label: str) -> None:
        fn = getattr(owner, name)
        saved.append((owner, name, fn))

        @functools.wraps(fn)
        def wrapper(*a, **k):
            if not on[0]:
                return fn(*a, **k)
            t = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                acc[label] = acc.get(label, 0.0) + time.process_time() - t

        setattr(owner, name, wrapper)

    for name in PHASES:
        timed(ST, name, name)  # (each looked up in spark_state, _lines_of too)
    for name in ENGINE_PHASES:
        timed(Engine, name, f"Engine.{name}")
    try:
        route, handler = RT._route_batches(spec, whole_files=True), ST._handler(spec)
        states: dict[tuple, FakeGroupState] = {}
        max_ts = None
        for b in range(batches):
            part = events[b * batch:(b + 1) * batch]
            text = "".join(json.dumps(e) + "\n" for e in part)
            files = pd.DataFrame({"pos": [f"file:///in/part{b:03d}.jsonl"], "value": [text]})
            t = time.process_time()
            df = pd.concat(list(route(iter([files]))))
            routed = time.process_time() - t
            wm = 0 if max_ts is None else ST.spark_watermark_after(spec, max_ts)
            groups = [(key, rows.drop(columns=["evt"])) for key, rows in df.groupby(["g", "kg"])]
            on[0] = b > 0
            t = time.process_time()
            for key, rows in groups:
                st = states.setdefault(key, FakeGroupState())
                st.watermark_ms = wm
                list(handler(key, iter([rows]), st))
            stepped = time.process_time() - t
            on[0] = False
            if b:
                acc["route step"] = acc.get("route step", 0.0) + routed
                acc["state step"] = acc.get("state step", 0.0) + stepped
            max_ts = max(e["ts"] for e in part)
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
    per = (batches - 1) * batch / 1e5
    return {k: v / per for k, v in acc.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.spark_state", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--lateness", type=int, default=120)
    ap.add_argument("--phases", action="store_true", help="CPU s per 10^5 events of each part of the two steps")
    ap.add_argument("--key-groups", type=int, default=None, help="Spark groups (default: the Spark path's)")
    ap.add_argument("--group-engines", type=int, default=None, help="engines per key group (default: the Spark path's)")
    args = ap.parse_args(argv)
    if args.phases:
        from cep.gc_policy import stream_gc

        with stream_gc():  # as the route and state steps run on Spark
            got = phases(args.batch, max(args.batches, 2), args.keys, args.lateness, args.key_groups,
                         args.group_engines)
        print("| part | CPU s per 10^5 events |\n|---|---|")
        for name, v in sorted(got.items(), key=lambda kv: -kv[1]):
            print(f"| {name} | {v:.3f} |")
        return 0
    from cep.connectors import spark_route as RT
    from cep.connectors import spark_spec as SP
    from cep.connectors import spark_state as ST

    spec = SP.pattern_spec(PATTERN, lateness=args.lateness, key_groups=args.key_groups,
                          group_engines=args.group_engines)
    events = make_events(args.batch * args.batches, args.keys)
    handler, route = ST._handler(spec), RT._route_batches(spec)
    states: dict[tuple, FakeGroupState] = {}
    max_ts = None
    print("| batch | handler CPU s | state written (MB) | groups | retained events | dumps CPU s | loads CPU s | "
          "keys touched |\n|---|---|---|---|---|---|---|---|")
    for b in range(args.batches):
        part = events[b * args.batch:(b + 1) * args.batch]
        records = pd.DataFrame({"pos": [f"in:{b}:{i}" for i in range(len(part))],
                                "value": [json.dumps(e) for e in part]})
        df = pd.concat(list(route(iter([records]))))
        wm = 0 if max_ts is None else ST.spark_watermark_after(spec, max_ts)
        t = time.process_time()
        for key, rows in df.groupby(["g", "kg"]):
            st = states.setdefault(key, FakeGroupState())
            st.watermark_ms = wm
            list(handler(key, [rows], st))
        handler_s = time.process_time() - t
        blobs = [(k, st.get) for k, st in states.items() if st.exists]
        t = time.process_time()
        # a key group's state holds its engines (``_state_blob``): loaded as a worker without them loads it
        engines = [eng for (g, kg), (nonce, blob) in blobs
                   for eng in ST._state_engines(spec, g, kg, nonce, bytes(blob)).values()]
        loads_s = time.process_time() - t
        t = time.process_time()
        for eng in engines:
            eng.dumps()
        dumps_s = time.process_time() - t
        max_ts = max(e["ts"] for e in part)
        print(f"| {b} | {handler_s:.2f} | {sum(len(x[1]) for _, x in blobs) / 1e6:.2f} | {len(blobs)} | "
              f"{sum(e.retained_events for e in engines)} | {dumps_s:.3f} | {loads_s:.2f} | "
              f"{len({e['card'] for e in part})} of {args.keys} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
