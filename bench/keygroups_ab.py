"""Would per-key-group engines make `cep run` cheaper? An in-process, paired A/B of batch layouts (issue 15).

Why: the Spark path pushes each key group's records of a micro-batch into the group's own engine, and
the same card-testing records cost ~30 % less CPU per record that way than in one engine (2026-11-28f,
pre-decoded events).  This asks whether `cep run`'s fused loop (parse a batch with ``decode.plain``,
then ``Engine.push_records``) can get that gain, parse and routing included.

Each variant steps through the same stream with its own engines, ``--step`` records at a time; the
variants alternate per step (the order rotated every step and pass), each step timed with
``time.process_time``, so they see the same machine state (on the shared machine the CPU cost of the
same work moves by 30-80 % within minutes).  The first step of each pass (compile, warm-up) is left
out.  Prints per variant: us per record, the outputs, and its per-step ratio to the first variant
(median, quartiles) and the total ratio.

Variants (``KIND[:ARG[:ARG]]``):

- ``one[:B]``: one engine, as `cep run`: ``decode.plain`` + ``push_records`` per batch of B (256, the
  run loop's tick) lines;
- ``groups:G[:SUB]``: per step, the lines parsed SUB at a time (default: the whole step), each record's
  lateness decided in input order (the highest time so far) and routed by ``hash(partition key) % G``
  (``cep.plan.partition.partition_attrs``), each group's records pushed into the group's own engine
  (``push_records``), then every engine brought to the step's watermark (``advance_watermark``);
- ``route:G``: the parse and the routing alone; ``parse``: the parse alone.

The grouped variants number each group's records as consecutive lines (``push_records`` takes a first
line number), so their ids differ from one engine's: the outputs are compared as multisets of lines
without the id (checked, the run fails otherwise).  The patterns: one or more keyed patterns without
decided matches (the tool does not route decided matches' gaps), lateness 0.

``--only VARIANT --records N``: run that variant alone over the first N records and exit (for
cachegrind: ``valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64
--LL=524288,8,64 python -m bench.keygroups_ab P D --only groups:64 --records 40000``, minus the same at
20,000, over 20,000: per-record counts with the L2 as cachegrind's last level).

Usage: python -m bench.keygroups_ab PATTERN DATA [--step N] [--passes P] VARIANT [VARIANT ...]
Results: bench/results/sparse.md (2026-11-28g shard).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator

import orjson


def _no_id(line: bytes) -> bytes:
    d = orjson.loads(line)
    d.pop("id", None)
    return orjson.dumps(d, option=orjson.OPT_SORT_KEYS)


def main(argv: list[str] | None = None) -> int:
    from cep.commands.heap import stream_gc
    from cep.io.readers import make_decoder
    from cep.io.writers import encode_outputs
    from cep.lang.compiler import compile_files
    from cep.plan.partition import partition_attrs
    from cep.runtime.engine import Engine

    ap = argparse.ArgumentParser(prog="python -m bench.keygroups_ab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pattern")
    ap.add_argument("data")
    ap.add_argument("variants", nargs="*", default=["one", "groups:64"])
    ap.add_argument("--step", type=int, default=16384, help="records per step (and per grouped batch)")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--only", help="run this variant alone (cachegrind)")
    ap.add_argument("--records", type=int, default=0, help="with --only: the first N records")
    args = ap.parse_intermixed_args(sys.argv[1:] if argv is None else argv)

    patterns = compile_files([args.pattern])
    attrs: dict[str, tuple[str, ...]] = {}
    for cp in patterns:
        a = partition_attrs(cp)
        if a is None or cp.decided:
            raise SystemExit(f"{cp.name}: the tool routes keyed patterns without decided matches only")
        attrs.update(a)
    with open(args.data, "rb") as f:
        lines = f.readlines()
    if args.only and args.records:
        lines = lines[:args.records]
    n, step = len(lines), args.step
    plain = make_decoder().plain

    def one(b: int = 256) -> Iterator[list]:
        eng = Engine(patterns, lines=True)
        push = eng.push_records
        for lo0 in range(0, n, step):
            got = []
            for lo in range(lo0, min(n, lo0 + step), b):
                recs = plain(lines[lo:lo + b])
                took, outs = push(recs, lo + 1)
                if took != len(recs):
                    raise SystemExit(f"line {lo + took + 1}: not a plain insert (the tool takes those only)")
                if outs:
                    got += encode_outputs(outs)
            yield got

    def groups(g: int, sub: int = 0, upto: str = "") -> Iterator[list]:
        engs = [Engine(patterns, lines=True) for _ in range(g)]
        mx = wm = -float("inf")
        sub = sub or step
        for lo in range(0, n, step):
            part = lines[lo:lo + step]
            rs: list[list] = [[] for _ in range(g)]
            apps = [r.append for r in rs]
            for slo in range(0, len(part), sub):
                recs = plain(part[slo:slo + sub])
                if upto == "parse":
                    continue
                for rec in recs:  # the run's lateness (lateness 0), then the key group
                    ts = rec["ts"]
                    if ts > mx:
                        mx = wm = ts
                    elif ts < wm:
                        continue
                    a = attrs.get(rec["type"])
                    k = None if a is None else rec.get(a[0]) if len(a) == 1 else tuple(map(rec.get, a))
                    try:
                        apps[hash(k) % g](rec)
                    except TypeError:
                        apps[0](rec)
            if upto:
                yield []
                continue
            got = []
            for gi, recs in enumerate(rs):
                if recs:
                    took, outs = engs[gi].push_records(recs, lo + 1)
                    if took != len(recs):
                        raise SystemExit("a record the engine's loop does not take (the tool takes plain inserts only)")
                    if outs:
                        got += encode_outputs(outs)
            for eng in engs:
                eng.advance_watermark(wm)
            yield got

    def make(spec: str) -> Iterator[list]:
        kind, *a = spec.split(":")
        x = [int(v) for v in a]
        if kind == "one":
            return one(*x)
        if kind == "groups":
            return groups(*x)
        if kind == "route":
            return groups(*x, upto="route")
        if kind == "parse":
            return groups(1, upto="parse")
        raise SystemExit(f"unknown variant {spec!r}")

    if args.only:
        with stream_gc():
            for _ in make(args.only):
                pass
        return 0

    names = args.variants
    times: dict[str, list[float]] = {k: [] for k in names}
    outs: dict[str, Counter] = {k: Counter() for k in names}
    clock = time.process_time
    for p in range(args.passes):
        gens = {k: make(k) for k in names}
        with stream_gc():
            for s in range(-(-n // step)):
                r = (s + p) % len(names)
                for k in names[r:] + names[:r]:
                    t = clock()
                    got = next(gens[k])
                    dt = clock() - t
                    if s:  # the first step of a pass: compile, warm-up
                        times[k].append(dt)
                    if p == 0:
                        outs[k].update(x for chunk in got for x in chunk.splitlines())
        del gens
        gc.collect()
    base = names[0]
    ref = Counter(_no_id(x) for x in outs[base].elements())
    steady = sum(min(step, n - s * step) for s in range(1, -(-n // step))) * args.passes
    for k in names:
        v = times[k]
        rs = [a / b for a, b in zip(v, times[base], strict=True)]
        q = statistics.quantiles(rs, n=4) if len(rs) > 1 else [rs[0]] * 3
        same = "" if k.startswith(("route", "parse")) else (
            "  outputs = " + base if Counter(_no_id(x) for x in outs[k].elements()) == ref else "  OUTPUTS DIFFER")
        print(f"{k:16s} {sum(v) / steady * 1e6:6.2f} us/record  outputs {sum(outs[k].values())}  vs {base}: "
              f"median {statistics.median(rs):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f}), total {sum(v) / sum(times[base]):.3f}{same}")
        if same == "  OUTPUTS DIFFER":
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
