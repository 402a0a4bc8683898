"""The range-aggregate structure of Kleene gaps against a naive sorted list (spec 7.3 rules)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from cep.runtime import aggtree
from cep.runtime.aggtree import RangeAggregates, result

VALUES = st.one_of(st.none(), st.integers(-5, 5), st.floats(-1e3, 1e3, allow_nan=False), st.booleans(),
                   st.sampled_from(["a", "b"]), st.just([1]))


def _naive(values: list, fn: str):
    nums = [v for v in values if type(v) in (int, float)]
    if fn == "count":
        return sum(1 for v in values if v is not None)
    if not nums:
        return None
    if fn == "min":
        return min(nums)  # first of equal minima
    if fn == "max":
        return max(nums)
    total = sum(Fraction(v) for v in nums)
    if fn == "sum":
        return int(total) if all(type(v) is int for v in nums) else float(total)
    return float(total / len(nums))


def _same(a, b) -> bool:
    return a == b and type(a) is type(b)


OPS = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "remove"]), st.integers(0, 60), VALUES),
               max_size=400)


@settings(max_examples=150, deadline=None)
@given(OPS, st.integers(0, 70), st.integers(0, 70), st.sampled_from([2, 3, 64]))
def test_range_aggregates_match_a_naive_list(ops, lo, hi, load):
    old = aggtree.LOAD
    aggtree.LOAD = load
    try:
        ra = RangeAggregates(2)
        naive: dict = {}
        serial = 0
        for op, ts, v in ops:
            if op == "add":
                key = (ts, serial)
                serial += 1
                ra.add(key, (v, ts))
                naive[key] = (v, ts)
            elif naive:
                key = sorted(naive)[ts % len(naive)]
                ra.remove(key)
                del naive[key]
        lo_k, hi_k = (lo, -1), (hi, -1)
        inside = [naive[k] for k in sorted(naive) if lo_k <= k < hi_k]
        assert ra.count(lo_k, hi_k) == len(inside)
        assert len(ra) == len(naive)
        cols = ra.columns(lo_k, hi_k, [0, 1])
        for c in (0, 1):
            vals = [x[c] for x in inside]
            for fn in ("count", "sum", "avg", "min", "max"):
                assert _same(result(fn, cols[c]), _naive(vals, fn)), (fn, c, vals)
        assert ra.first(lo_k, hi_k, 0) == ((True, inside[0][0]) if inside else (False, None))
        assert ra.last(lo_k, hi_k, 0) == ((True, inside[-1][0]) if inside else (False, None))
        assert ra.items(lo_k, hi_k) == [k for k in sorted(naive) if lo_k <= k < hi_k]
    finally:
        aggtree.LOAD = old


def test_float_sums_do_not_depend_on_the_order_of_updates():
    ra = RangeAggregates(1)
    for i, v in enumerate([1e16, 1.0, -1e16, 0.1, 0.2]):
        ra.add((i, i), (v,))
    ra.remove((0, 0))
    ra.add((0, 9), (1e16,))
    col = ra.columns((0, -1), (9, 0), [0])[0]
    assert result("sum", col) == float(Fraction(1.0) + Fraction(0.1) + Fraction(0.2))
