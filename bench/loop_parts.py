"""Where a `cep run` process's instructions go, by parts switched off one at a time (cachegrind).

Why: issue 15 asks why an event of the 20,000-event card-testing stream (500 cards) costs half as
much again as one of the 200,000-event stream (1,000 cards), and on the shared 2-core machine only
instruction counts are steady.  A profile cannot split the generated functions' own time from the
calls they make at 10^4 calls (cProfile's overhead per call is larger than the calls), so each part
is measured as the difference it makes when it is switched off in a child process (the engine's
generated globals replaced by no-ops after it is built):

- whole process: ``cep run`` (the CLI, as the fraud benchmark runs it) over the first N records and
  over an empty file (start-up: interpreter, imports, compile, plan, the generated code's compiles);
- engine (``push_batch`` over decoded events, ``bench.engine_instructions``' child) as it is; with the
  new-match functions off (enumeration and building of matches: ``-new``); with the match id's
  hash off (``-id``); with the update paths (propagate and drop) off (``-upd``: what is left is the
  batch loop's own work: routing, filters, holders, expiry queues, counters);
- the run loop (``bench.loop_instructions``' child) with the encoding of composite events off (``-enc``);
- the generated sources a run compiles (``cep.codegen``; with ``CEP_CODE_CACHE=0``, as if the cache
  were cold) and the instructions ``compile`` takes for them.

Usage: python -m bench.loop_parts PATTERN DATA N CHECKOUT  (valgrind on PATH; ~5 min for N = 20,000)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from bench.engine_instructions import cachegrind_count

_ENGINE = r'''
import gc, sys
from cep.io.readers import make_decoder
from cep.lang.compiler import compile_files
from cep.runtime.engine import Engine
variant, pattern, data, n, mode = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
decode = make_decoder()
with open(data, "rb") as f:
    events = [decode(str(i + 1), line) for i, line in zip(range(n), f)]
patterns = compile_files([pattern])
if variant == "-id":
    import cep.runtime.output as O
    O.match_id_source = lambda seed, positions: ([], "'x'")
def patch(engine):
    g = engine._handlers.batch.__globals__
    for k in list(g):
        if variant == "-new" and k.startswith("new"):
            g[k] = lambda ch, e, outs: None
        if variant == "-upd" and k.startswith("prop"):
            g[k] = lambda t, c: None
        if variant == "-upd" and k.startswith("drop"):
            g[k] = lambda t: None
    if variant == "-upd":
        eg = engine._handlers.expire.__globals__
        for k in list(eg):
            if k.startswith("drop"):
                eg[k] = lambda t: None
with open(data, "rb") as f:
    warm = Engine(patterns, lateness=0); patch(warm)
    warm.push_batch([decode(str(i + 1), line) for i, line in zip(range(min(n, 5000)), f)])
engine = Engine(patterns, lateness=0); patch(engine)
gc.disable()
if mode == "run":
    for i in range(0, len(events), 512):
        engine.push_batch(events[i:i + 512])
'''

_LOOP = r'''
import io, sys
variant, pattern, data = sys.argv[1:4]
import cep.commands.run as run
if variant == "-enc":
    run.encode_outputs = lambda outs: []
run.run(run.RunOptions(patterns=[pattern], input=data, output="/dev/null", quiet=True, progress=False), io.StringIO())
'''


_SOURCES = r'''
import functools, pickle, sys
import cep.codegen as C
got = []
real = C._compile_once.__wrapped__
C._compile_once = functools.lru_cache(maxsize=4096)(lambda source: got.append(source) or real(source))
out, sys.argv = sys.argv[1], ["cep", "run", *sys.argv[2:]]
from cep.cli import main
try:
    main()
finally:
    with open(out, "wb") as f:
        pickle.dump(got, f)
'''

_COMPILE = r'''
import pickle, sys
with open(sys.argv[1], "rb") as f:
    sources = pickle.load(f)
if sys.argv[2] == "compile":
    for s in sources:
        compile(s, "<cep>", "exec")
'''


def compile_cost(checkout: str, pattern: str, data: str, d: str) -> tuple[int, int, int]:
    """(sources, characters, instructions to compile them) of the generated code a cold `cep run` compiles."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout), "CEP_CODE_CACHE": "0"}
    path = os.path.join(d, "sources.pickle")
    subprocess.run([sys.executable, "-c", _SOURCES, path, pattern, "-i", data, "-o", "/dev/null", "-q"],
                   cwd=os.path.abspath(checkout), env=env, check=True, capture_output=True)
    import pickle

    with open(path, "rb") as f:
        sources = pickle.load(f)
    n = cachegrind_count(checkout, _COMPILE, path, "compile") - cachegrind_count(checkout, _COMPILE, path, "load")
    return len(sources), sum(map(len, sources)), n


def whole(checkout: str, pattern: str, data: str) -> int:
    """Instructions of ``cep run PATTERN -i DATA -o /dev/null -q`` (the CLI) over ``checkout``'s cep."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(checkout), "PYTHONHASHSEED": "0"}
    r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                        sys.executable, "-c", "import sys; from cep.cli import main; sys.argv[0] = 'cep'; main()",
                        "run", pattern, "-i", data, "-o", "/dev/null", "-q"],
                       cwd=os.path.abspath(checkout), env=env, capture_output=True, text=True, check=True)
    return int(r.stderr.split("I   refs:")[1].split()[0].replace(",", ""))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    pattern, data, n, checkout = os.path.abspath(args[0]), os.path.abspath(args[1]), int(args[2]), args[3]
    with tempfile.TemporaryDirectory() as d:
        head, empty = os.path.join(d, "head.jsonl"), os.path.join(d, "empty.jsonl")
        with open(data, "rb") as f, open(head, "wb") as g:
            for _i, line in zip(range(n), f, strict=False):
                g.write(line)
        open(empty, "wb").close()
        k, chars, ins = compile_cost(checkout, pattern, head, d)
        print(f"generated sources compiled by a cold run: {k} ({chars:,} characters), {ins / 1e6:,.1f} M instructions")
        whole(checkout, pattern, head)  # (a first run: the compiled code cache, where there is one, is warm)
        e, w = whole(checkout, pattern, empty), whole(checkout, pattern, head)
        print(f"whole process: empty input {e / 1e6:,.1f} M, {n} records {w / 1e6:,.1f} M "
              f"({(w - e) / n:,.0f} per record beyond start-up)")
        per = {}
        for v in ("", "-new", "-id", "-upd"):
            per[v] = (cachegrind_count(checkout, _ENGINE, v or "as is", pattern, head, str(n), "run")
                      - cachegrind_count(checkout, _ENGINE, v or "as is", pattern, head, str(n), "idle")) / n
        print(f"engine per event: {per['']:,.0f}; enumeration and building of matches {per[''] - per['-new']:,.0f} "
              f"(of which the id's hash {per[''] - per['-id']:,.0f}); batch loop without update paths "
              f"{per['-upd']:,.0f}; update paths about {per['-new'] - per['-upd']:,.0f}")
        loop = {v: (cachegrind_count(checkout, _LOOP, v, pattern, head) - cachegrind_count(checkout, _LOOP, v, pattern, empty)) / n
                for v in ("as is", "-enc")}
        print(f"run loop per record: {loop['as is']:,.0f}; encoding composite events {loop['as is'] - loop['-enc']:,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
