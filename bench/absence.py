"""Absence and strategy workloads: what a NOT (or a strategy) costs, and what state it keeps.

``python -m bench.absence [--sizes 100000,1000000] [--repeat 3] [--out bench/results]``

Why these measurements (issue 13): a NOT is an anti-join answered by a range query on a sorted index,
so on in-order input it must cost at most 1.5x the same pattern without it, per event; and the events
it keeps (the gap types' events) must stay within the window, so the peak of retained events stays
<= 2x the events of the fullest window.  Each pair (with and without the gap element) runs in this
process on the same in-memory events, interleaved (baseline, candidate, baseline, ...), keeping the
fastest of ``--repeat`` runs: the machine is shared, so only ratios within one run mean anything.
Counts are checked against oracles written here without the engine (a sort and a scan per key).

Workloads (strictly increasing times from ``T0``: orders one record a minute, quotes one a second):

* ``unshipped``: orders and shipments (80% of orders shipped after 0-3 days), ``SEQ(Order o, NOT
  Shipment s) WHERE s.order_id = o.order_id WITHIN 2 days`` (trailing NOT) vs ``SEQ(Order o)
  WITHIN 2 days`` (which drops every Shipment at routing) and vs ``SEQ(Order o, Shipment s)`` (the NOT
  made positive: Shipments stored and joined).
* ``paid_uncancelled``: ``SEQ(Order o, NOT Cancel c, Pay p)`` with order-id equalities within 1 day
  (middle NOT) vs ``SEQ(Order o, Pay p)``.
* ``next_quote``: ``SEQ(Quote a, Quote b) WHERE b.price > a.price PARTITION BY symbol WITHIN 60 s
  USING skip_till_next_match`` vs the same without USING (every higher quote: more output).
* ``pay_without_cancel``: ``SEQ(NOT Cancel c, Pay y)`` with an order-id equality within 1 day (leading
  NOT) vs ``SEQ(Pay y)`` and vs ``SEQ(Cancel c, Pay y)``.
* ``rising_quotes``: three rising quotes of a symbol within 10 min ``USING strict_contiguity`` vs the
  same without USING (every rising triple).

Esper side by side (``--no-esper`` to skip): each workload also runs as a `cep run` loop and as EPL
(``bench/epl/<workload>.epl``) on the same file, through ``bench.side_by_side``; ``ESPER`` below says
how each EPL form maps onto cep's semantics.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import gc
import heapq
import math
import os
import random
import time
from collections import defaultdict
from pathlib import Path

from bench import side_by_side
from bench.side_by_side import Comparison, EsperForm
from bench.streams import max_window_occupancy
from cep.event import Event
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine

T0 = 1_700_000_000
DAY = 86400


def orders_stream(n: int, seed: int = 5) -> list[dict]:
    """Orders, shipments (most orders, 0-3 days later), cancels and payments, one record a minute
    (so a 2-day window holds ~2900 records)."""
    rng = random.Random(seed)
    pending: list[tuple[int, int, dict]] = []  # (due ts, seq, record) of future shipments/payments
    out: list[dict] = []
    oid = 0
    seq = 0
    ts = T0
    while len(out) < n:
        if pending and pending[0][0] <= ts:
            _, _, rec = heapq.heappop(pending)
            rec["ts"] = ts
            out.append(rec)
        else:
            oid += 1
            out.append({"type": "Order", "ts": ts, "order_id": oid, "customer": f"c{rng.randint(1, 5000)}"})
            if rng.random() < 0.8:
                seq += 1
                heapq.heappush(pending, (ts + rng.randint(60, 3 * DAY), seq, {"type": "Shipment", "order_id": oid}))
            if rng.random() < 0.1:
                seq += 1
                heapq.heappush(pending, (ts + rng.randint(1, DAY // 2), seq, {"type": "Cancel", "order_id": oid}))
            if rng.random() < 0.7:
                seq += 1
                heapq.heappush(pending, (ts + rng.randint(60, DAY), seq, {"type": "Pay", "order_id": oid}))
        ts += 60
    return out


def quotes_stream(n: int, seed: int = 6, symbols: int = 200) -> list[dict]:
    rng = random.Random(seed)
    price = {f"S{i}": 100.0 for i in range(symbols)}
    out = []
    for i in range(n):
        s = f"S{rng.randrange(symbols)}"
        price[s] = round(max(1.0, price[s] * (1 + rng.gauss(0, 0.01))), 2)
        out.append({"type": "Quote", "ts": T0 + i, "symbol": s, "price": price[s]})
    return out


# ---------------------------------------------------------------- oracles (no engine)


def _times_by(records: list[dict], typ: str, key: str) -> dict:
    out: dict = defaultdict(list)
    for r in records:
        if r["type"] == typ:
            out[r[key]].append(r["ts"])
    return out


def oracle_unshipped(records: list[dict], w: int) -> int:
    ships = _times_by(records, "Shipment", "order_id")
    n = 0
    for r in records:
        if r["type"] == "Order":
            ts = ships.get(r["order_id"], [])
            i = bisect.bisect_right(ts, r["ts"])
            if not (i < len(ts) and ts[i] <= r["ts"] + w):
                n += 1
    return n


def oracle_paid_uncancelled(records: list[dict], w: int) -> int:
    pays = _times_by(records, "Pay", "order_id")
    cancels = _times_by(records, "Cancel", "order_id")
    n = 0
    for r in records:
        if r["type"] != "Order":
            continue
        o = r["ts"]
        for p in pays.get(r["order_id"], []):
            if o < p <= o + w:
                c = cancels.get(r["order_id"], [])
                i = bisect.bisect_right(c, o)
                if not (i < len(c) and c[i] < p):
                    n += 1
    return n


def _quotes_by_symbol(records: list[dict]) -> dict:
    by: dict = defaultdict(list)
    for r in records:
        by[r["symbol"]].append((r["ts"], r["price"]))
    return by


def oracle_next_quote(records: list[dict], w: int) -> int:
    n = 0
    for qs in _quotes_by_symbol(records).values():
        for i, (t, p) in enumerate(qs):
            for t2, p2 in qs[i + 1:]:
                if t2 - t > w:
                    break
                if p2 > p:
                    n += 1
                    break
    return n


def oracle_pay_without_cancel(records: list[dict], w: int) -> int:
    cancels = _times_by(records, "Cancel", "order_id")

    def cancelled_before(pay: dict) -> bool:  # a cancel of the order in [pay.ts - w, pay.ts)
        c = cancels.get(pay["order_id"], [])
        i = bisect.bisect_left(c, pay["ts"] - w)
        return i < len(c) and c[i] < pay["ts"]

    return sum(1 for r in records if r["type"] == "Pay" and not cancelled_before(r))


def oracle_rising_quotes(records: list[dict], w: int) -> int:
    return sum(1 for qs in _quotes_by_symbol(records).values() for (t, a), (_, b), (t3, c) in zip(qs, qs[1:], qs[2:], strict=False)
               if a < b < c and t3 - t <= w)


# ---------------------------------------------------------------- runs


PAIRS = {
    "unshipped": (
        "orders",
        "PATTERN p SEQ(Order o, NOT Shipment s) WHERE s.order_id = o.order_id WITHIN 2 days",
        "PATTERN p SEQ(Order o) WITHIN 2 days",
        lambda recs: oracle_unshipped(recs, 2 * DAY),
        2 * DAY,
        "PATTERN p SEQ(Order o, Shipment s) WHERE s.order_id = o.order_id WITHIN 2 days",
    ),
    "paid_uncancelled": (
        "orders",
        "PATTERN p SEQ(Order o, NOT Cancel c, Pay y) WHERE c.order_id = o.order_id AND y.order_id = o.order_id "
        "WITHIN 1 day",
        "PATTERN p SEQ(Order o, Pay y) WHERE y.order_id = o.order_id WITHIN 1 day",
        lambda recs: oracle_paid_uncancelled(recs, DAY),
        DAY,
        "PATTERN p SEQ(Order o, Cancel c, Pay y) WHERE c.order_id = o.order_id AND y.order_id = o.order_id "
        "WITHIN 1 day",
    ),
    "next_quote": (
        "quotes",
        "PATTERN p SEQ(Quote a, Quote b) WHERE b.price > a.price PARTITION BY symbol WITHIN 60 s "
        "USING skip_till_next_match",
        "PATTERN p SEQ(Quote a, Quote b) WHERE b.price > a.price PARTITION BY symbol WITHIN 60 s",
        lambda recs: oracle_next_quote(recs, 60),
        60,
        None,
    ),
    "pay_without_cancel": (
        "orders",
        "PATTERN p SEQ(NOT Cancel c, Pay y) WHERE c.order_id = y.order_id WITHIN 1 day",
        "PATTERN p SEQ(Pay y) WITHIN 1 day",
        lambda recs: oracle_pay_without_cancel(recs, DAY),
        DAY,
        "PATTERN p SEQ(Cancel c, Pay y) WHERE c.order_id = y.order_id WITHIN 1 day",
    ),
    "rising_quotes": (
        "quotes",
        "PATTERN p SEQ(Quote a, Quote b, Quote c) WHERE b.price > a.price AND c.price > b.price "
        "PARTITION BY symbol WITHIN 10 min USING strict_contiguity",
        "PATTERN p SEQ(Quote a, Quote b, Quote c) WHERE b.price > a.price AND c.price > b.price "
        "PARTITION BY symbol WITHIN 10 min",
        lambda recs: oracle_rising_quotes(recs, 600),
        600,
        None,
    ),
}

_EPL = side_by_side.EPL_DIR
# Esper as one more system: the EPL form of each workload's gap pattern (PAIRS[name][1]). The streams
# have strictly increasing times, so Esper's arrival order is cep's time order (no ties to break).
ORDER_TYPE = (("Order", "OrderEvent"),)  # `order` is an EPL keyword
ESPER = {
    "unshipped": (EsperForm(
        "esper", _EPL / "unshipped.epl", True,
        "trailing NOT as `every o=Order -> (timer:interval(2 days + 1 ms) and not Shipment(order_id = o.order_id))`; "
        "+1 ms because cep's trailing gap includes o.ts + w and Esper's timer fires before a record of that time; "
        "the clock is moved past the last timers at the end, as cep decides every pending match there", ORDER_TYPE),
        2 * DAY * 1000 + 2),
    "paid_uncancelled": (EsperForm(
        "esper", _EPL / "paid_uncancelled.epl", True,
        "middle NOT as `every o=Order -> ((every y=Pay(order_id = o.order_id) and not Cancel(order_id = o.order_id)) "
        "where timer:within(1 day + 1 ms))` (WITHIN is inclusive in cep)", ORDER_TYPE), 0),
    "next_quote": (EsperForm(
        "esper", _EPL / "next_quote.epl", True,
        "skip_till_next_match as `every a=Quote -> (b=Quote(symbol = a.symbol, price > a.price) where "
        "timer:within(60 s + 1 ms))`: without `every` on b each a takes the first higher quote"), 0),
    "pay_without_cancel": (EsperForm(
        "esper", _EPL / "pay_without_cancel.epl", True,
        "leading NOT: an Esper pattern cannot look back, so a `not exists` subquery over `Cancel#time(1 day + 1 ms)` "
        "(the cancels with ts >= y.ts - w when y arrives: cep's leading gap)"), 0),
    "rising_quotes": (EsperForm(
        "esper", _EPL / "rising_quotes.epl", True,
        "strict_contiguity as `match_recognize (partition by symbol ... after match skip to next row pattern (A B C) "
        "define B as B.price > A.price, C as C.price > B.price and C.ts - A.ts <= 600)`: rows of a partition are "
        "contiguous, a match starts at every row"), 0),
}


def esper_rows(name: str, records: list[dict], expected: int, data_dir: Path, repeat: int) -> list[dict]:
    """The workload's gap pattern as `cep run` and as EPL on the same file (``bench.side_by_side``)."""
    form, end_advance_ms = ESPER[name]
    comparison = Comparison(name, PAIRS[name][1] + "\n", (form,), end_advance_ms)
    return side_by_side.compare(comparison, records, expected, data_dir, repeat)


def run_once(text: str, events: list[Event]) -> tuple[float, int, int, int]:
    """(seconds, net composite events, peak retained events, peak pending matches)."""
    eng = Engine(compile_text(text))
    push = eng.push
    gc.collect()
    gc.disable()
    t0 = time.process_time()  # CPU time of this process: less disturbed by other work on the machine
    n = 0
    for e in events:
        n += len(push(e))
    n += len(eng.advance_watermark(math.inf))
    dt = time.process_time() - t0
    gc.enable()
    return dt, n, eng.stats["peak_retained"], eng.stats["peak_pending"]


def esper_only(args: argparse.Namespace) -> int:
    """Only the side-by-side runs (`cep run` loop and Esper), written to ``OUT/absence_esper.md``: for
    sizes where the in-process pairs would take longer than the machine has."""
    missing = side_by_side.esper_unavailable()
    if missing is not None:
        raise SystemExit(f"bench.absence --esper-only: Esper not available: {missing}")
    load_start = side_by_side.load_average()
    out = Path(args.out)
    rows: list[dict] = []
    out.mkdir(parents=True, exist_ok=True)
    for n in [int(x) for x in args.sizes.split(",")]:
        streams = {"orders": orders_stream(n), "quotes": quotes_stream(n)}
        for name in args.workloads.split(","):
            kind, _, _, oracle, _, _ = PAIRS[name]
            data = Path(args.data) if args.data else out / "data"
            rows += esper_rows(name, streams[kind], oracle(streams[kind]), data, args.repeat)
            # rewritten after each workload: a run cut short keeps every finished one
            lines = ["# Absence and strategies: cep and Esper side by side", "",
                     f"`python -m bench.absence --esper-only --sizes {args.sizes} --repeat {args.repeat} "
                     f"--workloads {args.workloads}` (the in-process pairs of `absence.md` are not run)."]
            lines += side_by_side.report_section(rows, False, None, out / "absence_esper.csv", load_start=load_start)
            (out / "absence_esper.md").write_text("\n".join(lines) + "\n")
    return 0 if all(r["count_ok"] for r in rows) else 1


def fullest_window(records: list[dict], types: set[str], w: float) -> int:
    """The most events of these types within any closed window of length w."""
    return max_window_occupancy([r for r in records if r["type"] in types], w)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.absence")
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--repeat-large", type=int, help="rounds for sizes >= 10^6 (default: --repeat)")
    ap.add_argument("--workloads", default=",".join(PAIRS))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    ap.add_argument("--no-esper", action="store_true", help="skip the side-by-side runs (cep run loop and Esper)")
    ap.add_argument("--data", help="where the side-by-side stream files go (default OUT/data)")
    ap.add_argument("--esper-only", action="store_true",
                    help="only the side-by-side runs, into OUT/absence_esper.md (no in-process pairs)")
    args = ap.parse_args(argv)
    if args.esper_only:
        return esper_only(args)
    rows = []
    ok = True
    load_start = side_by_side.load_average()
    esper_missing = None if args.no_esper else side_by_side.esper_unavailable()
    sbs: list[dict] = []
    for n in [int(x) for x in args.sizes.split(",")]:
        repeat = args.repeat_large if args.repeat_large and n >= 1_000_000 else args.repeat
        streams = {"orders": orders_stream(n), "quotes": quotes_stream(n)}
        for name in args.workloads.split(","):
            kind, with_gap, without, oracle, w, positive = PAIRS[name]
            recs = streams[kind]
            events = [Event(r["type"], r["ts"], r, str(i)) for i, r in enumerate(recs, 1)]
            best = {"gap": math.inf, "base": math.inf, "positive": math.inf}
            res = {}
            runs = [("base", without), ("gap", with_gap)] + ([("positive", positive)] if positive else [])
            for _ in range(repeat):
                for label, text in runs:
                    dt, count, peak, pend = run_once(text, events)
                    best[label] = min(best[label], dt)
                    res[label] = (count, peak, pend)
            expected = oracle(recs)
            count, peak, pend = res["gap"]
            types = {el for el in ("Order", "Shipment", "Cancel", "Pay", "Quote")}
            window = fullest_window(recs, types & {r["type"] for r in recs}, w)
            row = {
                "workload": name, "n": n,
                "base_us_per_event": round(best["base"] / n * 1e6, 2),
                "gap_us_per_event": round(best["gap"] / n * 1e6, 2),
                "ratio": round(best["gap"] / best["base"], 3),
                "positive_us_per_event": round(best["positive"] / n * 1e6, 2) if positive else None,
                "ratio_to_positive": round(best["gap"] / best["positive"], 3) if positive else None,
                "matches": count, "oracle": expected, "base_matches": res["base"][0],
                "peak_retained": peak, "fullest_window": window,
                "state_ratio": round(peak / window, 3), "peak_pending": pend,
                "state_ratio_with_pending": round((peak + pend) / window, 3),
            }
            ok &= count == expected
            rows.append(row)
            print(row, flush=True)
            if not args.no_esper and esper_missing is None and name in ESPER:
                data = Path(args.data) if args.data else Path(args.out) / "data"
                sbs += esper_rows(name, recs, expected, data, repeat)
                ok &= all(r["count_ok"] for r in sbs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "absence.csv", "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    lines = [
        "# Absence and strategies: cost of a gap element, retained state",
        "",
        f"`python -m bench.absence --sizes {args.sizes} --repeat {args.repeat}"
        f"{f' --repeat-large {args.repeat_large}' if args.repeat_large else ''}` (in-process Engine.push, in-order "
        "input, the pattern with the gap element vs the same pattern without it, interleaved, fastest of the "
        "repeats; end of input decides the pending matches and is included in the time).",
        "",
        f"Load average (1 min) at the end of the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.",
        "",
        "| workload | events | without (us/event) | with (us/event) | ratio | NOT made positive (us/event) | "
        "ratio to it | matches (oracle) | peak retained | fullest window | state ratio | peak pending | "
        "(retained + pending) / window |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['n']} | {r['base_us_per_event']} | {r['gap_us_per_event']} | {r['ratio']} | "
            f"{r['positive_us_per_event'] or '-'} | {r['ratio_to_positive'] or '-'} | {r['matches']} ({r['oracle']}) | {r['peak_retained']} | {r['fullest_window']} | {r['state_ratio']} | "
            f"{r['peak_pending']} | {r['state_ratio_with_pending']} |")
    lines += ["", "`without`: the pattern with the gap element removed; `NOT made positive`: the same pattern with "
              "`NOT` deleted (the negated type becomes a positive element, so its events are stored too). "
              "Targets: ratio <= 1.5 for a NOT (unshipped, paid_uncancelled); state ratio <= 2. "
              "`fullest window` counts every event of the stream's types in the fullest window of the "
              "pattern's WITHIN; `peak pending` counts deciding events of undecided matches (one per event, "
              "not per match), and the last column adds them to the retained events."]
    lines += side_by_side.report_section(sbs, args.no_esper, esper_missing, out / "absence_esper.csv",
                                         load_start=load_start)
    (out / "absence.md").write_text("\n".join(lines) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
