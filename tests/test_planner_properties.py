"""Property tests: the planner's output is a valid GJT pair for random small GCQs.

Random GCQs (2-5 atoms, random shared variables, random binary predicates, cycles
included) -> plan -> the independent validator (``cep.plan.validate``) passes, and
the tree predicates plus the residual filters are exactly the query's predicates.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_planner import lt, make_cp

from cep.plan.gyo import reduce_gcq
from cep.plan.planner import build_gjt_pair, plan_pattern
from cep.plan.validate import validate_plan, validate_tree

ORIGINS = ["seq", "within", "where", "span"]


@st.composite
def gcqs(draw):
    k = draw(st.integers(2, 5))
    names = [f"x{i}" for i in range(k)]
    n_shared = draw(st.integers(0, 6))
    atom_vars: list[list[str]] = [[f"{n}.ts"] for n in names]
    for j in range(n_shared):
        users = draw(st.sets(st.integers(0, k - 1), min_size=2, max_size=draw(st.sampled_from([2, k]))))
        owner = names[min(users)]
        for u in sorted(users):
            atom_vars[u].append(f"{owner}.s{j}")
    for i, n in enumerate(names):
        for j in range(draw(st.integers(0, 2))):
            atom_vars[i].append(f"{n}.p{j}")
    all_vars = sorted({v for vs in atom_vars for v in vs})
    n_preds = draw(st.integers(0, 6))
    preds = []
    for _ in range(n_preds):
        a, b = draw(st.lists(st.sampled_from(all_vars), min_size=2, max_size=2, unique=True))
        origin = draw(st.sampled_from(ORIGINS))
        linear = lt(a, b) if draw(st.booleans()) else None
        preds.append(([a, b], f"{a} < {b}", origin, linear))
    # occasionally a three-variable predicate
    if len(all_vars) >= 3 and draw(st.booleans()):
        vs = draw(st.lists(st.sampled_from(all_vars), min_size=3, max_size=3, unique=True))
        preds.append((vs, " + ".join(vs[:2]) + f" < {vs[2]}", "where", None))
    common = set(atom_vars[0]).intersection(*map(set, atom_vars[1:]))
    partition = tuple(v for v in atom_vars[0] if v in common)
    atoms = [(n, f"T{i}", vs) for i, (n, vs) in enumerate(zip(names, atom_vars, strict=True))]
    return make_cp("rand", atoms, preds, draw(st.sampled_from(["SEQ", "AND"])), None, partition)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gcqs())
def test_random_plans_are_valid(cp):
    plan = plan_pattern(cp)
    assert validate_plan(plan) == []
    pattern = plan.pattern
    # the original predicates keep their ids; only split equalities are added
    assert pattern.predicates[: len(cp.predicates)] == cp.predicates
    assert all(p.origin == "where" and " = " in p.text for p in pattern.predicates[len(cp.predicates):])
    tree_preds = [pid for n in plan.nodes for pid in n.preds]
    assert len(tree_preds) == len(set(tree_preds))
    assert not set(tree_preds) & set(plan.residual)
    assert set(tree_preds) | set(plan.residual) == {p.id for p in pattern.predicates}
    # residual only when the query as planned is cyclic, and the kept set is maximal
    atoms = [a.vars for a in pattern.atoms]
    preds = {p.id: p.vars for p in pattern.predicates}
    kept = {p: preds[p] for p in tree_preds}
    assert reduce_gcq(atoms, kept).acyclic
    if reduce_gcq(atoms, preds).acyclic:
        assert plan.residual == ()
        assert plan.query_class != "cyclic with residuals"
    else:
        assert plan.residual and plan.query_class == "cyclic with residuals"
        for p in plan.residual:
            assert not reduce_gcq(atoms, {**kept, p: preds[p]}).acyclic
    # leaves carry the atoms' variables and every interior node is binary; full query:
    # every node is in N
    for n in plan.nodes:
        assert n.in_connex
        assert len(n.children) <= 2
        if n.atom is not None:
            assert n.vars == pattern.atoms[n.atom].vars


@st.composite
def plain_gcqs(draw):
    pool = list("abcdefgh")
    k = draw(st.integers(2, 5))
    atoms = [draw(st.sets(st.sampled_from(pool), min_size=1, max_size=4)) for _ in range(k)]
    vs = sorted(set().union(*atoms))
    preds = {}
    for i in range(draw(st.integers(0, 4))):
        if len(vs) < 2:
            break
        preds[i] = set(draw(st.lists(st.sampled_from(vs), min_size=2, max_size=2, unique=True)))
    out = draw(st.sets(st.sampled_from(vs)))
    return atoms, preds, out


@settings(max_examples=300, deadline=None)
@given(plain_gcqs())
def test_random_projected_pairs(q):
    atoms, preds, out = q
    if not reduce_gcq(atoms, {}).acyclic:
        return  # equality cycles are handled by plan_pattern (variable splitting)
    pair = build_gjt_pair(atoms, preds, out)
    red = pair.reduction
    assert red.acyclic
    assert out <= red.stage1_vars
    assert red.free_connex == (red.stage1_vars == out)
    assert validate_tree(pair.tree, atoms, preds, pair.residual, out=red.stage1_vars) == []
    assert set(pair.kept) | set(pair.residual) == set(preds)
    assert (pair.residual == []) == reduce_gcq(atoms, preds).acyclic


@settings(max_examples=200, deadline=None)
@given(plain_gcqs(), st.randoms(use_true_random=False))
def test_prop16_transforms_keep_var_n(q, rnd):
    """Any connex N of an Alg. 8 tree -> sibling-closed, binary, same var(N) (Prop. 16)."""
    from cep.plan.binarize import binarize, sibling_close, tidy

    atoms, preds, _ = q
    red = reduce_gcq(atoms, preds)
    if not red.acyclic:
        return
    tree = red.tree
    # a random connex subset: the root plus a random parent-closed set of nodes
    connex = {tree.root}
    for n in tree.live():
        if n != tree.root and tree.nodes[n].parent in connex and rnd.random() < 0.6:
            connex.add(n)
    tree.connex = connex
    var_n = set().union(*(tree.nodes[n].vars for n in connex))
    sibling_close(tree)
    assert validate_tree(tree, atoms, preds, out=var_n, binary=False) == []
    binarize(tree)
    tidy(tree)
    assert validate_tree(tree, atoms, preds, out=var_n) == []
