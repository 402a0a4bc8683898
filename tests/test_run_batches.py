"""Batches in ``cep run``: what the input has ready is applied at once, and its output is written
before the reader waits for more (docs/language.md section 4).

Checked here:

* a slow producer on stdin sees each composite event before it sends the next line (the test
  waits for the line; a run that held output back until more input came would never send it);
* ``JsonlSource.take`` gives the same records, positions and offsets whatever sizes the reads
  return (a pipe delivers lines in pieces);
* ``Engine.push_batch`` over random cuts of a stream gives exactly the outputs of ``push`` one
  event at a time, in the same order, also around late events (random v1, NOT and Kleene
  patterns, retractions, disorder: tests/strategies.py);
* ``cep run`` with batches and with one record per batch writes byte-identical output, late
  output and error reports, with bad lines mixed in (``--on-error skip``).
"""

from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest
from cephelp import PATTERNS, ROOT
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from strategies import Case, cases, gap_cases, kleene_cases

import cep.commands.run as runner
from cep.errors import BatchInterrupted, LateEventError
from cep.event import Event
from cep.io.readers import JsonlSource
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine

CARD = str(PATTERNS / "card_testing.pattern")


def _readline(stream, seconds: float = 120.0) -> bytes:
    """The next line of a child's stdout; fails (not hangs) if none comes in ``seconds`` (a guard
    against a run that never writes, not a measurement)."""
    ready, _, _ = select.select([stream], [], [], seconds)
    assert ready, "no output line: the run held a match back while waiting for input"
    return stream.readline()


def test_each_match_is_written_before_the_reader_waits():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "cep.cli", "run", CARD, "-i", "-", "-o", "-", "--quiet"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=str(ROOT), env=env)
    try:
        for k, card in enumerate(("c1", "c2", "c3")):
            base = 10 * k
            small1 = b'{"type":"Txn","ts":%d,"card":"%s","amount":10}\n' % (base + 1, card.encode())
            small2 = b'{"type":"Txn","ts":%d,"card":"%s","amount":20}\n' % (base + 2, card.encode())
            big = b'{"type":"Txn","ts":%d,"card":"%s","amount":500}\n' % (base + 3, card.encode())
            proc.stdin.write(small1 + small2)
            proc.stdin.flush()
            # the large purchase arrives in two pieces: the reader holds the first as a partial line
            proc.stdin.write(big[:17])
            proc.stdin.flush()
            proc.stdin.write(big[17:])
            proc.stdin.flush()
            line = _readline(proc.stdout)
            match = orjson.loads(line)
            assert match["pattern"] == "card_testing" and match["match"]["card"] == card, line
        rest, err = proc.communicate(timeout=120)  # closes stdin: the input ends
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert rest == b""


class _Trickle(io.RawIOBase):
    """A raw stream that returns at most a few bytes per read, as a pipe may."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self._data, self._sizes, self._at, self._k = data, sizes or [1], 0, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), self._sizes[self._k % len(self._sizes)], len(self._data) - self._at)
        self._k += 1
        b[:n] = self._data[self._at:self._at + n]
        self._at += n
        return n


_LINE = st.one_of(st.just(b""), st.just(b"   "), st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")),
                  st.builds(lambda i: b'{"type":"A","ts":%d}' % i, st.integers(0, 10**6)))


@settings(max_examples=200, deadline=None)
@given(st.lists(_LINE, max_size=12), st.booleans(), st.booleans(), st.lists(st.integers(1, 9), max_size=5),
       st.integers(1, 5))
@example(lines=[b"\xef\xbb\xbf"], last_newline=False, bom=False, sizes=[], limit=1)  # a first line that is a BOM
def test_take_gives_the_lines_and_offsets_of_the_file(lines, last_newline, bom, sizes, limit):
    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    if bom:
        data = b"\xef\xbb\xbf" + data
    expected, offsets, off, n = [], [], 0, 0
    starts_with_bom = data.startswith(b"\xef\xbb\xbf")  # added, or a first line that is one
    for i, line in enumerate(io.BytesIO(data).readlines()):
        off += len(line)
        n += 1
        expected.append((str(n), line[3:] if i == 0 and starts_with_bom else line))
        offsets.append(off)
    src = JsonlSource(io.BufferedReader(_Trickle(data, sizes), buffer_size=8), "-")
    got, got_offsets = [], []
    while batch := src.take(limit):
        assert 1 <= len(batch) <= limit
        got += batch
        got_offsets.append(src.offset)
        assert src.position()["record"] == len(got)
    assert got == expected
    assert set(got_offsets) <= set(offsets) and (not got or got_offsets[-1] == offsets[-1])
    # ``take_lines`` (the run loop's JSON lines path): the same lines, numbered from ``first``; the
    # offset (summed when asked) after each is the pairs' own, and so is a resumed source's
    src = JsonlSource(io.BufferedReader(_Trickle(data, sizes), buffer_size=8), "-")
    got, got_offsets = [], []
    while True:
        first, part = src.take_lines(limit)
        if not part:
            break
        assert 1 <= len(part) <= limit and first == len(got) + 1
        got += [(str(first + i), raw) for i, raw in enumerate(part)]
        got_offsets.append(src.offset)
        assert src.position() == {"kind": "jsonl", "offset": offsets[len(got) - 1], "record": len(got)}
    assert got == expected
    assert src.offset == (offsets[-1] if offsets else 0)
    if len(expected) > 1:
        back = JsonlSource(io.BytesIO(data), "x", seekable=True)
        back.seek({"kind": "jsonl", "offset": offsets[0], "record": 1})
        assert back.offset == offsets[0]
        rest = []
        while part := back.take(len(expected)):
            rest += part
        assert rest == expected[1:] and back.offset == offsets[-1]


# ------------------------------------------------------------------ batched = one at a time


def _events(case: Case) -> list[Event]:
    out = []
    for i, rec in enumerate(case.records, 1):
        fields = {k: v for k, v in rec.items() if k != "op"}
        out.append(Event(rec["type"], rec[case.time_field], fields, str(i), rec.get("op", "+")))
    return out


def _one_at_a_time(case: Case) -> tuple[list, list]:
    eng = Engine(compile_text(case.text, time_unit=case.time_unit), lateness=case.lateness)
    outs, late = [], []
    for ev in _events(case):
        try:
            outs += eng.push(ev)
        except LateEventError:
            late.append(ev.pos)
    return outs, late


def _batched(case: Case, cuts: list[int]) -> tuple[list, list]:
    eng = Engine(compile_text(case.text, time_unit=case.time_unit), lateness=case.lateness)
    evs = _events(case)
    outs, late = [], []
    start, k = 0, 0
    while start < len(evs):
        batch = evs[start:start + cuts[k % len(cuts)]]
        k += 1
        try:
            outs += eng.push_batch(batch)
            start += len(batch)
        except BatchInterrupted as bi:
            assert isinstance(bi.__cause__, LateEventError), bi.__cause__
            outs += bi.outputs
            late.append(batch[bi.index].pos)
            start += bi.index + 1
    return outs, late


_PROPS = settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_CUTS = st.lists(st.integers(1, 8), min_size=1, max_size=4)


@_PROPS
@given(cases(), _CUTS)
def test_push_batch_equals_push_v1(case, cuts):
    assert _batched(case, cuts) == _one_at_a_time(case)


@_PROPS
@given(gap_cases(), _CUTS)
def test_push_batch_equals_push_not(case, cuts):
    assert _batched(case, cuts) == _one_at_a_time(case)


@_PROPS
@given(kleene_cases(), _CUTS)
def test_push_batch_equals_push_kleene(case, cuts):
    assert _batched(case, cuts) == _one_at_a_time(case)


# ------------------------------------------------------------------ the run loop, batched or not


def _run_files(case: Case, lines: list[bytes], batch: int, **options) -> tuple[int, bytes, bytes, bytes, str]:
    """``cep run`` (in this process) of ``lines`` with batches of ``batch`` records, late output and
    error reports to files (``options``: more ``RunOptions``): exit status, output, late output,
    error reports and stderr."""
    old = runner.BATCH
    runner.BATCH = batch
    try:
        with tempfile.TemporaryDirectory() as d:
            p = Path(d)
            (p / "p.pattern").write_text(case.text)
            (p / "in.jsonl").write_bytes(b"".join(lines))
            err = io.StringIO()
            rc = runner.run(runner.RunOptions(
                patterns=[str(p / "p.pattern")], input=str(p / "in.jsonl"), output=str(p / "out.jsonl"),
                time_field=case.time_field, time_unit=case.time_unit, lateness=str(case.lateness),
                late_output=str(p / "late.jsonl"), errors=str(p / "errors.jsonl"),
                **{"on_error": "skip", "quiet": True, **options}), err)
            return (rc, (p / "out.jsonl").read_bytes(), (p / "late.jsonl").read_bytes(),
                    (p / "errors.jsonl").read_bytes(), err.getvalue().replace(d, "DIR"))
    finally:
        runner.BATCH = old


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(cases(max_len=20), gap_cases(max_len=20), kleene_cases(max_len=20)),
       st.lists(st.integers(0, 20), max_size=3), st.integers(2, 16))
def test_cep_run_batched_equals_one_record_per_batch(case, bad_at, batch):
    lines = [orjson.dumps(r) + b"\n" for r in case.records]
    for k in sorted(bad_at, reverse=True):  # bad lines (skipped and reported) and a blank line
        lines.insert(min(k, len(lines)), b'{"type": "A", "ts": \n' if k % 2 else b"\n")
    one = _run_files(case, lines, 1)
    assert one[0] == 0, one[4]
    assert _run_files(case, lines, batch) == one


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.one_of(cases(max_len=20), gap_cases(max_len=20), kleene_cases(max_len=20)),
       st.lists(st.integers(0, 20), max_size=3), st.integers(1, 16), st.booleans())
def test_the_raw_lines_path_equals_the_pairs_path(case, bad_at, batch, bom):
    """``cep run``'s JSON lines path (``JsonlSource.take_lines``, ``decode.lines``: positions made
    only when read) against the ``(pos, raw)`` pairs path it replaced: the same output (ids are
    hashes of positions), late output, error reports (positions, line numbers) and summary, with
    bad and blank lines, a byte-order mark, late events and retractions (``Case``)."""
    lines = [orjson.dumps(r) + b"\n" for r in case.records]
    for k in sorted(bad_at, reverse=True):
        lines.insert(min(k, len(lines)), b'{"type": "A", "ts": \n' if k % 2 else b"\n")
    if bom and lines:
        lines[0] = b"\xef\xbb\xbf" + lines[0]
    def timeless(got: tuple) -> tuple:  # the summary's time and rate vary from run to run
        return (*got[:4], re.sub(r"in [0-9.]+ s, [0-9,]+ events/s", "", got[4]))

    fast = _run_files(case, lines, batch, quiet=False)
    old = runner.LINES
    runner.LINES = False
    try:
        pairs = _run_files(case, lines, batch, quiet=False)
    finally:
        runner.LINES = old
    assert timeless(fast) == timeless(pairs)


def _loop_run(pattern: str, lines: list[bytes]) -> tuple[runner._Run, bytes]:
    """``cep run``'s set-up and loop (in this process) over ``lines``: the run (its engine) and
    the output written."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d)
        (p / "in.jsonl").write_bytes(b"".join(lines))
        r = runner._Run(runner.RunOptions(patterns=[pattern], input=str(p / "in.jsonl"),
                                          output=str(p / "out.jsonl"), quiet=True), io.StringIO())
        try:
            r.setup()
            assert r.loop() == 0
            r.finish()
        finally:
            r.close()
        return r, (p / "out.jsonl").read_bytes()


def test_the_end_of_input_decides_pending_matches_and_expires_nothing_else():
    """At the end of a bounded input the watermark moves to +infinity only to decide pending
    matches: with none pending, the retained events stay (expiring them all would only cost
    time: nothing reads them after the loop), and the output is the same."""
    card = [b'{"type":"Txn","ts":%d,"card":"c","amount":%d}\n' % (t, a) for t, a in ((1, 10), (2, 20), (3, 500))]
    r, out = _loop_run(CARD, card)
    assert len(out.splitlines()) == 1 and r.outputs == 1
    assert r.engine.retained_events == 3 and r.engine.stats["expired"] == 0
    orders = [b'{"type":"Order","ts":1,"order_id":7,"customer":"x"}\n',
              b'{"type":"Order","ts":2,"order_id":8,"customer":"y"}\n',
              b'{"type":"Shipment","ts":3,"order_id":8}\n']
    r, out = _loop_run(str(PATTERNS / "unshipped_orders.pattern"), orders)
    assert [orjson.loads(x)["match"]["order_id"] for x in out.splitlines()] == [7]  # decided at the end
    assert r.outputs == 1 and r.engine.pending_count() == 0


@pytest.mark.parametrize("lines_path", [True, False])
def test_a_refused_record_in_a_batch_is_reported_with_its_own_line(tmp_path, monkeypatch, lines_path):
    """The JSON lines path makes a batch's ``(pos, raw)`` pairs only when an event raises: the late
    record and the unknown retraction are reported with their own lines and text."""
    monkeypatch.setattr(runner, "LINES", lines_path)
    recs = [b'{"type":"Txn","ts":1,"card":"a","amount":10}', b'{"type":"Txn","ts":5,"card":"a","amount":20}',
            b'{"type":"Txn","ts":2,"card":"a","amount":500}', b'{"type":"Txn","ts":6,"card":"b","amount":20,"op":"-"}',
            b'{"type":"Txn","ts":7,"card":"a","amount":500}']
    (tmp_path / "in.jsonl").write_bytes(b"\n".join(recs) + b"\n")
    rc = runner.run(runner.RunOptions(
        patterns=[CARD], input=str(tmp_path / "in.jsonl"), output=str(tmp_path / "out.jsonl"),
        late_output=str(tmp_path / "late.jsonl"), errors=str(tmp_path / "errors.jsonl"), on_error="skip",
        quiet=True), io.StringIO())
    assert rc == 0
    assert (tmp_path / "late.jsonl").read_bytes() == recs[2] + b"\n"
    (report,) = [orjson.loads(x) for x in (tmp_path / "errors.jsonl").read_bytes().splitlines()]
    assert (report["line"], report["pos"], report["record"]) == (4, "4", recs[3].decode())
    (out,) = [orjson.loads(x) for x in (tmp_path / "out.jsonl").read_bytes().splitlines()]
    assert out["match"] == {"card": "a", "first_ts": 1, "amount": 500}


def test_cep_run_tells_the_engine_a_batch_of_inserts_only(tmp_path, monkeypatch):
    """A batch whose lines have no op field is pushed with ``inserts=True`` (the engine's loop tests no
    op); one with a retraction in it is not, and the retraction is applied (its ``-`` written).
    (Without the engine's own decoding loop, which takes the plain batches: tests/test_fused_loop.py.)"""
    monkeypatch.setattr(runner, "FUSED", False)
    seen: list[bool] = []
    real = Engine.push_batch

    def push_batch(self, events, inserts=False):
        seen.append(inserts)
        return real(self, events, inserts)

    monkeypatch.setattr(Engine, "push_batch", push_batch)
    card = CARD
    rows = [{"type": "Txn", "ts": 1, "card": "c", "amount": 5}, {"type": "Txn", "ts": 2, "card": "c", "amount": 6},
            {"type": "Txn", "ts": 3, "card": "c", "amount": 500}]
    slow = {"type": "Txn", "ts": "3", "card": "c", "amount": 7}  # a time as a string: off the reader's fast path
    for extra, want in (([], [True]), ([{**rows[2], "op": "-"}], [False]), ([slow, {**rows[2], "op": "-"}], [False])):
        seen.clear()
        inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
        inp.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows + extra))
        assert runner.run(runner.RunOptions(patterns=[card], input=str(inp), output=str(out), quiet=True,
                                            progress=False), io.StringIO()) == 0
        assert seen == want
        assert [orjson.loads(x)["op"] for x in out.read_bytes().splitlines()] == ["+", *(["-"] if extra else [])]
