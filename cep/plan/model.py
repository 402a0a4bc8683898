"""The plan the runtime executes: a generalized join tree pair (T, N).

Thesis Definition 17: leaves are atoms; every interior node has a guard child
holding all of its variables (here always ``children[0]``); a variable in two
nodes is in every node between them; each edge ``parent -> child`` carries
predicates whose variables lie in the two nodes.  Trees here are binary and N
is sibling-closed (thesis Proposition 16).  Predicates the tree cannot hold
are ``residual``: enumeration applies them as filters.

This module also derives, for every edge, how it is indexed (``IndexSpec``):
the runtime builds exactly these indexes and ``cep explain`` prints them, so
the two cannot disagree.
"""

from __future__ import annotations

from cep.lang.gcq import Bound, CompiledPattern
from cep.records import field, record


@record
class PlanNode:
    id: int
    vars: tuple[str, ...]
    atom: int | None = None  # index into the pattern's atoms, for a leaf
    children: tuple[int, ...] = ()  # at most two; children[0] is a guard
    parent: int | None = None
    preds: tuple[int, ...] = ()  # predicate ids on the edge parent -> this node
    in_connex: bool = True  # member of N

    @property
    def is_leaf(self) -> bool:
        return self.atom is not None


@record
class Plan:
    pattern: CompiledPattern
    nodes: list[PlanNode]
    root: int
    residual: tuple[int, ...] = ()  # predicate ids applied as filters on enumeration
    query_class: str = ""  # "q-hierarchical" | "free-connex" | "acyclic" | "cyclic with residuals"
    notes: list[str] = field(default_factory=list)

    def node(self, i: int) -> PlanNode:
        return self.nodes[i]

    def sibling(self, i: int) -> int | None:
        p = self.nodes[i].parent
        if p is None:
            return None
        for c in self.nodes[p].children:
            if c != i:
                return c
        return None

    def leaves(self) -> list[PlanNode]:
        return [n for n in self.nodes if n.is_leaf]

    def leaf_of_atom(self, atom: int) -> PlanNode:
        for n in self.nodes:
            if n.atom == atom:
                return n
        raise KeyError(atom)

    def bottom_up(self) -> list[int]:
        """Node ids, children before parents."""
        order: list[int] = []
        stack = [(self.root, False)]
        while stack:
            n, done = stack.pop()
            if done:
                order.append(n)
                continue
            stack.append((n, True))
            for c in self.nodes[n].children:
                stack.append((c, False))
        return order


@record(frozen=True)
class IndexSpec:
    """How one node's relation is indexed for probes from one side.

    Tuples of ``node`` are grouped on ``key_vars`` (hash), each group sorted on
    ``sort_var``; a probe with values of ``probe_vars`` seeks the range given by
    ``bounds`` (all on ``sort_var``) and checks ``filter_preds`` per candidate.
    ``kind``: ``hash`` (equalities only), ``sorted`` (one bound: constant delay
    after the seek), ``band`` (a lower and an upper bound on the same variable),
    ``scan`` (some predicate is not indexable: the group is filtered), ``cross``
    (no shared variable and no predicate: the whole relation).
    """

    node: int
    probe_vars: tuple[str, ...]
    key_vars: tuple[str, ...]
    sort_var: str | None
    bounds: tuple[Bound, ...]
    filter_preds: tuple[int, ...]
    kind: str


def _spec(plan: Plan, node: int, probe_vars: tuple[str, ...], pred_ids: tuple[int, ...]) -> IndexSpec:
    n = plan.nodes[node]
    own = set(n.vars)
    probe = set(probe_vars)
    key_vars = tuple(v for v in n.vars if v in probe)
    preds = plan.pattern.predicates
    candidates: dict[str, list[tuple[int, Bound]]] = {}
    needs_filter: list[int] = []
    for pid in pred_ids:
        p = preds[pid]
        pv = set(p.vars)
        if pv <= probe:
            # decided by the probe side alone: cannot be indexed here, checked per candidate
            needs_filter.append(pid)
            continue
        bound = None
        if p.linear is not None and p.linear.op != "!=" and len(pv) == 2:
            for v in p.vars:
                if v in own and v not in probe:
                    other = next(iter(pv - {v}))
                    if other in probe:
                        bound = p.linear.solve_for(v)
                    break
        if bound is None:
            needs_filter.append(pid)
        else:
            candidates.setdefault(bound.sort_var, []).append((pid, bound))
    sort_var = None
    bounds: tuple[Bound, ...] = ()
    if candidates:
        # prefer the variable with both a lower and an upper bound (a band), then the
        # time variables (the SEQ order), then the most bounds
        def score(item):
            var, bs = item
            ops = {b.op for _, b in bs}
            has_lo = bool(ops & {">", ">=", "="})
            has_hi = bool(ops & {"<", "<=", "="})
            return (has_lo and has_hi, var.endswith(".ts"), len(bs))

        sort_var, chosen = max(candidates.items(), key=score)
        bounds = tuple(b for _, b in chosen)
        for var, bs in candidates.items():
            if var != sort_var:
                needs_filter.extend(pid for pid, _ in bs)
    if needs_filter:
        kind = "scan"
    elif sort_var is None:
        kind = "hash" if key_vars else "cross"
    else:
        ops = {b.op for b in bounds}
        lo = bool(ops & {">", ">=", "="})
        hi = bool(ops & {"<", "<=", "="})
        kind = "band" if (lo and hi) else "sorted"
    return IndexSpec(node, tuple(probe_vars), key_vars, sort_var, bounds, tuple(sorted(needs_filter)), kind)


def enumeration_index(plan: Plan, node: int) -> IndexSpec:
    """P_n: the tuples of ``node`` that join a given tuple of its parent."""
    n = plan.nodes[node]
    assert n.parent is not None
    parent = plan.nodes[n.parent]
    return _spec(plan, node, parent.vars, n.preds)


def sibling_index(plan: Plan, node: int) -> IndexSpec | None:
    """S_n: the tuples of ``node`` that join a delta tuple of its sibling (all of pred(parent))."""
    sib = plan.sibling(node)
    if sib is None:
        return None
    parent = plan.nodes[plan.nodes[node].parent]  # type: ignore[index]
    pred_ids: list[int] = []
    for c in parent.children:
        pred_ids.extend(plan.nodes[c].preds)
    return _spec(plan, node, plan.nodes[sib].vars, tuple(pred_ids))
