"""How ``cep check`` scales with the size of its input (issue 12): ``python -m bench.pattern_size``.

Why: a careless or hostile pattern file (an AND over 1,000 types, 50,000 nested calls, a 1.2 MB
line, 10,000 patterns) must be checked in time and memory about linear in its size, with bounded
output.  Each input is checked in a child process of its own (``cep.commands.check.run_check``,
stdout/stderr counted, not kept); the table gives CPU seconds of the check (wall seconds in
brackets: on a loaded machine the CPU time is the steadier figure), peak memory, bytes printed and the
scaling exponent between consecutive sizes (log time ratio / log size ratio: 1 is linear).
``--base DIR`` runs every input also against another checkout (e.g. the commit before) in the
same run, interleaved, for before/after ratios; a run past ``--timeout`` is reported as such.
``--repeat N`` keeps the fastest of N runs of each (the machine is shared: the fastest is
the least disturbed).  ``--startup N`` also times ``cep run`` of one shipped pattern on its
example input, N runs per tree interleaved: checking got faster, running must not start slower.
``--phases N`` also splits the check of the 10,000 ordinary patterns into its phases (interpreter
start, imports and tables, parse, semantic checks, compile without code, summaries), CPU
seconds, the fastest of N runs per tree: where the time goes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import io, json, sys, time
class Count(io.TextIOBase):
    n = 0
    def write(self, s):
        self.n += len(s); return len(s)
from cep.commands.check import run_check
out, err = Count(), Count()
t0, c0 = time.perf_counter(), time.process_time()
rc = run_check([sys.argv[1]], out, err)
el, cpu = time.perf_counter() - t0, time.process_time() - c0
hwm = 0
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        hwm = int(line.split()[1]) // 1024
print(json.dumps({"wall": el, "seconds": cpu, "rc": rc, "printed": out.n + err.n, "peak_mb": hwm}))
"""


def many(n: int) -> str:
    """``n`` ordinary patterns (card testing with varied names and constants)."""
    return "".join(
        f"PATTERN p{i}\n  SEQ(Txn s1, Txn s2, Txn big)\n"
        f"  WHERE s1.amount < {100 + i % 50} AND s2.amount < 100 AND big.amount > {400 + i % 7}\n"
        f"  PARTITION BY card\n  WITHIN {1 + i % 3} hour\n"
        "  EMIT s1.card AS card, s1.ts AS first_ts, big.amount AS amount\n\n"
        for i in range(n)
    )


_TYPES = ["Txn", "Login", "Quote", "Alert", "Trade"]


def varied(n: int) -> str:
    """``n`` patterns whose shapes rarely repeat (seeded): 2-5 atoms, SEQ or AND, 0-6 conjuncts of
    several forms, PARTITION BY and WITHIN or not, 1-5 EMIT items."""
    rnd = random.Random(n)
    out = []
    for i in range(n):
        aliases = [f"e{j}" for j in range(rnd.randint(2, 5))]
        op = rnd.choice(["SEQ", "AND"])
        types = rnd.sample(_TYPES, len(aliases)) if op == "AND" else [rnd.choice(_TYPES) for _ in aliases]
        elements = ", ".join(f"{t} {a}" for t, a in zip(types, aliases, strict=True))
        text = f"PATTERN q{i}\n  {op}({elements})\n"
        conjuncts = []
        for _ in range(rnd.randint(0, 6)):
            a, b = rnd.choice(aliases), rnd.choice(aliases)
            conjuncts.append(rnd.choice([
                f"{a}.amount {rnd.choice(['<', '>', '=', '!=', '<=', '>='])} {rnd.randint(0, 999)}",
                f"{a}.country = {b}.country", f"{a}.user IN ('x', 'y')",
                f"{a}.amount + {b}.amount > {rnd.randint(1, 99)}", f"NOT {a}.flag",
                f"{a}.code IN ({', '.join(str(rnd.randint(0, 9)) for _ in range(rnd.randint(1, 4)))})",
            ]))
        if conjuncts:
            text += "  WHERE " + rnd.choice([" AND ", " OR "]).join(conjuncts) + "\n"
        if rnd.random() < 0.6:
            text += "  PARTITION BY " + ", ".join(rnd.sample(["card", "user", "ip"], rnd.randint(1, 2))) + "\n"
        if rnd.random() < 0.8:
            text += f"  WITHIN {rnd.randint(1, 90)} {rnd.choice(['s', 'min', 'hour', ''])}\n"
        items = [f"{rnd.choice(aliases)}.{rnd.choice(['amount', 'ts', 'user'])}" + (f" AS o{k}" if rnd.random() < 0.5
                 else "") for k in range(rnd.randint(1, 5))]
        out.append(text + "  EMIT " + ", ".join(dict.fromkeys(items)) + "\n\n")
    return "".join(out)


def shipped(n: int) -> str:
    """``n`` patterns: the shipped ones, comments included, over and over with unique names."""
    texts = [p.read_text() for p in sorted((ROOT / "patterns").glob("*.pattern"))]
    out = []
    for i in range(n):
        out.append(re.sub(r"(?im)^(\s*PATTERN\s+)(\w+)", rf"\g<1>\g<2>_{i}", texts[i % len(texts)]))
    return "\n".join(out)


def and_types(k: int) -> str:
    return "PATTERN p\n  AND(" + ", ".join(f"T{i} e{i}" for i in range(k)) + ")\n  WITHIN 1 h\n"


def nested_calls(d: int) -> str:
    return "PATTERN p\n  SEQ(A a, B b)\n  WHERE " + "f(" * d + "a.x" + ")" * d + " > 1\n"


def long_line(m: int) -> str:
    return "PATTERN p\n  SEQ(A a, B b)\n  WHERE " + " OR ".join(f"a.x{i} > {i}" for i in range(m)) + "\n"


FAMILIES: dict[str, tuple[Callable[[int], str], list[int]]] = {
    "ordinary patterns in one file": (many, [1000, 2500, 10000]),
    "shipped patterns repeated (comments kept)": (shipped, [1000, 10000]),
    "AND over k types, WITHIN": (and_types, [8, 16, 32, 1000]),
    "nested calls f(f(...))": (nested_calls, [1000, 5000, 50000]),
    "one long WHERE line (conjuncts)": (long_line, [6000, 20000, 60000]),
    "varied patterns (shapes rarely repeat)": (varied, [1000, 10000]),
}


def measure(path: Path, tree: Path, timeout: float, repeat: int = 1) -> dict:
    """The fastest of ``repeat`` runs (a stopped or failed run ends the series)."""
    best: dict = {}
    for _ in range(repeat):
        res = _measure_once(path, tree, timeout)
        if res.get("seconds") is None:
            return res
        if not best or res["seconds"] < best["seconds"]:
            best = res
    return best


def _measure_once(path: Path, tree: Path, timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    try:
        r = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, env=env,
                           timeout=timeout, cwd=str(tree))
    except subprocess.TimeoutExpired:
        return {"seconds": None, "timeout": timeout}
    if r.returncode != 0:
        return {"seconds": None, "error": r.stderr.decode()[-300:]}
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


_PHASES = r"""
import gc, json, sys, time
cpu = time.process_time
t = {"interpreter start": cpu()}
c = cpu()
from cep.commands.check import summarize
from cep.lang import parser
from cep.lang.checker import check_pattern
from cep.lang.compiler import compile_pattern, without_code
parser._tables()
t["imports and tables"] = cpu() - c
gc.disable()  # (as cep check runs)
text = parser.read_pattern_file(sys.argv[1])
c = cpu()
patterns, _issues, _names = parser._parse_patterns(text, sys.argv[1])
t["parse (table loop and syntax tree)"] = cpu() - c
c = cpu()
parser._TABLES = parser._table_parser()
parser._TABLES._segments = frozenset()  # (no generated shapes)
parser._parse_patterns(text, sys.argv[1])
t["parse again, the table loop alone (not in the total)"] = cpu() - c
parser._TABLES = None
c = cpu()
for p in patterns:
    check_pattern(p)
t["semantic checks"] = cpu() - c
c = cpu()
with without_code():
    compiled = [compile_pattern(p) for p in patterns]
t["compile without code"] = cpu() - c
c = cpu()
out = "\n\n".join(summarize(cp, p) for cp, p in zip(compiled, patterns))
t["summaries"] = cpu() - c
print(json.dumps(t))
"""


def phases(path: Path, tree: Path) -> dict[str, float]:
    """CPU seconds of each phase of checking ``path`` (see ``_PHASES``), in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    r = subprocess.run([sys.executable, "-c", _PHASES, str(path)], capture_output=True, env=env,
                       cwd=str(tree), check=True)
    return json.loads(r.stdout.decode().strip().splitlines()[-1])


_STARTUP = r"""
import sys
from cep.cli import main
sys.argv = ["cep", "run", "card_testing", "-i", sys.argv[1], "-o", sys.argv[2]]
main()
"""


def startup(tree: Path, out_dir: Path) -> float:
    """Wall seconds of one ``cep run card_testing`` on its example input (13 events)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", _STARTUP, str(ROOT / "examples" / "card_testing" / "input.jsonl"),
                    str(out_dir / "startup.jsonl")], env=env, cwd=str(tree), check=True, capture_output=True)
    return time.perf_counter() - t0


def fmt(res: dict) -> str:
    if res.get("seconds") is None:
        return f"> {res['timeout']:.0f} s (stopped)" if "timeout" in res else "failed"
    return (f"{res['seconds']:.2f} s ({res['wall']:.2f} s wall), {res['peak_mb']} MB, {res['printed']:,} B out, "
            f"exit {res['rc']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "pattern_size"))
    ap.add_argument("--base", default=None, help="another checkout to compare with, interleaved")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--families", default=None, help="comma list of family numbers (1-6)")
    ap.add_argument("--repeat", type=int, default=1, help="keep the fastest of N runs of each input")
    ap.add_argument("--startup", type=int, default=0, help="also time N `cep run` start-ups per tree")
    ap.add_argument("--phases", type=int, default=0,
                    help="also split the check of 10,000 ordinary patterns into phases, N runs per tree")
    ap.add_argument("--phases-input", choices=["many", "varied"], default="many",
                    help="the 10,000 patterns --phases checks: ordinary ones, or ones whose shapes rarely repeat")
    args = ap.parse_args(argv)
    out = Path(args.out)
    (out / "data").mkdir(parents=True, exist_ok=True)
    chosen = list(FAMILIES.items())
    if args.families:
        chosen = [chosen[int(i) - 1] for i in args.families.split(",")]
    rows = []
    for name, (gen, sizes) in chosen:
        prev = None
        for n in sizes:
            path = out / "data" / f"{gen.__name__}_{n}.cep"
            if not path.exists():
                path.write_text(gen(n))
            size = path.stat().st_size
            res = measure(path, ROOT, args.timeout, args.repeat)
            base = measure(path, Path(args.base), args.timeout, args.repeat) if args.base else None
            slope = ""
            if prev is not None and res.get("seconds") and prev[1].get("seconds") and res["rc"] == 0:
                slope = f"{math.log(res['seconds'] / prev[1]['seconds']) / math.log(size / prev[0]):.2f}"
            rows.append((name, n, size, res, base, slope))
            print(f"{name} n={n} ({size:,} B): {fmt(res)}" + (f" | base: {fmt(base)}" if base else ""),
                  flush=True)
            prev = (size, res)
    command = " ".join(["python -m bench.pattern_size", *(argv if argv is not None else sys.argv[1:])])
    lines = ["# cep check: time and memory against pattern size", "",
             f"`{command}`, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.1f} "
             f"on {os.cpu_count()} cores.", "",
             "| input | n | bytes | this tree | exponent | " + ("base | ratio |" if args.base else ""),
             "|---|---|---|---|---|" + ("---|---|" if args.base else "")]
    for name, n, size, res, base, slope in rows:
        cells = [name, f"{n:,}", f"{size:,}", fmt(res), slope]
        if args.base:
            ratio = ""
            if base and base.get("seconds") and res.get("seconds"):
                ratio = f"{base['seconds'] / res['seconds']:.1f}x faster"
            elif base and base.get("timeout") and res.get("seconds"):
                ratio = f"> {base['timeout'] / res['seconds']:.0f}x faster"
            cells += [fmt(base) if base else "", ratio]
        lines.append("| " + " | ".join(cells) + " |")
    if args.startup:
        lines += ["", f"`cep run card_testing` on its 13-event example, wall seconds, the fastest and the "
                      f"median of {args.startup} runs per tree, interleaved:", ""]
        trees = [("this tree", ROOT)] + ([("base", Path(args.base))] if args.base else [])
        times: dict[str, list[float]] = {name: [] for name, _ in trees}
        for _ in range(args.startup):
            for name, tree in trees:
                times[name].append(startup(tree, out / "data"))
        for name, _ in trees:
            ts = sorted(times[name])
            lines.append(f"- {name}: fastest {ts[0]:.3f} s, median {ts[len(ts) // 2]:.3f} s")
            print(lines[-1], flush=True)
    if args.phases:
        gen = many if args.phases_input == "many" else varied
        path = out / "data" / f"{gen.__name__}_10000.cep"
        if not path.exists():
            path.write_text(gen(10000))
        trees = [("this tree", ROOT)] + ([("base", Path(args.base))] if args.base else [])
        best: dict[str, dict[str, float]] = {name: {} for name, _ in trees}
        for _ in range(args.phases):
            for name, tree in trees:
                for phase, sec in phases(path, tree).items():
                    best[name][phase] = min(sec, best[name].get(phase, sec))
        lines += ["", f"Where the time goes: `cep check` of `{gen.__name__}(10000)` by phase, CPU seconds, "
                      f"the fastest of {args.phases} runs per tree, interleaved:", "",
                  "| phase | " + " | ".join(name for name, _ in trees) + " |",
                  "|---|" + "---|" * len(trees)]
        for phase in best["this tree"]:
            lines.append(f"| {phase} | " + " | ".join(f"{best[name][phase]:.2f}" for name, _ in trees) + " |")
        lines.append("| total | " + " | ".join(f"{sum(v for p, v in best[name].items() if 'again' not in p):.2f}"
                                               for name, _ in trees) + " |")
        print("\n".join(lines[-len(best['this tree']) - 3:]), flush=True)
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'results.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
