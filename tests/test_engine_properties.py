"""Property tests: the engine against the brute-force reference (tests/reference.py).

Random v1 patterns and random streams (tests/strategies.py) are fed to
``cep.runtime.engine.Engine`` in arrival order.  Checked, for every example:

* the records the engine rejects as late are exactly the reference's late ones;
* the net multiset of outputs (``+`` minus ``-``) equals the reference's
  multiset of matches over all on-time inserted minus retracted events, keyed
  by (pattern, positions, match); positions are compared through the id
  (``cep.event.match_id``), and ids of different matches differ;
* a ``-`` carries the id and match of an earlier ``+`` still outstanding;
* ``matches()`` and ``match_count()`` give the current matches: those whose
  events are all still retained (with ``WITHIN w``, events older than
  ``watermark - w`` have left the state).

Examples: ``CEP_HYPOTHESIS_PROFILE=long`` runs many more.
"""

from __future__ import annotations

import math
import os
from collections import Counter

import pytest
import reference
import test_reference_selfcheck
from cephelp import PATTERNS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import (
    Case,
    and_within_cases,
    cases,
    dense_kleene_cases,
    gap_cases,
    kleene_cases,
    streams,
)

from cep.errors import LateEventError  # noqa: E402
from cep.event import Event, match_id  # noqa: E402

# Fail loudly (ImportError) until the compiler and the engine exist.
from cep.lang.compiler import compile_text  # noqa: E402
from cep.runtime.engine import Engine  # noqa: E402

settings.register_profile("default_props", max_examples=300, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("long", max_examples=3000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = "long" if os.environ.get("CEP_HYPOTHESIS_PROFILE") == "long" else "default_props"


def to_event(rec: dict, pos: int, time_field: str) -> Event:
    fields = {k: v for k, v in rec.items() if k != "op"}
    return Event(rec["type"], rec[time_field], fields, str(pos), rec.get("op", "+"))


def run_engine(case: Case, restore_at: int | None = None):
    """Feed the records in arrival order; optionally save and reload the state before one.

    Also checks that an output ``-`` comes only from a retraction record (spec 7.4: an
    insert, or the watermark, can never undo an emitted match).
    """
    cps = compile_text(case.text, time_unit=case.time_unit)
    eng = Engine(cps, lateness=case.lateness)
    outs = []
    late = []
    for i, rec in enumerate(case.records, 1):
        if restore_at is not None and i == restore_at:
            eng = Engine.loads(eng.dumps(), compile_text(case.text, time_unit=case.time_unit))
            cps = eng.patterns
        try:
            got = eng.push(to_event(rec, i, case.time_field))
        except LateEventError:
            late.append(str(i))
            continue
        if rec.get("op", "+") != "-":
            assert all(o.op == "+" for o in got), f"record {i} is an insert but undid a match"
        outs.extend(got)
    return eng, cps, outs, late


def end_of_input(eng: Engine) -> list:
    """A bounded input ends: the watermark becomes +infinity and decides what is pending."""
    outs = eng.advance_watermark(math.inf)
    assert all(o.op == "+" for o in outs)
    assert eng.pending_count() == 0
    return outs


def check_case(case: Case, restore_at: int | None = None) -> None:
    ref = reference.evaluate(case.text, case.records, case.lateness, time_field=case.time_field,
                             time_unit=case.time_unit)
    assert ref.bad == [], "the strategy generates only valid retractions"
    eng, cps, outs, late = run_engine(case, restore_at)
    assert late == ref.late
    check_current(eng, cps, ref, case)
    outs = outs + end_of_input(eng)

    # the reference's matches, keyed by id
    expected: Counter = Counter()
    id_of: dict[tuple, str] = {}
    for (pat, positions, frozen), n in ref.matches.items():
        mid = match_id(pat, positions)
        assert id_of.setdefault((pat, mid), positions) == positions, "two matches share an id"
        id_of[(pat, mid)] = positions
        expected[(pat, mid, frozen)] += n

    # the engine's net output, and the +/- discipline
    net: Counter = Counter()
    outstanding: Counter = Counter()
    for o in outs:
        key = (o.pattern, o.id, reference.freeze_match(o.match))
        if o.op == "+":
            net[key] += 1
            outstanding[key] += 1
        else:
            assert o.op == "-"
            assert outstanding[key] > 0, f"a '-' without an outstanding '+': {o}"
            outstanding[key] -= 1
            net[key] -= 1
    net = Counter({k: v for k, v in net.items() if v})
    missing = expected - net
    extra = net - expected
    assert not missing and not extra, _explain(missing, extra, id_of)



def check_current(eng: Engine, cps, ref, case: Case) -> None:
    """Current matches: all events still retained (and, with gaps, decided)."""
    id_of = {(pat, match_id(pat, positions)): positions for (pat, positions, _f) in ref.matches}
    for cp in cps:
        cur = Counter()
        for (pat, positions, frozen), n in ref.current.items():
            if pat == cp.name:
                cur[(pat, match_id(pat, positions), frozen)] += n
        got = Counter((o.pattern, o.id, reference.freeze_match(o.match)) for o in eng.matches(cp.name))
        assert got == cur, _explain(cur - got, got - cur, id_of)
        assert eng.match_count(cp.name) == sum(cur.values())


def _explain(missing: Counter, extra: Counter, id_of: dict) -> str:
    lines = []
    for title, c in (("missing (reference has, engine not)", missing), ("extra (engine has, reference not)", extra)):
        for (pat, mid, frozen), n in sorted(c.items(), key=repr)[:8]:
            lines.append(f"{title}: {pat} positions={id_of.get((pat, mid), '?')} x{n} {dict(frozen)}")
    return "\n".join(lines)


@settings(settings.get_profile(PROFILE))
@given(cases())
def test_engine_agrees_with_reference(case: Case) -> None:
    check_case(case)


@settings(settings.get_profile(PROFILE), max_examples=max(20, settings.get_profile(PROFILE).max_examples // 4))
@given(cases(), st.integers(1, 30))
def test_state_survives_dumps_loads(case: Case, restore_at: int) -> None:
    """Saving and reloading the engine state mid-stream changes nothing that is emitted."""
    check_case(case, restore_at)


@settings(settings.get_profile(PROFILE))
@given(gap_cases())
def test_gaps_strategies_and_nesting_agree_with_reference(case: Case) -> None:
    """Spec 7.1-7.6: NOT in every position, strategies, nesting; decided matches."""
    check_case(case)


@settings(settings.get_profile(PROFILE), max_examples=max(20, settings.get_profile(PROFILE).max_examples // 3))
@given(gap_cases(), st.integers(1, 26))
def test_pending_matches_survive_dumps_loads(case: Case, restore_at: int) -> None:
    check_case(case, restore_at)


def positive_entries(eng: Engine, ri: int) -> int:
    """The retained (atom, event) pairs of pattern ``ri``: what its pending store may hold at most."""
    bits = [1 << j for j, (r, _a) in enumerate(eng._slots) if r == ri]
    return sum(1 for mask in eng._holders.values() for b in bits if mask & b)


@settings(settings.get_profile(PROFILE))
@given(gap_cases(trailing_not=True))
def test_pending_state_is_bounded_by_retained_positive_events(case: Case) -> None:
    """docs/language.md section 7, Decided matches: with a trailing NOT a window's events can form
    many undecided matches, but the pending store holds one entry per deciding event, so after
    every record it is at most the retained positive (atom, event) pairs, never the matches."""
    cps = compile_text(case.text, time_unit=case.time_unit)
    eng = Engine(cps, lateness=case.lateness)
    for i, rec in enumerate(case.records, 1):
        try:
            eng.push(to_event(rec, i, case.time_field))
        except LateEventError:
            continue
        for ri, store in enumerate(eng.pending):
            if store is not None:
                bound = positive_entries(eng, ri)
                assert len(store) <= bound, (len(store), bound)
                assert store.stored() <= 2 * bound + 64
    check_case(case)


# patterns whose matches are decided by different atoms (a nested AND next to the latest gap
# end): each match must be emitted from exactly one deciding event, ties included
SEVERAL_DECIDERS = [
    "PATTERN g SEQ(AND(A a, D b), C c, NOT B n) WITHIN 4",
    "PATTERN g SEQ(AND(A a, D b), NOT B n) WITHIN 3",
    "PATTERN g SEQ(A a, NOT B n, AND(C c, D d)) WITHIN 5",
    "PATTERN g SEQ(A a, NOT B n, AND(C c, D d)) WHERE n.x = a.x",
    "PATTERN g SEQ(NOT B n, AND(A a, D d), C c) WITHIN 4",
    "PATTERN g SEQ(AND(A a, D b), NOT C n, B c, NOT C m) PARTITION BY s WITHIN 5",
]


@st.composite
def several_decider_cases(draw) -> Case:
    lateness = draw(st.sampled_from([0, 1, 2, 4]))
    records = draw(streams(lateness, "ts", 24))
    return Case(draw(st.sampled_from(SEVERAL_DECIDERS)) + "\n", records, lateness, "ts", "s")


@settings(settings.get_profile(PROFILE))
@given(several_decider_cases())
def test_matches_with_several_possible_deciding_events_are_emitted_once(case: Case) -> None:
    check_case(case)


@settings(settings.get_profile(PROFILE))
@given(kleene_cases())
def test_kleene_plus_agrees_with_reference(case: Case) -> None:
    """Spec 7.3: random quantifiers, selection and aggregate conditions, aggregates in EMIT
    (nulls and mixed types in the aggregated attributes), disorder, retractions, duplicates."""
    check_case(case)


@settings(settings.get_profile(PROFILE))
@given(dense_kleene_cases())
def test_long_runs_and_every_aggregate_agree_with_reference(case: Case) -> None:
    check_case(case)


@settings(settings.get_profile(PROFILE), max_examples=max(20, settings.get_profile(PROFILE).max_examples // 3))
@given(kleene_cases(), st.integers(1, 26))
def test_kleene_matches_survive_dumps_loads(case: Case, restore_at: int) -> None:
    check_case(case, restore_at)


@settings(settings.get_profile(PROFILE))
@given(and_within_cases())
def test_and_within_agrees_with_reference(case: Case) -> None:
    """WITHIN over an AND of up to eight elements: one span predicate, checked at enumeration."""
    check_case(case)


@settings(settings.get_profile(PROFILE), max_examples=max(20, settings.get_profile(PROFILE).max_examples // 4))
@given(and_within_cases(), st.integers(1, 30))
def test_and_within_survives_dumps_loads(case: Case, restore_at: int) -> None:
    check_case(case, restore_at)


# A few fixed cases, so a regression shows without hypothesis' search.
FIXED = [
    Case(
        (PATTERNS / "card_testing.pattern").read_text(),
        [
            {"type": "Txn", "ts": 0, "card": "c1", "amount": 10},
            {"type": "Txn", "ts": 5, "card": "c1", "amount": 20},
            {"type": "Txn", "ts": 6, "card": "c2", "amount": 20},
            {"type": "Txn", "ts": 10, "card": "c1", "amount": 500},
            {"type": "Txn", "ts": 5, "card": "c1", "amount": 20, "op": "-"},
            {"type": "Txn", "ts": 4000, "card": "c1", "amount": 900},
        ],
        lateness=10,
    ),
    Case(
        "PATTERN p AND(A a, B b) WHERE a.x = b.x AND NOT (a.y > b.y) EMIT a.*, b.y AS b_y\n",
        [
            {"type": "A", "ts": 3, "x": 1, "y": None},
            {"type": "B", "ts": 1, "x": 1.0, "y": 0},
            {"type": "B", "ts": 2, "x": True, "y": 5},
            {"type": "A", "ts": 2, "x": 1, "y": 5},
            {"type": "A", "ts": 2, "x": 1, "y": 5},
            {"type": "A", "ts": 2, "x": 1, "y": 5, "op": "-"},
        ],
        lateness=2,
    ),
]


FIXED += [
    Case(test_reference_selfcheck.CARD_TESTING, test_reference_selfcheck.CARD_STREAM, lateness=3600),
    Case(test_reference_selfcheck.CARD_TESTING, test_reference_selfcheck.CARD_STREAM, lateness=0),
    Case(test_reference_selfcheck.PAIRS, test_reference_selfcheck.PAIR_STREAM, lateness=5),
]


@pytest.mark.parametrize("case", FIXED, ids=["card_testing", "and_nulls_dups", "card_hand_3600",
                                             "card_hand_0", "pairs_hand"])
def test_fixed_cases(case: Case) -> None:
    check_case(case)


@settings(settings.get_profile(PROFILE), max_examples=max(20, settings.get_profile(PROFILE).max_examples // 4))
@given(cases())
def test_recursive_enumeration_agrees_with_reference(case: Case) -> None:
    """The fallback for trees too deep to compile into nested loops gives the same outputs."""
    from cep.runtime.iedyn import PatternRuntime

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(PatternRuntime, "_compile_enumeration", lambda self: None)
        check_case(case)


def test_enumeration_is_compiled_for_v1_sized_trees() -> None:
    # the property tests above exercise the generated loops only if they are really used
    cps = compile_text(FIXED[0].text)
    eng = Engine(cps)
    assert all(rt._enum_nested is not None for rt in eng.runtimes)


def test_a_long_seq_uses_the_recursive_enumeration_and_agrees() -> None:
    # ten elements: a tree deeper than Python's nested-block limit allows as generated loops
    k = 10
    elements = ", ".join(f"T{i} x{i}" for i in range(k))
    text = f"PATTERN long_seq\n  SEQ({elements})\n  PARTITION BY g\n  WITHIN 40\n"
    records = [{"type": f"T{i}", "ts": i * 2 + rep, "g": 1} for i in range(k) for rep in range(2)]
    records.append({"type": "T9", "ts": 19, "g": 1, "op": "-"})
    case = Case(text, records, lateness=3)
    eng = Engine(compile_text(text))
    assert eng.runtimes[0]._enum_nested is None
    outs = [o for r in records for o in eng.push(to_event(r, 0, "ts"))]
    assert len(outs) == 2**10 + 2**9  # every choice of one of two events per element, then half retracted
    check_case(case)


def test_and_within_over_32_types_plans_and_agrees() -> None:
    # the largest AND the language allows: planned from bands to the last element plus one span predicate
    k = 32
    elements = ", ".join(f"T{i} x{i}" for i in range(k))
    text = f"PATTERN wide\n  AND({elements})\n  PARTITION BY g\n  WITHIN 10\n"
    records = [{"type": f"T{i}", "ts": (i * 7) % 11, "g": 1} for i in range(k)]  # times 0..10: a match
    records += [
        {"type": "T3", "ts": 11, "g": 1},  # 11 - 0 > 10: no second match
        {"type": "T7", "ts": 5, "g": 1},  # a second match
        {"type": "T9", "ts": 2, "g": 2},  # another group
        {"type": "T7", "ts": 5, "g": 1, "op": "-"},  # retracts the second match
        {"type": "T0", "ts": 10, "g": 1},  # a match with the others (T11 and T22 are at 0), not with T3 at 11
    ]
    case = Case(text, records, lateness=20)
    eng = Engine(compile_text(text), lateness=20)
    outs = [o for i, r in enumerate(records, 1) for o in eng.push(to_event(r, i, "ts"))]
    assert [o.op for o in outs] == ["+", "+", "-", "+"]
    check_case(case)


def test_loads_drops_events_that_left_one_patterns_window() -> None:
    # found by the long profile: an event kept for an unwindowed pattern but expired from a
    # windowed one must not come back into the windowed one when the state is reloaded
    rec = {"type": "A", "x": 0, "y": 0, "s": "u", "f": True}
    times = [0] * 11 + [1, 2, 3, 4, 3]
    case = Case("PATTERN p0\n  SEQ(A a)\nPATTERN p1\n  SEQ(A a)\n  WITHIN 3\n",
                [{**rec, "ts": t} for t in times], lateness=0)
    check_case(case, restore_at=16)
