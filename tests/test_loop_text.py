"""The batch loop's text for one attribute's number-guarded filters (``cep.runtime.handler._filters``,
``_number_block``): the number test once, as an ``if``, each filter inside it and false outside.

Checked here: which conditions take that form (one attribute, each condition the guard ``and`` one
parenthesised test of it) and which keep the hoisted form; and over card testing's stream with
amounts of every JSON type (numbers, numeric strings, null, booleans, missing), the fused loop's
matches, kept events and counters equal those of the reference pattern run one event at a time.
"""

from __future__ import annotations

import orjson
import pytest
from cephelp import PATTERNS
from hypothesis import given, settings
from hypothesis import strategies as st

from cep.io.readers import make_decoder
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine
from cep.runtime.handler import _balanced, _number_block

G = "(type(F0) is int or type(F0) is float)"


@pytest.mark.parametrize("conds, want", [
    ([f"({G} and ((F0 < 100)))", f"({G} and ((F0 > 400)))"], ("F0", ["((F0 < 100))", "((F0 > 400))"])),
    ([f"({G} and ((F0 < 1) or (F0 > 2)))"], ("F0", ["((F0 < 1) or (F0 > 2))"])),
    ([f"({G} and (F0 < 1)) or ({G} and (F0 > 2))"], None),  # two guarded tests, not one
    ([f"({G} and (F0 < 1))", "(F0 == 'x')"], None),  # a condition without the guard
    ([f"({G} and ({G}))"], None),  # the guard inside
    ([], None),
])
def test_which_conditions_take_the_number_block(conds, want):
    assert _number_block(conds, ["F0"]) == want
    assert _number_block(conds, ["F0", "F1"]) is None  # two attributes read


def test_balanced():
    assert _balanced("(a < (b))") and _balanced("((a) or (b))")
    assert _balanced("(')')")  # (a parenthesis in a string literal)
    assert not _balanced("(a) and (b)") and not _balanced("(a") and not _balanced("(a)) or ((b)")


CARD = (PATTERNS / "card_testing.pattern").read_text()
# amounts of every JSON type (a float is finite: JSON has no infinity or NaN)
_AMOUNTS = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.integers(-10**6, 10**6), st.sampled_from(
    ["50", "500", None, True, False, "", 50, 500, 99.99, 400.01, 100, 400]), st.just(KeyError))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), _AMOUNTS), max_size=30))
def test_the_fused_loop_filters_every_amount_as_the_engine_one_event_at_a_time(rows):
    recs = []
    for ts, (card, amount) in enumerate(rows, 1):
        r = {"type": "Txn", "ts": ts, "card": card}
        if amount is not KeyError:
            r["amount"] = amount
        recs.append(r)
    lines = [orjson.dumps(r) for r in recs]
    patterns = compile_text(CARD)
    fused = Engine(patterns, lateness=0)
    parsed = make_decoder().plain(lines)
    assert parsed is not None or not lines
    took, outs = fused.push_records(parsed or [], 1)
    assert took == len(lines)
    ref = Engine(patterns, lateness=0)
    decode = make_decoder()
    want = []
    for n, raw in enumerate(lines, 1):
        want += ref.push(decode(str(n), raw))
    assert outs == want
    assert sorted(fused.events) == sorted(ref.events) and fused.stats == ref.stats
    # and what the pattern says, by hand: a number (not a boolean) below 100 twice, then above 400
    def num(r):
        a = r.get("amount")
        return a if type(a) in (int, float) else None
    small = [r for r in recs if num(r) is not None and num(r) < 100]
    oracle = sorted((s1["ts"], s2["ts"], b["ts"]) for b in recs if num(b) is not None and num(b) > 400
                    for s1 in small for s2 in small
                    if s1["card"] == s2["card"] == b["card"] and s1["ts"] < s2["ts"] < b["ts"] <= s1["ts"] + 3600)
    assert len(outs) == len(oracle)
    assert sorted((o.match["first_ts"], o.match["amount"]) for o in outs) == sorted(
        (t1, recs[t3 - 1]["amount"]) for t1, _t2, t3 in oracle)
