"""The engine's loop over parsed JSON records (``Engine.push_records``: the record's checks fused into
the batch loop, ``cep.runtime.handler._fused_head``) against decoding first and pushing the Events.

Checked here:

* over random patterns and streams (v1, NOT, Kleene: tests/strategies.py) with lines the loop does
  not decode mixed in (bad JSON, blank, not an object, no type, a time as a string, a type that is
  not a string), the lines taken, the outputs (ids are hashes of the line numbers), the late
  records, the counters and the retained events are those of ``decode`` + ``Engine.push``, one
  record at a time; the loop stops exactly at the first line it does not decode;
* ``decode.plain`` (which batches may take that loop) says no to a batch with a nested value or a
  big integer, yes to plain records (an op field among them too: the loop stops at it, the op
  field's name looked for among the parsed keys, escapes and all, whatever its value);
* ``cep run`` takes a plain batch through ``push_records`` (up to a retraction in it, the rest
  through ``push_batch``), and its output, late output and error reports equal those of the path
  without it.
"""

from __future__ import annotations

import io
import re

import orjson
import pytest
from cephelp import PATTERNS
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from strategies import cases, gap_cases, kleene_cases
from test_run_batches import _run_files

import cep.commands.run as runner
from cep.errors import BatchInterrupted, LateEventError
from cep.io.readers import BadRecord, make_decoder
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine

CARD = str(PATTERNS / "card_testing.pattern")

# lines ``push_records`` leaves to the caller's decoder: bad ones and ones its slow path takes
_ODD_LINES = [b'{"type": "A", "ts": \n', b"\n", b"[1]\n", b'"x"\n', b"5\n", b'{"ts": 1}\n', b'{"type": 7, "ts": 1}\n',
              b'{"type": "", "ts": 1}\n', b'{"type": "A", "ts": "3"}\n', b'{"type": "A", "ts": null}\n',
              b'{"type": "A", "ts": true}\n', b'{"type": "B", "ts": "x"}\n']


def _lines(case, odd: list[tuple[int, int]]) -> list[bytes]:
    """The case's inserts as JSON lines (its retractions dropped: ``push_records`` takes none), odd
    lines inserted at the given places."""
    lines = [orjson.dumps({k: v for k, v in r.items() if k != "op"}) + b"\n" for r in case.records
             if r.get("op", "+") == "+"]
    for at, which in sorted(odd, reverse=True):
        lines.insert(min(at, len(lines)), _ODD_LINES[which % len(_ODD_LINES)])
    return lines


def _engine(case) -> Engine:
    return Engine(compile_text(case.text, time_unit=case.time_unit), lateness=case.lateness)


def _state(eng: Engine) -> tuple:
    return (eng.stats, eng.matches_emitted, sorted((s, e.type, e.ts, e.fields, e.pos, e.op) for s, e in eng.events.items()),
            eng.watermark, eng.max_ts, eng._serial)


def _decoded_one_at_a_time(case, lines: list[bytes]) -> tuple:
    """Each line decoded (``decode``), then pushed alone: outputs, late and bad line numbers, state."""
    decode = make_decoder(time_field=case.time_field, time_unit=case.time_unit)
    eng = _engine(case)
    outs, late, bad = [], [], []
    _one_at_a_time(decode, eng, enumerate(lines, 1), outs, late, bad)
    return outs, late, bad, _state(eng)


def _one_at_a_time(decode, eng: Engine, numbered, outs: list, late: list, bad: list) -> None:
    """Each ``(line number, raw line)`` decoded and pushed alone, its outputs, late and bad line
    numbers appended."""
    for n, raw in numbered:
        try:
            ev = decode(str(n), raw)
        except BadRecord:
            bad.append(n)
            continue
        try:
            outs += eng.push(ev)
        except LateEventError:
            late.append(n)


def _fused(case, lines: list[bytes], cuts: list[int], first: int = 1) -> tuple:
    """``push_records`` over batches of ``lines`` (``cuts``), a line it stops at decoded and pushed as
    ``cep run`` does: the same results, and each stop is at a line ``decode.lines`` would not take
    on its fast path or that ``push_records`` does not take (a time or type it leaves to ``decode``)."""
    decode = make_decoder(time_field=case.time_field, time_unit=case.time_unit)
    eng = _engine(case)
    outs, late, bad = [], [], []
    start, k = 0, 0
    while start < len(lines):
        batch = lines[start:start + cuts[k % len(cuts)]]
        k += 1
        try:
            recs = decode.plain(batch)
            if recs is None:  # not a plain batch (a bad or blank line among them): the usual way
                _one_at_a_time(decode, eng, enumerate(batch, first + start), outs, late, bad)
                start += len(batch)
                continue
            took, got = eng.push_records(recs, first + start, "type", case.time_field)
        except BatchInterrupted as bi:
            assert isinstance(bi.__cause__, LateEventError), bi.__cause__
            outs += bi.outputs
            late.append(first + start + bi.index)
            start += bi.index + 1
            continue
        outs += got
        assert 0 <= took <= len(batch)
        start += took
        if took < len(batch):  # the line it stopped at: not one decode.lines takes with an int or float time
            raw = lines[start]
            n = first + start
            start += 1
            try:
                ev = decode(str(n), raw)
            except BadRecord:
                bad.append(n)
                continue
            assert type(ev.ts) not in (int, float) or type(orjson.loads(raw)[case.time_field]) not in (int, float), raw
            try:
                outs += eng.push(ev)
            except LateEventError:
                late.append(n)
    return outs, late, bad, _state(eng)


_PROPS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_CUTS = st.lists(st.integers(1, 9), min_size=1, max_size=4)
_ODD = st.lists(st.tuples(st.integers(0, 30), st.integers(0, len(_ODD_LINES) - 1)), max_size=3)


@_PROPS
@given(cases(), _CUTS, _ODD)
def test_push_records_equals_decode_and_push_v1(case, cuts, odd):
    lines = _lines(case, odd)
    assert _fused(case, lines, cuts) == _decoded_one_at_a_time(case, lines)


@_PROPS
@given(gap_cases(), _CUTS, _ODD)
def test_push_records_equals_decode_and_push_not(case, cuts, odd):
    lines = _lines(case, odd)
    assert _fused(case, lines, cuts) == _decoded_one_at_a_time(case, lines)


@_PROPS
@given(kleene_cases(), _CUTS, _ODD)
def test_push_records_equals_decode_and_push_kleene(case, cuts, odd):
    lines = _lines(case, odd)
    assert _fused(case, lines, cuts) == _decoded_one_at_a_time(case, lines)


def test_push_records_stops_before_a_line_it_does_not_decode_and_changes_nothing_for_it():
    eng = Engine(compile_text(open(CARD).read()), lateness=0)
    recs = [b'{"type":"Txn","ts":1,"card":"a","amount":10}\n', b'{"type":"Txn","ts":2,"card":"a","amount":20}\n',
            b'{"type":"Txn","ts":"3","card":"a","amount":500}\n', b'{"type":"Txn","ts":4,"card":"a","amount":500}\n']
    recs = [orjson.loads(x) for x in recs]
    took, outs = eng.push_records(recs, 7)
    assert (took, outs) == (2, [])
    assert eng.stats["events"] == 2 and eng.max_ts == 2 and sorted(e.pos for e in eng.events.values()) == ["7", "8"]
    took, outs = eng.push_records(recs[3:], 10)
    assert took == 1 and len(outs) == 1
    assert outs[0].match == {"card": "a", "first_ts": 1, "amount": 500}
    # a late line: its index, and the lines before it applied
    with pytest.raises(BatchInterrupted) as bi:
        eng.push_records([recs[3], recs[0]], 11)
    assert bi.value.index == 1 and isinstance(bi.value.__cause__, LateEventError)
    assert eng.stats["events"] == 4 and eng.stats["late"] == 1
    # an engine whose source moves its watermark does not take raw lines
    eng.own_watermark = False
    with pytest.raises(RuntimeError):
        eng.push_records(recs, 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({"type": st.sampled_from(["A", "B"]), "ts": st.integers(0, 10**6),
                                       "x": st.one_of(st.integers(-10**6, 10**6), st.text("ab ,:}", max_size=4))}), max_size=5),
       st.sampled_from([None, '"op":"+"', '"op": "-"', '"x":"\\u006fp"', '"x":[1]', '"x":{"a":1}',
                        '"x":12345678901234567890', '"x":-12345678901234567890', '"x":0.00006267302317998972',
                        '"x":"op"', '"op"']))
@example(recs=[], extra=None)
def test_plain_says_which_batches_the_engine_may_decode(recs, extra):
    lines = [orjson.dumps(r) for r in recs]
    if extra is not None:
        lines.append(b'{"type":"A","ts":1,' + extra.encode() + b"}")
    plain = make_decoder().plain(lines) is not None
    if extra is None:
        assert plain
    elif extra in ('"x":12345678901234567890', '"x":-12345678901234567890', '"x":[1]', '"x":{"a":1}',
                   '"op"'):  # ('"op"': not JSON; a fraction's 20 digits are no integer's: plain)
        assert not plain
    else:  # an op field, or its name in a value or escaped: the loop's business (it stops at the field)
        assert plain
    # a batch that passes has no nested value and no big integer in any record
    if plain:
        for raw in lines:
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            assert all(type(v) not in (list, dict) and (type(v) is not float or abs(v) < 2.0**63) for v in rec.values())


def test_plain_leaves_the_op_field_to_the_loop():
    lines = [b'{"type":"A","ts":1,"kind":"-"}']
    assert make_decoder().plain(lines) == [orjson.loads(lines[0])]
    assert make_decoder(op_field="kind").plain(lines) == [orjson.loads(lines[0])]
    assert make_decoder().plain([lines[0], b"\n"]) is None  # a blank line: not valid JSON


@pytest.mark.parametrize("value, nested", [(b'"a[b"', False), (b'"x:{y}"', False), (b'"{"', False), (b"null", False),
                                           (b"true", False), (b"-1.5e3", False), (b"{}", True), (b"[]", True),
                                           (b' { "a" : 1 }', True), (b"[[1]]", True), (b'{"b":[]}', True)])
def test_plain_finds_nested_values_among_the_parsed_records(value, nested):
    """``decode.plain`` tells a nested value by the parsed record (CPython tracks a dict once a dict
    or a list is put in it: ``gc.is_tracked``), not by bytes: ``[``, ``{`` or ``:{`` in a string do
    not send the batch away; a dict or a list value, empty or written with spaces, does."""
    import gc

    line = b'{"type":"A","ts":1,"x":' + value + b"}"
    assert gc.is_tracked(orjson.loads(line)) is nested  # what ``plain`` relies on, for orjson's dicts
    lines = [b'{"type":"A","ts":0}\n', line + b"\n", b'{"type":"B","ts":2}\n']
    got = make_decoder().plain(lines)
    assert (got is None) is nested
    if got is not None:
        assert got == [orjson.loads(x) for x in lines]


@pytest.mark.parametrize("field, extra", [("op", b'"op":"-"'), ("op", b'"op":"+"'), ("op", b'"op":"x"'),
                                          ("op", b'"\\u006fp":"-"'), ("kind", b'"kind":"-"'),
                                          ("kind", b'"k\\u0069nd":"+"')])
def test_push_records_stops_at_the_op_field_it_is_given(field, extra):
    """A record with the op field (any value, its name written with escapes or not) ends the loop's
    run before it changes anything: the caller's decoder takes it (a retraction, an explicit insert
    or a bad op); a field of another name is an attribute like any other."""
    recs = [b'{"type":"Txn","ts":1,"card":"a","amount":10}', b'{"type":"Txn","ts":2,"card":"a","amount":20}',
            b'{"type":"Txn","ts":3,"card":"a","amount":500,' + extra + b"}",
            b'{"type":"Txn","ts":4,"card":"a","amount":600}']
    parsed = make_decoder(op_field=field).plain(recs)
    assert parsed is not None and field in parsed[2]
    eng = Engine(compile_text(open(CARD).read()), lateness=0)
    took, outs = eng.push_records(parsed, 1, op_field=field)
    assert took == 2 and outs == [] and sorted(eng.events) == [0, 1] and eng.stats["events"] == 2
    assert eng.max_ts == 2
    # another op field's name: the record is plain, the loop takes all four (two matches)
    other = Engine(compile_text(open(CARD).read()), lateness=0)
    took, outs = other.push_records(parsed, 1, op_field="other")
    assert took == 4 and len(outs) == 2


def test_cep_run_takes_a_plain_batch_through_the_engines_own_decoding(tmp_path, monkeypatch):
    """A batch of plain lines goes to ``Engine.push_records`` (not ``push_batch``); one with a
    retraction in it does not; the output is the same with the fused path switched off."""
    calls: list[str] = []
    real_lines, real_batch = Engine.push_records, Engine.push_batch

    def push_records(self, *a):
        calls.append("lines")
        return real_lines(self, *a)

    def push_batch(self, *a):
        calls.append("batch")
        return real_batch(self, *a)

    monkeypatch.setattr(Engine, "push_records", push_records)
    monkeypatch.setattr(Engine, "push_batch", push_batch)
    rows = [{"type": "Txn", "ts": 1, "card": "c", "amount": 5}, {"type": "Txn", "ts": 2, "card": "c", "amount": 6},
            {"type": "Txn", "ts": 3, "card": "c", "amount": 500}]
    slow = {"type": "Txn", "ts": "4", "card": "c", "amount": 7}  # a time as a string: the loop stops there
    for extra, want in (([], ["lines"]), ([{**rows[2], "op": "-"}], ["lines", "batch"]),
                        ([slow, rows[2] | {"ts": 5}], ["lines", "batch"])):
        outs = []
        for fused in (True, False):
            monkeypatch.setattr(runner, "FUSED", fused)
            calls.clear()
            inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
            inp.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows + extra))
            assert runner.run(runner.RunOptions(patterns=[CARD], input=str(inp), output=str(out), quiet=True,
                                                progress=False), io.StringIO()) == 0
            assert calls == (want if fused else ["batch"])
            outs.append(out.read_bytes())
        assert outs[0] == outs[1] and outs[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(cases(max_len=20), gap_cases(max_len=20), kleene_cases(max_len=20)),
       st.lists(st.tuples(st.integers(0, 20), st.integers(0, len(_ODD_LINES) - 1)), max_size=3), st.integers(1, 16))
def test_cep_run_with_and_without_the_fused_loop_writes_the_same(case, odd, batch):
    """The whole run loop (late output, error reports with positions and line numbers, the
    summary) with the engine's own decoding and without it, retractions and odd lines mixed in."""
    lines = [orjson.dumps(r) + b"\n" for r in case.records]
    for at, which in sorted(odd, reverse=True):
        lines.insert(min(at, len(lines)), _ODD_LINES[which])
    got = []
    for fused in (True, False):
        old = runner.FUSED
        runner.FUSED = fused
        try:
            r = _run_files(case, lines, batch, quiet=False)
        finally:
            runner.FUSED = old
        got.append((*r[:4], re.sub(r"in [0-9.]+ s, [0-9,]+ events/s", "", r[4])))
    assert got[0] == got[1]


def test_push_records_makes_its_events_of_the_class_it_is_given():
    """``push_records(event=...)``: the kept and emitted events are of that class (a ``LineEvent``
    subclass whose ``pos`` is a path and the line number), so the composite events' ids are those of
    pushing Events with those positions."""
    from cep.event import Event, LineEvent

    class PathEvent(LineEvent):
        __slots__ = ()

        @property
        def pos(self) -> str:
            return "f.jsonl:" + str(self._n)

    recs = [b'{"type":"Txn","ts":1,"card":"a","amount":10}\n', b'{"type":"Txn","ts":2,"card":"a","amount":20}\n',
            b'{"type":"Txn","ts":3,"card":"a","amount":150}\n', b'{"type":"Txn","ts":4,"card":"a","amount":500}\n']
    patterns = compile_text(open(CARD).read())
    eng = Engine(patterns, lateness=0)
    took, outs = eng.push_records([orjson.loads(x) for x in recs], 5, event=PathEvent)
    assert took == 4 and len(outs) == 1
    assert {type(e) for e in eng.events.values()} == {PathEvent}
    assert sorted(e.pos for e in eng.events.values()) == ["f.jsonl:5", "f.jsonl:6", "f.jsonl:8"]  # (150: kept by none)
    ref = Engine(patterns, lateness=0)
    want = ref.push_batch([Event("Txn", r["ts"], r, f"f.jsonl:{n}") for n, r in enumerate(map(orjson.loads, recs), 5)])
    assert outs == want


def _txn(ts: int, amount: float = 10) -> dict:
    return {"type": "Txn", "ts": ts, "card": "a", "amount": amount}


@pytest.mark.parametrize("before", [[], [_txn(10)]])
def test_push_records_takes_nothing_while_the_watermark_is_above_the_highest_time(before):
    """The loop over parsed records tests an event late only when it does not move the highest time,
    exact while the watermark is not above it: an engine whose watermark its source moved past its
    highest time (none, or 10) takes no records there; ``push_batch`` refuses the late one."""
    eng = Engine(compile_text(open(CARD).read()), lateness=0, own_watermark=False)
    if before:
        eng.push_batch([make_decoder()(str(n), orjson.dumps(r)) for n, r in enumerate(before, 1)])
    eng.advance_watermark(100)
    eng.own_watermark = True
    assert eng.watermark == 100 and eng.max_ts == (10 if before else None)
    took, outs = eng.push_records([_txn(50), _txn(150)], 5)
    assert (took, outs) == (0, []) and eng.stats["events"] == len(before) and eng.stats["late"] == 0
    with pytest.raises(BatchInterrupted) as bi:
        eng.push_batch([make_decoder()(str(n), orjson.dumps(r)) for n, r in enumerate([_txn(50), _txn(150)], 5)])
    assert bi.value.index == 0 and isinstance(bi.value.__cause__, LateEventError)
    eng.push_batch([make_decoder()("6", orjson.dumps(_txn(150)))])
    assert eng.watermark == eng.max_ts == 150  # moved by an event: the loop takes records again
    with pytest.raises(BatchInterrupted) as bi:
        eng.push_records([_txn(160), _txn(140)], 7)
    assert bi.value.index == 1 and isinstance(bi.value.__cause__, LateEventError)


def test_push_records_with_a_negative_lateness_tests_late_before_the_move():
    """A negative lateness puts the watermark above the highest time: an event above the highest time
    may still be late there, as ``push_batch`` says."""
    patterns = compile_text(open(CARD).read())
    recs = [_txn(100), _txn(103), _txn(106)]
    got = []
    for push in ("records", "batch"):
        eng = Engine(patterns, lateness=-5)
        with pytest.raises(BatchInterrupted) as bi:
            if push == "records":
                eng.push_records(recs, 1)
            else:
                eng.push_batch([make_decoder()(str(n), orjson.dumps(r)) for n, r in enumerate(recs, 1)])
        got.append((bi.value.index, type(bi.value.__cause__), eng.watermark, eng.max_ts))
    assert got[0] == got[1] == (1, LateEventError, 105, 100)
