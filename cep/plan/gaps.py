"""How each gap element of a pattern is checked (spec 7.1-7.5): the anti-join plan.

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
"""

from __future__ import annotations

from dataclasses import dataclass

from cep.lang.gcq import CompiledPattern, Gap


@dataclass(frozen=True)
class GapIndexSpec:
    """One sorted index of gap-type events: which events, keyed how."""

    id: int
    types: tuple[str, ...]
    key_attrs: tuple[str, ...]
    filter_text: str


@dataclass(frozen=True)
class GapPlan:
    """The check of one gap element: its index and whether candidates are scanned."""

    gap: Gap
    index: int  # a GapIndexSpec id
    check: str  # "count" | "scan"

    @property
    def cost(self) -> str:
        return "O(log n)" if self.check == "count" else "O(log n + candidates in key and gap)"


def plan_gaps(cp: CompiledPattern) -> tuple[list[GapIndexSpec], list[GapPlan]]:
    """The indexes and the per-gap checks of one compiled pattern."""
    specs: list[GapIndexSpec] = []
    by_sig: dict[tuple, int] = {}
    plans: list[GapPlan] = []
    for g in cp.gaps:
        # a filter is a function of the alias it names: two gap elements share an index only
        # when they have none (strict_contiguity) or are the same alias
        sig = (g.types, g.key_attrs, g.filter_text, g.alias if g.filter is not None else "")
        if sig not in by_sig:
            by_sig[sig] = len(specs)
            specs.append(GapIndexSpec(len(specs), g.types, g.key_attrs, g.filter_text))
        plans.append(GapPlan(g, by_sig[sig], "scan" if g.residual is not None else "count"))
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
