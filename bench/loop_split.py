"""Where the engine's CPU goes on ``cep run``'s fused path, by generated parts switched off (in-process).

Why: cachegrind counts instructions and simulated misses, but on the dense card-testing stream the
update paths cost far more CPU per instruction than the batch loop's own text; this says how the
CPU splits.  The records are parsed up front (``decode.plain``, batches of 1,024) and pushed with
``Engine.push_records``; timed with ``process_time``: the engine as it is (``full``); with its
generated new-match functions replaced by no-ops (``-new``: the enumeration and building of
matches); with those and the propagate/drop functions too (``-upd``: the batch loop's own work);
and the parse alone (``plain``) and the floor's decoding (``floor``, ``decode.lines``).  Medians
over ROUNDS interleaved rounds (the machine is shared: compare within one run only).  ``--dis``:
print the batch function's adaptive disassembly after a warm run instead (which instructions
specialized).  ``--lines``: the engine in lines mode (``Engine(lines=True)``: what ``cep run`` to a
file or stdout runs, each composite event built as its encoded line) instead of ``Output`` objects.

Usage: python -m bench.loop_split PATTERN DATA [ROUNDS] [--dis] [--lines]
"""

from __future__ import annotations

import dis
import gc
import statistics
import sys
import time


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    show = "--dis" in args
    lines_mode = "--lines" in args
    args = [a for a in args if a not in ("--dis", "--lines")]
    if len(args) < 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    from cep.io.readers import make_decoder
    from cep.lang.compiler import compile_files
    from cep.runtime.engine import Engine

    pattern, data = args[0], args[1]
    rounds = int(args[2]) if len(args) > 2 else 5
    patterns = compile_files([pattern])
    decode = make_decoder()
    with open(data, "rb") as f:
        lines = f.read().splitlines(True)
    size = 1024
    chunks = [lines[i:i + size] for i in range(0, len(lines), size)]

    def engine(variant: str) -> Engine:
        eng = Engine(patterns, lateness=0, lines=lines_mode)
        g = eng._handlers.batch.__globals__
        for k in list(g):
            if variant in ("-new", "-upd") and k.startswith("new"):
                g[k] = lambda ch, e, outs: None
            if variant == "-upd" and k.startswith("prop"):
                g[k] = lambda t, c: None
            if variant == "-upd" and k.startswith("drop"):
                g[k] = lambda t: None
        return eng

    def run(variant: str) -> float:
        recs = [decode.plain(c) for c in chunks]
        eng = engine(variant)
        t = time.process_time()
        for i, r in enumerate(recs):
            eng.push_records(r, i * size + 1)
        return time.process_time() - t

    if show:
        eng = engine("full")
        for i, c in enumerate(chunks):
            eng.push_records(decode.plain(c), i * size + 1)
        dis.dis(eng._handlers.batch, adaptive=True)
        return 0

    def parse(kind: str) -> float:
        t = time.process_time()
        for i, c in enumerate(chunks):
            if kind == "plain":
                decode.plain(c)
            else:
                decode.lines(c, i * size + 1)
        return time.process_time() - t

    got: dict[str, list[float]] = {k: [] for k in ("floor", "plain", "full", "-new", "-upd")}
    for _ in range(rounds):
        for k, v in got.items():
            gc.collect()
            v.append(parse(k) if k in ("floor", "plain") else run(k))
    n = len(lines)
    for k, v in got.items():
        print(f"{k:6s} median {statistics.median(v) / n * 1e6:6.2f} us/record  min {min(v) / n * 1e6:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
