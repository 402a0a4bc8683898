"""SumSortedMap against a plain dict: weights, range sums and range iteration."""

from hypothesis import given, settings
from hypothesis import strategies as st

import cep.sumlist as sumlist
from cep.sumlist import SumSortedMap

ops = st.lists(
    st.tuples(st.integers(0, 60), st.integers(-3, 4), st.integers(-2, 62), st.integers(-2, 62),
              st.booleans(), st.booleans()),
    max_size=300,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_matches_a_dict(steps):
    old = sumlist.LOAD
    sumlist.LOAD = 4  # many blocks: splits and block removals happen often
    try:
        m = SumSortedMap()
        ref: dict[int, int] = {}
        for key, w, lo, hi, lo_incl, hi_incl in steps:
            if w <= 0 and key in ref:
                m.add(key, -ref.pop(key))
                m.discard(key)
            elif w > 0:
                ref[key] = ref.get(key, 0) + w
                payload = m.add(key, w)
                payload[key] = ref[key]

            def inside(k, lo=lo, hi=hi, lo_incl=lo_incl, hi_incl=hi_incl):
                return (k > lo or (lo_incl and k == lo)) and (k < hi or (hi_incl and k == hi))

            assert m.range_sum(lo, lo_incl, hi, hi_incl) == sum(v for k, v in ref.items() if inside(k))
            got = [next(iter(p)) for p in m.irange(lo, lo_incl, hi, hi_incl)]
            assert got == sorted(k for k in ref if inside(k))
            assert [next(iter(p)) for p in m.range_payloads(lo, lo_incl, hi, hi_incl)] == got
            assert m.total() == sum(ref.values())
            assert len(m) == len(ref)
            assert m.range_sum(None, True, None, True) == m.total()
    finally:
        sumlist.LOAD = old


def test_pickles_and_rebuilds_sums():
    import pickle

    m = SumSortedMap()
    for k in range(1000):
        m.add(k, k % 7 + 1)
    m2 = pickle.loads(pickle.dumps(m))
    assert m2.range_sum(100, True, 900, False) == m.range_sum(100, True, 900, False)
    assert m2.total() == sum(k % 7 + 1 for k in range(1000))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3), st.booleans()), max_size=400))
def test_incr_keeps_payloads_and_weights(steps):
    old = sumlist.LOAD
    sumlist.LOAD = 4
    try:
        m = SumSortedMap()
        ref: dict[int, dict[int, int]] = {}
        for key, item, insert in steps:
            cur = ref.get(key, {})
            if insert:
                m.incr(key, item, 1)
                ref.setdefault(key, {})[item] = cur.get(item, 0) + 1
            elif item in cur:
                m.incr(key, item, -1)
                cur[item] -= 1
                if not cur[item]:
                    del cur[item]
                if not cur:
                    del ref[key]
            assert [(k, w, dict(p)) for k, w, p in m.items()] == [
                (k, sum(v.values()), v) for k, v in sorted(ref.items())
            ]
            assert m.total() == sum(sum(v.values()) for v in ref.values())
            assert m.range_sum(10, True, 30, False) == sum(
                sum(v.values()) for k, v in ref.items() if 10 <= k < 30
            )
            assert len(m) == len(ref)
    finally:
        sumlist.LOAD = old
