"""An independent check of the generalized join tree definition (thesis Defs. 17-21).

The planner's output is only correct if it is a GJT pair for the query; this module
re-checks every condition from the definitions without using the planner's code,
so tests (and ``cep explain --check``-style debugging) can trust a plan:

* the nodes form one tree (parent/children agree, every node reachable once);
* leaves are exactly the atoms, each once, labelled with the atom's variables;
* every interior node has a guard child and ``children[0]`` is one;
* connectedness: the nodes holding a variable form a connected subtree;
* each edge predicate's variables lie within parent and child;
* N contains the root, induces a tree, is sibling-closed, var(N) = out;
* binary: at most two children;
* every query predicate is on exactly one edge or residual, never both or neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cep.plan.gyo import Tree
from cep.plan.model import Plan
from cep.records import record


@record
class _N:
    vars: frozenset[str]
    atom: int | None
    children: tuple[int, ...]
    parent: int | None
    preds: tuple[int, ...]
    connex: bool


def _check(
    nodes: Mapping[int, _N],
    root: int,
    atoms: Sequence[frozenset[str]],
    preds: Mapping[int, frozenset[str]],
    residual: Iterable[int],
    out: frozenset[str] | None,
    binary: bool,
) -> list[str]:
    errs: list[str] = []
    if root not in nodes:
        return [f"root {root} is not a node"]
    if nodes[root].parent is not None:
        errs.append("the root has a parent")
    if nodes[root].preds:
        errs.append("the root carries edge predicates")
    # one tree
    seen: set[int] = set()
    stack = [root]
    while stack:
        n = stack.pop()
        if n in seen:
            errs.append(f"node {n} is reached twice")
            continue
        seen.add(n)
        for c in nodes[n].children:
            if c not in nodes:
                errs.append(f"node {n} has unknown child {c}")
                continue
            if nodes[c].parent != n:
                errs.append(f"node {c} is a child of {n} but names {nodes[c].parent} as parent")
            stack.append(c)
    if set(nodes) - seen:
        errs.append(f"nodes not reachable from the root: {sorted(set(nodes) - seen)}")
    if errs:
        return errs
    # leaves and atoms
    leaf_atoms: list[int] = []
    for i, n in nodes.items():
        if n.atom is not None:
            if n.children:
                errs.append(f"leaf {i} (atom {n.atom}) has children")
            if not 0 <= n.atom < len(atoms):
                errs.append(f"leaf {i} names unknown atom {n.atom}")
                continue
            leaf_atoms.append(n.atom)
            if n.vars != atoms[n.atom]:
                errs.append(f"leaf {i} is labelled {sorted(n.vars)}, atom {n.atom} has {sorted(atoms[n.atom])}")
        else:
            if not n.children:
                errs.append(f"node {i} is a leaf without an atom")
                continue
            if not n.vars <= nodes[n.children[0]].vars:
                guards = [c for c in n.children if n.vars <= nodes[c].vars]
                errs.append(
                    f"node {i}: children[0] = {n.children[0]} is not a guard"
                    + ("" if guards else " and no child is")
                )
            if binary and len(n.children) > 2:
                errs.append(f"node {i} has {len(n.children)} children (not binary)")
    if sorted(leaf_atoms) != list(range(len(atoms))):
        errs.append(f"leaves hold atoms {sorted(leaf_atoms)}, expected each of 0..{len(atoms) - 1} once")
    # connectedness: nodes with x form a subtree iff #edges inside = #nodes - 1
    all_vars: set[str] = set().union(*(n.vars for n in nodes.values()))
    for x in sorted(all_vars):
        holders = [i for i, n in nodes.items() if x in n.vars]
        edges = sum(1 for i in holders if nodes[i].parent is not None and x in nodes[nodes[i].parent].vars)
        if edges != len(holders) - 1:
            errs.append(f"variable {x} violates connectedness (nodes {sorted(holders)})")
    # edge predicates
    placed: dict[int, list[int]] = {}
    for i, n in nodes.items():
        for p in n.preds:
            placed.setdefault(p, []).append(i)
            if p not in preds:
                errs.append(f"edge into {i} carries unknown predicate {p}")
                continue
            if n.parent is None:
                continue
            scope = n.vars | nodes[n.parent].vars
            if not preds[p] <= scope:
                errs.append(
                    f"predicate {p} on edge {n.parent}->{i} mentions {sorted(preds[p] - scope)} outside both nodes"
                )
    res = list(residual)
    for p in preds:
        on_edges = len(placed.get(p, []))
        in_res = res.count(p)
        if on_edges + in_res != 1:
            errs.append(f"predicate {p} is on {on_edges} edge(s) and residual {in_res} time(s)")
    for p in res:
        if p not in preds:
            errs.append(f"residual names unknown predicate {p}")
    # N: connex, sibling-closed, var(N) = out
    conn = {i for i, n in nodes.items() if n.connex}
    if root not in conn:
        errs.append("N does not contain the root")
    for i in conn:
        if i != root and nodes[i].parent not in conn:
            errs.append(f"N is not connex: node {i} is in N, its parent {nodes[i].parent} is not")
    for i in conn:
        kids = nodes[i].children
        inside = [c for c in kids if c in conn]
        if inside and len(inside) != len(kids):
            errs.append(f"N is not sibling-closed below node {i}")
    if out is not None:
        var_n: set[str] = set().union(*(nodes[i].vars for i in conn)) if conn else set()
        if var_n != out:
            errs.append(f"var(N) = {sorted(var_n)} differs from out = {sorted(out)}")
    return errs


def validate_plan(plan: Plan, out: Iterable[str] | None = None, binary: bool = True) -> list[str]:
    """Every violation of the GJT-pair definition in ``plan`` (empty: valid).

    ``out`` defaults to all variables (compiled patterns are full queries).
    """
    cp = plan.pattern
    nodes: dict[int, _N] = {}
    for idx, n in enumerate(plan.nodes):
        if n.id != idx:
            return [f"node at position {idx} has id {n.id}"]
        nodes[n.id] = _N(frozenset(n.vars), n.atom, tuple(n.children), n.parent, tuple(n.preds), n.in_connex)
    atoms = [frozenset(a.vars) for a in cp.atoms]
    preds = {p.id: frozenset(p.vars) for p in cp.predicates}
    for p in cp.predicates:
        if cp.predicates[p.id] is not p:
            return [f"predicate {p.id} is not at position {p.id}"]
    out_set = frozenset().union(*atoms) if out is None else frozenset(out)
    return _check(nodes, plan.root, atoms, preds, plan.residual, out_set, binary)


def validate_tree(
    tree: Tree,
    atoms: Sequence[Iterable[str]],
    preds: Mapping[int, Iterable[str]],
    residual: Iterable[int] = (),
    out: Iterable[str] | None = None,
    binary: bool = True,
) -> list[str]:
    """The same checks on a plain-set ``cep.plan.gyo.Tree`` (out None: var(N) unchecked)."""
    live = tree.live()
    dead = tree.connex - set(live)
    if dead:
        return [f"N holds nodes outside the tree: {sorted(dead)}"]
    nodes = {
        i: _N(
            t.vars,
            t.atom,
            tuple(t.children),
            t.parent if i != tree.root else None,
            tuple(t.preds),
            i in tree.connex,
        )
        for i, t in ((i, tree.nodes[i]) for i in live)
    }
    return _check(
        nodes,
        tree.root,
        [frozenset(a) for a in atoms],
        {p: frozenset(v) for p, v in preds.items()},
        residual,
        None if out is None else frozenset(out),
        binary,
    )
