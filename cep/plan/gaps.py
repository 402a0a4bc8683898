"""How each gap element of a pattern is checked (docs/language.md section 7): the anti-join plan.

Why a plan: the runtime must not decide per event how to answer "is there a
qualifying event in this gap?"; the answer depends only on the pattern, so it is
decided here, once, and ``cep explain`` prints it.  Every gap element gets a
sorted index: per key (the gap event's attributes that the pattern equates with
the match's positive events, PARTITION BY included), the gap type's events that
pass the gap element's own filter, sorted by time.  Then

* ``count``: nothing else relates the gap event to the match, so the check is
  two binary searches on the key's sorted times: O(log n);
* ``scan``: a residual condition between the gap event and the positive events
  (``s.amount > o.amount``) is evaluated on the candidates of the key inside the
  gap, stopping at the first one that qualifies: O(log n + candidates).

Gap elements with the same types, filter and key (the gaps of strict_contiguity)
share one index.

A Kleene element (docs/language.md section 7, Repetition) keeps its index as a range-aggregate structure
(``cep.runtime.aggtree``: blocks of the key's sorted events, each block's
count, exact sums, min and max, a segment tree over the blocks), with one value
column per aggregated attribute.  Its check is

* ``aggregate``: every aggregate of the match is a range query on that
  structure: count from the block sizes, sum/avg from the exact sums, min/max
  from the tree's min/max, first/last by a seek: O(log n + LOAD) per match,
  whatever the number of repeated events;
* ``scan``: a residual selection condition between the repeated alias and the
  positive ones (``s.amount < b.amount``) decides per match which events are in
  the list, so the key's candidates inside the gap are scanned and aggregated:
  O(log n + candidates).
"""

from __future__ import annotations

from cep.lang.gcq import CompiledPattern, Gap
from cep.records import record


@record(frozen=True)
class GapIndexSpec:
    """One sorted index of gap-type events: which events, keyed how."""

    id: int
    types: tuple[str, ...]
    key_attrs: tuple[str, ...]
    filter_text: str
    columns: tuple[str, ...] = ()  # aggregated attributes (a Kleene element's range-aggregate index)
    kleene: bool = False


@record(frozen=True)
class GapPlan:
    """The check of one gap element: its index and whether candidates are scanned."""

    gap: Gap
    index: int  # a GapIndexSpec id
    check: str  # "count" | "scan" | "aggregate"

    @property
    def cost(self) -> str:
        if self.check == "count":
            return "O(log n)"
        if self.check == "aggregate":
            return "O(log n + LOAD) per match, independent of the number of repeated events"
        return "O(log n + candidates in key and gap)"


AGGREGATE_STRUCTURE = {
    "count(x)": "block sizes summed by the segment tree: O(log n)",
    "count": "non-null counts per block, segment tree: O(log n + LOAD)",
    "sum": "exact sums per block, segment tree: O(log n + LOAD)",
    "avg": "exact sums and number counts per block, segment tree: O(log n + LOAD)",
    "min": "block minima, segment tree: O(log n + LOAD)",
    "max": "block maxima, segment tree: O(log n + LOAD)",
    "first": "seek to the first event of the range: O(log n)",
    "last": "seek to the last event of the range: O(log n)",
    "events": "the events of the range, in time order: linear in the list (no EMIT)",
}
"""Which part of the range-aggregate index serves each aggregate (for ``cep explain``)."""


def aggregate_structure(fn: str, attr: str | None, check: str) -> str:
    if check == "scan":
        return "computed over the scanned candidates: O(candidates)"
    return AGGREGATE_STRUCTURE["count(x)" if fn == "count" and attr is None else fn]


def plan_gaps(cp: CompiledPattern) -> tuple[list[GapIndexSpec], list[GapPlan]]:
    """The indexes and the per-gap checks of one compiled pattern."""
    specs: list[GapIndexSpec] = []
    by_sig: dict[tuple, int] = {}
    plans: list[GapPlan] = []
    for g in cp.gaps:
        kleene = g.origin == "kleene"
        columns = tuple(dict.fromkeys(a.attr for j in g.aggregates for a in [cp.aggregates[j]]
                                      if a.attr is not None)) if kleene else ()
        # a filter is a function of the alias it names: two gap elements share an index only
        # when they have none (strict_contiguity) or are the same alias
        sig = (g.types, g.key_attrs, g.filter_text, g.alias if g.filter is not None or kleene else "", kleene)
        if sig not in by_sig:
            by_sig[sig] = len(specs)
            specs.append(GapIndexSpec(len(specs), g.types, g.key_attrs, g.filter_text, columns, kleene))
        check = "scan" if g.residual is not None else ("aggregate" if kleene else "count")
        plans.append(GapPlan(g, by_sig[sig], check))
    return specs, plans


def gap_window_text(g: Gap, cp: CompiledPattern, within_text: str) -> str:
    """The gap's time range as text: ``(o.ts, o.ts + 172800]``."""
    aliases = [a.alias for a in cp.atoms]

    def ts_of(ix: tuple[int, ...] | list[int], fn: str) -> str:
        names = [f"{aliases[i]}.ts" for i in ix]
        return names[0] if len(names) == 1 else f"{fn}({', '.join(names)})"

    every = range(len(aliases))
    first = [i for i in every if not any(j == i for _, j in cp.order)]  # no predecessor
    last = [i for i in every if not any(j == i for j, _ in cp.order)]  # no successor
    lo = f"({ts_of(g.after, 'max')}" if g.after else f"[{ts_of(last, 'max')} - {within_text}"
    hi = f"{ts_of(g.before, 'min')})" if g.before else f"{ts_of(first, 'min')} + {within_text}]"
    return f"{lo}, {hi}"


@record(frozen=True)
class Decision:
    """When a match of a pattern with gap elements is decided, and by which of its events.

    (docs/language.md section 7, Decided matches.)  A gap ends at the earliest time
    of its ``before`` atoms (a trailing gap at the earliest positive time plus
    ``w``), so a match's decision time is the time of one of its positive events,
    plus ``offset``: its *deciding* event.  ``candidates`` are the groups of atoms
    whose earliest event ends some gap that can end last; the deciding event is the
    latest of the groups' earliest events (ties: the lowest atom), so each match has
    exactly one.  The runtime keeps undecided matches per deciding event
    (``cep.runtime.pending``) and generates ``decider(match)`` from this plan
    (``cep.runtime.gaps``); ``cep explain`` prints it.
    """

    trailing: bool  # a trailing gap: decided once the watermark is past the time (else: reaches it)
    offset: int | float  # ``w`` with a trailing gap, else 0
    candidates: tuple[tuple[int, ...], ...]  # atom positions, per group
    deciders: tuple[int, ...]  # the atoms that can decide a match

    def time_text(self, aliases: list[str], within_text: str) -> str:
        """The decision time as text: ``max(min(a.ts, b.ts), c.ts) + 3600``."""
        groups = [f"{aliases[g[0]]}.ts" if len(g) == 1 else f"min({', '.join(f'{aliases[i]}.ts' for i in g)})"
                  for g in self.candidates]
        t = groups[0] if len(groups) == 1 else f"max({', '.join(groups)})"
        return f"{t} + {within_text}" if self.trailing else t


def plan_decision(cp: CompiledPattern, plans: list[GapPlan]) -> Decision:
    """Which atoms decide a match of ``cp`` (its gaps checked by ``plans``), and when.

    Which atoms can decide is known from the pattern: a gap whose ``before`` atoms
    each follow one of another gap's (transitively, in the SEQ order) always ends
    later, and within one gap only an atom with no predecessor there can be the
    earliest.  A trailing gap ends last: every other gap ends by the latest time,
    at most ``first + w``.
    """
    k = len(cp.atoms)
    after: list[set[int]] = [set() for _ in range(k)]  # i -> the atoms after i (transitively)
    for i, j in cp.order:
        after[i].add(j)
    changed = True
    while changed:
        changed = False
        for i in range(k):
            more = set().union(*(after[j] for j in after[i])) - after[i]
            if more:
                after[i] |= more
                changed = True

    def earliest_candidates(atoms: tuple[int, ...] | range) -> tuple[int, ...]:
        return tuple(sorted(j for j in atoms if not any(j in after[i] for i in atoms)))

    trailing = any(not plan.gap.before for plan in plans)
    if trailing:
        sets = [earliest_candidates(range(k))]
    else:
        ends = list(dict.fromkeys(tuple(sorted(plan.gap.before)) for plan in plans))
        # h ends later than g when each of h's atoms follows one of g's
        sets = [earliest_candidates(g) for g in ends
                if not any(h != g and all(any(j in after[i] for i in g) for j in h) for h in ends)]
        sets = list(dict.fromkeys(sets))
    return Decision(trailing, cp.within if trailing else 0, tuple(sets),  # type: ignore[arg-type]
                    tuple(sorted(set().union(*sets))))
