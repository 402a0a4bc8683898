"""SumSortedMap against a plain model: weights, range sums, range iteration and items, both layouts."""

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cep.runtime.sumlist as sumlist
from cep.runtime.sumlist import SumSortedMap

steps_strategy = st.lists(
    st.tuples(st.integers(0, 40), st.integers(0, 3), st.booleans(),
              st.integers(-2, 42), st.integers(-2, 42), st.booleans(), st.booleans()),
    max_size=400,
)


@pytest.fixture(params=[(4, 4), (256, 256)], ids=["blocked", "flat"], scope="module")
def small_layout(request):
    flat_max, load = request.param
    old = sumlist.FLAT_MAX, sumlist.LOAD
    sumlist.FLAT_MAX, sumlist.LOAD = flat_max, load
    yield
    sumlist.FLAT_MAX, sumlist.LOAD = old


def check_against_model(steps):
    m = SumSortedMap()
    ref: dict[tuple[int, int], int] = {}  # (key, item) -> weight
    for key, item, insert, lo, hi, lo_incl, hi_incl in steps:
        if insert:
            m.incr(key, item, 1)
            ref[(key, item)] = ref.get((key, item), 0) + 1
        elif (key, item) in ref:
            m.incr(key, item, -1)
            ref[(key, item)] -= 1
            if not ref[(key, item)]:
                del ref[(key, item)]
        else:
            with pytest.raises(KeyError):
                m.incr(key, item, -1)

        def inside(k, lo=lo, hi=hi, lo_incl=lo_incl, hi_incl=hi_incl):
            return (k > lo or (lo_incl and k == lo)) and (k < hi or (hi_incl and k == hi))

        expect = sorted((k, i, w) for (k, i), w in ref.items())
        assert sorted(m.entries()) == expect
        assert [k for k, _, _ in m.entries()] == sorted(k for k, _, _ in expect)
        assert m.range_sum(lo, lo_incl, hi, hi_incl) == sum(w for k, _, w in expect if inside(k))
        want = sorted((i, w) for k, i, w in expect if inside(k))
        assert sorted(m.range_items(lo, lo_incl, hi, hi_incl)) == want
        assert sorted(m.iter_range(lo, lo_incl, hi, hi_incl)) == want
        assert sorted(m.range_tuples(lo, lo_incl, hi, hi_incl)) == sorted(i for i, _w in want)
        assert m.total() == sum(ref.values())
        assert len(m) == len(ref)
    return m


@settings(max_examples=120, deadline=None)
@given(steps_strategy)
def test_matches_a_model(small_layout, steps):
    check_against_model(steps)


def test_in_order_appends_and_front_removals_grow_and_shrink():
    m = SumSortedMap()
    for k in range(3000):
        m.incr(k, ("t", k), 1)
        if k >= 1000:
            m.incr(k - 1000, ("t", k - 1000), -1)
    assert len(m) == 1000
    assert m.range_sum(2500, True, 2600, False) == 100
    assert m.range_sum(None, True, 1999, True) == 0
    m2 = pickle.loads(pickle.dumps(m))
    assert list(m2.entries()) == list(m.entries())
    assert m2.range_sum(2100, False, 2900, True) == m.range_sum(2100, False, 2900, True)
