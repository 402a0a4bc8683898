"""``cep run --workers N``: a run split by partition key over N processes gives what one process gives.

Checked here:

* the engines of a split (``Engine(share=(w, N))``) together emit exactly the whole engine's
  composite events, and each refuses the same late records and bad retractions and keeps the
  same peak of retained events (random v1, NOT and Kleene patterns, one or two per run, keyed and
  unkeyed; disorder, duplicates, retractions, late records: tests/strategies.py); without shadow
  bits (``shadow=False``, the same cases' inserts only) the same matches and late records, and
  together at least the whole engine's peak; such a share fails loudly on a retraction;
* ``insert_only`` (the parent's scan for the op field) says True only when no record can be a
  retraction, whatever the field's spelling (escapes, CSV header);
* ``cep run`` with 2 and 3 workers writes the same multiset of output lines, byte-identical late
  output and error reports, the same exit status and the same summary (counts per pattern, late,
  bad) as with 1, with bad lines mixed in (``--on-error skip`` and ``fail``), for the cases as
  drawn and for their inserts only (workers without shadow bits: then the summary's peak is the
  workers' sum, at least one process's);
* an input smaller than ``CEP_WORKERS_MIN_BYTES`` runs in one process and the summary says so;
* what it refuses (stdin, a pipe, Kafka, ``--checkpoint``, ``--idle-advance``) is refused with
  one line and exit status 1;
* a worker killed mid-run fails the run loudly (exit 1, a message naming it), after the output
  written before.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import orjson
import pytest
from cephelp import PATTERNS, ROOT, cep
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import Case, cases, gap_cases, kleene_cases
from test_run_batches import _run_files

import cep.commands.run as runner
from cep.errors import LateEventError, UnknownRetractionError
from cep.event import Event
from cep.io.writers import encode_output
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine

_ANY_CASE = st.one_of(cases(max_len=22), gap_cases(max_len=20), kleene_cases(max_len=20))


# ------------------------------------------------------------------ the engines of a split


@pytest.fixture(autouse=True, scope="module")
def _always_split():
    """Every input here is small: split it anyway (``parallel.single_below``)."""
    old = os.environ.get("CEP_WORKERS_MIN_BYTES")
    os.environ["CEP_WORKERS_MIN_BYTES"] = "0"
    yield
    if old is None:
        del os.environ["CEP_WORKERS_MIN_BYTES"]
    else:
        os.environ["CEP_WORKERS_MIN_BYTES"] = old


def _inserts(records: list[dict]) -> list[dict]:
    """The records of a case without its retractions and without any op field."""
    return [{k: v for k, v in r.items() if k != "op"} for r in records if r.get("op", "+") == "+"]


def _engine_run(case: Case, share: tuple[int, int] | None, shadow: bool = True,
                records: list[dict] | None = None) -> tuple[Counter, list, list, int]:
    eng = Engine(compile_text(case.text, time_unit=case.time_unit), lateness=case.lateness, share=share, shadow=shadow)
    outs, late, bad = [], [], []
    for i, rec in enumerate(case.records if records is None else records, 1):
        ev = Event(rec["type"], rec[case.time_field], {k: v for k, v in rec.items() if k != "op"}, str(i),
                   rec.get("op", "+"))
        try:
            outs += eng.push(ev)
        except LateEventError:
            late.append(i)
        except UnknownRetractionError:
            bad.append(i)
    outs += eng.advance_watermark(float("inf"))
    return Counter(encode_output(o) for o in outs), late, bad, eng.stats["peak_retained"]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_ANY_CASE, st.integers(2, 3))
def test_the_shares_of_a_split_emit_the_whole_engines_matches(case, workers):
    whole = _engine_run(case, None)
    parts = [_engine_run(case, (w, workers)) for w in range(workers)]
    assert sum((p[0] for p in parts), Counter()) == whole[0]
    for p in parts:
        assert p[1:] == whole[1:]  # the same late records, bad retractions and retained events
    # an insert-only stream: the shares need no shadow bits
    ins = _inserts(case.records)
    whole = _engine_run(case, None, records=ins)
    parts = [_engine_run(case, (w, workers), shadow=False, records=ins) for w in range(workers)]
    assert sum((p[0] for p in parts), Counter()) == whole[0]
    for p in parts:
        assert p[1:3] == whole[1:3]  # the same late records (and no bad retraction)
    assert sum(p[3] for p in parts) >= whole[3]  # together they hold at least what one engine holds


def test_a_share_without_shadow_bits_refuses_a_retraction():
    eng = Engine(compile_text("PATTERN p\n  SEQ(A a, B b)\n  PARTITION BY x\n"), share=(0, 2), shadow=False)
    eng.push(Event("A", 1, {"x": 1}, "1"))
    with pytest.raises(Exception) as e:
        eng.push(Event("A", 1, {"x": 1}, "2", "-"))
    assert "insert-only" in str(e.value.__cause__ or e.value)


@pytest.mark.parametrize("text, fmt, field, expected", [
    (b'{"type": "A", "ts": 1}\n{"type": "B", "ts": 2, "x": "caf\\u00e9"}\n', "jsonl", "op", True),
    (b'{"type": "A", "ts": 1, "op": "+"}\n', "jsonl", "op", False),
    (b'{"type": "A", "ts": 1, "\\u006Fp": "-"}\n', "jsonl", "op", False),
    (b'{"type": "A", "ts": 1, "o\\u0070": "-"}\n', "jsonl", "op", False),
    (b'{"type": "A", "ts": 1, "note": "op"}\n', "jsonl", "op", False),  # unsure: a value
    (b'{"type": "A", "ts": 1, "op": "-"}\n', "jsonl", "kind", True),
    (b'{"type": "A", "ts": 1, "kind": "-"}\n', "jsonl", "kind", False),
    (b"type,ts,x\nA,1,2\n", "csv", "op", True),
    (b"type,ts,op\nA,1,-\n", "csv", "op", False),
    (b'type,ts,"op"\nA,1,-\n', "csv", "op", False),
])
def test_insert_only_finds_the_op_field_in_any_spelling(tmp_path, text, fmt, field, expected):
    from cep.commands.parallel import insert_only

    (tmp_path / "in").write_bytes(text)
    assert insert_only(str(tmp_path / "in"), fmt, field) is expected


def test_insert_only_finds_a_field_across_two_reads(tmp_path, monkeypatch):
    from cep.commands import parallel

    monkeypatch.setattr(parallel, "_SCAN", 7)
    for k in range(12):
        (tmp_path / "in").write_bytes(b" " * k + b'{"type": "A", "ts": 1, "\\u006fp": "-"}\n')
        assert not parallel.insert_only(str(tmp_path / "in"), "jsonl", "op")
        (tmp_path / "in").write_bytes(b" " * k + b'{"type": "A", "ts": 1, "op": "-"}\n')
        assert not parallel.insert_only(str(tmp_path / "in"), "jsonl", "op")


def test_unkeyed_patterns_spread_over_the_workers():
    from cep.plan.partition import ownership

    text = "".join(f"PATTERN u{i}\n  SEQ(A a, B b)\n" for i in range(3)) + "PATTERN k\n  SEQ(A a, B b)\n  PARTITION BY x\n"
    rules = ownership(compile_text(text), 2)
    assert rules[:3] == [0, 1, 0] and rules[3] == {"A": ("x",), "B": ("x",)}


# ------------------------------------------------------------------ cep run, 1 worker or several

_TIMING = re.compile(r" in [0-9.]+ s, [0-9,]+ events/s")
_PEAK = re.compile(r"peak retained events ([0-9]+)")


def _run(case: Case, lines: list[bytes], workers: int, on_error: str) -> tuple:
    """``cep run`` with ``workers``: exit status, the multiset of output lines, late output, error
    reports, stderr (the summary, its timing left out)."""
    rc, out, late, errors, err = _run_files(case, lines, runner.BATCH, workers=workers, on_error=on_error, quiet=False)
    err = "".join(line for line in err.splitlines(keepends=True) if not line.startswith("cep: --workers"))
    return rc, Counter(out.splitlines(keepends=True)), late, errors, _TIMING.sub("", err)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_ANY_CASE, st.lists(st.integers(0, 20), max_size=2), st.sampled_from(["skip", "skip", "fail"]))
def test_cep_run_with_workers_writes_what_one_process_writes(case, bad_at, on_error):
    for records in (case.records, _inserts(case.records)):  # the inserts only: no shadow bits
        lines = [orjson.dumps(r) + b"\n" for r in records]
        for k in sorted(bad_at, reverse=True):  # bad lines (reported once) and a blank line
            lines.insert(min(k, len(lines)), b'{"type": "A", "ts": \n' if k % 2 else b"\n")
        one = _run(case, lines, 1, on_error)
        assert one[0] in (0, 3), one[4]
        shadow = any(b'"op"' in line for line in lines)
        peak = int(_PEAK.search(one[4]).group(1))
        for workers in (2, 3):
            got = _run(case, lines, workers, on_error)
            if shadow:
                assert got == one
            else:  # the summary's peak: the workers' sum, at least one process's
                assert int(_PEAK.search(got[4]).group(1)) >= peak
                assert got[:4] + (_PEAK.sub("", got[4]),) == one[:4] + (_PEAK.sub("", one[4]),)


def test_workers_split_card_testing_and_write_each_match_once(tmp_path):
    """A keyed pattern over many cards: every worker has a share of the matches, the union is the
    whole run's (ids included), and the summary counts them all."""
    import random

    rnd = random.Random(7)
    recs = [{"type": "Txn", "card": f"c{rnd.randrange(40)}", "amount": rnd.choice([5, 50, 500]), "ts": i}
            for i in range(3000)]
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    outs = {}
    for workers in (1, 2, 3):
        r = cep("run", PATTERNS / "card_testing.pattern", "-i", inp, "--workers", str(workers))
        assert r.returncode == 0, r.stderr
        outs[workers] = (Counter(r.stdout.splitlines()), _TIMING.sub("", r.stderr.decode()))
    assert outs[1][0] and outs[2] == outs[1] and outs[3] == outs[1]


# ------------------------------------------------------------------ refused, and failing loudly


@pytest.mark.parametrize("args, says", [
    ([], "needs a file input"),
    (["-i", "kafka://localhost:9092/t"], "Kafka"),
    (["-i", "IN", "-o", "kafka://localhost:9092/t"], "not Kafka"),
    (["-i", "IN", "--checkpoint", "CK"], "--checkpoint"),
    (["-i", "IN", "--idle-advance", "1s"], "--idle-advance"),
    (["-i", "FIFO"], "regular file"),
])
def test_unsupported_combinations_are_refused_with_one_line(tmp_path, args, says):
    (tmp_path / "in.jsonl").write_bytes(b'{"type": "Txn", "ts": 1, "card": "a", "amount": 1}\n')
    os.mkfifo(tmp_path / "fifo")
    args = [{"IN": str(tmp_path / "in.jsonl"), "CK": str(tmp_path / "ck"), "FIFO": str(tmp_path / "fifo")}.get(a, a)
            for a in args]
    r = cep("run", PATTERNS / "card_testing.pattern", "--workers", "2", *args, input=b"")
    assert r.returncode == 1
    err = r.stderr.decode().strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cep: error: --workers") and says in err[0], err
    assert r.stdout == b""


def test_workers_must_be_positive():
    r = cep("run", PATTERNS / "card_testing.pattern", "--workers", "0", "-i", "x")
    assert r.returncode == 1 and b"--workers" in r.stderr


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def test_a_killed_worker_fails_the_run_loudly(tmp_path):
    """Worker 1 is killed (SIGKILL) once output flows: the run exits 1 naming it, and the lines
    written before stay whole."""
    import random

    rnd = random.Random(3)
    inp = tmp_path / "in.jsonl"
    with open(inp, "wb") as f:  # long enough that the run is still going when the kill comes
        for i in range(200_000):
            f.write(orjson.dumps({"type": "Txn", "card": f"c{rnd.randrange(50)}",
                                  "amount": rnd.choice([5, 50, 500]), "ts": i}) + b"\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.Popen([sys.executable, "-m", "cep.cli", "run", str(PATTERNS / "card_testing.pattern"), "-i", str(inp),
                          "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
    first = p.stdout.readline()
    assert first.startswith(b'{"pattern":"card_testing"')
    deadline = time.monotonic() + 60
    kids = _children(p.pid)
    while len(kids) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
        kids = _children(p.pid)
    assert len(kids) == 2, "the run did not start two workers"
    os.kill(kids[1], signal.SIGKILL)  # forked in order: worker 1
    rest = p.stdout.read()  # (not communicate(): it would skip what readline() buffered)
    err = p.stderr.read()
    p.wait(timeout=120)
    assert p.returncode == 1
    assert "cep: error: worker 1 of 2 was killed by signal 9" in err.decode(), err
    bad = [line for line in (first + rest).splitlines() if not (line.startswith(b'{"pattern"') and line.endswith(b"}}"))]
    assert not bad, bad[:3]
    assert _children_gone(kids)


def _children_gone(pids: list[int]) -> bool:
    """No worker outlives a failed run (reaped: no /proc entry, or not this run's any more)."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if ") Z" in f.read():
                    return False
        except FileNotFoundError:
            continue
    return True


def test_a_small_input_runs_in_one_process_and_says_so(tmp_path):
    """Below ``CEP_WORKERS_MIN_BYTES`` the run is one process's (the same output and counts) and the
    summary says why; at or above it, the split runs (no such line)."""
    recs = [{"type": "Txn", "card": f"c{i % 7}", "amount": [5, 50, 500][i % 3], "ts": i} for i in range(300)]
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    size = inp.stat().st_size
    one = cep("run", PATTERNS / "card_testing.pattern", "-i", inp)
    small = cep("run", PATTERNS / "card_testing.pattern", "-i", inp, "--workers", "2",
                env={"CEP_WORKERS_MIN_BYTES": str(size + 1)})
    split = cep("run", PATTERNS / "card_testing.pattern", "-i", inp, "--workers", "2",
                env={"CEP_WORKERS_MIN_BYTES": str(size)})
    assert one.returncode == small.returncode == split.returncode == 0
    assert one.stdout and small.stdout == one.stdout and Counter(split.stdout.splitlines()) == Counter(one.stdout.splitlines())
    err = _TIMING.sub("", small.stderr.decode()).splitlines()
    assert err[1] == (f"cep: --workers 2: ran in one process: the input ({size:,} bytes) is smaller than {size + 1:,} "
                      "bytes, where a split does not pay (the results are the same)")
    assert [line for i, line in enumerate(err) if i != 1] == _TIMING.sub("", one.stderr.decode()).splitlines()
    assert "one process" not in split.stderr.decode()


@pytest.mark.parametrize("patterns, workers, says", [
    (1, 2, "cep: --workers 2: ran in one process: no pattern has a partition key (such a pattern runs whole in one worker)"),
    (2, 3, "cep: --workers 3: ran 2 workers: no pattern has a partition key and there are 2 (each such pattern runs "
           "whole in one worker)"),
    (3, 3, None),
])
def test_unkeyed_patterns_run_as_many_workers_as_have_work(tmp_path, patterns, workers, says):
    """Only unkeyed patterns: one worker per pattern at most has anything to match, so no more are
    started (one process for one pattern); the output and the counts are one process's."""
    text = "".join(f"PATTERN u{i}\n  SEQ(Txn a, Txn b)\n  WHERE a.amount < {10 + i} AND b.amount > 400\n  WITHIN 5 s\n"
                   for i in range(patterns))
    (tmp_path / "p.pattern").write_text(text)
    recs = [{"type": "Txn", "amount": [5, 50, 500][i % 3], "ts": i} for i in range(200)]
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    one = cep("run", tmp_path / "p.pattern", "-i", inp)
    got = cep("run", tmp_path / "p.pattern", "-i", inp, "--workers", str(workers))
    assert one.returncode == got.returncode == 0, got.stderr
    assert one.stdout and Counter(got.stdout.splitlines()) == Counter(one.stdout.splitlines())
    err = _TIMING.sub("", got.stderr.decode()).splitlines()
    notes = [line for line in err if line.startswith("cep: --workers")]
    assert notes == ([says] if says else [])
    rest, want = [line for line in err if line not in notes], _TIMING.sub("", one.stderr.decode()).splitlines()
    if patterns > 1:  # split (no op field: no shadow bits): the peak is the workers' sum
        rest, want = [_PEAK.sub("", x) for x in rest], [_PEAK.sub("", x) for x in want]
    assert rest == want


def test_a_retraction_the_scan_missed_fails_the_run(tmp_path, monkeypatch):
    """Were a retraction to reach workers built without shadow bits (a file that grew one after the
    scan), the run fails loudly (exit 1, the record named), never a wrong output."""
    from cep.commands import parallel

    monkeypatch.setattr(parallel, "insert_only", lambda *_a: True)
    case = Case("PATTERN p\n  SEQ(A a, B b)\n  PARTITION BY x\n", [
        {"type": "A", "ts": 1, "x": 1}, {"type": "A", "ts": 2, "x": 1, "op": "-"}, {"type": "B", "ts": 3, "x": 1}], 0)
    rc, out, _late, _errors, err = _run_files(case, [orjson.dumps(r) + b"\n" for r in case.records], runner.BATCH,
                                              workers=2, quiet=False)
    assert rc == 1
    assert "input line 2: internal error: RuntimeError: a retraction reached a share of a split" in err, err
