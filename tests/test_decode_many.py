"""``decode.many`` (the run loop's batch path) against ``decode`` (the per-record reader).

Why: ``make_decoder``'s batch path repeats the per-record fast path's checks inline (no frame per
record is its point), so the two could drift apart.  Whatever a batch holds, the Events ``many``
returns are exactly ``decode``'s for the same leading records, and a batch of regular records
(string type, numeric time, flat values, no big float, a valid op or none) is taken whole.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
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


@settings(max_examples=300, deadline=None)
@given(st.lists(_ANY_RECORD, max_size=6), st.integers(1, 10**12))
def test_lines_gives_many_s_events_with_positions_made_when_read(lines, first):
    """``decode.lines`` (the run loop's JSON lines path) against ``decode.many`` over the same
    records numbered from ``first``: the same leading records taken, the same Events (``pos`` the
    record number's string, made when read)."""
    decode = make_decoder()
    batch = [(str(first + i), raw) for i, raw in enumerate(lines)]
    want = decode.many(batch)
    got = decode.lines(lines, first)
    assert len(got) == len(want)
    for e, w in zip(got, want, strict=True):
        assert type(e) is LineEvent and isinstance(e, Event)
        assert (e.type, e.ts, e.fields, e.pos, e.op) == (w.type, w.ts, w.fields, w.pos, w.op)
        assert repr(e) == repr(w)
        assert e.__getstate__() == w.__getstate__()


def test_a_line_event_is_an_event_for_pickle_and_assignment():
    import pickle

    e = make_decoder().lines([b'{"type":"A","ts":1,"x":2}'], 41)[0]
    assert e.pos == "41"
    back = pickle.loads(pickle.dumps(e))
    assert (back.type, back.ts, back.fields, back.pos, back.op) == ("A", 1, {"type": "A", "ts": 1, "x": 2}, "41", "+")
    e.pos = "p:7"
    assert e.pos == "p:7"
