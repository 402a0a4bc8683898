"""Matches waiting to be decided (docs/language.md section 7, Decided matches), ordered by the time that decides them.

Why its own store: a match of a pattern with gap elements is emitted only once
the watermark has passed the end of its gaps, so an insert can never falsify an
emitted match.  Until then it waits here, keyed by its positive events' serials
(unique per event, so a match is one entry), in a heap on its decision time: a
watermark advance pops exactly the matches it decides, in time order.  A
retraction of a positive event removes its pending matches (lazily: the heap
entry is skipped when popped).  The state is plain data (lists of ints and
numbers) for the engine's checkpoint.
"""

from __future__ import annotations

import heapq
from typing import Any


def is_decided(time: Any, strict: bool, watermark: Any) -> bool:
    """Whether a watermark decides a match with decision time ``(time, strict)``."""
    if watermark is None:
        return False
    return watermark > time if strict else watermark >= time


class PendingMatches:
    """Undecided matches of one pattern: serials tuple -> decision time."""

    def __init__(self) -> None:
        self.live: dict[tuple[int, ...], tuple[Any, bool]] = {}
        self._heap: list[tuple[Any, bool, tuple[int, ...]]] = []  # (the engine peeks at [0][0])

    def __len__(self) -> int:
        return len(self.live)

    def add(self, serials: tuple[int, ...], time: Any, strict: bool) -> None:
        self.live[serials] = (time, strict)
        heapq.heappush(self._heap, (time, strict, serials))

    def next_time(self) -> Any:
        """The earliest pending decision time (a stale entry may make it earlier, never later)."""
        return self._heap[0][0]

    def discard(self, serials: tuple[int, ...]) -> bool:
        """Forget a match (one of its events was retracted); False if it was not pending."""
        return self.live.pop(serials, None) is not None

    def pop_decided(self, watermark: Any) -> list[tuple[int, ...]]:
        """The pending matches this watermark decides, in decision-time order."""
        out: list[tuple[int, ...]] = []
        heap = self._heap
        live = self.live
        while heap and is_decided(heap[0][0], heap[0][1], watermark):
            time, strict, serials = heapq.heappop(heap)
            if live.get(serials) == (time, strict):
                del live[serials]
                out.append(serials)
        if len(heap) > 2 * len(live) + 64:  # many discarded entries: rebuild
            self._heap = [(t, s, k) for k, (t, s) in live.items()]
            heapq.heapify(self._heap)
        return out

    def to_data(self) -> list[list[Any]]:
        """Plain data: ``[[serial, ...], time, strict]`` per pending match."""
        return [[list(k), t, s] for k, (t, s) in self.live.items()]

    @classmethod
    def from_data(cls, data: list[list[Any]]) -> PendingMatches:
        p = cls()
        for serials, time, strict in data:
            p.add(tuple(serials), time, bool(strict))
        return p
