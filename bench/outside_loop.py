"""What `cep run` spends outside its record loop: whole-process CPU time (``wait4``) split by phase.

Why: issue 15's per-event target is about the loop, but a user (and the card_target benchmark against
Esper) pays the whole process: the interpreter's own start (``site``: ``.pth`` files of the environment,
an editable install's finder), cep's imports, compiling the patterns and building the engine, then the
loop, the end of the input (the watermark to +infinity, closing the sinks), the summary and the
interpreter's exit. Each phase is the CPU time of the process (``time.process_time``) between marks set
by wrappers around the command's own steps (``cep.commands.run._Run.setup``, ``loop``, ``finish``,
``summary``); the interpreter's start is the CPU time at the child's first line, its exit the process's
total (``wait4``: user + system) minus the time at ``atexit``. The command run is ``cep.cli.main`` as the
console script runs it (``cep run PATTERN -i DATA -o /dev/null -q``).

With ``--base DIR`` another checkout runs the same, rounds interleaved (its folder first on PYTHONPATH,
from its root), and the whole-process CPU ratio per round is printed.

Usage: python -m bench.outside_loop PATTERN DATA [--rounds N] [--base DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench import procs

# the child: marks at each step of the real command, printed at atexit (before the interpreter's teardown)
CHILD = r"""
import time
_T = [("interpreter start (site, .pth files)", time.process_time())]
import atexit, os, sys
sys.path[:1] = [] if sys.path[0] == '' else sys.path[:1]
_pattern, _data = sys.argv[1:3]
sys.argv = ["cep", "run", _pattern, "-i", _data, "-o", "/dev/null", "-q"]
from cep.cli import main
import cep.commands.run as _run
_T.append(("imports (cep.cli, cep.commands.run)", time.process_time()))
_R = _run._Run
def _mark(name, f):
    def g(self, *a):
        try:
            return f(self, *a)
        finally:
            _T.append((name, time.process_time()))
    return g
def _loop(self, _f=_R.loop):
    _T.append(("run(): heap, gc, between setup and loop", time.process_time()))
    try:
        return _f(self)
    finally:
        _T.append(("loop (read, decode, push, encode, write)", time.process_time()))
_R.setup = _mark("setup (compile patterns, build the engine, open input and output)", _R.setup)
_R.loop = _loop
_R.finish = _mark("end of input (watermark to +inf) and closing the sinks", _R.finish)
_R.summary = _mark("summary", _R.summary)
def _report():
    _T.append(("after the command (exit status, gc.freeze)", time.process_time()))
    prev, out = 0.0, []
    for name, t in _T:
        out.append(f"{name}\t{t - prev:.6f}")
        prev = t
    os.write(2, ("PHASES " + ";".join(out) + f";AT_EXIT\t{prev:.6f}\n").encode())
atexit.register(_report)
main()
"""

TEARDOWN = "interpreter exit (teardown after atexit)"
WHOLE = "whole process (wait4: user + system)"


def run_once(pattern: Path, data: Path, checkout: Path | None) -> dict[str, float]:
    env = procs.base_env(checkout) if checkout is not None else dict(os.environ)
    procs.with_bytecode(env if checkout is not None else None)
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(pattern.resolve()), str(data.resolve())],
                         cwd=str(checkout or procs.REPO), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read().decode()  # (small: the summary is off)
    _, status, ru = os.wait4(p.pid, 0)
    p.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"outside_loop: cep run exited {os.waitstatus_to_exitcode(status)}: {err[-2000:]}")
    line = next(x for x in err.splitlines() if x.startswith("PHASES "))
    parts = dict(x.split("\t") for x in line[len("PHASES "):].split(";"))
    cpu = ru.ru_utime + ru.ru_stime
    at_exit = float(parts.pop("AT_EXIT"))
    got = {k: float(v) for k, v in parts.items()}
    got[TEARDOWN] = cpu - at_exit
    got[WHOLE] = cpu
    return got


def table(runs: list[dict[str, float]]) -> list[str]:
    keys = list(runs[0])
    whole = statistics.median(r[WHOLE] for r in runs)
    lines = ["| phase | CPU s, median | min-max | share of the whole |", "|---|---|---|---|"]
    for k in keys:
        v = [r[k] for r in runs]
        lines.append(f"| {k} | {statistics.median(v):.4f} | {min(v):.4f}-{max(v):.4f} | "
                     f"{statistics.median(v) / whole * 100:.1f}% |")
    out = statistics.median(r[WHOLE] - r["loop (read, decode, push, encode, write)"] for r in runs)
    lines.append(f"| outside the loop (whole - loop) | {out:.4f} | | {out / whole * 100:.1f}% |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.outside_loop", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pattern", type=Path)
    ap.add_argument("data", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base", type=Path, help="another checkout, run interleaved with this one")
    args = ap.parse_args(argv)
    names = (["base", "this checkout"] if args.base else ["this checkout"])
    got: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    for i in range(args.rounds):
        for n in names:
            r = run_once(args.pattern, args.data, args.base if n == "base" else None)
            got[n].append(r)
            print(f"round {i + 1} {n}: whole {r[WHOLE]:.3f} s CPU, loop "
                  f"{r['loop (read, decode, push, encode, write)']:.3f}", file=sys.stderr, flush=True)
    load = open("/proc/loadavg").read().split()[0]
    print(f"`python -m bench.outside_loop {' '.join(sys.argv[1:] if argv is None else argv)}` "
          f"({args.rounds} rounds, load average {load} at the end)")
    for n in names:
        print(f"\n{n}:\n")
        print("\n".join(table(got[n])))
    if args.base:
        rs = sorted(t[WHOLE] / b[WHOLE] for b, t in zip(got["base"], got["this checkout"], strict=True))
        print(f"\nwhole-process CPU, this checkout / base, per round: {' '.join(f'{x:.3f}' for x in rs)} "
              f"(median {statistics.median(rs):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
