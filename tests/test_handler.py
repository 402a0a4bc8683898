"""The engine's generated per-type handlers (cep/runtime/handler.py): what they fuse, and that the
fused forms give what the plain ones give (the property tests compare whole runs with the reference)."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine import CARD, txn

from cep import codegen
from cep.errors import LateEventError, UnknownRetractionError
from cep.event import Event, match_id, match_id_fn
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine


def _handler_source(text: str, etype: str) -> str:
    """The branch of the engine's generated batch function that pushes an event of type ``etype``."""
    mark = codegen.mark()
    Engine(compile_text(text))
    (src,) = [s for name, s in codegen.defined_since(mark) if name.startswith("<cep engine: push a batch (")]
    lines = src.splitlines()
    # the first of the loop's two copies (an engine that owns its watermark); one type: ``e.type``
    start = next(i for i, line in enumerate(lines) if line.strip().endswith((f"_typ == {etype!r}:",
                                                                              f"e.type == {etype!r}:")))
    pad = len(lines[start]) - len(lines[start].lstrip())
    end = next(i for i in range(start + 1, len(lines)) if len(lines[i]) - len(lines[i].lstrip()) <= pad)
    return "\n".join(lines[start:end])


def test_the_card_testing_handler_reads_amount_once_and_builds_one_leaf_tuple():
    src = _handler_source(CARD, "Txn")
    src = src[src.index("s = _serial"):]  # the insert (the inline expiry before it builds its own tuple)
    assert src.count("f.get('amount')") == 1  # three filters, one read
    # s1's and s2's filter is the same test: once for a float amount (a float constant, a branch:
    # CPython's compare-and-jump of two floats), once for an int (``_number_block``)
    assert src.count("p0 = True if (F0 < 100.0) else False") == 1
    assert src.count("p0 = True if (F0 < 100) else False") == 1 and src.count("< 100") == 2
    assert len(re.findall(r"\bt\d+ = \(ts, ", src)) == 1  # s1, s2 and big share the tuple (ts, card, serial)
    # each atom's update path: s2's leaf update inline, the rest of its path past the gate
    # (``PatternRuntime.insert_inline``)
    assert src.count("ch = prop") == 2 and src.count("ch = rest") == 1


def test_an_event_no_filter_passes_is_not_kept_but_takes_a_serial():
    eng = Engine(compile_text(CARD))
    assert eng.push(txn(1, 1, "c", 250)) == []  # neither small nor large
    assert eng.retained_events == 0 and eng._serial == 1
    assert eng.stats["events"] == 1 and eng.stats["inserted"] == 0


def test_counters_and_emitted_counts_through_the_views():
    eng = Engine(compile_text(CARD), lateness=0)
    outs = eng.push_batch([txn(1, 1, "c", 10), txn(2, 2, "c", 20), txn(3, 3, "c", 500), txn(4, 5000, "d", 10)])
    assert [o.pattern for o in outs] == ["card_testing"]
    assert outs[0].id == match_id("card_testing", ("1", "2", "3")) and outs[0].key == ("c",)
    assert eng.matches_emitted == {"card_testing": {"+": 1, "-": 0}}
    s = eng.stats
    # the fourth event's watermark expires the first three before it is inserted
    assert (s["events"], s["inserted"], s["expired"], s["peak_retained"]) == (4, 4, 3, 3)
    with pytest.raises(LateEventError):
        eng.push(txn(5, 1, "c", 10))
    assert eng.stats["late"] == 1
    restored = Engine.loads(eng.dumps(), compile_text(CARD))
    assert restored.stats == eng.stats and restored.matches_emitted == eng.matches_emitted


def test_a_filter_too_deep_to_inline_is_called():
    deep = " + ".join(["a.x"] * 40)
    text = f"PATTERN deep\n  SEQ(A a, B b)\n  WHERE {deep} > 40 AND b.y = 1\n  WITHIN 10 s\n"
    src = _handler_source(text, "A")
    assert "(e)" in src and "f.get('x')" not in src  # the compiled filter, called
    eng = Engine(compile_text(text))
    ev = [Event("A", 1, {"x": 2}, "1"), Event("A", 2, {"x": 1}, "2"), Event("B", 3, {"y": 1}, "3")]
    assert [o.id for o in eng.push_batch(ev)] == [match_id("deep", ("1", "3"))]


def test_match_ids_from_the_seeded_hash_equal_match_id():
    for k in (1, 2, 3):
        events = [Event("T", i, {}, f"{i}:{i * 7}") for i in range(k)]
        assert match_id_fn("p", k)(events) == match_id("p", tuple(e.pos for e in events))
    events = [Event("T", i, {}, str(i)) for i in range(5)]  # another number of events: the general path
    assert match_id_fn("p", 3)(events) == match_id("p", tuple(e.pos for e in events))


# ------------------------------------------------------------------ the expiry driver's due test

TWO_WINDOWS = """
PATTERN long_w
  SEQ(Txn s1, Txn big)
  WHERE s1.amount < 100 AND big.amount > 400
  PARTITION BY card
  WITHIN 30 s

PATTERN short_w
  SEQ(Txn a, Txn b)
  WHERE a.amount < b.amount
  PARTITION BY card
  WITHIN 5 s
"""


def _held_times(eng: Engine, qi: int) -> list:
    """The times of the retained events that window queue ``qi``'s atoms hold."""
    _q, _ri, qmask = eng._windowed[qi]
    return [eng.events[s].ts for s, m in eng._holders.items() if m & qmask]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from("cd"), st.sampled_from([10, 50, 500, 900]),
                          st.integers(0, 4)), min_size=1, max_size=40))
def test_expiry_runs_exactly_when_something_is_due(steps):
    """The handler calls ``expire`` only when a window's oldest time (``Engine._oldest``) is before
    ``wm - w``: after every event nothing due is left, ``_oldest`` never passes a held event, and
    the outputs and counters are those of an engine that runs the expiry on every move."""
    pats = compile_text(TWO_WINDOWS)
    eng, always = Engine(pats, lateness=3), Engine(pats, lateness=3)
    ts, kept = 0, []
    for i, (step, card, amount, action) in enumerate(steps):
        ts += step
        if action == 0 and kept:  # a retraction of a record still inside the lateness
            e = kept.pop()
            ev = txn(e.pos, e.ts, e.fields["card"], e.fields["amount"], "-")
        else:  # disorder within the lateness: up to 3 s back
            ev = txn(i, max(0, ts - action % 4), card, amount)
        for q in range(len(always._oldest)):
            always._oldest[q] = -math.inf  # the due test always true: the expiry runs on every move
        try:
            got = eng.push(ev)
        except (LateEventError, UnknownRetractionError) as err:
            with pytest.raises(type(err)):
                always.push(ev)
            continue
        assert got == always.push(ev)
        if ev.op == "+" and eng.watermark is not None and ev.ts >= eng.watermark:
            kept.append(ev)
        kept = [k for k in kept if k.ts >= eng.watermark]
        for qi in range(len(eng._windows)):
            times = _held_times(eng, qi)
            assert all(t >= eng.watermark - eng._windows[qi] for t in times)  # nothing due is left
            assert all(eng._oldest[qi] <= t for t in times)  # a lower bound of the held times
    assert eng.stats == always.stats and eng.retained_events == always.retained_events


def test_each_types_inlined_filter_keeps_its_own_constants():
    """The types' bodies share one generated batch function: p1's constant set (1) must not
    replace p0's (0) (found by hypothesis in test_iedyn_merge: p0 matched nothing)."""
    text = ("PATTERN p0\n  SEQ(A a)\n  WHERE a.x IN (0)\n"
            "PATTERN p1\n  AND(B a)\n  WHERE a.x IN (1)\n")
    eng = Engine(compile_text(text))
    rows = [("A", 0), ("B", 1), ("A", 0), ("B", 0), ("A", 1)]
    outs = eng.push_batch([Event(t, i, {"x": x}, str(i)) for i, (t, x) in enumerate(rows, 1)])
    assert [o.pattern for o in outs] == ["p0", "p1", "p0"]


MIXED = """PATTERN mixed
  SEQ(T a, T b, U c)
  WHERE a.x = b.y AND b.y = c.y
  WITHIN 10
  EMIT a.x AS x, b.ts AS bt, c.ts AS ct
"""


def test_the_inline_expiry_of_an_entry_without_a_leaf_tuple_keeps_the_pushed_event():
    """T's atoms have different leaf tuples, so T's queue entries carry none and the batch loop's
    inline expiry reads the expired event into ``e``: the U event pushed at that watermark move
    must still be the one inserted (and match)."""
    mark = codegen.mark()
    eng = Engine(compile_text(MIXED))
    (src,) = [s for name, s in codegen.defined_since(mark) if name.startswith("<cep engine: push a batch (")]
    assert "append((ts, s, None))" in src and "_kept = e" in src
    evs = [Event("T", 1, {"x": 7, "y": 9}, "1"), Event("T", 3, {"x": 1, "y": 8}, "2"),
           Event("T", 4, {"x": 5, "y": 1}, "3"), Event("U", 12, {"y": 1}, "4")]
    outs = eng.push_batch(evs)  # U's move (watermark 12, limit 2) expires T@1 alone: the inline path
    assert [(o.op, o.match) for o in outs] == [("+", {"x": 1, "bt": 4, "ct": 12})]
    assert outs[0].id == match_id("mixed", ("2", "3", "4"))
    assert eng.stats["expired"] == 1 and eng.retained_events == 3


def test_no_watermark_and_no_highest_time_before_the_first_event():
    """The batch loop's stand-ins for None (``NOWM``, ``NOMX``) never reach the engine: an empty batch
    leaves both None; with a source-owned watermark only the highest time moves, and the late test
    starts once the source moves the watermark."""
    eng = Engine(compile_text(CARD))
    assert eng.push_batch([]) == [] and eng.watermark is None and eng.max_ts is None
    assert eng.dumps() == Engine(compile_text(CARD)).dumps()
    src = Engine(compile_text(CARD), own_watermark=False)
    src.push_batch([txn(1, 5, "c", 10), txn(2, 3, "c", 20)])
    assert src.watermark is None and src.max_ts == 5
    src.advance_watermark(4)
    with pytest.raises(LateEventError):
        src.push(txn(3, 3, "c", 30))
    assert src.push(txn(4, 4, "c", 500)) == [] and src.max_ts == 5  # 3 < 4: not a match (s2 at 3 was before)


@pytest.mark.parametrize("lateness", [0, 0.0, 2])
def test_the_watermark_keeps_the_type_of_time_minus_lateness(lateness):
    """A lateness of integer 0 makes the loop's watermark the time itself; 0.0 still makes it a float."""
    eng = Engine(compile_text(CARD), lateness=lateness)
    eng.push_batch([txn(1, 7, "c", 10)])
    assert eng.watermark == 7 - lateness and type(eng.watermark) is type(7 - lateness)
    assert eng.max_ts == 7 and type(eng.max_ts) is int


def test_the_in_order_queue_holds_the_leaf_tuples_themselves():
    """Card testing's window queue holds each kept event's leaf tuple (time, card, serial): no entry
    tuple per event (``handler._entry_layout``); out-of-order events go to the heap as entries."""
    from cep.runtime.handler import _entry_layout

    eng = Engine(compile_text(CARD), lateness=10)
    assert _entry_layout(eng, 0) == (0, 2, 3)
    eng.push_batch([txn(1, 1, "c", 10), txn(2, 2, "d", 250), txn(3, 5, "c", 500), txn(4, 4, "c", 20)])
    assert list(eng._in_order[0]) == [(1, "c", 0), (5, "c", 2)]
    assert eng._expiry[0] == [(4, 3, (4, "c", 3))]
    # a window of two event types whose tuples differ keeps entries
    two = Engine(compile_text("PATTERN p SEQ(A a, B b) WHERE a.k = b.k WITHIN 5"))
    two_layout = _entry_layout(two, 0)
    two.push_batch([Event("A", 1, {"k": 1}, "1"), Event("B", 2, {"k": 1}, "2")])
    assert all(len(x) == (3 if two_layout is None else two_layout[2]) for x in two._in_order[0])


def test_an_event_with_a_null_join_value_is_not_kept_and_makes_no_leaf_tuple():
    """``handler._plain_insert``: the null test on the value read (before the tuple is made) keeps the
    old behaviour: the event takes a serial, nothing holds it, the next event's match is unchanged."""
    src = _handler_source(CARD, "Txn")
    assert "if a1 is None:" in src and "t[1] is None" not in src
    eng = Engine(compile_text(CARD))
    outs = eng.push_batch([txn(1, 1, None, 10), txn(2, 2, "c", 10), Event("Txn", 3, {"amount": 20}, "3"),
                           txn(4, 4, "c", 20), txn(5, 5, "c", 500)])
    assert eng._serial == 5 and sorted(eng.events) == [1, 3, 4]
    assert [o.id for o in outs] == [match_id("card_testing", ("2", "4", "5"))]
