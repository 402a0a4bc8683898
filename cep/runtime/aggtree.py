"""Range aggregates over a sorted list: the repeated events of a Kleene gap (docs/language.md section 7, Repetition).

Why: a match of ``SEQ(Login{3,} f, Login ok)`` binds *all* qualifying events
between its positive neighbours, and ``count(f)``, ``sum(f.amount)``,
``max(f.temp)`` must cost O(log n) per match, not a pass over f's events (a run
of 1,000 events per match would make every match cost 1,000).  So the events of
one key sit in a sorted list, cut into blocks of at most ``LOAD`` entries; each
block keeps a summary of its values (count, non-null count, number count, exact
sums, min, max) and a segment tree over the block summaries answers any run of
whole blocks in O(log n).  A range is the whole blocks in its middle plus at
most two partial blocks at its ends (O(LOAD), a constant), so a range aggregate
costs O(log n + LOAD); ``first``/``last`` are a seek.

Updates: appends in time order (the common case) and removals from the front
(window expiry) touch one block and mark it dirty: O(1).  The next range query
first refreshes the dirty blocks' summaries and their O(log n) tree paths, so
a burst of updates between two matches costs one refresh per touched block,
not one per update (the cost of a match stays O(log n + LOAD)).  A block that
fills up starts a new one at the end (the tree has room to grow by doubling);
an insert in the middle that overfills a block, or a block emptied in the
middle, rebuilds the tree (O(n / LOAD), only on disorder or retraction).

Exact sums: docs/language.md section 7, Repetition sums and averages "the numbers"; to give the same answer
whatever the order of inserts and removals, floats are summed exactly as
integers scaled by 2**1074 (every finite float is an integer multiple of
2**-1074), and the result is rounded once (Python's int / int is correctly
rounded).  A sum of integers only is an integer; one with a float is a float.
Booleans are not numbers, other values are ignored by every aggregate but
``count(x.a)`` (non-null values), ``first`` and ``last``.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import Any

LOAD = 64
_SCALE = 1074  # 2**-1074 is the smallest positive float
_EMPTY_COL = (0, 0, 0, 0, 0, None, None)  # non-null, numbers, floats, int sum, scaled float sum, min, max


def _scaled(v: float) -> int:
    n, d = v.as_integer_ratio()
    return n << (_SCALE - d.bit_length() + 1)


def summarize(values: Sequence[Any]) -> tuple:
    """The column summary of some values (see ``_EMPTY_COL``); min/max ties keep the first."""
    nn = nnum = nflt = isum = fsum = 0
    mn = mx = None
    for v in values:
        if v is None:
            continue
        nn += 1
        t = type(v)
        if t is int:
            isum += v
        elif t is float and math.isfinite(v):
            nflt += 1
            fsum += _scaled(v)
        else:
            continue
        nnum += 1
        if mn is None or v < mn:
            mn = v
        if mx is None or v > mx:
            mx = v
    return (nn, nnum, nflt, isum, fsum, mn, mx)


def combine_col(a: tuple, b: tuple) -> tuple:
    """The summary of a's values followed by b's."""
    amn, amx, bmn, bmx = a[5], a[6], b[5], b[6]
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4],
            amn if bmn is None or (amn is not None and amn <= bmn) else bmn,
            amx if bmx is None or (amx is not None and amx >= bmx) else bmx)


def result(fn: str, col: tuple) -> Any:
    """The value of aggregate ``fn`` (count sum avg min max) from a column summary."""
    if fn == "count":
        return col[0]
    nnum = col[1]
    if nnum == 0:
        return None
    if fn == "min":
        return col[5]
    if fn == "max":
        return col[6]
    try:
        if fn == "sum":
            return col[3] if col[2] == 0 else ((col[3] << _SCALE) + col[4]) / (1 << _SCALE)
        if fn == "avg":
            return ((col[3] << _SCALE) + col[4]) / (nnum << _SCALE)
    except OverflowError:
        return None
    raise ValueError(fn)


def _combine(a: tuple, b: tuple) -> tuple:
    """Block summaries: (entries, column summary, ...)."""
    return (a[0] + b[0], *(combine_col(x, y) for x, y in zip(a[1:], b[1:], strict=True)))


class RangeAggregates:
    """Entries ``key -> values`` (a tuple, one value per column) sorted by key, with
    O(log n + LOAD) aggregates of every column over any key range."""

    __slots__ = ("ncols", "keys", "cols", "maxes", "summ", "head", "tree", "cap", "empty", "dirty", "n")

    def __init__(self, ncols: int) -> None:
        self.ncols = ncols
        self.keys: list[list] = []  # blocks of keys
        self.cols: list[list[list]] = []  # per block, per column, the values
        self.maxes: list = []  # last key of each block (stale for emptied head blocks)
        self.summ: list[tuple] = []
        self.head = 0  # blocks before it are empty (expired from the front)
        self.empty = (0,) + (_EMPTY_COL,) * ncols
        self.cap = 1
        self.tree: list[tuple] = [self.empty, self.empty]
        self.dirty: set[int] = set()  # blocks whose summary and tree path are stale
        self.n = 0

    def __len__(self) -> int:
        return self.n

    def _flush(self) -> None:
        """Refresh the summaries and tree paths of the dirty blocks."""
        for b in self.dirty:
            self._set(b)
        self.dirty.clear()

    # ------------------------------------------------------------- the tree

    def _rebuild(self) -> None:
        """Drop emptied blocks and rebuild the segment tree over the rest."""
        for b in self.dirty:
            self.summ[b] = (len(self.keys[b]), *(summarize(c) for c in self.cols[b]))
        self.dirty.clear()
        if self.head:
            del self.keys[: self.head], self.cols[: self.head], self.maxes[: self.head], self.summ[: self.head]
            self.head = 0
        cap = 1
        while cap < len(self.keys) + 1:
            cap *= 2
        self.cap = cap
        tree = [self.empty] * (2 * cap)
        tree[cap: cap + len(self.summ)] = self.summ
        for i in range(cap - 1, 0, -1):
            tree[i] = _combine(tree[2 * i], tree[2 * i + 1])
        self.tree = tree

    def _set(self, b: int) -> None:
        """Block ``b`` changed: recompute its summary and its tree path."""
        self._put(b, (len(self.keys[b]), *(summarize(c) for c in self.cols[b])))

    def _put(self, b: int, s: tuple) -> None:
        self.summ[b] = s
        i = b + self.cap
        tree = self.tree
        tree[i] = s
        i //= 2
        while i:
            tree[i] = _combine(tree[2 * i], tree[2 * i + 1])
            i //= 2

    def _query(self, lo: int, hi: int) -> tuple:
        """Combined summary of blocks lo..hi-1 (in order)."""
        left, right = self.empty, self.empty
        lo += self.cap
        hi += self.cap
        tree = self.tree
        while lo < hi:
            if lo & 1:
                left = _combine(left, tree[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                right = _combine(tree[hi], right)
            lo //= 2
            hi //= 2
        return _combine(left, right)

    # -------------------------------------------------------------- updates

    def _new_block(self, key: Any, values: Sequence[Any]) -> None:
        self.keys.append([key])
        self.cols.append([[v] for v in values])
        self.maxes.append(key)
        self.summ.append(self.empty)
        if len(self.keys) >= self.cap:
            self._rebuild()
        self.dirty.add(len(self.keys) - 1)

    def add(self, key: Any, values: Sequence[Any]) -> None:
        keys = self.keys
        self.n += 1
        if not keys or self.head == len(keys):
            if self.head:
                self._rebuild()
            self._new_block(key, values)
            return
        if key > self.maxes[-1]:
            b = len(keys) - 1
            if len(keys[b]) >= LOAD:
                self._new_block(key, values)
                return
            keys[b].append(key)
            for c, v in zip(self.cols[b], values, strict=True):
                c.append(v)
            self.maxes[b] = key
            self.dirty.add(b)
            return
        b = bisect_left(self.maxes, key, self.head)
        i = bisect_right(keys[b], key)
        keys[b].insert(i, key)
        for c, v in zip(self.cols[b], values, strict=True):
            c.insert(i, v)
        if len(keys[b]) > 2 * LOAD:  # split, then the tree changes shape
            self.dirty.discard(b)
            self._flush()  # (block numbers shift)
            half = len(keys[b]) // 2
            keys.insert(b + 1, keys[b][half:])
            del keys[b][half:]
            self.cols.insert(b + 1, [c[half:] for c in self.cols[b]])
            for c in self.cols[b]:
                del c[half:]
            self.maxes[b] = keys[b][-1]
            self.maxes.insert(b + 1, keys[b + 1][-1])
            self.summ.insert(b + 1, self.empty)
            for x in (b, b + 1):
                self.summ[x] = (len(keys[x]), *(summarize(c) for c in self.cols[x]))
            self._rebuild()
        else:
            self.dirty.add(b)

    def remove(self, key: Any) -> None:
        """Remove the entry with this key (KeyError if absent)."""
        b = bisect_left(self.maxes, key, self.head)
        keys = self.keys
        if b == len(keys):
            raise KeyError(key)
        block = keys[b]
        i = bisect_left(block, key)
        if i == len(block) or block[i] != key:
            raise KeyError(key)
        del block[i]
        for c in self.cols[b]:
            del c[i]
        self.n -= 1
        if block:
            if i == len(block):
                self.maxes[b] = block[-1]
            self.dirty.add(b)
            return
        if b == self.head:
            self.dirty.add(b)
            self._flush()
            self.head += 1
            if self.head * 2 > len(keys) or self.head == len(keys):
                self._rebuild()
        else:
            self.dirty.discard(b)
            self._flush()  # (block numbers shift)
            del keys[b], self.cols[b], self.maxes[b], self.summ[b]
            self._rebuild()

    # ---------------------------------------------------------------- ranges

    def _pos(self, key: Any) -> tuple[int, int]:
        """(block, offset) of the first entry with a key >= ``key``."""
        b = bisect_left(self.maxes, key, self.head)
        if b == len(self.keys):
            return b, 0
        return b, bisect_left(self.keys[b], key)

    def span(self, lo: Any, hi: Any) -> tuple[tuple[int, int], tuple[int, int]]:
        """Positions of the entries with ``lo <= key < hi`` (start, end)."""
        return self._pos(lo), self._pos(hi)

    def count(self, lo: Any, hi: Any) -> int:
        if not lo < hi:
            return 0
        if self.dirty:
            self._flush()
        (b1, i), (b2, j) = self.span(lo, hi)
        if b1 >= b2:
            return max(0, j - i) if b1 == b2 else 0
        n = len(self.keys[b1]) - i + j if b2 < len(self.keys) else len(self.keys[b1]) - i
        return n + self._query(b1 + 1, b2)[0]

    def columns(self, lo: Any, hi: Any, wanted: Sequence[int]) -> dict[int, tuple]:
        """Column summaries of the entries with ``lo <= key < hi``, for the wanted columns."""
        out: dict[int, tuple] = {}
        if not lo < hi:
            return {c: _EMPTY_COL for c in wanted}
        if self.dirty:
            self._flush()
        (b1, i), (b2, j) = self.span(lo, hi)
        nblocks = len(self.keys)
        if b1 == b2 or b1 == nblocks:
            for c in wanted:
                out[c] = summarize(self.cols[b1][c][i:j]) if b1 < nblocks and j > i else _EMPTY_COL
            return out
        mid = self._query(b1 + 1, b2)
        for c in wanted:
            s = summarize(self.cols[b1][c][i:])
            s = combine_col(s, mid[1 + c])
            if b2 < nblocks:
                s = combine_col(s, summarize(self.cols[b2][c][:j]))
            out[c] = s
        return out

    def _at(self, b: int, i: int, col: int) -> Any:
        return self.cols[b][col][i]

    def first(self, lo: Any, hi: Any, col: int) -> tuple[bool, Any]:
        """(found, value of column ``col``) of the first entry in the range."""
        b, i = self._pos(lo)
        if b == len(self.keys) or self.keys[b][i] >= hi:
            return False, None
        return True, self.cols[b][col][i]

    def last(self, lo: Any, hi: Any, col: int) -> tuple[bool, Any]:
        """(found, value of column ``col``) of the last entry in the range."""
        b, j = self._pos(hi)
        if j == 0:
            b -= 1
            while b >= self.head and not self.keys[b]:
                b -= 1
            if b < self.head:
                return False, None
            j = len(self.keys[b])
        if self.keys[b][j - 1] < lo:
            return False, None
        return True, self.cols[b][col][j - 1]

    def items(self, lo: Any, hi: Any) -> list:
        """The keys in the range, in order (linear: the no-EMIT event list)."""
        if not lo < hi:
            return []
        (b1, i), (b2, j) = self.span(lo, hi)
        out: list = []
        for b in range(b1, min(b2, len(self.keys) - 1) + 1):
            block = self.keys[b]
            out.extend(block[i if b == b1 else 0: j if b == b2 else len(block)])
        return out
