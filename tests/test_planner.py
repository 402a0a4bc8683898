"""Planner on compiled patterns: tree shape for SEQ, residual choice, validity.

Compiled patterns are built by hand here (``make_cp``) so these tests do not
depend on the parser; tests over real pattern texts are at the end.
"""

from __future__ import annotations

import pytest
from cephelp import PATTERNS

from cep.lang.gcq import Atom, CompiledPattern, Linear, Predicate, Variable
from cep.plan.classify import classify_plan
from cep.plan.model import enumeration_index, sibling_index
from cep.plan.planner import plan_pattern
from cep.plan.validate import validate_plan


def make_cp(
    name: str,
    atoms: list[tuple[str, str, list[str]]],
    preds: list[tuple[list[str], str, str, Linear | None]],
    op: str = "SEQ",
    within=None,
    partition: tuple[str, ...] = (),
) -> CompiledPattern:
    """atoms: (alias, type, [var names without the identity var]); preds: (vars, text, origin, linear)."""
    variables: dict[str, Variable] = {}
    atom_objs = []
    for i, (alias, typ, vs) in enumerate(atoms):
        vs = list(vs) + [f"{alias}.#"]
        attrs = []
        for v in vs:
            attr = v.split(".", 1)[1]
            attrs.append(attr)
            ref = (alias, attr)
            old = variables.get(v)
            variables[v] = Variable(v, (old.refs if old else ()) + (ref,))
        atom_objs.append(Atom(alias, typ, i, tuple(vs), tuple(attrs)))
    pred_objs = [
        Predicate(i, tuple(vs), text, origin, lambda *a: True, None, lin)
        for i, (vs, text, origin, lin) in enumerate(preds)
    ]
    return CompiledPattern(name, op, atom_objs, variables, pred_objs, within, partition, None)


def lt(a: str, b: str) -> Linear:
    """a < b  as  a - b < 0."""
    return Linear(((a, 1), (b, -1)), 0, "<")


def le_diff(a: str, b: str, w) -> Linear:
    """a - b <= w."""
    return Linear(((a, 1), (b, -1)), -w, "<=")


def seq_within(k: int, w=3600, partition: bool = True) -> CompiledPattern:
    """SEQ(T x0, ..., T x{k-1}) [PARTITION BY card] WITHIN w, as the compiler emits it."""
    names = [f"x{i}" for i in range(k)]
    card = ["x0.card"] if partition else []
    atoms = [(n, "Txn", card + [f"{n}.ts"]) for n in names]
    preds = []
    for i in range(k - 1):
        a, b = f"{names[i]}.ts", f"{names[i + 1]}.ts"
        preds.append(([a, b], f"{a} < {b}", "seq", lt(a, b)))
    for i in range(k - 1):
        a, b = f"{names[i]}.ts", f"{names[i + 1]}.ts"
        preds.append(([b, a], f"{b} - {a} <= {w}", "within", le_diff(b, a, w)))
    if k >= 3:
        a, b = f"{names[0]}.ts", f"{names[-1]}.ts"
        preds.append(([b, a], f"{b} - {a} <= {w}", "span", le_diff(b, a, w)))
    return make_cp("seq", atoms, preds, "SEQ", w, tuple(card))


def _leaf_atoms_under(plan, nid) -> set[int]:
    n = plan.nodes[nid]
    if n.atom is not None:
        return {n.atom}
    return set().union(*(_leaf_atoms_under(plan, c) for c in n.children))


def test_card_testing_span_residual_bands_in_tree():
    cp = seq_within(3)
    plan = plan_pattern(cp)
    assert validate_plan(plan) == []
    span = [p.id for p in cp.predicates if p.origin == "span"]
    assert list(plan.residual) == span
    on_edges = {pid for n in plan.nodes for pid in n.preds}
    assert on_edges == {p.id for p in cp.predicates if p.origin in ("seq", "within")}
    assert plan.query_class == "cyclic with residuals"
    assert any("span" in note and "residual" in note for note in plan.notes)
    # every edge holding a band is indexed as a band both ways
    for n in plan.nodes:
        if n.preds:
            assert enumeration_index(plan, n.id).kind == "band"
            assert sibling_index(plan, n.id).kind == "band"


@pytest.mark.parametrize("k", [2, 3, 4, 5])
def test_seq_tree_shape_last_element_guards(k):
    cp = seq_within(k)
    plan = plan_pattern(cp)
    assert validate_plan(plan) == []
    root = plan.nodes[plan.root]
    assert root.vars == ()
    (part,) = root.children
    assert plan.nodes[part].vars == ("x0.card",)
    # from the {card} node down, element i's subtree: children[0] leads to element i's
    # leaf through guards only, children[1] is the subtree of elements < i, joined by
    # the SEQ order and band of the pair (i-1, i)
    (top,) = plan.nodes[part].children
    for i in range(k - 1, 0, -1):
        node = plan.nodes[top]
        assert set(node.vars) == {"x0.card", f"x{i}.ts"}
        guard, rest = node.children
        g = guard
        while plan.nodes[g].atom is None:
            assert len(plan.nodes[g].children) == 1
            g = plan.nodes[g].children[0]
        assert plan.nodes[g].atom == i
        assert _leaf_atoms_under(plan, rest) == set(range(i))
        texts = {cp.predicates[p].origin for p in plan.nodes[rest].preds}
        assert texts == {"seq", "within"}
        assert set(plan.nodes[rest].vars) == {"x0.card", f"x{i - 1}.ts"}
        top = rest
    # the first element: a projection over its leaf
    assert _leaf_atoms_under(plan, top) == {0}
    # the path from the root to the last element's leaf is all guards (children[0])
    n = part
    while plan.nodes[n].children:
        n = plan.nodes[n].children[0]
    assert plan.nodes[n].atom == k - 1


def test_unpartitioned_seq():
    plan = plan_pattern(seq_within(3, partition=False))
    assert validate_plan(plan) == []
    assert any("one group" in note for note in plan.notes)
    assert len(plan.residual) == 1


def test_and_window_extra_pairs_residual():
    names = ["a", "b", "c"]
    atoms = [(n, n.upper(), [f"{n}.ts"]) for n in names]
    preds = []
    for i in range(3):
        for j in range(i + 1, 3):
            origin = "within" if j == i + 1 else "span"
            for x, y in ((i, j), (j, i)):
                a, b = f"{names[x]}.ts", f"{names[y]}.ts"
                preds.append(([a, b], f"{a} - {b} <= 10", origin, le_diff(a, b, 10)))
    cp = make_cp("and3", atoms, preds, "AND", 10)
    plan = plan_pattern(cp)
    assert validate_plan(plan) == []
    assert {cp.predicates[p].origin for p in plan.residual} == {"span"}
    assert len(plan.residual) == 2


def test_acyclic_pattern_has_no_residual_and_is_free_connex():
    cp = make_cp(
        "pair",
        [("a", "A", ["a.k", "a.ts"]), ("b", "B", ["a.k", "b.ts"])],
        [(["a.ts", "b.ts"], "a.ts < b.ts", "seq", lt("a.ts", "b.ts"))],
        partition=("a.k",),
    )
    plan = plan_pattern(cp)
    assert validate_plan(plan) == []
    assert plan.residual == ()
    assert plan.query_class == "free-connex"
    qc = classify_plan(plan)
    assert "O(|N|)" in qc.delay


def test_and_without_predicates_is_q_hierarchical():
    cp = make_cp("both", [("a", "A", ["a.k", "a.ts"]), ("b", "B", ["a.k", "b.ts"])], [], "AND", None, ("a.k",))
    plan = plan_pattern(cp)
    assert validate_plan(plan) == []
    assert plan.query_class == "q-hierarchical"


def test_where_cycle_keeps_order_drops_where():
    # SEQ(a, b, c) with a user comparison a.v < c.v closing a cycle
    atoms = [("a", "A", ["a.ts", "a.v"]), ("b", "B", ["b.ts"]), ("c", "C", ["c.ts", "c.v"])]
    preds = [
        (["a.v", "c.v"], "a.v < c.v", "where", lt("a.v", "c.v")),
        (["a.ts", "b.ts"], "a.ts < b.ts", "seq", lt("a.ts", "b.ts")),
        (["b.ts", "c.ts"], "b.ts < c.ts", "seq", lt("b.ts", "c.ts")),
    ]
    plan = plan_pattern(make_cp("w", atoms, preds))
    assert validate_plan(plan) == []
    assert plan.residual == (0,)


def test_equality_cycle_is_split_never_rejected():
    # a.x = b.x, b.y = c.y, c.z = a.z: a triangle of shared variables
    atoms = [("a", "A", ["a.x", "a.z", "a.ts"]), ("b", "B", ["a.x", "b.y", "b.ts"]), ("c", "C", ["b.y", "a.z", "c.ts"])]
    cp = make_cp("tri", atoms, [], "AND")
    plan = plan_pattern(cp)
    assert validate_plan(plan) == []
    assert plan.pattern is not cp
    added = plan.pattern.predicates[len(cp.predicates):]
    assert added and all(" = " in p.text for p in added)
    assert any("split" in note for note in plan.notes)
    # the split equality predicate is SQL equality on canonical values
    fn = added[0].fn
    assert fn(1, 1.0) and not fn(True, 1) and not fn(None, None) and not fn("1", 1)
    # every alias still reads the same attributes
    for a, b in zip(cp.atoms, plan.pattern.atoms, strict=True):
        assert a.attrs == b.attrs
    # nothing but the split equalities can be residual here
    assert set(plan.residual) <= {p.id for p in added}


# -- over real pattern texts (the compiler and parser)

import glob  # noqa: E402
import os  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CARD_TESTING = (PATTERNS / "card_testing.pattern").read_text()

MORE_TEXTS = """
PATTERN and3 AND(A a, B b, C c) PARTITION BY k WITHIN 10 s
PATTERN cross SEQ(A a, B b, C c)
PATTERN where_cycle SEQ(A a, B b, C c) WHERE a.v < c.v AND b.w > a.w PARTITION BY k
PATTERN eq_cycle AND(A a, B b, C c) WHERE a.x = b.x AND b.y = c.y AND c.z = a.z
PATTERN three_way SEQ(A a, B b, C c) WHERE a.v + b.v < c.v WITHIN 5
PATTERN single SEQ(A a) WHERE a.v > 1
PATTERN unary SEQ(A a, B b) WHERE a.k = b.k AND a.k < b.k + 1 AND a.v + b.v > a.k
"""


def _compile(text):
    from cep.lang.compiler import compile_text

    return compile_text(text)


def test_card_testing_plan():
    (cp,) = _compile(CARD_TESTING)
    plan = plan_pattern(cp)
    assert validate_plan(plan) == []
    assert [cp.predicates[p].origin for p in plan.residual] == ["span"]
    on_edges = {cp.predicates[pid].origin for n in plan.nodes for pid in n.preds}
    assert on_edges == {"seq", "within"}
    assert plan.query_class == "cyclic with residuals"
    # root -> {card} -> {card, big.ts}, guard path to big's leaf
    root = plan.nodes[plan.root]
    (part,) = root.children
    assert plan.nodes[part].vars == cp.partition_vars
    n = part
    while plan.nodes[n].children:
        n = plan.nodes[n].children[0]
    assert cp.atoms[plan.nodes[n].atom].alias == "big"
    for node in plan.nodes:
        if node.preds:
            assert enumeration_index(plan, node.id).kind == "band"


def test_more_pattern_texts():
    cps = {cp.name: cp for cp in _compile(MORE_TEXTS)}
    plans = {name: plan_pattern(cp) for name, cp in cps.items()}
    for plan in plans.values():
        assert validate_plan(plan) == []
    assert {cps["and3"].predicates[p].origin for p in plans["and3"].residual} == {"span"}
    assert plans["cross"].residual == ()
    assert any("one group" in n for n in plans["cross"].notes)
    wc = plans["where_cycle"]
    assert all(cps["where_cycle"].predicates[p].origin == "where" for p in wc.residual)
    assert plans["eq_cycle"].pattern is not cps["eq_cycle"]
    tw = plans["three_way"]
    assert any(len(tw.pattern.predicates[p].vars) == 3 for p in tw.residual)
    assert plans["single"].query_class == "q-hierarchical"
    # a predicate over one shared variable is a filter (FLT) on an edge; N is every node
    un = plans["unary"]
    assert un.residual == () and all(n.in_connex for n in un.nodes)
    (flt,) = [n for n in un.nodes if 0 in n.preds]
    assert un.pattern.predicates[0].vars == ("a.k",)


@pytest.mark.parametrize(
    "path", sorted(glob.glob(os.path.join(REPO, "patterns", "*.pattern"))), ids=os.path.basename
)
def test_shipped_patterns_plan_validly(path):
    with open(path) as f:
        cps = _compile(f.read())
    for cp in cps:
        plan = plan_pattern(cp)
        assert validate_plan(plan) == []
        # a flat SEQ's order is never residual (a nested AND inside a SEQ makes the order
        # inequalities a cycle, l < p < w and l < e < w: one of them may be residual)
        if all(j == i + 1 for i, j in cp.order):
            assert all(cp.predicates[p].origin != "seq" for p in plan.residual)


def test_cyclic_plans_run_correctly_on_the_engine():
    """Residual filters and split equalities, end to end: engine matches == brute force."""
    import itertools
    import random

    cps = _compile(
        """
        PATTERN eq_cycle AND(A a, B b, C c) WHERE a.x = b.x AND b.y = c.y AND c.z = a.z
        PATTERN where_cycle SEQ(A a, B b, C c) WHERE a.x < c.x AND b.y > a.y PARTITION BY z
        PATTERN span SEQ(A a, B b, C c) PARTITION BY z WITHIN 3
        PATTERN and3 AND(A a, B b, C c) WITHIN 2
        """
    )
    from cep.event import Event
    from cep.runtime import engine

    def brute(name, a, b, c):
        f = lambda e, k: e.fields[k]  # noqa: E731
        if name == "eq_cycle":
            return f(a, "x") == f(b, "x") and f(b, "y") == f(c, "y") and f(c, "z") == f(a, "z")
        same_z = f(a, "z") == f(b, "z") == f(c, "z")
        if name == "where_cycle":
            return a.ts < b.ts < c.ts and f(a, "x") < f(c, "x") and f(b, "y") > f(a, "y") and same_z
        if name == "span":
            return a.ts < b.ts < c.ts and c.ts - a.ts <= 3 and same_z
        return max(a.ts, b.ts, c.ts) - min(a.ts, b.ts, c.ts) <= 2

    rnd = random.Random(7)
    for _ in range(8):
        evs = []
        for i in range(20):
            t = rnd.choice("ABC")
            fields = {"type": t, "ts": i, "x": rnd.randint(0, 2), "y": rnd.randint(0, 2), "z": rnd.randint(0, 1)}
            evs.append(Event(t, i, fields, str(i)))
        eng = engine.Engine(cps)
        got = {cp.name: 0 for cp in cps}
        for e in evs:
            for o in eng.push(e):
                got[o.pattern] += 1 if o.op == "+" else -1
        by = {t: [e for e in evs if e.type == t] for t in "ABC"}
        expected = {
            cp.name: sum(1 for a, b, c in itertools.product(by["A"], by["B"], by["C"]) if brute(cp.name, a, b, c))
            for cp in cps
        }
        assert got == expected


def _and_within(k: int, nested: str = "") -> str:
    elements = [f"T{i} x{i}" for i in range(k)]
    if nested:
        elements[:2] = [f"{nested}({elements[0]}, {elements[1]})"]
    return f"PATTERN wide\n  AND({', '.join(elements)})\n  PARTITION BY g\n  WITHIN 10\n"


@pytest.mark.parametrize("k", [3, 5, 32])
def test_and_within_is_bands_to_the_last_element_in_the_tree_and_one_span_residual(k):
    (cp,) = _compile(_and_within(k))
    bands = [p for p in cp.predicates if p.origin == "within"]
    spans = [p for p in cp.predicates if p.origin == "span"]
    assert len(bands) == 2 * (k - 1) and len(cp.predicates) == 2 * (k - 1) + 1  # not k(k-1)
    (span,) = spans
    assert set(span.vars) == {f"x{i}.ts" for i in range(k)}
    assert all(f"x{k - 1}.ts" in p.vars for p in bands)  # a star around the last element
    assert span.text.startswith("max - min of (x0.ts, x1.ts")
    plan = plan_pattern(cp)
    assert validate_plan(plan) == []
    assert list(plan.residual) == [span.id]
    on_edges = {pid for n in plan.nodes for pid in n.preds}
    assert on_edges == {p.id for p in bands}
    for n in plan.nodes:
        if n.preds:
            assert enumeration_index(plan, n.id).kind == "band"


def test_and_within_span_value_is_the_pairwise_bands():
    # max - min <= w is |x - y| <= w for every pair, with the binary comparisons' unknowns
    (cp,) = _compile(_and_within(3))
    span = next(p for p in cp.predicates if p.origin == "span")
    assert span.fn(0, 10, 5) and span.fn(10, 0, 10) and span.fn(1.5, 1.5, 11.5)
    assert not span.fn(0, 5, 10.5) and not span.fn(11, 0, 5)
    assert not span.fn(0, float("nan"), 5) and not span.fn(0, "5", 5) and not span.fn(0, True, 5)
    assert not span.fn(10**400, 0.5, 10**400)  # an overflowing difference is not within


def test_nested_and_within_is_one_span_from_starts_to_ends():
    (cp,) = _compile(_and_within(4, nested="SEQ"))
    (span,) = [p for p in cp.predicates if p.origin == "span"]
    assert span.text == "max(x1.ts, x2.ts, x3.ts) - min(x0.ts, x2.ts, x3.ts) <= 10"
    # every element keeps a band (its order edge, or an implied one to its neighbour)
    banded = {v for p in cp.predicates if p.origin == "within" for v in p.vars}
    assert banded == {f"x{i}.ts" for i in range(4)}
    plan = plan_pattern(cp)
    assert validate_plan(plan) == [] and list(plan.residual) == [span.id]
