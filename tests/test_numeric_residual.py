"""Residual filters over event times read them with no type test (``inline_conditions``'
``numeric``, ``iedyn._inline_residual``'s ``times``): card testing's ``big.ts - s1.ts <= 3600``
runs per candidate match, and a time is a number (checked when its record is decoded).

The 3-valued results must not change: a sure number minus a sure number is a number, but a
division (or modulo) by zero is still null, so its comparison is not true.
"""

from __future__ import annotations

import pytest

from cep.lang import ast
from cep.lang.compiler import compile_files
from cep.lang.expr import inline_conditions
from cep.runtime.engine import Engine


def _eval(cond: str, env: dict, values: dict) -> bool:
    try:
        return bool(eval(cond, {**env}, dict(values)))  # noqa: S307 (generated test source)
    except OverflowError:
        return False


def _access(a: ast.Attr) -> str:
    return f"{a.alias}_{a.name}"


A, B = ast.Attr("a", "ts"), ast.Attr("b", "ts")


@pytest.mark.parametrize("op, a, b, want", [
    ("-", 5000, 1000, False), ("-", 4000, 1000, True), ("+", 1000, 2000, True), ("*", 100, 100, False),
    ("/", 4000, 0, False), ("%", 4000, 0, False), ("/", 3600, 1, True), ("%", 7, 3, True),
])
def test_sure_numbers_need_no_type_test_and_keep_their_3vl(op: str, a: int, b: int, want: bool) -> None:
    expr = ast.Compare("<=", ast.Arith(op, A, B), ast.Literal(3600))
    (plain,), env0 = inline_conditions([expr], _access)
    (sure,), env1 = inline_conditions([expr], _access, numeric=lambda attr: attr.name == "ts")
    assert "type(" in plain and "type(" not in sure
    values = {"a_ts": a, "b_ts": b}
    assert _eval(sure, env1, values) is want
    assert _eval(plain, env0, values) is want


@pytest.mark.parametrize("a, b, want", [(5, 5, False), (5, 4, True)])
def test_a_negated_sure_number_is_one(a: int, b: int, want: bool) -> None:
    """``-b.ts <> -a.ts`` (found by the engine's property test: the negation had an empty guard)."""
    expr = ast.Compare("!=", ast.Neg(B), ast.Neg(A))
    (sure,), env = inline_conditions([expr], _access, numeric=lambda attr: attr.name == "ts")
    assert "type(" not in sure
    assert _eval(sure, env, {"a_ts": a, "b_ts": b}) is want


def test_card_testings_residual_reads_the_times_with_no_type_test() -> None:
    eng = Engine(compile_files(["patterns/card_testing.pattern"]), lateness=0)
    reads, cond, _env = eng.runtimes[0]._residual_inline
    assert "type(" not in cond and "3600" in cond
