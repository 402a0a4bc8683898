"""The packed values of cep's Spark query: a group's records in one string (route -> state), written by the route
step and read by the state step and the batch handler.

Why: every row costs Spark per-row work (Arrow both ways, shuffle, sort, pandas), so a group's records ride in one
value: their count, their positions without their common prefix, their texts, joined by ``PACK_SEP``, a plain
mark (``PLAIN_MARK``) when they are flat records without long integers. One home for both sides of the format.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

from cep.connectors.spark_spec import (
    _NO_TIME_US,
    BAD_ROW_GROUP,
    PACK_SEP,
    PACK_SEP_BYTES,
    PLAIN_MARK,
    spark_time_us,
)

from cep.io.readers import _DIGITS, _INTEGER_RUN
from cep.longints import has_long_digit_run_numpy


def _packed_frame(packs: dict[tuple[int, int], list], factor: int, labels: Callable[[int], list[int]]):
    """The route step's output rows: one per (pattern, engine bucket), its records in one ``value``
    (``_pack_segments``), ``kg`` = the Spark key of the bucket's key group (Spark groups by ``g, kg``): key group
    ``bucket % key_groups``, its label ``labels(g)[key group]`` (``PatternSpec.kg_labels``), ``eg`` = the bucket;
    ``evt`` = Spark's event-time column (``spark_time_us``) of the pack's largest time (in time units, ``factor``
    us each), of ``_NO_TIME_US`` for bad records (-inf). ``evt`` is an int64 column of microseconds: PySpark
    hands a non-datetime column to Arrow as is, and Arrow takes integers as the timestamp's microseconds (a
    ``datetime64`` column would cost a time-zone conversion per frame).

    A group whose positions or texts hold the separator themselves (a Kafka value with a newline in it, say)
    is emitted one record per row.
    """
    import pandas as pd

    rows = []
    for (g, eg), (ts, segs) in packs.items():
        evt = spark_time_us(_NO_TIME_US if ts == -math.inf else int(round(ts * factor)))
        if g == BAD_ROW_GROUP:
            kg = 0
        else:
            kg_labels = labels(g)
            kg = kg_labels[eg % len(kg_labels)]
        rows.extend((g, kg, eg, evt, value) for value in _pack_segments(segs))
    return pd.DataFrame(rows, columns=["g", "kg", "eg", "evt", "value"])


def _common_prefix(strs: list[str]) -> str:
    """The longest common prefix of ``strs`` (that of the smallest and the largest)."""
    lo, hi = min(strs), max(strs)
    k = 0
    for a, b in zip(lo, hi, strict=False):
        if a != b:
            break
        k += 1
    return lo[:k]


def _pack_segments(segs: list[tuple[str, list[str] | list[int], list[bytes], bool]]) -> list[str]:
    """A group's records as route-row values (``_pack``'s format): ``segs`` are ``(prefix, position rests, raw
    texts, plain)``, record ``j`` of a segment at position ``prefix + str(rests[j])``, ``plain`` whether its texts
    passed ``no_long_integer`` and the router's loop (which parses each record and takes none holding a dict or
    a list: a bad record): a value of only such texts starts with ``PLAIN_MARK``, so the state step does not
    test its bytes again (``_lines_of``; the test is one of each record's bytes, so it holds for any of
    them).

    Why segments: the router gathers a group's records of one input (a whole file: its path and the line
    numbers) without making a position string per record; a pack of one segment takes its prefix as given
    (``"<path>:"``), the texts joined as bytes and decoded once, and a whole file's line numbers (ints) written
    from per-worker texts (``_line_numbers``; ``str`` of each was ~10 % of the route step), with no count of
    separators (its texts are its lines). Several segments (several files in one
    task, bad records) share the common prefix of theirs; positions without a given prefix (Kafka, a ``pos``
    column) get their common prefix found, as ``_pack`` does.
    """
    if len(segs) == 1:
        prefix, rests, texts, plain = segs[0]
    else:
        prefix = _common_prefix([s[0] for s in segs])
        k = len(prefix)
        rests = []
        for p, rs, _t, _plain in segs:
            rs = _texts(rs)
            rests += [p[k:] + r for r in rs] if len(p) > k else rs
        texts = [t for s in segs for t in s[2]]
        plain = all(s[3] for s in segs)
    n = len(texts)
    if n > 1:
        head = f"{PLAIN_MARK if plain else ''}{n} "
        if type(rests[0]) is int:
            # a whole file's line numbers, each then the separator; its texts are its lines (split at the
            # separator): only the prefix (its path) may hold one
            if PACK_SEP not in prefix:
                return [f"{head}{prefix}{PACK_SEP}{_line_numbers(rests)}{PACK_SEP_BYTES.join(texts).decode()}"]
        else:
            if not prefix:
                prefix = _common_prefix(rests)
                if prefix:
                    k = len(prefix)
                    rests = [r[k:] for r in rests]
            value = PACK_SEP.join([f"{head}{prefix}", *rests, PACK_SEP_BYTES.join(texts).decode()])
            if value.count(PACK_SEP) == 2 * n:
                return [value]
    return [f"s{len(p)}{PACK_SEP}{p}{t}" for p, t in zip([prefix + r for r in _texts(rests)],
                                                          [t.decode() for t in texts], strict=True)]


LINE_TEXTS_MAX = 1 << 17  # line numbers whose texts a worker keeps (``_line_numbers``: ~8 MB at most)
_LINE_TEXTS: list[str] = []  # ``f"{i}{PACK_SEP}"`` at index i, made as the files routed need them


def _line_numbers(rests: list[int]) -> str:
    """``(f"%d{PACK_SEP}" * len(rests)) % tuple(rests)`` for a segment's line numbers (ascending: the router
    appends them in file order), from texts made once per worker (``_LINE_TEXTS``) up to ``LINE_TEXTS_MAX``.

    Why: formatting each number with ``%d`` was ~700 instructions a record of the route step's ~11,000; a
    look-up and a join are ~100, and a Python worker routes files of the same lengths again and again."""
    top = rests[-1]
    if top >= LINE_TEXTS_MAX:
        return (f"%d{PACK_SEP}" * len(rests)) % tuple(rests)
    have = len(_LINE_TEXTS)
    if top >= have:
        _LINE_TEXTS.extend([f"{i}{PACK_SEP}" for i in range(have, top + 1)])
    return "".join(map(_LINE_TEXTS.__getitem__, rests))


def _texts(rests: list[str] | list[int]) -> list[str]:
    """Position rests as strings (a whole file's are its line numbers)."""
    return list(map(str, rests)) if rests and type(rests[0]) is int else rests


def _pack(poss: list[str], texts: list[str]) -> list[str]:
    """Records ``(poss[i], texts[i])`` as route-row values: one value for all of them, or one per record.

    Packed: ``"<n> <prefix>"``, then each position without the positions' common prefix, then each text, joined
    by ``PACK_SEP``. Why one column and the prefix apart: each column and byte of a route row costs Spark
    (Arrow both ways, shuffle write and read, sort, pandas), and the positions of a file's records
    (``<file path>:<line>``) or a Kafka partition's (``<topic>/<partition>/<offset>``) share most of their
    characters: without the prefix they are a few bytes each, against ~60 for a full file path.
    A record whose position or text holds the separator rides alone: ``"s<len(position)>"``, the separator,
    then its position and text, not split (``_unpack``).
    """
    n = len(texts)
    if n > 1:
        lo, hi = min(poss), max(poss)  # the common prefix of all is that of the smallest and the largest
        k = 0
        for a, b in zip(lo, hi, strict=False):
            if a != b:
                break
            k += 1
        prefix = lo[:k]
        value = PACK_SEP.join([f"{n} {prefix}", *(p[k:] for p in poss), *texts] if k else
                              [f"{n} ", *poss, *texts])
        if value.count(PACK_SEP) == 2 * n:
            return [value]
    return [f"s{len(p)}{PACK_SEP}{p}{t}" for p, t in zip(poss, texts, strict=True)]


def _unpacked(value: str) -> tuple[list[str], list[str]]:
    """The positions and texts of one route-row value (``_pack``)."""
    if value[0] == "s":
        i = value.index(PACK_SEP)
        k = int(value[1:i]) + i + 1
        return [value[i + 1:k]], [value[k:]]
    parts = value.split(PACK_SEP)
    head = parts[0]
    sp = head.index(" ")
    n, prefix = int(head[1:sp] if head[0] == PLAIN_MARK else head[:sp]), head[sp + 1:]
    poss = parts[1:n + 1]
    if prefix:
        poss = [prefix + p for p in poss]
    return poss, parts[n + 1:]


def _unpack(pdfs) -> Iterator[tuple[str, str]]:
    """A group's ``(position, text)`` records from its packed rows, in row order."""
    for pdf in pdfs:
        for value in pdf["value"].tolist():
            poss, texts = _unpacked(value)
            yield from zip(poss, texts, strict=True)


def _lines_of(values: list[str]) -> tuple[list[str], list[bytes], bool]:
    """The records of a bucket's packed row values, in row order: their positions and raw texts (bytes), and
    whether every row was marked plain by the route step (``_pack_segments``: its texts are flat records without
    long integers, what ``plain_lines`` would pass: the route tests their bytes with ``no_long_integer`` and each
    record for nested values as it parses it).

    Why bytes: the state step decodes them as ``cep run`` decodes a JSON lines file (``decode.lines``); a
    packed value's texts are encoded once and split, not one record at a time.
    """
    poss: list[str] = []
    lines: list[bytes] = []
    plain = True
    for value in values:
        if value[0] == "s":
            (p,), (t,) = _unpacked(value)
            poss.append(p)
            lines.append(t.encode())
            plain = False
            continue
        sp = value.index(" ")
        if value[0] == PLAIN_MARK:
            n = int(value[1:sp])
        else:
            n = int(value[:sp])
            plain = False
        parts = value.split(PACK_SEP, n + 1)
        prefix = parts[0][sp + 1:]
        poss += [prefix + r for r in parts[1:n + 1]] if prefix else parts[1:n + 1]
        lines += parts[n + 1].encode().split(PACK_SEP.encode())
    return poss, lines, plain and bool(lines)


def no_long_integer(blob: bytes) -> bool:
    """Whether no record in ``blob`` (JSON lines) can hold an integer orjson reads as a float: no run of 19
    digits but a fraction's (``decode.plain``'s test: ``cep.longints``, ``cep.io.readers._INTEGER_RUN``).

    The route step's test of a batch's bytes: with it, its loop reads records without ``decode.lines``' scan
    of their values, finding nested ones (bad records) where it parses them (``_router``). Why the digits on a
    numpy view (``has_long_digit_run_numpy``): ~50 instructions a record against ~830 for
    ``has_long_digit_run``'s translate and search; ``plain_lines``' other pass, for a ``{`` after a ``:``, was
    ~480 (the route parses every record anyway)."""
    return not has_long_digit_run_numpy(blob) or _INTEGER_RUN.search(blob) is None


def plain_lines(lines: list[bytes]) -> bool:
    """Whether no record of ``lines`` can hold a nested value or a number ``decode`` reads other than orjson:
    ``decode.lines``' test of a batch's bytes (``cep.io.readers``), over all of them at once.

    Then ``decode.lines`` takes its fast path without its scan of the values for every chunk of them, and a
    record's event is its type, its time and its dict, the op field popped (``_plain_event``,
    ``_decode_group``): the state step reads records so without making ``decode.lines``' events (the route
    step tests its batches with ``no_long_integer`` and finds nested records as it parses them). Both tested
    properties are properties of one record (one line: a ``[``, a ``:`` then ``{`` with only blanks between, a
    run of 19 digits), so the lines joined by a newline show them exactly when some line holds them.
    The bytes are looked at as a numpy array (``has_long_digit_run_numpy``, ``_nested_object``). Why:
    ``decode.lines``' own test (``bytes.translate`` deleting blanks, then two searches) was ~1,100 instructions
    a record; the array's passes are ~550 (the digit runs ~50).
    """
    import numpy as np

    blob = b"\n".join(lines)
    if b"[" in blob:
        return False
    view = np.frombuffer(blob, np.uint8)
    return not has_long_digit_run_numpy(blob) and not _nested_object(blob, view)


_BLANKS = (32, 9, 13)  # the blanks ``decode.lines``' test deletes before it looks for ``:{``


def _nested_object(blob: bytes, view) -> bool:
    """Whether a ``{`` follows a ``:`` with only blanks between (a nested object, or such text in a string): the
    byte before each ``{``, and where that is a blank, the test of ``cep.io.readers`` (rare)."""
    import numpy as np

    opens = np.flatnonzero(view == 123)
    before = view[opens[opens > 0] - 1]
    if (before == 58).any():
        return True
    if np.isin(before, _BLANKS).any():
        return b":{" in blob.translate(_DIGITS, bytes(_BLANKS))
    return False
