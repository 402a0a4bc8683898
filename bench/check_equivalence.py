"""``cep check`` of this tree against another checkout, byte for byte: ``python -m bench.check_equivalence --base DIR``.

Why: ``cep check`` is made faster again and again (issue 12) and must keep reporting
exactly what it reported: every summary, error and warning, in the same words and order,
and the same exit code.  This writes a corpus of pattern files (the shipped patterns, the
benchmark queries, every pattern string of the tests, hypothesis-drawn patterns of every
kind, the ``bench.pattern_size`` families, and seeded token mutations of all of these,
most of them wrong in some way), checks each input in both trees (one child process per
tree, ``run_check`` per input, memos warm from the inputs before, as a long-lived checker
has them) and compares stdout, stderr and exit code.  ``--golden FILE`` also writes a
sample of inputs with the base tree's output: ``tests/test_check_golden.py`` holds every
later tree to it cheaply.
"""

from __future__ import annotations

import argparse
import ast as pyast
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

from bench.pattern_size import and_types, long_line, many, nested_calls, shipped, varied

ROOT = Path(__file__).resolve().parent.parent

_CHILD = r"""
import io, json, sys, traceback
import cep
from cep.commands.check import run_check
groups = json.load(open(sys.argv[1]))
res = []
for paths in groups:
    out, err = io.StringIO(), io.StringIO()
    try:
        rc = run_check(paths, out, err)
    except BaseException as e:  # (a crash is a result too: it must be the same crash)
        rc = "raised " + type(e).__name__
    res.append({"rc": rc, "out": out.getvalue(), "err": err.getvalue()})
json.dump({"cep": cep.__file__, "results": res}, open(sys.argv[2], "w"))
"""

_HEAD = "PATTERN p\n  SEQ(Txn s1, Txn s2)\n"

_TOKEN_RE = re.compile(r"\s+|--[^\n]*|'[^'\n]*'|\"[^\"\n]*\"|\d+(?:\.\d+)?|\w+|<=|>=|!=|<>|==|.", re.S)

_VOCAB = ["PATTERN", "SEQ", "AND", "OR", "NOT", "IN", "WHERE", "PARTITION", "BY", "WITHIN", "EMIT", "AS", "USING",
          "skip_till_next_match", "strict_contiguity", "(", ")", ",", ".", "*", "+", "-", "/", "%", "=", "!=", "<",
          "<=", ">", ">=", "{2}", "{0,}", "{3,1}", "{1,2}", "0", "-1", "1.5", "3600", "1e400", "null", "true",
          "'x'", "\"y\"", "ts", "s", "min", "h", "ms", "d", "weeks", "count", "sum", "avg", "first", "last", "f",
          "a.x", "b.ts", "x", "\n", " ", "count(a)", "SEQ(A q, B r)", "AND(C u, D v)", "'", "#"]


def test_strings() -> list[str]:
    """Every string constant of the tests that reads as a pattern or a clause of one."""
    texts: set[str] = set()
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        for node in pyast.walk(pyast.parse(path.read_text())):
            if isinstance(node, pyast.Constant) and isinstance(node.value, str) and node.value.strip():
                s = node.value
                if "PATTERN" in s.upper():
                    texts.add(s)
                elif path.name in ("test_checker_errors.py", "test_check_command.py", "test_parser.py"):
                    texts.add(_HEAD + s)
    return sorted(texts)


def drawn(n: int) -> list[str]:
    """``n`` patterns of each kind of ``tests/strategies.py``, drawn deterministically."""
    sys.path.insert(0, str(ROOT / "tests"))
    from hypothesis import HealthCheck, given, settings
    from strategies import (
        and_within_patterns,
        gap_patterns,
        kleene_patterns,
        pattern_files,
        patterns,
    )

    out: list[str] = []
    for strat in (patterns(), gap_patterns(), kleene_patterns(), and_within_patterns(), pattern_files(),
                  gap_patterns(trailing_not=True)):
        @settings(max_examples=n, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(strat)
        def collect(text: str) -> None:
            out.append(text)

        collect()
    return out


def mutate(text: str, rnd: random.Random) -> str:
    """1-3 token edits: delete, duplicate, swap, replace by a keyword/operator/literal or another token."""
    toks = _TOKEN_RE.findall(text)
    for _ in range(rnd.randint(1, 3)):
        if not toks:
            break
        i = rnd.randrange(len(toks))
        op = rnd.randrange(5)
        if op == 0:
            del toks[i]
        elif op == 1:
            toks.insert(i, toks[i])
        elif op == 2:
            j = rnd.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
        elif op == 3:
            toks[i] = rnd.choice(_VOCAB)
        else:
            toks[i] = rnd.choice(toks)
    return "".join(toks)


def corpus(mutants: int, drawn_n: int, big: bool) -> list[list[str]]:
    """The inputs: each a list of files' texts (several: one ``cep check`` of several files)."""
    seeds: list[str] = []
    for folder, glob in (("patterns", "*.pattern"), ("bench/queries", "*.pattern"), ("examples", "**/*.pattern"),
                         ("docs", "**/*.pattern")):
        seeds += [p.read_text() for p in sorted((ROOT / folder).glob(glob))]
    seeds += test_strings()
    seeds += drawn(drawn_n)
    seeds += [varied(60), many(40), shipped(30)]
    inputs = [[s] for s in seeds]
    inputs += [[and_types(k)] for k in (3, 8, 33, 40)] + [[nested_calls(d)] for d in (5, 300)]
    inputs += [[long_line(m)] for m in (3, 200)]
    singles = [s for s in varied(400).split("\n\n") if s.strip()]
    inputs += [[s + "\n"] for s in singles]
    rnd = random.Random(12)
    pool = seeds + singles
    inputs += [[mutate(rnd.choice(pool), rnd)] for _ in range(mutants)]
    # several files at once: names defined in two files, an error in one of them
    inputs += [[seeds[0], seeds[0]], [mutate(seeds[1], rnd), seeds[2], seeds[1]], [many(5), many(3)]]
    if big:
        inputs += [[many(10000)], [varied(10000)], [varied(1000)], [shipped(1000)]]
    return inputs


def write_inputs(inputs: list[list[str]], folder: Path) -> list[list[str]]:
    """The files of each input under ``folder``; returns each input's paths (relative to ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    groups = []
    for i, texts in enumerate(inputs):
        paths = []
        for j, t in enumerate(texts):
            name = f"c{i:05d}_{j}.pattern"
            (folder / name).write_text(t, encoding="utf-8")
            paths.append(name)
        groups.append(paths)
    return groups


def check_all(tree: Path, folder: Path, groups: list[list[str]], name: str) -> list[dict]:
    """``run_check`` of every group in one child process of ``tree`` (cwd ``folder``: paths print as written)."""
    (folder / "groups.json").write_text(json.dumps(groups))
    out = folder.parent / f"results_{name}.json"
    env = dict(os.environ, PYTHONPATH=str(tree))
    subprocess.run([sys.executable, "-c", _CHILD, str(folder / "groups.json"), str(out)], env=env, cwd=str(folder),
                   check=True)
    data = json.loads(out.read_text())
    if not data["cep"].startswith(str(tree)):
        raise SystemExit(f"{name}: the child imported {data['cep']}, not {tree}")
    return data["results"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the checkout whose output is the reference")
    ap.add_argument("--out", default="/tmp/cep_check_equivalence")
    ap.add_argument("--mutants", type=int, default=3000)
    ap.add_argument("--drawn", type=int, default=150, help="patterns drawn per hypothesis strategy")
    ap.add_argument("--no-big", action="store_true", help="leave out the 10,000-pattern files")
    ap.add_argument("--golden", default=None, help="also write a sample of inputs and the base's output here")
    ap.add_argument("--golden-size", type=int, default=400)
    args = ap.parse_args(argv)
    inputs = corpus(args.mutants, args.drawn, not args.no_big)
    folder = Path(args.out) / "files"
    groups = write_inputs(inputs, folder)
    base = check_all(Path(args.base).resolve(), folder, groups, "base")
    mine = check_all(ROOT, folder, groups, "this")
    differ = [i for i, (b, m) in enumerate(zip(base, mine, strict=True)) if b != m]
    rcs: dict[str, int] = {}
    for r in base:
        rcs[str(r["rc"])] = rcs.get(str(r["rc"]), 0) + 1
    files = sum(len(g) for g in groups)
    print(f"{len(groups)} inputs ({files} files, {sum(len(t) for g in inputs for t in g):,} bytes), exit codes "
          f"{dict(sorted(rcs.items()))}: {len(groups) - len(differ)} identical, {len(differ)} differ")
    for i in differ[:5]:
        print(f"--- input {i} ({', '.join(groups[i])}):")
        for key in ("rc", "out", "err"):
            if base[i][key] != mine[i][key]:
                print(f"  {key}: base {str(base[i][key])[:400]!r}\n  {key}: this {str(mine[i][key])[:400]!r}")
    if args.golden:
        rnd = random.Random(7)
        small = [i for i, g in enumerate(inputs) if sum(len(t) for t in g) < 4000]
        pick = sorted(rnd.sample(small, min(args.golden_size, len(small))))
        cases = [{"names": groups[i], "files": inputs[i], "rc": base[i]["rc"], "out": base[i]["out"], "err": base[i]["err"]}
                 for i in pick]
        Path(args.golden).write_text(json.dumps(cases, indent=0, ensure_ascii=False) + "\n")
        print(f"wrote {len(cases)} golden cases to {args.golden}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
