"""The physical plan: the tree and the index layout the runtime executes, as data.

The logical plan (``cep.plan.model.Plan``) is the generalized join tree and the
indexes the thesis asks for.  Three decisions turn it into what runs, and they
live here so the runtime only executes them and ``cep explain`` prints them:

- pass-through nodes are merged into their only child (``merge_pass_through_nodes``);
- a node's P and S indexes with the same layout share one storage;
- a hash P index whose key holds S's key and S's sort variable is served from
  S's storage by an equality seek on the sort variable (plus a comparison of
  the rest of P's key), instead of being kept twice.

Per node the plan records which storages are maintained (``stores``), how each
index is probed (``IndexUse``), whether the node keeps its GMR, and whether a
sort variable holds only numbers (event times: no rank key needed).  The gap
elements' anti-joins (``cep.plan.gaps``: a sorted index per gap type and key,
and per gap a range count or a range scan) are part of the plan too; the
engine builds its gap indexes and checks from them.
"""

from __future__ import annotations

from dataclasses import replace

from cep.lang.gcq import TIME_ATTR, Bound, CompiledPattern
from cep.plan.gaps import GapIndexSpec, GapPlan, plan_gaps
from cep.plan.model import IndexSpec, Plan, enumeration_index, sibling_index
from cep.records import record


@record(frozen=True)
class IndexUse:
    """One index of a node as the runtime builds it.

    ``spec`` is the layout probed (key, sort variable, range, filters).  ``storage``
    names whose groups hold the tuples: ``"own"`` (this index maintains them),
    ``"P"`` or ``"S"`` (the node's other index maintains them; this one only reads).
    ``equal_rest``: variables of the logical key not in ``spec``'s key, compared
    per candidate (a P index served from S's storage).  ``numeric``: the sort
    variable holds only numbers (times), so sort keys are the bare values.
    """

    spec: IndexSpec
    storage: str = "own"
    equal_rest: tuple[str, ...] = ()
    numeric: bool = False


@record(frozen=True)
class PhysicalNode:
    id: int
    vars: tuple[str, ...]
    atom: int | None
    parent: int | None
    sibling: int | None
    children: tuple[int, ...]
    is_guard: bool  # holds all of its parent's variables
    preds: tuple[int, ...]  # predicate ids on the edge parent -> this node
    enumeration: IndexSpec | None  # the logical P index: how deltas are grouped for enumeration
    P: IndexUse | None
    S: IndexUse | None
    stores: tuple[str, ...]  # the indexes whose storage an update maintains ("P", "S"), in order
    keeps_gmr: bool  # rho_n is kept as a dict (the root; every node for the thesis tests)


@record(frozen=True)
class PhysicalPlan:
    pattern: CompiledPattern
    logical: Plan
    tree: Plan  # the tree that runs (pass-through nodes merged)
    nodes: tuple[PhysicalNode, ...]
    merged: tuple[tuple[str, ...], ...]  # the variables of every merged pass-through node
    residual: tuple[int, ...]
    # the anti-joins of the gap elements (docs/language.md section 7): sorted indexes of the gap types'
    # events and each gap's check (range count or range scan), from ``cep.plan.gaps``
    gap_indexes: tuple[GapIndexSpec, ...] = ()
    gaps: tuple[GapPlan, ...] = ()

    @property
    def root(self) -> int:
        return self.tree.root


def time_variables(cp: CompiledPattern) -> frozenset[str]:
    """The variables that hold only event times: numbers (checked when a record is decoded)."""
    return frozenset(name for name, v in cp.variables.items() if all(attr == TIME_ATTR for _, attr in v.refs))


def physical_plan(plan: Plan, merge_pass_through: bool = True, keep_all_gmrs: bool = False) -> PhysicalPlan:
    """The plan ``PatternRuntime`` executes for a logical plan (see the module docstring)."""
    cp = plan.pattern
    tree, merged = merge_pass_through_nodes(plan) if merge_pass_through else (plan, ())
    numeric = time_variables(cp)

    def use(spec: IndexSpec, **kw) -> IndexUse:
        return IndexUse(spec, numeric=spec.sort_var is not None and spec.sort_var in numeric, **kw)

    nodes = []
    for pn in tree.nodes:
        P = S = pspec = None
        is_guard = False
        stores: tuple[str, ...] = ()
        if pn.parent is not None:
            parent = tree.nodes[pn.parent]
            is_guard = set(parent.vars) <= set(pn.vars)
            pspec = enumeration_index(tree, pn.id)
            P = use(pspec)
            sspec = sibling_index(tree, pn.id)
            stores = ("P",)
            if sspec is not None:
                if sspec.key_vars == pspec.key_vars and sspec.sort_var == pspec.sort_var:
                    # same layout: one storage, two probe views (maintained through P)
                    S = use(sspec, storage="P")
                elif (
                    pspec.sort_var is None
                    and not pspec.filter_preds
                    and sspec.sort_var is not None
                    and sspec.sort_var in numeric
                    and set(pspec.key_vars) >= set(sspec.key_vars) | {sspec.sort_var}
                ):
                    # P groups on S's key, S's sort variable and maybe more (a leaf's P keys on
                    # its parent's whole tuple): serve P from S's storage with an equality seek
                    # on the sort variable, then compare the rest of P's key (one storage, not
                    # two: each event costs one index entry and one update less).  The seek
                    # reads only tuples of the same S key with the same sort value (events of
                    # one partition key with equal times), so what it skips is that small.
                    # Only when S is sorted on event times (a WITHIN band): then the seek is on
                    # bare numbers and finds about one tuple.  S sorted on a data value (an
                    # inequality between attributes: a join over values, as the thesis' Q1-Q12)
                    # keeps P as a hash: such a join emits many composite events per event, and
                    # enumeration probes P once per composite event, where a hash lookup costs a
                    # fraction of a seek with rank keys (thesis Q1, Q3: 1.5-2x less time per
                    # composite event, for one more index entry per event).
                    view = IndexSpec(pn.id, pspec.probe_vars, sspec.key_vars, sspec.sort_var,
                                     (Bound(sspec.sort_var, "=", sspec.sort_var),), (), "band")
                    rest = tuple(v for v in pspec.key_vars if v not in sspec.key_vars and v != sspec.sort_var)
                    P = use(view, storage="S", equal_rest=rest)
                    S = use(sspec)
                    stores = ("S",)
                else:
                    S = use(sspec)
                    stores = ("P", "S")
        nodes.append(PhysicalNode(
            id=pn.id, vars=pn.vars, atom=pn.atom, parent=pn.parent, sibling=tree.sibling(pn.id),
            children=pn.children, is_guard=is_guard, preds=pn.preds, enumeration=pspec, P=P, S=S,
            stores=stores, keeps_gmr=keep_all_gmrs or pn.id == tree.root,
        ))
    gap_indexes, gaps = plan_gaps(cp)
    return PhysicalPlan(cp, plan, tree, tuple(nodes), merged, tree.residual, tuple(gap_indexes), tuple(gaps))


def merge_pass_through_nodes(plan: Plan) -> tuple[Plan, tuple[tuple[str, ...], ...]]:
    """Every pass-through node merged into its only child; returns the tree and the merged nodes' variables.

    A non-root node ``n`` with a single child ``c`` and no predicate on the edge
    has ``rho_n = proj(rho_c)``, so any index on ``rho_n`` (grouped and sorted on
    variables of ``n``) can be kept over ``rho_c`` instead, with the same range
    sums of multiplicities.  ``c`` takes ``n``'s place (and its edge predicates)
    under ``n``'s parent; the result is still a generalized join tree (``c``
    guards wherever ``n`` did, since var(n) is a subset of var(c)).  This removes
    the projections GYO puts above every atom, one index update per event and
    level.
    """
    nodes = {pn.id: replace(pn) for pn in plan.nodes}
    merged = []
    for nid in plan.bottom_up():
        n = nodes[nid]
        if nid == plan.root or len(n.children) != 1:
            continue
        c = nodes[n.children[0]]
        if c.preds:
            continue
        p = nodes[n.parent]  # type: ignore[index]
        c.parent = n.parent
        c.preds = n.preds
        c.in_connex = c.in_connex or n.in_connex
        p.children = tuple(c.id if x == nid else x for x in p.children)
        merged.append(n.vars)
        del nodes[nid]
    # renumber densely, keeping the order
    ids = {old: new for new, old in enumerate(sorted(nodes))}
    out = []
    for old in sorted(nodes):
        n = nodes[old]
        out.append(replace(
            n,
            id=ids[old],
            parent=None if n.parent is None else ids[n.parent],
            children=tuple(ids[c] for c in n.children),
        ))
    tree = Plan(plan.pattern, out, ids[plan.root], plan.residual, plan.query_class, list(plan.notes))
    return tree, tuple(merged)
