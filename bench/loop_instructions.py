"""Instructions per record of the `cep run` loop and of its parse-only floor, per checkout (cachegrind).

Why: ``bench.floor_loop`` gives both in CPU time, which on the shared 2-core machine moves by 30-50%
between rounds; instruction counts do not (they miss cache effects: quote them beside CPU times).
``bench.engine_instructions`` counts ``push_batch`` alone; this counts what the issue's ratio is
about: the whole loop of ``cep run`` (read, decode, push, encode, write; the end of input too) and
``parse_only``.  Each is a child process over the first N records of DATA minus the same child over
an empty file (start-up, compile), over N; PYTHONHASHSEED=0.

Usage: python -m bench.loop_instructions PATTERN DATA N CHECKOUT [CHECKOUT ...]
(valgrind on PATH; about a minute per checkout for N = 20,000 on card testing)
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.engine_instructions import cachegrind_count

_CHILD = """
import io, sys
mode, pattern, data = sys.argv[1:4]
if mode == "floor":
    from cep.io.readers import parse_only
    parse_only(data)
else:
    import cep.commands.run as run
    run.run(run.RunOptions(patterns=[pattern], input=data, output="/dev/null", quiet=True, progress=False),
            io.StringIO())
"""


def instructions(checkout: str, mode: str, pattern: str, data: str) -> int:
    """Instructions of one child process over ``checkout``'s cep."""
    return cachegrind_count(checkout, _CHILD, mode, pattern, data)


@contextmanager
def head_and_empty(data: str, n: int) -> Iterator[tuple[Path, Path]]:
    """Two temporary JSON lines files: the first ``n`` records of ``data`` (or all) and none. A count over the
    first minus the count over the second is the records' own part (start-up, imports and compilation cancel)."""
    with tempfile.TemporaryDirectory() as d:
        head, empty = Path(d) / "head.jsonl", Path(d) / "empty.jsonl"
        with open(data, "rb") as f, head.open("wb") as g:
            for _i, line in zip(range(n), f, strict=False):
                g.write(line)
        empty.write_bytes(b"")
        yield head, empty


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 4:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    pattern, data, n = os.path.abspath(args[0]), os.path.abspath(args[1]), int(args[2])
    with head_and_empty(data, n) as (head, empty):
        for checkout in args[3:]:
            got = {mode: (instructions(checkout, mode, pattern, str(head))
                          - instructions(checkout, mode, pattern, str(empty))) / n for mode in ("floor", "loop")}
            print(f"{checkout}: floor {got['floor']:,.0f} loop {got['loop']:,.0f} instructions/record, "
                  f"ratio {got['loop'] / got['floor']:.2f} (N={n})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
