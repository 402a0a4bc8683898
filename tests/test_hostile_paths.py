"""Issue 12, paths that destroy data: refused before anything is opened for writing.

Each clash is one ``cep: error:`` line naming both options, exit 1, and the files
are untouched.  Write failures (``/dev/full``) are errors with a non-zero exit.
A resume that does not fit the checkpoint (other output, output deleted or
shortened, input shorter or other) is refused with the reason.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys

import orjson
import pytest
from cephelp import PATTERNS, ROOT, cep, lines, multiset

CARD = str(PATTERNS / "card_testing.pattern")


def _stream(n: int = 2000, seed: int = 3) -> bytes:
    rnd = random.Random(seed)
    out, ts = [], 1_700_000_000
    for _ in range(n):
        ts += rnd.randint(0, 20)
        r = rnd.random()
        amount = rnd.choice([5, 12.5]) if r < 0.15 else (rnd.choice([450, 999]) if r < 0.22 else 150)
        out.append(orjson.dumps({"type": "Txn", "ts": ts, "card": f"c{rnd.randint(1, 15)}", "amount": amount}))
    return b"\n".join(out) + b"\n"


@pytest.fixture
def files(tmp_path):
    inp = tmp_path / "v.jsonl"
    data = _stream()
    inp.write_bytes(data)
    return tmp_path, inp, data


def _refused(r, *names: str) -> str:
    err = r.stderr.decode()
    assert r.returncode == 1, err
    assert err.count("\n") == 1 and err.startswith("cep: error:"), err
    for n in names:
        assert n in err, err
    return err


def test_output_onto_the_input_is_refused_by_any_name(files):
    d, inp, data = files
    os.symlink(inp, d / "link.jsonl")
    os.link(inp, d / "hard.jsonl")
    for out, cwd in ((inp, d), ("v.jsonl", d), ("./v.jsonl", d), (d / "link.jsonl", d),
                     (d / "hard.jsonl", d), ("../" + d.name + "/v.jsonl", d)):
        r = cep("run", CARD, "-i", "v.jsonl", "-o", out, cwd=cwd)
        _refused(r, "-i v.jsonl", f"-o {out}", "same file")
        assert inp.read_bytes() == data


def test_checkpoint_errors_and_late_output_clashes(files):
    d, inp, data = files
    out = d / "out.jsonl"
    out.write_bytes(b"keep\n")
    _refused(cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", out), "-o", "--checkpoint")
    _refused(cep("run", CARD, "-i", inp, "-o", out, "--on-error", "skip", "--errors", out), "-o", "--errors")
    _refused(cep("run", CARD, "-i", inp, "-o", d / "o2", "--late-output", out, "--errors", out),
             "--late-output", "--errors")
    _refused(cep("run", CARD, "-i", inp, "--late-output", inp), "-i", "--late-output")
    _refused(cep("run", CARD, "-i", inp, "-o", CARD), "pattern file", "-o")
    _refused(cep("run", CARD, "-i", inp, "--checkpoint", inp), "-i", "--checkpoint")
    # names not yet created clash too
    _refused(cep("run", CARD, "-i", inp, "-o", d / "new", "--checkpoint", d / "sub" / ".." / "new"), "same file")
    assert out.read_bytes() == b"keep\n" and inp.read_bytes() == data
    assert not (d / "new").exists()


def test_devices_may_be_named_twice(files):
    d, inp, _ = files
    r = cep("run", CARD, "-i", inp, "-o", "/dev/null", "--late-output", "/dev/null", "-q")
    assert r.returncode == 0, r.stderr


def test_checkpoint_must_be_a_regular_file(files):
    d, inp, _ = files
    _refused(cep("run", CARD, "-i", inp, "--checkpoint", "/dev/full"), "--checkpoint /dev/full", "regular file")
    (d / "dir").mkdir()
    _refused(cep("run", CARD, "-i", inp, "--checkpoint", d / "dir"), "regular file")


def test_write_failures_are_errors(files):
    d, inp, data = files
    late = d / "late.jsonl"
    late.write_bytes(data + b'{"type":"Txn","ts":5,"card":"c1","amount":3}\n')
    r = cep("run", CARD, "-i", late, "-o", "/dev/null", "--late-output", "/dev/full", "-q")
    assert r.returncode == 1 and b"/dev/full" in r.stderr and b"No space left" in r.stderr, r.stderr
    r = cep("run", CARD, "-i", inp, "-o", "/dev/full", "-q")
    assert r.returncode == 1 and b"No space left" in r.stderr
    r = cep("run", CARD, "-i", inp, "-o", "/dev/null", "--checkpoint", "/dev/full/ck", "-q")
    assert r.returncode == 1 and r.stderr.count(b"\n") == 1, r.stderr


# ----------------------------------------------------------------- resume


@pytest.fixture
def stopped(files):
    """A run stopped after 900 records with a checkpoint, and the full run's output."""
    d, inp, data = files
    ref = cep("run", CARD, "-i", inp, "-q")
    assert ref.returncode == 0
    out, ck = d / "out.jsonl", d / "run.ckpt"
    r = cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck, "--checkpoint-every", "100",
            "--test-stop-after", "900", "-q")
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0
    return d, inp, data, out, ck, lines(ref.stdout)


def test_resume_with_the_same_paths_is_exact(stopped):
    d, inp, data, out, ck, expected = stopped
    r = cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck, "-q")
    assert r.returncode == 0, r.stderr
    assert multiset(lines(out.read_bytes())) == multiset(expected)


def test_resume_with_another_output_is_refused(stopped):
    d, inp, data, out, ck, _ = stopped
    _refused(cep("run", CARD, "-i", inp, "-o", d / "other.jsonl", "--checkpoint", ck), "-o", "other.jsonl")
    _refused(cep("run", CARD, "-i", inp, "--checkpoint", ck), "-o -")
    _refused(cep("run", CARD, "-i", inp, "-o", out, "--late-output", d / "late", "--checkpoint", ck),
             "--late-output")


def test_resume_after_the_output_was_deleted_or_shortened_is_refused(stopped):
    d, inp, data, out, ck, _ = stopped
    size = out.stat().st_size
    with open(out, "r+b") as f:
        f.truncate(size - 1)
    _refused(cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck), "holds", str(size))
    out.unlink()
    _refused(cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck), "is gone")


def test_resume_on_a_shorter_or_other_input_is_refused(stopped):
    d, inp, data, out, ck, _ = stopped
    inp.write_bytes(data[:1000])
    _refused(cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck), "shorter")
    inp.write_bytes(b"")  # an offset past the end
    _refused(cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck), "shorter")
    other = _stream(seed=9)
    inp.write_bytes(other)
    _refused(cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck), "not the input")
    assert inp.read_bytes() == other


def test_resume_on_a_grown_input_goes_on(stopped):
    d, inp, data, out, ck, _ = stopped
    with open(inp, "ab") as f:
        f.write(b'{"type":"Txn","ts":1800000000,"card":"c1","amount":5}\n')
    r = cep("run", CARD, "-i", inp, "-o", out, "--checkpoint", ck, "-q")
    assert r.returncode == 0, r.stderr


def test_stdin_and_stdout_are_compared_too(files):
    d, inp, data = files
    with open(inp, "ab") as out:  # cep run -i v.jsonl >> v.jsonl would read its own output forever
        r = subprocess.run([sys.executable, "-m", "cep.cli", "run", CARD, "-i", str(inp)], stdout=out,
                           stderr=subprocess.PIPE, cwd=str(ROOT), timeout=60)
    assert r.returncode == 1 and b"-o - (stdout)" in r.stderr and inp.read_bytes() == data
    with open(inp, "rb") as src:  # cep run < v.jsonl -o v.jsonl
        r = subprocess.run([sys.executable, "-m", "cep.cli", "run", CARD, "-o", str(inp)], stdin=src,
                           capture_output=True, cwd=str(ROOT), timeout=60)
    assert r.returncode == 1 and b"-i - (stdin)" in r.stderr and inp.read_bytes() == data
    with open(d / "both.jsonl", "wb") as out:  # matches and late records may share stdout
        r = subprocess.run([sys.executable, "-m", "cep.cli", "run", CARD, "-i", str(inp), "--late-output", "-",
                            "-q"], stdout=out, stderr=subprocess.PIPE, cwd=str(ROOT), timeout=60)
    assert r.returncode == 0, r.stderr
