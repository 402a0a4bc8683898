"""The query class of a GCQ and the bounds IEDYN gives it (thesis Tables 1.1 and 1.2).

The class decides what a user can expect per event: q-hierarchical queries update
in time linear in the update, free-connex ones enumerate with constant delay, merely
acyclic ones enumerate a free-connex approximation and project, and cyclic ones
(here: a tree over an acyclic subset of the predicates) re-check residual filters
during enumeration.  ``cep explain`` prints the result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cep.plan.gyo import reduce_gcq
from cep.plan.model import Plan
from cep.records import record

Q_HIERARCHICAL = "q-hierarchical"
FREE_CONNEX = "free-connex"
ACYCLIC = "acyclic"
CYCLIC = "cyclic with residuals"


@record(frozen=True)
class QueryClass:
    name: str  # one of the four constants above
    update: str  # per-update time bound
    delay: str  # enumeration delay bound
    detail: str  # why, in one line
    max_preds_per_node: int = 0  # the largest |pred(n)| in the tree (GCQ^{<=1} vs GCQ^{>1})


def _atoms_of(atoms: Sequence[frozenset[str]]) -> dict[str, frozenset[int]]:
    at: dict[str, set[int]] = {}
    for i, a in enumerate(atoms):
        for v in a:
            at.setdefault(v, set()).add(i)
    return {v: frozenset(s) for v, s in at.items()}


def is_hierarchical(atoms: Sequence[Iterable[str]]) -> bool:
    """For all variables x, y: at(x) and at(y) are nested or disjoint (thesis Def. 14)."""
    at = _atoms_of([frozenset(a) for a in atoms])
    sets = list(at.values())
    return all(a <= b or b <= a or not (a & b) for a in sets for b in sets)


def is_q_hierarchical(atoms: Sequence[Iterable[str]], out: Iterable[str] | None = None) -> bool:
    """Hierarchical, and x in out with at(x) a strict subset of at(y) implies y in out."""
    atoms = [frozenset(a) for a in atoms]
    if not is_hierarchical(atoms):
        return False
    at = _atoms_of(atoms)
    out_set = set(at) if out is None else set(out)
    return all(
        y in out_set for x in out_set for y in at if x in at and at[x] < at[y]
    )


def classify(
    atoms: Sequence[Iterable[str]],
    preds: Mapping[int, Iterable[str]],
    out: Iterable[str] | None = None,
    residual: Iterable[int] = (),
    preds_per_node: int | None = None,
) -> QueryClass:
    """Classify the GCQ (atoms, preds, out); ``preds`` are those the tree holds.

    ``residual`` lists predicates kept out of the tree (the full query is cyclic);
    ``preds_per_node`` is the largest number of predicates under one tree node
    (computed by the caller from its tree; None: unknown, taken as ``len(preds)``).
    """
    atoms = [frozenset(a) for a in atoms]
    residual = list(residual)
    k = len(preds) if preds_per_node is None else preds_per_node
    red = reduce_gcq(atoms, preds, out)
    if not red.acyclic:
        raise ValueError("the tree predicates must form an acyclic GCQ; move some to residual")
    if preds:
        if k <= 1:
            upd, dly = "O(|T| * M log M)", "O(|N|) (constant)"
            gcq = "GCQ<=1 (at most one inequality or band per node, thesis Thm. 5)"
        else:
            upd, dly = "O(|T| * M^2 log M)", "O(|N| * log|db|)"
            gcq = f"GCQ>1 (up to {k} inequality groups per node, thesis Thm. 4)"
    else:
        gcq = "no theta predicates"
    if residual:
        if preds:
            u = upd
        else:
            u = "O(||db|| + ||u||)"
        return QueryClass(
            CYCLIC,
            u,
            "not bounded: enumeration applies residual filters and may skip tuples",
            f"the full query is cyclic; {len(residual)} predicate(s) residual; tree: {gcq}",
            k,
        )
    if not preds and is_q_hierarchical(atoms, out):
        return QueryClass(
            Q_HIERARCHICAL, "O(||u||) (constant per event)", "O(1)", "q-hierarchical NCQ (thesis Table 1.1)", k
        )
    if red.free_connex:
        if not preds:
            return QueryClass(
                FREE_CONNEX, "O(||db|| + ||u||)", "O(1)", "free-connex acyclic NCQ (thesis Table 1.1)", k
            )
        return QueryClass(FREE_CONNEX, upd, dly, f"free-connex acyclic {gcq} (thesis Table 1.2)", k)
    if not preds:
        u = "O(||db|| + ||u||)"
    else:
        u = upd
    return QueryClass(
        ACYCLIC,
        u,
        "not constant (omega(1)): enumerates the free-connex approximation and projects",
        f"acyclic, not free-connex; var(N) adds {sorted(red.stage1_vars - set(out or ()))}",
        k,
    )


def max_preds_per_node(plan: Plan) -> int:
    """The largest number of inequality groups in one node's pred(n).

    Linear predicates over the same pair of variables count once: a band
    ``x < y AND y - x <= w`` is one range on one sort order (digest section 2.6), so
    the running-sum merge of thesis Thm. 5 applies to it; any other predicate
    counts on its own.
    """
    preds = plan.pattern.predicates
    best = 0
    for n in plan.nodes:
        groups: set[object] = set()
        for c in n.children:
            for pid in plan.nodes[c].preds:
                p = preds[pid]
                if p.linear is not None and len(set(p.vars)) == 2:
                    groups.add(frozenset(p.vars))
                else:
                    groups.add(pid)
        best = max(best, len(groups))
    return best


def classify_plan(plan: Plan) -> QueryClass:
    """The class of a plan's (full) query, with the predicates its tree holds."""
    cp = plan.pattern
    residual = set(plan.residual)
    tree_preds = {p.id: p.vars for p in cp.predicates if p.id not in residual}
    return classify([a.vars for a in cp.atoms], tree_preds, None, sorted(residual), max_preds_per_node(plan))
