"""Python opcodes executed per event, by generated function (and by line), in the engine's update loop.

Why: cachegrind counts a whole process, and a profiler's overhead per call is larger than most
generated functions (``bench.loop_parts``), so neither says which generated function, or which of its
lines, the instructions go to.  Opcode tracing (``sys.settrace`` with ``f_trace_opcodes``) is slow but
deterministic: it counts every bytecode each code object runs, so the parts of an update path compare
exactly (an opcode is about 45-50 instructions on average here; a C call such as a bisect counts as
one).  Counted as ``bench.engine_instructions`` runs the engine: ``push_batch`` over the first N events
of DATA (decoded up front, batches of 512, GC off) after a warm-up engine has run the first 5,000.

Usage: python -m bench.opcode_counts PATTERN DATA N [NAME ...]
(prints opcodes and calls per event by code object; with NAMEs, e.g. "card_testing: drop leaf 5",
also the opcodes per event of each line of those generated functions; ~30 s for N = 30,000)
"""

from __future__ import annotations

import collections
import gc
import sys


def count(pattern: str, data: str, n: int) -> tuple[collections.Counter, collections.Counter, collections.Counter]:
    """Opcodes by code object's file name, by (file name, line) and calls by (file name, function)."""
    from cep.io.readers import make_decoder
    from cep.lang.compiler import compile_files
    from cep.runtime.engine import Engine

    decode = make_decoder()
    with open(data, "rb") as f:
        events = [decode(str(i + 1), line) for i, line in zip(range(n), f, strict=False)]
    patterns = compile_files([pattern])
    with open(data, "rb") as f:
        warm = Engine(patterns, lateness=0)
        warm.push_batch([decode(str(i + 1), line) for i, line in zip(range(min(n, 5000)), f, strict=False)])
    engine = Engine(patterns, lateness=0)
    ops: collections.Counter = collections.Counter()
    lines: collections.Counter = collections.Counter()
    calls: collections.Counter = collections.Counter()

    def trace(frame, event, _arg):
        co = frame.f_code
        if event == "call":
            calls[co.co_filename, co.co_name] += 1
            frame.f_trace_opcodes = True
        elif event == "opcode":
            ops[co.co_filename] += 1
            lines[co.co_filename, frame.f_lineno] += 1
        return trace

    gc.disable()
    sys.settrace(trace)
    try:
        for i in range(0, len(events), 512):
            engine.push_batch(events[i:i + 512])
    finally:
        sys.settrace(None)
        gc.enable()
    return ops, lines, calls


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    from cep import codegen

    pattern, data, n = args[0], args[1], int(args[2])
    ops, lines, calls = count(pattern, data, n)
    print(f"opcodes per event: {sum(ops.values()) / n:,.1f}")
    for name, v in ops.most_common(30):
        print(f"{v / n:9.1f}  {name}")
    print("calls per event")
    for (name, fn), v in calls.most_common(30):
        if v / n >= 0.001:
            print(f"{v / n:9.3f}  {name} {fn}")
    sources = dict(codegen.defined_since(0))
    for want in args[3:]:
        label = f"<cep {want}>"
        src = sources.get(label)
        print(f"===== {label}")
        if src is None:
            print("  (no such generated function)")
            continue
        for ln, text in enumerate(src.splitlines(), 1):
            print(f"{lines.get((label, ln), 0) / n:7.2f} {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
