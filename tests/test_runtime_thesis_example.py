"""The worked example of thesis section 4.3 (Figs. 4.6-4.7) on the runtime.

Query pi_{y,z,w,u}(r(x,y) |x| s(y,z,w) |x| t(u,v) | x < z and w < u) over the
tree T_2 of Fig. 4.2: root {y,w} with children {y,z,w} (guard) and {u} (edge
w < u); {y,z,w} has children s (guard) and r (edge x < z); t sits under {u}.
The database is one consistent with the figure's narrative: the s-insert of
<y:2,z:3,w:6> x2 gives delta {y,z,w} = [t1 -> 4] and an empty root delta; the
t-insert of <u:4,v:9> x3 gives delta root = [<y:1,w:3> -> 36], because the
{y,z,w} tuple <1,3,3> has multiplicity 12.
"""

from cep.lang.gcq import Atom, CompiledPattern, Linear, Predicate, Variable
from cep.plan.model import Plan, PlanNode
from cep.plan.physical import physical_plan
from cep.runtime.iedyn import PatternRuntime


def _num(v):
    return type(v) in (int, float)


def build():
    preds = [
        Predicate(0, ("x", "z"), "x < z", "where", lambda x, z: _num(x) and _num(z) and x < z,
                  None, Linear((("x", 1), ("z", -1)), 0, "<")),
        Predicate(1, ("w", "u"), "w < u", "where", lambda w, u: _num(w) and _num(u) and w < u,
                  None, Linear((("w", 1), ("u", -1)), 0, "<")),
    ]
    atoms = [
        Atom("r", "R", 0, ("x", "y"), ("x", "y")),
        Atom("s", "S", 1, ("y", "z", "w"), ("y", "z", "w")),
        Atom("t", "T", 2, ("u", "v"), ("u", "v")),
    ]
    variables = {v: Variable(v, (("?", v),)) for v in "xyzwuv"}
    cp = CompiledPattern("thesis", "AND", atoms, variables, preds, None, (), None)
    nodes = [
        PlanNode(0, ("y", "w"), None, (1, 2), None),
        PlanNode(1, ("y", "z", "w"), None, (3, 4), 0),
        PlanNode(2, ("u",), None, (5,), 0, (1,)),
        PlanNode(3, ("y", "z", "w"), 1, (), 1),  # s, the guard
        PlanNode(4, ("x", "y"), 0, (), 1, (0,)),  # r, edge x < z
        PlanNode(5, ("u", "v"), 2, (), 2),  # t
    ]
    return PatternRuntime(physical_plan(Plan(cp, nodes, 0), merge_pass_through=False, keep_all_gmrs=True))


def test_t_reduct_after_each_update():
    rt = build()
    # the database: r = {<2,2>: 2, <1,1>: 4}, s = {<1,3,3>: 3}, t = {<5,1>: 1}
    rt.apply(4, (2, 2), 2)
    rt.apply(4, (1, 1), 4)
    rt.apply(3, (1, 3, 3), 3)
    assert rt.rho[1] == {(1, 3, 3): 12}
    assert rt.rho[0] == {}
    rt.apply(5, (5, 1), 1)
    assert rt.rho[2] == {(5,): 1}
    assert rt.rho[0] == {(1, 3): 12}

    # update 1: <y:2, z:3, w:6> x2 into s
    path = rt.apply(3, (2, 3, 6), 2).path()
    assert 0 not in path  # the root delta is empty (6 < 5 fails)
    assert rt.rho[1] == {(1, 3, 3): 12, (2, 3, 6): 4}  # delta {y,z,w} = [t1 -> 4]
    assert rt.rho[0] == {(1, 3): 12}

    # update 2: <u:4, v:9> x3 into t
    path = rt.apply(5, (4, 9), 3).path()
    assert path[2] == {(4,): 3}
    assert path[0] == {(1, 3): 36}
    assert rt.rho[0] == {(1, 3): 48}
    assert rt.rho[2] == {(5,): 1, (4,): 3}

    # the indexes: S of r grouped on y, sorted on x; P of {u} sorted on u
    assert set(rt.nodes[4].S.groups) == {1, 2}
    assert rt.nodes[2].P.spec.kind == "sorted"
    assert rt.plan.nodes[1].enumeration.kind == "hash"  # the plan's P of {y,z,w}: hash on its parent's variables,
    # S sorts on z, a data value (not event times): P keeps its own hash storage (served from S's storage
    # by an equality seek only for time-sorted S, cep.plan.physical)
    assert rt.plan.nodes[1].P.storage == "own" and rt.plan.nodes[1].P.spec.kind == "hash"
    assert rt.nodes[1].P.groups is not rt.nodes[1].S.groups

    # enumeration: every (y,z,w,u,...) combination with x < z and w < u
    got = sorted((s[0], s[1], s[2][0]) for s in rt.all_matches())
    # r tuples joining <1,3,3>: <1,1>; t tuples above w=3: u=4 and u=5
    assert got == [((1, 1), (1, 3, 3), 4), ((1, 1), (1, 3, 3), 5)]
    assert rt.count() == 48  # multiplicities: 4 * 3 * (1 + 3)


def test_deletions_restore_the_reduct():
    rt = build()
    rt.apply(4, (1, 1), 4)
    rt.apply(3, (1, 3, 3), 3)
    rt.apply(5, (4, 9), 3)
    assert rt.rho[0] == {(1, 3): 36}
    rt.apply(5, (4, 9), -3)
    assert rt.rho[0] == {} and rt.rho[2] == {}
    rt.apply(4, (1, 1), -4)
    assert rt.rho[1] == {}
    rt.apply(3, (1, 3, 3), -3)
    assert all(not r for r in rt.rho)
    # nothing is left in any index either
    for n in rt.nodes:
        for idx in (n.P, n.S):
            if idx is not None:
                assert not idx.groups
