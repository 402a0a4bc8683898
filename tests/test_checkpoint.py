"""Checkpoints: atomic save/load, and a stopped or crashed run resumed from its checkpoint.

A resumed file run must lose no composite event and, with file output,
duplicate none: the output is cut back to what the checkpoint saw written.
"""

from __future__ import annotations

import random
from collections import Counter

import orjson
import pytest
from cephelp import PATTERNS, cep, lines, multiset, write

from cep.exit_codes import EXIT_SIMULATED_CRASH
from cep.io import checkpoint as ckpt

CARD = str(PATTERNS / "card_testing.pattern")


def make_stream(n: int = 3000, seed: int = 7) -> bytes:
    rnd = random.Random(seed)
    out = []
    ts = 1_700_000_000
    for _ in range(n):
        ts += rnd.randint(0, 20)
        r = rnd.random()
        amount = rnd.choice([5, 12.5, 60]) if r < 0.12 else (rnd.choice([450, 999]) if r < 0.17 else 150)
        out.append(orjson.dumps({"type": "Txn", "ts": ts, "card": f"c{rnd.randint(1, 20)}", "amount": amount}))
    return b"\n".join(out) + b"\n"


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    d = tmp_path_factory.mktemp("ck")
    inp = d / "in.jsonl"
    inp.write_bytes(make_stream())
    ref = cep("run", CARD, "-i", inp, "-q")
    assert ref.returncode == 0
    expected = lines(ref.stdout)
    assert 50 < len(expected) < 5000
    return inp, expected


# ------------------------------------------------------------------- unit


def test_save_load_roundtrip(tmp_path):
    p = tmp_path / "ck"
    c = ckpt.Checkpoint("fp", {"kind": "jsonl", "offset": 10, "record": 2}, b"\x00state\nbytes", 5,
                        {"output": 42}, {})
    ckpt.save(str(p), c)
    got = ckpt.load(str(p))
    assert got == c
    assert not list(tmp_path.glob("ck.tmp*"))  # the temporary file was renamed


def test_load_rejects_other_files_and_versions(tmp_path):
    p = tmp_path / "ck"
    p.write_bytes(b"hello\n")
    with pytest.raises(ckpt.CheckpointError, match="not a cep checkpoint"):
        ckpt.load(str(p))
    ckpt.save(str(p), ckpt.Checkpoint("fp", None, b"abc"))
    head, _, body = p.read_bytes().partition(b"\n")
    h = orjson.loads(head)
    h["version"] = 99
    p.write_bytes(orjson.dumps(h) + b"\n" + body)
    with pytest.raises(ckpt.CheckpointError, match="format version 99"):
        ckpt.load(str(p))
    h["version"] = ckpt.FORMAT_VERSION
    p.write_bytes(orjson.dumps(h) + b"\n" + body[:1])
    with pytest.raises(ckpt.CheckpointError, match="truncated"):
        ckpt.load(str(p))


# -------------------------------------------------------------- end to end


def test_stop_and_resume_loses_nothing_duplicates_nothing(tmp_path, stream):
    inp, expected = stream
    out, ck = tmp_path / "out.jsonl", tmp_path / "run.ckpt"
    r1 = cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck, "--checkpoint-every", "100",
             "--test-stop-after", "1234")
    assert r1.returncode == 0, r1.stderr
    assert ck.exists()
    first = lines(out.read_bytes())
    assert 0 < len(first) < len(expected)
    r2 = cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck)
    assert r2.returncode == 0, r2.stderr
    assert b"resumed from checkpoint" in r2.stderr and b"after record 1234" in r2.stderr
    assert b"1766 records" in r2.stderr  # only the rest was read
    got = lines(out.read_bytes())
    assert multiset(got) == multiset(expected)
    assert max(Counter(o["id"] for o in got).values()) == 1


def test_crash_after_checkpoint_resumes_exactly_with_file_output(tmp_path, stream):
    inp, expected = stream
    out, ck = tmp_path / "out.jsonl", tmp_path / "run.ckpt"
    r1 = cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck, "--checkpoint-every", "500",
             "--checkpoint-interval", "0", "--test-stop-after", "1750", "--test-crash-at-stop")
    assert r1.returncode == EXIT_SIMULATED_CRASH  # died without a final checkpoint
    written = lines(out.read_bytes())
    header = orjson.loads(ck.read_bytes().split(b"\n", 1)[0])
    assert header["position"]["record"] == 1500  # the last checkpoint before the crash
    r2 = cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck)
    assert r2.returncode == 0, r2.stderr
    got = lines(out.read_bytes())
    assert len(written) > 0
    assert multiset(got) == multiset(expected)  # records 1501..1750's matches written once


def test_crash_with_stream_output_repeats_only_with_same_ids(tmp_path, stream):
    inp, expected = stream
    ck = tmp_path / "run.ckpt"
    r1 = cep("run", CARD, "-i", inp, "--checkpoint", ck, "--checkpoint-every", "500",
             "--checkpoint-interval", "0", "--test-stop-after", "1750", "--test-crash-at-stop")
    r2 = cep("run", CARD, "-i", inp, "--checkpoint", ck)
    got = lines(r1.stdout) + lines(r2.stdout)
    assert set(multiset(got)) == set(multiset(expected))  # nothing lost
    repeats = multiset(got) - multiset(expected)
    assert sum(repeats.values()) > 0  # matches of records 1501..1750 came again, same ids
    ids_expected = {o["id"] for o in expected}
    assert all(orjson.loads(k)["id"] in ids_expected for k in repeats)


def test_resume_csv_input(tmp_path):
    inp = tmp_path / "in.csv"
    rows = ["type,ts,card,amount"] + [
        f"Txn,{100 + i},c{i % 3},{500 if i % 7 == 6 else 10}" for i in range(200)
    ]
    inp.write_text("\n".join(rows) + "\n")
    ref = lines(cep("run", CARD, "--format", "csv", "-i", inp, "-q").stdout)
    out, ck = tmp_path / "out.jsonl", tmp_path / "ck"
    cep("run", CARD, "--format", "csv", "-i", inp, "-o", out, "--checkpoint", ck, "--test-stop-after", "77")
    r = cep("run", CARD, "--format", "csv", "-i", inp, "-o", out, "--checkpoint", ck)
    assert r.returncode == 0, r.stderr
    assert multiset(lines(out.read_bytes())) == multiset(ref) and ref


def test_finished_run_resumes_to_nothing_more(tmp_path, stream):
    inp, expected = stream
    out, ck = tmp_path / "out.jsonl", tmp_path / "ck"
    assert cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck).returncode == 0
    before = out.read_bytes()
    r = cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck)
    assert r.returncode == 0 and b"0 records" in r.stderr
    assert out.read_bytes() == before
    assert multiset(lines(before)) == multiset(expected)


def test_resume_with_other_patterns_or_options_is_refused(tmp_path, stream):
    inp, _ = stream
    ck = tmp_path / "ck"
    cep("run", CARD, "-i", inp, "-o", tmp_path / "o", "--checkpoint", ck, "--test-stop-after", "300")
    other = write(tmp_path / "other.pattern", "PATTERN other SEQ(Txn a, Txn b) PARTITION BY card WITHIN 5 s\n")
    r = cep("run", other, "-i", inp, "-o", tmp_path / "o", "--checkpoint", ck)
    assert r.returncode == 1 and b"other pattern files or options" in r.stderr
    r = cep("run", CARD, "-i", inp, "-o", tmp_path / "o", "--checkpoint", ck, "--lateness", "5 s")
    assert r.returncode == 1 and b"other pattern files or options" in r.stderr


def test_checkpoint_format_mismatch_is_a_clear_error(tmp_path, stream):
    inp, _ = stream
    ck = tmp_path / "ck"
    cep("run", CARD, "-i", inp, "-o", tmp_path / "o", "--checkpoint", ck, "--test-stop-after", "300")
    head, _, body = ck.read_bytes().partition(b"\n")
    h = orjson.loads(head)
    h["version"] = 99
    ck.write_bytes(orjson.dumps(h) + b"\n" + body)
    r = cep("run", CARD, "-i", inp, "-o", tmp_path / "o", "--checkpoint", ck)
    assert r.returncode == 1 and b"format version 99" in r.stderr and b"Traceback" not in r.stderr


def test_engine_state_mismatch_is_a_clear_error(tmp_path, stream):
    inp, _ = stream
    ck = tmp_path / "ck"
    cep("run", CARD, "-i", inp, "-o", tmp_path / "o", "--checkpoint", ck, "--test-stop-after", "300")
    head, _, body = ck.read_bytes().partition(b"\n")
    h = orjson.loads(head)
    h["state_len"] = 5
    ck.write_bytes(orjson.dumps(h) + b"\n" + b"junk!")
    r = cep("run", CARD, "-i", inp, "-o", tmp_path / "o", "--checkpoint", ck)
    assert r.returncode == 1 and b"cannot restore checkpoint" in r.stderr and b"Traceback" not in r.stderr


def test_checkpoint_needs_a_resumable_input(tmp_path):
    r = cep("run", CARD, "--checkpoint", tmp_path / "ck", input=b"")
    assert r.returncode == 1 and b"stdin cannot be resumed" in r.stderr


def test_checkpoint_by_time(tmp_path, stream):
    """With a tiny --checkpoint-interval the timer fires at every housekeeping tick (256 records)."""
    inp, _ = stream
    out, ck = tmp_path / "out.jsonl", tmp_path / "ck"
    r = cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck, "--checkpoint-every", "1000000",
            "--checkpoint-interval", "0.000001", "--test-stop-after", "600", "--test-crash-at-stop")
    assert r.returncode == EXIT_SIMULATED_CRASH
    header = orjson.loads(ck.read_bytes().split(b"\n", 1)[0])
    assert header["position"]["record"] == 512
    assert header["sizes"]["output"] <= out.stat().st_size


def test_a_resumed_run_writes_the_bytes_of_an_uninterrupted_one_in_lines_mode(tmp_path, stream, monkeypatch):
    """A run resumed from its checkpoint takes the engine's lines mode, as a fresh run does
    (``Engine.loads(lines=True)``), and its file is byte for byte the uninterrupted run's."""
    import io

    import cep.commands.run as runner
    from cep.runtime.engine import Engine

    inp, _expected = stream
    whole, out, ck = tmp_path / "whole.jsonl", tmp_path / "out.jsonl", tmp_path / "run.ckpt"
    assert runner.run(runner.RunOptions(patterns=[CARD], input=str(inp), output=str(whole), quiet=True,
                                        progress=False), io.StringIO()) == 0
    assert runner.run(runner.RunOptions(patterns=[CARD], input=str(inp), output=str(out), quiet=True, progress=False,
                                        checkpoint=str(ck), checkpoint_every=100, test_stop_after=1234),
                      io.StringIO()) == 0
    loaded: list[bool] = []
    real = Engine.loads.__func__

    def loads(cls, *args, **kwargs):
        eng = real(cls, *args, **kwargs)
        loaded.append(eng.lines)
        return eng

    monkeypatch.setattr(Engine, "loads", classmethod(loads))
    assert runner.run(runner.RunOptions(patterns=[CARD], input=str(inp), output=str(out), quiet=True, progress=False,
                                        checkpoint=str(ck)), io.StringIO()) == 0
    assert loaded == [True]
    assert out.read_bytes() == whole.read_bytes()
