"""``cep explain``: text, JSON (documented schema, docs/explain.md) and DOT output."""

from __future__ import annotations

import glob
import io
import json
import os

import pytest
from test_planner import seq_within

from cep.commands.explain import plan_to_dict, plan_to_text, plans_to_dot, run_explain
from cep.lang.compiler import compile_text
from cep.plan.model import enumeration_index
from cep.plan.planner import plan_pattern

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATTERN_KEYS = {
    "name", "file", "op", "within", "time_unit", "atoms", "predicates", "tree",
    "residual", "query_class", "partition_key", "notes", "physical", "strategy", "gaps", "decision",
}
NODE_KEYS = {
    "id", "vars", "atom", "parent", "children", "guard", "in_connex", "edge_predicates",
    "enumeration_index", "sibling_index",
}
INDEX_KEYS = {"kind", "key_vars", "sort_var", "bounds", "filter_predicates"}
PHYSICAL_NODE_KEYS = {
    "id", "vars", "atom", "parent", "children", "edge_predicates", "keeps_gmr", "gated_by", "stores",
    "enumeration_index", "sibling_index",
}


def test_text_names_tree_residual_class_partition():
    plan = plan_pattern(seq_within(3))
    text = plan_to_text(plan)
    assert "pattern seq (SEQ)" in text
    assert "x2.ts - x0.ts <= 3600  [span]  -> residual" in text
    assert "residual filters: #4 x2.ts - x0.ts <= 3600" in text
    assert "class: cyclic with residuals" in text
    assert "partition key: x0.card" in text
    assert "P: band, key x0.card, sorted on x1.ts" in text
    assert "leaf Txn x2" in text
    text = plan_to_text(plan_pattern(seq_within(2, partition=False)))
    assert "partition key: none: runs as one group" in text
    assert "residual filters: none" in text
    assert "class: free-connex" in text


def test_json_schema_is_stable():
    plan = plan_pattern(seq_within(3))
    doc = plan_to_dict(plan)
    json.dumps(doc)  # serialisable
    assert set(doc) == PATTERN_KEYS
    assert doc["partition_key"] == ["x0.card"]
    assert doc["query_class"]["name"] == "cyclic with residuals"
    assert set(doc["query_class"]) == {"name", "update", "delay", "detail", "max_predicates_per_node"}
    nodes = doc["tree"]["nodes"]
    assert [n["id"] for n in nodes] == list(range(len(nodes)))
    for n in nodes:
        assert set(n) == NODE_KEYS
        for key in ("enumeration_index", "sibling_index"):
            if n[key] is not None:
                assert set(n[key]) == INDEX_KEYS
        if n["children"]:
            assert n["guard"] == n["children"][0]
    by_id = {p["id"]: p for p in doc["predicates"]}
    assert doc["residual"] == [4] and by_id[4]["placement"] == "residual" and by_id[4]["edge"] is None
    for p in doc["predicates"]:
        if p["placement"] == "edge":
            assert p["id"] in nodes[p["edge"]]["edge_predicates"]
    # the index kinds are the runtime's (cep.plan.model), not recomputed here
    for n in plan.nodes:
        if n.parent is not None:
            assert nodes[n.id]["enumeration_index"]["kind"] == enumeration_index(plan, n.id).kind
    # the physical plan: the tree that runs, with the storage each index reads
    phys = doc["physical"]
    assert set(phys) == {"root", "merged", "nodes"} and phys["merged"]
    assert len(phys["nodes"]) == len(nodes) - len(phys["merged"])
    for n in phys["nodes"]:
        assert set(n) == PHYSICAL_NODE_KEYS
        for key in ("enumeration_index", "sibling_index"):
            if n[key] is not None:
                assert set(n[key]) == INDEX_KEYS | {"storage", "equal_rest", "shares"}
                assert n[key]["storage"] in ("own", "P", "S")


def test_dot_is_a_digraph_with_every_node_and_edge():
    plan = plan_pattern(seq_within(3))
    dot = plans_to_dot([plan])
    assert dot.startswith("digraph cep_plans {") and dot.rstrip().endswith("}")
    for n in plan.nodes:
        assert f"p0n{n.id} [" in dot
        if n.parent is not None:
            assert f"p0n{n.parent} -> p0n{n.id}" in dot
    assert "residual" in dot
    assert dot.count("{") == dot.count("}")


def test_unknown_format_is_an_error():
    out, err = io.StringIO(), io.StringIO()
    assert run_explain([], "yaml", out, err) == 1
    assert "unknown format" in err.getvalue()


# -- over real pattern files (needs the front end)

PATTERN_FILES = sorted(glob.glob(os.path.join(REPO, "patterns", "*.pattern")))


def _front_end():
    import cep.lang.parser  # noqa: F401 - the front end must import: a failure fails, never skips


@pytest.mark.parametrize("fmt", ["text", "json", "dot"])
def test_explain_shipped_patterns(fmt):
    _front_end()
    assert PATTERN_FILES
    out, err = io.StringIO(), io.StringIO()
    assert run_explain(PATTERN_FILES, fmt, out, err) == 0, err.getvalue()
    if fmt == "json":
        doc = json.loads(out.getvalue())
        assert doc["version"] == 1
        assert len(doc["patterns"]) >= len(PATTERN_FILES)
        for p in doc["patterns"]:
            assert set(p) == PATTERN_KEYS
    else:
        assert out.getvalue()


def test_explain_bad_file_exits_2(tmp_path):
    _front_end()
    bad = tmp_path / "bad.pattern"
    bad.write_text("PATTERN p\n  SEQ(A a, B b\n")
    out, err = io.StringIO(), io.StringIO()
    assert run_explain([str(bad)], "text", out, err) == 2
    assert "bad.pattern:" in err.getvalue()


GAP_KEYS = {"element", "origin", "kind", "range", "index", "key_from", "check", "residual", "cost"}


def test_gap_elements_say_which_check_they_get():
    (cp,) = compile_text(
        "PATTERN p SEQ(Order o, NOT Shipment s, Pay y, NOT Refund r)\n"
        "  WHERE s.order_id = o.order_id AND r.amount > y.amount AND r.order_id = o.order_id\n"
        "  PARTITION BY shop WITHIN 1 d\n"
    )
    doc = plan_to_dict(plan_pattern(cp))
    assert doc["strategy"] == "skip_till_any_match"
    ship, refund = doc["gaps"]
    assert set(ship) == GAP_KEYS and set(refund) == GAP_KEYS
    assert (ship["kind"], ship["check"], ship["cost"]) == ("middle", "count", "O(log n)")
    assert ship["index"]["key"] == ["shop", "order_id"] and ship["key_from"] == ["o.shop", "o.order_id"]
    assert ship["range"] == "(o.ts, y.ts)"
    assert (refund["kind"], refund["check"], refund["residual"]) == ("trailing", "scan", "r.amount > y.amount")
    assert refund["range"] == "(y.ts, o.ts + 86400]"
    text = plan_to_text(plan_pattern(cp))
    assert "check: range count (is there one in the range?)  cost O(log n)" in text
    assert "check: range scan of the key's candidates for r.amount > y.amount" in text


def test_strict_contiguity_gaps_share_one_index():
    (cp,) = compile_text("PATTERN p SEQ(R a, R b, R c) PARTITION BY sensor USING strict_contiguity\n")
    doc = plan_to_dict(plan_pattern(cp))
    assert [g["index"]["id"] for g in doc["gaps"]] == [0, 0]
    assert [g["origin"] for g in doc["gaps"]] == ["contiguity", "contiguity"]


def test_gap_patterns_name_their_deciding_event():
    trailing, nested, plain = compile_text(
        "PATTERN t SEQ(Order o, NOT Shipment s) WHERE s.order_id = o.order_id WITHIN 2 d\n"
        "PATTERN n SEQ(A a, NOT X x, AND(B b, C c), D d) WITHIN 10 s\n"
        "PATTERN p SEQ(A a, B b) WITHIN 10 s\n"
    )
    doc = plan_to_dict(plan_pattern(trailing))
    assert doc["decision"] == {"time": "o.ts + 172800", "when": "the watermark is past it",
                               "deciding_atoms": ["o"], "candidates": [["o"]]}
    assert "decided at o.ts + 172800, once the watermark is past it; deciding event: o" in plan_to_text(
        plan_pattern(trailing))
    # the gap ends at the earlier of b and c: either can decide, whichever is earlier
    doc = plan_to_dict(plan_pattern(nested))
    assert doc["decision"] == {"time": "min(b.ts, c.ts)", "when": "the watermark reaches it",
                               "deciding_atoms": ["b", "c"], "candidates": [["b", "c"]]}
    assert ("decided at min(b.ts, c.ts), once the watermark reaches it; deciding event: one of b, c"
            in plan_to_text(plan_pattern(nested)))
    assert plan_to_dict(plan_pattern(plain))["decision"] is None
    assert "decided at" not in plan_to_text(plan_pattern(plain))


def test_the_runtime_decides_as_explain_says():
    """The engine's deciding event (``GapChecks.decider``) is one explain names, and its time
    (plus the window of a trailing gap) is the match's decision time."""
    import random

    from cep.event import Event
    from cep.plan.gaps import plan_decision
    from cep.runtime.engine import Engine

    cps = compile_text(
        "PATTERN n SEQ(A a, NOT X x, AND(B b, C c), NOT Y y, D d) WITHIN 10 s\n"
        "PATTERN m SEQ(A a, NOT X x, AND(B b, C c), NOT Y y, AND(D d, E e)) WITHIN 10 s\n"
        "PATTERN t SEQ(A a, AND(B b, C c), NOT Y y) WITHIN 10 s\n"
    )
    engine = Engine(cps, 0)
    rng = random.Random(7)
    for cp, checks in zip(cps, engine.checks, strict=True):
        assert checks is not None
        decision = plan_decision(cp, list(engine.runtimes[cps.index(cp)].plan.gaps))
        assert checks.deciders == decision.deciders and checks.trailing == decision.trailing
        tried = 0
        while tried < 200:
            ts = [rng.randint(0, 6) for _ in cp.atoms]
            if any(ts[i] >= ts[j] for i, j in cp.order):
                continue  # not a match: the SEQ order does not hold
            tried += 1
            match = [Event(a.type, t, {}, "") for a, t in zip(cp.atoms, ts, strict=True)]
            atom = checks.decider(match)
            assert atom in decision.deciders
            assert checks.decision_time(match) == (match[atom].ts + decision.offset, decision.trailing)
