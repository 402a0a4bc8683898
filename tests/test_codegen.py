"""Generated code is readable where it matters: tracebacks, ``cep explain --generated``;
the runtime executes the physical plan and returns what it produces (a ``Delta``)."""

from __future__ import annotations

import io
import json
import linecache
import traceback

import pytest
from test_engine import CARD, txn

from cep import codegen
from cep.commands.explain import plan_to_text, run_explain
from cep.lang.compiler import compile_text
from cep.plan.physical import physical_plan
from cep.plan.planner import plan_pattern
from cep.runtime.engine import Engine
from cep.runtime.iedyn import Delta, PatternRuntime


def _runtime(share_leaves: bool = True) -> PatternRuntime:
    (cp,) = compile_text(CARD)
    return PatternRuntime(physical_plan(plan_pattern(cp), share_leaves=share_leaves))


def test_a_traceback_names_the_generated_function_and_prints_its_line():
    rt = _runtime()
    leaf = rt._leaf_of_atom[1]  # s2's leaf (big's path is wrapped: it gates n3, cep.plan.physical.gate_on_sibling)
    with pytest.raises(IndexError) as info:
        rt.apply(leaf, (), 1)  # a tuple too short for the leaf: fails inside the update path
    text = "".join(traceback.format_exception(info.value))
    assert f'File "<cep card_testing: propagate leaf {leaf}>", line ' in text
    # the failing generated line is printed under it: the leaf's index update (inlined), reading its key
    # (the deepest generated frame: a first call passes through the stub's frame, on the ``def`` line)
    frame = [f for f in traceback.extract_tb(info.tb) if f.filename.startswith("<cep card_testing")][-1]
    assert frame.line and frame.line.startswith(f"k = t{leaf}[")
    assert frame.line in text
    with pytest.raises(IndexError) as info:
        rt.apply(leaf, (), 1)  # compiled now: the generated function's frame is the only one
    frames = [f for f in traceback.extract_tb(info.tb) if f.filename.startswith("<cep card_testing")]
    assert len(frames) == 1 and frames[0].line.startswith(f"k = t{leaf}[")


def test_define_registers_the_source_and_keeps_different_sources_apart():
    f = codegen.define("test: twice", "def f(x):\n    return x + 1\n", "f")
    g = codegen.define("test: twice", "def f(x):\n    return x + 2\n", "f")
    assert (f(1), g(1)) == (2, 3)
    assert f.__code__.co_filename == "<cep test: twice>"
    assert g.__code__.co_filename.startswith("<cep test: twice #")
    assert linecache.getline(g.__code__.co_filename, 2).strip() == "return x + 2"
    mark = codegen.mark()
    h = codegen.define("test: after the mark", "def h():\n    return 7\n", "h")
    assert codegen.defined_since(mark) == [(h.__code__.co_filename, "def h():\n    return 7\n")]


def test_the_same_source_defined_again_keeps_its_name_its_lines_and_its_place_in_the_listing():
    src = "def f(x):\n    return x * 3\n"
    first = codegen.define("test: again", src, "f")
    mark = codegen.mark()
    linecache.clearcache()  # (what a user's code may do between two engines)
    again = codegen.define("test: again", src, "f")  # an engine per key group: the same sources again
    assert again is not first and (first(2), again(2)) == (6, 6)
    assert again.__code__.co_filename == first.__code__.co_filename == "<cep test: again>"
    assert linecache.getline("<cep test: again>", 2).strip() == "return x * 3"
    assert codegen.defined_since(mark) == [("<cep test: again>", src)]
    with pytest.raises(TypeError) as info:
        again(None)  # its traceback still prints the generated line
    assert "return x * 3" in "".join(traceback.format_exception(info.value))


def test_a_generated_function_is_compiled_at_its_first_call(monkeypatch):
    compiled: list[str] = []
    real_compile = codegen._compile_once.__wrapped__
    monkeypatch.setattr(codegen, "_compile_once", lambda src: compiled.append(src) or real_compile(src))
    env = {"K": 10}
    src = "def f(x, *rest, y=K, **kw):\n    return (x, rest, y, kw, f is F[0])\n"
    f = codegen.define("test: lazy", src, "f", env)
    assert compiled == [] and env["f"] is f  # defined (named, listed) but not compiled
    assert linecache.getline("<cep test: lazy>", 1).startswith("def f(x")
    env["K"], env["F"] = 11, [f]  # defaults are evaluated at the first call, like the body's names
    assert f(1, 2, z=3) == (1, (2,), 11, {"z": 3}, True)
    assert compiled == [src] and env["f"] is f  # the same object runs the real code from now on
    assert f.__code__.co_filename == "<cep test: lazy>" and f.__code__.co_varnames[:4] == ("x", "y", "rest", "kw")
    assert f(4, y=5) == (4, (), 5, {}, True) and compiled == [src]
    g = codegen.define("test: lazy code", "def g(a, b):\n    s = a + b\n    return s\n", "g")
    assert codegen.code_of(g).co_varnames == ("a", "b", "s") and g(1, 2) == 3
    # a source with more than the one def runs at once, as before
    h = codegen.define("test: eager", "X = []\ndef h():\n    return X\nX.append(1)\n", "h")
    assert h.__code__.co_varnames == () and h() == [1]


def test_explain_generated_prints_every_generated_function():
    out, err = io.StringIO(), io.StringIO()
    assert run_explain(["patterns/card_testing.pattern"], "text", out, err, generated=True) == 0
    text = out.getvalue()
    assert "physical plan" in text and "generated functions (" in text
    for name in ("propagate leaf", "enumerate", "match builder", "partition key of a match",
                 "filter of s1", "predicate #0", "emit card", "leaf tuple of big", "events of a match"):
        assert f"# <cep card_testing: {name}" in text, name
    assert "def prop(t" in text and "def enum(roots, D):" in text
    out = io.StringIO()
    assert run_explain(["patterns/card_testing.pattern"], "json", out, err, generated=True) == 0
    doc = json.loads(out.getvalue())
    assert any(g["name"] == "<cep card_testing: match builder>" for g in doc["generated"])
    assert run_explain(["patterns/card_testing.pattern"], "dot", io.StringIO(), err, generated=True) == 1


def test_explain_prints_the_physical_plan_that_runs():
    (cp,) = compile_text(CARD)
    plan = plan_pattern(cp)
    pp = physical_plan(plan)
    text = plan_to_text(plan)
    # the logical tree is still there, then the physical one with the merged nodes
    assert "tree (n* = in N; children[0] is the guard):" in text
    physical = text[text.index("physical plan"):]
    assert "pass-through nodes merged: {s1.card, s1.ts}" in physical
    assert len(pp.nodes) < len(plan.nodes)
    # a leaf's P is read from its S storage; a shared layout is stored once
    assert "(reads S's storage)" in physical and "(reads P's storage)" in physical
    rt = PatternRuntime(pp)
    for pn, n in zip(pp.nodes, rt.nodes, strict=True):
        assert len(n.stores) == len(pn.stores)
        if pn.P is not None and pn.P.storage == "S":
            assert n.P.groups is n.S.groups and n.stores == (n.S,)
        if pn.S is not None and pn.S.storage == "P":
            # (a P sharing a twin leaf's storage is not stored here: ``share_leaf_storage``)
            assert n.S.groups is n.P.groups and n.stores == (() if pn.P.shares else (n.P,))


def test_insert_returns_a_delta_that_enumerates_its_matches():
    # each event into one atom only: s1 and s2 keep their own storages (twin leaves share one
    # only where every event enters both, as in the engine: ``share_leaf_storage``)
    rt = _runtime(share_leaves=False)
    events = [txn(0, 0, "c", 10), txn(1, 5, "c", 20), txn(2, 9, "c", 900)]
    deltas = [rt.insert(i, e, i) for i, e in enumerate(events)]
    assert all(isinstance(d, Delta) for d in deltas)
    assert [list(d.matches()) for d in deltas[:2]] == [[], []]
    (match,) = list(deltas[2].matches())
    assert [slot[2] for slot in match] == [0, 1, 2]  # the serials of s1, s2, big
    assert rt.insert(0, txn(3, 10, None, 10), 3) is None  # null partition key: not inserted
    undone = rt.delete(0, deltas[0].tuple)
    assert [[s[2] for s in m] for m in undone.matches()] == [[0, 1, 2]]
    assert rt.count() == 0


def test_the_engine_keeps_its_bookkeeping_off_the_users_records():
    eng = Engine(compile_text(CARD), lateness=100)
    e = txn(1, 0, "c1", 10)
    assert not hasattr(e, "_mask")
    # the same record object pushed twice is two equal events
    out = [o for ev in (e, e, txn(3, 5, "c1", 10), txn(4, 9, "c1", 900)) for o in eng.push(ev)]
    assert len(out) == 2 and len({o.id for o in out}) == 1  # same positions: same id
    assert eng.retained_events == 4
    out = eng.push(txn(1, 0, "c1", 10, "-"))  # retracts one of the two
    assert len(out) == 1 and out[0].op == "-" and eng.retained_events == 3
