"""The `cep run` loop against its parse-only floor, both in CPU time of this process.

Why: on a shared machine wall time moves 2-10x between runs; CPU time of one process does not, so an
A/B of two checkouts (run this from each checkout's root, interleaved) compares the work done.
``bench.where_time_goes.floor_and_loop`` times the parse-only pass and the real loop (``_Run.loop``,
timed by the command itself); both clocks are switched to ``time.process_time`` here.

Usage: python -m bench.floor_loop PATTERN DATA
"""

from __future__ import annotations

import sys
import time
import types
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    import bench.where_time_goes as where
    import cep.commands.run as run

    cpu = types.SimpleNamespace(perf_counter=time.process_time, monotonic=time.monotonic)
    where.time, run.time = cpu, cpu
    try:
        r = where.floor_and_loop(Path(args[0]), Path(args[1]))
    finally:
        where.time, run.time = time, time
    n = r["records"]
    print(f"floor {r['floor_s'] / n * 1e6:.2f} us  loop {r['loop_s'] / n * 1e6:.2f} us  "
          f"ratio {r['loop_s'] / r['floor_s']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
