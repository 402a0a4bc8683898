"""Readers and writers: JSON lines, CSV, times, ops, bad records, output encoding."""

from __future__ import annotations

import io

import orjson
import pytest

from cep.event import Output
from cep.io.protocol import Sink
from cep.io.readers import (
    BadRecord,
    CsvSource,
    JsonlSource,
    csv_decoder,
    iso_to_units,
    make_decoder,
    number_or_none,
    parse_only,
)
from cep.io.writers import encode_output, open_file_sink, raw_line


def test_jsonl_record_becomes_event():
    d = make_decoder()
    e = d("1", b'{"type": "Txn", "ts": 1700000000, "card": "4111-1", "amount": 12.5}\n')
    assert (e.type, e.ts, e.pos, e.op) == ("Txn", 1700000000, "1", "+")
    assert e.fields == {"type": "Txn", "ts": 1700000000, "card": "4111-1", "amount": 12.5}


def test_op_field_is_removed_and_read():
    d = make_decoder(op_field="kind")
    e = d("4", b'{"type": "A", "ts": 1, "kind": "-", "x": null}')
    assert e.op == "-" and e.fields == {"type": "A", "ts": 1, "x": None}
    assert make_decoder()("5", b'{"type": "A", "ts": 1, "op": "+"}').op == "+"


def test_custom_type_and_time_fields():
    d = make_decoder(type_field="kind", time_field="when")
    e = d("1", b'{"kind": "B", "when": 5, "type": "ignored"}')
    assert e.type == "B" and e.ts == 5


@pytest.mark.parametrize(
    ("unit", "text", "expected"),
    [
        ("s", "2024-03-01T12:00:00Z", 1709294400),
        ("ms", "2024-03-01T12:00:00Z", 1709294400000),
        ("us", "2024-03-01T12:00:00Z", 1709294400000000),
        ("ms", "2024-03-01T12:00:00.250Z", 1709294400250),
        ("s", "2024-03-01T12:00:00.5Z", 1709294400.5),
        ("s", "2024-03-01T13:00:00+01:00", 1709294400),
        ("s", "2024-03-01T12:00:00", 1709294400),  # naive = UTC
        ("s", "1970-01-01T00:00:00Z", 0),
    ],
)
def test_iso_times_in_the_time_unit(unit, text, expected):
    d = make_decoder(time_unit=unit)
    e = d("1", orjson.dumps({"type": "A", "ts": text}))
    assert e.ts == expected and type(e.ts) is type(expected)
    assert e.fields["ts"] == text  # the record stays as read


def test_iso_exact_integer_arithmetic():
    assert iso_to_units("2024-03-01T12:00:00.000001Z", 1_000_000) == 1709294400000001


def test_numeric_time_string_is_a_number():
    assert make_decoder()("1", b'{"type": "A", "ts": "12"}').ts == 12


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'"str"', "not a JSON object"),
        (b'{"ts": 1}', "missing type field 'type'"),
        (b'{"type": "", "ts": 1}', "bad type value"),
        (b'{"type": 3, "ts": 1}', "bad type value"),
        (b'{"type": "A"}', "missing time field 'ts'"),
        (b'{"type": "A", "ts": null}', "missing time field 'ts'"),
        (b'{"type": "A", "ts": true}', "bad time value"),
        (b'{"type": "A", "ts": "yesterday"}', "bad time value"),
        (b'{"type": "A", "ts": "2024-13-01T00:00:00Z"}', "bad time value"),
        (b'{"type": "A", "ts": "1e999"}', "not a finite number"),
        (b'{"type": "A", "ts": 1e999}', "not valid JSON"),
        (b'{"type": "A", "ts": 1, "op": "x"}', "bad op"),
        (b'{"type": "A", "ts": 1, "op": null}', "bad op"),
        (b'{"type": "A", "ts": 1, "v": [1]}', "not a scalar"),
        (b'{"type": "A", "ts": 1, "v": {"a": 1}}', "not a scalar"),
    ],
)
def test_bad_records(raw, reason):
    with pytest.raises(BadRecord, match=reason):
        make_decoder()("1", raw)


def test_brackets_inside_strings_are_fine():
    e = make_decoder()("1", b'{"type": "A", "ts": 1, "s": "[x] {y}"}')
    assert e.fields["s"] == "[x] {y}"


def test_unknown_time_unit_rejected():
    with pytest.raises(ValueError):
        make_decoder(time_unit="h")


def test_number_or_none():
    assert number_or_none("12") == 12 and type(number_or_none("12")) is int
    assert number_or_none("-1.5") == -1.5
    assert number_or_none("1e3") == 1000.0
    assert number_or_none(" 7 ") == 7
    for s in ("", "abc", "1.2.3", "nan", "inf", "0x10", "1,5"):
        assert number_or_none(s) is None


def test_jsonl_source_positions_and_seek():
    data = b'{"type":"A","ts":1}\n\n{"type":"A","ts":2}\n{"type":"A","ts":3}'
    src = JsonlSource(io.BytesIO(data), "x", seekable=True)
    it = src.records()
    assert next(it) == ("1", b'{"type":"A","ts":1}\n')
    pos = src.position()
    assert pos["offset"] == 20 and pos["record"] == 1
    rest = list(it)
    assert [p for p, _ in rest] == ["2", "3", "4"]  # the blank line keeps its number
    src2 = JsonlSource(io.BytesIO(data), "x", seekable=True)
    src2.seek(pos)
    assert [p for p, _ in src2.records()] == ["2", "3", "4"]


def test_csv_source_numbers_nulls_quotes_and_lines():
    data = (
        b'type,ts,name,v,note\n'
        b'A,1,x,12,plain\n'
        b'A,2.5,"multi\nline",-1.5e1,""\n'
        b'B,3,y,,"a ""quoted"" cell"\n'
        b'B,4,only-three\n'
    )
    src = CsvSource(io.BytesIO(data), "c", seekable=True)
    d = csv_decoder(make_decoder())
    got = []
    lines_seen = []
    for pos, raw in src.records():
        lines_seen.append(src.line_of(pos))
        try:
            got.append(d(pos, raw))
        except BadRecord as e:
            got.append(str(e))
    assert got[0].fields == {"type": "A", "ts": 1, "name": "x", "v": 12, "note": "plain"}
    assert got[1].fields["name"] == "multi\nline" and got[1].fields["v"] == -15.0 and got[1].ts == 2.5
    assert got[1].fields["note"] is None
    assert got[2].fields["v"] is None and got[2].fields["note"] == 'a "quoted" cell'
    assert "expected 5 cells" in got[3]
    assert [e.pos for e in got[:3]] == ["1", "2", "3"]
    assert lines_seen == [2, 3, 5, 6]


def test_csv_seek_rereads_header():
    data = b"type,ts,v\nA,1,1\nA,2,2\nA,3,3\n"
    src = CsvSource(io.BytesIO(data), "c", seekable=True)
    it = src.records()
    next(it)
    pos = src.position()
    src2 = CsvSource(io.BytesIO(data), "c", seekable=True)
    src2.seek(pos)
    assert [(p, r["v"]) for p, r in src2.records()] == [("2", 2), ("3", 3)]


def test_parse_only_counts_good_records(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_bytes(b'{"type":"A","ts":1}\nbad\n{"type":"A","ts":2}\n')
    assert parse_only(str(p)) == 2


def test_encode_output_keeps_integers():
    o = Output("p", "+", "abc", {"n": 3, "f": 512.0, "s": "x", "b": True, "z": None})
    line = encode_output(o)
    assert line.endswith(b"\n")
    assert line == b'{"pattern":"p","op":"+","id":"abc","match":{"n":3,"f":512.0,"s":"x","b":true,"z":null}}\n'


def test_raw_line():
    assert raw_line(b'{"a":1}') == b'{"a":1}\n'
    assert raw_line(b'{"a":1}\n') == b'{"a":1}\n'
    assert raw_line({"a": 1}) == b'{"a":1}\n'


def test_file_sink_buffers_until_flush_and_truncates_on_resume(tmp_path):
    p = tmp_path / "out.jsonl"
    s = open_file_sink(str(p))
    s.write(b"one\n")
    assert p.read_bytes() == b""
    s.flush()
    assert p.read_bytes() == b"one\n" and s.size == 4
    s.write(b"two\n")
    s.close()
    assert p.read_bytes() == b"one\ntwo\n"
    s2 = open_file_sink(str(p), truncate_to=4)
    s2.write(b"three\n")
    s2.close()
    assert p.read_bytes() == b"one\nthree\n"


def test_partition_key_of_outputs():
    from cephelp import PATTERNS

    from cep.io.writers import make_key_fn
    from cep.lang.compiler import compile_files

    card, wd = compile_files([str(PATTERNS / "card_testing.pattern"),
                              str(PATTERNS / "withdrawal_after_address_change.pattern")])
    k = make_key_fn(card)
    assert k(Output("card_testing", "+", "i", {"amount": 2}, ("4111-1",))) == b"4111-1"
    k = make_key_fn(wd)  # the key comes from the engine, whatever EMIT keeps
    assert k(Output("w", "+", "i", {}, (7.0,))) == b"7"


def test_keyed_sink_gets_partition_keys(tmp_path, monkeypatch):
    """A non-file sink (Kafka's shape) receives each line with its partition key, flushed per batch
    (the whole file is ready at once: one batch, one flush)."""
    from cephelp import PATTERNS

    import cep.commands.run as runner

    class Keyed(Sink):  # a keyed sink honours the run loop's protocol
        def __init__(self):
            self.got, self.flushes = [], 0

        def write(self, line, key):
            self.got.append((key, orjson.loads(line)["match"]["card"]))

        def flush(self):
            self.flushes += 1

        def close(self):
            pass

    sink = Keyed()
    monkeypatch.setattr(runner, "open_sink", lambda spec, truncate_to=None: sink)
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(b"".join(orjson.dumps({"type": "Txn", "ts": i, "card": c, "amount": a}) + b"\n"
                             for i, (c, a) in enumerate([("x", 1), ("y", 2), ("x", 3), ("y", 4), ("x", 500),
                                                         ("y", 600)])))
    err = io.StringIO()
    rc = runner.run(runner.RunOptions(patterns=[str(PATTERNS / "card_testing.pattern")], input=str(inp),
                                      output="kafka://h:1/t"), err)
    assert rc == 0, err.getvalue()
    assert sink.got == [(b"x", "x"), (b"y", "y")]
    assert sink.flushes >= 1


def test_csv_infinite_time_is_bad():
    d = csv_decoder(make_decoder())
    src = CsvSource(io.BytesIO(b"type,ts\nA,1e999\n"), "c")
    (pos, raw), = list(src.records())
    with pytest.raises(BadRecord, match="finite"):
        d(pos, raw)


def test_engine_failure_names_the_record_and_keeps_output(tmp_path, monkeypatch):
    from cephelp import PATTERNS

    import cep.commands.run as runner
    import cep.runtime.engine
    from cep.errors import BatchInterrupted
    from cep.runtime.handler import Handlers

    def batch(events, outs, inserts=False):  # the generated batch function's contract: outputs appended, or
        for i, e in enumerate(events):  # BatchInterrupted(index, outputs before it) from the error
            try:
                if e.pos == "2":
                    raise TypeError("unhashable")
                outs.append(Output("p", "+", "id1", {"x": 1}))
            except BaseException as x:
                raise BatchInterrupted(i, outs) from x

    class Boom:
        def __init__(self, patterns, lateness=0, *, own_watermark=True, lines=False):
            self.stats, self.matches_emitted, self.retained_events = {}, {}, 0
            self.lateness, self.own_watermark = lateness, own_watermark
            self._handlers = Handlers(batch, None)

        push_batch = cep.runtime.engine.Engine.push_batch  # the engine's batch entry, over this handler

    monkeypatch.setattr(cep.runtime.engine, "Engine", Boom)
    monkeypatch.setattr(runner, "FUSED", False)  # the batch entry (push_batch); the fused one: test_fused_loop
    monkeypatch.delenv("CEP_DEBUG", raising=False)
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    inp.write_bytes(b'{"type":"A","ts":1}\n{"type":"A","ts":2}\n')
    err = io.StringIO()
    rc = runner.run(runner.RunOptions(patterns=[str(PATTERNS / "card_testing.pattern")], input=str(inp),
                                      output=str(out)), err)
    assert rc == 1
    assert "input line 2: internal error: TypeError: unhashable" in err.getvalue()
    assert out.read_bytes().count(b"\n") == 1
