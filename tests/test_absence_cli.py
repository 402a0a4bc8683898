"""``cep`` end to end for spec section 7: NOT, strategies, nesting, decided matches.

Each misuse is a located error (FILE:LINE:COL, exit 2); the end of a bounded input
decides pending matches; ``--idle-advance`` decides them on a quiet unbounded input;
a run resumed from a checkpoint taken while matches were pending gives exactly the
output of an uninterrupted run.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time

import orjson
import pytest
from cephelp import ROOT, cep, lines, multiset, write

UNSHIPPED = """\
PATTERN unshipped
  SEQ(Order o, NOT Shipment s)
  WHERE s.order_id = o.order_id
  WITHIN 100
  EMIT o.order_id AS order_id
"""


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("PATTERN p\n  SEQ(A a, NOT B b)\n", "2:12", "a trailing NOT needs WITHIN"),
        ("PATTERN p\n  SEQ(NOT B b, A a)\n", "2:7", "a leading NOT needs WITHIN"),
        ("PATTERN p\n  AND(A a, NOT B b)\n", "2:12", "NOT is only allowed inside SEQ"),
        ("PATTERN p\n  SEQ(A a, NOT B b, NOT C c, D d)\n  WHERE b.x = c.x\n", "3:9",
         "a condition may mention at most one NOT or repeated alias"),
        ("PATTERN p\n  SEQ(A a, NOT B b, D d)\n  EMIT a.x, b.x\n", "3:13", "'b' is a NOT alias"),
        ("PATTERN p\n  SEQ(A a, NOT B b, D d)\n  USING strict_contiguity\n", "3:3",
         "USING strict_contiguity cannot be combined with a NOT or Kleene element"),
        ("PATTERN p\n  SEQ(A a, AND(B b, C c))\n  USING skip_till_next_match\n", "3:3",
         "USING skip_till_next_match applies to a flat SEQ"),
        ("PATTERN p\n  SEQ(A a, SEQ(B b, NOT X x, C c))\n", "2:21", "NOT may only stand in the outermost SEQ"),
    ],
)
@pytest.mark.parametrize("command", ["run", "check"])
def test_misuse_is_a_located_error(tmp_path, command, text, where, message):
    f = write(tmp_path / "bad.pattern", text)
    r = cep(command, f, input=b"")
    assert r.returncode == 2
    err = r.stderr.decode()
    assert f"{f}:{where}: {message}" in err
    assert "^" in err  # the offending line with a caret


def test_end_of_input_decides_pending_matches(tmp_path):
    pat = write(tmp_path / "u.pattern", UNSHIPPED)
    recs = [
        {"type": "Order", "ts": 0, "order_id": 1},
        {"type": "Order", "ts": 10, "order_id": 2},
        {"type": "Shipment", "ts": 50, "order_id": 1},
        {"type": "Order", "ts": 300, "order_id": 3},  # passes order 2's window: decided here
        {"type": "Shipment", "ts": 350, "order_id": 3, "note": "late for nothing: in the window"},
        {"type": "Order", "ts": 360, "order_id": 4},  # pending at the end of the input
    ]
    data = b"".join(orjson.dumps(r) + b"\n" for r in recs)
    for args in (["-i", write(tmp_path / "in.jsonl", data.decode())], []):  # a file, and stdin
        r = cep("run", pat, *args, "-q", input=data)
        assert r.returncode == 0, r.stderr
        got = lines(r.stdout)
        assert [o["match"]["order_id"] for o in got] == [2, 4]
        assert {o["op"] for o in got} == {"+"}


def test_decided_in_time_order_before_the_end(tmp_path):
    """With --lateness 0 a middle gap is decided when its right neighbour arrives."""
    pat = write(tmp_path / "m.pattern",
                "PATTERN paid_uncancelled\n  SEQ(Order o, NOT Cancel c, Pay p)\n"
                "  WHERE c.id = o.id AND p.id = o.id\n  EMIT o.id AS id\n")
    recs = [{"type": "Order", "ts": 1, "id": 1}, {"type": "Order", "ts": 2, "id": 2},
            {"type": "Cancel", "ts": 3, "id": 1}, {"type": "Pay", "ts": 4, "id": 1},
            {"type": "Pay", "ts": 5, "id": 2}]
    p = subprocess.Popen([sys.executable, "-m", "cep.cli", "run", str(pat), "-q", "--no-progress"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        for r in recs:
            p.stdin.write(orjson.dumps(r) + b"\n")
        p.stdin.flush()
        line = p.stdout.readline()  # before the end of the input
        assert orjson.loads(line)["match"] == {"id": 2}
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    assert p.stdout.read() == b""


def test_idle_advance_decides_on_a_quiet_input(tmp_path):
    pat = write(tmp_path / "u.pattern", UNSHIPPED)
    now = int(time.time())
    p = subprocess.Popen([sys.executable, "-m", "cep.cli", "run", str(pat), "-q", "--no-progress",
                          "--idle-advance", "200ms"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        # an order 1000 s old: its 100 s window has passed on the wall clock
        p.stdin.write(orjson.dumps({"type": "Order", "ts": now - 1000, "order_id": 9}) + b"\n")
        p.stdin.flush()
        t0 = time.monotonic()
        line = p.stdout.readline()  # stdin stays open: only the idle advance can decide it
        assert orjson.loads(line)["match"] == {"order_id": 9}
        assert time.monotonic() - t0 < 30
        # the watermark followed the wall clock: an old record is now late
        p.stdin.write(orjson.dumps({"type": "Order", "ts": now - 500, "order_id": 10}) + b"\n")
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    assert p.returncode == 0
    assert p.stdout.read() == b""


def test_idle_advance_misuse(tmp_path):
    pat = write(tmp_path / "u.pattern", UNSHIPPED)
    inp = write(tmp_path / "in.jsonl", "")
    r = cep("run", pat, "-i", inp, "--idle-advance", "soon")
    assert r.returncode == 1 and b"bad duration 'soon'" in r.stderr
    r = cep("run", pat, "-i", inp, "--idle-advance", "1s", "--checkpoint", tmp_path / "ck")
    assert r.returncode == 1 and b"--idle-advance cannot be combined with --checkpoint" in r.stderr


def _orders(n: int, seed: int) -> bytes:
    rnd = random.Random(seed)
    out = []
    ts = 0
    for i in range(n):
        ts += rnd.randint(0, 9)
        if rnd.random() < 0.5:
            out.append({"type": "Order", "ts": ts, "order_id": i})
        else:
            out.append({"type": "Shipment", "ts": ts, "order_id": rnd.randint(max(0, i - 30), i)})
    return b"".join(orjson.dumps(r) + b"\n" for r in out)


def test_checkpoint_restart_with_pending_matches(tmp_path):
    pat = write(tmp_path / "u.pattern", UNSHIPPED)
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(_orders(2000, 3))
    ref = cep("run", pat, "-i", inp, "-q", "--lateness", "7")
    assert ref.returncode == 0
    expected = lines(ref.stdout)
    assert 100 < len(expected) < 1000
    out, ck = tmp_path / "out.jsonl", tmp_path / "run.ckpt"
    r1 = cep("run", pat, "-i", inp, "-o", out, "--checkpoint", ck, "--checkpoint-every", "500",
             "--checkpoint-interval", "0", "--lateness", "7", "--test-stop-after", "1250", "--test-crash-at-stop")
    assert r1.returncode == 75
    header = orjson.loads(ck.read_bytes().split(b"\n", 1)[0])
    assert header["position"]["record"] == 1000
    from cep.io import checkpoint as ckpt
    from cep.lang.compiler import compile_files
    from cep.runtime.engine import Engine

    eng = Engine.loads(ckpt.load(str(ck)).state, compile_files([str(pat)]))
    assert eng.pending_count() > 0  # the checkpoint holds undecided matches
    r2 = cep("run", pat, "-i", inp, "-o", out, "--checkpoint", ck, "--lateness", "7")
    assert r2.returncode == 0, r2.stderr
    assert multiset(lines(out.read_bytes())) == multiset(expected)
