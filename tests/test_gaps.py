"""Unit tests of the gap machinery: sorted gap indexes, gap checks, the pending-match store.

The property tests (tests/test_engine_properties.py) check whole runs against the
reference evaluator; these pin the pieces: range bounds (strict middle gaps,
inclusive window edges), keys with nulls and mixed types, decision times, and
the store's order and plain-data form.
"""

from __future__ import annotations

import math

import pytest

from cep.event import Event
from cep.lang.compiler import compile_text
from cep.plan.gaps import plan_gaps
from cep.runtime.engine import Engine
from cep.runtime.gaps import GapChecks, GapIndex
from cep.runtime.pending import PendingDecisions, is_decided
from cep.runtime.state import StateError


def ev(type_: str, ts, **fields) -> Event:
    return Event(type_, ts, {"type": type_, "ts": ts, **fields}, str(ts))


def setup(text: str):
    (cp,) = compile_text(text)
    specs, plans = plan_gaps(cp)
    events: dict[int, Event] = {}
    indexes = [GapIndex(s, cp.name) for s in specs]
    return cp, plans, indexes, GapChecks(cp, plans, indexes, events), events


def put(indexes, events, serial: int, e: Event, ix: int = 0) -> None:
    events[serial] = e
    key = indexes[ix].key_of(e)
    assert key is not None
    indexes[ix].add(key, e.ts, serial)


def test_index_keeps_entries_sorted_whatever_the_arrival_order():
    _cp, _plans, (ix,), _checks, _events = setup("PATTERN p SEQ(A a, NOT B b, C c) WHERE b.k = a.k")
    for serial, ts in enumerate([5, 3, 9, 3, 7]):
        ix.add(1, ts, serial)
    assert ix.groups[1] == [(3, 1), (3, 3), (5, 0), (7, 4), (9, 2)]
    ix.remove(1, 3, 3)
    ix.remove(1, 9, 2)
    assert ix.groups[1] == [(3, 1), (5, 0), (7, 4)]
    for ts, s in list(ix.groups[1]):
        ix.remove(1, ts, s)
    assert ix.groups == {}  # an emptied key leaves nothing behind


def test_keys_follow_sql_equality():
    _cp, _plans, (ix,), _checks, _events = setup("PATTERN p SEQ(A a, NOT B b, C c) WHERE b.k = a.k")
    assert ix.key_of(ev("B", 1, k=1)) == ix.key_of(ev("B", 1, k=1.0))  # numbers by value
    assert ix.key_of(ev("B", 1, k=True)) != ix.key_of(ev("B", 1, k=1))  # booleans are not numbers
    assert ix.key_of(ev("B", 1, k="1")) != ix.key_of(ev("B", 1, k=1))
    for bad in (None, [1], {"a": 1}, float("nan")):
        assert ix.key_of(ev("B", 1, k=bad)) is None
    assert ix.key_of(ev("B", 1)) is None  # missing reads as null


def test_middle_gap_is_strict_and_count_check_needs_no_scan():
    _cp, plans, indexes, checks, events = setup("PATTERN p SEQ(A a, NOT B b, C c) WHERE b.k = a.k")
    assert plans[0].check == "count"
    a, c = ev("A", 10, k=1), ev("C", 20, k=1)
    put(indexes, events, 100, ev("B", 10, k=1))  # at p.ts: outside
    put(indexes, events, 101, ev("B", 20, k=1))  # at n.ts: outside
    put(indexes, events, 102, ev("B", 15, k=2))  # another key
    assert checks.holds([a, c])
    put(indexes, events, 103, ev("B", 15, k=1.0))
    assert not checks.holds([a, c])
    assert not checks.holds([ev("A", 14, k=1), c])
    assert checks.holds([ev("A", 15, k=1), c])
    assert checks.holds([ev("A", 10, k=None), c])  # a null key: nothing qualifies
    assert checks.decision_time([a, c]) == (20, False)


def test_trailing_and_leading_gaps_include_the_window_edge():
    _cp, _plans, indexes, checks, events = setup("PATTERN p SEQ(A a, NOT B b) WITHIN 10")
    a = ev("A", 100)
    assert checks.decision_time([a]) == (110, True)  # decided only once the watermark is past 110
    put(indexes, events, 1, ev("B", 110))
    assert not checks.holds([a])
    _cp, _plans, indexes, checks, events = setup("PATTERN p SEQ(NOT B b, A a) WITHIN 10")
    put(indexes, events, 1, ev("B", 90))
    assert not checks.holds([a])  # [a.ts - 10, a.ts)
    assert checks.holds([ev("A", 100.5)])
    assert checks.decision_time([a]) == (100, False)


def test_scan_check_tests_the_residual_on_candidates_in_the_gap():
    _cp, plans, indexes, checks, events = setup(
        "PATTERN p SEQ(A a, NOT B b, C c) WHERE b.k = a.k AND b.amount > a.amount")
    assert plans[0].check == "scan" and plans[0].gap.residual_text == "b.amount > a.amount"
    a, c = ev("A", 0, k=1, amount=50), ev("C", 10, k=1)
    put(indexes, events, 1, ev("B", 5, k=1, amount=10))
    put(indexes, events, 2, ev("B", 6, k=1, amount=None))
    assert checks.holds([a, c])
    put(indexes, events, 3, ev("B", 11, k=1, amount=99))  # outside the gap
    assert checks.holds([a, c])
    put(indexes, events, 4, ev("B", 7, k=1, amount=51))
    assert not checks.holds([a, c])


def test_pending_store_pops_in_decision_order_and_skips_discarded():
    p = PendingDecisions(strict=False)
    p.add(0, 1, 20)
    p.add(0, 1, 20)  # one entry per deciding event, however many matches it decides
    p.add(1, 3, 10)  # out of time order: the heap beside the queue
    p.add(1, 5, 10)
    p.add(0, 7, 30)
    assert len(p) == 4 and p.next_time() == 10
    p.discard(0, 1)
    p.discard(0, 1)
    assert p.pop_decided(9) == []
    assert p.pop_decided(20) == [(1, 3), (1, 5)]  # (0, 1) was discarded
    assert p.to_data() == [[0, 7]]
    q = PendingDecisions(strict=True)
    q.add(0, 7, 30)
    assert q.pop_decided(30) == [] and q.pop_decided(31) == [(0, 7)] and len(q) == 0 and q.next_time() is None
    assert is_decided(5, False, 5) and not is_decided(5, True, 5) and not is_decided(5, False, None)


def test_pending_store_drops_retracted_entries_it_holds():
    p = PendingDecisions(strict=True)
    for s in range(200):
        p.add(0, s, 100 + s)
    for s in range(190):
        p.discard(0, s)
    assert len(p) == 10 and p.stored() <= 2 * 10 + 64
    assert p.pop_decided(math.inf) == [(0, s) for s in range(190, 200)]


def test_pending_state_is_one_entry_per_deciding_event_not_per_match():
    """SEQ(A a, B b, NOT C c): one A and fifty Bs are fifty undecided matches, one pending entry."""
    cps = compile_text("PATTERN p SEQ(A a, B b, NOT C c) WITHIN 100")
    eng = Engine(cps)
    eng.push(ev("A", 1))
    for t in range(2, 52):
        assert eng.push(ev("B", t)) == []
    assert eng.pending_count() == 1 and eng.next_decision_time() == 101
    assert eng.advance_watermark(101) == []
    assert len(eng.advance_watermark(102)) == 50 and eng.pending_count() == 0
    eng.push(ev("C", 200))
    assert eng.retained_events == 1 and eng.state_size() > 0
    eng.advance_watermark(math.inf)  # the end of a bounded input: nothing is retained
    assert eng.retained_events == 0 and eng.state_size() == 0


def test_a_restart_keeps_one_entry_per_deciding_event_and_decides_every_match():
    """Format 3: the state holds the deciding event, and the restored engine finds its matches
    (those still holding: a retraction and a NOT event after the save change them)."""
    cps = compile_text("PATTERN p SEQ(A a, B b, NOT C c) WHERE c.k = b.k WITHIN 100")
    eng = Engine(cps, lateness=10)
    eng.push(ev("A", 1))
    for t in range(2, 12):
        eng.push(ev("B", t, k=t))
    data = eng.dumps()
    assert b'"pending":[[[0,0]]]' in data  # one deciding event (the A), ten undecided matches
    again = Engine.loads(data, cps)
    assert again.pending_count() == 1 and again.next_decision_time() == 101
    assert again.push(Event("B", 5, {"type": "B", "ts": 5, "k": 5}, "5", "-")) == []  # before its decision
    again.push(ev("C", 20, k=3))  # in the gap of the match with B k=3
    got = again.advance_watermark(102)
    assert sorted(o.match["b"]["k"] for o in got) == [2, 4, 6, 7, 8, 9, 10, 11]


def test_pending_matches_are_checked_when_a_state_is_loaded():
    cps = compile_text("PATTERN p SEQ(A a, NOT B b) WITHIN 10")
    eng = Engine(cps)
    eng.push(ev("A", 1))
    assert eng.pending_count() == 1 and eng.next_decision_time() == 11
    data = eng.dumps()
    assert b'"pending":[[[0,0]]]' in data
    again = Engine.loads(data, cps)
    assert again.pending_count() == 1 and again.next_decision_time() == 11
    assert [o.op for o in again.advance_watermark(12)] == ["+"]
    with pytest.raises(StateError, match="pending"):
        Engine.loads(data.replace(b'"pending":[[[0,0]]]', b'"pending":[[[0,7]]]'), cps)
    with pytest.raises(StateError, match="pending"):
        Engine.loads(data.replace(b'"pending":[[[0,0]]]', b'"pending":[[[1,0]]]'), cps)
    with pytest.raises(StateError, match="pending"):
        Engine.loads(data.replace(b'"pending":[[[0,0]]]', b'"pending":[[["x"]]]'), cps)
