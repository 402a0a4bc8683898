"""A sorted map from keys to weights with O(log n) range sums.

IEDYN needs, for a child group sorted on an inequality variable, the sum of
multiplicities over a key range (thesis Theorem 5: the running sum), while
tuples come and go.  ``sortedcontainers`` gives positions, not sums, so this is
a blocked sorted list in its spirit (lists of at most ``LOAD`` keys, bisect on
the block maxima) with each block's weight total kept in a Fenwick tree:

* insert / weight change / delete: O(log n) (bisects plus a Fenwick update;
  a block split or removal rebuilds the Fenwick tree, O(n / LOAD), amortized
  over LOAD operations);
* ``prefix_sum`` / ``range_sum``: O(log n + LOAD) with the in-block part a C
  ``sum`` over a slice;
* appends at the end and removals at the front (events in time order, window
  expiry) touch only the last or first block.

Each key also carries a payload (the tuples with that key and their
multiplicities), so one structure serves range sums and range enumeration.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Any

LOAD = 256


class SumSortedMap:
    """Keys in order; each key has a weight (an int) and a payload."""

    __slots__ = ("_keys", "_weights", "_payloads", "_maxes", "_fen", "_len")

    def __init__(self) -> None:
        self._keys: list[list[Any]] = []
        self._weights: list[list[int]] = []
        self._payloads: list[list[Any]] = []
        self._maxes: list[Any] = []
        self._fen: list[int] = [0]
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __getstate__(self):
        return (self._keys, self._weights, self._payloads, self._len)

    def __setstate__(self, state) -> None:
        self._keys, self._weights, self._payloads, self._len = state
        self._maxes = [b[-1] for b in self._keys]
        self._rebuild()

    # ------------------------------------------------------------ Fenwick tree

    def _rebuild(self) -> None:
        n = len(self._keys)
        fen = [0] * (n + 1)
        for i, w in enumerate(self._weights, 1):
            fen[i] += sum(w)
            j = i + (i & -i)
            if j <= n:
                fen[j] += fen[i]
        self._fen = fen

    def _fen_add(self, block: int, delta: int) -> None:
        fen = self._fen
        n = len(fen) - 1
        i = block + 1
        while i <= n:
            fen[i] += delta
            i += i & -i

    def _fen_prefix(self, blocks: int) -> int:
        """Total weight of the first ``blocks`` blocks."""
        fen = self._fen
        s = 0
        i = blocks
        while i > 0:
            s += fen[i]
            i -= i & -i
        return s

    # ------------------------------------------------------------------ access

    def find(self, key) -> Any:
        """The payload stored under ``key``, or None."""
        maxes = self._maxes
        if not maxes:
            return None
        b = bisect_left(maxes, key)
        if b == len(maxes):
            return None
        keys = self._keys[b]
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            return self._payloads[b][i]
        return None

    def add(self, key, weight: int, payload_factory=dict) -> Any:
        """Add ``weight`` to ``key`` (inserting it with a new payload if absent).

        Returns the key's payload.  The caller removes a key whose weight has
        dropped to zero with ``discard``.
        """
        maxes = self._maxes
        if not maxes:
            p = payload_factory()
            self._keys.append([key])
            self._weights.append([weight])
            self._payloads.append([p])
            maxes.append(key)
            self._len = 1
            self._fen = [0, weight]
            return p
        b = bisect_left(maxes, key)
        if b == len(maxes):
            # beyond every key: append to the last block (the in-order case)
            b -= 1
            keys = self._keys[b]
            keys.append(key)
            self._weights[b].append(weight)
            p = payload_factory()
            self._payloads[b].append(p)
            maxes[b] = key
            self._len += 1
            self._fen_add(b, weight)
            if len(keys) > LOAD:
                self._split(b)
            return p
        keys = self._keys[b]
        i = bisect_left(keys, key)
        if keys[i] == key:
            self._weights[b][i] += weight
            self._fen_add(b, weight)
            return self._payloads[b][i]
        keys.insert(i, key)
        self._weights[b].insert(i, weight)
        p = payload_factory()
        self._payloads[b].insert(i, p)
        self._len += 1
        self._fen_add(b, weight)
        if len(keys) > LOAD:
            self._split(b)
        return p

    def incr(self, key, item, delta: int) -> None:
        """Add ``delta`` to ``item``'s multiplicity in the payload of ``key``.

        The payload is ``{item: multiplicity}`` and the key's weight is the sum
        of those multiplicities; an item (and a key, and a block) whose weight
        drops to zero is removed.  One bisect per call: this is the index
        maintenance hot path.
        """
        maxes = self._maxes
        nb = len(maxes)
        if nb == 0:
            if delta <= 0:
                raise KeyError(key)
            self._keys.append([key])
            self._weights.append([delta])
            self._payloads.append([{item: delta}])
            maxes.append(key)
            self._len = 1
            self._fen = [0, delta]
            return
        b = bisect_left(maxes, key)
        if b == nb:
            # beyond every key: an append to the last block (events in time order)
            if delta <= 0:
                raise KeyError(key)
            b -= 1
            keys = self._keys[b]
            keys.append(key)
            self._weights[b].append(delta)
            self._payloads[b].append({item: delta})
            maxes[b] = key
            self._len += 1
        else:
            keys = self._keys[b]
            i = bisect_left(keys, key)
            if keys[i] == key:
                payload = self._payloads[b][i]
                m = payload.get(item, 0) + delta
                if m:
                    payload[item] = m
                else:
                    del payload[item]
                weights = self._weights[b]
                w = weights[i] + delta
                if w:
                    weights[i] = w
                else:
                    # the key is gone (window expiry pops from the front)
                    del keys[i]
                    del weights[i]
                    del self._payloads[b][i]
                    self._len -= 1
                    if not keys:
                        del self._keys[b]
                        del self._weights[b]
                        del self._payloads[b]
                        del maxes[b]
                        if maxes:
                            self._rebuild()
                        else:
                            self._fen = [0]
                        return
                    maxes[b] = keys[-1]
            else:
                if delta <= 0:
                    raise KeyError(key)
                keys.insert(i, key)
                self._weights[b].insert(i, delta)
                self._payloads[b].insert(i, {item: delta})
                self._len += 1
        if nb == 1:
            self._fen[1] += delta
        else:
            self._fen_add(b, delta)
        if len(keys) > LOAD:
            self._split(b)

    def discard(self, key) -> None:
        """Remove ``key`` (its weight must be zero: the caller keeps weights exact)."""
        maxes = self._maxes
        b = bisect_left(maxes, key)
        if b == len(maxes):
            return
        keys = self._keys[b]
        i = bisect_left(keys, key)
        if i == len(keys) or keys[i] != key:
            return
        w = self._weights[b][i]
        del keys[i]
        del self._weights[b][i]
        del self._payloads[b][i]
        self._len -= 1
        if keys:
            maxes[b] = keys[-1]
            if w:
                self._fen_add(b, -w)
        else:
            del self._keys[b]
            del self._weights[b]
            del self._payloads[b]
            del maxes[b]
            if maxes:
                self._rebuild()
            else:
                self._fen = [0]

    def _split(self, b: int) -> None:
        half = len(self._keys[b]) >> 1
        for lst in (self._keys, self._weights, self._payloads):
            blk = lst[b]
            lst.insert(b + 1, blk[half:])
            del blk[half:]
        self._maxes.insert(b, self._keys[b][-1])
        self._rebuild()

    # ------------------------------------------------------------------ ranges

    def _position(self, key, right: bool) -> tuple[int, int]:
        """(block, index) of the first key > key (right) or >= key (left)."""
        maxes = self._maxes
        b = (bisect_right if right else bisect_left)(maxes, key)
        if b == len(maxes):
            return b, 0
        keys = self._keys[b]
        return b, (bisect_right if right else bisect_left)(keys, key)

    def prefix_sum(self, key, inclusive: bool) -> int:
        """Total weight of keys < key (or <= key when ``inclusive``)."""
        b, i = self._position(key, inclusive)
        if b == len(self._maxes):
            return self._fen_prefix(b)
        return self._fen_prefix(b) + sum(self._weights[b][:i])

    def total(self) -> int:
        return self._fen_prefix(len(self._maxes))

    def range_sum(self, lo, lo_incl: bool, hi, hi_incl: bool) -> int:
        """Total weight of keys in the range; ``None`` bounds are open ends."""
        if len(self._maxes) == 1:
            # one block (most groups): two bisects and a C sum
            keys = self._keys[0]
            i = 0 if lo is None else (bisect_left if lo_incl else bisect_right)(keys, lo)
            j = len(keys) if hi is None else (bisect_right if hi_incl else bisect_left)(keys, hi)
            return sum(self._weights[0][i:j]) if j > i else 0
        upper = self.total() if hi is None else self.prefix_sum(hi, hi_incl)
        lower = 0 if lo is None else self.prefix_sum(lo, not lo_incl)
        # an empty range (lo above hi) gives upper <= lower; weights are positive
        return upper - lower if upper > lower else 0

    def range_payloads(self, lo, lo_incl: bool, hi, hi_incl: bool) -> list[Any]:
        """Payloads of the keys in the range, as a list (slices when in one block)."""
        if len(self._maxes) == 1:
            keys = self._keys[0]
            i = 0 if lo is None else (bisect_left if lo_incl else bisect_right)(keys, lo)
            j = len(keys) if hi is None else (bisect_right if hi_incl else bisect_left)(keys, hi)
            return self._payloads[0][i:j] if j > i else []
        return list(self.irange(lo, lo_incl, hi, hi_incl))

    def irange(self, lo, lo_incl: bool, hi, hi_incl: bool) -> Iterator[Any]:
        """Payloads of the keys in the range, in key order."""
        if lo is None:
            b, i = 0, 0
        else:
            b, i = self._position(lo, not lo_incl)
        nblocks = len(self._maxes)
        keys_l = self._keys
        pay_l = self._payloads
        while b < nblocks:
            keys = keys_l[b]
            pays = pay_l[b]
            n = len(keys)
            while i < n:
                k = keys[i]
                if hi is not None and (k > hi or (k == hi and not hi_incl)):
                    return
                yield pays[i]
                i += 1
            b += 1
            i = 0

    def items(self) -> Iterator[tuple[Any, int, Any]]:
        for keys, ws, ps in zip(self._keys, self._weights, self._payloads, strict=True):
            yield from zip(keys, ws, ps, strict=True)
