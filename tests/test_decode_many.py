"""``decode.many`` (the run loop's batch path) against ``decode`` (the per-record reader).

Why: ``make_decoder``'s batch path repeats the per-record fast path's checks inline (no frame per
record is its point), so the two could drift apart.  Whatever a batch holds, the Events ``many``
returns are exactly ``decode``'s for the same leading records, and a batch of regular records
(string type, numeric time, flat values, no big float, a valid op or none) is taken whole.
"""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from cep.event import Event
from cep.io.readers import BadRecord, LineEvent, make_decoder

_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.text(max_size=3),
                    st.floats(allow_nan=False, allow_infinity=False), st.just(1e300), st.just([1]), st.just({"a": 1}))
_REGULAR_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.text(max_size=3),
                            st.floats(-1e6, 1e6, allow_nan=False))


def _line(rec: dict) -> bytes:
    return json.dumps(rec).encode()  # (not orjson: it refuses integers beyond 64 bits, which records may hold)


_ANY_RECORD = st.one_of(
    st.builds(lambda t, ts, op, extra: _line({"type": t, "ts": ts, **({} if op is None else {"op": op}), **extra}),
              st.sampled_from(["A", "B", "", 7]),
              st.one_of(st.integers(-10, 10), st.floats(-10, 10, allow_nan=False), st.just("2024-01-01T00:00:00Z"),
                        st.none()),
              st.sampled_from([None, "+", "-", "x", 1]),
              st.dictionaries(st.sampled_from(["a", "b", "c"]), _VALUES, max_size=3)),
    st.sampled_from([b"", b"{", b"[1]", b'"x"', b'{"ts": 1}', b'{"type": "A"}']),
)
_REGULAR_RECORD = st.builds(
    lambda t, ts, op, extra: _line({"type": t, "ts": ts, **({} if op is None else {"op": op}), **extra}),
    st.sampled_from(["A", "B"]), st.one_of(st.integers(-10**12, 10**12), st.floats(-1e6, 1e6, allow_nan=False)),
    st.sampled_from([None, "+", "-"]), st.dictionaries(st.sampled_from(["a", "b", "c"]), _REGULAR_VALUES, max_size=3))


def _decoded(decode, pos: str, raw: bytes):
    try:
        e = decode(pos, raw)
    except BadRecord as exc:
        return ("bad", str(exc))
    return (e.type, e.ts, e.fields, e.pos, e.op)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ANY_RECORD, max_size=6))
def test_many_gives_decodes_events_for_the_leading_records_it_takes(lines):
    decode = make_decoder()
    batch = [(str(i + 1), raw) for i, raw in enumerate(lines)]
    got = decode.many(batch)
    assert len(got) <= len(batch)
    for e, (pos, raw) in zip(got, batch, strict=False):
        assert (e.type, e.ts, e.fields, e.pos, e.op) == _decoded(decode, pos, raw)


@settings(max_examples=200, deadline=None)
@given(st.lists(_REGULAR_RECORD, max_size=8))
def test_many_takes_a_batch_of_regular_records_whole(lines):
    decode = make_decoder()
    batch = [(str(i + 1), raw) for i, raw in enumerate(lines)]
    assert len(decode.many(batch)) == len(batch)


def _same_as_decode(decode, got, lines, first, want_len):
    """``got`` (``decode.lines``) is ``decode``'s Event of each record it took, as ``LineEvent``s
    with the record number's string as ``pos``, and takes at least the ``want_len`` records
    ``decode.many`` takes (beyond them only a record whose big float came from a fraction or an
    exponent: ``decode`` takes it too, with the same values)."""
    assert want_len <= len(got) <= len(lines)
    for i, e in enumerate(got):
        assert type(e) is LineEvent and isinstance(e, Event)
        w = decode(str(first + i), lines[i])
        assert (e.type, e.ts, e.fields, e.pos, e.op) == (w.type, w.ts, w.fields, w.pos, w.op)
        assert [type(v) for v in e.fields.values()] == [type(v) for v in w.fields.values()]
        assert repr(e) == repr(w)
        assert e.__getstate__() == w.__getstate__()


@settings(max_examples=300, deadline=None)
@given(st.lists(_ANY_RECORD, max_size=6), st.integers(1, 10**12))
def test_lines_gives_decode_s_events_with_positions_made_when_read(lines, first):
    """``decode.lines`` (the run loop's JSON lines path) against ``decode.many`` and ``decode`` over
    the same records numbered from ``first``."""
    decode = make_decoder()
    want = decode.many([(str(first + i), raw) for i, raw in enumerate(lines)])
    _same_as_decode(decode, decode.lines(lines, first), lines, first, len(want))


def test_a_line_event_is_an_event_for_pickle_and_assignment():
    import pickle

    e = make_decoder().lines([b'{"type":"A","ts":1,"x":2}'], 41)[0]
    assert e.pos == "41"
    back = pickle.loads(pickle.dumps(e))
    assert (back.type, back.ts, back.fields, back.pos, back.op) == ("A", 1, {"type": "A", "ts": 1, "x": 2}, "41", "+")
    e.pos = "p:7"
    assert e.pos == "p:7"


_TRICKY = st.one_of(
    st.just([1]), st.just({"a": 1}), st.just({"a": [1]}), st.just(2**63), st.just(-2**63 - 1), st.just(2**64 + 1),
    st.just(1e19), st.just(-1e19), st.just(9.2e18), st.just(1e300), st.just(2.5e-7), st.just(123456789012345.5),
    st.sampled_from(["[", "{", "}{", "a{b", "1e5", "9E9", "1234567890123456789", "x" * 3, "\n{"]),
    st.integers(-10**18, 10**18), st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=300, deadline=None)
@given(st.lists(_REGULAR_RECORD, max_size=6), st.integers(0, 6), st.sampled_from(["a", "type", "ts"]), _TRICKY,
       st.booleans())
@example(lines=[], at=0, key="a", value={"a": 1}, spaced=False)  # a nested object: a brace inside a line
@example(lines=[], at=0, key="a", value=[1], spaced=False)
@example(lines=[], at=0, key="a", value=2**64 + 1, spaced=False)  # 20 digits: orjson reads a float
@example(lines=[], at=0, key="a", value=1e19, spaced=False)  # an exponent: a big float
def test_lines_skips_the_value_scan_only_when_the_bytes_allow_it(lines, at, key, value, spaced):
    """``decode.lines`` looks at a batch's bytes to skip the per-record scan for nested values and
    big floats: one record with such a value (or a string that looks like one) among regular ones,
    written compactly or with spaces, must give ``decode``'s events, stopping where ``decode.many``
    stops (or after a float literal beyond 2**63 that is not an integer's)."""
    rec = {"type": "A", "ts": 1, key: value}
    text = json.dumps(rec) if spaced else json.dumps(rec, separators=(",", ":"))
    lines = list(lines)
    lines.insert(min(at, len(lines)), text.encode())
    decode = make_decoder()
    want = decode.many([(str(i + 1), raw) for i, raw in enumerate(lines)])
    got = decode.lines(lines, 1)
    _same_as_decode(decode, got, lines, 1, len(want))
    if len(got) > len(want):  # taken beyond decode.many: a big float from a fraction or an exponent
        assert type(value) is float and abs(value) >= 2.0**63


@settings(max_examples=300, deadline=None)
@given(st.lists(_ANY_RECORD, max_size=12), st.integers(1, 10**6))
def test_an_insert_batch_holds_no_retraction(lines, first):
    """``decode.lines`` gives an ``InsertBatch`` (``cep run`` then lets the engine skip the op test)
    exactly when none of the events it made is a retraction."""
    from cep.io.readers import InsertBatch

    out = make_decoder().lines(lines, first)
    assert (type(out) is InsertBatch) == all(e.op == "+" for e in out)
