"""CPU per engine construction (``Engine(...)``) and per restore (``Engine.loads``), cold and warm, per checkout.

Why: on Spark's local[2] every key group's engine is rebuilt from its saved state every micro-batch
(issue 11), so the cost of building an engine is paid ~64 times per 10^5 events.  Each child
process (one per checkout and round, the rounds interleaving the checkouts) compiles the patterns,
then times with ``time.process_time``: the first three ``Engine(...)`` of the process one by one
(cold: planning, generating, the first calls compile), then the median of R more (warm), then the
median of R ``Engine.loads`` of a state (the engine after the first N events of DATA, if given,
else an empty one), and the first ``Engine.loads`` of that state in a fresh process of its own
(cold).  GC is off while timing.

``--groups G``: instead, the shape of the Spark state step on local[2] (where every key group's engine is
rebuilt from its state every micro-batch): per micro-batch of ``--batch`` events, per key group (the partition
key's hash mod G), ``Engine.loads`` + ``push_batch`` + ``dumps``; CPU of it all and of the loads alone.

Usage: python -m bench.construction PATTERN[,PATTERN...] [--data DATA --events N] --rounds K CHECKOUT [CHECKOUT ...]
       python -m bench.construction PATTERN --data DATA --events N --groups G --batch B --rounds K CHECKOUT [...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

_CHILD = r"""
import gc, json, sys, time
from cep.lang.compiler import compile_files
from cep.runtime.engine import Engine
patterns, data, n, reps, mode = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ps = compile_files(patterns)
state_file = sys.argv[6]
if mode == "state":
    eng = Engine(ps, lateness=0)
    if data:
        from cep.io.readers import make_decoder
        decode = make_decoder()
        with open(data, "rb") as f:
            eng.push_batch([decode(str(i + 1), line) for i, line in zip(range(n), f)])
    open(state_file, "wb").write(eng.dumps())
    sys.exit(0)
if mode == "groups":  # the Spark state step's shape: per micro-batch, per key group, loads + push + dumps
    from cep.io.readers import make_decoder
    decode = make_decoder()
    groups, batch = int(sys.argv[7]), int(sys.argv[8])
    with open(data, "rb") as f:
        events = [decode(str(i + 1), line) for i, line in zip(range(n), f)]
    key = ps[0].key_attrs(ps[0].atoms[0])[0]
    states = [Engine(ps, lateness=0).dumps() for _ in range(groups)]
    gc.disable()
    t_all = t_loads = 0.0
    for b in range(0, len(events), batch):
        parts = [[] for _ in range(groups)]
        for e in events[b:b + batch]:
            parts[hash(e.fields.get(key)) % groups].append(e)
        t0 = time.process_time()
        for g in range(groups):
            t1 = time.process_time()
            eng = Engine.loads(states[g], ps)
            t_loads += time.process_time() - t1
            eng.push_batch(parts[g])
            states[g] = eng.dumps()
        t_all += time.process_time() - t0
    print(json.dumps({"batches_s": t_all, "loads_s": t_loads, "loads_ms_each": t_loads / groups / -(-len(events) // batch) * 1e3}))
    sys.exit(0)
blob = open(state_file, "rb").read()
gc.disable()
out = {}
if mode == "loads_cold":
    t = time.process_time(); Engine.loads(blob, ps); out["loads_first"] = (time.process_time() - t) * 1e3
else:
    firsts = []
    for _ in range(3):
        t = time.process_time(); Engine(ps, lateness=0); firsts.append((time.process_time() - t) * 1e3)
    out["ctor_first3"] = firsts
    xs = []
    for _ in range(reps):
        t = time.process_time(); Engine(ps, lateness=0); xs.append((time.process_time() - t) * 1e3)
    out["ctor_warm"] = sorted(xs)[len(xs) // 2]
    xs = []
    for _ in range(reps):
        t = time.process_time(); Engine.loads(blob, ps); xs.append((time.process_time() - t) * 1e3)
    out["loads_warm"] = sorted(xs)[len(xs) // 2]
print(json.dumps(out))
"""


def child(checkout: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout)}
    r = subprocess.run([sys.executable, "-c", _CHILD, *args], cwd=os.path.abspath(checkout), env=env,
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout) if r.stdout.strip() else {}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("patterns", help="pattern files, comma separated (one engine of them all)")
    ap.add_argument("checkouts", nargs="+")
    ap.add_argument("--data", default="")
    ap.add_argument("--events", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--groups", type=int, default=0,
                    help="instead: the Spark state step's shape (per micro-batch of --batch events of DATA's first "
                         "--events, per key group: Engine.loads + push_batch + dumps); CPU s of it all and of the loads")
    ap.add_argument("--batch", type=int, default=25_000)
    a = ap.parse_args(argv)
    pats = ",".join(os.path.abspath(p) for p in a.patterns.split(","))
    data = os.path.abspath(a.data) if a.data else ""
    if a.groups:
        rows: dict[str, list[dict]] = {c: [] for c in a.checkouts}
        for _ in range(a.rounds):
            for c in a.checkouts:
                rows[c].append(child(c, pats, data, str(a.events), "0", "groups", "-", str(a.groups), str(a.batch)))
        print(f"patterns {a.patterns}; first {a.events} events of {a.data}, micro-batches of {a.batch}, {a.groups} key "
              f"groups (Engine.loads + push_batch + dumps per group and batch); {a.rounds} rounds, medians")
        print(f"{'checkout':40s} {'CPU s all':>10s} {'CPU s loads':>12s} {'ms per loads':>13s}")
        for c, rs in rows.items():
            med = statistics.median
            print(f"{c:40s} {med(r['batches_s'] for r in rs):10.3f} {med(r['loads_s'] for r in rs):12.3f} "
                  f"{med(r['loads_ms_each'] for r in rs):13.3f}")
        return
    state = f"/tmp/construction_state_{os.getpid()}"
    child(a.checkouts[0], pats, data, str(a.events), "0", "state", state)
    got: dict[str, list[dict]] = {c: [] for c in a.checkouts}
    try:
        for _ in range(a.rounds):
            for c in a.checkouts:
                r = child(c, pats, data, str(a.events), str(a.reps), "warm", state)
                r.update(child(c, pats, data, str(a.events), "0", "loads_cold", state))
                got[c].append(r)
    finally:
        os.unlink(state)
    print(f"patterns {a.patterns}; state: first {a.events} events of {a.data or '(none)'}; "
          f"{a.rounds} rounds, medians (ms CPU per call)")
    print(f"{'checkout':40s} {'Engine() 1st':>12s} {'2nd':>7s} {'3rd':>7s} {'warm':>7s} {'loads 1st':>10s} {'loads warm':>10s}")
    for c, rs in got.items():
        med = statistics.median
        print(f"{c:40s} {med(r['ctor_first3'][0] for r in rs):12.2f} {med(r['ctor_first3'][1] for r in rs):7.2f} "
              f"{med(r['ctor_first3'][2] for r in rs):7.2f} {med(r['ctor_warm'] for r in rs):7.3f} "
              f"{med(r['loads_first'] for r in rs):10.2f} {med(r['loads_warm'] for r in rs):10.3f}")


if __name__ == "__main__":
    main()
