"""GYO reduction for GCQs on the thesis' own examples (Idris 2018, ch. 4.2 and 5)."""

from __future__ import annotations

from itertools import combinations

import pytest

from cep.plan.binarize import binarize, sibling_close, tidy
from cep.plan.classify import ACYCLIC, FREE_CONNEX, Q_HIERARCHICAL, classify, is_q_hierarchical
from cep.plan.gyo import TNode, Tree, reduce_gcq
from cep.plan.planner import build_gjt_pair
from cep.plan.validate import validate_tree

# Example 6: Q1 = r(x,y) ⋈ s(y,z,w) ⋈ t(u,v) | x < z ∧ w < u
Q1_ATOMS = [{"x", "y"}, {"y", "z", "w"}, {"u", "v"}]
Q1_PREDS = {0: {"x", "z"}, 1: {"w", "u"}}
R, S, T = 0, 1, 2


def build(spec, connex_all=True) -> Tree:
    """spec: (vars, atom, preds, [child specs]); children listed guard first."""
    tree = Tree([], -1, set())

    def rec(s, parent):
        vars_, atom, preds, kids = s
        n = tree.add(TNode(frozenset(vars_), atom))
        if parent is not None:
            tree.attach(parent, n, preds)
        for k in kids:
            rec(k, n)
        return n

    tree.root = rec(spec, None)
    if connex_all:
        tree.connex = set(tree.live())
    return tree


def fig42_t2() -> Tree:
    # root {y,w} -> {y,z,w} (-> s, r with x<z) and {u} (edge w<u) -> t
    return build(
        ({"y", "w"}, None, [], [
            ({"y", "z", "w"}, None, [], [
                ({"y", "z", "w"}, S, [], []),
                ({"x", "y"}, R, [0], []),
            ]),
            ({"u"}, None, [1], [({"u", "v"}, T, [], [])]),
        ])
    )


def fig42_t1() -> Tree:
    # our reading of T1 (the figure is not in the text): s(y,z,w) at the top guarding
    # r (x<z) and t (w<u) directly; Example 7's remark (any connex set reaching u also
    # holds v) holds for it
    return build(
        ({"y", "z", "w"}, None, [], [
            ({"y", "z", "w"}, S, [], []),
            ({"x", "y"}, R, [0], []),
            ({"u", "v"}, T, [1], []),
        ])
    )


def connex_sets(tree: Tree):
    nodes = tree.live()
    for k in range(1, len(nodes) + 1):
        for c in combinations(nodes, k):
            cs = set(c)
            if tree.root in cs and all(n == tree.root or tree.nodes[n].parent in cs for n in cs):
                yield cs


def var_of(tree: Tree, ns) -> set[str]:
    return set().union(*(tree.nodes[n].vars for n in ns))


def test_example6_both_trees_are_gjts_for_q1():
    assert validate_tree(fig42_t2(), Q1_ATOMS, Q1_PREDS) == []
    assert validate_tree(fig42_t1(), Q1_ATOMS, Q1_PREDS, binary=False) == []
    assert reduce_gcq(Q1_ATOMS, Q1_PREDS).acyclic


def test_validator_rejects_broken_trees():
    t = fig42_t2()
    t.nodes[t.nodes[t.root].children[1]].preds = []  # drop w<u: neither on an edge nor residual
    assert any("predicate 1" in e for e in validate_tree(t, Q1_ATOMS, Q1_PREDS))
    t = fig42_t2()
    t.nodes[t.root].children.reverse()  # {u} is not a guard of {y,w}
    assert any("not a guard" in e for e in validate_tree(t, Q1_ATOMS, Q1_PREDS))
    # x<z placed on the edge {y,w} -> {u}: x and z are in neither node
    t = build(
        ({"y", "w"}, None, [], [
            ({"y", "z", "w"}, None, [], [({"y", "z", "w"}, S, [], []), ({"x", "y"}, R, [], [])]),
            ({"u"}, None, [0, 1], [({"u", "v"}, T, [], [])]),
        ])
    )
    assert any("outside both nodes" in e for e in validate_tree(t, Q1_ATOMS, Q1_PREDS))
    # connectedness: y in r and s but not in the node between them
    t = build(
        ({"w"}, None, [], [
            ({"y", "z", "w"}, S, [], []),
            ({"u"}, None, [1], [({"u", "v"}, T, [], []), ({"x", "y"}, R, [], [])]),
        ])
    )
    errs = validate_tree(t, Q1_ATOMS, Q1_PREDS, residual=[0])
    assert any("connectedness" in e for e in errs)
    # N not sibling-closed
    t = fig42_t2()
    yzw = t.nodes[t.root].children[0]
    t.connex = {t.root, yzw, t.nodes[yzw].children[0]}
    assert any("sibling-closed" in e for e in validate_tree(t, Q1_ATOMS, Q1_PREDS))


def test_example7_projection_free_connex():
    out = {"y", "z", "w", "u"}
    t2 = fig42_t2()
    yzw, u = t2.nodes[t2.root].children
    t2.connex = {t2.root, yzw, u}
    assert validate_tree(t2, Q1_ATOMS, Q1_PREDS, out=out) == []
    # no connex subset of T1 has exactly out(Q2)
    t1 = fig42_t1()
    assert all(var_of(t1, c) != out for c in connex_sets(t1))
    red = reduce_gcq(Q1_ATOMS, Q1_PREDS, out)
    assert red.acyclic and red.free_connex and red.stage1_vars == out
    pair = build_gjt_pair(Q1_ATOMS, Q1_PREDS, out)
    assert validate_tree(pair.tree, Q1_ATOMS, Q1_PREDS, out=out) == []


def test_example7_pi_xu_not_free_connex():
    red = reduce_gcq(Q1_ATOMS, Q1_PREDS, {"x", "u"})
    assert red.acyclic and not red.free_connex
    assert red.stage1_vars > {"x", "u"}
    pair = build_gjt_pair(Q1_ATOMS, Q1_PREDS, {"x", "u"})
    # N is the minimal free-connex extension (thesis Thm. 7)
    assert validate_tree(pair.tree, Q1_ATOMS, Q1_PREDS, out=red.stage1_vars) == []


def test_triangle_is_cyclic():
    tri = [{"x", "y"}, {"y", "z"}, {"x", "z"}]
    red = reduce_gcq(tri, {})
    assert not red.acyclic and red.tree is None and red.stuck is not None
    assert "cyclic" in str(red.stuck)
    with pytest.raises(ValueError):
        build_gjt_pair(tri, {})


def test_bernstein_goodman_query_is_cyclic_without_transitivity():
    # thesis ch. 4.2: r(xr) s(xs,ys) t(xt,yt) u(yu) | xs<=xr, xt<=xr, ys<=yu, yt<=yu
    atoms = [{"xr"}, {"xs", "ys"}, {"xt", "yt"}, {"yu"}]
    preds = {0: {"xs", "xr"}, 1: {"xt", "xr"}, 2: {"ys", "yu"}, 3: {"yt", "yu"}}
    assert not reduce_gcq(atoms, preds).acyclic
    pair = build_gjt_pair(atoms, preds)
    assert pair.residual and set(pair.kept) | set(pair.residual) == set(preds)
    kept = {p: preds[p] for p in pair.kept}
    assert validate_tree(pair.tree, atoms, preds, pair.residual) == []
    assert reduce_gcq(atoms, kept).acyclic
    for p in pair.residual:  # maximal: no residual predicate fits back in
        assert not reduce_gcq(atoms, {**kept, p: preds[p]}).acyclic


def test_example10_acyclic_not_free_connex():
    atoms = [{"s", "t", "u"}, {"t", "u"}, {"u", "w", "x"}, {"s", "v"}, {"w", "z", "y"}]
    preds = {0: {"t", "v"}, 1: {"x", "y"}}
    out = {"t", "u", "z", "w"}
    red = reduce_gcq(atoms, preds, out)
    assert red.acyclic and not red.free_connex
    assert red.stage1_vars == {"t", "u", "w", "x", "y", "z"}


# Table 4.1 (App. A.2.1)
def _q(base: int, out: set[str] | None):
    R3, S3, T3 = {"a", "b", "c"}, {"d", "e", "f"}, {"g", "h", "i"}
    if base == 1:
        return [R3, S3], {0: {"a", "d"}}, out
    if base == 2:
        return [R3 | {"k"}, S3 | {"k"}], {0: {"a", "d"}}, out
    if base == 3:
        return [R3, S3, T3], {0: {"a", "d"}, 1: {"e", "g"}}, out
    if base == 4:
        return [R3, S3, T3], {0: {"a", "d"}, 1: {"d", "g"}}, out
    if base == 5:
        return [R3 | {"k"}, S3 | {"k"}, T3], {0: {"a", "d"}, 1: {"d", "g"}}, out
    if base == 6:
        return [R3, S3 | {"k"}, T3 | {"k"}], {0: {"a", "d"}, 1: {"d", "g"}}, out
    raise AssertionError(base)


TABLE41 = {
    "Q1": _q(1, None),
    "Q2": _q(2, None),
    "Q3": _q(3, None),
    "Q4": _q(4, None),
    "Q5": _q(5, None),
    "Q6": _q(6, None),
    "Q7": _q(4, set("abdefgh")),
    "Q8": _q(5, set("adefghk")),
    "Q9": _q(6, set("defghk")),
    "Q10": _q(4, set("bcefhi")),
    "Q11": _q(5, set("bcefhi")),
    "Q12": _q(6, set("bcefhi")),
}


@pytest.mark.parametrize("name", sorted(TABLE41, key=lambda s: int(s[1:])))
def test_table41_classification(name):
    atoms, preds, out = TABLE41[name]
    expected = ACYCLIC if name in ("Q10", "Q11", "Q12") else FREE_CONNEX
    qc = classify(atoms, preds, out)
    assert qc.name == expected
    red = reduce_gcq(atoms, preds, out)
    assert red.acyclic
    assert red.free_connex == (expected == FREE_CONNEX)
    pair = build_gjt_pair(atoms, preds, out)
    assert validate_tree(pair.tree, atoms, preds, out=red.stage1_vars) == []
    assert pair.residual == []


def test_q7_worked_example_tree():
    atoms, preds, out = TABLE41["Q7"]
    pair = build_gjt_pair(atoms, preds, out)
    t = pair.tree
    frontier = {n for n in t.connex if not any(c in t.connex for c in t.nodes[n].children)}
    assert {t.nodes[n].vars for n in frontier} == {frozenset("ab"), frozenset("def"), frozenset("gh")}
    assert var_of(t, t.connex) == out


def test_q_hierarchical():
    assert is_q_hierarchical([{"k", "a"}, {"k", "b"}])
    assert is_q_hierarchical([{"x", "y"}, {"y", "z"}])
    path3 = [{"x", "y"}, {"y", "z"}, {"z", "w"}]  # at(y) and at(z) overlap
    assert not is_q_hierarchical(path3)
    assert not is_q_hierarchical([{"k", "a"}, {"k", "b"}], out={"a"})  # a in out, k not
    assert classify([{"k", "a"}, {"k", "b"}], {}).name == Q_HIERARCHICAL
    assert classify(path3, {}).name == FREE_CONNEX
    assert classify(path3, {}, out={"x", "w"}).name == ACYCLIC


def test_sibling_close_type1_and_binarize():
    # T1 with N = {root, s}: s is a guard child in N, r and t are not -> type-1
    t = fig42_t1()
    root = t.root
    s_leaf = t.nodes[root].children[0]
    t.connex = {root, s_leaf}
    sibling_close(t)
    assert validate_tree(t, Q1_ATOMS, Q1_PREDS, out={"y", "z", "w"}, binary=False) == []
    binarize(t)
    tidy(t)
    assert validate_tree(t, Q1_ATOMS, Q1_PREDS, out={"y", "z", "w"}) == []


def test_sibling_close_type2():
    atoms = [{"y", "w", "x"}, {"y", "z"}]
    t = build(({"y", "w"}, None, [], [({"y", "w", "x"}, 0, [], []), ({"y", "z"}, 1, [], [])]), False)
    root = t.root
    t.connex = {root, t.nodes[root].children[1]}  # only the non-guard child in N
    assert any("sibling-closed" in e for e in validate_tree(t, atoms, {}))
    sibling_close(t)
    assert validate_tree(t, atoms, {}, out={"y", "w", "z"}) == []


def test_binarize_many_children():
    atoms = [{"k", "a"}, {"k", "b"}, {"k", "c"}, {"k", "d"}, {"k"}]
    t = build(({"k"}, None, [], [(a, i, [], []) for i, a in reversed(list(enumerate(atoms)))]))
    assert validate_tree(t, atoms, {}, binary=False) == []
    binarize(t)
    assert validate_tree(t, atoms, {}, out=set("kabcd")) == []
