"""Instructions per event of the engine's update loop, counted by valgrind (cachegrind), per checkout.

Why: on a shared 2-core machine CPU time moves with the load (other processes evict caches and
steal cycles); the number of instructions the interpreter executes does not.  For changes to the
engine's generated code it is the figure an A/B can trust at any load (it does not see cache misses:
quote it beside a CPU-time figure from a quiet moment).  Counted: ``Engine.push_batch`` over the first
N events of DATA (decoded up front, batches of 512, GC off), minus the same process with no event
pushed, over N (both after a warm-up engine has run the first 5,000 events, so that the generated code
the engine runs is compiled before counting: ``cep.codegen`` compiles at first call); PYTHONHASHSEED=0 on both so dict layouts are alike.

Usage: python -m bench.engine_instructions PATTERN DATA N CHECKOUT [CHECKOUT ...]
(valgrind on PATH; about a minute per checkout for N = 30,000)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

_CHILD = """
import gc, sys
from cep.io.readers import make_decoder
from cep.lang.compiler import compile_files
from cep.runtime.engine import Engine
pattern, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
decode = make_decoder()
with open(data, "rb") as f:
    events = [decode(str(i + 1), line) for i, line in zip(range(n), f)]
patterns = compile_files([pattern])
with open(data, "rb") as f:  # warm-up (both modes): generated code compiles at its first call (cep.codegen),
    warm = Engine(patterns, lateness=0)  # once per source: the counted engine then runs compiled code only
    warm.push_batch([decode(str(i + 1), line) for i, line in zip(range(min(n, 5000)), f)])
engine = Engine(patterns, lateness=0)
gc.disable()
if sys.argv[4] == "run":
    for i in range(0, len(events), 512):
        engine.push_batch(events[i:i + 512])
"""


def cachegrind_count(checkout: str, child: str, *args: str) -> int:
    """Instructions of one child process (``python -c child args``) over ``checkout``'s cep.

    The one home of how a count is taken (``bench.loop_instructions`` uses it too): the checkout
    first on PYTHONPATH and as the working directory, PYTHONHASHSEED=0, cachegrind without cache
    simulation."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout), "PYTHONHASHSEED": "0"}
    r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                        sys.executable, "-c", child, *args],
                       cwd=os.path.abspath(checkout), env=env, capture_output=True, text=True, check=True)
    m = re.search(r"I\s+refs:\s+([\d,]+)", r.stderr)
    if m is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{r.stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def instructions(checkout: str, pattern: str, data: str, n: int, run: bool) -> int:
    """Instructions of the engine child over ``checkout``'s cep: N events pushed, or none."""
    return cachegrind_count(checkout, _CHILD, pattern, data, str(n), "run" if run else "idle")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 4:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    pattern, data, n = os.path.abspath(args[0]), os.path.abspath(args[1]), int(args[2])
    for checkout in args[3:]:
        per = (instructions(checkout, pattern, data, n, True) - instructions(checkout, pattern, data, n, False)) / n
        print(f"{checkout}: {per:,.0f} instructions/event")
    return 0


if __name__ == "__main__":
    sys.exit(main())
