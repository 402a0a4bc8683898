"""The `cep run` loop against its parse-only floor, both in CPU time of this process, paired per chunk.

Why paired: on the shared machine the CPU cost of the same work moves by 30-80 % within minutes
(cache and core sharing with other processes), so a floor timed at one moment and the loop at
another give a ratio that is mostly the machine's state (8 runs of the unpaired tool: 3.8x-7.0x).
``bench.where_time_goes.floor_and_loop`` runs the real loop (``cep.commands.run._Run.loop``, lines
mode, timed by the command itself) and, just before the loop reads each chunk of ``--chunk`` records,
the parse-only pass over that same chunk (``parse_chunk``: ``cep.io.readers.parse_only``'s path) from
a second reader; the floor's time is taken out of the loop's. Both clocks are ``time.process_time``.
The first ``--warm`` records of each chunk are timed apart on both sides: after a switch each side
warms up again (caches, branch predictors), which no real run does (``where_time_goes._Paired``).

Prints ``floor X us  loop Y us  ratio R`` (per record of the steady parts; R = their total loop /
total floor), then the ratios per block of ``--block`` chunks (median, quartiles, min-max), then the
same over all records (warm-ups included).

Usage: python -m bench.floor_loop PATTERN DATA [--chunk N] [--warm W] [--block B]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return (xs[0],) * 3 if xs else (0.0,) * 3
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[0], q[1], q[2]


def lines(r: dict, block: int) -> list[str]:
    from bench.where_time_goes import block_ratios

    n, ns = r["records"], r["steady_records"]
    bl = block_ratios(r, block)
    q1, med, q3 = quartiles(bl)
    return [f"floor {r['floor_s'] / ns * 1e6:.2f} us  loop {r['loop_s'] / ns * 1e6:.2f} us  "
            f"ratio {r['loop_s'] / r['floor_s']:.2f}",
            f"paired: {n:,} records in chunks of {r['chunk']:,}, the first {r['warm']:,} of each apart; "
            f"{len(bl)} blocks of {block} chunk{'s' if block > 1 else ''} ({ns:,} records): ratio median {med:.2f}, "
            f"quartiles {q1:.2f}-{q3:.2f}, min {min(bl):.2f}, max {max(bl):.2f}; overall (sum / sum) "
            f"{r['loop_s'] / r['floor_s']:.2f}",
            f"all records (warm-ups included): floor {r['floor_all_s'] / n * 1e6:.2f} us  loop "
            f"{r['loop_all_s'] / n * 1e6:.2f} us  ratio {r['loop_all_s'] / r['floor_all_s']:.2f}"
            + (f"; warm-ups: floor {r['floor_warm_s'] / (n - ns) * 1e6:.2f} us  loop "
               f"{r['loop_warm_s'] / (n - ns) * 1e6:.2f} us" if n > ns else "")]


def main(argv: list[str] | None = None) -> int:
    from bench.where_time_goes import BLOCK, CHUNK, WARM

    ap = argparse.ArgumentParser(prog="python -m bench.floor_loop", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pattern")
    ap.add_argument("data")
    ap.add_argument("--chunk", type=int, default=CHUNK, help=f"records per paired chunk (default {CHUNK})")
    ap.add_argument("--warm", type=int, default=WARM,
                    help=f"records at the start of each chunk timed apart on both sides (default {WARM})")
    ap.add_argument("--block", type=int, default=BLOCK, help=f"chunks per block ratio (default {BLOCK})")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    import bench.where_time_goes as where

    r = where.floor_and_loop(Path(args.pattern), Path(args.data), args.chunk, time.process_time, warm=args.warm)
    print("\n".join(lines(r, args.block)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
