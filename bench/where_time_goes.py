"""``python -m bench.where_time_goes``: where cep's microseconds per event go, and what the issue-15
candidates would save, measured outside the engine on the same stream in one process.

Why: issue 15 asks for a per-event cost that is a small multiple of parsing. Before the runtime is
changed, this measures (1) the `cep run` loop against its parse-only floor, (2) a breakdown by phase
(decode, watermark + expiry, routing/filter, update path per atom, enumeration, output building,
encode/write) from a copy of ``Engine.push``'s loop with a clock around each phase (the clock's own
cost is measured and subtracted), (3) a cProfile by own time, and (4) prototypes of the candidates,
each run with the engine's own compiled runtime objects as a library (the engine code is untouched):

- batched updates: the stream cut into batches of B records; per batch, expiry as one batch deletion
  per atom, then each atom's inserts as one batch (``PatternRuntime._propagate_batch``: every key
  group of the batch in one pass), against one update path call per event and atom; the final match
  count of both must agree. Also the mean batch size per (atom, key group): what a sort-merge per
  group (thesis Theorem 5) could share.
- expiry as one range deletion per group and window step: the floor such a scheme cannot go below
  (forgetting each event once) against the engine's expiry per event and atom.
- events as tuples: the reader's ``Event`` objects against tuples of the fields the pattern reads.

Writes ``results/where_time_goes.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import heapq
import io
import pstats
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import orjson

from bench import procs

RESULTS = procs.BENCH_DIR / "results"
PHASES = ("read + decode", "watermark + expiry", "routing + filter", "update path (insert, per atom)",
          "enumeration (delta.matches)", "output building (Output, id, EMIT)", "encode + write + flush",
          "bookkeeping (events, holders, expiry queue, stats)")


def _engine(pattern: Path):
    from cep.lang.compiler import compile_files
    from cep.runtime.engine import Engine

    return Engine(compile_files([str(pattern)]))


def floor_and_loop(pattern: Path, path: Path, limit: int) -> dict:
    """The parse-only pass and the `cep run` loop (as bench.run_cep, without latency samples)."""
    from cep.io.readers import make_decoder, open_source
    from cep.io.writers import encode_output, open_file_sink

    decode = make_decoder()
    gc.collect()
    t0 = time.perf_counter()
    n = 0
    for pos, raw in open_source(str(path)).records():
        decode(pos, raw)
        n += 1
        if n == limit:
            break
    floor = time.perf_counter() - t0
    eng = _engine(pattern)
    push = eng.push
    sink = open_file_sink("/dev/null")
    write_line, flush = sink.write_line, sink.flush
    gc.collect()
    t0 = time.perf_counter()
    n = outs_n = 0
    for pos, raw in open_source(str(path)).records():
        outs = push(decode(pos, raw))
        if outs:
            for o in outs:
                write_line(encode_output(o))
            outs_n += len(outs)
            flush()
        n += 1
        if n == limit:
            break
    flush()
    loop = time.perf_counter() - t0
    return {"records": n, "composites": outs_n, "floor_s": floor, "loop_s": loop}


def phases(pattern: Path, path: Path, limit: int) -> dict:
    """``Engine.push`` + ``_insert`` inlined with a clock between phases; returns ns per phase."""
    from cep.io.readers import make_decoder, open_source
    from cep.io.writers import encode_output, open_file_sink

    clock = time.perf_counter_ns
    # the clock's own cost per reading, subtracted once per reading below
    k = 200_000
    t0 = clock()
    for _ in range(k):
        clock()
    tick = (clock() - t0) / k

    decode = make_decoder()
    eng = _engine(pattern)
    sink = open_file_sink("/dev/null")
    write_line, flush = sink.write_line, sink.flush
    acc = dict.fromkeys(PHASES, 0)
    reads = dict.fromkeys(PHASES, 0)
    if eng.gap_route or eng._decided or any(c is not None for c in eng.checks):
        raise SystemExit("where_time_goes: the instrumented loop covers patterns without gap elements (NOT)")
    route = eng.route
    events = eng.events
    holders = eng._holders
    windowed = eng._windowed
    stats = eng.stats
    n = composites = 0
    it = open_source(str(path)).records()
    gc.collect()
    wall0 = clock()
    while True:
        a = clock()
        try:
            pos, raw = next(it)
        except StopIteration:
            break
        ev = decode(pos, raw)
        b = clock()
        acc["read + decode"] += b - a
        ts = ev.ts
        stats["events"] += 1
        if eng.max_ts is None or ts > eng.max_ts:
            eng.max_ts = ts
            eng.watermark = ts - eng.lateness
            eng._expire()
        c = clock()
        acc["watermark + expiry"] += c - b
        serial = eng._serial
        eng._serial = serial + 1
        events[serial] = ev
        mask = 0
        outs = []
        t = None
        d = clock()
        acc["bookkeeping (events, holders, expiry queue, stats)"] += d - c
        for ri, _ai, flt, bit, insert in route.get(ev.type, ()):
            e0 = clock()
            ok = flt is None or flt(ev)
            e1 = clock()
            acc["routing + filter"] += e1 - e0
            reads["routing + filter"] += 1
            if not ok:
                continue
            r = insert(ev, serial, t)
            e2 = clock()
            acc["update path (insert, per atom)"] += e2 - e1
            reads["update path (insert, per atom)"] += 1
            if r is None:
                continue
            t, chain = r
            mask |= bit
            for slots in (eng.runtimes[ri].changes(chain) if chain is not None else ()):
                e3 = clock()
                o = eng._output(ri, slots, "+")
                e4 = clock()
                acc["output building (Output, id, EMIT)"] += e4 - e3
                reads["output building (Output, id, EMIT)"] += 1
                outs.append(o)
                e2 += e4 - e3  # the enumeration's own time excludes the output building
            e5 = clock()
            acc["enumeration (delta.matches)"] += e5 - e2
            reads["enumeration (delta.matches)"] += 1
        f = clock()
        if not mask:
            del events[serial]
        else:
            holders[serial] = mask
            for qi, _ri, qmask in windowed:
                if mask & qmask:
                    last = eng._last_ts[qi]
                    if last is None or ts >= last:
                        eng._in_order[qi].append(serial)
                        eng._last_ts[qi] = ts
                    else:
                        heapq.heappush(eng._expiry[qi], (ts, serial))
            stats["inserted"] += 1
        g = clock()
        acc["bookkeeping (events, holders, expiry queue, stats)"] += g - f
        if outs:
            for o in outs:
                write_line(encode_output(o))
            composites += len(outs)
            flush()
        h = clock()
        acc["encode + write + flush"] += h - g
        n += 1
        if n == limit:
            break
    wall = clock() - wall0
    # subtract the clock's cost: one reading per phase interval (the in-loop readings of the
    # per-atom phases are counted in ``reads``; the per-record ones once per record)
    per_record = {"read + decode": 1, "watermark + expiry": 1, "bookkeeping (events, holders, expiry queue, stats)": 2,
                  "encode + write + flush": 1}
    net = {}
    for p in PHASES:
        net[p] = max(0.0, acc[p] - tick * (per_record.get(p, 0) * n + reads[p]))
    return {"records": n, "composites": composites, "wall_ns": wall, "tick_ns": tick, "ns": net,
            "count": eng.match_count(eng.patterns[0].name), "expired": stats.get("expired", 0)}


def profile(pattern: Path, path: Path, limit: int, top: int = 16) -> str:
    from cep.io.readers import make_decoder, open_source
    from cep.io.writers import encode_output

    decode = make_decoder()
    eng = _engine(pattern)
    push = eng.push
    prof = cProfile.Profile()
    n = 0
    prof.enable()
    for pos, raw in open_source(str(path)).records():
        for o in push(decode(pos, raw)):
            encode_output(o)
        n += 1
        if n == limit:
            break
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


# ----------------------------------------------------------------------------- prototypes


def _records(path: Path, limit: int) -> list:
    from cep.io.readers import make_decoder, open_source

    decode = make_decoder()
    out = []
    for pos, raw in open_source(str(path)).records():
        out.append(decode(pos, raw))
        if len(out) == limit:
            break
    return out


def proto_batched(pattern: Path, path: Path, limit: int, batch_sizes: list[int], repeat: int = 3) -> list[dict]:
    """Insert + expire per event and atom vs per batch (per atom, every key group in one pass)."""
    from cep.lang.compiler import compile_files
    from cep.plan.physical import physical_plan
    from cep.plan.planner import plan_pattern
    from cep.runtime.iedyn import PatternRuntime

    cp = compile_files([str(pattern)])[0]
    W = cp.within
    evs = _records(path, limit)
    atoms = [(ai, a.type, a.filter) for ai, a in enumerate(cp.atoms)]
    key_attr = cp.partition_vars and cp.key_attrs(cp.atoms[0])[0]

    def fresh():
        return PatternRuntime(physical_plan(plan_pattern(cp)))

    def per_event() -> tuple[float, int]:
        rt = fresh()
        props = [rt._prop_of_atom[ai] for ai, _, _ in atoms]
        extract = rt.extract
        held: list = []  # (ts, ai, t) in arrival order
        head = 0
        gc.collect()
        t0 = time.perf_counter()
        for serial, e in enumerate(evs):
            limit_ts = e.ts - W
            while head < len(held) and held[head][0] < limit_ts:
                _, ai, t = held[head]
                props[ai](t, -1)
                head += 1
            for ai, typ, flt in atoms:
                if e.type == typ and (flt is None or flt(e)):
                    t = extract[ai](e, serial)
                    if t is not None:
                        props[ai](t, 1)
                        held.append((e.ts, ai, t))
        limit_ts = evs[-1].ts - W  # nothing left to expire at the end: the state of the last record
        while head < len(held) and held[head][0] < limit_ts:
            _, ai, t = held[head]
            props[ai](t, -1)
            head += 1
        return time.perf_counter() - t0, rt.count()

    def expire_batch(rt, held: list, head: int, limit_ts) -> int:
        """Every held tuple below ``limit_ts``: one batch deletion per atom."""
        due: dict[int, list] = defaultdict(list)
        while head < len(held) and held[head][0] < limit_ts:
            _, ai, t = held[head]
            due[ai].append(t)
            head += 1
        for ai, ts_ in due.items():
            rt._propagate_batch(rt._leaf_of_atom[ai], dict.fromkeys(ts_, -1))
        return head

    def batched(bsize: int) -> tuple[float, int, float]:
        rt = fresh()
        extract = rt.extract
        leaf = rt._leaf_of_atom
        held: list = []
        head = 0
        groups = members = 0
        gc.collect()
        t0 = time.perf_counter()
        for start in range(0, len(evs), bsize):
            chunk = evs[start:start + bsize]
            # expiry at the batch's first record (a later record of the batch may expire more:
            # those go in the next batch, before its inserts; the final state is the same)
            head = expire_batch(rt, held, head, chunk[0].ts - W)
            for ai, typ, flt in atoms:
                d: dict = {}
                keys = set()
                for j, e in enumerate(chunk):
                    if e.type == typ and (flt is None or flt(e)):
                        t = extract[ai](e, start + j)
                        if t is not None:
                            d[t] = d.get(t, 0) + 1
                            held.append((e.ts, ai, t))
                            keys.add(e.fields.get(key_attr) if key_attr else None)
                if d:
                    rt._propagate_batch(leaf[ai], d)
                    groups += len(keys)
                    members += len(d)
        expire_batch(rt, held, head, evs[-1].ts - W)
        el = time.perf_counter() - t0
        return el, rt.count(), members / max(1, groups)

    # interleaved rounds (the machine is shared): per event, then each batch size, ``repeat`` times
    times: dict[int, list[float]] = {1: [], **{b: [] for b in batch_sizes}}
    counts: dict[int, int] = {}
    per_group: dict[int, float] = {1: 1.0}
    for _ in range(repeat):
        s, counts[1] = per_event()
        times[1].append(s)
        for b in batch_sizes:
            s, counts[b], per_group[b] = batched(b)
            times[b].append(s)
    out = []
    for b in [1, *batch_sizes]:
        name = ("per event and atom (today's shape)" if b == 1
                else f"batch of {b} records, per atom, all key groups in one pass")
        out.append({"strategy": name, "batch": b, "s": min(times[b]), "median_s": statistics.median(times[b]),
                    "count": counts[b], "per_group": per_group[b], "runs": len(times[b])})
    return out


def proto_expiry_floor(path: Path, limit: int, window: int, key: str) -> dict:
    """Range deletion per group and window step cannot go below forgetting each event once:
    a per-key deque of (ts, serial) and one dict of events, popped per window step."""
    evs = _records(path, limit)
    store: dict[int, object] = {}
    groups: dict = defaultdict(list)
    heads: dict = defaultdict(int)
    order: list = []  # keys in arrival order of their oldest live event (a simple queue of (ts, key))
    qh = 0
    gc.collect()
    t0 = time.perf_counter()
    for serial, e in enumerate(evs):
        store[serial] = e
        k = e.fields[key]
        groups[k].append((e.ts, serial))
        order.append((e.ts, k))
        lim = e.ts - window
        while qh < len(order) and order[qh][0] < lim:
            _, k2 = order[qh]
            qh += 1
            g = groups[k2]
            h = heads[k2]
            # one range deletion: every expired entry of the group at once
            while h < len(g) and g[h][0] < lim:
                del store[g[h][1]]
                h += 1
            heads[k2] = h
    total = time.perf_counter() - t0
    return {"records": len(evs), "s": total}


def proto_tuples(path: Path, limit: int, fields: list[str]) -> dict:
    """Decoding into the reader's Event objects vs into a tuple of the fields the pattern reads."""
    from cep.io.readers import make_decoder, open_source

    lines = []
    for pos, raw in open_source(str(path)).records():
        lines.append((pos, raw))
        if len(lines) == limit:
            break
    decode = make_decoder()
    loads = orjson.loads
    gc.collect()
    t0 = time.perf_counter()
    for pos, raw in lines:
        decode(pos, raw)
    ev_s = time.perf_counter() - t0
    getters = fields
    gc.collect()
    t0 = time.perf_counter()
    for pos, raw in lines:
        r = loads(raw)
        (r["type"], r["ts"], *[r[f] for f in getters], pos)
    tup_s = time.perf_counter() - t0
    gc.collect()
    t0 = time.perf_counter()
    for _pos, raw in lines:
        loads(raw)
    json_s = time.perf_counter() - t0
    return {"records": len(lines), "event_s": ev_s, "tuple_s": tup_s, "json_s": json_s}


BATCH_HEAD = ["| strategy | runs | s best / median | speed-up vs per event, best / median | final match count "
              "| tuples per (atom, key group) per batch |", "|---|---|---|---|---|---|"]


def _batch_row(b: dict, base: dict) -> str:
    return (f"| {b['strategy']} | {b['runs']} | {b['s']:.2f} / {b['median_s']:.2f} | {base['s'] / b['s']:.2f}x / "
            f"{base['median_s'] / b['median_s']:.2f}x | {b['count']:,} | {b['per_group']:.2f} |")


def _prototypes_only(pattern: Path, path: Path, limit: int, args, argv, t_start: float) -> int:
    batches = [int(b) for b in args.batches.split(",")]
    n = limit if limit > 0 else 200_000
    bat = proto_batched(pattern, path, n, batches, args.repeat)
    ok = len({b["count"] for b in bat}) == 1
    L = [f"# Prototypes: {pattern.name} on {path.name}", "",
         f"Command: `python -m bench.where_time_goes {' '.join(sys.argv[1:] if argv is None else argv)}` ({time.perf_counter() - t_start:.0f} s, "
         f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {open('/proc/loadavg').read().split()[0]}).", "",
         *BATCH_HEAD]
    L += [_batch_row(b, bat[0]) for b in bat]
    L += ["", f"Final counts agree: {'yes' if ok else '**NO**'}."]
    Path(args.out).write_text("\n".join(L) + "\n")
    print("\n".join(L))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.where_time_goes", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=str(RESULTS / "data" / "cards_1000000_1000_s11.jsonl"))
    ap.add_argument("--pattern", default=str(procs.REPO / "patterns" / "card_testing.pattern"))
    ap.add_argument("--limit", type=int, default=0, help="records (0: all)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batches", default="64,512")
    ap.add_argument("--out", default=str(RESULTS / "where_time_goes.md"))
    ap.add_argument("--prototypes-only", action="store_true", help="skip the floor, phase and cProfile passes")
    args = ap.parse_args(argv)
    pattern, path = Path(args.pattern), Path(args.input)
    limit = args.limit or -1
    t_start = time.perf_counter()
    if args.prototypes_only:
        return _prototypes_only(pattern, path, limit, args, argv, t_start)
    fl = [floor_and_loop(pattern, path, limit) for _ in range(args.repeat)]
    n = fl[0]["records"]
    floors = sorted(r["floor_s"] for r in fl)
    loops = sorted(r["loop_s"] for r in fl)
    ph = min((phases(pattern, path, limit) for _ in range(args.repeat)), key=lambda r: r["wall_ns"])
    prof = profile(pattern, path, min(n, 200_000))
    batches = [int(b) for b in args.batches.split(",")]
    bat = proto_batched(pattern, path, min(n, 200_000), batches, args.repeat)
    cp_window = _engine(pattern).patterns[0].within
    exp = proto_expiry_floor(path, min(n, 200_000), cp_window, "card")
    tup = proto_tuples(path, min(n, 200_000), ["card", "amount"])
    load = open("/proc/loadavg").read().split()[0]

    L = [f"# Where the time goes: {pattern.name} on {path.name} ({n:,} records)", "",
         f"Command: `python -m bench.where_time_goes {' '.join(sys.argv[1:] if argv is None else argv)}` "
         f"({time.perf_counter() - t_start:.0f} s, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
         f"load average {load}; `--repeat {args.repeat}`).", "",
         "## Loop against its parse-only floor", "",
         "| | best s | median s | µs/record (best) |", "|---|---|---|---|",
         f"| parse-only floor (reader + decoder) | {floors[0]:.2f} | {floors[len(floors) // 2]:.2f} | {floors[0] / n * 1e6:.2f} |",
         f"| `cep run` loop (read, push, encode, write) | {loops[0]:.2f} | {loops[len(loops) // 2]:.2f} | {loops[0] / n * 1e6:.2f} |",
         f"| ratio | {loops[0] / floors[0]:.1f}x | {loops[len(loops) // 2] / floors[len(floors) // 2]:.1f}x | |",
         "", f"Composites: {fl[0]['composites']:,}.", "",
         "## By phase (instrumented copy of the push loop, best of the repeats)", "",
         f"Clock reading cost {ph['tick_ns']:.0f} ns, subtracted per reading. Instrumented wall "
         f"{ph['wall_ns'] / 1e9:.2f} s; phases sum to {sum(ph['ns'].values()) / 1e9:.2f} s.", "",
         "| phase | s | µs/record | share |", "|---|---|---|---|"]
    tot = sum(ph["ns"].values())
    for p in PHASES:
        v = ph["ns"][p]
        L.append(f"| {p} | {v / 1e9:.2f} | {v / n / 1e3:.2f} | {v / tot:.0%} |")
    L += ["", "## cProfile, own time (first 200,000 records)", "", "```", prof.strip()[:6000], "```", "",
          "## Prototypes (the first 200,000 records, the engine's runtime objects as a library)", "",
          "Batched updates (insert and expiry through the update paths only: no routing, output or bookkeeping):", "",
          *BATCH_HEAD]
    L += [_batch_row(b, bat[0]) for b in bat]
    ok = len({b["count"] for b in bat}) == 1
    L += ["", f"Final counts agree: {'yes' if ok else '**NO**'}.", "",
          f"Expiry floor (forget each event once, one range deletion per key group and window step): "
          f"{exp['s']:.2f} s for {exp['records']:,} records = {exp['s'] / exp['records'] * 1e6:.2f} µs/record, "
          f"against the engine's watermark + expiry phase {ph['ns']['watermark + expiry'] / n / 1e3:.2f} µs/record.", "",
          f"Events as tuples ({tup['records']:,} records): the reader's Event objects {tup['event_s'] / tup['records'] * 1e6:.2f} µs/record, "
          f"a tuple of the fields the pattern reads {tup['tuple_s'] / tup['records'] * 1e6:.2f} µs/record, "
          f"orjson.loads alone {tup['json_s'] / tup['records'] * 1e6:.2f} µs/record."]
    Path(args.out).write_text("\n".join(L) + "\n")
    print("\n".join(L))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
