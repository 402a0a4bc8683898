"""Cache misses and branch mispredictions per record of the `cep run` loop and of its parse-only
floor, per checkout (cachegrind with its cache and branch simulation).

Why: on card testing's dense 1,000-card stream the loop's CPU time is 5-9x the floor's while its
instructions are 3x: an engine instruction costs more than a parser instruction.
``bench.loop_instructions`` counts instructions only; this counts what makes them dear, with the
caches of this machine (AMD EPYC, Zen 3: 32 KiB 8-way L1 I and D, 512 KiB 8-way L2 per core;
cachegrind simulates two levels, so its "LL" here is the L2, and an LL miss is a trip to the
shared L3 or to memory, the dearer the busier the machine).  Each figure is one child process
over the first N records of DATA minus the same child over an empty file, over N;
PYTHONHASHSEED=0.  The simulation is a model (its branch predictor is simpler than the
hardware's, which predicts the interpreter's indirect jumps much better): compare checkouts and
loop against floor with it, not cycles.

Usage: python -m bench.loop_misses PATTERN DATA N CHECKOUT [CHECKOUT ...]
(valgrind on PATH; a few minutes per checkout for N = 20,000 on card testing)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from bench.loop_instructions import _CHILD, head_and_empty

# cachegrind's summary lines -> our names
_EVENTS = {"I": r"I\s+refs:\s+([\d,]+)", "I1 miss": r"I1\s+misses:\s+([\d,]+)",
           "D1 miss": r"D1\s+misses:\s+([\d,]+)", "L2 miss": r"LL\s+misses:\s+([\d,]+)",
           "mispredict": r"Mispredicts:\s+([\d,]+)"}
_CACHES = ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=524288,8,64"]


def counts(checkout: str, mode: str, pattern: str, data: str) -> dict[str, int]:
    """The summary counts of one child process over ``checkout``'s cep."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout), "PYTHONHASHSEED": "0"}
    r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=yes", *_CACHES,
                        "--cachegrind-out-file=/dev/null", sys.executable, "-c", _CHILD, mode, pattern, data],
                       cwd=os.path.abspath(checkout), env=env, capture_output=True, text=True, check=True)
    out = {}
    for name, rx in _EVENTS.items():
        m = re.search(rx, r.stderr)
        if m is None:
            raise RuntimeError(f"no {name} count in valgrind's output:\n{r.stderr[-2000:]}")
        out[name] = int(m.group(1).replace(",", ""))
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 4:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    pattern, data, n = os.path.abspath(args[0]), os.path.abspath(args[1]), int(args[2])
    with head_and_empty(data, n) as (head, empty):
        print(f"per record (N={n}) | " + " | ".join(_EVENTS))
        for checkout in args[3:]:
            for mode in ("floor", "loop"):
                full, none = (counts(checkout, mode, pattern, str(p)) for p in (head, empty))
                print(f"{checkout} {mode} | " + " | ".join(f"{(full[k] - none[k]) / n:,.0f}" for k in _EVENTS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
