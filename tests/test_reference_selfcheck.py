"""Hand-checked cases for the reference evaluator itself (tests/reference.py).

The property tests trust the reference, so here it is checked against matches
worked out by hand from docs/language.md.
"""

from __future__ import annotations

from collections import Counter

import reference
from cephelp import PATTERNS

CARD_TESTING = (PATTERNS / "card_testing.pattern").read_text()


def txn(ts, card, amount=None, op=None):
    r = {"type": "Txn", "ts": ts, "card": card}
    if amount is not None:
        r["amount"] = amount
    if op:
        r["op"] = op
    return r


CARD_STREAM = [
    txn(1000, "c1", 10),  # 1
    txn(1100, "c1", 20),  # 2
    txn(1200, "c2", 30),  # 3: another card
    txn(1300, "c1", 500),  # 4: big -> (1, 2, 4)
    txn(1300, "c1", 50),  # 5: same time as 4, so it cannot come before 4
    txn(4700, "c1", 450),  # 6: big; 1 is out of the hour (3700 s), 2 is just in (3600 s) -> (2, 5, 6)
    txn(4800, "c2", 1000),  # 7: c2 has only one small purchase
    txn(4800, "c1"),  # 8: no amount: never a match
    txn(1150, "c1", 5),  # 9: late (watermark 4800 - 3600 = 1200)
    txn(1250, "c1", 7),  # 10: on time -> (1, 10, 4), (2, 10, 4), (2, 10, 6), (10, 5, 6)
    txn(1300, "c1", 50, op="-"),  # 11: retracts 5 -> drops (2, 5, 6) and (10, 5, 6)
]


def _positions(result):
    return Counter(positions for (_, positions, _), n in result.matches.items() for _ in range(n))


def test_card_testing_by_hand():
    r = reference.evaluate(CARD_TESTING, CARD_STREAM, lateness=3600)
    assert r.late == ["9"]
    assert r.bad == []
    assert _positions(r) == Counter(
        {("1", "2", "4"): 1, ("1", "10", "4"): 1, ("2", "10", "4"): 1, ("2", "10", "6"): 1}
    )
    matches = {positions: dict(frozen) for (_, positions, frozen) in r.matches}
    assert matches[("1", "2", "4")] == {
        "card": ("str", "c1"), "first_ts": ("int", 1000), "amount": ("int", 500)}
    assert matches[("2", "10", "6")] == {
        "card": ("str", "c1"), "first_ts": ("int", 1100), "amount": ("int", 450)}
    # final watermark 4800 - 3600 = 1200; the window keeps ts >= 1200 - 3600: everything
    assert r.watermark == 1200
    assert r.current == r.matches


def test_card_testing_without_lateness_expires():
    # lateness 0: record 6 moves the watermark to 4700, record 7 to 4800;
    # the retraction and the records before 4800 are late.
    r = reference.evaluate(CARD_TESTING, CARD_STREAM, lateness=0)
    assert r.late == ["9", "10", "11"]
    assert _positions(r) == Counter({("1", "2", "4"): 1, ("2", "5", "6"): 1})
    # retained at the end: ts >= 4800 - 3600 = 1200, so both matches have left the
    # state (record 1 at 1000 and record 2 at 1100 expired), though both were emitted
    assert r.watermark == 4800
    assert not r.current


PAIRS = """
PATTERN pair AND(A a, B b)
  WHERE a.k = b.k AND a.v + b.v > 3
  EMIT a.*, b.v, a.v * 2 AS dbl
PATTERN raw SEQ(A a, B b) WHERE a.k = b.k
"""

PAIR_STREAM = [
    {"type": "A", "ts": 5, "k": 1, "v": 2},  # 1
    {"type": "B", "ts": 3, "k": 1.0, "v": 2},  # 2: 1 = 1.0; AND has no order -> pair (1, 2)
    {"type": "B", "ts": 4, "k": True, "v": 9},  # 3: true is not 1
    {"type": "B", "ts": 6, "k": 1},  # 4: no v: a.v + b.v is null
    {"type": "A", "ts": 5, "k": 1, "v": 2},  # 5: equal to 1, a second event -> pair (5, 2)
    {"type": "B", "ts": 7, "k": 1, "v": "9"},  # 6: a string in arithmetic is null
    {"type": "B", "ts": 1, "k": 1, "v": 9},  # 7: late (7 - 5 = 2 > 1)
]


def test_and_nulls_duplicates_emit_by_hand():
    r = reference.evaluate(PAIRS, PAIR_STREAM, lateness=5)
    assert r.late == ["7"]
    pair = {p: dict(m) for (name, p, m) in r.matches if name == "pair"}
    assert set(pair) == {("1", "2"), ("5", "2")}
    assert pair[("1", "2")] == {
        "a.type": ("str", "A"), "a.ts": ("int", 5), "a.k": ("int", 1), "a.v": ("int", 2),
        "b.v": ("int", 2), "dbl": ("int", 4),
    }
    raw = Counter(p for (name, p, _) in r.matches if name == "raw")
    # SEQ: a.ts < b.ts and a.k = b.k: B 4 (ts 6) and B 6 (ts 7) follow both As (ts 5)
    assert raw == Counter({("1", "4"): 1, ("1", "6"): 1, ("5", "4"): 1, ("5", "6"): 1})
    # without EMIT: each alias maps to its whole event as read
    m = dict(next(m for (name, p, m) in r.matches if name == "raw" and p == ("1", "4")))
    assert m["a"] == reference.exact_key(PAIR_STREAM[0])
    assert m["b"] == reference.exact_key(PAIR_STREAM[3])


def test_retraction_removes_the_earliest_equal_event():
    recs = [
        {"type": "A", "ts": 1, "x": 1},
        {"type": "A", "ts": 1, "x": 1.0},  # equal by value
        {"type": "A", "ts": 1, "x": True},  # not equal: a boolean
        {"type": "A", "ts": 1, "x": 1, "op": "-"},
        {"type": "A", "ts": 1, "x": 2, "op": "-"},  # nothing to retract
    ]
    present, late, bad, wm = reference.replay(recs)
    assert [e.pos for e in present] == ["2", "3"]
    assert bad == ["5"]
    assert late == [] and wm == 1


def test_expressions_three_valued():
    ev = reference.evaluate_expr
    from cep.lang import ast

    x = ast.Attr("e", "x")
    env = {("e", "x"): None}
    assert ev(ast.Compare("=", x, ast.Literal(None)), env) is None
    assert ev(ast.Or(ast.Compare("=", x, ast.Literal(1)), ast.Literal(True)), env) is True
    assert ev(ast.And(ast.Compare("=", x, ast.Literal(1)), ast.Literal(False)), env) is False
    assert ev(ast.Arith("%", ast.Literal(-7), ast.Literal(3)), {}) == -1
    assert ev(ast.Arith("/", ast.Literal(6), ast.Literal(3)), {}) == 2
    assert ev(ast.Arith("/", ast.Literal(1), ast.Literal(0)), {}) is None
    assert ev(ast.Compare("<", ast.Literal(True), ast.Literal(2)), {}) is None


def test_within_units_are_exact():
    d = reference.duration
    from cep.lang import ast

    assert d(ast.Duration(1, "h"), "s") == 3600
    assert d(ast.Duration(0.29, "s"), "ms") == 290
    assert d(ast.Duration(5, None), "ms") == 5
    assert d(ast.Duration(2, "min"), "us") == 120_000_000
