"""``cep check FILE...``: validate pattern files and summarize each pattern.

Why: users need to see what the engine understood before running a pattern:
the structure, which WHERE conjuncts became per-alias filters, which joined
aliases (shared variables, cross predicates), the window, the partition key
and the output fields.  Each file is parsed (``cep.lang.parser``) and each pattern
compiled to its query (``cep.lang.compiler.compile_pattern``) without generating
the Python code that would run it: checking only validates, and code generation
was a third of its time (issue 12); ``cep run`` and ``cep explain`` generate.
Every diagnostic of every file is
reported on ``err`` in the ``FILE:LINE:COL: message`` form (docs/language.md section 6) with the
source line and a caret.  Exit code 0, or 2 on any error.
"""

from __future__ import annotations

import functools
import gc
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import TextIO

from cep.errors import Diagnostic, PatternError, format_diagnostics
from cep.exit_codes import EXIT_OK, EXIT_PATTERN
from cep.lang import ast
from cep.lang.gcq import ID_ATTR, CompiledPattern
from cep.lang.printer import format_duration, format_structure
from cep.records import replace


def _fmt_number(v: int | float) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


_LABEL_WIDTH = 18
_INDENT = "  " + " " * _LABEL_WIDTH  # a row's second and later values
_HEADS = {label: f"  {label + ':':<{_LABEL_WIDTH}}" for label in (
    "structure", "aliases", "filters", "equalities", "cross predicates", "order", "gaps", "strategy", "window",
    "partition key", "output")}
"""Each row's label, padded (formatted once, not once per pattern)."""


def _row(lines: list[str], label: str, values: list[str]) -> None:
    """``  label:<padding>first value`` and one indented line per further value (``(none)``: no value)."""
    head = _HEADS[label]
    if not values:
        lines.append(head + "(none)")
        return
    lines.append(head + values[0])
    for v in values[1:]:
        lines.append(_INDENT + v)


@functools.lru_cache(maxsize=64)
def _chain(k: int) -> tuple[tuple[int, int], ...]:
    """The order of a flat SEQ of ``k`` elements, ``(0, 1), (1, 2), ...``: a chain ``a.ts < b.ts < c.ts``."""
    return tuple((i, i + 1) for i in range(k - 1))


def summarize(cp: CompiledPattern, p: ast.Pattern) -> str:
    """A human summary of one compiled pattern (the ``cep check`` output block).

    (Written for speed, one pass per part: ``cep check`` prints one per pattern, issue 12.)
    """
    atoms = cp.atoms
    heads = _HEADS
    lines = [f"pattern {cp.name}  ({p.file}:{p.loc.line})",
             heads["structure"] + format_structure(p.structure),
             heads["aliases"] + ", ".join([f"{a.alias}: {a.type}" for a in atoms])]
    _row(lines, "filters", [f"{a.alias}: {a.filter_text}" for a in atoms if a.filter_text])
    joins = []
    for v in cp.variables.values():
        refs = v.refs
        if len(refs) > 1:
            first = refs[0][0]
            if any(a != first for a, _ in refs):  # (shared by two aliases or more: a join)
                joins.append(" = ".join([f"{a}.{attr}" for a, attr in refs if attr != ID_ATTR]))
    _row(lines, "equalities", joins)
    _row(lines, "cross predicates", [pr.text for pr in cp.predicates if pr.origin == "where"])
    order = cp.order
    if order and (order == _chain(len(atoms))
                  or len(order) == len(atoms) - 1 and all(j == i + 1 for i, j in order)):
        lines.append(heads["order"] + " < ".join([f"{a.alias}.ts" for a in atoms]))
    elif order:  # a nested structure: every inequality it denotes
        lines.append(heads["order"] + ", ".join([f"{atoms[i].alias}.ts < {atoms[j].alias}.ts" for i, j in order]))
    if cp.gaps:
        _row(lines, "gaps", [f"{g.text} ({g.kind})" for g in cp.gaps])
    if cp.strategy != "skip_till_any_match":
        lines.append(heads["strategy"] + f"{cp.strategy} (matches are emitted once decided)")
    if p.within is None:
        lines.append(heads["window"] + "none (unbounded: every event is kept)")
    else:
        assert cp.within is not None
        lines.append(heads["window"] + f"{format_duration(p.within)} = {_fmt_number(cp.within)} {cp.time_unit}")
    _row(lines, "partition key", list(cp.partition_vars))
    if cp.emit is None:
        lines.append(heads["output"] + f"each alias's whole event: {', '.join([a.alias for a in atoms])}")
    else:
        _row(lines, "output", [f"{e.name} = {e.text}" if e.name != e.text else e.name for e in cp.emit])
    return "\n".join(lines)


def _with_source_line(d: Diagnostic, text: str) -> Diagnostic:
    """``d`` with its source line filled in (the compiler's diagnostics lack it)."""
    lines = text.split("\n")
    if d.source_line or not 1 <= d.loc.line <= len(lines):
        return d
    return replace(d, source_line=lines[d.loc.line - 1].rstrip("\r"))


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while ``cep check`` parses (the command owns its process).

    Checking a large file keeps every pattern's syntax tree and query alive,
    and each full collection walks them: without the pause ``cep check`` on
    1,000 patterns took 1.38x as long (``python -m bench.check_gc_pause``,
    bench/results/gc_pause.md).  The parser itself leaves the collector
    alone: it also runs inside Spark workers and other programs.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def run_check(paths: Sequence[str], out: TextIO | None = None, err: TextIO | None = None, *,
              generate_code: bool = False) -> int:
    """Check every pattern of the files; print summaries on ``out``, diagnostics on ``err``.

    ``generate_code`` also generates each pattern's code as ``cep run`` does (the
    tests show it changes nothing ``cep check`` prints).
    """
    from cep.lang.compiler import without_code

    with _collector_paused(), nullcontext() if generate_code else without_code():
        return _check(paths, out, err)


def _check(paths: Sequence[str], out: TextIO | None, err: TextIO | None) -> int:
    from cep.lang.compiler import compile_pattern
    from cep.lang.parser import parse_text_with_warnings, read_pattern_file

    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    diagnostics: list[Diagnostic] = []
    seen: dict[str, str] = {}
    summaries: list[str] = []
    count = 0
    for path in paths:
        try:
            text = read_pattern_file(path)
            patterns, warnings = parse_text_with_warnings(text, str(path))
        except PatternError as e:
            diagnostics.extend(e.diagnostics)
            continue
        diagnostics.extend(warnings)
        for p in patterns:
            if p.name in seen and seen[p.name] != str(path):
                diagnostics.append(
                    Diagnostic(str(path), p.loc, f"pattern '{p.name}' is also defined in {seen[p.name]}")
                )
                continue
            seen[p.name] = str(path)
            try:
                cp = compile_pattern(p)
            except PatternError as e:
                diagnostics.extend(_with_source_line(d, text) for d in e.diagnostics)
                continue
            summaries.append(summarize(cp, p))
            count += 1
    if summaries:
        out.write("\n\n".join(summaries) + "\n")
    if diagnostics:
        err.write(format_diagnostics(diagnostics) + "\n")
    errors = sum(1 for d in diagnostics if d.severity == "error")
    warnings_n = len(diagnostics) - errors
    if errors:
        err.write(f"{errors} error(s), {warnings_n} warning(s)\n")
        return EXIT_PATTERN
    out.write(f"ok: {count} pattern(s) in {len(paths)} file(s), {warnings_n} warning(s)\n")
    return EXIT_OK
