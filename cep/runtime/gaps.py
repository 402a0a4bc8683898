"""Anti-joins over sorted indexes: the gap elements of a pattern (docs/language.md section 7).

Why: a NOT (and the implicit NOTs of skip_till_next_match and strict_contiguity)
asks, for a match of the positive elements, "is there a qualifying event between
p.ts and n.ts?".  Scanning the gap would cost the gap's size per match; instead
each gap type keeps, per key (the values the pattern equates with the match),
its events sorted by time, so the question is two binary searches (plan check
``count``), or a walk over the key's candidates inside the gap when a residual
condition relates them to the match (plan check ``scan``).  Which one a gap gets
is decided by the plan layer (``cep.plan.gaps``); this module executes it.

A Kleene element (docs/language.md section 7, Repetition) asks instead "what are the qualifying events, and
their aggregates?": its index keeps each key's events in a range-aggregate
structure (``cep.runtime.aggtree``), so a match's count, sum, avg, min, max,
first and last are range queries, not a pass over the repeated events.

Entries are ``(ts, serial)`` pairs: serials are unique, so equal events are two
entries, and a retraction or an expiry removes exactly one.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from cep import codegen
from cep.lang.gcq import TIME_ATTR, CompiledPattern
from cep.plan.gaps import GapIndexSpec, GapPlan, plan_decision
from cep.runtime.aggtree import RangeAggregates, result, summarize
from cep.values import canon

_BELOW = -1  # sorts before every serial
_ABOVE = math.inf  # sorts after every serial


def _key_source(reads: Sequence[str]) -> list[str]:
    """Lines computing ``k``, the hash key of equality values read by the expressions ``reads``;
    ``return None`` when one is null, NaN or not a scalar (SQL equality with null is unknown,
    so such an event qualifies for no match).  One value is the bare key, several a tuple."""
    lines = []
    for i, r in enumerate(reads):
        lines.append(f"    v{i} = {r}")
        lines.append(f"    if v{i} is None or type(v{i}) in NONSCALAR or v{i} != v{i}: return None")
        lines.append(f"    if type(v{i}) is bool: v{i} = canon(v{i})")
    if len(reads) == 1:
        lines.append("    k = v0")
    else:
        lines.append("    k = (" + "".join(f"v{i}, " for i in range(len(reads))) + ")")
    return lines


def _read_src(var: str, attr: str) -> str:
    return f"{var}.ts" if attr == TIME_ATTR else f"{var}.fields.get({attr!r})"


def _compile(label: str, src: str, env: dict[str, Any], name: str) -> Any:
    env.update(NONSCALAR=(list, dict), canon=canon, bisect_left=bisect_left, BELOW=_BELOW, ABOVE=_ABOVE)
    return codegen.define(label, src, name, env)


class GapIndex:
    """Per key, the qualifying events of the gap types as a list of ``(ts, serial)`` sorted by time.

    Plain lists: in-order input appends, window expiry deletes at the front, and a range
    is two C-level bisections.
    """

    def __init__(self, spec: GapIndexSpec, pattern: str = "") -> None:
        self.spec = spec
        self.groups: dict[Any, list[tuple[Any, int]]] = {}
        src = ["def key_of(e):", *_key_source([_read_src("e", a) for a in spec.key_attrs]), "    return k"]
        if not spec.key_attrs:
            src = ["def key_of(e):", "    return ()"]
        self.key_of = _compile(f"{pattern}: key of gap index g{spec.id}", "\n".join(src) + "\n", {}, "key_of")

    def add(self, key: Any, ts: Any, serial: int) -> None:
        group = self.groups.get(key)
        if group is None:
            self.groups[key] = [(ts, serial)]
        elif group[-1][0] <= ts:
            group.append((ts, serial))
        else:
            group.insert(bisect_left(group, (ts, serial)), (ts, serial))

    def remove(self, key: Any, ts: Any, serial: int) -> None:
        group = self.groups[key]
        if group[0][1] == serial:  # expiry in time order: the key's oldest entry
            del group[0]
        else:
            del group[bisect_left(group, (ts, serial))]
        if not group:
            del self.groups[key]

    def size(self) -> int:
        return sum(len(g) for g in self.groups.values())


class KleeneIndex(GapIndex):
    """Per key, a Kleene element's qualifying events in a range-aggregate structure whose
    value columns are the aggregated attributes (``spec.columns``), read from the engine's
    events by serial."""

    def __init__(self, spec: GapIndexSpec, pattern: str, events: dict[int, Any]) -> None:
        super().__init__(spec, pattern)
        self.columns = spec.columns
        self.events = events
        self.agroups: dict[Any, RangeAggregates] = {}

    def add(self, key: Any, ts: Any, serial: int) -> None:
        group = self.agroups.get(key)
        if group is None:
            group = self.agroups[key] = RangeAggregates(len(self.columns))
        event = self.events[serial]
        group.add((ts, serial), tuple([_read(event, a) for a in self.columns]))

    def remove(self, key: Any, ts: Any, serial: int) -> None:
        group = self.agroups[key]
        group.remove((ts, serial))
        if not len(group):
            del self.agroups[key]

    def keys_in(self, key: Any, lo: tuple, hi: tuple) -> list[tuple[Any, int]]:
        group = self.agroups.get(key)
        return group.items(lo, hi) if group is not None else []

    def size(self) -> int:
        return sum(len(g) for g in self.agroups.values())


def _read(event: Any, attr: str) -> Any:
    return event.ts if attr == TIME_ATTR else event.fields.get(attr)


class GapChecks:
    """The gap elements of one pattern: decision time and the anti-join check of a match.

    Both are generated once per pattern from the plan (they run once per match): the
    decision time is ``max`` over the gaps' ends; the check probes each gap's index with
    the match's key and its time range, and scans the range only for a residual.
    """

    def __init__(self, cp: CompiledPattern, plans: list[GapPlan], indexes: list[GapIndex],
                 events: dict[int, Any]) -> None:
        self.plans = plans
        self.indexes = indexes
        self.events = events
        k = len(cp.atoms)
        every = range(k)

        def latest(ix) -> str:
            return _minmax("max", [f"m[{i}].ts" for i in ix])

        def earliest(ix) -> str:
            return _minmax("min", [f"m[{i}].ts" for i in ix])

        env: dict[str, Any] = {"W": cp.within, "E": events}
        ends = []
        lines = ["def exists_in_gaps(m):"]
        self.within = cp.within
        self.aggregates = cp.aggregates
        self.agg_condition = cp.agg_condition
        self.repetitions: list[tuple[GapPlan, Any]] = []  # Kleene plans and their key functions
        for n, plan in enumerate(plans):
            g = plan.gap
            if g.before:
                ends.append(f"({earliest(g.before)}, False)")
            else:
                ends.append(f"({earliest(every)} + W, True)")
            if g.origin == "kleene":  # a range aggregate, not an anti-join (docs/language.md section 7, Repetition)
                reads = [_read_src(f"m[{i}]", a) for i, a in g.key_sources]
                src = ["def key_of(m):", *(_key_source(reads) if reads else ["    k = ()"]), "    return k"]
                self.repetitions.append((plan, _compile(f"{cp.name}: key of {g.text}", "\n".join(src) + "\n",
                                                        {}, "key_of")))
                continue
            env[f"G{n}"] = indexes[plan.index].groups
            env[f"R{n}"] = g.residual
            # one block per gap; ``break`` leaves it with nothing found (a null key value is
            # equal to nothing, so then no event qualifies for this gap)
            lines.append(f"    # gap {n}: {g.text}")
            lines.append("    while True:")
            for b in _key_source_checked([_read_src(f"m[{i}]", a) for i, a in g.key_sources]):
                lines.append("    " + b)
            lo = f"({latest(g.after)}, ABOVE)" if g.after else f"({latest(every)} - W, BELOW)"
            hi = f"({earliest(g.before)}, BELOW)" if g.before else f"({earliest(every)} + W, ABOVE)"
            lines.append(f"        grp = G{n}.get(k)")
            lines.append("        if grp is None: break")
            lines.append(f"        i = bisect_left(grp, {lo})")
            lines.append(f"        j = bisect_left(grp, {hi})")
            lines.append("        if i >= j: break")
            if g.residual is None:
                lines.append("        return True")
            else:
                lines.append("        for _t, s in grp[i:j]:")
                lines.append(f"            if R{n}(E[s], *m): return True")
                lines.append("        break")
        lines.append("    return False")
        self._exists = _compile(f"{cp.name}: gap check", "\n".join(lines) + "\n", env, "exists_in_gaps")
        if not self.repetitions and self.agg_condition is None:
            # only anti-joins: the check is the whole evaluation (one call per decided match)
            simple = [ln.replace("return True", "return None").replace("return False", "return NO_AGGREGATES")
                      for ln in lines]
            simple[0] = "def evaluate(m):"
            env["NO_AGGREGATES"] = ()
            self.evaluate = _compile(f"{cp.name}: gap check", "\n".join(simple) + "\n", env,  # type: ignore[method-assign]
                                     "evaluate")
        self._compile_decider(cp, plans, env)
        dt = ends[0] if len(ends) == 1 else f"max({', '.join(ends)})"
        # (t, strict): decided once watermark >= t (> t if strict); middle and leading gaps end at
        # their right neighbour's earliest time, a trailing gap at min positive ts + within (docs/language.md section 7, Decided matches)
        self.decision_time = _compile(f"{cp.name}: decision time", f"def decision_time(m):\n    return {dt}\n",
                                      env, "decision_time")

    def _compile_decider(self, cp: CompiledPattern, plans: list[GapPlan], env: dict[str, Any]) -> None:
        """``decider(m) -> atom``: the deciding event of a match, as the plan decides it
        (``cep.plan.gaps.plan_decision``).

        Sets ``trailing`` (decided strictly after the time), ``offset`` (``w`` or 0: the
        decision time is the deciding event's ts plus it), ``deciders`` (the atoms that
        can decide) and ``decider``.
        """
        decision = plan_decision(cp, plans)
        self.trailing = decision.trailing
        self.offset = decision.offset
        self.deciders = decision.deciders
        sets = decision.candidates
        lines = ["def decider(m):"]
        for n, cands in enumerate(sets):
            lines += [f"    v = m[{cands[0]}].ts", f"    x = {cands[0]}"]
            for c in cands[1:]:
                lines += [f"    if m[{c}].ts < v:", f"        v = m[{c}].ts", f"        x = {c}"]
            if n == 0:
                lines += ["    best = v", "    a = x"]
            else:
                lines += ["    if v > best or (v == best and x < a):", "        best = v", "        a = x"]
        lines.append("    return a")
        self.decider = _compile(f"{cp.name}: deciding event", "\n".join(lines) + "\n", env, "decider")

    def holds(self, match: Sequence[Any]) -> bool:
        return self.evaluate(match) is not None

    def evaluate(self, match: Sequence[Any]) -> list | None:
        """The match's aggregate slots (docs/language.md section 7, Repetition) if it holds: no event qualifies for a NOT
        element, each Kleene element has an allowed number of events, and the conditions on
        aggregates are true; None if it does not hold."""
        if self._exists(match):
            return None
        aggs: list = [None] * len(self.aggregates)
        for plan, key_of in self.repetitions:
            key = key_of(match)
            if key is None:
                return None  # no event can be equal to a null: no repetition at all
            g = plan.gap
            if g.after:
                lo = (max(match[i].ts for i in g.after), _ABOVE)
            else:
                lo = (max(e.ts for e in match) - self.within, _BELOW)
            if g.before:
                hi = (min(match[i].ts for i in g.before), _BELOW)
            else:
                hi = (min(e.ts for e in match) + self.within, _ABOVE)
            ix = self.indexes[plan.index]
            assert isinstance(ix, KleeneIndex)
            if plan.check == "scan":
                ok = self._scanned(g, ix, match, key, lo, hi, aggs)
            else:
                ok = self._aggregated(g, ix, key, lo, hi, aggs)
            if not ok:
                return None
        if self.agg_condition is not None and not self.agg_condition(*match, *aggs):
            return None
        return aggs

    def _aggregated(self, g: Any, ix: KleeneIndex, key: Any, lo: tuple, hi: tuple, aggs: list) -> bool:
        """Fill a Kleene element's aggregate slots by range queries; False if its count is out of bounds."""
        group = ix.agroups.get(key)
        n = group.count(lo, hi) if group is not None else 0
        if n < g.min_count or (g.max_count is not None and n > g.max_count):
            return False
        assert group is not None
        cols = ix.columns
        summaries: dict[int, tuple] | None = None
        for j in g.aggregates:
            a = self.aggregates[j]
            if a.fn == "count" and a.attr is None:
                aggs[j] = n
            elif a.fn == "first":
                aggs[j] = group.first(lo, hi, cols.index(a.attr))[1]
            elif a.fn == "last":
                aggs[j] = group.last(lo, hi, cols.index(a.attr))[1]
            elif a.fn == "events":
                aggs[j] = [self.events[s].fields for _ts, s in group.items(lo, hi)]
            else:
                if summaries is None:
                    wanted = {cols.index(self.aggregates[x].attr) for x in g.aggregates
                              if self.aggregates[x].attr is not None}
                    summaries = group.columns(lo, hi, sorted(wanted))
                aggs[j] = result(a.fn, summaries[cols.index(a.attr)])
        return True

    def _scanned(self, g: Any, ix: KleeneIndex, match: Sequence[Any], key: Any, lo: tuple, hi: tuple,
                 aggs: list) -> bool:
        """A residual condition selects the events per match: scan the key's candidates."""
        events = self.events
        residual = g.residual
        chosen = [events[s] for _ts, s in ix.keys_in(key, lo, hi)]
        chosen = [e for e in chosen if residual(e, *match)]
        n = len(chosen)
        if n < g.min_count or (g.max_count is not None and n > g.max_count):
            return False
        for j in g.aggregates:
            a = self.aggregates[j]
            if a.fn == "count" and a.attr is None:
                aggs[j] = n
            elif a.fn == "events":
                aggs[j] = [e.fields for e in chosen]
            elif a.fn in ("first", "last"):
                aggs[j] = _read(chosen[0 if a.fn == "first" else -1], a.attr)
            else:
                aggs[j] = result(a.fn, summarize([_read(e, a.attr) for e in chosen]))
        return True


def _minmax(fn: str, items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{fn}({', '.join(items)})"


def _key_source_checked(reads: Sequence[str]) -> list[str]:
    """``_key_source`` inside the ``while True`` block of one gap: a null key ends the gap's check."""
    if not reads:
        return ["    k = ()"]
    return [line.replace("return None", "break") for line in _key_source(reads)]
