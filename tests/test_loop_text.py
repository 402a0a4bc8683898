"""The batch loop's text for one attribute's comparisons with numbers (``cep.runtime.handler._filters``,
``cep.lang.expr.inline_number_tests``): the number test once, as an ``if``, each filter inside it and
false outside.

Checked here: which conditions take that form (one attribute compared with number constants through
AND, OR and NOT) and which keep the guarded form; that the form's truth equals the compiled
condition's (3VL: a comparison with a non-number is unknown) for random conditions and values of every
JSON type; and over card testing's stream with amounts of every JSON type (numbers, numeric strings,
null, booleans, missing), the fused loop's matches, kept events and counters equal those of the
reference pattern run one event at a time.
"""

from __future__ import annotations

import orjson
import pytest
from cephelp import PATTERNS
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cep.io.readers import make_decoder
from cep.lang import ast
from cep.lang.compiler import compile_text
from cep.lang.expr import compile_condition, inline_number_tests
from cep.runtime.engine import Engine


def _filters(where: str) -> list[ast.Expr]:
    """The atoms' filters of ``SEQ(T a, T b)`` with ``where``, in alias order."""
    (cp,) = compile_text(f"PATTERN p SEQ(T a, T b) WHERE {where}")
    return [a.filter_expr for a in cp.atoms if a.filter is not None]


def _by_name(attr: ast.Attr) -> str:
    return {"amount": "F0", "other": "F1"}[attr.name]


@pytest.mark.parametrize("where, want", [
    ("a.amount < 100 AND b.amount > 400", ["(F0 < 100)", "(F0 > 400)"]),  # two aliases, one attribute
    ("a.amount >= 10 AND a.amount <= 30", ["((F0 >= 10) and (F0 <= 30))"]),  # one filter, a chain
    ("(a.amount < 1 OR a.amount > 2) AND NOT b.amount = -3", ["((F0 < 1) or (F0 > 2))", "(not (F0 == -3))"]),
    ("a.amount < 1 AND a.other > 2", None),  # two attributes
    ("a.amount = 'x'", None),  # a string constant
    ("a.amount < 1 AND b.amount IN (1, 2)", None),  # not a comparison
    ("a.amount = a.amount AND b.amount < 1", None),  # an attribute with itself: true of strings too
])
def test_which_conditions_take_the_number_block(where, want):
    got = inline_number_tests(_filters(where), _by_name)
    if want is None:
        assert got is None
    else:
        v, tests, env = got
        assert v == "F0" and [_literal(t, env) for t in tests] == want


def _literal(test: str, env: dict) -> str:
    """``test`` with its constants' names replaced by their values (the names are the generator's)."""
    for name in sorted(env, key=len, reverse=True):
        test = test.replace(name, repr(env[name]))
    return test


# (constants about 2**53: the float tests write an integer as a float only up to it, where a float holds it)
_LEAF = st.builds(lambda op, c: ast.Compare(op, ast.Attr("a", "amount"), ast.Literal(c)),
                  st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
                  st.one_of(st.integers(-5, 5), st.floats(-5, 5), st.just(10**400 // 10**390),
                            st.sampled_from([2**53, 2**53 + 1, -(2**53), -(2**53) - 1])))
_CONDITION = st.recursive(_LEAF, lambda sub: st.one_of(
    st.builds(ast.And, sub, sub), st.builds(ast.Or, sub, sub), st.builds(ast.Not, sub)), max_leaves=6)
_VALUES = st.one_of(st.integers(-6, 6), st.integers(-10**30, 10**30), st.floats(allow_nan=False), st.none(),
                    st.booleans(), st.sampled_from(["", "3", "x", 2.0**53, 2.0**53 + 2, -(2.0**53), -(2.0**53) - 2,
                                                    2**53 + 1, 1e10, -0.0]), st.just([1]))


@settings(max_examples=300, deadline=None)
@given(_CONDITION, st.lists(_VALUES, min_size=1, max_size=8))
@example(ast.Compare("<", ast.Attr("a", "amount"), ast.Literal(2**53 + 1)), [2.0**53])  # no float holds 2**53 + 1
def test_the_number_block_is_the_conditions_truth(cond, values):
    """The block's tests (``_number_block``: the float branch's with the float constants, which
    raise nothing, the int branch's with the constants as written) against the compiled condition."""
    v, (test,), env = inline_number_tests([cond], _by_name)
    fv, (ftest,), fenv = inline_number_tests([cond], _by_name, "_f", floats=True)
    assert fv == v
    compiled = compile_condition(cond, lambda attr: "amount", ["amount"])
    for x in values:
        if type(x) is float:
            got = eval(ftest, dict(fenv), {v: x})
        elif type(x) is int:
            try:
                got = eval(test, dict(env), {v: x})
            except OverflowError:
                got = False
        else:
            got = False
        assert bool(got) is compiled(x), (test, ftest, x)


def test_the_float_tests_write_integer_constants_as_floats_where_exact():
    cond = _filters("a.amount < 100 AND b.amount >= -9007199254740993 AND b.amount != 0.5")
    _v, tests, _env = inline_number_tests(cond, _by_name, floats=True)
    assert tests == ["(F0 < 100.0)", "((F0 >= -9007199254740993) and (F0 != 0.5))"]


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
