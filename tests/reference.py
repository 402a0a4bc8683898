"""A brute-force reference evaluator written from docs/language.md alone (sections 1-5).

It shares nothing with the engine but the parser (``cep.lang.parser.parse_text``
for the syntax tree): expressions are evaluated by a tree walk here, matches
are found by trying every tuple of events.  It is slow on purpose and small
enough to check by reading.

``evaluate(text, records, ...)`` runs a list of input records (dicts with
type/time/op fields) and returns

* ``late``: the positions of late records (``ts < max ts seen before it -
  lateness``, docs/language.md section 4), which are not processed;
* ``bad``: positions of retractions that found no equal inserted event;
* ``matches``: the multiset of matches over all on-time inserted minus
  retracted events: ``(pattern, positions, frozen match)`` keys, positions in
  structure (alias) order, 1-based record numbers as strings;
* ``current``: the matches whose events are all still retained at the end
  (``ts >= final watermark - w`` for a pattern with ``WITHIN w``); what the
  engine's ``matches()`` and ``match_count()`` report.

A retraction removes the earliest inserted event still present that is equal
to it in every field but op (numbers equal by value, booleans distinct from
numbers).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from cep.lang import ast
from cep.lang.parser import parse_text

SECONDS = {"ms": Fraction(1, 1000), "s": Fraction(1), "min": Fraction(60), "h": Fraction(3600),
           "d": Fraction(86400)}
PER_SECOND = {"s": 1, "ms": 1000, "us": 1_000_000}


# ------------------------------------------------------------------ values


def _kind(v: Any) -> str | None:
    t = type(v)
    if t is int or t is float:
        return "num"
    if t is str:
        return "str"
    if t is bool:
        return "bool"
    return None  # null, or a non-scalar (behaves like null)


def value_key(v: Any) -> Any:
    """A type-faithful hashable form: 1 and 1.0 equal, True and 1 not."""
    if type(v) is bool:
        return ("bool", v)
    if type(v) in (int, float):
        return ("num", v)
    if isinstance(v, dict):
        return ("obj", tuple(sorted((k, value_key(x)) for k, x in v.items())))
    if isinstance(v, list):
        return ("list", tuple(value_key(x) for x in v))
    return (type(v).__name__, v)


def exact_key(v: Any) -> Any:
    """Like ``value_key`` but integers and floats stay apart (JSON form is output)."""
    if isinstance(v, dict):
        return ("obj", tuple(sorted((k, exact_key(x)) for k, x in v.items())))
    if isinstance(v, list):
        return ("list", tuple(exact_key(x) for x in v))
    if type(v) is float and math.isnan(v):
        return ("float", "nan")
    return (type(v).__name__, v)


def freeze_match(match: dict) -> tuple:
    return tuple(sorted((k, exact_key(v)) for k, v in match.items()))


# ------------------------------------------------------------ expressions


def evaluate_expr(e: ast.Expr, env: dict[tuple[str, str], Any]) -> Any:
    """docs/language.md section 2: the value of ``e``; None is null (for conditions: unknown)."""
    if isinstance(e, ast.Literal):
        return e.value
    if isinstance(e, ast.Attr):
        v = env.get((e.alias, e.name))
        return v if _kind(v) is not None else None
    if isinstance(e, ast.Neg):
        v = evaluate_expr(e.operand, env)
        return -v if _kind(v) == "num" else None
    if isinstance(e, ast.Arith):
        a = evaluate_expr(e.left, env)
        b = evaluate_expr(e.right, env)
        if _kind(a) != "num" or _kind(b) != "num":
            return None
        try:
            if e.op == "+":
                return a + b
            if e.op == "-":
                return a - b
            if e.op == "*":
                return a * b
            if b == 0:
                return None
            if e.op == "/":
                if type(a) is int and type(b) is int and a % b == 0:
                    return a // b
                return a / b
            if type(a) is int and type(b) is int:
                r = abs(a) % abs(b)
                return -r if a < 0 else r
            return math.fmod(a, b)
        except (OverflowError, ValueError):
            return None
    if isinstance(e, ast.Compare):
        a = evaluate_expr(e.left, env)
        b = evaluate_expr(e.right, env)
        k = _kind(a)
        if k is None or k != _kind(b):
            return None
        if e.op == "=":
            return a == b
        if e.op == "!=":
            return a != b
        if e.op == "<":
            return a < b
        if e.op == "<=":
            return a <= b
        if e.op == ">":
            return a > b
        if e.op == ">=":
            return a >= b
        raise ValueError(e.op)
    if isinstance(e, ast.InList):
        results = [evaluate_expr(ast.Compare("=", e.operand, item), env) for item in e.items]
        if any(r is True for r in results):
            r = True
        elif all(r is False for r in results):
            r = False
        else:
            r = None
        return (not r if r is not None else None) if e.negated else r
    if isinstance(e, ast.Not):
        v = truth(evaluate_expr(e.operand, env))
        return None if v is None else not v
    if isinstance(e, ast.And):
        a = truth(evaluate_expr(e.left, env))
        b = truth(evaluate_expr(e.right, env))
        if a is False or b is False:
            return False
        return None if a is None or b is None else True
    if isinstance(e, ast.Or):
        a = truth(evaluate_expr(e.left, env))
        b = truth(evaluate_expr(e.right, env))
        if a is True or b is True:
            return True
        return None if a is None or b is None else False
    raise TypeError(f"unsupported expression {e!r}")


def truth(v: Any) -> bool | None:
    """A value as a truth value: booleans are, anything else is unknown."""
    return v if type(v) is bool else None


# ------------------------------------------------------------------ events


@dataclass(frozen=True)
class RefEvent:
    pos: str
    type: str
    ts: Any
    fields: dict = field(hash=False, compare=False)

    def read(self, name: str) -> Any:
        if name == "ts":
            return self.ts
        return self.fields.get(name)


@dataclass
class RefResult:
    late: list[str]
    bad: list[str]
    matches: Counter
    current: Counter
    watermark: Any
    events: list[RefEvent]

    def count(self, pattern: str, current: bool = False) -> int:
        c = self.current if current else self.matches
        return sum(n for (p, _, _), n in c.items() if p == pattern)


def duration(d: ast.Duration, time_unit: str) -> Fraction:
    """A duration in timestamp units, exactly (the decimal the user wrote)."""
    v = Fraction(repr(d.value)) if isinstance(d.value, float) else Fraction(d.value)
    if d.unit is None:
        return v
    return v * SECONDS[d.unit] * PER_SECOND[time_unit]


def _record_key(fields: dict) -> Any:
    return tuple(sorted((k, value_key(v)) for k, v in fields.items()))


def replay(records: list[dict], lateness: Any = 0, type_field: str = "type", time_field: str = "ts",
           op_field: str = "op") -> tuple[list[RefEvent], list[str], list[str], Any]:
    """(present events in insertion order, late positions, bad positions, final watermark)."""
    present: list[RefEvent] = []
    late: list[str] = []
    bad: list[str] = []
    max_ts = None
    for i, rec in enumerate(records, 1):
        pos = str(i)
        ts = rec[time_field]
        if max_ts is not None and ts < max_ts - lateness:
            late.append(pos)
            continue
        if max_ts is None or ts > max_ts:
            max_ts = ts
        op = rec.get(op_field, "+")
        fields = {k: v for k, v in rec.items() if k != op_field}
        if op == "-":
            key = _record_key(fields)
            for j, ev in enumerate(present):
                if _record_key(ev.fields) == key:
                    del present[j]
                    break
            else:
                bad.append(pos)
            continue
        present.append(RefEvent(pos, rec[type_field], ts, fields))
    watermark = None if max_ts is None else max_ts - lateness
    return present, late, bad, watermark


# ----------------------------------------------------------------- matches


def pattern_matches(p: ast.Pattern, events: list[RefEvent], time_unit: str = "s"):
    """Every match of one pattern over a set of events: (events tuple, match dict)."""
    elements = p.structure.elements
    aliases = [el.alias for el in elements]
    w = duration(p.within, time_unit) if p.within is not None else None
    pools = [[e for e in events if e.type == el.type] for el in elements]
    out = []
    for combo in itertools.product(*pools):
        if len({id(e) for e in combo}) != len(combo):
            continue  # one event cannot play two aliases (AND types differ; SEQ is strict)
        tss = [e.ts for e in combo]
        if p.structure.op == "SEQ" and any(not tss[i] < tss[i + 1] for i in range(len(tss) - 1)):
            continue
        if w is not None and Fraction(max(tss)) - Fraction(min(tss)) > w:
            continue
        env = {}
        for a, e in zip(aliases, combo, strict=True):
            for k in e.fields:
                env[(a, k)] = e.fields[k]
            env[(a, "ts")] = e.ts
        ok = True
        for attr in p.partition_by:
            for i in range(len(aliases)):
                for j in range(i + 1, len(aliases)):
                    c = ast.Compare("=", ast.Attr(aliases[i], attr), ast.Attr(aliases[j], attr))
                    if truth(evaluate_expr(c, env)) is not True:
                        ok = False
        if not ok:
            continue
        if p.where is not None and truth(evaluate_expr(p.where, env)) is not True:
            continue
        out.append((combo, build_match(p, aliases, combo, env)))
    return out


def build_match(p: ast.Pattern, aliases: list[str], combo, env) -> dict:
    """docs/language.md section 5: EMIT items by name (default: source text), ``x.*``, or whole events."""
    if p.emit is None:
        return {a: e.fields for a, e in zip(aliases, combo, strict=True)}
    match: dict[str, Any] = {}
    for item in p.emit:
        if item.star is not None:
            e = combo[aliases.index(item.star)]
            for k, v in e.fields.items():
                match[f"{item.star}.{k}"] = v
        elif isinstance(item.expr, ast.Attr):
            match[item.name or item.text] = env.get((item.expr.alias, item.expr.name))  # as read
        else:
            match[item.name or item.text] = evaluate_expr(item.expr, env)
    return match


def evaluate(text: str, records: list[dict], lateness: Any = 0, type_field: str = "type",
             time_field: str = "ts", op_field: str = "op", time_unit: str = "s") -> RefResult:
    patterns = parse_text(text)
    present, late, bad, wm = replay(records, lateness, type_field, time_field, op_field)
    matches: Counter = Counter()
    current: Counter = Counter()
    for p in patterns:
        w = duration(p.within, time_unit) if p.within is not None else None
        for combo, match in pattern_matches(p, present, time_unit):
            key = (p.name, tuple(e.pos for e in combo), freeze_match(match))
            matches[key] += 1
            if w is None or all(Fraction(e.ts) >= Fraction(wm) - w for e in combo):
                current[key] += 1
    return RefResult(late, bad, matches, current, wm, present)
