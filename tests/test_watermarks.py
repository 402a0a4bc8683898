"""The per-partition event-time clock of partitioned sources (``cep.io.watermarks.PartitionClock``).

What must hold (Flink's per-split watermarks with ``withIdleness``): the low mark is the minimum over the
active partitions of the largest event time each delivered; a partition that delivered nothing holds it back
until it is idle; it never goes back; an idle partition that delivers again counts again.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cep.io.watermarks import PartitionClock


def test_minimum_over_partitions_and_silent_partitions_hold_it_back():
    c = PartitionClock([0, 1, 2])
    assert not c.observe(0, 100) and c.low is None
    assert not c.observe(1, 50) and c.low is None  # partition 2 has delivered nothing
    assert c.observe(2, 70) and c.low == 50
    assert not c.observe(0, 200)  # not the minimum: no change
    assert c.observe(1, 300) and c.low == 70
    assert not c.observe(1, 10)  # older than the partition's max: nothing moves


def test_idle_partitions_are_left_out_and_come_back():
    c = PartitionClock([0, 1])
    c.observe(0, 100)
    assert c.low is None
    assert c.set_idle(1) and c.low == 100  # an empty partition no longer stalls the watermark
    assert not c.set_idle(1)
    c.observe(1, 40)  # active again, behind: the minimum drops, the low mark does not go back
    assert c.low == 100 and 1 not in c.idle
    assert not c.observe(0, 150)  # partition 1 (at 40) holds the minimum
    assert c.observe(1, 120) and c.low == 120


def test_every_partition_idle_holds_the_watermark():
    c = PartitionClock([0, 1])
    c.observe(0, 10)
    c.observe(1, 20)
    assert c.low == 10
    c.set_idle(0)
    assert c.low == 20
    assert not c.set_idle(1) and c.low == 20


def test_state_round_trip():
    c = PartitionClock([0, 1, 2])
    for p, t in [(0, 5), (1, 9), (2, 7), (0, 11)]:
        c.observe(p, t)
    d = PartitionClock([0, 1, 2])
    d.restore(c.state())
    assert d.low == c.low == 7 and d.max_ts == c.max_ts
    assert d.observe(2, 10) and d.low == 9


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50)), max_size=60))
def test_low_is_the_running_minimum_of_partition_maxima(records):
    c = PartitionClock(range(4))
    maxima: dict[int, int] = {}
    low = None
    for p, t in records:
        moved = c.observe(p, t)
        maxima[p] = max(maxima.get(p, t), t)
        if len(maxima) == 4:
            m = min(maxima.values())
            if low is None or m > low:
                assert moved
                low = m
            else:
                assert not moved
        assert c.low == low
