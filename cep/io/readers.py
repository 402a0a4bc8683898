"""Input records -> ``cep.event.Event``: JSON lines and CSV, from a file or stdin.

Why this module is shaped the way it is: the per-record path is measured (the
card-testing target is >= 50,000 events/s end to end), so a source only yields
``(pos, raw)`` pairs (raw = the line's bytes, or a dict for CSV) and a decoder
built once by ``make_decoder`` turns one raw record into an ``Event`` with a
handful of dict lookups and no exceptions unless the record is bad.  A bad
record raises ``BadRecord(reason)``; the run loop decides (fail or skip).

Positions: ``pos`` is the record number as a string (1-based).  For JSON lines
it equals the file's line number (blank lines are skipped but counted).  For
CSV the header is not a record, so record 1 is on line 2; ``last_line`` gives
the line of the last record for error messages.  A file source is resumable:
``position()`` is the byte offset of the next record plus the counters, and
``seek(position)`` restores it (checkpoints, docs/language.md section 6 / issue 5).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from gc import is_tracked
from io import BytesIO
from itertools import islice
from typing import IO, Any, Protocol

import orjson

from cep.event import Event, LineEvent
from cep.io.protocol import Source
from cep.lazyre import lazy
from cep.longints import LONG_RUN, has_long_digit_run
from cep.units import TIME_UNITS, check_time_unit

# numbers are ASCII: "٣" (an Arabic-Indic digit) is text, not 3
_NUMBER = lazy(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = lazy(r"[+-]?[0-9]+")
CHUNK = 1 << 16  # bytes per read of a JSON lines input
BATCH = 512  # records per batch at most: what the run loop applies before it writes its output


class BadRecord(ValueError):
    """An input record the engine cannot take; ``str(e)`` is the reason."""


# ---------------------------------------------------------------------------
# exact integers (docs/language.md section 5): orjson reads an integer beyond 64 bits as a float
# (``100000000000000000000001`` -> ``1e23``), so a record where orjson gave a float
# at least that large is parsed again by the stdlib, which keeps every integer exact.

_BIG = 2.0**63
_BOM = b"\xef\xbb\xbf"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    v = float(text)
    if v in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:40]} is out of range")
    return v


def exact_loads(raw: Any) -> Any:
    """JSON with exact integers of any size (up to Python's 4300 digits); no NaN, no overflowing float."""
    import json  # only for such records: not imported at start-up

    try:
        return json.loads(raw, parse_constant=_reject_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as e:
        raise BadRecord(f"not valid JSON ({str(e)[:200]})") from None


def _has_big_float(rec: dict) -> bool:
    for v in rec.values():
        if type(v) is float and (v >= _BIG or v <= -_BIG):
            return True
    return False


# ---------------------------------------------------------------------------
# values


def number_or_none(text: str) -> int | float | None:
    """The number a numeric-looking string spells (``"12"`` -> 12, ``"1.5e3"`` -> 1500.0), else None."""
    s = text.strip()
    if not _NUMBER.fullmatch(s):
        return None
    if _INTEGER.fullmatch(s):
        return int(s)
    return float(s)


def iso_to_units(text: str, factor: int) -> int | float:
    """An ISO-8601 timestamp in the time unit ``factor`` per second; naive times are UTC.

    Exact for whole units (integer arithmetic on microseconds), so
    ``2024-03-01T12:00:00.250Z`` in ms is the integer 1709294400250.
    """
    from datetime import datetime, timezone  # only for ISO times: not imported at start-up

    s = text.strip()
    if s[-1:] in ("Z", "z"):
        s = s[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        raise BadRecord(f"bad time value {text!r}: not a number or an ISO-8601 time") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt - datetime(1970, 1, 1, tzinfo=timezone.utc)
    micros = (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    per_unit = 1_000_000 // factor
    if micros % per_unit == 0:
        return micros // per_unit
    return micros / per_unit


def convert_time(value: Any, factor: int, field: str = "ts") -> int | float:
    """An event time that is not already an int or float: an ISO or numeric string, else bad."""
    t = type(value)
    if t is int or t is float:
        return value
    if value is None:
        raise BadRecord(f"missing time field {field!r}")
    if t is str:
        n = number_or_none(value)
        if n is not None:
            if n != n or n in (float("inf"), float("-inf")):
                raise BadRecord(f"bad time value {value!r} in field {field!r}: not a finite number")
            return n
        if not value.strip():
            raise BadRecord(f"bad time value {value!r} in field {field!r}")
        return iso_to_units(value, factor)
    raise BadRecord(f"bad time value {value!r} in field {field!r}: not a number or an ISO-8601 string")


_ODD = frozenset((float, dict, list))  # value types the fast paths look at twice
# ``decode_lines``' view of a batch's bytes: each digit ``0``, ``:`` and ``{`` themselves, any other byte ``.``
_DIGITS = bytes(48 if 48 <= b <= 57 else b if b in (58, 123) else 46 for b in range(256))
# (``plain``, when the bytes have such a run) 19 digits not after a digit or a point: a fraction's digits
# are not an integer's (``0.00006267302317998972`` is the same float for orjson and ``json``)
_INTEGER_RUN = lazy(rb"(?<![.0-9])[0-9]{19}")
_new = object.__new__


class InsertBatch(list):
    """The events ``decode.lines`` made from a batch of lines when none of them is a retraction
    (op ``-``): ``cep run`` passes that on (``Engine.push_batch(inserts=True)``: the engine's loop
    then tests no op per event), and turns it into a plain list when a record it decodes after
    them (off the fast path) is one.  A slice or a copy is a plain list (no promise).  Why a type
    and not a flag: it travels with the events, and anything else handed the list sees a list."""

    __slots__ = ()


def _flat(blob: bytes, _digits: bytes = _DIGITS, _run: bytes = LONG_RUN) -> bool:
    """Whether a batch's bytes show that no record holds a nested value or an integer orjson reads
    as a float (``decode_lines``: then no scan of the values): no ``[``, no ``{`` after a ``:``
    (whitespace deleted from the view), no run of 19 digits."""
    if b"[" in blob:
        return False
    marks = blob.translate(_digits, b" \t\r")
    return b":{" not in marks and _run not in marks


def _check_scalars(rec: dict) -> None:
    for k, v in rec.items():
        if type(v) is dict or type(v) is list:
            raise BadRecord(f"attribute {k!r} is not a scalar (number, string, boolean or null)")


class Decoder(Protocol):
    """What ``make_decoder`` returns: ``decode(pos, raw) -> Event`` for one record, and
    ``decode.many(batch)``: the Events of the batch's leading records that need no more than the
    common case (possibly none; the caller decodes the rest one at a time)."""

    many: Callable[[list[tuple[str, Any]]], list[Event]]
    lines: Callable[[list[bytes], int], list[Event]]  # JSON lines decoders only (``decode_lines``)
    plain: Callable[[list[bytes]], list | None]  # JSON lines decoders only (``plain``)

    def __call__(self, pos: str, raw: Any) -> Event: ...


def make_decoder(
    type_field: str = "type",
    time_field: str = "ts",
    time_unit: str = "s",
    op_field: str = "op",
) -> Decoder:
    """``decode(pos, raw) -> Event`` for raw = JSON line bytes or an already-parsed dict.

    Raises ``BadRecord`` for: invalid JSON, not an object, a nested value, a
    missing/empty/non-string type, a missing or bad time, an op other than
    ``"+"``/``"-"``.  ``fields`` is the record as read, without the op field.
    """
    check_time_unit(time_unit)
    factor = TIME_UNITS[time_unit]
    loads = orjson.loads
    JSONDecodeError = orjson.JSONDecodeError

    def decode_slow(pos: str, raw: Any) -> Event:
        """Every case, with a precise reason for each bad record."""
        if type(raw) is dict:
            rec = raw
        else:
            try:
                rec = loads(raw)
            except JSONDecodeError as e:
                if "infinity" not in str(e):
                    raise BadRecord(f"not valid JSON ({e})") from None
                rec = exact_loads(raw)  # an integer too large for a double, or a float that overflows
            if type(rec) is not dict:
                raise BadRecord("not a JSON object")
            if _has_big_float(rec):
                rec = exact_loads(raw)
            _check_scalars(rec)
        typ = rec.get(type_field)
        if type(typ) is not str or not typ:
            if typ is None:
                raise BadRecord(f"missing type field {type_field!r}")
            raise BadRecord(f"bad type value {typ!r} in field {type_field!r}: not a non-empty string")
        ts = rec.get(time_field)
        tt = type(ts)
        if tt is not int and tt is not float:
            ts = convert_time(ts, factor, time_field)
        elif tt is float and (ts != ts or ts in (float("inf"), float("-inf"))):
            raise BadRecord(f"bad time value {ts!r} in field {time_field!r}: not a finite number")
        op = rec.pop(op_field, "+")
        if op != "+" and op != "-":
            raise BadRecord(f"bad op {op!r} in field {op_field!r}: must be \"+\" or \"-\"")
        return Event(typ, ts, rec, pos, op)

    def decode(pos: str, raw: Any) -> Event:
        # Fast path: a JSON object line with a string type and a numeric time.
        # Anything else (CSV dicts, ISO times, bad records) takes decode_slow.
        try:
            rec = loads(raw)
            typ = rec[type_field]
            ts = rec[time_field]
        except Exception:  # noqa: BLE001 - decode_slow gives the precise reason
            return decode_slow(pos, raw)
        tt = type(ts)
        if type(typ) is not str or (tt is not int and tt is not float) or not typ:
            return decode_slow(pos, raw)
        nested = False
        for v in rec.values():  # one pass: big floats and nested values
            t = type(v)
            if t is float:
                if v >= _BIG or v <= -_BIG:  # may be an integer beyond 64 bits: read it exactly
                    return decode_slow(pos, raw)
            elif t is dict or t is list:
                nested = True
        if nested:
            _check_scalars(rec)
        op = rec.pop(op_field, "+")
        if op != "+" and op != "-":
            raise BadRecord(f"bad op {op!r} in field {op_field!r}: must be \"+\" or \"-\"")
        return Event(typ, ts, rec, pos, op)

    def decode_many(batch: list[tuple[str, Any]], _odd: frozenset = _ODD, _big: float = _BIG,
                    _nbig: float = -_BIG) -> list[Event]:
        """The Events of ``batch``'s leading records that take ``decode``'s fast path, in order:
        ``decode_many(batch)[i]`` is ``decode(*batch[i])``.  It stops, without raising, at the
        first record that needs ``decode_slow`` (or is bad): the caller decodes that one and the
        rest with ``decode``.

        Why: the run loop's per-record call of ``decode`` (a frame, the pair unpacked, the
        result appended) was a tenth of the parse-only floor; here the loop is one frame per
        batch, and each Event is made by setting its slots (no ``__init__`` frame).  The scan of
        the values ends the record's work in its ``else`` (no flag set and tested per record)
        and reads its constants from locals (issue 15: -520 instructions per record)."""
        out: list[Event] = []
        append = out.append
        for pos, raw in batch:
            try:
                rec = loads(raw)
                typ = rec[type_field]
                ts = rec[time_field]
            except Exception:  # noqa: BLE001 - decode gives the precise reason
                break
            tt = type(ts)
            if type(typ) is not str or (tt is not int and tt is not float) or not typ:
                break
            for v in rec.values():  # big floats and nested values: decode's business
                if type(v) in _odd and (type(v) is not float or not _nbig < v < _big):
                    break
            else:
                op = "+"
                if op_field in rec:  # most records have none: no call
                    op = rec.pop(op_field)
                    if op != "+" and op != "-":
                        break
                ev = _new(Event)
                ev.type = typ
                ev.ts = ts
                ev.fields = rec
                ev.pos = pos
                ev.op = op
                append(ev)
                continue
            break
        return out

    def decode_lines(lines: list[bytes], first: int, _odd: frozenset = _ODD, _big: float = _BIG,
                     _nbig: float = -_BIG, _ev: type = LineEvent) -> list[Event]:
        """``decode_many`` for raw lines numbered from ``first`` (``JsonlSource.take_lines``): the
        ``LineEvent``s of the leading records that take the fast path, ``pos`` the line number's
        string, as ``decode_many(list(zip(map(str, count(first)), lines)))`` gives.  Why: no
        position string and no pair per record (``LineEvent``); the same checks, in the same order.

        The scan of each record's values for nested values and big floats (a Python loop over
        every value: ~3,000 instructions of a record's ~12,000) is skipped when the batch's bytes
        show that no record can hold either: no ``[``; no ``{`` after a ``:`` (a nested object is
        a value; whitespace, deleted from the view, may separate them); and no run of 19 digits (the
        only numbers orjson reads as a float other than ``json`` would are integers beyond 64
        bits: 19 digits or more; a literal with a fraction or an exponent is a float in both, the
        same double).  A string holding such bytes only sends its batch to the scan."""
        blob = b"".join(lines)
        # an ``InsertBatch`` unless a record is a retraction (then a list: ``plus`` says which)
        out: list[Event] = InsertBatch()
        append = out.append
        plus = True
        if _flat(blob):
            for n, raw in enumerate(lines, first):
                try:
                    rec = loads(raw)
                    typ = rec[type_field]
                    ts = rec[time_field]
                except Exception:  # noqa: BLE001 - decode gives the precise reason
                    break
                tt = type(ts)
                if type(typ) is not str or (tt is not int and tt is not float) or not typ:
                    break
                op = "+"
                if op_field in rec:  # most records have none: no call
                    op = rec.pop(op_field)
                    if op != "+":
                        if op != "-":
                            break
                        plus = False
                ev = _ev()
                ev.type = typ
                ev.ts = ts
                ev.fields = rec
                ev._n = n
                ev.op = op
                append(ev)
            return out if plus else list(out)
        for n, raw in enumerate(lines, first):  # the same, with the scan of the values
            try:
                rec = loads(raw)
                typ = rec[type_field]
                ts = rec[time_field]
            except Exception:  # noqa: BLE001 - decode gives the precise reason
                break
            tt = type(ts)
            if type(typ) is not str or (tt is not int and tt is not float) or not typ:
                break
            for v in rec.values():  # big floats and nested values: decode's business
                if type(v) in _odd and (type(v) is not float or not _nbig < v < _big):
                    break
            else:
                op = "+"
                if op_field in rec:  # most records have none: no call
                    op = rec.pop(op_field)
                    if op != "+":
                        if op != "-":
                            break
                        plus = False
                ev = _ev()
                ev.type = typ
                ev.ts = ts
                ev.fields = rec
                ev._n = n
                ev.op = op
                append(ev)
                continue
            break
        return out if plus else list(out)

    def plain(lines: list[bytes], _map: Any = map, _tracked: Any = is_tracked) -> list | None:
        """The parsed records of a batch in which no record needs more than ``Engine.push_records``
        checks (its type, its time and whether it has the op field, nothing of its other values):
        every line valid JSON, no run of 19 digits in the bytes but a fraction's (an integer beyond
        64 bits, which orjson reads as a float), and no parsed record holding a dict or a list; None otherwise (a
        string holding such digits, a bad or blank line: the batch goes the usual way,
        ``decode.lines`` and ``Engine.push_batch``).  Why: the engine's loop then checks the
        records itself and makes an Event only for one it keeps (``cep.runtime.handler._fused_head``;
        a record with the op field ends its run there, so it is not looked for in the bytes); the
        parsing is one C loop over the batch (no Python step per record), apart from the engine's
        loop (``_fused_head``: the instruction cache).

        A nested value is found in the parsed records, not in the bytes (``_flat``'s ``[`` and
        ``:{`` with whitespace deleted, ~600 of the ~1,750 instructions a record its check cost on
        card testing's lines): CPython keeps a dict out of the garbage collector's lists while its
        values are all atomic (str, int, float, bool, None) and tracks it once a dict or a list is
        put in it (``gc.is_tracked``; orjson fills its dicts through CPython's own insertion,
        tests/test_fused_loop.py checks that it does), so a record holds a nested value exactly
        when it is tracked: one C call per record.  A record that is not an object (a scalar line)
        is never tracked: the engine's loop stops at it."""
        blob = b"".join(lines)
        if has_long_digit_run(blob) and _INTEGER_RUN.search(blob) is not None:
            return None
        try:
            recs = list(_map(loads, lines))
        except JSONDecodeError:
            return None
        if any(_map(_tracked, recs)):
            return None
        return recs

    decode.many = decode_many  # type: ignore[attr-defined]
    decode.lines = decode_lines  # type: ignore[attr-defined]
    decode.plain = plain  # type: ignore[attr-defined]
    return decode  # type: ignore[return-value]


# ---------------------------------------------------------------------------
# sources (what the run loop asks of them: cep.io.protocol.Source)


class JsonlSource(Source):
    """JSON lines from a binary stream; resumable by byte offset when the stream is a file.

    Reads in chunks (``read1``: one system call, whatever the stream has, up to ``CHUNK`` bytes) and
    hands out the chunk's complete lines with ``take``; only when none is left does it read again,
    and only then can it wait for input.  ``offset`` and ``record`` count what was handed out, never
    what was read ahead, so a checkpoint's position is always a record boundary.
    """

    kind = "jsonl"

    def __init__(self, stream: IO[bytes], name: str = "-", seekable: bool = False, size: int | None = None):
        self._f = stream
        self.name = name
        self.seekable = seekable
        self.size = size
        self.record = 0  # records (lines) consumed so far
        self.last_line = 0
        self._lines: list[bytes] = []  # complete lines read ahead, from index ``_next`` on
        self._next = 0
        self._tail = b""  # the bytes after the last complete line read (a line still arriving)
        # ``offset`` (the byte offset of the next record) is ``_base`` (where ``_lines`` start)
        # plus the lengths of the lines handed out: summed when asked (per tick, per checkpoint),
        # not per batch; ``_nbytes``: the length of all of ``_lines``
        self._base = 0
        self._nbytes = 0

    @property
    def offset(self) -> int:  # type: ignore[override]
        if self._next >= len(self._lines):
            return self._base + self._nbytes
        return self._base + sum(map(len, self._lines[:self._next]))

    def _fill(self) -> bool:
        """Read until at least one complete line (or the last, unterminated one) is ready; False at
        the end of the input.  Each read returns what the stream has: this is where a pipe waits."""
        parts = [self._tail] if self._tail else []
        read1 = self._f.read1
        self._base += self._nbytes  # every line read before was handed out
        self._nbytes = 0
        while True:
            chunk = read1(CHUNK)
            if not chunk:  # the end: what is left is the last line, without a newline
                self._tail = b""
                data = b"".join(parts)
                lines = [data] if data else []
                break
            nl = chunk.rfind(b"\n")
            if nl < 0:  # a long line goes on: keep its parts (no quadratic re-joining)
                parts.append(chunk)
                continue
            if nl + 1 < len(chunk):
                parts.append(chunk[:nl + 1])
                self._tail = chunk[nl + 1:]
            else:
                parts.append(chunk)
                self._tail = b""
            data = b"".join(parts) if len(parts) > 1 else parts[0]
            lines = BytesIO(data).readlines()
            break
        nbytes = len(data)
        if lines and self._base == 0 and self.record == 0 and lines[0].startswith(_BOM):
            # a UTF-8 byte-order mark at the start of the file is not part of the record
            lines[0] = lines[0][3:]
            self._base = 3
            nbytes -= 3
        self._lines = lines
        self._nbytes = nbytes
        self._next = 0
        return bool(lines)

    def take_lines(self, limit: int) -> tuple[int, list[bytes]]:
        """``take`` without the pairs: the number of the first record and the raw lines (at most
        ``limit``; none at the end), record ``first + i`` being ``lines[i]``: the run loop's JSON
        lines path (``decode.lines``), which makes a position string only when one is read."""
        lines = self._lines
        i = self._next
        if i >= len(lines):
            if not self._fill():
                return self.record + 1, []
            lines = self._lines
            i = 0
        j = min(len(lines), i + limit)
        self._next = j
        n = self.record
        part = lines[i:j] if i or j < len(lines) else lines
        self.record = n + len(part)
        return n + 1, part

    def take(self, limit: int) -> list[tuple[str, Any]]:
        first, part = self.take_lines(limit)
        return line_pairs(first, part)

    def records(self) -> Iterator[tuple[str, Any]]:
        take = self.take
        while True:
            got = take(1)
            if not got:
                return
            yield got[0]

    def line_of(self, pos: str) -> int:
        return int(pos)

    def position(self) -> dict:
        return {"kind": self.kind, "offset": self.offset, "record": self.record}

    def seek(self, position: dict) -> None:
        if not self.seekable:
            raise BadSeek("cannot resume: the input is not a seekable file")
        if position.get("kind") != self.kind:
            raise BadSeek(f"checkpoint was written for {position.get('kind')} input, not {self.kind}")
        self._f.seek(position["offset"])
        self._base, self._nbytes = position["offset"], 0
        self.record = position["record"]
        self._lines, self._next, self._tail = [], 0, b""

    def close(self) -> None:
        if self._f is not sys.stdin.buffer:
            self._f.close()


def line_pairs(first: int, lines: list[bytes]) -> list[tuple[str, Any]]:
    """``(pos, raw)`` of lines numbered from ``first`` (``JsonlSource.take``'s records), the
    positions in a C loop."""
    return list(zip(map(str, range(first, first + len(lines))), lines, strict=True))


class BadSeek(Exception):
    """A checkpoint position this source cannot resume from."""


class CsvSource(Source):
    """CSV with a header row; numeric-looking cells become numbers, empty cells null.

    Lines are read in binary so the byte offset of the next record is known; a
    quoted cell may span lines (a record ends when its quotes are balanced).
    """

    kind = "csv"

    def __init__(self, stream: IO[bytes], name: str = "-", seekable: bool = False, size: int | None = None):
        self._f = stream
        self.name = name
        self.seekable = seekable
        self.size = size
        self.header: list[str] | None = None
        self.offset = 0
        self.record = 0
        self.line = 0  # physical lines consumed
        self.last_line = 0
        self._line_of: dict[str, int] = {}  # record -> its first line, for the records of the last batch
        self._read_header()

    def _read_one(self) -> tuple[bytes, int, str | None] | None:
        """The next physical record (possibly several lines), its line count and what is wrong with
        its quotes (None: nothing).  A record goes on to the next line only inside a quoted cell."""
        buf = self._f.readline()
        if not buf:
            return None
        if b'"' not in buf:
            return buf, 1, None
        nlines = 1
        open_quote, problem = _scan_quotes(buf, False)
        while open_quote and problem is None:
            more = self._f.readline()
            if not more:
                return buf, nlines, "a quoted cell is not closed before the end of the input"
            buf += more
            nlines += 1
            open_quote, problem = _scan_quotes(more, True)
        return buf, nlines, problem

    def _read_header(self) -> None:
        import csv

        got = self._read_one()
        if got is None:
            self.header = []
            return
        buf, nlines, _problem = got
        self.offset += len(buf)
        self.line += nlines
        try:
            rows = list(csv.reader([buf.decode("utf-8-sig")]))
        except (UnicodeDecodeError, csv.Error) as e:
            raise SourceError(f"cannot read the CSV header of {self.name}: {e}") from None
        self.header = rows[0] if rows else []

    def records(self) -> Iterator[tuple[str, Any]]:
        import csv

        header = self.header or []
        width = len(header)
        num = _NUMBER.fullmatch
        integer = _INTEGER.fullmatch
        while True:
            got = self._read_one()
            if got is None:
                return
            buf, nlines, problem = got
            self.offset += len(buf)
            first_line = self.line + 1
            self.line += nlines
            self.last_line = first_line
            try:
                text = buf.decode("utf-8")
            except UnicodeDecodeError as e:
                text = buf.decode("utf-8", errors="replace")
                if text.strip():
                    self.record += 1
                    yield str(self.record), BadRow(
                        f"not valid UTF-8 (byte 0x{buf[e.start]:02x} at offset {e.start} of the record)", text)
                continue
            if not text.strip():
                continue
            self.record += 1
            pos = str(self.record)
            if problem is not None:
                yield pos, BadRow(problem, text)
                continue
            try:
                rows = list(csv.reader([text]))
            except csv.Error as e:
                yield pos, BadRow(f"bad CSV: {e}", text)
                continue
            cells = rows[0] if rows else []
            if len(cells) != width:
                yield pos, BadRow(f"expected {width} cells (the header's), got {len(cells)}", text)
                continue
            rec: dict[str, Any] = {}
            try:
                for k, c in zip(header, cells, strict=True):
                    s = c.strip()
                    if not s:
                        rec[k] = None
                    elif num(s):
                        rec[k] = int(s) if integer(s) else float(s)
                    else:
                        rec[k] = c
            except ValueError as e:  # an integer past Python's 4300 digits
                yield pos, BadRow(f"bad number: {str(e)[:100]}", text)
                continue
            yield pos, rec

    def take(self, limit: int) -> list[tuple[str, Any]]:
        """As ``Source.take``, remembering each record's line for messages about it."""
        if self._taking is None:
            self._taking = self.records()
        lines = self._line_of
        lines.clear()
        out = []
        for item in islice(self._taking, limit if self.seekable else 1):
            lines[item[0]] = self.last_line
            out.append(item)
        return out

    def line_of(self, pos: str) -> int:
        return self._line_of.get(pos, self.last_line)

    def position(self) -> dict:
        return {"kind": self.kind, "offset": self.offset, "record": self.record, "line": self.line}

    def seek(self, position: dict) -> None:
        if not self.seekable:
            raise BadSeek("cannot resume: the input is not a seekable file")
        if position.get("kind") != self.kind:
            raise BadSeek(f"checkpoint was written for {position.get('kind')} input, not {self.kind}")
        self._f.seek(position["offset"])
        self.offset = position["offset"]
        self.record = position["record"]
        self.line = position["line"]
        self._taking = None

    def close(self) -> None:
        if self._f is not sys.stdin.buffer:
            self._f.close()


def _scan_quotes(line: bytes, in_quoted: bool) -> tuple[bool, str | None]:
    """Walk one line of CSV (RFC 4180 quoting): (does a quoted cell stay open at its end, the problem).

    A cell is quoted when it starts with ``"``; inside it ``""`` is a quote and a lone ``"``
    ends it and must be followed by a comma or the end of the line.  A quote anywhere in an
    unquoted cell (``ab"c``) is a problem: the record is bad, and it ends at its line, so the
    good lines after it are read as usual.
    """
    n = len(line)
    i = 0
    while i < n:
        if in_quoted:
            j = line.find(b'"', i)
            if j < 0:
                return True, None
            if line[j + 1:j + 2] == b'"':
                i = j + 2
                continue
            in_quoted = False
            i = j + 1
            if i < n and line[i] not in b",\r\n":
                return False, f"stray quote: a quote in a quoted cell must be doubled (column {j + 1})"
            i += 1  # past the comma
            continue
        if line[i:i + 1] == b'"':  # a cell that starts with a quote
            in_quoted = True
            i += 1
            continue
        j = line.find(b",", i)
        end = n if j < 0 else j
        q = line.find(b'"', i, end)
        if q >= 0:
            return False, f"stray quote in an unquoted cell (column {q + 1}): quote the cell and double the quote"
        if j < 0:
            return False, None
        i = j + 1
    return in_quoted, None


class BadRow:
    """A CSV row that cannot become a record; the decoder reports ``reason``."""

    __slots__ = ("reason", "text")

    def __init__(self, reason: str, text: str) -> None:
        self.reason = reason
        self.text = text


def no_fast_path(batch: list[tuple[str, Any]]) -> list[Event]:
    """A decoder's ``many`` where no record takes a batch path (every record goes through the
    decoder itself): CSV rows, and the run loop's partitioned input (a clock per record)."""
    return []


def csv_decoder(decode: Decoder) -> Decoder:
    """Wrap ``decode`` so a ``BadRow`` from ``CsvSource`` becomes a ``BadRecord``."""

    def decode_csv(pos: str, raw: Any) -> Event:
        if type(raw) is BadRow:
            raise BadRecord(raw.reason)
        return decode(pos, raw)

    decode_csv.many = no_fast_path  # type: ignore[attr-defined]
    return decode_csv  # type: ignore[return-value]


def open_source(spec: str, fmt: str = "jsonl"):
    """``-`` (stdin), a file path, or ``kafka://...`` (cep.io.kafka, imported only then)."""
    if spec.startswith("kafka://"):
        try:
            from cep.io import kafka  # type: ignore[import-not-found]
        except ImportError as e:
            raise SourceError(f"Kafka input needs the kafka extra (pip install 'cep[kafka]'): {e}") from None
        return kafka.open_source(spec)
    cls = CsvSource if fmt == "csv" else JsonlSource
    if spec == "-":
        return cls(sys.stdin.buffer, "-", seekable=False)
    try:
        f = open(spec, "rb")
    except OSError as e:
        raise SourceError(f"cannot open input {spec}: {e.strerror or e}") from None
    import os

    size = os.fstat(f.fileno()).st_size
    return cls(f, spec, seekable=True, size=size)


class SourceError(Exception):
    """The input cannot be opened."""


def parse_only(
    path: str,
    fmt: str = "jsonl",
    type_field: str = "type",
    time_field: str = "ts",
    time_unit: str = "s",
    op_field: str = "op",
) -> int:
    """Read and decode every record of ``path`` into Events, doing nothing else.

    The floor the benchmark compares ``cep run`` against: the same source, batches and
    decoder as the run loop.  Returns the number of good records.
    """
    src = open_source(path, fmt)
    decode = make_decoder(type_field, time_field, time_unit, op_field)
    if fmt == "csv":
        decode = csv_decoder(decode)
    many = decode.many  # the run loop's batch path, as there
    n = 0
    take = src.take
    try:
        if fmt != "csv" and type(src) is JsonlSource:  # the run loop's JSON lines path (``decode.lines``)
            take_lines, many_lines = src.take_lines, decode.lines
            while True:
                first, lines = take_lines(BATCH)
                if not lines:
                    return n
                k = len(many_lines(lines, first))
                n += k
                if k < len(lines):
                    for pos, raw in line_pairs(first + k, lines[k:]):
                        try:
                            decode(pos, raw)
                        except BadRecord:
                            continue
                        n += 1
        while batch := take(BATCH):
            k = len(many(batch))
            n += k
            for pos, raw in batch[k:] if k else batch:
                try:
                    decode(pos, raw)
                except BadRecord:
                    continue
                n += 1
    finally:
        src.close()
    return n
