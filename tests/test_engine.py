"""Engine behaviour of docs/language.md section 4: time, retention, retractions, state, leaks."""

import json
import pickle
import random

import pytest
from cephelp import PATTERNS

from cep.errors import LateEventError, UnknownRetractionError
from cep.event import Event
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine, StateError

CARD = (PATTERNS / "card_testing.pattern").read_text()


def txn(i, ts, card, amount, op="+"):
    return Event("Txn", ts, {"type": "Txn", "ts": ts, "card": card, "amount": amount}, str(i), op)


def run(engine, events):
    out = []
    for e in events:
        out.extend(engine.push(e))
    return out


def test_card_testing_emits_each_match_once():
    eng = Engine(compile_text(CARD))
    evs = [txn(1, 0, "c1", 10), txn(2, 10, "c1", 20), txn(3, 20, "c2", 5), txn(4, 30, "c1", 500),
           txn(5, 40, "c1", 600)]
    out = run(eng, evs)
    assert [(o.op, o.match) for o in out] == [
        ("+", {"card": "c1", "first_ts": 0, "amount": 500}),
        ("+", {"card": "c1", "first_ts": 0, "amount": 600}),
    ]
    assert len({o.id for o in out}) == 2
    assert eng.match_count("card_testing") == 2
    assert {o.key for o in out} == {("c1",)}  # the partition key, for keyed sinks


def test_window_expiry_emits_nothing_and_frees_state():
    eng = Engine(compile_text(CARD))
    out = run(eng, [txn(1, 0, "c1", 10), txn(2, 10, "c1", 20), txn(3, 4000, "c1", 500)])
    assert out == []
    # both small purchases left the window when the watermark passed 3600 + their ts
    assert eng.retained_events == 1


def test_late_event_raises_and_is_not_processed():
    eng = Engine(compile_text(CARD), lateness=5)
    eng.push(txn(1, 100, "c1", 10))
    eng.push(txn(2, 95, "c1", 10))  # exactly at the watermark: on time
    with pytest.raises(LateEventError):
        eng.push(txn(3, 94, "c1", 10))
    assert eng.stats["late"] == 1


def test_retraction_emits_minus_with_the_same_id():
    eng = Engine(compile_text(CARD), lateness=100)
    plus = run(eng, [txn(1, 0, "c1", 10), txn(2, 10, "c1", 20), txn(3, 30, "c1", 500)])
    minus = eng.push(txn(4, 10, "c1", 20, op="-"))
    assert [o.op for o in minus] == ["-"]
    assert minus[0].id == plus[0].id and minus[0].match == plus[0].match
    assert eng.match_count("card_testing") == 0
    with pytest.raises(UnknownRetractionError):
        eng.push(txn(5, 10, "c1", 20, op="-"))


def test_equal_events_are_two_events():
    eng = Engine(compile_text(CARD))
    out = run(eng, [txn(1, 0, "c1", 10), txn(2, 0, "c1", 10), txn(3, 5, "c1", 10), txn(4, 9, "c1", 900)])
    # s1 in {1,2}, s2 = 3, big = 4: two matches with different ids
    assert len(out) == 2 and len({o.id for o in out}) == 2


def test_no_leak_with_many_short_lived_keys():
    eng = Engine(compile_text(CARD))
    rnd = random.Random(7)
    ts = 0
    sizes = []
    for i in range(20000):
        ts += rnd.randint(0, 3)
        # each card lives for a few events only, then never appears again
        card = f"c{i // 4}"
        eng.push(txn(i, ts, card, rnd.choice([10, 50, 500])))
        if i % 5000 == 4999:
            sizes.append(eng.state_size())
    # one hour of events at ~1.5 s apart: about 2400 events in the window, whatever the stream length
    assert eng.retained_events < 3000
    assert max(sizes) < 3 * min(sizes)
    # after the window passes with no new keys, nothing of the old keys remains
    eng.push(txn(10**6, ts + 10_000, "last", 1))
    assert eng.retained_events == 1
    for rt in eng.runtimes:
        for n in rt.nodes:
            for idx in (n.P, n.S):
                if idx is not None:
                    assert len(idx.groups) <= 1


def test_state_dumps_and_loads_mid_stream():
    cps = compile_text(CARD)
    rnd = random.Random(3)
    evs = []
    ts = 0
    for i in range(400):
        ts += rnd.randint(0, 900)
        evs.append(txn(i, ts, rnd.choice("ab"), rnd.choice([10, 60, 700])))
    whole = run(Engine(cps), evs)
    first = Engine(cps)
    part1 = run(first, evs[:200])
    data = first.dumps()
    second = Engine.loads(data, cps)
    part2 = run(second, evs[200:])
    assert [(o.id, o.match) for o in part1 + part2] == [(o.id, o.match) for o in whole]
    assert isinstance(pickle.loads(pickle.dumps(data)), bytes)


def test_state_of_another_version_is_refused():
    cps = compile_text(CARD)
    data = Engine(cps).dumps()
    head, _, body = data.partition(b"\n")
    state = json.loads(body)
    state["format"] = 99
    bad = head + b"\n" + json.dumps(state).encode()
    with pytest.raises(StateError, match="format 99"):
        Engine.loads(bad, cps)
    with pytest.raises(StateError):
        Engine.loads(b"garbage", cps)
    other = compile_text(CARD.replace("400", "300"))
    with pytest.raises(StateError, match="different patterns"):
        Engine.loads(data, other)


def test_several_patterns_one_pass_and_routing():
    text = CARD + """
PATTERN smoke_heat
  SEQ(Smoke s, Heat h)
  WHERE s.area = h.area AND h.temp > 50
  WITHIN 5 min
"""
    eng = Engine(compile_text(text))
    out = run(eng, [
        Event("Smoke", 0, {"type": "Smoke", "ts": 0, "area": 1}, "1"),
        txn(2, 1, "c", 10),
        Event("Heat", 10, {"type": "Heat", "ts": 10, "area": 1, "temp": 70}, "3"),
        Event("Other", 11, {"type": "Other", "ts": 11}, "4"),
    ])
    assert [o.pattern for o in out] == ["smoke_heat"]
    assert out[0].match == {"s": {"type": "Smoke", "ts": 0, "area": 1},
                            "h": {"type": "Heat", "ts": 10, "area": 1, "temp": 70}}
    # the Other event reaches no atom and is not stored
    assert eng.retained_events == 3


def test_unknown_retraction_moves_no_watermark_so_no_decided_match_is_lost():
    """A refused retraction changes nothing: the decision its time would have made comes with the
    next record instead of being lost with the error (issue 15 review)."""
    eng = Engine(compile_text((PATTERNS / "unshipped_orders.pattern").read_text()))

    def order(i, ts, oid, op="+"):
        return Event("Order", ts, {"type": "Order", "ts": ts, "order_id": oid, "customer": "c"}, str(i), op)

    assert eng.push(order(1, 0, "o1")) == []
    far = 3 * 86400  # past the 2-day window: o1's absence of a Shipment is decided at this watermark
    with pytest.raises(UnknownRetractionError):
        eng.push(order(2, far, "never-inserted", op="-"))
    assert eng.watermark == 0
    decided = eng.push(order(3, far, "o2"))
    assert [(o.op, o.match["order_id"]) for o in decided] == [("+", "o1")]
