"""How planning scales with the number of elements: ``python -m bench.plan_size``.

Why: WITHIN over an AND of k elements was k(k-1) pairwise band predicates, and the planner's
greedy search for the largest acyclic subset of predicates ran one GYO reduction per residual
pair: ~30 s for 32 types.  It is now bands between neighbours plus one span predicate
(``max - min <= w``).  This bench times, for AND and SEQ with WITHIN over k types (with and
without PARTITION BY), each stage ``cep run`` and ``cep explain`` go through before the first
record: compiling the pattern, planning it, building the engine (which plans again and
generates the update and enumeration code), and the whole ``cep explain`` text; and, on the
runtime side, the CPU time of a dense AND with WITHIN over 4-10 types (the span is checked at
enumeration, so rejected candidates cost time there).  Each
measurement runs in a child process of its own; ``--base DIR`` runs the same inputs against
another checkout (the commit before) interleaved, for before/after ratios, and a child past
``--timeout`` is reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import io, json, sys, time
from cep.lang.compiler import compile_files
from cep.plan.planner import plan_pattern
from cep.runtime.engine import Engine
from cep.commands.explain import run_explain
path = sys.argv[1]
t0 = time.perf_counter()
cps = compile_files([path])
t1 = time.perf_counter()
plan = plan_pattern(cps[0])
t2 = time.perf_counter()
Engine(cps)
t3 = time.perf_counter()
out, err = io.StringIO(), io.StringIO()
rc = run_explain([path], out=out, err=err)
t4 = time.perf_counter()
print(json.dumps({"compile": t1 - t0, "plan": t2 - t1, "engine": t3 - t2, "explain": t4 - t3, "rc": rc,
                  "predicates": len(cps[0].predicates), "residual": len(plan.residual)}))
"""

SIZES = [4, 8, 12, 16, 20, 24, 32]

# the runtime side: a dense AND with WITHIN (every type, two keys, one event per time unit), so that
# the enumeration's rejected candidates (residual span filter) show
_RUN_CHILD = r"""
import json, random, sys, time
from cep.event import Event
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine
k, n = int(sys.argv[1]), int(sys.argv[2])
text = "PATTERN p\n  AND(" + ", ".join(f"T{i} e{i}" for i in range(k)) + ")\n  PARTITION BY g\n  WITHIN 40\n"
rng = random.Random(1)
events = [Event(f"T{rng.randrange(k)}", i, {"g": rng.randrange(2)}, str(i)) for i in range(n)]
eng = Engine(compile_text(text), lateness=1)
t0 = time.process_time()
matches = sum(len(eng.push(e)) for e in events)
print(json.dumps({"seconds": time.process_time() - t0, "matches": matches}))
"""
RUN_SIZES = [4, 6, 8, 10]


def pattern(op: str, k: int, partition: bool) -> str:
    text = f"PATTERN p\n  {op}(" + ", ".join(f"T{i} e{i}" for i in range(k)) + ")\n"
    if partition:
        text += "  PARTITION BY key\n"
    return text + "  WITHIN 10\n"


def measure(path: Path, tree: Path, timeout: float) -> dict:
    return _child(_CHILD, [str(path)], tree, timeout)


def _child(code: str, args: list[str], tree: Path, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    try:
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, env=env,
                           timeout=timeout, cwd=str(tree))
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if r.returncode != 0:
        return {"error": r.stderr.decode()[-300:]}
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


def fmt(res: dict | None) -> str:
    if res is None:
        return ""
    if "timeout" in res:
        return f"> {res['timeout']:.0f} s (stopped)"
    if "error" in res:
        return "failed"
    return (f"{res['compile']:.3f} / {res['plan']:.3f} / {res['engine']:.3f} / {res['explain']:.3f} "
            f"({res['predicates']} preds, {res['residual']} residual)")


def _secs(res: dict) -> str:
    if "timeout" in res:
        return f"> {res['timeout']:.0f} s (stopped)"
    return f"{res['seconds']:.2f} s" if "seconds" in res else "failed"


def ratio(res: dict, base: dict | None, stage: str) -> str:
    if base is None or "timeout" in res or "error" in res:
        return ""
    if "timeout" in base:
        # the child times every stage in one run: only the total is known to exceed the timeout
        total = res["compile"] + res["plan"] + res["engine"] + res["explain"]
        return f"> {base['timeout'] / total:.0f}x (all stages)"
    if "error" in base:
        return ""
    return f"{base[stage] / res[stage]:.1f}x"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "plan_size"))
    ap.add_argument("--base", default=None, help="another checkout to compare with, interleaved")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--run-sizes", default=",".join(map(str, RUN_SIZES)),
                    help="k for the runtime side (empty: skip)")
    ap.add_argument("--events", type=int, default=2000)
    args = ap.parse_args(argv)
    out = Path(args.out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    rows = []
    for op in ("AND", "SEQ"):
        for partition in (False, True):
            for k in map(int, args.sizes.split(",")):
                path = out / "data" / f"{op.lower()}_{k}{'_part' if partition else ''}.cep"
                path.write_text(pattern(op, k, partition))
                res = measure(path, ROOT, args.timeout)
                base = measure(path, Path(args.base), args.timeout) if args.base else None
                rows.append((op, partition, k, res, base))
                print(f"{op} k={k} partition={partition}: {fmt(res)}" + (f" | base: {fmt(base)}" if base else ""),
                      flush=True)
    runs = []
    for k in [int(x) for x in args.run_sizes.split(",") if x]:
        res = _child(_RUN_CHILD, [str(k), str(args.events)], ROOT, args.timeout)
        base = _child(_RUN_CHILD, [str(k), str(args.events)], Path(args.base), args.timeout) if args.base else None
        runs.append((k, res, base))
        print(f"run AND k={k}: {res}" + (f" | base: {base}" if base else ""), flush=True)
    cmd = "python -m bench.plan_size" + (f" --base {args.base}" if args.base else "")
    lines = ["# Planning time against pattern size (AND and SEQ with WITHIN over k types)", "",
             f"`{cmd}`, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
             f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.", "",
             "Seconds: compile / plan / engine (plans again, generates code) / `cep explain` text.", "",
             "| pattern | k | this tree | " + ("base | plan: base/this | engine: base/this |" if args.base else ""),
             "|---|---|---|" + ("---|---|---|" if args.base else "")]
    for op, partition, k, res, base in rows:
        cells = [op + (" + PARTITION BY" if partition else ""), str(k), fmt(res)]
        if args.base:
            cells += [fmt(base), ratio(res, base, "plan"), ratio(res, base, "engine")]
        lines.append("| " + " | ".join(cells) + " |")
    if runs:
        lines += ["", f"Runtime: a dense AND with WITHIN 40 over k types, {args.events:,} events in time order "
                  "(one per time unit, random type, two keys); CPU seconds of `Engine.push` over all events.", "",
                  "| k | matches | this tree | " + ("base | base/this |" if args.base else ""),
                  "|---|---|---|" + ("---|---|" if args.base else "")]
        for k, res, base in runs:
            cells = [str(k), f"{res.get('matches', '?'):,}", _secs(res)]
            if args.base and base is not None:
                same = "" if base.get("matches") == res.get("matches") else " (matches differ!)"
                cells += [_secs(base), (f"{base['seconds'] / res['seconds']:.2f}x" if "seconds" in base and
                                        "seconds" in res else "") + same]
            lines.append("| " + " | ".join(cells) + " |")
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
