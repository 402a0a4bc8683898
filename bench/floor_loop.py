"""The `cep run` loop against its parse-only floor, both in CPU time of this process, paired per chunk.

Why paired: on the shared machine the CPU cost of the same work moves by 30-80 % within minutes
(cache and core sharing with other processes), so a floor timed at one moment and the loop at
another give a ratio that is mostly the machine's state (8 runs of the unpaired tool: 3.8x-7.0x).
``bench.where_time_goes.floor_and_loop`` runs the real loop (``cep.commands.run._Run.loop``, lines
mode, timed by the command itself) and, just before the loop reads each chunk of ``--chunk`` records,
the parse-only pass over that same chunk (``parse_chunk``: ``cep.io.readers.parse_only``'s path) from
a second reader; the floor's time is taken out of the loop's. Both clocks are ``time.process_time``.

Prints ``floor X us  loop Y us  ratio R`` (per record; R = total loop / total floor), then the
ratios per block of ``--block`` chunks: median, spread (min-max and quartiles).

Usage: python -m bench.floor_loop PATTERN DATA [--chunk N] [--block B]
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

    n = r["records"]
    bl = block_ratios(r, block)
    q1, med, q3 = quartiles(bl)
    return [f"floor {r['floor_s'] / n * 1e6:.2f} us  loop {r['loop_s'] / n * 1e6:.2f} us  "
            f"ratio {r['loop_s'] / r['floor_s']:.2f}",
            f"paired: {n:,} records in {len(r['sizes'])} chunks of {r['chunk']:,}; {len(bl)} blocks of {block} chunks: "
            f"ratio median {med:.2f}, quartiles {q1:.2f}-{q3:.2f}, min {min(bl):.2f}, max {max(bl):.2f}; "
            f"overall (sum / sum) {r['loop_s'] / r['floor_s']:.2f}"]


def main(argv: list[str] | None = None) -> int:
    from bench.where_time_goes import BLOCK, CHUNK

    ap = argparse.ArgumentParser(prog="python -m bench.floor_loop", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pattern")
    ap.add_argument("data")
    ap.add_argument("--chunk", type=int, default=CHUNK, help=f"records per paired chunk (default {CHUNK})")
    ap.add_argument("--block", type=int, default=BLOCK, help=f"chunks per block ratio (default {BLOCK})")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    import bench.where_time_goes as where

    r = where.floor_and_loop(Path(args.pattern), Path(args.data), args.chunk, time.process_time)
    print("\n".join(lines(r, args.block)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
