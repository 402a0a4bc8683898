"""The batch loop's locals and fast paths (cep/runtime/handler.py, issue 15 on a sparse stream):
each is forced here and compared with a run that does not take it.

- the single window's oldest time is a local lower bound: with it forced below every held time
  (as a stale bound would be) the inline expiry must put a head that is not due back;
- the watermark, the highest time and the counters are locals written back when the loop ends or
  raises: a batch that stops at a late event or an unknown retraction must leave the engine as
  pushing the events one at a time does;
- an event's outputs start where it first emits (``_mark``): when it raises after emitting, the
  batch's outputs must hold exactly the events before it;
- an event whose join value is null is not stored (``_plain_insert``), but takes a serial.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine import CARD, txn

from cep.errors import BatchInterrupted, LateEventError, UnknownRetractionError
from cep.event import Event
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine

SHORT = CARD.replace("WITHIN 1 hour", "WITHIN 5 s")


def _state(eng: Engine) -> tuple:
    return (eng.stats, eng.matches_emitted, eng.watermark, eng.max_ts, eng._serial, sorted(eng.events),
            sorted(eng._holders.items()), [sorted(q) for q in eng._in_order], [sorted(h) for h in eng._expiry])


@st.composite
def streams(draw) -> list[tuple]:
    """(time step back/forward, card, amount, op) rows: small and large amounts, repeated times
    (several events leave at one move), disorder within the lateness, late events, retractions
    of kept and of unknown events, null cards."""
    rows = draw(st.lists(st.tuples(st.sampled_from([0, 0, 1, 1, 2, 3, 6, 9, -1, -4]),
                                   st.sampled_from(["c", "c", "d", None]),
                                   st.sampled_from([10, 50, 250, 500, 900]),
                                   st.sampled_from(["+", "+", "+", "-"])), min_size=1, max_size=50))
    return rows


def _events(rows: list[tuple]) -> list[Event]:
    out, ts, kept = [], 0, []
    for i, (step, card, amount, op) in enumerate(rows, 1):
        ts = max(0, ts + step)
        if op == "-" and kept and i % 3:  # a retraction of an event pushed before (maybe expired)
            e = kept[i % len(kept)]
            out.append(txn(i, e.ts, e.fields["card"], e.fields["amount"], "-"))
            continue
        ev = txn(i, ts, card, amount, op)
        out.append(ev)
        if op == "+":
            kept.append(ev)
    return out


def _one_by_one(eng: Engine, events: list[Event]) -> list:
    outs = []
    for e in events:
        try:
            outs.extend(eng.push(e))
        except (LateEventError, UnknownRetractionError):
            pass
    return outs


def _in_batches(eng: Engine, events: list[Event], size: int) -> list:
    """As ``cep run`` applies a batch: after an event that raised, the rest of the batch."""
    outs = []
    for lo in range(0, len(events), size):
        chunk = events[lo:lo + size]
        while chunk:
            try:
                outs.extend(eng.push_batch(chunk))
                chunk = []
            except BatchInterrupted as bi:
                assert isinstance(bi.__cause__, (LateEventError, UnknownRetractionError))
                outs.extend(bi.outputs)
                chunk = chunk[bi.index + 1:]
    return outs


@settings(max_examples=150, deadline=None)
@given(streams(), st.integers(1, 9), st.sampled_from([0, 1, 3]))
def test_batches_that_stop_at_a_refused_event_equal_single_pushes(rows, size, lateness):
    events = _events(rows)
    one, many = Engine(compile_text(SHORT), lateness=lateness), Engine(compile_text(SHORT), lateness=lateness)
    assert _in_batches(many, events, size) == _one_by_one(one, events)
    assert _state(many) == _state(one)


@settings(max_examples=150, deadline=None)
@given(streams(), st.integers(1, 9), st.sampled_from([0, 2]))
def test_a_stale_oldest_time_puts_a_head_that_is_not_due_back(rows, size, lateness):
    """``Engine._oldest`` forced to -inf before every batch: the loop's first move finds the head of
    the in-order queue not due (or the queue empty) and must leave it, as the exact bound does."""
    events = _events(rows)
    exact, stale = Engine(compile_text(SHORT), lateness=lateness), Engine(compile_text(SHORT), lateness=lateness)
    assert len(stale._windowed) == 1 and not stale._gap_expiry  # the inline expiry's case
    got, want = [], []
    for lo in range(0, len(events), size):
        stale._oldest[0] = -math.inf
        got += _in_batches(stale, events[lo:lo + size], size)
        want += _in_batches(exact, events[lo:lo + size], size)
        assert stale.retained_events == exact.retained_events
    assert got == want
    assert stale.stats == exact.stats and sorted(stale.events) == sorted(exact.events)


def test_an_event_that_raises_after_emitting_leaves_only_the_outputs_before_it():
    eng = Engine(compile_text(CARD))
    g = eng._handlers.batch.__globals__
    (big,) = [k for k in g if k.startswith("new") and "big" in repr(g[k].__code__.co_filename)]
    emit = g[big]

    def emit_then_fail(ch, e, outs):
        emit(ch, e, outs)
        if e.pos == "6":
            raise RuntimeError("after emitting")

    g[big] = emit_then_fail
    evs = [txn(1, 1, "c", 10), txn(2, 2, "c", 20), txn(3, 3, "c", 500), txn(4, 4, "d", 10), txn(5, 5, "d", 20),
           txn(6, 6, "c", 600), txn(7, 7, "d", 700)]
    with pytest.raises(BatchInterrupted) as bi:
        eng.push_batch(evs)
    assert bi.value.index == 5 and isinstance(bi.value.__cause__, RuntimeError)
    assert [o.match["amount"] for o in bi.value.outputs] == [500]  # event 6's own match is dropped
    assert eng.stats["events"] == 6 and eng.max_ts == 6 and eng.watermark == 6  # it was counted and moved


def test_a_refused_event_is_not_counted_and_the_loop_hands_its_state_over():
    eng = Engine(compile_text(CARD), lateness=2)
    evs = [txn(1, 10, "c", 10), txn(2, 12, "c", 20), txn(3, 7, "c", 500), txn(4, 13, "c", 600)]
    with pytest.raises(BatchInterrupted) as bi:
        eng.push_batch(evs)
    assert bi.value.index == 2 and isinstance(bi.value.__cause__, LateEventError)
    assert (eng.stats["events"], eng.stats["late"], eng.max_ts, eng.watermark, eng._serial) == (2, 1, 12, 10, 2)
    with pytest.raises(BatchInterrupted) as bi:
        eng.push_batch([txn(9, 12, "e", 10, "-")])
    assert isinstance(bi.value.__cause__, UnknownRetractionError)
    assert eng.stats["events"] == 2 and eng.max_ts == 12
    assert [o.match["amount"] for o in eng.push_batch(evs[3:])] == [600]
    assert eng.stats["events"] == 3


def test_an_event_with_a_null_join_value_takes_a_serial_and_is_not_kept():
    eng = Engine(compile_text(CARD))
    assert eng.push_batch([txn(1, 1, None, 10), Event("Txn", 2, {"amount": 500}, "2"), txn(3, 3, "c", 10)]) == []
    assert eng._serial == 3 and sorted(eng.events) == [2] and eng._holders == {2: 3}
    assert eng.stats["inserted"] == 1 and eng.stats["events"] == 3


SAME_TYPE = """
PATTERN chain
  SEQ(T a, T b, T c)
  WHERE a.x < b.x AND c.x > 5
  PARTITION BY k
  WITHIN 4 s
"""


@settings(max_examples=150, deadline=None)
@given(streams(), st.sampled_from([SHORT, SAME_TYPE]), st.sampled_from([0, 4, 4]))
def test_a_skipped_update_path_changes_nothing(rows, text, lateness):
    """``PatternRuntime.entry_guard``: the loop skips the update and expiry paths of a leaf that
    stores nothing while its sibling's index lacks the key; the same stream through an engine
    that always calls them must give the same outputs, counts and current matches."""
    from cep.runtime.iedyn import PatternRuntime

    pats = compile_text(text)
    events = _events(rows)
    if text is SAME_TYPE:
        events = [Event("T", e.ts, {"k": e.fields["card"], "x": e.fields["amount"] // 100}, e.pos, e.op)
                  for e in events]
    guarded = Engine(pats, lateness=lateness)
    assert any(rt.entry_guard(a) is not None for rt in guarded.runtimes for a in range(len(rt.extract)))
    real = PatternRuntime.entry_guard
    PatternRuntime.entry_guard = lambda self, atom: None
    try:
        always = Engine(pats, lateness=lateness)
    finally:
        PatternRuntime.entry_guard = real
    assert _in_batches(guarded, events, 4) == _in_batches(always, events, 4)
    assert guarded.stats == always.stats
    assert guarded.state_size() == always.state_size()  # the inner nodes' tuples too
    for cp in pats:
        assert sorted(o.id for o in guarded.matches(cp.name)) == sorted(o.id for o in always.matches(cp.name))
        assert guarded.match_count(cp.name) == always.match_count(cp.name)
