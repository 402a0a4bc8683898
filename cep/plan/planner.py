"""The planner: a compiled pattern (GCQ) -> a binary, sibling-closed GJT pair (``Plan``).

Steps (thesis ch. 5 and Prop. 16, issue 3):

1. If the equalities alone make the hypergraph cyclic (``a.x = b.x AND b.y = c.y AND
   c.z = a.z``), split shared variables: the atom gets a private copy and an equality
   predicate joins it back.  The planner never rejects a valid pattern.
2. Keep a maximal acyclic subset of the predicates in the tree, chosen greedily in
   order of usefulness: equalities, SEQ order, WITHIN bands on consecutive elements,
   linear WHERE comparisons, other WHERE comparisons, and last the SEQ span and the
   non-consecutive AND window pairs.  The rest become residual filters.
3. Algorithm 8 (``cep.plan.gyo``) builds the tree; ranks make later SEQ elements guard
   earlier ones, so an in-order insert of the last element costs one range sum per
   level and an insert of an earlier element fans out to nothing; partition variables
   are removed last, so the tree is root(empty) -> {partition} -> {k, last.ts} -> ...
4. ``cep.plan.binarize`` makes the pair binary and sibling-closed, guard child first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cep.lang.gcq import CompiledPattern, Predicate, Variable
from cep.plan.binarize import normalise
from cep.plan.classify import classify_plan
from cep.plan.gyo import Reduction, Tree, reduce_gcq
from cep.plan.model import Plan, PlanNode
from cep.records import field, record, replace
from cep.values import canon

# usefulness classes for keeping a predicate in the tree (lower is kept first)
_ORIGIN_RANK = {"equality": 0, "seq": 1, "within": 2, "where": 3, "span": 9}


@record
class GJTPair:
    """The planner's result on plain sets: the tree, N, and the residual predicates."""

    tree: Tree
    kept: list[int]
    residual: list[int]
    reduction: Reduction  # of the kept predicates with the requested out
    notes: list[str] = field(default_factory=list)


def build_gjt_pair(
    atoms_vars: Sequence[Iterable[str]],
    predicates: Mapping[int, Iterable[str]],
    out: Iterable[str] | None = None,
    *,
    priority: Sequence[int] | None = None,
    rank: Sequence[float] | None = None,
    keep_last: Iterable[str] = (),
) -> GJTPair:
    """A binary, sibling-closed GJT pair for the GCQ; cyclic predicates go residual.

    ``priority``: predicate ids in the order they should be kept in the tree (default:
    id order); a predicate is kept when the kept ones plus it still form an acyclic
    GCQ, so the kept set is maximal.  Raises ``ValueError`` when the atoms alone are
    cyclic (plain equalities cannot be made residual here; see ``plan_pattern``).
    """
    atoms = [frozenset(a) for a in atoms_vars]
    preds = {p: frozenset(vs) for p, vs in predicates.items()}
    order = list(priority) if priority is not None else sorted(preds)
    if sorted(order) != sorted(preds):
        raise ValueError("priority must list every predicate id once")
    kept: list[int] = []
    residual: list[int] = []
    if reduce_gcq(atoms, preds).acyclic:
        kept = list(order)
    else:
        if not reduce_gcq(atoms, {}).acyclic:
            raise ValueError("the atoms alone form a cyclic hypergraph")
        # greedy in priority order, done by bisection: the longest acyclic extension
        # of the kept set by the next predicates, then the one that fails goes residual
        # (acyclicity is closed under removing predicates, so extensions are monotone).
        # Predicates over the same variable set behave identically in the reduction,
        # so they are decided together (AND windows come in pairs).
        groups: dict[frozenset[str], list[int]] = {}
        for p in order:
            groups.setdefault(preds[p], []).append(p)
        glist = list(groups.values())

        def ok(extra: list[list[int]]) -> bool:
            trial = {q: preds[q] for q in kept}
            for g in extra:
                trial.update((q, preds[q]) for q in g)
            return reduce_gcq(atoms, trial).acyclic

        # The search for the longest fitting prefix gallops (1, 2, 4, ... groups, then bisects the
        # last step): when most predicates go residual (an AND window over k aliases has k(k-1)/2
        # pairs, of which k-1 fit in a tree) each residual costs one acyclicity test, not log(k^2).
        i = 0
        while i < len(glist):
            rest = glist[i:]
            if ok(rest):
                lo = len(rest)
            else:
                lo, step = 0, 1  # rest[:lo] fits; rest (all) does not
                while lo + step < len(rest) and ok(rest[:lo + step]):
                    lo += step
                    step *= 2
                hi = min(lo + step, len(rest)) - 1  # rest[:hi + 1] does not fit
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if ok(rest[:mid]):
                        lo = mid
                    else:
                        hi = mid - 1
            for g in rest[:lo]:
                kept.extend(g)
            if lo < len(rest):
                residual.extend(rest[lo])
            i += lo + 1
    red = reduce_gcq(atoms, {q: preds[q] for q in kept}, out, rank=rank, keep_last=keep_last)
    assert red.tree is not None
    tree = red.tree
    normalise(tree)
    all_vars = frozenset().union(*atoms) if atoms else frozenset()
    if out is None or frozenset(out) == all_vars:
        # a full query: every node is in N (Alg. 8 leaves nodes below a filter out of N;
        # N = all nodes is also connex, sibling-closed and has var(N) = out)
        tree.connex = set(tree.live())
    return GJTPair(tree, sorted(kept), sorted(residual), red)


def _priority(cp: CompiledPattern, equality_ids: set[int]) -> list[int]:
    def key(p: Predicate):
        if p.id in equality_ids:
            return (0, p.id)
        r = _ORIGIN_RANK.get(p.origin, 5)
        if p.origin == "where":
            r = 3 if p.linear is not None else (4 if len(p.vars) == 2 else 5)
        return (r, p.id)

    return [p.id for p in sorted(cp.predicates, key=key)]


def _equality_fn(x, y) -> bool:
    return x is not None and y is not None and canon(x) == canon(y)


def _split_equalities(cp: CompiledPattern) -> tuple[CompiledPattern, set[int], list[str]]:
    """Split shared variables until the atoms alone are acyclic (equalities -> predicates)."""
    if reduce_gcq([a.vars for a in cp.atoms], {}).acyclic:
        return cp, set(), []
    atoms = [replace(a) for a in cp.atoms]
    variables = dict(cp.variables)
    predicates = list(cp.predicates)
    new_ids: set[int] = set()
    notes: list[str] = []
    part = set(cp.partition_vars)
    shared: dict[str, list[int]] = {}
    for i, a in enumerate(atoms):
        for v in a.vars:
            shared.setdefault(v, []).append(i)
    candidates = sorted(
        (v for v, idx in shared.items() if len(idx) >= 2 and v not in part),
        key=lambda v: (len(shared[v]), -min(shared[v]), v),
    )
    for v in candidates:
        if reduce_gcq([a.vars for a in atoms], {}).acyclic:
            break
        idx = shared[v]
        keep = idx[0]
        ref0 = next(r for r in variables[v].refs if r[0] == atoms[keep].alias)
        split_aliases = {atoms[i].alias for i in idx[1:]}
        remaining = tuple(r for r in variables[v].refs if r[0] not in split_aliases)
        for i in idx[1:]:
            a = atoms[i]
            nv = f"{v}@{a.alias}"
            ref = next(r for r in variables[v].refs if r[0] == a.alias)
            variables[nv] = Variable(nv, (ref,))
            a.vars = tuple(nv if x == v else x for x in a.vars)
            pid = len(predicates)
            text = f"{ref0[0]}.{ref0[1]} = {ref[0]}.{ref[1]}"
            predicates.append(Predicate(pid, (v, nv), text, "where", _equality_fn))
            new_ids.add(pid)
        variables[v] = Variable(v, remaining)
        notes.append(
            f"the equalities on {v} close a cycle: split into per-alias variables joined by equality predicates"
        )
    new = replace(cp, atoms=atoms, variables=variables, predicates=predicates)
    return new, new_ids, notes


def _var_order(cp: CompiledPattern) -> dict[str, int]:
    order: dict[str, int] = {}
    for v in cp.partition_vars:
        order.setdefault(v, len(order))
    for a in cp.atoms:
        for v in a.vars:
            order.setdefault(v, len(order))
    return order


def plan_pattern(cp: CompiledPattern) -> Plan:
    """The plan IEDYN runs for a compiled pattern (never rejects a valid pattern).

    ``Plan.pattern`` is ``cp`` itself unless equalities had to be split (step 1 in the
    module docstring); then it is a copy with the split variables and the added
    equality predicates, and the runtime must use ``plan.pattern``.
    """
    cp2, eq_ids, notes = _split_equalities(cp)
    atoms_vars = [a.vars for a in cp2.atoms]
    preds = {p.id: p.vars for p in cp2.predicates}
    for p in cp2.predicates:
        assert cp2.predicates[p.id] is p, "predicate ids must be their list positions"
    pair = build_gjt_pair(
        atoms_vars,
        preds,
        None,
        priority=_priority(cp2, eq_ids),
        rank=[a.position for a in cp2.atoms],
        keep_last=cp2.partition_vars,
    )
    plan = to_plan(cp2, pair.tree, _var_order(cp2))
    plan.residual = tuple(pair.residual)
    qc = classify_plan(plan)
    plan.query_class = qc.name
    plan.notes.extend(notes)
    if pair.residual:
        texts = "; ".join(
            f"#{p} {cp2.predicates[p].text} ({cp2.predicates[p].origin})" for p in pair.residual
        )
        plan.notes.append(
            f"the GCQ is cyclic; {len(pair.kept)} predicate(s) kept in the tree, residual filters: {texts}"
        )
    if not cp2.partition_vars and len(cp2.atoms) > 1:
        plan.notes.append("no partition key: runs as one group")
    return plan


def to_plan(cp: CompiledPattern, tree: Tree, var_order: Mapping[str, int]) -> Plan:
    """Number the live tree nodes in preorder (root 0) and build ``PlanNode``s."""
    live = tree.live()
    ids = {n: i for i, n in enumerate(live)}

    def vt(vs) -> tuple[str, ...]:
        return tuple(sorted(vs, key=lambda v: (var_order.get(v, len(var_order)), v)))

    nodes: list[PlanNode] = []
    for n in live:
        t = tree.nodes[n]
        if t.atom is not None:
            vars_ = tuple(cp.atoms[t.atom].vars)  # leaves keep the atom's own order
        else:
            vars_ = vt(t.vars)
        nodes.append(
            PlanNode(
                id=ids[n],
                vars=vars_,
                atom=t.atom,
                children=tuple(ids[c] for c in t.children),
                parent=None if t.parent is None or n == tree.root else ids[t.parent],
                preds=tuple(sorted(t.preds)) if n != tree.root else (),
                in_connex=n in tree.connex,
            )
        )
    return Plan(pattern=cp, nodes=nodes, root=0)
