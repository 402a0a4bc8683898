"""The engine state on disk and in Spark's state store: versioned plain data, read by a strict decoder.

Why not pickle: a state file comes from outside the process (a checkpoint on
disk, a blob in a state store), and unpickling runs whatever code the bytes
name.  This format cannot run code: it is the magic ``CEPSTATE``, a newline
and one JSON document (stdlib ``json``: integers of any size stay exact
integers; ``Infinity``/``NaN`` are the only constants admitted, for a watermark
at the end of a bounded input and CSV cells such as ``1e999``).  The decoder
then checks the exact shape of every part (``decode_state`` below), so a corrupted,
truncated, foreign or crafted state is one ``StateError`` with a reason, never
an exception from deep inside the engine.

Document (format 3)::

    {"format": 3,
     "patterns": [signature, ...],          # what the state was saved with
     "lateness": number, "max_ts": number|null, "watermark": number|null,
     "serial": int,                          # the next event serial
     "events": [[serial, type, ts, {field: scalar}, pos, op], ...],
     "stats": {name: int}, "matches_emitted": {pattern: {"+": int, "-": int}},
     "pending": [null | [[atom, serial], ...], ...]}  # per pattern: deciding events (docs/language.md section 7, Decided matches)

Format 1 was a pickle and is refused (it cannot be read safely).  Format 2 kept pending
matches one per match; it is refused with the reason (start without the old state, or
finish the old run with the cep that wrote it).
"""

from __future__ import annotations

import math
from typing import Any

from cep.event import Event
from cep.longints import has_long_digit_run

STATE_MAGIC = b"CEPSTATE"
STATE_FORMAT = 3
_HEADER = STATE_MAGIC + b"\n"
_CONSTANTS = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


class StateError(Exception):
    """A saved engine state this version cannot use; ``str(e)`` is the reason, one line."""


def encode_state(state: dict[str, Any]) -> bytes:
    """The state document (shape in the module docstring) as bytes."""
    import json  # checkpoints only: not imported at start-up

    doc = dict(state)
    doc["format"] = STATE_FORMAT
    doc["events"] = [[s, e.type, e.ts, e.fields, e.pos, e.op] for s, e in state["events"]]
    if _finite(doc):
        import orjson

        try:
            return _HEADER + orjson.dumps(doc)
        except orjson.JSONEncodeError:  # an integer past 64 bits, a lone surrogate, not plain data: as below
            pass
    try:
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError) as e:
        raise StateError(f"the engine state holds a value that is not plain data: {e}") from None
    return _HEADER + text.encode("utf-8")


def _finite(doc: dict[str, Any]) -> bool:
    """Whether no number of the document is infinite or NaN (orjson writes those as ``null``; stdlib ``json``
    as the constants ``decode_state`` reads back).

    Why orjson: a Spark key group's state is written every micro-batch (64 engines per 10^5 events), and stdlib
    ``json`` was ~1 % of the Python workers' CPU; the document it writes means the same (``decode_state``).
    """
    for key in ("lateness", "max_ts", "watermark"):
        v = doc[key]
        if type(v) is float and v - v != 0:  # (inf - inf and nan - nan are NaN)
            return False
    for ev in doc["events"]:
        ts = ev[2]
        if type(ts) is float and ts - ts != 0:
            return False
        for v in ev[3].values():
            if type(v) is float and v - v != 0:
                return False
    return True


def _constant(name: str) -> float:
    return _CONSTANTS[name]




def _document(text: bytes) -> Any:
    """The state's JSON document as stdlib ``json`` reads it (``Infinity``/``NaN`` admitted, integers of any
    size exact), read with orjson when that gives the same.

    Why: a Spark worker that does not hold a key group's engines loads them from the state bytes every
    micro-batch (64 engines per 10^5 events on local[2]), and stdlib ``json`` was a third of ``decode_state``.
    orjson reads any JSON text without such a run of digits as ``json`` does (the same grammar, the last of
    duplicate keys, correctly rounded floats); what it refuses (the constants, a lone surrogate, an out of
    range float, anything malformed) goes to ``json``, which reads it or gives the reason, as before.
    """
    if not has_long_digit_run(text):
        import orjson

        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    import json

    return json.loads(text.decode("utf-8"), parse_constant=_constant)


def decode_state(data: bytes) -> dict[str, Any]:
    """``encode_state``'s document back, every part checked; events as ``(serial, Event)`` pairs."""
    if not data.startswith(STATE_MAGIC):
        raise StateError("not a cep engine state")
    if not data.startswith(_HEADER):
        raise StateError("engine state format 1 (a pickle) is not read by this cep, "
                         f"which reads format {STATE_FORMAT}: start without the old state")
    try:
        doc = _document(data[len(_HEADER):])
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        reason = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise StateError(f"unreadable engine state (truncated or corrupted): {reason}") from None
    if not isinstance(doc, dict):
        raise StateError("unreadable engine state: not a state document")
    fmt = doc.get("format")
    if fmt != STATE_FORMAT:
        raise StateError(f"engine state format {_short(fmt)} cannot be read by this cep "
                         f"(it reads format {STATE_FORMAT}): start without the old state")
    return {
        "patterns": _list_of(doc, "patterns", str),
        "lateness": _number(doc, "lateness"),
        "max_ts": _number(doc, "max_ts", none=True),
        "watermark": _number(doc, "watermark", none=True),
        "serial": _int(doc, "serial"),
        "events": [_event(x) for x in _get(doc, "events", list)],
        "stats": _counters(_get(doc, "stats", dict), "stats"),
        "matches_emitted": {_str(k, "matches_emitted"): _counters(v, f"matches_emitted.{k}")
                            for k, v in _get(doc, "matches_emitted", dict).items()},
        "pending": [None if x is None else _pending(x) for x in _get(doc, "pending", list)],
    }


def _pending(x: Any) -> list[list[int]]:
    """One pattern's deciding events of undecided matches: ``[atom, serial]`` each."""
    if type(x) is not list:
        raise _bad("pending", x)
    for m in x:
        if type(m) is not list or len(m) != 2 or not all(type(v) is int and v >= 0 for v in m):
            raise _bad("a pending match", m)
    return x


# --------------------------------------------------------------- the checks


def _short(v: Any) -> str:
    return repr(v)[:60]


def _bad(what: str, v: Any) -> StateError:
    return StateError(f"corrupted engine state: {what} is {_short(v)}")


def _get(doc: dict, key: str, typ: type) -> Any:
    if key not in doc:
        raise StateError(f"corrupted engine state: no {key!r}")
    v = doc[key]
    if type(v) is not typ:
        raise _bad(key, v)
    return v


def _is_number(v: Any) -> bool:
    return type(v) is int or type(v) is float


def _number(doc: dict, key: str, none: bool = False) -> int | float | None:
    if key not in doc:
        raise StateError(f"corrupted engine state: no {key!r}")
    v = doc[key]
    if (v is None and none) or _is_number(v):
        return v
    raise _bad(key, v)


def _int(doc: dict, key: str) -> int:
    v = _get(doc, key, int)
    if v < 0:
        raise _bad(key, v)
    return v


def _str(v: Any, what: str) -> str:
    if type(v) is not str:
        raise _bad(what, v)
    return v


def _list_of(doc: dict, key: str, typ: type) -> list:
    v = _get(doc, key, list)
    for x in v:
        if type(x) is not typ:
            raise _bad(key, x)
    return v


def _counters(v: Any, what: str) -> dict[str, int]:
    if type(v) is not dict:
        raise _bad(what, v)
    for k, n in v.items():
        if type(n) is not int:
            raise _bad(f"{what}.{k}", n)
    return v


_SCALARS = (int, float, str, bool, type(None))


def _event(x: Any) -> tuple[int, Event]:
    if type(x) is not list or len(x) != 6:
        raise _bad("an event", x)
    serial, typ, ts, fields, pos, op = x
    if type(serial) is not int or serial < 0:
        raise _bad("an event serial", serial)
    if type(typ) is not str or not typ:
        raise _bad("an event type", typ)
    if not _is_number(ts) or not math.isfinite(ts):
        raise _bad("an event time", ts)
    if type(fields) is not dict:
        raise _bad("an event's fields", fields)
    for k, v in fields.items():
        if type(v) not in _SCALARS:
            raise _bad(f"field {k!r} of an event", v)
    if type(pos) is not str:
        raise _bad("an event position", pos)
    if op != "+" and op != "-":
        raise _bad("an event op", op)
    return serial, Event(typ, ts, fields, pos, op)
