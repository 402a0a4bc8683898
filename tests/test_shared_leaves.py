"""Leaves that store the same tuples share one storage (``cep.plan.physical.share_leaf_storage``).

Why its own tests: the decision changes what an update path of an earlier twin reads (the
storage is changed only by the later twin's update), which is exact only because the engine
changes both twins of an event one after the other, earlier first: on insert, retraction,
expiry of one event and batched expiry of many.  Random patterns with twins (same type, same
own filter, neighbours), over streams with disorder, duplicates, retractions, late records and
windows, against the brute-force reference; with a save and reload of the state in the middle;
split over workers.
"""

from __future__ import annotations

from collections import Counter

from cephelp import PATTERNS
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from strategies import Case, twin_cases
from test_engine_properties import PROFILE, check_case
from test_workers import _engine_run

from cep.commands.explain import plan_to_text
from cep.lang.compiler import compile_text
from cep.plan.physical import physical_plan
from cep.plan.planner import plan_pattern
from cep.runtime.engine import Engine


def _shared(text: str, time_unit: str = "s") -> int:
    """How many leaf indexes of these patterns read a twin's storage."""
    n = 0
    for cp in compile_text(text, time_unit=time_unit):
        for pn in physical_plan(plan_pattern(cp)).nodes:
            n += sum(1 for u in (pn.P, pn.S) if u is not None and u.shares is not None)
    return n


def test_card_testing_stores_each_small_purchase_once():
    cp = compile_text((PATTERNS / "card_testing.pattern").read_text())[0]
    pp = physical_plan(plan_pattern(cp))
    leaf = {cp.atoms[n.atom].alias: n for n in pp.nodes if n.atom is not None}
    s1, s2 = leaf["s1"], leaf["s2"]
    assert s1.P.shares == (s2.id, "S") and s1.stores == () and s2.stores == ("S",)
    assert leaf["big"].P.shares is None and leaf["big"].S.shares is None
    # not shared: without the decision, and for leaves that differ in their filter
    assert all(u is None or u.shares is None for n in physical_plan(plan_pattern(cp), share_leaves=False).nodes
               for u in (n.P, n.S))
    other = "PATTERN q SEQ(Txn s1, Txn s2) WHERE s1.amount < 100 AND s2.amount < 99 PARTITION BY card WITHIN 5\n"
    assert _shared(other) == 0
    # the runtime builds one storage for both, updated by s2's path only
    from cep.runtime.iedyn import PatternRuntime
    rt = PatternRuntime(pp)
    n1, n2 = rt.nodes[s1.id], rt.nodes[s2.id]
    assert n1.P.groups is n2.S.groups and n1.stores == () and n2.stores == (n2.S,)


def test_explain_says_which_storage_is_shared():
    cp = compile_text((PATTERNS / "card_testing.pattern").read_text())[0]
    text = plan_to_text(plan_pattern(cp))
    physical = text[text.index("physical plan"):]
    assert "(shares storage with n" in physical


_LONG = PROFILE == "long"
_SETTINGS = settings(settings.get_profile(PROFILE), max_examples=3000 if _LONG else 150,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_FEWER = settings(_SETTINGS, max_examples=1000 if _LONG else 50)


# found by the test: the expiry of several events at once (one batch per atom) must change the
# shared storage for the whole batch before the later twin's path reads the earlier twin's
_A = {"type": "A", "ts": 0, "x": 0, "y": 0, "s": "u", "f": True}


@_SETTINGS
@given(twin_cases())
@example(Case("PATTERN t0\n  SEQ(A a, A b, A c)\n  WHERE a.x < 2 AND b.x < 2 AND c.x < 2\n  PARTITION BY s\n"
              "  WITHIN 2\n", [_A] * 5 + [{**_A, "ts": 1}] + [_A] * 9, 2))
def test_twins_agree_with_the_reference(case: Case) -> None:
    event(f"shared indexes: {min(_shared(case.text, case.time_unit), 2)}")
    check_case(case)


@_FEWER
@given(twin_cases(), st.integers(2, 25))
def test_twins_agree_with_the_reference_across_a_reload(case: Case, at: int) -> None:
    check_case(case, restore_at=at)


@_FEWER
@given(twin_cases(), st.integers(2, 3))
def test_twins_split_over_workers_emit_the_whole_engines_matches(case: Case, workers: int) -> None:
    whole = _engine_run(case, None)
    parts = [_engine_run(case, (w, workers)) for w in range(workers)]
    assert sum((p[0] for p in parts), Counter()) == whole[0]
    for p in parts:
        assert p[1:] == whole[1:]


def test_a_state_with_twins_pickles_and_reloads():
    import pickle
    text = (PATTERNS / "card_testing.pattern").read_text()
    from cep.event import Event
    eng = Engine(compile_text(text))
    outs = []
    for i, (ts, amount) in enumerate([(0, 5), (10, 7), (20, 9), (30, 500), (5000, 3), (5001, 4), (5002, 900)]):
        outs += eng.push(Event("Txn", ts, {"card": "c", "amount": amount}, str(i)))
    assert len(outs) == 3 + 1
    again = Engine.loads(eng.dumps(), compile_text(text))
    assert again.match_count("card_testing") == eng.match_count("card_testing")
    copy = pickle.loads(pickle.dumps(eng.dumps()))
    assert Engine.loads(copy, compile_text(text)).match_count("card_testing") == eng.match_count("card_testing")


def test_filters_that_differ_only_in_a_literals_type_are_not_twins():
    base = "PATTERN q SEQ(A a, A b) WHERE a.f = {} AND b.f = {} PARTITION BY s WITHIN 5\n"
    assert _shared(base.format("true", "true")) == 1
    assert _shared(base.format("true", "1")) == 0
    assert _shared(base.format("1", "1.0")) == 0


@_FEWER
@given(twin_cases())
def test_twins_agree_with_the_reference_when_every_batch_merges(case: Case) -> None:
    """``MERGE_MIN`` 1 (``test_iedyn_merge``): every batch of two or more changes takes the sort-merge,
    which reads the twin's storage once per group after the batch's updates."""
    from unittest import mock

    from cep.runtime import iedyn
    with mock.patch.object(iedyn, "MERGE_MIN", 1):
        check_case(case)
