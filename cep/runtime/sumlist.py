"""A sorted multimap of (key, item, weight) with O(log n) range sums of weights.

IEDYN needs, for a group of a node's tuples sorted on an inequality variable,
the sum of multiplicities over a key range (thesis Theorem 5, the running sum)
and the tuples in a key range (enumeration), while tuples come and go.
``sortedcontainers`` gives positions, not sums, so this is a structure in its
spirit, in two layouts:

* **flat** (at most ``FLAT_MAX`` entries, nearly every group of a partitioned
  stream): three parallel Python lists ``keys``, ``items``, ``weights``, keys
  non-decreasing.  A range is two bisects; a range sum is a C ``sum`` over a
  slice of at most ``FLAT_MAX`` weights.  A group costs four small objects.
* **blocked** (larger groups): the same three lists cut into blocks of at most
  ``LOAD`` entries, bisect on the block maxima, and a Fenwick tree over the
  block weights, so a range sum is O(log n + LOAD) and an update O(log n)
  (a block split or removal rebuilds the Fenwick tree: O(n / LOAD), amortized
  over LOAD updates).

Keys may repeat (several tuples with the same sort value); an item is found by
its key and equality.  Appends at the end (events in time order) and removals
at the front (window expiry, oldest first) are the fast paths.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Any

FLAT_MAX = 256
LOAD = 256


def incr_source(groups: str, k: str, g: str, key: str, item: str, delta: str, grow: bool = True,
                keep_one: bool = False) -> list[str]:
    """Source lines of ``g.incr(key, item, delta)`` on the map ``g = groups[k]`` for generated
    code, with the fast paths of a flat map inlined: an append at the end (an event in time
    order), a change of the first entry (window expiry removes it, or lowers the weight of
    the oldest tuple of an inner node) and a change of an entry found by one bisect (the expiry
    of a sibling's oldest tuple lowers the later ones; needs ``bisect_left``).  A map left with one entry
    becomes a plain (key, item, weight) triple in ``groups`` again, and an empty one goes
    (``shrink``); ``keep_one``: a map left with one entry stays as it is, only an empty one goes
    (``NodeIndex.keep_one``).  ``grow=False``: ``delta`` is surely negative (an expiry path), no
    append branch.  Here, beside the layout they read."""
    append = [
        f"if {delta} > 0 and ks and {key} > ks[-1] and len(ks) < {FLAT_MAX}:",
        "    ks.append(" + key + ")",
        f"    {g}._items.append({item})",
        f"    {g}._weights.append({delta})",
    ] if grow else []
    if keep_one:
        left = ["if not ks:", f"    del {groups}[{k}]"]
        rest = [f"elif not {g}.incr({key}, {item}, {delta}):", f"    del {groups}[{k}]"]
    else:
        left = ["if len(ks) == 1:", f"    {groups}[{k}] = (ks[0], {g}._items[0], {g}._weights[0])"]
        rest = [f"elif {g}.incr({key}, {item}, {delta}) <= 1:", f"    shrink({groups}, {k}, {g})"]
    return [
        f"ks = {g}._keys",
        *append,
        # the expiry passes the very tuple stored: identity first (no key and tuple comparisons)
        ("elif" if grow else "if") + f" ks and ({g}._items[0] is {item} or ks[0] == {key} and {g}._items[0] == {item}):",
        f"    w = {g}._weights[0] + {delta}",
        "    if w:",
        f"        {g}._weights[0] = w",
        "    else:",
        "        del ks[0]",
        f"        del {g}._items[0]",
        f"        del {g}._weights[0]",
        *[f"        {x}" for x in left],
        "else:",
        # an entry further in (an inner node's tuple whose weight the expiry of a sibling
        # lowers): its position by one bisect, no call; anything else is ``incr``'s
        "    i = bisect_left(ks, " + key + ") if ks else 0",
        f"    if i < len(ks) and ks[i] == {key} and {g}._items[i] == {item}:",
        f"        w = {g}._weights[i] + {delta}",
        "        if w:",
        f"            {g}._weights[i] = w",
        "        else:",
        "            del ks[i]",
        f"            del {g}._items[i]",
        f"            del {g}._weights[i]",
        *[f"            {x}" for x in left],
        *[f"    {x}" for x in rest],
    ]


def pair_source(groups: str, k: str, first: str, key: str, item: str, delta: str) -> list[str]:
    """Source lines that turn the one-entry group ``first`` (a (key, item, weight) triple) into a
    flat map of it and a new entry with another item, in key order (``grown_pair``)."""
    def call(a: tuple[str, str, str], b: tuple[str, str, str]) -> str:
        return f"pair({', '.join(a)}, {', '.join(b)})"
    old = (f"{first}[0]", f"{first}[1]", f"{first}[2]")
    new = (key, item, delta)
    return [f"if {key} < {first}[0]:", f"    {groups}[{k}] = {call(new, old)}",
            "else:", f"    {groups}[{k}] = {call(old, new)}"]


def grown_pair(k0, i0, w0, k1, i1, w1) -> SumSortedMap:
    """A flat map of two entries, made without ``__init__`` (its slots set here): a group of a
    partitioned stream grows from one entry to two and back for about every fifth event of card
    testing, and the constructor's frame was a third of this function.  The lists are displays of
    two: a third entry reallocates each (to room for eight), yet that is cheaper than six appends
    (cachegrind, 10^5 calls: 2,940 instructions a call against 3,650; 4,225 against 4,650 with a
    third entry appended)."""
    m = _new_map(SumSortedMap)
    m._keys = [k0, k1]
    m._items = [i0, i1]
    m._weights = [w0, w1]
    m._blocks = None
    return m


_new_map = object.__new__


def flat_map(keys: list, items: list, weights: list) -> SumSortedMap:
    """A flat map that takes these lists as its own (keys non-decreasing, at most ``FLAT_MAX``
    entries, at least two: one is a plain triple): a group built in one pass (a gated group,
    ``PatternRuntime._compile_build``)."""
    m = _new_map(SumSortedMap)
    m._keys = keys
    m._items = items
    m._weights = weights
    m._blocks = None
    return m


def seek_entry(keys: list, items: list, item: tuple, i: int) -> int:
    """The position of ``item`` in a flat map's lists (``keys``, ``items``), searching from ``i``,
    the first position of its key (a generated walk's slow case: several entries under one key);
    KeyError when it is not there."""
    if i < len(keys):
        key = keys[i]
        while i < len(keys) and keys[i] == key:
            if items[i] == item:
                return i
            i += 1
    raise KeyError(item)


def bisect_source(keys: str, lo: str | None, lo_incl: bool, hi: str | None, hi_incl: bool) -> list[str]:
    """Source lines that set ``i``, ``j`` to the slice of the sorted list ``keys`` whose keys lie in
    the range (``None``: an open end): two C bisects."""
    first = "0" if lo is None else f"{'bisect_left' if lo_incl else 'bisect_right'}({keys}, {lo})"
    last = f"len({keys})" if hi is None else f"{'bisect_right' if hi_incl else 'bisect_left'}({keys}, {hi})"
    return [f"i = {first}", f"j = {last}"]


def end_test(keys: str, lo: str | None, lo_incl: bool, hi: str | None, hi_incl: bool, miss: str) -> list[str]:
    """Source lines that run ``miss`` when the range lies wholly after the last key of the
    non-empty sorted list ``keys`` (given ``lo``) or before its first (given ``hi``): two list
    reads and a comparison where the range is likely empty that way, instead of two bisect calls
    (an insert in time order probing for later tuples; an expiry probing for earlier ones)."""
    tests = []
    if lo is not None:
        tests.append(f"{keys}[-1] {'<' if lo_incl else '<='} {lo}")
    if hi is not None:
        tests.append(f"{keys}[0] {'>' if hi_incl else '>='} {hi}")
    return [f"if {' or '.join(tests)}:", f"    {miss}"] if tests else []


SOURCE_NAMES = {"bisect_left": bisect_left, "bisect_right": bisect_right}


class SumSortedMap:
    """Sorted (key, item) entries with integer weights (multiplicities)."""

    __slots__ = ("_keys", "_items", "_weights", "_blocks")

    def __init__(self) -> None:
        self._keys: list = []
        self._items: list = []
        self._weights: list[int] = []
        self._blocks: _Blocked | None = None

    def only(self) -> tuple | None:
        """The (key, item, weight) of a map of at most one entry (None: empty)."""
        if self._blocks is None:
            return (self._keys[0], self._items[0], self._weights[0]) if self._keys else None
        return next(self.entries(), None)

    def __len__(self) -> int:
        b = self._blocks
        return len(self._keys) if b is None else b.n

    def __getstate__(self):
        return list(self.entries())

    def __setstate__(self, entries) -> None:
        self.__init__()
        for k, item, w in entries:
            self.incr(k, item, w)

    # ---------------------------------------------------------------- updates

    def incr(self, key, item, delta: int) -> int:
        """Add ``delta`` to ``item``'s weight under ``key``; a weight of zero removes it.

        Returns the number of entries after the change (the caller shrinks a group of one
        back to a plain triple without another call)."""
        b = self._blocks
        if b is not None:
            b.incr(key, item, delta)
            return b.n
        keys = self._keys
        n = len(keys)
        if delta > 0 and (not n or key > keys[-1]):
            keys.append(key)
            self._items.append(item)
            self._weights.append(delta)
            if n >= FLAT_MAX:
                self._blocks = _Blocked(keys, self._items, self._weights)
                self._keys, self._items, self._weights = [], [], []
            return n + 1
        items = self._items
        if n and keys[0] == key and items[0] == item:
            # the oldest entry (window expiry removes from the front)
            i = 0
        else:
            i = bisect_left(keys, key)
            while i < n and keys[i] == key:
                if items[i] == item:
                    break
                i += 1
            else:
                i = -1
        if i >= 0:
            w = self._weights[i] + delta
            if w:
                self._weights[i] = w
                return n
            del keys[i]
            del items[i]
            del self._weights[i]
            return n - 1
        if delta <= 0:
            raise KeyError((key, item))
        i = bisect_right(keys, key)
        keys.insert(i, key)
        items.insert(i, item)
        self._weights.insert(i, delta)
        if n >= FLAT_MAX:
            self._blocks = _Blocked(keys, items, self._weights)
            self._keys, self._items, self._weights = [], [], []
        return n + 1

    # ----------------------------------------------------------------- ranges

    def range_sum(self, lo, lo_incl: bool, hi, hi_incl: bool) -> int:
        """Total weight of the keys in the range (``None``: an open end)."""
        b = self._blocks
        if b is not None:
            return b.range_sum(lo, lo_incl, hi, hi_incl)
        keys = self._keys
        i = 0 if lo is None else (bisect_left if lo_incl else bisect_right)(keys, lo)
        j = len(keys) if hi is None else (bisect_right if hi_incl else bisect_left)(keys, hi)
        return sum(self._weights[i:j]) if j > i else 0

    def range_items(self, lo, lo_incl: bool, hi, hi_incl: bool) -> list[tuple[Any, int]]:
        """(item, weight) of the keys in the range, as a list."""
        b = self._blocks
        if b is not None:
            return list(b.iter_range(lo, lo_incl, hi, hi_incl))
        keys = self._keys
        i = 0 if lo is None else (bisect_left if lo_incl else bisect_right)(keys, lo)
        j = len(keys) if hi is None else (bisect_right if hi_incl else bisect_left)(keys, hi)
        if j <= i:
            return []
        return list(zip(self._items[i:j], self._weights[i:j], strict=True))

    def range_tuples(self, lo, lo_incl: bool, hi, hi_incl: bool) -> list:
        """The items of the keys in the range, without their weights (enumeration)."""
        b = self._blocks
        if b is not None:
            return [item for item, _w in b.iter_range(lo, lo_incl, hi, hi_incl)]
        keys = self._keys
        i = 0 if lo is None else (bisect_left if lo_incl else bisect_right)(keys, lo)
        j = len(keys) if hi is None else (bisect_right if hi_incl else bisect_left)(keys, hi)
        return self._items[i:j]

    def iter_range(self, lo, lo_incl: bool, hi, hi_incl: bool) -> Iterator[tuple[Any, int]]:
        """(item, weight) of the keys in the range, lazily (constant delay after the seek)."""
        b = self._blocks
        if b is not None:
            yield from b.iter_range(lo, lo_incl, hi, hi_incl)
            return
        keys = self._keys
        i = 0 if lo is None else (bisect_left if lo_incl else bisect_right)(keys, lo)
        items = self._items
        weights = self._weights
        while i < len(keys):
            k = keys[i]
            if hi is not None and (k > hi or (k == hi and not hi_incl)):
                return
            yield items[i], weights[i]
            i += 1

    def total(self) -> int:
        return self.range_sum(None, True, None, True)

    def entries(self) -> Iterator[tuple[Any, Any, int]]:
        """(key, item, weight) in key order."""
        b = self._blocks
        if b is not None:
            for keys, items, weights in zip(b.keys, b.items, b.weights, strict=True):
                yield from zip(keys, items, weights, strict=True)
        else:
            yield from zip(self._keys, self._items, self._weights, strict=True)


class _Blocked:
    """The blocked layout of a large group, with a Fenwick tree over block weights."""

    __slots__ = ("keys", "items", "weights", "maxes", "fen", "n")

    def __init__(self, keys: list, items: list, weights: list[int]) -> None:
        self.keys = [keys[i:i + LOAD // 2] for i in range(0, len(keys), LOAD // 2)]
        self.items = [items[i:i + LOAD // 2] for i in range(0, len(items), LOAD // 2)]
        self.weights = [weights[i:i + LOAD // 2] for i in range(0, len(weights), LOAD // 2)]
        self.maxes = [b[-1] for b in self.keys]
        self.n = len(keys)
        self._rebuild()

    def _rebuild(self) -> None:
        n = len(self.weights)
        fen = [0] * (n + 1)
        for i, w in enumerate(self.weights, 1):
            fen[i] += sum(w)
            j = i + (i & -i)
            if j <= n:
                fen[j] += fen[i]
        self.fen = fen

    def _fen_add(self, block: int, delta: int) -> None:
        fen = self.fen
        n = len(fen) - 1
        i = block + 1
        while i <= n:
            fen[i] += delta
            i += i & -i

    def _fen_prefix(self, blocks: int) -> int:
        fen = self.fen
        s = 0
        i = blocks
        while i > 0:
            s += fen[i]
            i -= i & -i
        return s

    def incr(self, key, item, delta: int) -> None:
        maxes = self.maxes
        if not maxes:
            if delta <= 0:
                raise KeyError((key, item))
            self.keys.append([key])
            self.items.append([item])
            self.weights.append([delta])
            maxes.append(key)
            self.n = 1
            self.fen = [0, delta]
            return
        b = bisect_left(maxes, key)
        if b == len(maxes):
            if delta <= 0:
                raise KeyError((key, item))
            b -= 1
            self.keys[b].append(key)
            self.items[b].append(item)
            self.weights[b].append(delta)
            maxes[b] = key
            self.n += 1
            self._fen_add(b, delta)
            if len(self.keys[b]) > LOAD:
                self._split(b)
            return
        # look for the item among the entries with this key (they may span blocks)
        bb = b
        i = bisect_left(self.keys[bb], key)
        while bb < len(maxes):
            keys = self.keys[bb]
            items = self.items[bb]
            while i < len(keys) and keys[i] == key:
                if items[i] == item:
                    weights = self.weights[bb]
                    w = weights[i] + delta
                    if w:
                        weights[i] = w
                        self._fen_add(bb, delta)
                    else:
                        self._delete(bb, i, delta)
                    return
                i += 1
            if i < len(keys):
                break
            bb += 1
            i = 0
        if delta <= 0:
            raise KeyError((key, item))
        keys = self.keys[b]
        i = bisect_right(keys, key)
        keys.insert(i, key)
        self.items[b].insert(i, item)
        self.weights[b].insert(i, delta)
        maxes[b] = keys[-1]
        self.n += 1
        self._fen_add(b, delta)
        if len(keys) > LOAD:
            self._split(b)

    def _delete(self, b: int, i: int, delta: int) -> None:
        keys = self.keys[b]
        del keys[i]
        del self.items[b][i]
        del self.weights[b][i]
        self.n -= 1
        if keys:
            self.maxes[b] = keys[-1]
            self._fen_add(b, delta)
        else:
            del self.keys[b]
            del self.items[b]
            del self.weights[b]
            del self.maxes[b]
            self._rebuild()

    def _split(self, b: int) -> None:
        half = len(self.keys[b]) >> 1
        for lst in (self.keys, self.items, self.weights):
            blk = lst[b]
            lst.insert(b + 1, blk[half:])
            del blk[half:]
        self.maxes.insert(b, self.keys[b][-1])
        self._rebuild()

    def _position(self, key, right: bool) -> tuple[int, int]:
        maxes = self.maxes
        b = (bisect_right if right else bisect_left)(maxes, key)
        if b == len(maxes):
            return b, 0
        return b, (bisect_right if right else bisect_left)(self.keys[b], key)

    def _prefix(self, key, inclusive: bool) -> int:
        b, i = self._position(key, inclusive)
        if b == len(self.maxes):
            return self._fen_prefix(b)
        return self._fen_prefix(b) + sum(self.weights[b][:i])

    def range_sum(self, lo, lo_incl: bool, hi, hi_incl: bool) -> int:
        upper = self._fen_prefix(len(self.maxes)) if hi is None else self._prefix(hi, hi_incl)
        lower = 0 if lo is None else self._prefix(lo, not lo_incl)
        # an empty range (lo above hi) gives upper <= lower; weights are positive
        return upper - lower if upper > lower else 0

    def iter_range(self, lo, lo_incl: bool, hi, hi_incl: bool) -> Iterator[tuple[Any, int]]:
        b, i = (0, 0) if lo is None else self._position(lo, not lo_incl)
        while b < len(self.maxes):
            keys = self.keys[b]
            items = self.items[b]
            weights = self.weights[b]
            while i < len(keys):
                k = keys[i]
                if hi is not None and (k > hi or (k == hi and not hi_incl)):
                    return
                yield items[i], weights[i]
                i += 1
            b += 1
            i = 0

