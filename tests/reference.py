"""A brute-force reference evaluator written from docs/language.md alone (sections 1-5, 7.1-7.6).

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
  (``ts >= final watermark - w`` for a pattern with ``WITHIN w``) and, for a
  pattern with gap elements or a strategy, decided by the final watermark
  (docs/language.md section 7.4); what the engine's ``matches()`` and ``match_count()`` report.

Matches are positive tuples (spec 3 and 7.6) filtered by the gap conditions of
NOT elements (7.1, 7.2) and of the strategy (7.5), each checked by trying every
event of the final multiset.  A Kleene element (7.3) collects every event of
the final multiset that qualifies for it, in time order (ties: input order),
and its aggregates are computed from that list by their definitions (exact
sums with fractions).

A retraction removes the earliest inserted event still present that is equal
to it in every field but op (numbers equal by value, booleans distinct from
numbers).
"""

from __future__ import annotations

import dataclasses
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
    if isinstance(e, ast.Call):  # an aggregate (spec 7.3), computed beforehand into the env
        v = env[("()", call_key(e))]
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


def call_key(c: ast.Call) -> tuple:
    arg = c.args[0]
    assert isinstance(arg, ast.Attr)
    return (c.name, arg.alias, arg.name)


def aggregate(fn: str, attr: str, events: list[RefEvent]) -> Any:
    """Spec 7.3: count(x), count(x.a) (non-null values), sum/avg/min/max over the numbers
    (other values ignored, null when there is none), first/last (the value in the first or
    last event, null if missing)."""
    if fn == "count" and not attr:
        return len(events)
    values = [e.read(attr) for e in events]
    if fn == "count":
        return sum(1 for v in values if v is not None)
    if fn in ("first", "last"):
        return values[0 if fn == "first" else -1]
    nums = [v for v in values if type(v) is int or (type(v) is float and math.isfinite(v))]
    if not nums:
        return None
    if fn == "min":
        return min(nums)
    if fn == "max":
        return max(nums)
    total = sum(Fraction(v) for v in nums)
    try:
        if fn == "sum":
            return int(total) if all(type(v) is int for v in nums) else float(total)
        return float(total / len(nums))
    except OverflowError:
        return None


def _calls(e: ast.Expr) -> list[ast.Call]:
    if isinstance(e, ast.Call):
        return [e]
    out: list[ast.Call] = []
    for v in (getattr(e, f.name) for f in dataclasses.fields(e)):
        for x in (v if isinstance(v, tuple) else (v,)):
            if isinstance(x, (ast.Neg, ast.Arith, ast.Compare, ast.InList, ast.And, ast.Or, ast.Not, ast.Call)):
                out.extend(_calls(x))
    return out


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


def _positive_elements(s: ast.Structure) -> list[ast.Element]:
    out: list[ast.Element] = []
    for el in s.elements:
        if el.kind == "nested":
            out.extend(_positive_elements(el.nested))
        elif el.kind == "event":
            out.append(el)
    return out


def _times(s: ast.Structure, ts: dict[str, Any]) -> list[Any]:
    """The times of a structure's positive events."""
    return [ts[el.alias] for el in _positive_elements(s)]


def _ordered(s: ast.Structure, ts: dict[str, Any]) -> bool:
    """Spec 3 and 7.6: in a SEQ every event of a step is before every event of the next."""
    steps = []
    for el in s.elements:
        if el.kind in ("not", "kleene"):
            continue
        if el.kind == "nested":
            if not _ordered(el.nested, ts):
                return False
            steps.append(_times(el.nested, ts))
        else:
            steps.append([ts[el.alias]])
    if s.op == "SEQ":
        return all(max(a) < min(b) for a, b in zip(steps, steps[1:], strict=False))
    return True


def _conjuncts(e: ast.Expr | None) -> list[ast.Expr]:
    if e is None:
        return []
    if isinstance(e, ast.And):
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _mentions(e: ast.Expr) -> set[str]:
    if isinstance(e, ast.Attr):
        return {e.alias}
    out: set[str] = set()
    for v in (getattr(e, f.name) for f in dataclasses.fields(e)):
        if isinstance(v, tuple):
            for x in v:
                if isinstance(x, (ast.Literal, ast.Attr, ast.Neg, ast.Arith, ast.Compare, ast.InList,
                                  ast.And, ast.Or, ast.Not, ast.Call)):
                    out |= _mentions(x)
        elif isinstance(v, (ast.Literal, ast.Attr, ast.Neg, ast.Arith, ast.Compare, ast.InList,
                            ast.And, ast.Or, ast.Not, ast.Call)):
            out |= _mentions(v)
    return out


def _bind(env: dict, alias: str, e: RefEvent) -> dict:
    env = {k: v for k, v in env.items() if k[0] != alias}
    for k in e.fields:
        env[(alias, k)] = e.fields[k]
    env[(alias, "ts")] = e.ts
    return env


def _same_partition(p: ast.Pattern, env: dict, a: str, b: str) -> bool:
    for attr in p.partition_by:
        c = ast.Compare("=", ast.Attr(a, attr), ast.Attr(b, attr))
        if truth(evaluate_expr(c, env)) is not True:
            return False
    return True


def _gaps(p: ast.Pattern) -> list[tuple[ast.Element, list[ast.Element] | None, list[ast.Element] | None]]:
    """Each gap element (NOT or Kleene) of the outermost SEQ with the structures of its
    positive neighbours (None: no neighbour on that side)."""
    els = p.structure.elements
    out = []
    gap_kinds = ("not", "kleene")
    for i, el in enumerate(els):
        if el.kind not in gap_kinds:
            continue
        before = next((x for x in reversed(els[:i]) if x.kind not in gap_kinds), None)
        after = next((x for x in els[i + 1:] if x.kind not in gap_kinds), None)
        out.append((el, before, after))
    return out


def _neighbour_times(el: ast.Element | None, ts: dict[str, Any]) -> list[Any] | None:
    if el is None:
        return None
    if el.kind == "nested":
        return _times(el.nested, ts)
    return [ts[el.alias]]


def gap_ranges(p: ast.Pattern, combo_ts: dict[str, Any], w) -> list[tuple[ast.Element, Any, bool, Any, bool]]:
    """Spec 7.1: (element, lo, lo inclusive, hi, hi inclusive) of each gap element."""
    all_ts = list(combo_ts.values())
    out = []
    for el, before, after in _gaps(p):
        bt = _neighbour_times(before, combo_ts)
        at = _neighbour_times(after, combo_ts)
        lo, lo_incl = (max(bt), False) if bt is not None else (Fraction(max(all_ts)) - w, True)
        hi, hi_incl = (min(at), False) if at is not None else (Fraction(min(all_ts)) + w, True)
        out.append((el, lo, lo_incl, hi, hi_incl))
    return out


def _inside(t, lo, lo_incl, hi, hi_incl) -> bool:
    t = Fraction(t)
    lo, hi = Fraction(lo), Fraction(hi)
    return (lo <= t if lo_incl else lo < t) and (t <= hi if hi_incl else t < hi)


def decision_time(p: ast.Pattern, combo_ts: dict[str, Any], w) -> tuple[Any, bool] | None:
    """Spec 7.4: (t, strict) such that the match is decided once the watermark is >= t
    (> t when strict); None for a pattern that emits at once (no gap, no strategy)."""
    ends: list[tuple[Any, bool]] = []
    for _el, _lo, _li, hi, hi_incl in gap_ranges(p, combo_ts, w):
        ends.append((Fraction(hi), hi_incl))
    positives = _positive_elements(p.structure)
    if p.using in ("skip_till_next_match", "strict_contiguity") and len(positives) >= 2:
        ends.append((Fraction(combo_ts[positives[-1].alias]), False))
    return max(ends) if ends else None


def pattern_matches(p: ast.Pattern, events: list[RefEvent], time_unit: str = "s"):
    """Every match of one pattern over a set of events: (events tuple, match dict).

    Positive tuples first (spec 3, 7.6), then the gap conditions of NOT elements
    (7.1, 7.2) and of the strategy (7.5), each by trying every event.
    """
    elements = _positive_elements(p.structure)
    aliases = [el.alias for el in elements]
    gap_aliases = {el.alias for el, _, _ in _gaps(p)}
    conjuncts = _conjuncts(p.where)
    positive_where = [c for c in conjuncts if not (_mentions(c) & gap_aliases)]
    w = duration(p.within, time_unit) if p.within is not None else None
    pools = [[e for e in events if e.type == el.type] for el in elements]
    out = []
    for combo in itertools.product(*pools):
        if len({id(e) for e in combo}) != len(combo):
            continue  # one event cannot play two aliases (AND types differ; SEQ is strict)
        tss = [e.ts for e in combo]
        ts_of = dict(zip(aliases, tss, strict=True))
        if not _ordered(p.structure, ts_of):
            continue
        if w is not None and Fraction(max(tss)) - Fraction(min(tss)) > w:
            continue
        env = {}
        for a, e in zip(aliases, combo, strict=True):
            env = _bind(env, a, e)
        ok = True
        for i in range(len(aliases)):
            for j in range(i + 1, len(aliases)):
                if not _same_partition(p, env, aliases[i], aliases[j]):
                    ok = False
        if not ok:
            continue
        if any(truth(evaluate_expr(c, env)) is not True for c in positive_where):
            continue
        if not _gaps_hold(p, events, env, ts_of, w, conjuncts, aliases):
            continue
        if not _strategy_holds(p, events, env, combo, conjuncts, aliases):
            continue
        lists = _repetitions(p, events, env, ts_of, w, conjuncts, aliases)
        if lists is None:
            continue
        for c in _calls_of_pattern(p):
            env[("()", call_key(c))] = aggregate(c.name, c.args[0].name, lists[c.args[0].alias])
        agg_where = [c for c in conjuncts if _calls(c)]
        if any(truth(evaluate_expr(c, env)) is not True for c in agg_where):
            continue
        out.append((combo, build_match(p, aliases, combo, env, lists)))
    return out


def _calls_of_pattern(p: ast.Pattern) -> list[ast.Call]:
    exprs = _conjuncts(p.where) + [i.expr for i in (p.emit or ()) if i.expr is not None]
    return [c for e in exprs for c in _calls(e)]


def _repetitions(p, events, env, ts_of, w, conjuncts, aliases) -> dict[str, list[RefEvent]] | None:
    """Spec 7.3: each Kleene element's list of qualifying events (time order, ties input
    order); None when a list's length is outside its quantifier."""
    lists: dict[str, list[RefEvent]] = {}
    for el, lo, lo_incl, hi, hi_incl in gap_ranges(p, ts_of, w):
        if el.kind != "kleene":
            continue
        mine = [c for c in conjuncts if el.alias in _mentions(c) and not _calls(c)]
        chosen = list(_qualifying(p, events, env, el, (lo, lo_incl, hi, hi_incl), mine, aliases))
        chosen.sort(key=lambda e: Fraction(e.ts))  # stable: ties keep input order
        n = len(chosen)
        if n < el.min_count or (el.max_count is not None and n > el.max_count):
            return None
        lists[el.alias] = chosen
    return lists


def _gaps_hold(p, events, env, ts_of, w, conjuncts, aliases) -> bool:
    """Spec 7.2: no event qualifies for any NOT element."""
    for el, lo, lo_incl, hi, hi_incl in gap_ranges(p, ts_of, w):
        if el.kind != "not":
            continue
        mine = [c for c in conjuncts if el.alias in _mentions(c)]
        if next(_qualifying(p, events, env, el, (lo, lo_incl, hi, hi_incl), mine, aliases), None) is not None:
            return False
    return True


def _qualifying(p, events, env, el, gap, mine, aliases):
    """Spec 7.1: the events that qualify for gap element ``el`` (its type, inside its gap, the positive
    events' partition values, every conjunct in ``mine`` true with the positive events bound), in input order."""
    lo, lo_incl, hi, hi_incl = gap
    for e in events:
        if e.type != el.type or not _inside(e.ts, lo, lo_incl, hi, hi_incl):
            continue
        genv = _bind(env, el.alias, e)
        if not all(_same_partition(p, genv, el.alias, a) for a in aliases):
            continue
        if all(truth(evaluate_expr(c, genv)) is True for c in mine):
            yield e


def _strategy_holds(p, events, env, combo, conjuncts, aliases) -> bool:
    """Spec 7.5: skip_till_next_match and strict_contiguity, by their definitions."""
    if p.using == "skip_till_next_match":
        for i in range(1, len(aliases)):
            allowed = set(aliases[: i + 1])
            mine = [c for c in conjuncts if _mentions(c) <= allowed]
            for e in events:
                if e.type != combo[i].type or not combo[i - 1].ts < e.ts < combo[i].ts:
                    continue
                genv = _bind(env, aliases[i], e)
                if not all(_same_partition(p, genv, aliases[i], a) for a in aliases[:i]):
                    continue
                if all(truth(evaluate_expr(c, genv)) is True for c in mine):
                    return False
    elif p.using == "strict_contiguity":
        types = {e.type for e in combo}
        for i in range(1, len(aliases)):
            for e in events:
                if e.type not in types or not combo[i - 1].ts < e.ts < combo[i].ts:
                    continue
                genv = _bind(env, "\0gap", e)
                if all(_same_partition(p, genv, "\0gap", a) for a in aliases):
                    return False
    return True


def build_match(p: ast.Pattern, aliases: list[str], combo, env, lists: dict | None = None) -> dict:
    """docs/language.md section 5: EMIT items by name (default: source text), ``x.*``, or whole events;
    a repeated alias maps to the list of its events (7.3), a bare aggregate item is its value."""
    if p.emit is None:
        by_alias = dict(zip(aliases, combo, strict=True))
        out: dict[str, Any] = {}
        for el in _output_elements(p.structure):
            if el.kind == "kleene":
                out[el.alias] = [e.fields for e in (lists or {})[el.alias]]
            else:
                out[el.alias] = by_alias[el.alias].fields
        return out
    match: dict[str, Any] = {}
    for item in p.emit:
        if item.star is not None:
            e = combo[aliases.index(item.star)]
            for k, v in e.fields.items():
                match[f"{item.star}.{k}"] = v
        elif isinstance(item.expr, ast.Attr):
            match[item.name or item.text] = env.get((item.expr.alias, item.expr.name))  # as read
        elif isinstance(item.expr, ast.Call):
            match[item.name or item.text] = env[("()", call_key(item.expr))]  # as computed
        else:
            match[item.name or item.text] = evaluate_expr(item.expr, env)
    return match


def _output_elements(s: ast.Structure) -> list[ast.Element]:
    out: list[ast.Element] = []
    for el in s.elements:
        if el.kind == "nested":
            out.extend(_output_elements(el.nested))
        elif el.kind in ("event", "kleene"):
            out.append(el)
    return out


def evaluate(text: str, records: list[dict], lateness: Any = 0, type_field: str = "type",
             time_field: str = "ts", op_field: str = "op", time_unit: str = "s") -> RefResult:
    patterns = parse_text(text)
    present, late, bad, wm = replay(records, lateness, type_field, time_field, op_field)
    matches: Counter = Counter()
    current: Counter = Counter()
    for p in patterns:
        w = duration(p.within, time_unit) if p.within is not None else None
        aliases = [el.alias for el in _positive_elements(p.structure)]
        for combo, match in pattern_matches(p, present, time_unit):
            key = (p.name, tuple(e.pos for e in combo), freeze_match(match))
            matches[key] += 1
            if w is not None and not all(Fraction(e.ts) >= Fraction(wm) - w for e in combo):
                continue
            d = decision_time(p, {a: e.ts for a, e in zip(aliases, combo, strict=True)}, w)
            if d is not None and not (Fraction(wm) > d[0] if d[1] else Fraction(wm) >= d[0]):
                continue  # not decided yet at the final watermark
            current[key] += 1
    return RefResult(late, bad, matches, current, wm, present)
