"""A node's groups kept only while its sibling leaf has one of the same key (``cep.plan.physical.gate_on_sibling``).

Why its own tests: the decision makes the runtime skip every change of the gated node's group of a
key while the sibling leaf has no group of that key, build the group from the children's storages
when the sibling's group appears, and drop it when that goes; exact only if every path that changes
the sibling leaf (insert, retraction, expiry of one event, batched expiry) builds and drops at the
right moment.  Random patterns that take the gate (card testing's shape: a SEQ of three, the first
two under one node), over streams with disorder, duplicates, retractions, late records and windows,
against the brute-force reference; across a save and reload, split over workers, every batch
merged; and the gated node's groups against the same engine without the decision, after every record.
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from strategies import (
    ALIASES,
    TWIN_FILTERS,
    TYPES,
    Case,
    patterns,
    seq_with_filters,
    streams,
    twin_patterns,
)
from test_engine_properties import PROFILE, check_case, to_event
from test_expiry_walk import PATTERNS, _group_entries, dense_cases

from cep.commands.explain import plan_to_dict, plan_to_text
from cep.errors import LateEventError
from cep.lang.compiler import compile_text
from cep.plan.physical import physical_plan
from cep.plan.planner import plan_pattern
from cep.runtime.engine import Engine

CARD = (
    "PATTERN card_testing\n  SEQ(Txn s1, Txn s2, Txn big)\n"
    "  WHERE s1.amount < 100 AND s2.amount < 100 AND big.amount > 400\n"
    "  PARTITION BY card\n  WITHIN 1 hour\n"
)


def _gated(text: str, time_unit: str = "s") -> int:
    """How many nodes of these patterns' physical plans are gated."""
    return sum(1 for cp in compile_text(text, time_unit=time_unit)
               for pn in physical_plan(plan_pattern(cp)).nodes if pn.gated_by is not None)


def test_card_testing_gates_the_small_purchases_node_on_the_big_purchase():
    (cp,) = compile_text(CARD)
    pp = physical_plan(plan_pattern(cp))
    gated = [pn for pn in pp.nodes if pn.gated_by is not None]
    assert len(gated) == 1
    n = gated[0]
    assert set(n.vars) == {"s1.card", "s2.ts"} and pp.nodes[n.gated_by].atom == 2  # big
    assert all(pn.gated_by is None for pn in physical_plan(plan_pattern(cp), gate_groups=False).nodes)
    text = plan_to_text(plan_pattern(cp))
    physical = text[text.index("physical plan"):]
    assert f"(groups kept only for keys n{n.gated_by} holds)" in physical
    nodes = plan_to_dict(plan_pattern(cp))["physical"]["nodes"]
    assert [d["gated_by"] for d in nodes if d["id"] == n.id] == [n.gated_by]


def test_a_two_element_sequence_has_nothing_to_gate():
    assert _gated("PATTERN q SEQ(A a, B b) WHERE a.x < b.x PARTITION BY s WITHIN 5\n") == 0


def test_a_small_purchase_of_a_card_without_a_big_one_changes_only_the_leaves():
    (cp,) = compile_text(CARD)
    from cep.event import Event
    eng = Engine([cp])
    rt = eng.runtimes[0]
    (gated,) = rt._gated
    store = rt.nodes[gated].stores[0]
    for i, (ts, amount) in enumerate([(0, 5), (10, 7), (20, 9)]):
        eng.push(Event("Txn", ts, {"card": "c", "amount": amount}, str(i)))
    assert store.groups == {}
    outs = eng.push(Event("Txn", 30, {"card": "c", "amount": 500}, "3"))
    assert len(outs) == 3  # (5, 7), (5, 9), (7, 9): the group was built when the big purchase came
    assert _group_entries(store.groups["c"]) == sorted(repr(e) for e in [(10, ("c", 10), 1), (20, ("c", 20), 2)])
    eng.advance_watermark(30 + 3600 + 1)  # the big purchase expires: the group goes
    assert store.groups == {}


_LONG = PROFILE == "long"
_SETTINGS = settings(settings.get_profile(PROFILE), max_examples=2000 if _LONG else 120,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_FEWER = settings(_SETTINGS, max_examples=600 if _LONG else 40)


@st.composite
def card_like_patterns(draw, name: str = "c") -> str:
    """A SEQ of 3-4 elements of card testing's shape: the last element's type or filter often
    differs from the others' (no twin reads its storage: the gate is taken), the first two often
    twins, mostly keyed and windowed, sometimes with a condition across elements."""
    k = draw(st.integers(3, 4))
    aliases = ALIASES[:k]
    types = [draw(st.sampled_from(TYPES[:2])) for _ in range(k - 1)] + [draw(st.sampled_from(TYPES[:3]))]
    filters = [draw(st.sampled_from(TWIN_FILTERS)) for _ in range(k)]
    if draw(st.booleans()):
        types[1], filters[1] = types[0], filters[0]
    return seq_with_filters(draw, name, types, filters, aliases, 5)


@st.composite
def gated_cases(draw, max_len: int = 30) -> Case:
    """``card_like_patterns`` (sometimes twin patterns or general random ones) over dense streams of
    their types: disorder, duplicates, retractions, late records, windows."""
    lateness = draw(st.sampled_from([0, 0, 1, 2, 4]))
    text = draw(st.one_of(card_like_patterns(name="c0"), card_like_patterns(name="c0"), twin_patterns(name="c0"),
                          patterns(name="c0")))
    if draw(st.integers(0, 4)) == 0:
        text += draw(card_like_patterns(name="c1"))
    records = draw(streams(lateness, "ts", max_len, ["A", "A", "A", "B", "B", "C"]))
    return Case(text, records, lateness, "ts", draw(st.sampled_from(["s", "s", "ms"])))


@_SETTINGS
@given(gated_cases())
def test_gated_patterns_agree_with_the_reference(case: Case) -> None:
    event(f"gated nodes: {min(_gated(case.text, case.time_unit), 2)}")
    check_case(case)


@_FEWER
@given(gated_cases(), st.integers(2, 25))
def test_gated_patterns_agree_with_the_reference_across_a_reload(case: Case, at: int) -> None:
    check_case(case, restore_at=at)


@_FEWER
@given(gated_cases())
def test_gated_patterns_agree_with_the_reference_when_every_batch_merges(case: Case) -> None:
    from unittest import mock

    from cep.runtime import iedyn
    with mock.patch.object(iedyn, "MERGE_MIN", 1):
        check_case(case)


def _groups(eng: Engine, ri: int, nid: int) -> dict:
    # keyed by the key itself: equal keys of different types (1 and 1.0) are one group, whichever came first
    return {k: _group_entries(g) for idx in eng.runtimes[ri].nodes[nid].stores for k, g in idx.groups.items()}


@_SETTINGS
@given(gated_cases())
def test_a_gated_group_is_the_ungated_one_while_the_sibling_has_its_key_and_absent_otherwise(case: Case) -> None:
    """After every record (and at the end of input): the gated node's group of a key is exactly the
    one the engine without the decision keeps, when the sibling leaf holds that key; else there is none."""
    _check_against_ungated(case)


@st.composite
def dense_card_cases(draw) -> Case:
    """Card testing's own shape (``test_expiry_walk``'s ``ct``) over its dense streams (few keys,
    many entries per group, ticks, duplicates and retractions): the big purchase's group appears
    over groups of several small purchases, so the build takes its one pass over a flat group."""
    case = draw(dense_cases())
    text = PATTERNS[0].format(w=draw(st.sampled_from([2, 3, 5, 8])))
    return Case(text, case.records, case.lateness)


@_SETTINGS
@given(dense_card_cases())
def test_a_gated_group_built_over_many_small_purchases_is_the_ungated_one(case: Case) -> None:
    _check_against_ungated(case)
    check_case(case)


def _check_against_ungated(case: Case, hypothesis: bool = True) -> None:
    cps = compile_text(case.text, time_unit=case.time_unit)
    gated = Engine(cps, lateness=case.lateness)
    plain = Engine(cps, lateness=case.lateness,
                   plans=[physical_plan(plan_pattern(cp), gate_groups=False) for cp in cps])
    pairs = [(ri, nid, m) for ri, rt in enumerate(gated.runtimes) for nid, m in rt._gated.items()]
    if hypothesis:
        event(f"gated nodes: {min(len(pairs), 2)}")

    def compare() -> None:
        for ri, nid, m in pairs:
            sib = gated.runtimes[ri].nodes[m].S.groups
            want = {k: g for k, g in _groups(plain, ri, nid).items() if k in sib}
            assert _groups(gated, ri, nid) == want

    for i, rec in enumerate(case.records, 1):
        got = []
        for eng in (gated, plain):
            try:
                got.append(sorted(repr((o.pattern, o.op, o.id)) for o in eng.push(to_event(rec, i, case.time_field))))
            except LateEventError:
                got.append("late")
        assert got[0] == got[1]
        compare()
    for eng in (gated, plain):
        eng.advance_watermark(float("inf"))
    compare()


def test_the_entry_guard_of_a_leaf_under_a_gated_node_is_the_gate():
    """Card testing's s1 stores nothing (its tuples live in s2's storage) and its parent is gated on
    big: the batch loop calls its update and expiry paths only for cards big holds (``entry_guard``),
    not for every card s2 holds."""
    (cp,) = compile_text(CARD)
    rt = Engine([cp]).runtimes[0]
    (gated, gating), = rt._gated.items()
    groups, positions = rt.entry_guard(0)  # s1
    assert groups is rt.nodes[gating].S.groups
    assert positions == [rt.nodes[rt._leaf_of_atom[0]].pos["s1.card"]]
    plain = Engine([cp], plans=[physical_plan(plan_pattern(cp), gate_groups=False)]).runtimes[0]
    groups, _ = plain.entry_guard(0)
    assert groups is plain.nodes[plain._leaf_of_atom[1]].S.groups  # without the gate: s2's index


@_SETTINGS
@given(gated_cases(), st.integers(1, 6))
def test_gated_patterns_give_the_same_with_and_without_the_entry_guard(case: Case, size: int) -> None:
    """The batch loop skips a guarded leaf's paths while the gate lacks the key; the same stream
    through an engine that always calls them (batches of ``size``, stopping at a refused event as
    ``cep run`` does) gives the same outputs, counts, state and current matches."""
    from unittest import mock

    from cep.errors import BatchInterrupted, UnknownRetractionError
    from cep.runtime.iedyn import PatternRuntime

    cps = compile_text(case.text, time_unit=case.time_unit)
    guarded = Engine(cps, lateness=case.lateness)
    gates = sum(1 for rt in guarded.runtimes for a in range(len(rt.extract))
                if rt.entry_guard(a) is not None and rt.nodes[rt._leaf_of_atom[a]].parent in rt._gated)
    event(f"guards that are a gate: {min(gates, 1)}")
    with mock.patch.object(PatternRuntime, "entry_guard", lambda self, atom: None):
        always = Engine(cps, lateness=case.lateness)
    events = [to_event(rec, i, case.time_field) for i, rec in enumerate(case.records, 1)]

    def run(eng: Engine) -> list:
        outs = []
        for lo in range(0, len(events), size):
            chunk = events[lo:lo + size]
            while chunk:
                try:
                    outs.extend(repr((o.pattern, o.op, o.id)) for o in eng.push_batch(chunk))
                    chunk = []
                except BatchInterrupted as bi:
                    assert isinstance(bi.__cause__, (LateEventError, UnknownRetractionError))
                    outs.extend(repr((o.pattern, o.op, o.id)) for o in bi.outputs)
                    chunk = chunk[bi.index + 1:]
        eng.advance_watermark(float("inf"))
        return outs

    assert run(guarded) == run(always)
    assert guarded.stats == always.stats
    assert guarded.state_size() == always.state_size()
    for cp in cps:
        assert guarded.match_count(cp.name) == always.match_count(cp.name)


def test_the_retraction_of_the_last_big_purchase_retracts_its_matches():
    """The retraction of a card's only big purchase leaves big without the card, so the gated
    group of small purchases goes: only after the matches the retraction undoes are enumerated
    (through that group).  Found by ``test_expiry_walk``'s property test (long profile): the match
    was emitted and never retracted."""
    (cp,) = compile_text(CARD)
    from cep.event import Event
    eng = Engine([cp])
    rt = eng.runtimes[0]
    (gated,) = rt._gated
    got = []
    for i, (ts, amount, op) in enumerate([(15, 5, "+"), (16, 7, "+"), (19, 500, "+"), (19, 500, "-")]):
        got += [o.op for o in eng.push(Event("Txn", ts, {"card": "c", "amount": amount}, str(i), op))]
    assert got == ["+", "-"]
    assert rt.nodes[gated].stores[0].groups == {} and not rt._gate_pending
    assert eng.match_count(cp.name) == 0


def test_a_group_of_small_purchases_inside_one_window_is_built_without_a_loop() -> None:
    """``PatternRuntime._whole_window_build``: when a card's small purchases have distinct times and
    span less than the window, each one's count of earlier partners is the running sum before it,
    and the group is built by slices (card testing's build has the form).  Three builds against
    the ungated engine after every record, and outputs against the reference: one inside the
    window (four small purchases: a flat map; then two: a triple), one over equal times and one
    over a group spanning more than the window (late records kept by the lateness), where the
    loop builds it."""
    from cep import codegen

    point = codegen.mark()
    Engine(compile_text(PATTERNS[0].format(w=5)), lateness=0)
    assert any("flat_map(ks[1:]" in src for f, src in codegen.defined_since(point) if "build a group" in f)
    rows = [
        [(0, 1), (1, 1), (2, 1), (4, 1), (5, 9), (12, 1), (13, 1), (14, 9)],  # inside the window
        [(0, 1), (1, 1), (1, 1), (3, 1), (4, 9)],  # equal times
        [(0, 1), (6, 1), (3, 1), (4, 1), (7, 9)],  # 0 to 6: wider than the window
    ]
    for lateness, rs in zip((0, 0, 4), rows, strict=True):
        case = Case(PATTERNS[0].format(w=5), [{"type": "T", "ts": ts, "k": "a", "x": x} for ts, x in rs], lateness)
        _check_against_ungated(case, hypothesis=False)
        check_case(case)
