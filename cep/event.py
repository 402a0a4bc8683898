"""Input events and output composite events, as the engine core sees them.

An ``Event`` is one input record after reading: its type, its numeric event
time, the record as read (``fields``), its input position (``pos``: the record
number in a file, ``partition:offset`` in Kafka) and its op.  An ``Output`` is
one emitted composite event (docs/language.md section 5).  The id of a composite event is a
hash of the pattern name and its events' positions, so replaying the same input
gives the same ids and a ``-`` carries the id of the ``+`` it retracts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

try:  # the BLAKE2 module itself: ``hashlib`` would load OpenSSL too (a few ms at every start, unused)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b
from typing import Any, NamedTuple

from cep import codegen


class Event:
    """One input event.  ``fields`` is the record as read, without the op field."""

    __slots__ = ("type", "ts", "fields", "pos", "op")

    def __init__(self, type: str, ts: int | float, fields: dict, pos: str, op: str = "+") -> None:
        self.type = type
        self.ts = ts
        self.fields = fields
        self.pos = pos
        self.op = op

    def __repr__(self) -> str:
        return f"Event({self.type!r}, {self.ts!r}, {self.fields!r}, pos={self.pos!r}, op={self.op!r})"

    def __getstate__(self):
        return (self.type, self.ts, self.fields, self.pos, self.op)

    def __setstate__(self, state) -> None:
        self.type, self.ts, self.fields, self.pos, self.op = state


class LineEvent(Event):
    """An Event of ``decode.lines`` (a JSON lines file read by ``JsonlSource.take_lines``): its
    position is the record's line number ``_n``, made the string ``pos`` only when read.

    Why: most records of a sparse stream are never stored or emitted, and their position string
    (``str`` of the record number, plus the ``(pos, raw)`` pair carrying it) was ~1,300 of the
    ~13,600 instructions a record costs to read and decode (issue 15); ids and messages read
    ``pos`` only for the events of a match or a bad record, and get the same string as before.
    Made without arguments (``LineEvent()``: no ``__init__`` frame, cheaper than
    ``object.__new__``), its slots set one by one; assigning ``pos`` stores the given value.
    The engine's own loop over parsed records (``Engine.push_records``) makes them too, only for the
    records it keeps or emits."""

    __slots__ = ("_n",)
    __init__ = object.__init__  # type: ignore[assignment]

    @property  # type: ignore[override]
    def pos(self) -> str:
        return str(self._n)

    @pos.setter
    def pos(self, value: str) -> None:
        self._n = value


class Output(NamedTuple):
    """One composite event: ``{"pattern", "op", "id", "match"}`` on the wire.

    ``key`` is the values of the pattern's partition key in this match (None
    when the pattern has none): keyed sinks (Kafka) use it as the record key,
    whatever EMIT keeps.
    """

    pattern: str
    op: str
    id: str
    match: dict[str, Any]
    key: tuple | None = None

def match_id(pattern: str, positions: tuple[str, ...]) -> str:
    """The deterministic id of a composite event: 16 hex digits of a keyed hash."""
    # the bytes hashed: the pattern name, then NUL and each position (one call: this runs per composite event)
    return blake2b("\x00".join((pattern, *positions)).encode(), digest_size=8).hexdigest()


def _generic_id(pattern: str, events: Sequence[Event]) -> str:
    return blake2b("\x00".join([pattern, *[e.pos for e in events]]).encode(), digest_size=8).hexdigest()


def match_id_fn(pattern: str, arity: int) -> Callable[[Sequence[Event]], str]:
    """``events -> match_id(pattern, their positions)`` for one pattern: a generated function whose
    common case (``arity`` events) hashes the positions from a copy of the hash state that has read
    the pattern name already (``match_id_source``; it runs per composite event); any other number of
    events (a repeated element) takes the general path."""
    if arity < 1:
        return lambda events: _generic_id(pattern, events)
    names = [f"e{i}" for i in range(arity)]
    lines, mid = match_id_source("_seed", [f"{n}.pos" for n in names])
    src = (f"def mid(events):\n"
           f"    if len(events) == {arity}:\n"
           f"        {', '.join(names)}{',' if arity == 1 else ''} = events\n"
           + "".join(f"        {line}\n" for line in lines) +
           f"        return {mid}\n"
           f"    return _generic(_P, events)\n")
    return codegen.define(f"{pattern}: id of a match", src, "mid",
                          {"_seed": match_id_seed(pattern), "_P": pattern, "_generic": _generic_id})


def match_id_seed(pattern: str) -> Callable[[], Any]:
    """A function returning a fresh BLAKE2b state that has read the pattern name and its NUL: the
    start of every id of the pattern (copying a state costs a third of making one with its
    parameters, and hashing is streaming, so the digest is ``match_id``'s)."""
    state = blake2b(digest_size=8)
    state.update(f"{pattern}\x00".encode())
    return state.copy


def match_id_source(seed: str, positions: Sequence[str]) -> tuple[list[str], str]:
    """Generated code for ``match_id``: statements (using the name ``h``) and the id's expression,
    for the ``match_id_seed`` held by the name ``seed`` and the positions (strings) of the events
    given by the expressions ``positions``.
    The bytes hashed after the seed are ``match_id``'s: the positions joined with NUL (an
    f-string: no call, no tuple)."""
    joined = positions[0] if len(positions) == 1 else 'f"' + "\\x00".join(f"{{{p}}}" for p in positions) + '"'
    return [f"h = {seed}()", f"h.update({joined}.encode())"], "h.hexdigest()"
