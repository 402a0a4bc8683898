"""Event-time progress of a partitioned source (Kafka): one watermark per partition, the minimum wins.

Why: a topic's partitions are read concurrently and independently, so one partition may deliver records of
12:00 while another is still at 11:50. One watermark over everything read (``max ts - lateness``) would call
the second partition's records late although nothing is out of order within it. Flink keeps a watermark per
source split and forwards the minimum; this is the same rule. The engine's watermark is ``low - lateness``
where ``low`` is the smallest, over the active partitions, of the largest event time each has delivered.

Idleness (Flink's ``withIdleness``): a partition that has delivered nothing yet holds ``low`` back (it may
still bring old records), so a partition that has nothing to deliver must be left out or it stalls the
watermark forever. The source marks a partition idle when it has no lag (read up to its end offset) and
either the read is bounded (``until=end``: it has finished) or it delivered no record for the idle timeout.
An idle partition that delivers a record again is active again; that record is late if the others moved the
watermark past it (as in Flink). When every partition is idle the watermark holds.

State is plain data (``state()``/``restore()``): a checkpoint keeps each partition's largest event time, so a
resumed run judges lateness as the uninterrupted run would.
"""

from __future__ import annotations

from collections.abc import Iterable


class PartitionClock:
    """Per partition, the largest event time delivered; ``low`` = the minimum over active partitions."""

    def __init__(self, partitions: Iterable[int]) -> None:
        self.max_ts: dict[int, int | float | None] = {p: None for p in partitions}
        self.idle: set[int] = set()
        self._min: int | float | None = None  # current minimum over active partitions (None: one has no record)
        self.low: int | float | None = None  # the largest minimum reached so far (never goes back)

    def observe(self, partition: int, ts: int | float) -> bool:
        """A record of ``partition`` at event time ``ts``; True when ``low`` moved up."""
        m = self.max_ts.get(partition)
        if partition in self.idle or partition not in self.max_ts:
            self.idle.discard(partition)
            self.max_ts[partition] = ts if m is None or ts > m else m
            return self._recompute()
        if m is not None and ts <= m:
            return False
        self.max_ts[partition] = ts
        if m is None or self._min is None or m <= self._min:
            return self._recompute()  # this partition held the minimum
        return False

    def set_idle(self, partition: int) -> bool:
        """Leave ``partition`` out of the minimum until it delivers again; True when ``low`` moved up."""
        if partition in self.idle:
            return False
        self.idle.add(partition)
        return self._recompute()

    def _recompute(self) -> bool:
        active = [m for p, m in self.max_ts.items() if p not in self.idle]
        if not active:
            self._min = None  # every partition idle: the watermark holds
            return False
        self._min = None if any(m is None for m in active) else min(active)  # type: ignore[type-var]
        if self._min is not None and (self.low is None or self._min > self.low):
            self.low = self._min
            return True
        return False

    def state(self) -> dict:
        """JSON-able: each partition's largest event time (idleness is processing time: not kept)."""
        return {"max_ts": {str(p): m for p, m in self.max_ts.items()}, "low": self.low}

    def restore(self, state: dict) -> None:
        for p, m in state.get("max_ts", {}).items():
            if int(p) in self.max_ts or m is not None:
                self.max_ts[int(p)] = m
        self.low = state.get("low")
        self.idle.clear()
        self._recompute()
