"""Issue 12, records and patterns: CSV quotes and UTF-8, a BOM, exact big integers, ASCII
numbers, bounded ``cep check``, and Ctrl-C.

Each reproducer of the issue is a test here; the timing of pattern checking is measured
in ``bench/pattern_size.py``, not asserted.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import orjson
import pytest
from cephelp import PATTERNS, ROOT, cep, lines

from cep.event import Output
from cep.io.readers import BadRecord, CsvSource, make_decoder
from cep.io.writers import encode_output, encode_record

CARD = str(PATTERNS / "card_testing.pattern")
BIG = 100000000000000000000001

# ------------------------------------------------------------------- CSV


CSV_HEAD = "type,ts,card,amount\n"
CSV_GOOD = ["Txn,1,c1,5\n", "Txn,2,c1,6\n", "Txn,3,c1,500\n", "Txn,4,c2,5\n", "Txn,5,c2,7\n", "Txn,6,c2,900\n"]


def _csv(tmp_path, bad: bytes, at: int = 1):
    rows = [r.encode() for r in CSV_GOOD]
    p = tmp_path / "in.csv"
    p.write_bytes(CSV_HEAD.encode() + b"".join(rows[:at]) + bad + b"".join(rows[at:]))
    clean = tmp_path / "clean.csv"
    clean.write_bytes(CSV_HEAD.encode() + b"".join(rows))
    return p, clean


@pytest.mark.parametrize("bad, reason", [
    (b'Txn,3,c1,ab"c\n', "stray quote"),
    (b'Txn,3,"c1"x,5\n', "stray quote"),
    (b"Txn,3,c1,\xff\xfe\n", "not valid UTF-8"),
])
def test_bad_csv_row_is_a_bad_record(tmp_path, bad, reason):
    p, clean = _csv(tmp_path, bad)
    r = cep("run", CARD, "-i", p, "--format", "csv")
    assert r.returncode == 3
    assert f"input line 3: {reason}".encode() in r.stderr, r.stderr
    errs = tmp_path / "errors.jsonl"
    r = cep("run", CARD, "-i", p, "--format", "csv", "--on-error", "skip", "--errors", errs, "-q")
    assert r.returncode == 0, r.stderr
    (rep,) = lines(errs.read_bytes())
    assert rep["line"] == 3 and reason in rep["reason"]
    ref = cep("run", CARD, "-i", clean, "--format", "csv", "-q")
    assert len(lines(ref.stdout)) == 2
    # the good lines after the bad one still match (ids differ: they hash record positions)
    assert [o["match"] for o in lines(r.stdout)] == [o["match"] for o in lines(ref.stdout)]


def test_csv_quoted_cells_spanning_lines_still_read():
    import io

    src = CsvSource(io.BytesIO(b'type,ts,note\nE,1,"a ""b"", c\nd"\nE,2,x\n'))
    got = list(src.records())
    assert got[0][1] == {"type": "E", "ts": 1, "note": 'a "b", c\nd'}
    assert got[1][1]["note"] == "x" and src.line == 4


def test_csv_unterminated_quote_is_a_bad_record():
    import io

    (pos, raw), = list(CsvSource(io.BytesIO(b'type,ts,note\nE,1,"abc\nE,2,x\n')).records())
    assert "not closed" in raw.reason


def test_csv_non_ascii_digits_are_text():
    import io

    (_, rec), = list(CsvSource(io.BytesIO("type,ts,n\nE,1,\u0663\n".encode())).records())
    assert rec["n"] == "\u0663"


# ------------------------------------------------------------------- JSON lines


def test_bom_at_the_start_of_json_lines_is_accepted(tmp_path):
    body = b"".join(orjson.dumps({"type": "Txn", "ts": t, "card": "c", "amount": a}) + b"\n"
                    for t, a in ((1, 5), (2, 6), (3, 500)))
    p = tmp_path / "bom.jsonl"
    p.write_bytes(b"\xef\xbb\xbf" + body)
    r = cep("run", CARD, "-i", p, "-q")
    assert r.returncode == 0, r.stderr
    assert r.stdout == cep("run", CARD, "-q", input=body).stdout and r.stdout
    # a BOM anywhere else is not skipped
    p.write_bytes(body + b"\xef\xbb\xbf" + body)
    assert cep("run", CARD, "-i", p, "-q").returncode == 3


def test_big_integers_are_read_exactly():
    dec = make_decoder()
    ev = dec("1", b'{"type":"A","ts":18446744073709551617,"k":100000000000000000000001,"f":1.5,'
                  b'"n":-9223372036854775809}')
    assert ev.ts == 18446744073709551617 and type(ev.ts) is int
    assert ev.fields["k"] == BIG and ev.fields["n"] == -9223372036854775809 and ev.fields["f"] == 1.5
    huge = "9" * 400  # past a double's range: orjson refuses it, the stdlib keeps it
    assert dec("1", f'{{"type":"A","ts":1,"k":{huge}}}'.encode()).fields["k"] == int(huge)
    with pytest.raises(BadRecord):
        dec("1", b'{"type":"A","ts":1,"k":1e999}')
    with pytest.raises(BadRecord):
        dec("1", b'{"type":"A","ts":1,"k":NaN}')
    assert dec("1", b'{"type":"A","ts":1,"k":1e300}').fields["k"] == 1e300


def test_big_integers_are_written_exactly():
    o = Output("p", "+", "id", {"k": BIG, "f": 0.5, "s": "\u00e9", "n": None, "inf": float("inf")})
    line = encode_output(o)
    assert line.endswith(b"\n") and b"100000000000000000000001" in line
    assert orjson.loads(line[:-1].replace(b"100000000000000000000001", b"1")) == {
        "pattern": "p", "op": "+", "id": "id", "match": {"k": 1, "f": 0.5, "s": "\u00e9", "n": None, "inf": None}}
    assert encode_record({"k": -BIG}) == b'{"k":-100000000000000000000001}\n'


def test_three_big_cards_do_not_join_and_output_is_exact(tmp_path):
    recs = b"".join(orjson.dumps({"type": "Txn", "ts": i + 1, "amount": a}).replace(
        b'{"type"', f'{{"card":{BIG + i},"type"'.encode()) + b"\n" for i, a in enumerate((5, 6, 500)))
    r = cep("run", CARD, "-q", input=recs)
    assert r.returncode == 0 and r.stdout == b"", r.stdout
    same = recs.replace(b"100000000000000000000002", b"100000000000000000000001").replace(
        b"100000000000000000000003", b"100000000000000000000001")
    r = cep("run", CARD, "-q", input=same)
    assert b'"card":100000000000000000000001' in r.stdout and len(lines(r.stdout)) == 1


def test_big_timestamps_stay_distinct(tmp_path):
    pat = tmp_path / "t.cep"
    pat.write_text("PATTERN t\n  SEQ(A a, B b)\n  EMIT a.ts AS ta, b.ts AS tb\n")
    recs = (b'{"type":"A","ts":18446744073709551617}\n{"type":"B","ts":18446744073709551617}\n'
            b'{"type":"B","ts":18446744073709551618}\n')
    r = cep("run", pat, "-q", input=recs)
    assert r.stdout.count(b"\n") == 1
    assert b'"ta":18446744073709551617,"tb":18446744073709551618' in r.stdout


# ------------------------------------------------------------------- patterns


def test_non_ascii_digits_are_not_numbers(tmp_path):
    pat = tmp_path / "u.cep"
    pat.write_text("PATTERN x\n  SEQ(A a, B b)\n  WITHIN \u0663 h\n")
    r = cep("check", pat)
    assert r.returncode == 2
    assert f"{pat}:3:10: unexpected character".encode() in r.stderr and b"ASCII digits" in r.stderr
    r = cep("run", CARD, "--lateness", "\u0663 s", input=b"")
    assert r.returncode == 1 and b"bad duration" in r.stderr


def test_too_many_elements_is_a_located_error(tmp_path):
    pat = tmp_path / "and.cep"
    pat.write_text("PATTERN p\n  AND(" + ", ".join(f"T{i} e{i}" for i in range(1000)) + ")\n  WITHIN 1 h\n")
    r = cep("check", pat)
    assert r.returncode == 2
    col = len("  AND(" + ", ".join(f"T{i} e{i}" for i in range(32)) + ", ") + 1
    assert f"{pat}:2:{col}: AND has 1000 elements: at most 32".encode() in r.stderr, r.stderr[:300]
    pat.write_text("PATTERN p\n  AND(" + ", ".join(f"T{i} e{i}" for i in range(32)) + ")\n  WITHIN 1 h\n")
    assert cep("check", pat).returncode == 0


def test_diagnostics_are_capped_and_long_lines_cut(tmp_path):
    n = 5000
    pat = tmp_path / "nest.cep"
    pat.write_text("PATTERN p\n  SEQ(A a, B b)\n  WHERE " + "f(" * n + "a.x" + ")" * n + " > 1\n")
    r = cep("check", pat)
    assert r.returncode == 2
    assert len(r.stderr) < 50 * 600, len(r.stderr)  # was n errors, each quoting a 15 KB line
    assert b"more diagnostic(s) not shown" in r.stderr
    first = r.stderr.decode().splitlines()[:3]
    assert first[0].startswith(f"{pat}:3:9: ") and first[1].strip().startswith("WHERE f(f(")
    assert first[1].endswith("...") and first[2].index("^") == first[1].index("f(")


# ------------------------------------------------------------------- Ctrl-C


def test_ctrl_c_exits_130_interrupted(tmp_path):
    # stdin stays open, so the run cannot end by itself: once its first match is on stdout (written and
    # flushed before the reader waits for input) the run loop is waiting for input, and Ctrl-C arrives there
    proc = subprocess.Popen([sys.executable, "-m", "cep.cli", "run", CARD, "-i", "-", "-o", "-"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(ROOT))
    for ts, amount in ((1, 10), (2, 20), (3, 500)):
        proc.stdin.write(b'{"type":"Txn","ts":%d,"card":"c1","amount":%d}\n' % (ts, amount))
    proc.stdin.flush()
    first = proc.stdout.readline()
    assert b'"card_testing"' in first, first
    proc.send_signal(signal.SIGINT)
    # wait with stdin still open: communicate() would close it, and on a loaded machine the run could then
    # see the end of its input before the signal and finish normally (exit 0)
    try:
        proc.wait(timeout=60)
        err = proc.stderr.read()
    finally:
        proc.kill()
        proc.stdin.close()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == b"cep: interrupted" and b"Traceback" not in err
