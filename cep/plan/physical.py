"""The physical plan: the tree and the index layout the runtime executes, as data.

The logical plan (``cep.plan.model.Plan``) is the generalized join tree and the
indexes the thesis asks for.  Three decisions turn it into what runs, and they
live here so the runtime only executes them and ``cep explain`` prints them:

- pass-through nodes are merged into their only child (``merge_pass_through_nodes``);
- a node's P and S indexes with the same layout share one storage;
- a hash P index whose key holds S's key and S's sort variable is served from
  S's storage by an equality seek on the sort variable (plus a comparison of
  the rest of P's key), instead of being kept twice;
- two leaves of consecutive atoms that store the same tuples (same event type,
  same filter, same leaf tuple, a stored index of the same key and sort) share
  that storage (``share_leaf_storage``): card testing's ``s1`` and ``s2`` are both
  small purchases keyed on the card and sorted on the time, so each small
  purchase is stored, and expired, once instead of twice.

Per node the plan records which storages are maintained (``stores``), how each
index is probed (``IndexUse``), whether the node keeps its GMR, and whether a
sort variable holds only numbers (event times: no rank key needed).  The gap
elements' anti-joins (``cep.plan.gaps``: a sorted index per gap type and key,
and per gap a range count or a range scan) are part of the plan too; the
engine builds its gap indexes and checks from them.
"""

from __future__ import annotations

from typing import Any

from cep.lang import ast
from cep.lang.gcq import TIME_ATTR, Bound, CompiledPattern
from cep.plan.gaps import GapIndexSpec, GapPlan, plan_gaps
from cep.plan.model import IndexSpec, Plan, enumeration_index, sibling_index
from cep.records import fields, is_dataclass, record, replace


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
    # (node, "P" or "S"): another leaf's stored index whose storage holds this one's tuples
    # (``share_leaf_storage``); this index is then not in its node's ``stores``
    shares: tuple[int, str] | None = None


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
    # the sibling leaf whose S groups gate this node's groups (``gate_on_sibling``): a group of
    # this node's tuples is kept only while that leaf holds a group of the same key
    gated_by: int | None = None


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


def physical_plan(plan: Plan, merge_pass_through: bool = True, keep_all_gmrs: bool = False,
                  share_leaves: bool = True, gate_groups: bool = True) -> PhysicalPlan:
    """The plan ``PatternRuntime`` executes for a logical plan (see the module docstring).

    ``share_leaves``: leaves that store the same tuples share one storage
    (``share_leaf_storage``); the runtime's atoms of such a pair must then take every
    event together, the earlier atom first (as the engine does).  False for a caller
    that inserts into single atoms.  ``gate_groups``: ``gate_on_sibling`` (False: every group
    of every node is kept, as the thesis describes)."""
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
    if share_leaves:
        nodes = share_leaf_storage(cp, nodes)
    if gate_groups:
        nodes = gate_on_sibling(cp, nodes)
    gap_indexes, gaps = plan_gaps(cp)
    return PhysicalPlan(cp, plan, tree, tuple(nodes), merged, tree.residual, tuple(gap_indexes), tuple(gaps))


def share_leaf_storage(cp: CompiledPattern, nodes: list[PhysicalNode]) -> list[PhysicalNode]:
    """The nodes with each stored index of a leaf that holds the same tuples as a stored
    index of the next atom's leaf reading that one's storage instead of keeping its own.

    Two leaves hold the same tuples when their atoms have the same event type and the same
    filter (every event enters both or neither) and the same leaf tuple (the same attribute at
    each position, null-checked alike), and an index of each stores them under the same key
    positions and sort position.  The tuples are then stored once: the later atom's update
    maintains the storage, the earlier atom's update skips it.

    Why only consecutive atoms, and why the later one: the engine applies a change of an event
    (insert, retraction, expiry; one tuple or a batch) to its pattern's atoms one after the
    other in atom order, so the two atoms' changes are adjacent.  Separate storages would
    give: the earlier atom's storage changed, then its update path (which reads the later
    atom's storage, unchanged; a leaf's path never reads its own storage, the change itself
    stands for it), then the later atom's storage changed and its path (which reads the
    earlier one's, changed).  With the storage changed only at the later atom, each path
    reads exactly that.  With an atom's change in between (not consecutive), that atom's
    path would read the earlier atom's storage before its change.
    """
    by_atom = {n.atom: n for n in nodes if n.atom is not None}
    counts: dict[str, int] = {}
    for a in cp.atoms:
        for v in a.vars:
            counts[v] = counts.get(v, 0) + 1
    out = {n.id: n for n in nodes}
    taken: set[int] = set()  # atoms already in a pair (a storage is shared by two leaves at most)
    for ai in range(len(cp.atoms) - 1):
        first, later = by_atom.get(ai), by_atom.get(ai + 1)
        if first is None or later is None or ai in taken or not _same_tuples(cp, ai, ai + 1, first, later, counts):
            continue
        uses = {"P": first.P, "S": first.S}
        stores = list(first.stores)
        for which in first.stores:
            use = uses[which]
            assert use is not None
            match = next((w for w in later.stores if _same_storage(use, (later.P, later.S)[w == "S"], first, later)), None)
            if match is None:
                continue
            uses[which] = replace(use, shares=(later.id, match))
            stores.remove(which)
        if len(stores) == len(first.stores):
            continue
        taken |= {ai, ai + 1}
        out[first.id] = replace(first, P=uses["P"], S=uses["S"], stores=tuple(stores))
    return [out[n.id] for n in nodes]


def gate_key(cp: CompiledPattern, nodes: list[PhysicalNode] | tuple[PhysicalNode, ...],
             n: PhysicalNode) -> tuple[str, ...] | None:
    """The key that gates node ``n``'s groups on its sibling leaf's (``gate_on_sibling``), or None
    when ``n`` does not take the gate."""
    nodes = {x.id: x for x in nodes}
    if n.parent is None or n.atom is not None or n.keeps_gmr or n.sibling is None or len(n.children) != 2:
        return None
    m = nodes[n.sibling]
    kids = [nodes[c] for c in n.children]
    if m.atom is None or not m.is_guard or m.S is None or m.S.shares is not None or not m.stores:
        return None
    if m.P is not None and m.P.shares is not None:
        return None
    # a twin reading the leaf's storage (``share_leaf_storage``) would see it change inside another
    # atom's path, between the build of the gated group and the change it was built for
    if any(u is not None and u.shares is not None and u.shares[0] == m.id for x in nodes.values() for u in (x.P, x.S)):
        return None
    key = m.S.spec.key_vars
    if not key or not n.stores or any(k.atom is None for k in kids):
        return None
    # a sibling that takes every event of a child's type (no filter of its own) has a group of the key
    # whenever the child has recent tuples: the gate would cost its test and never skip (rising_price)
    ma = cp.atoms[m.atom]
    if ma.filter is None and any(cp.atoms[k.atom].type == ma.type for k in kids):  # type: ignore[index]
        return None
    for which in n.stores:
        use = n.P if which == "P" else n.S
        if use is None or use.spec.key_vars != key:
            return None
    if not all(set(key) <= set(k.vars) for k in kids):
        return None
    guard = kids[0]
    # the build reads the guard child's tuples from an index grouped on the key (sorted on event
    # times, or unsorted: every tuple is in it, none left out for a null sort value)
    if not guard.is_guard or not any(u is not None and u.spec.key_vars == key and (u.numeric or u.spec.sort_var is None)
                                     for u in (guard.P, guard.S)):
        return None
    return key


def gate_on_sibling(cp: CompiledPattern, nodes: list[PhysicalNode]) -> list[PhysicalNode]:
    """The nodes with each inner node ``n`` that takes it marked as gated by its sibling leaf ``m``
    (``PhysicalNode.gated_by``): ``n`` keeps a group of its tuples (the key of ``m``'s S index,
    the variables ``n`` and ``m`` share) only while ``m`` holds a group of that key.

    Why it is exact: ``n``'s tuples reach the parent only joined with ``m``'s tuples of the
    same key, and enumeration reaches them only from parent tuples, which need one; so while
    ``m`` has no group of key ``k``, no change of ``n``'s group ``k`` changes anything above,
    and the runtime skips it (one dict lookup).  When ``m``'s group ``k`` appears, ``n``'s group
    is built from its children's storages (its guard child's tuples of key ``k``, each with the
    other child's range sum: the update path's own step, O(group) once); when it goes, ``n``'s
    group goes.

    Why: card testing's {card, s2.ts} holds every small purchase with its number of earlier
    small partners (``s1``); keeping it is most of the work of a small purchase (a range sum
    and an index entry at insert, a walk over the later partners' counts at the expiry of
    the first).  Its sibling is the big purchase; on the 1,000-card stream a card has one in
    the window for about one small purchase in six, so the other five change the leaves'
    storage and nothing above.

    Taken when: ``n`` is an inner node whose two children are leaves, with no GMR; its
    sibling ``m`` is a leaf and the guard (its step up is a range sum over ``n``'s storage; a
    leaf's changes come only through its own paths, which build and drop the gated groups)
    whose storage no twin leaf reads, and which has a filter of its own or a type neither child
    has (else it holds a group of a key whenever a child holds recent tuples of it, and the gate
    would cost its test without skipping: rising_price's ``c`` takes every quote);
    every storage of ``n`` is grouped on ``m``'s S key, which both children hold (so the gate
    is tested before a child's step up), and ``n``'s guard child has an index grouped on it
    that holds all its tuples (where the build reads them)."""
    return [replace(n, gated_by=n.sibling) if gate_key(cp, nodes, n) is not None else n for n in nodes]


def _same_tuples(cp: CompiledPattern, a: int, b: int, na: PhysicalNode, nb: PhysicalNode,
                 counts: dict[str, int]) -> bool:
    """Atoms ``a`` and ``b`` (leaves ``na``, ``nb``) make the same leaf tuple of the same events."""
    A, B = cp.atoms[a], cp.atoms[b]
    if A.type != B.type or len(na.vars) != len(nb.vars):
        return False
    if (A.filter is None) != (B.filter is None):
        return False
    if A.filter is not None and (A.filter_expr is None or B.filter_expr is None
                                 or _alias_free(A.filter_expr, A.alias) != _alias_free(B.filter_expr, B.alias)):
        return False
    for va, vb in zip(na.vars, nb.vars, strict=True):
        if A.attrs[A.vars.index(va)] != B.attrs[B.vars.index(vb)]:
            return False
        if (counts[va] > 1) != (counts[vb] > 1):  # a join variable's null leaves the event out
            return False
    return True


def _same_storage(a: IndexUse, b: IndexUse | None, na: PhysicalNode, nb: PhysicalNode) -> bool:
    """Stored indexes ``a`` of leaf ``na`` and ``b`` of leaf ``nb`` group and sort tuples alike."""
    if b is None or a.numeric != b.numeric or b.shares is not None:
        return False
    pa, pb = {v: i for i, v in enumerate(na.vars)}, {v: i for i, v in enumerate(nb.vars)}
    if [pa[v] for v in a.spec.key_vars] != [pb[v] for v in b.spec.key_vars]:
        return False
    if (a.spec.sort_var is None) != (b.spec.sort_var is None):
        return False
    return a.spec.sort_var is None or pa[a.spec.sort_var] == pb[b.spec.sort_var]


def _alias_free(x: Any, alias: str) -> Any:
    """Expression ``x`` as comparable data with ``alias``'s attributes under one name (two
    atoms' filters compare equal when they test the same attributes of their own events)."""
    if isinstance(x, ast.Attr):
        return ("attr", "" if x.alias == alias else x.alias, x.name)
    if is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__, *(_alias_free(getattr(x, f.name), alias) for f in fields(x) if f.compare))
    if isinstance(x, (list, tuple)):
        return tuple(_alias_free(y, alias) for y in x)
    return (type(x).__name__, x)  # a literal's type too: true = 1 and 1 = 1.0 in Python, not in a filter


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
