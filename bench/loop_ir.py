"""Instructions of the engine loop on one stream: ``PYTHONPATH=CHECKOUT valgrind --tool=callgrind
--toggle-collect=starmap_next python bench/loop_ir.py PATTERN STREAM [--gc]`` (the figure is callgrind's
"Collected"; run as a script, so ``PYTHONPATH`` decides which checkout's cep is measured).

Why: on a shared, loaded machine CPU times of a sub-second loop move by +-30% between runs; the
instruction count of the same loop is deterministic, so an A/B of two checkouts (run this module with
``PYTHONPATH`` set to each) shows what a change removes, without waiting for a quiet machine (it does
not show cache or page-fault effects: confirm with CPU time).  Measured: what ``cep run`` does per
batch of 512 decoded records (``Engine.push_batch``, ``encode_outputs``), collected only inside
``itertools.starmap`` (the reading, decoding and start-up are outside).  ``--gc``: ``cep run``'s GC
policy around the loop (``cep.commands.heap.stream_gc``), as the command has it; ``--lines``: its engine's
lines mode (``Engine(lines=True)``).
"""

from __future__ import annotations

import argparse
import gc
from contextlib import nullcontext
from itertools import starmap


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.loop_ir")
    ap.add_argument("pattern")
    ap.add_argument("stream")
    ap.add_argument("--gc", action="store_true", help="cep run's GC policy around the loop")
    ap.add_argument("--lines", action="store_true", help="Engine(lines=True): the fused paths' composite events "
                    "as encoded lines (cep run's engine)")
    args = ap.parse_args(argv)

    from cep.io import writers
    from cep.io.readers import BATCH, make_decoder, open_source
    from cep.lang.compiler import compile_files
    from cep.runtime.engine import Engine

    encode = getattr(writers, "encode_outputs", None) or (lambda outs: [writers.encode_output(o) for o in outs])
    decode = make_decoder()
    events = [decode(pos, raw) for pos, raw in open_source(args.stream).records()]
    engine = Engine(compile_files([args.pattern]), **({"lines": True} if args.lines else {}))
    gc.collect()
    if args.gc:
        from cep.commands.heap import stream_gc

        policy = stream_gc()
    else:
        policy = nullcontext()

    def loop() -> int:
        n = 0
        for i in range(0, len(events), BATCH):
            outs = engine.push_batch(events[i:i + BATCH])
            encode(outs)
            n += len(outs)
        return n

    with policy:
        (n,) = starmap(loop, [()])
    print(f"{n} composite events")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
