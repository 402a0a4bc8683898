"""Undecided matches, kept per deciding event (docs/language.md section 7, Decided matches).

Why per event, not per match: a match of a pattern with gap elements is emitted
only once the watermark has passed the end of its gaps (its decision time), so
an insert can never falsify an emitted match.  Stored one entry per match, a
trailing ``NOT`` could hold one window's *matches* waiting, which is not bounded
by the window's events.  But a match's decision time is always one of its
positive events' time (plus ``w`` for a trailing gap): the event whose gap end
is the latest, its *deciding* event (``GapChecks.decider``; ties go to the
lowest atom, so every match has exactly one).  So the store keeps one entry per
deciding event, ``(atom, serial)``, ordered by decision time; when the
watermark passes it, the engine enumerates the matches that event decides (a
delta enumeration through the T-reduct, ``PatternRuntime.matches_with``) and
checks their gaps then.  An event decides at most once per atom it plays, so the
store is bounded by the retained positive events, whatever the matches.

Order: decision times arrive in order on in-order input, so they go to a deque
(appends and pops at the ends); an earlier time goes to a heap beside it.  A
retracted event's entry is dropped from ``live`` at once and skipped when its
queue slot is popped.  The state is plain data: ``[atom, serial]`` pairs (the
time is the event's, recomputed when a state is loaded).
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any


def is_decided(time: Any, strict: bool, watermark: Any) -> bool:
    """Whether a watermark decides a match with decision time ``(time, strict)``."""
    if watermark is None:
        return False
    return watermark > time if strict else watermark >= time


class PendingDecisions:
    """One pattern's deciding events of undecided matches: ``(atom, serial) -> decision time``.

    ``strict``: the pattern's matches are decided once the watermark is past their time
    (a trailing gap), else once it reaches it.
    """

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.live: dict[tuple[int, int], Any] = {}
        self._queue: deque[tuple[Any, int, int]] = deque()  # (time, atom, serial), times non-decreasing
        self._heap: list[tuple[Any, int, int]] = []  # the entries that came out of time order

    def __len__(self) -> int:
        return len(self.live)

    def stored(self) -> int:
        """Entries held, including retracted ones not yet skipped (a memory measure)."""
        return len(self._queue) + len(self._heap)

    def add(self, atom: int, serial: int, time: Any) -> None:
        """The event ``serial`` (playing ``atom``) decides an undecided match at ``time``."""
        key = (atom, serial)
        if key in self.live:
            return
        self.live[key] = time
        q = self._queue
        if not q or q[-1][0] <= time:
            q.append((time, atom, serial))
        else:
            heapq.heappush(self._heap, (time, atom, serial))

    def next_time(self) -> Any:
        """The earliest pending decision time (a retracted entry may make it earlier, never later);
        None when nothing is pending."""
        if not self.live:
            return None
        q, h = self._queue, self._heap
        if q and h:
            return min(q[0][0], h[0][0])
        return q[0][0] if q else h[0][0]

    def due(self, watermark: Any) -> bool:
        """Whether this watermark decides an entry (cheap: the common answer is no)."""
        q, h = self._queue, self._heap
        if self.strict:
            return bool((q and watermark > q[0][0]) or (h and watermark > h[0][0]))
        return bool((q and watermark >= q[0][0]) or (h and watermark >= h[0][0]))

    def discard(self, atom: int, serial: int) -> None:
        """The event left (a retraction): it decides nothing any more."""
        if self.live.pop((atom, serial), None) is not None and self.stored() > 2 * len(self.live) + 64:
            self._rebuild()

    def pop_decided(self, watermark: Any) -> list[tuple[int, int]]:
        """The entries this watermark decides, ``(atom, serial)`` in decision-time order."""
        out: list[tuple[int, int]] = []
        q, h, live = self._queue, self._heap, self.live
        strict = self.strict
        while True:
            if q and (not h or q[0] <= h[0]):
                time, atom, serial = q[0]
                if not (watermark > time if strict else watermark >= time):
                    break
                q.popleft()
            elif h:
                time, atom, serial = h[0]
                if not (watermark > time if strict else watermark >= time):
                    break
                heapq.heappop(h)
            else:
                break
            key = (atom, serial)
            if key in live:
                del live[key]
                out.append(key)
        return out

    def _rebuild(self) -> None:
        entries = sorted((t, a, s) for (a, s), t in self.live.items())
        self._queue = deque(entries)
        self._heap = []

    def to_data(self) -> list[list[int]]:
        """Plain data: ``[atom, serial]`` per entry."""
        return [[a, s] for a, s in self.live]
