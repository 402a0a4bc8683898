"""``python -m bench.check_gc_pause``: ``cep check`` on many patterns with its garbage-collector pause on and off.

Why: the parser used to switch the cyclic collector off for the whole process while it parsed; the parser
now leaves the collector alone (it also runs inside Spark workers and other programs) and only the
``cep check`` command, which owns its process, pauses it (``cep.commands.check._collector_paused``).  This
measures what the pause buys: ``run_check`` in this process on a generated file of N card-testing-like
patterns, with the pause and with it replaced by a no-op, interleaved; best of ``--repeat``.  Results go to
``bench/results/gc_pause.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import platform
import sys
import tempfile
import time
from pathlib import Path

from cep.commands import check

RESULTS = Path(__file__).resolve().parent / "results" / "gc_pause.md"


def pattern_file(directory: Path, n: int) -> Path:
    path = directory / f"many_{n}.pattern"
    path.write_text("\n".join(
        f"PATTERN p{i}\n  SEQ(Txn s1, Txn s2, Txn big)\n"
        f"  WHERE s1.amount < {i} AND s2.amount < 100 AND big.amount > 400 + s1.amount * 2 AND s1.x IN (1, 2, 'a')\n"
        f"  PARTITION BY card\n  WITHIN {i % 50 + 1} min\n"
        "  EMIT s1.card AS card, s1.ts AS first_ts, big.amount AS amount\n" for i in range(n)))
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.check_gc_pause", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--patterns", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(RESULTS), help="markdown results file ('-': print only)")
    args = ap.parse_args(argv)
    paused = check._collector_paused
    variants = {"collector paused (cep check default)": paused, "collector running": contextlib.nullcontext}
    times: dict[str, list[float]] = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as d:
        path = pattern_file(Path(d), args.patterns)
        check.run_check([str(path)], io.StringIO(), io.StringIO())  # warm: grammar tables, imports
        for _ in range(args.repeat):
            for name, ctx in variants.items():
                check._collector_paused = ctx
                t0 = time.perf_counter()
                status = check.run_check([str(path)], io.StringIO(), io.StringIO())
                times[name].append(time.perf_counter() - t0)
                assert status == 0
                print(f"{name:40} {times[name][-1]:.2f} s", flush=True)
    check._collector_paused = paused
    best = {k: min(v) for k, v in times.items()}
    on, off = best.values()
    text = "\n".join([
        "# `cep check` with and without its garbage-collector pause",
        "",
        f"`python -m bench.check_gc_pause --patterns {args.patterns} --repeat {args.repeat}` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.platform()}, "
        f"Python {platform.python_version()}, shared machine). One file of {args.patterns} patterns; "
        f"best of {args.repeat}, variants interleaved.",
        "",
        "| variant | best s | all runs s |",
        "|---|---:|---|",
        *(f"| {k} | {best[k]:.2f} | {' '.join(f'{t:.2f}' for t in v)} |" for k, v in times.items()),
        "",
        f"Running / paused: {off / on:.2f}x.",
        "",
    ])
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
