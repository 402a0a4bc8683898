"""Hypothesis strategies: random patterns and random event streams.

``gap_patterns`` adds section 7: NOT elements in every position, strategies
and nested structures; ``kleene_patterns`` adds 7.3: repeated elements with
random quantifiers, selection conditions, aggregates in WHERE and EMIT.

Patterns cover the whole v1 language: SEQ and AND with 1-4 elements, WHERE
with equalities between aliases, inequalities with arithmetic and constants,
IN / NOT IN, OR and NOT, PARTITION BY, WITHIN (with and without units), EMIT
with ``x.*``, ``AS`` and default names.  Streams use a small type set and small
value domains so that matches happen, with duplicates, nulls, missing
attributes, mixed types, disorder within the lateness (and a few late
records), and retractions of earlier on-time inserts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

TYPES = ["A", "B", "C", "D"]
ALIASES = ["a", "b", "c", "d"]
ATTRS = ["x", "y", "s", "f"]
STREAM_TYPES = ["A", "A", "B", "B", "C", "C", "D"]

# attribute value domains: small, so equalities and ranges hit
NUMS = [0, 1, 2, 1, 1.0, 2.5, -1]
VALUES = {
    "x": NUMS + [None, "1", True],
    "y": NUMS + [None, "u", False],
    "s": ["u", "v", "u", None, 1],
    "f": [True, False, True, None, 0],
}
MISSING = object()


# ------------------------------------------------------------------ patterns


def _num_lit(draw) -> str:
    return draw(st.sampled_from(["0", "1", "2", "3", "1.5", "-1", "2.0"]))


def _const(draw, attr: str) -> str:
    if attr == "s":
        return draw(st.sampled_from(["'u'", "'v'", '"w"', "'u'", "1", "null"]))
    if attr == "f":
        return draw(st.sampled_from(["true", "false", "0", "null"]))
    return draw(st.sampled_from(["0", "1", "2", "1.5", "2", "1", "-1", "2.0", "'1'", "true", "null"]))


def _ref(draw, aliases: list[str], attrs=ATTRS, ts: bool = True) -> tuple[str, str]:
    a = draw(st.sampled_from(aliases))
    choices = list(attrs) + (["ts"] if ts else [])
    return a, draw(st.sampled_from(choices))


def _num_expr(draw, aliases: list[str]) -> str:
    """A numeric term: attribute, attribute with arithmetic, or a small linear form."""
    a, at = _ref(draw, aliases, ["x", "y"])
    base = f"{a}.{at}"
    form = draw(st.integers(0, 5))
    if form == 0:
        return base
    if form == 1:
        return f"{base} + {_num_lit(draw)}"
    if form == 2:
        return f"{base} * {draw(st.sampled_from(['2', '0.5', '-1', '1.1']))}"
    if form == 3:
        return f"-{base}"
    if form == 4:
        return f"({base} - {_num_lit(draw)}) / {draw(st.sampled_from(['2', '0', '1']))}"
    b, bt = _ref(draw, aliases, ["x", "y"])
    return f"{base} {draw(st.sampled_from(['+', '-', '%']))} {b}.{bt}"


def _atom(draw, aliases: list[str]) -> str:
    kind = draw(st.integers(0, 7))
    op = draw(st.sampled_from(["=", "==", "!=", "<>", "<", "<=", ">", ">="]))
    if kind == 0 and len(aliases) >= 2:  # equality between two aliases (a join)
        a, b = draw(st.permutations(aliases))[:2]
        at = draw(st.sampled_from(["x", "y", "s", "x", "ts"]))
        bt = draw(st.sampled_from([at, at, "x", "y"]))
        eq = draw(st.sampled_from(["=", "=", "=="]))
        return f"{a}.{at} {eq} {b}.{bt}"
    if kind == 1:  # attribute vs constant, either side
        a, at = _ref(draw, aliases, ATTRS, ts=False)
        if draw(st.integers(0, 3)) == 0:
            return f"{_const(draw, at)} {op} {a}.{at}"
        return f"{a}.{at} {op} {_const(draw, at)}"
    if kind == 2:  # inequality with arithmetic, possibly across aliases
        return f"{_num_expr(draw, aliases)} {op} {_num_expr(draw, aliases)}"
    if kind == 3 and len(aliases) >= 2:  # a time band
        a, b = draw(st.permutations(aliases))[:2]
        return f"{b}.ts - {a}.ts {draw(st.sampled_from(['<=', '<', '>=']))} {draw(st.integers(0, 4))}"
    if kind == 4:  # IN
        a, at = _ref(draw, aliases, ATTRS, ts=False)
        items = [_const(draw, at) for _ in range(draw(st.integers(1, 3)))]
        neg = draw(st.sampled_from(["", "", "NOT "]))
        return f"{a}.{at} {neg}IN ({', '.join(items)})"
    if kind == 5:  # a boolean attribute as a condition
        a, _ = _ref(draw, aliases)
        return f"{a}.f"
    if kind == 6:  # numeric vs constant
        a, at = _ref(draw, aliases, ["x", "y"], ts=True)
        return f"{a}.{at} {op} {_num_lit(draw)}"
    a, at = _ref(draw, aliases, ["x", "y"])
    b, bt = _ref(draw, aliases, ["x", "y"])
    return f"{a}.{at} {op} {b}.{bt}"


def _condition(draw, aliases: list[str], depth: int = 0) -> str:
    if depth >= 2:
        return _atom(draw, aliases)
    kind = draw(st.integers(0, 5))
    if kind <= 2:
        return _atom(draw, aliases)
    if kind == 3:
        return f"({_condition(draw, aliases, depth + 1)} OR {_condition(draw, aliases, depth + 1)})"
    if kind == 4:
        return f"NOT ({_condition(draw, aliases, depth + 1)})"
    return f"({_condition(draw, aliases, depth + 1)} AND {_condition(draw, aliases, depth + 1)})"


def _emit_clause(draw, aliases: list[str]) -> str:
    """An optional EMIT clause over these aliases ("" for none)."""
    if not draw(st.booleans()):
        return ""
    items = []
    names = set()
    starred = set()
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 4))
        a, at = _ref(draw, aliases)
        if kind == 0:
            if a in starred or any(n.startswith(f"{a}.") for n in names):
                continue
            starred.add(a)
            items.append(f"{a}.*")
            names.update(f"{a}.{x}" for x in ATTRS + ["type", "ts"])
            continue
        if kind == 1:
            text = f"{a}.{at}"
        elif kind == 2:
            text = _num_expr(draw, aliases)
        elif kind == 3:
            text = _atom(draw, aliases)
        else:
            text = f"{a}.{at}"
        alias_name = draw(st.sampled_from([None, "out", "v1", "v2", "first_ts"]))
        out = alias_name if alias_name is not None else text.replace(" ", "")
        if out in names or any(out.startswith(f"{s}.") for s in starred):
            continue
        names.add(out)
        items.append(f"{text} AS {alias_name}" if alias_name else text)
    return "  EMIT " + ", ".join(items) if items else ""


@st.composite
def patterns(draw, name: str = "p") -> str:
    """The text of one random v1 pattern."""
    op = draw(st.sampled_from(["SEQ", "AND"]))
    k = draw(st.integers(1, 4))
    aliases = ALIASES[:k]
    if op == "AND":
        types = draw(st.permutations(TYPES))[:k]
    else:
        types = [draw(st.sampled_from(TYPES[:3])) for _ in range(k)]
    elements = ", ".join(f"{t} {a}" for t, a in zip(types, aliases, strict=True))
    lines = [f"PATTERN {name}", f"  {op}({elements})"]
    clauses = []
    n_conj = draw(st.sampled_from([0, 1, 1, 1, 2, 2, 3]))
    if n_conj:
        conj = [_condition(draw, aliases) for _ in range(n_conj)]
        clauses.append("  WHERE " + " AND ".join(conj))
    if draw(st.booleans()):
        attrs = draw(st.lists(st.sampled_from(["x", "s", "f"]), min_size=1, max_size=2, unique=True))
        clauses.append("  PARTITION BY " + ", ".join(attrs))
    if draw(st.booleans()):
        clauses.append("  WITHIN " + draw(st.sampled_from(["3", "5", "2 s", "4 seconds", "1 min", "1", "3 ms", "0.004 s", "2 sec", "1 h", "1 d"])))
    emit = _emit_clause(draw, aliases)
    if emit:
        clauses.append(emit)
    order = draw(st.permutations(clauses))
    return "\n".join(lines + list(order)) + "\n"


NOT_ALIASES = ["n", "m"]


@st.composite
def gap_patterns(draw, name: str = "g", trailing_not: bool = False) -> str:
    """The text of one random pattern of spec section 7: NOT elements in every position
    (leading, middle, trailing, side by side), strategies, nested SEQ/AND structures;
    ``trailing_not``: the first NOT is the last element."""
    k = draw(st.integers(1, 3))
    aliases = ALIASES[:k]
    types = [draw(st.sampled_from(TYPES[:3])) for _ in range(k)]
    parts = [f"{t} {a}" for t, a in zip(types, aliases, strict=True)]
    nested = False
    if k >= 2 and draw(st.integers(0, 3)) == 0:  # nest two neighbours
        i = draw(st.integers(0, k - 2))
        op = draw(st.sampled_from(["AND", "SEQ"]))
        if op == "AND" and types[i] == types[i + 1]:
            parts[i + 1] = f"D {aliases[i + 1]}"
        parts[i:i + 2] = [f"{op}({parts[i]}, {parts[i + 1]})"]
        nested = True
    n_not = draw(st.sampled_from([1, 2] if trailing_not else [0, 1, 1, 1, 2]))
    nots = NOT_ALIASES[:n_not]
    for n, na in enumerate(nots):
        pos = len(parts) if trailing_not and n == 0 else draw(st.integers(0, len(parts)))
        parts.insert(pos, f"NOT {draw(st.sampled_from(TYPES[:3]))} {na}")
    strategy = None
    if not nested:
        strategy = draw(st.sampled_from([None, None, "skip_till_any_match", "skip_till_next_match",
                                         "strict_contiguity"]))
        if strategy == "strict_contiguity" and nots:
            strategy = "skip_till_next_match"
    lines = [f"PATTERN {name}", f"  SEQ({', '.join(parts)})"]
    clauses = []
    conj = [_condition(draw, aliases) for _ in range(draw(st.sampled_from([0, 0, 1, 2])))]
    for na in nots:
        for _ in range(draw(st.sampled_from([0, 1, 1, 2]))):
            if draw(st.booleans()):  # a join to the match: the index key, or a residual
                a = draw(st.sampled_from(aliases))
                at = draw(st.sampled_from(["x", "s", "x"]))
                conj.append(f"{na}.{at} = {a}.{at}")
            else:
                conj.append(_condition(draw, [na] + draw(st.lists(st.sampled_from(aliases), max_size=1))))
    if conj:
        clauses.append("  WHERE " + " AND ".join(draw(st.permutations(conj))))
    if draw(st.booleans()):
        attrs = draw(st.lists(st.sampled_from(["x", "s", "f"]), min_size=1, max_size=2, unique=True))
        clauses.append("  PARTITION BY " + ", ".join(attrs))
    edge = bool(nots) and (parts[0].startswith("NOT") or parts[-1].startswith("NOT"))
    if edge or draw(st.booleans()):
        clauses.append("  WITHIN " + draw(st.sampled_from(["3", "5", "2 s", "1", "4", "3 ms", "0.004 s"])))
    emit = _emit_clause(draw, aliases)
    if emit:
        clauses.append(emit)
    if strategy is not None:
        clauses.append(f"  USING {strategy}")
    order = draw(st.permutations(clauses))
    return "\n".join(lines + list(order)) + "\n"


KLEENE_ALIASES = ["k", "r"]
QUANTIFIERS = ["+", "+", "+", "{1}", "{2}", "{2,}", "{1,2}", "{2,3}", "{3,}"]


def _aggregate(draw, k: str) -> str:
    fn = draw(st.sampled_from(["count", "count", "sum", "avg", "min", "max", "first", "last"]))
    if fn == "count" and draw(st.booleans()):
        return f"count({k})"
    return f"{fn}({k}.{draw(st.sampled_from(['x', 'y', 'x', 's', 'f', 'ts']))})"


def _aggregate_condition(draw, k: str, aliases: list[str]) -> str:
    agg = _aggregate(draw, k)
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    if draw(st.integers(0, 2)) == 0:  # against a positive event's attribute
        a, at = _ref(draw, aliases, ["x", "y"])
        return f"{agg} {op} {a}.{at}"
    rhs = draw(st.sampled_from(["0", "1", "2", "1.5", "3", "'u'", "true", "-1"]))
    if draw(st.integers(0, 3)) == 0:
        return f"({agg} {op} {rhs} OR {_aggregate(draw, k)} > 0)"
    return f"{agg} {op} {rhs}"


@st.composite
def kleene_patterns(draw, name: str = "k") -> str:
    """The text of one random pattern of spec 7.3: one or two repeated elements (random
    quantifiers, in any position, maybe beside a NOT), selection conditions (own filter,
    equality key, residual with a positive alias), aggregate conditions, aggregates in EMIT
    (or no EMIT: the event lists)."""
    k = draw(st.sampled_from([1, 1, 2, 2, 3]))
    aliases = ALIASES[:k]
    types = [draw(st.sampled_from(TYPES[:3])) for _ in range(k)]
    parts = [f"{t} {a}" for t, a in zip(types, aliases, strict=True)]
    reps = KLEENE_ALIASES[: draw(st.sampled_from([1, 1, 1, 2]))]
    for ka in reps:
        pos = draw(st.integers(0, len(parts)))
        kt = draw(st.sampled_from(TYPES[:3] + types))  # often a positive element's type
        parts.insert(pos, f"{kt}{draw(st.sampled_from(QUANTIFIERS))} {ka}")
    if draw(st.integers(0, 4)) == 0:
        parts.insert(draw(st.integers(0, len(parts))), f"NOT {draw(st.sampled_from(TYPES[:3]))} n")
    conj = [_condition(draw, aliases) for _ in range(draw(st.sampled_from([0, 0, 0, 0, 1])))]
    for ka in reps:
        for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
            kind = draw(st.integers(0, 3))
            if kind == 0:  # an equality key with a positive alias
                a = draw(st.sampled_from(aliases))
                at = draw(st.sampled_from(["x", "s", "x"]))
                conj.append(f"{ka}.{at} = {a}.{at}")
            elif kind == 1:  # a residual selection condition (scan)
                a = draw(st.sampled_from(aliases))
                conj.append(draw(st.sampled_from([f"{ka}.x <= {a}.x", f"{ka}.y != {a}.y", f"{ka}.ts >= {a}.ts - 2",
                                                  f"({ka}.s = {a}.s OR {ka}.x > 0)"])))
            elif kind == 2:  # the repeated alias's own filter, mostly one that often holds
                conj.append(draw(st.sampled_from([f"{ka}.x >= 0", f"{ka}.y < 2", f"{ka}.s != 'v'",
                                                  f"{ka}.x IN (0, 1, '1')", f"NOT {ka}.f = false"])))
            else:
                conj.append(_condition(draw, [ka]))
        for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2]))):
            conj.append(_aggregate_condition(draw, ka, aliases))
    clauses = []
    if conj:
        clauses.append("  WHERE " + " AND ".join(draw(st.permutations(conj))))
    if draw(st.integers(0, 2)) == 0:
        clauses.append("  PARTITION BY " + draw(st.sampled_from(["x", "s", "f", "x, s"])))
    gap_start = ("+", "{", "NOT")
    edge = any(x in parts[0] for x in gap_start) or any(x in parts[-1] for x in gap_start)
    if edge or draw(st.booleans()):
        clauses.append("  WITHIN " + draw(st.sampled_from(["3", "5", "2 s", "8", "10", "20", "3000 ms", "20"])))
    if draw(st.integers(0, 3)):
        items, names = [], set()
        for _ in range(draw(st.integers(1, 5))):
            kind = draw(st.integers(0, 3))
            if kind == 0:
                a, at = _ref(draw, aliases)
                text = f"{a}.{at}"
            elif kind == 1:
                text = f"{_aggregate(draw, draw(st.sampled_from(reps)))} + 1"
            else:
                text = _aggregate(draw, draw(st.sampled_from(reps)))
            out = draw(st.sampled_from([None, "v1", "v2"])) or text.replace(" ", "")
            if out in names:
                continue
            names.add(out)
            items.append(text if out == text.replace(" ", "") else f"{text} AS {out}")
        clauses.append("  EMIT " + ", ".join(items))
    if draw(st.integers(0, 4)) == 0:
        clauses.append("  USING skip_till_next_match")
    order = draw(st.permutations(clauses))
    return "\n".join([f"PATTERN {name}", f"  SEQ({', '.join(parts)})"] + list(order)) + "\n"


@st.composite
def pattern_files(draw) -> str:
    """One or two patterns in one file (several patterns over one pass)."""
    n = draw(st.integers(1, 2))
    return "".join(draw(patterns(name=f"p{i}")) for i in range(n))


# ------------------------------------------------------------------- streams


@dataclass
class Case:
    text: str
    records: list[dict]
    lateness: int
    time_field: str = "ts"
    time_unit: str = "s"

    def __repr__(self) -> str:  # readable in hypothesis failure reports
        recs = "\n".join(f"  {i}: {r}" for i, r in enumerate(self.records, 1))
        return (f"Case(lateness={self.lateness}, time_field={self.time_field!r}, "
                f"time_unit={self.time_unit!r})\n{self.text}records:\n{recs}")


def _record_key(rec: dict):
    def vk(v):
        if type(v) is bool:
            return ("bool", v)
        if type(v) in (int, float):
            return ("num", v)
        return (type(v).__name__, v)

    return tuple(sorted((k, vk(v)) for k, v in rec.items()))


_ACTIONS = ["new"] * 10 + ["dup", "retract", "retract"]


def _steps(lateness: int, types: list[str] = STREAM_TYPES) -> st.SearchStrategy:
    return st.tuples(
        st.sampled_from(_ACTIONS),
        st.sampled_from(range(64)),  # which earlier record (dup / retract)
        st.sampled_from(types),
        # event time: max ts - lateness + this (disorder within the lateness, or a step forward);
        # -1 makes a late record
        st.sampled_from([-1] + list(range(lateness + 3)) + [lateness + 1] * 2),
        st.tuples(*(st.sampled_from(VALUES[a] + ([MISSING] if a != "x" else [])) for a in ATTRS)),
        st.sampled_from(range(7)),  # extra: explicit "+" op / an attribute named ts / late retraction
    )


@st.composite
def streams(draw, lateness: int, time_field: str = "ts", max_len: int = 28,
            types: list[str] = STREAM_TYPES, min_len: int = 0) -> list[dict]:
    """Records in arrival order: inserts (some equal), retractions, disorder within the lateness.

    A list of random steps is interpreted against the stream so far (so hypothesis
    shrinks the list, not a chain of dependent draws).
    """
    step = _steps(lateness, types)
    n = draw(st.sampled_from([n for n in [0, 2, 5] + list(range(max_len // 2, max_len + 1)) if n >= min_len]))
    steps = draw(st.lists(step, min_size=n, max_size=n))
    records: list[dict] = []
    present: list[dict] = []  # on-time inserted, not yet retracted (record without op)
    max_ts = None
    for action, pick, typ, dt, vals, extra in steps:
        wm = None if max_ts is None else max_ts - lateness
        if action == "retract" and present:
            rec = present[pick % len(present)]
            on_time = wm is None or rec[time_field] >= wm
            if not on_time and extra != 0:
                continue  # mostly retract only what is still on time
            out = dict(rec)
            out["op"] = "-"
            records.append(out)
            if on_time:
                key = _record_key(rec)
                for j, r in enumerate(present):
                    if _record_key(r) == key:
                        del present[j]
                        break
            continue
        if action == "dup" and records:
            rec = dict(records[pick % len(records)])
            rec.pop("op", None)
        else:
            ts = max(0, dt) if max_ts is None else max(0, max_ts - lateness + dt)
            rec = {"type": typ, time_field: ts}
            for attr, v in zip(ATTRS, vals, strict=True):
                if v is not MISSING:
                    rec[attr] = v
            if time_field != "ts" and extra == 1:
                rec["ts"] = [0, 100, "x"][pick % 3]  # an attribute named ts
        if extra == 2:
            rec["op"] = "+"  # an explicit insert op
        records.append(rec)
        if max_ts is None or rec[time_field] >= max_ts - lateness:
            max_ts = rec[time_field] if max_ts is None else max(max_ts, rec[time_field])
            present.append({k: v for k, v in rec.items() if k != "op"})
    return records


@st.composite
def cases(draw, max_len: int = 28) -> Case:
    lateness = draw(st.sampled_from([0, 0, 1, 2, 4]))
    time_field = draw(st.sampled_from(["ts", "ts", "ts", "t"]))
    time_unit = draw(st.sampled_from(["s", "s", "s", "ms"]))
    records = draw(streams(lateness, time_field, max_len))
    text = draw(pattern_files())
    return Case(text, records, lateness, time_field, time_unit)


@st.composite
def kleene_cases(draw, max_len: int = 24) -> Case:
    """Section 7.3 patterns (one, sometimes with a v1 pattern beside it) over random streams."""
    lateness = draw(st.sampled_from([0, 0, 1, 2, 4]))
    time_unit = draw(st.sampled_from(["s", "s", "s", "s", "ms"]))
    text = draw(kleene_patterns(name="k0"))
    # mostly the pattern's own types (plus one it does not use): repetitions need events
    used = sorted({t for t in TYPES if f"{t} " in text or f"{t}+" in text or f"{t}{{" in text})
    types = draw(st.sampled_from([STREAM_TYPES, used + used + ["D"]]))
    records = draw(streams(lateness, "ts", max_len, types))
    if draw(st.integers(0, 4)) == 0:
        text += draw(patterns(name="p1"))
    return Case(text, records, lateness, "ts", time_unit)


ALL_AGGREGATES = ("count(k), count(k.x) AS nx, sum(k.x) AS sx, sum(k.y) AS sy, avg(k.x) AS ax, avg(k.y) AS ay, "
                  "min(k.x) AS mnx, max(k.y) AS mxy, first(k.x) AS fx, last(k.y) AS ly, first(k.ts) AS ft, "
                  "last(k.s) AS ls, count(k.f) AS nf")


@st.composite
def dense_kleene_cases(draw, max_len: int = 26) -> Case:
    """One repeated element among one or two positive ones, every aggregate in EMIT (or the
    event lists), over dense streams of the pattern's types: long runs, so sums, averages and
    extremes over many mixed values (numbers, nulls, strings, booleans) are compared."""
    lateness = draw(st.sampled_from([0, 0, 1, 2, 3]))
    k = draw(st.integers(1, 2))
    types = [draw(st.sampled_from(TYPES[:2])) for _ in range(k)]
    parts = [f"{t} {a}" for t, a in zip(types, ALIASES[:k], strict=True)]
    pos = draw(st.integers(0, k))
    parts.insert(pos, f"{draw(st.sampled_from(TYPES[:2]))}{draw(st.sampled_from(QUANTIFIERS))} k")
    lines = ["PATTERN k0", f"  SEQ({', '.join(parts)})", "  WITHIN " + draw(st.sampled_from(["6", "10", "20"]))]
    where = draw(st.sampled_from(["", "", "k.x != 2", "count(k) >= 2", "sum(k.x) > 1", "k.s = a.s",
                                  "avg(k.y) < a.x", "k.x <= a.x"]))
    if where:
        lines.append(f"  WHERE {where}")
    if draw(st.booleans()):
        lines.append("  PARTITION BY " + draw(st.sampled_from(["s", "f"])))
    if draw(st.integers(0, 3)):
        lines.append(f"  EMIT {ALL_AGGREGATES}")
    records = draw(streams(lateness, "ts", max_len, TYPES[:2] * 3 + ["C"]))
    return Case("\n".join(lines) + "\n", records, lateness)


@st.composite
def gap_cases(draw, max_len: int = 24, trailing_not: bool = False) -> Case:
    """Section 7 patterns (one, or one with a v1 pattern beside it) over random streams."""
    lateness = draw(st.sampled_from([0, 0, 1, 2, 4]))
    time_unit = draw(st.sampled_from(["s", "s", "s", "ms"]))
    records = draw(streams(lateness, "ts", max_len))
    text = draw(gap_patterns(name="g0", trailing_not=trailing_not))
    if draw(st.integers(0, 3)) == 0:
        text += draw(st.sampled_from([draw(gap_patterns(name="g1")), draw(patterns(name="p1"))]))
    return Case(text, records, lateness, "ts", time_unit)


AND_TYPES = ["A", "B", "C", "D", "E", "F", "G", "H"]


@st.composite
def and_within_patterns(draw, name: str = "w") -> str:
    """An AND of 2-8 elements with WITHIN (compiled to bands between neighbours plus one span
    predicate ``max - min <= w``), sometimes with two neighbours nested in a SEQ or AND, a WHERE
    conjunct, PARTITION BY and EMIT."""
    k = draw(st.integers(2, 8))
    types = draw(st.permutations(AND_TYPES))[:k]
    aliases = [f"e{i}" for i in range(k)]
    parts = [f"{t} {a}" for t, a in zip(types, aliases, strict=True)]
    if k >= 3 and draw(st.integers(0, 2)) == 0:
        i = draw(st.integers(0, k - 2))
        parts[i:i + 2] = [f"{draw(st.sampled_from(['SEQ', 'AND']))}({parts[i]}, {parts[i + 1]})"]
    lines = [f"PATTERN {name}", f"  AND({', '.join(parts)})"]
    # windows from "equal times only" to "the whole stream", so that large ANDs match too
    clauses = ["  WITHIN " + draw(st.sampled_from(["20", "1 min", "8", "12 s", "5", "3", "1", "3 ms", "0.004 s"]))]
    if draw(st.integers(0, 3)) == 0:
        clauses.append("  WHERE " + _condition(draw, aliases))
    if draw(st.booleans()):
        clauses.append("  PARTITION BY " + draw(st.sampled_from(["s", "x"])))
    emit = _emit_clause(draw, aliases)
    if emit:
        clauses.append(emit)
    return "\n".join(lines + list(draw(st.permutations(clauses)))) + "\n"


@st.composite
def and_within_cases(draw) -> Case:
    """AND+WITHIN patterns over streams of their own types (and one other): disorder within the
    lateness, duplicates, retractions; about three events per type, so the reference's
    brute force over every tuple stays small for eight elements."""
    lateness = draw(st.sampled_from([0, 0, 1, 2, 4]))
    time_unit = draw(st.sampled_from(["s", "s", "s", "ms"]))
    text = draw(and_within_patterns(name="w0"))
    used = [t for t in AND_TYPES if f"{t} e" in text]
    n = 6 + 3 * len(used)
    records = draw(streams(lateness, "ts", n, used + ["D" if "D " not in text else "Z"], min_len=n * 2 // 3))
    # time moves slower (a monotone map keeps the order, equal records stay equal), so
    # that all the types often fall in one window
    squeeze = draw(st.sampled_from([4, 2, 1]))
    records = _valid_retractions([{**r, "ts": r["ts"] // squeeze} for r in records], lateness)
    return Case(text, records, lateness, "ts", time_unit)


def _valid_retractions(records: list[dict], lateness: int) -> list[dict]:
    """The records without the on-time retractions that retract nothing present.

    Why: squeezing times can make a record that was late (and so never present) on time, and a
    retraction the stream meant for a late copy then retracts nothing; replaying the rules of
    ``streams`` (on time: ts >= max on-time ts - lateness) keeps the stream valid."""
    out: list[dict] = []
    present: dict[Any, int] = {}
    max_ts = None
    for r in records:
        on_time = max_ts is None or r["ts"] >= max_ts - lateness
        key = _record_key({k: v for k, v in r.items() if k != "op"})
        if r.get("op") == "-":
            if on_time:
                if not present.get(key):
                    continue
                present[key] -= 1
            out.append(r)
            continue
        out.append(r)
        if on_time:
            max_ts = r["ts"] if max_ts is None else max(max_ts, r["ts"])
            present[key] = present.get(key, 0) + 1
    return out


# filters of one alias (``{a}``) that twin elements repeat (``twin_patterns``)
TWIN_FILTERS = [None, "{a}.x < 2", "{a}.x >= 1", "{a}.s = 'u'", "{a}.f", "NOT ({a}.y > 0)", "{a}.x IN (0, 1, '1')",
                "({a}.x < 1 OR {a}.s = 'u')", "{a}.x < 2 AND {a}.y != 0"]


@st.composite
def twin_patterns(draw, name: str = "t") -> str:
    """A SEQ of 2-4 elements where neighbours often have the same type and
    the same own filter (card testing's ``s1`` and ``s2``: leaves that store the same tuples,
    ``cep.plan.physical.share_leaf_storage``), mostly keyed and windowed, sometimes with a
    condition across elements that may tell the twins' leaf tuples apart."""
    k = draw(st.integers(2, 4))
    aliases = ALIASES[:k]
    types = [draw(st.sampled_from(TYPES[:2])) for _ in range(k)]
    filters = [draw(st.sampled_from(TWIN_FILTERS)) for _ in range(k)]
    i = draw(st.integers(0, k - 2))  # at least one pair of twins
    types[i + 1] = types[i]
    filters[i + 1] = filters[i]
    for j in range(1, k):  # more twins in a row
        if draw(st.integers(0, 2)) == 0:
            types[j], filters[j] = types[j - 1], filters[j - 1]
    return seq_with_filters(draw, name, types, filters, aliases, 3)


def seq_with_filters(draw, name: str, types: list[str], filters: list[str | None], aliases: list[str],
                     odds: int) -> str:
    """A SEQ of ``types`` with each element's own filter (``TWIN_FILTERS``' form), sometimes a condition
    across elements, keyed and windowed ``odds`` times in ``odds + 1``, an EMIT clause, clauses in any order."""
    elements = ", ".join(f"{t} {a}" for t, a in zip(types, aliases, strict=True))
    conj = [f.format(a=a) for f, a in zip(filters, aliases, strict=True) if f is not None]
    for _ in range(draw(st.sampled_from([0, 0, 0, 1]))):
        conj.append(_condition(draw, aliases))
    clauses = []
    if conj:
        clauses.append("  WHERE " + " AND ".join(draw(st.permutations(conj))))
    if draw(st.integers(0, odds)):
        clauses.append("  PARTITION BY " + draw(st.sampled_from(["s", "x", "s, f"])))
    if draw(st.integers(0, odds)):
        clauses.append("  WITHIN " + draw(st.sampled_from(["2", "3", "5", "1", "2 s"])))
    emit = _emit_clause(draw, aliases)
    if emit:
        clauses.append(emit)
    return "\n".join([f"PATTERN {name}", f"  SEQ({elements})", *draw(st.permutations(clauses))]) + "\n"


@st.composite
def twin_cases(draw, max_len: int = 30) -> Case:
    """``twin_patterns`` over dense streams of its types: disorder, duplicates, retractions, late
    records, and with a window, expiry (sometimes a second pattern beside it)."""
    lateness = draw(st.sampled_from([0, 0, 1, 2, 4]))
    text = draw(twin_patterns(name="t0"))
    if draw(st.integers(0, 4)) == 0:
        text += draw(st.sampled_from([draw(twin_patterns(name="t1")), draw(patterns(name="p1"))]))
    records = draw(streams(lateness, "ts", max_len, ["A", "A", "A", "B", "B", "C"]))
    return Case(text, records, lateness, "ts", draw(st.sampled_from(["s", "s", "ms"])))
