"""End-to-end tests of the ``cep`` command: every exit status and every ``cep run`` option.

Each test runs ``cep`` in a subprocess exactly as a user would (stdin, stdout,
stderr, exit status), against docs/language.md (sections 1, 4, 5, 6).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import threading

import orjson
import pytest
from cephelp import PATTERNS, ROOT, cep, lines, multiset, write

CARD = str(PATTERNS / "card_testing.pattern")

SMALL_BIG = (
    b'{"type": "Txn", "ts": 100, "card": "c1", "amount": 10}\n'
    b'{"type": "Txn", "ts": 110, "card": "c1", "amount": 20}\n'
    b'{"type": "Txn", "ts": 120, "card": "c1", "amount": 500}\n'
)

PAIR = """
PATTERN pair
  SEQ(A a, B b)
  PARTITION BY k
  WITHIN 10 s
  EMIT a.k AS k, a.ts AS a_ts, b.ts AS b_ts
"""


def rec(**kw) -> bytes:
    return orjson.dumps(kw) + b"\n"


@pytest.fixture
def pair(tmp_path):
    return str(write(tmp_path / "pair.pattern", PAIR))


# ------------------------------------------------------------------ basics


def test_help_and_version():
    r = cep("--help")
    assert r.returncode == 0
    for cmd in (b"run", b"check", b"explain"):
        assert cmd in r.stdout
    r = cep("--version")
    assert r.returncode == 0 and b"0.1.0" in r.stdout


def test_run_help_lists_every_option():
    r = cep("run", "--help")
    assert r.returncode == 0
    for opt in ("--input", "--output", "--format", "--type-field", "--time-field", "--time-unit",
                "--op-field", "--lateness", "--late-output", "--on-error", "--errors", "--checkpoint",
                "--checkpoint-every", "--checkpoint-interval", "--quiet", "--no-progress"):
        assert opt.encode() in r.stdout, opt


def test_usage_error_is_status_1():
    r = cep("run", CARD, "--no-such-option")
    assert r.returncode == 1
    assert b"no-such-option" in r.stderr
    assert b"Traceback" not in r.stderr


def test_stdin_to_stdout_with_summary():
    r = cep("run", CARD, input=SMALL_BIG)
    assert r.returncode == 0, r.stderr
    out = lines(r.stdout)
    assert len(out) == 1
    o = out[0]
    assert set(o) == {"pattern", "op", "id", "match"}
    assert o["pattern"] == "card_testing" and o["op"] == "+"
    assert o["match"] == {"card": "c1", "first_ts": 100, "amount": 500}
    assert type(o["match"]["amount"]) is int  # integers stay integers
    err = r.stderr.decode()
    assert "3 records (0 late, 0 bad)" in err
    assert "card_testing: 1 matches (+1 -0)" in err
    assert "events/s" in err and "peak retained events" in err


def test_explicit_dash_and_files(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(SMALL_BIG)
    out = tmp_path / "out.jsonl"
    r = cep("run", CARD, "-i", inp, "-o", out)
    assert r.returncode == 0 and r.stdout == b""
    assert len(lines(out.read_bytes())) == 1
    r2 = cep("run", CARD, "--input", "-", "--output", "-", input=SMALL_BIG)
    assert multiset(lines(r2.stdout)) == multiset(lines(out.read_bytes()))


def test_ids_are_deterministic_across_runs():
    a = cep("run", CARD, input=SMALL_BIG)
    b = cep("run", CARD, input=SMALL_BIG)
    assert lines(a.stdout) == lines(b.stdout)


def test_quiet_has_no_summary():
    r = cep("run", CARD, "--quiet", input=SMALL_BIG)
    assert r.returncode == 0 and r.stderr == b""
    r = cep("run", CARD, "-q", "--no-progress", input=SMALL_BIG)
    assert r.returncode == 0 and r.stderr == b""


def test_no_input_records():
    r = cep("run", CARD, input=b"")
    assert r.returncode == 0 and r.stdout == b""
    assert b"0 records" in r.stderr


def test_blank_lines_are_skipped_but_counted_as_lines():
    data = b"\n" + SMALL_BIG.replace(b"\n", b"\n\n", 1) + b"oops\n"
    r = cep("run", CARD, input=data)
    assert r.returncode == 3
    assert b"input line 6:" in r.stderr  # blank lines keep the numbering of the file


# ------------------------------------------------------------- pattern errors


def test_pattern_error_is_status_2_with_location_and_caret(tmp_path):
    p = write(tmp_path / "bad.pattern", "PATTERN p\n  SEQ(A a, B b)\n  WHERE a.x < c.y\n")
    r = cep("run", p, input=SMALL_BIG)
    assert r.returncode == 2
    err = r.stderr.decode()
    assert f"{p}:3:" in err
    assert "^" in err
    assert r.stdout == b""


def test_syntax_error_is_status_2(tmp_path):
    p = write(tmp_path / "bad.pattern", "PATTERN p SEQ(A a,, B b)\n")
    r = cep("run", p, input=SMALL_BIG)
    assert r.returncode == 2
    assert str(p).encode() + b":1:" in r.stderr


def test_duplicate_pattern_names_across_files_is_status_2(tmp_path):
    a = write(tmp_path / "a.pattern", PAIR)
    b = write(tmp_path / "b.pattern", PAIR)
    r = cep("run", a, b, input=b"")
    assert r.returncode == 2
    assert b"pair" in r.stderr


def test_missing_pattern_file_is_a_pattern_error(tmp_path):
    r = cep("run", tmp_path / "nope.pattern", input=b"")
    assert r.returncode == 2  # the parser reports it as FILE:1:1: cannot read file
    assert b"nope.pattern" in r.stderr and b"Traceback" not in r.stderr


def test_missing_input_file_is_status_1(tmp_path):
    r = cep("run", CARD, "-i", tmp_path / "nope.jsonl")
    assert r.returncode == 1
    assert b"cannot open input" in r.stderr and b"Traceback" not in r.stderr


# ---------------------------------------------------------------- bad records


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"{not json}\n", b"not valid JSON"),
        (b"[1, 2]\n", b"not a JSON object"),
        (b'{"ts": 130, "card": "c1"}\n', b"missing type field"),
        (b'{"type": "Txn", "card": "c1"}\n', b"missing time field"),
        (b'{"type": "Txn", "ts": "soon"}\n', b"bad time value"),
        (b'{"type": "Txn", "ts": 130, "op": "*"}\n', b"bad op"),
        (b'{"type": "Txn", "ts": 130, "card": "zz", "amount": 1, "op": "-"}\n', b"retraction"),
    ],
)
def test_bad_record_stops_with_status_3_naming_the_line(tmp_path, line, reason):
    out = tmp_path / "out.jsonl"
    data = SMALL_BIG + line + rec(type="Txn", ts=200, card="c1", amount=700)
    r = cep("run", CARD, "-o", out, input=data)
    assert r.returncode == 3, r.stderr
    assert b"input line 4:" in r.stderr and reason in r.stderr
    assert b"Traceback" not in r.stderr
    # the match emitted before the bad record stays written; nothing after it
    got = lines(out.read_bytes())
    assert [o["match"]["amount"] for o in got] == [500]
    assert b"1 bad" in r.stderr  # the summary counts it


def test_output_on_stdout_is_flushed_before_bad_record_exit():
    r = cep("run", CARD, input=SMALL_BIG + b"garbage\n")
    assert r.returncode == 3
    assert len(lines(r.stdout)) == 1


def test_skip_mode_writes_errors_file_and_goes_on(tmp_path):
    errors = tmp_path / "errors.jsonl"
    data = (b"garbage\n" + SMALL_BIG + b'{"type": "Txn"}\n'
            + rec(type="Txn", ts=200, card="c1", amount=700))
    r = cep("run", CARD, "--on-error", "skip", "--errors", errors, input=data)
    assert r.returncode == 0, r.stderr
    assert [o["match"]["amount"] for o in lines(r.stdout)] == [500, 700]  # both with (10, 20)
    errs = lines(errors.read_bytes())
    assert [(e["line"], e["pos"]) for e in errs] == [(1, "1"), (5, "5")]
    assert "not valid JSON" in errs[0]["reason"] and errs[0]["record"] == "garbage"
    assert "missing time field" in errs[1]["reason"] and errs[1]["record"] == '{"type": "Txn"}'
    assert b"6 records (0 late, 2 bad)" in r.stderr


def test_skip_mode_without_errors_file_reports_on_stderr():
    r = cep("run", CARD, "--on-error", "skip", input=b"garbage\n" + SMALL_BIG)
    assert r.returncode == 0
    assert len(lines(r.stdout)) == 1
    first = r.stderr.decode().splitlines()[0]
    report = orjson.loads(first)
    assert report["line"] == 1 and report["record"] == "garbage"


# ------------------------------------------------------------ time and lateness


def test_late_record_is_counted_written_and_not_processed(tmp_path, pair):
    late = tmp_path / "late.jsonl"
    data = rec(type="B", ts=10, k=1) + rec(type="A", ts=5, k=1) + rec(type="B", ts=12, k=1)
    r = cep("run", pair, "--late-output", late, input=data)
    assert r.returncode == 0
    assert lines(r.stdout) == []  # the A at 5 came after the watermark reached 10
    assert lines(late.read_bytes()) == [{"type": "A", "ts": 5, "k": 1}]
    assert b"(1 late, 0 bad)" in r.stderr


def test_lateness_admits_disorder(pair):
    data = rec(type="B", ts=10, k=1) + rec(type="A", ts=5, k=1)
    for lat in ("5", "5 s", "5s", "5sec", "1 min", "2min", "1h"):
        r = cep("run", pair, "--lateness", lat, input=data)
        assert r.returncode == 0, (lat, r.stderr)
        assert [o["match"] for o in lines(r.stdout)] == [{"k": 1, "a_ts": 5, "b_ts": 10}], lat
    r = cep("run", pair, "--lateness", "4", input=data)
    assert lines(r.stdout) == [] and b"(1 late" in r.stderr


def test_run_prints_the_warnings_check_prints(tmp_path):
    """`cep run` shows a pattern's warnings on stderr (as `cep check` does), then runs it."""
    pat = write(tmp_path / "w.pattern", "PATTERN w\n  SEQ(A a, B b)\n  WHERE a.x = NULL\n")
    warning = f"{pat}:3:9: warning: comparison with null is never true\n      WHERE a.x = NULL\n            ^\n"
    check = cep("check", pat)
    assert check.returncode == 0 and warning in check.stderr.decode()
    r = cep("run", pat, input=rec(type="A", ts=1, x=None) + rec(type="B", ts=2))
    assert r.returncode == 0, r.stderr
    assert r.stderr.decode().startswith(warning)
    assert lines(r.stdout) == []  # a comparison with null is never true: no match
    quiet = cep("run", str(PATTERNS / "card_testing.pattern"), input=SMALL_BIG)
    assert b"warning" not in quiet.stderr


def test_bad_lateness_is_status_1(pair):
    r = cep("run", pair, "--lateness", "5 parsecs", input=b"")
    assert r.returncode == 1 and b"bad duration" in r.stderr


def test_iso_times_and_time_units(tmp_path, pair):
    data = (rec(type="A", ts="2024-03-01T12:00:00Z", k=1)
            + rec(type="B", ts="2024-03-01T12:00:09.5Z", k=1)
            + rec(type="B", ts="2024-03-01T12:00:10.5Z", k=1))
    r = cep("run", pair, input=data)
    assert [o["match"] for o in lines(r.stdout)] == [{"k": 1, "a_ts": 1709294400, "b_ts": 1709294409.5}]
    r = cep("run", pair, "--time-unit", "ms", input=data)
    assert [o["match"] for o in lines(r.stdout)] == [{"k": 1, "a_ts": 1709294400000, "b_ts": 1709294409500}]
    r = cep("run", pair, "--time-unit", "us", input=data)
    assert [o["match"]["b_ts"] for o in lines(r.stdout)] == [1709294409500000]


def test_within_is_in_the_time_unit(pair):
    # WITHIN 10 s = 10000 ms: numeric times in ms
    data = rec(type="A", ts=1000, k=1) + rec(type="B", ts=11000, k=1) + rec(type="B", ts=11001, k=1)
    r = cep("run", pair, "--time-unit", "ms", input=data)
    assert [o["match"]["b_ts"] for o in lines(r.stdout)] == [11000]
    r = cep("run", pair, "--time-unit", "s", input=data)  # 10000 s apart: too far
    assert lines(r.stdout) == []


def test_bad_time_unit_is_usage_error(pair):
    r = cep("run", pair, "--time-unit", "h", input=b"")
    assert r.returncode == 1


# --------------------------------------------------------- fields and formats


def test_custom_field_names(pair):
    data = (b'{"kind": "A", "at": 1, "k": 1, "type": "B"}\n'
            b'{"kind": "B", "at": 2, "k": 1, "change": "+"}\n'
            b'{"kind": "B", "at": 2, "k": 1, "change": "-"}\n')
    r = cep("run", pair, "--type-field", "kind", "--time-field", "at", "--op-field", "change", input=data)
    assert r.returncode == 0, r.stderr
    out = lines(r.stdout)
    assert [o["op"] for o in out] == ["+", "-"]
    assert out[0]["id"] == out[1]["id"]


def test_retraction_emits_minus_with_same_id(tmp_path):
    p = write(tmp_path / "w.pattern", "PATTERN w SEQ(A a, B b) PARTITION BY k\n")
    a = rec(type="A", ts=1, k=1, v=None)
    b = rec(type="B", ts=2, k=1)
    r = cep("run", p, input=a + b + b + b"".join([orjson.dumps({"type": "B", "ts": 2, "k": 1, "op": "-"}) + b"\n"]))
    out = lines(r.stdout)
    assert [o["op"] for o in out] == ["+", "+", "-"]
    assert out[0]["id"] != out[1]["id"]  # equal events are two events
    assert out[2]["id"] in (out[0]["id"], out[1]["id"])
    assert out[0]["match"] == {"a": {"type": "A", "ts": 1, "k": 1, "v": None}, "b": {"type": "B", "ts": 2, "k": 1}}
    assert b"w: 1 matches (+2 -1)" in r.stderr


def test_csv_input(tmp_path):
    inp = tmp_path / "in.csv"
    inp.write_text(
        "type,ts,card,amount\n"
        "Txn,100,c1,10\n"
        "Txn,110,c1,20.5\n"
        "Txn,1970-01-01T00:01:55Z,c2,5\n"
        "Txn,120,c1,500\n"
    )
    r = cep("run", CARD, "--format", "csv", "-i", inp)
    assert r.returncode == 0, r.stderr
    assert [o["match"] for o in lines(r.stdout)] == [{"card": "c1", "first_ts": 100, "amount": 500}]


def test_csv_bad_row_names_its_line(tmp_path):
    inp = tmp_path / "in.csv"
    inp.write_text("type,ts,card,amount\nTxn,100,c1,10\nTxn,110,c1\n")
    r = cep("run", CARD, "--format", "csv", "-i", inp)
    assert r.returncode == 3
    assert b"input line 3:" in r.stderr and b"expected 4 cells" in r.stderr


def test_csv_from_stdin():
    data = b"type,ts,card,amount\nTxn,100,c1,10\nTxn,110,c1,20\nTxn,120,c1,401\n"
    r = cep("run", CARD, "--format", "csv", input=data)
    assert len(lines(r.stdout)) == 1


def test_several_pattern_files_one_pass(tmp_path, pair):
    data = SMALL_BIG + rec(type="A", ts=130, k=1) + rec(type="B", ts=131, k=1)
    r = cep("run", CARD, pair, input=data)
    assert r.returncode == 0
    assert sorted(o["pattern"] for o in lines(r.stdout)) == ["card_testing", "pair"]
    assert b"card_testing: 1 matches" in r.stderr and b"pair: 1 matches" in r.stderr


def test_several_patterns_in_one_file(tmp_path):
    p = write(tmp_path / "two.pattern", PAIR + PAIR.replace("pair", "pair2").replace("SEQ(A a, B b)", "AND(A a, B b)"))
    data = rec(type="B", ts=1, k=1) + rec(type="A", ts=2, k=1)
    r = cep("run", p, input=data)
    assert [o["pattern"] for o in lines(r.stdout)] == ["pair2"]


# ------------------------------------------------------------- streaming


def test_each_records_matches_are_flushed_before_the_next_read():
    """Feed stdin one record at a time and read the match before sending more."""
    import os

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "cep.cli", "run", CARD, "-q"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(ROOT), env=env)
    got: list[bytes] = []

    def talk():
        for line in SMALL_BIG.splitlines(keepends=True):
            proc.stdin.write(line)
            proc.stdin.flush()
        got.append(proc.stdout.readline())  # stdin still open: must arrive anyway
        proc.stdin.write(rec(type="Txn", ts=130, card="c1", amount=600))
        proc.stdin.flush()
        got.append(proc.stdout.readline())
        proc.stdin.close()

    t = threading.Thread(target=talk, daemon=True)
    t.start()
    t.join(60)
    alive = t.is_alive()
    if alive:
        proc.kill()
    proc.wait(60)
    assert not alive, "a match was not written before the next record was read"
    assert [orjson.loads(g)["match"]["amount"] for g in got] == [500, 600]


def test_output_to_closed_pipe_is_quiet(tmp_path):
    big = b"".join(rec(type="Txn", ts=i, card="c", amount=1 if i % 3 else 900) for i in range(1, 3000))
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(big)
    r = subprocess.run(f"{sys.executable} -m cep.cli run {CARD} -i {inp} | head -1", shell=True,
                       capture_output=True, cwd=str(ROOT), env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert len(r.stdout.splitlines()) == 1
    assert b"Traceback" not in r.stderr


# ------------------------------------------------------------------ others


def test_check_and_explain_are_wired():
    r = cep("check", CARD)
    assert r.returncode == 0, r.stderr
    assert b"card_testing" in r.stdout
    r = cep("explain", CARD)
    assert r.returncode == 0, r.stderr
    assert b"card_testing" in r.stdout


def test_check_reports_pattern_errors_with_status_2(tmp_path):
    p = write(tmp_path / "bad.pattern", "PATTERN p SEQ(A a,, B b)\n")
    assert cep("check", p).returncode == 2


def test_spark_without_pyspark_is_a_clear_error(monkeypatch):
    # PySpark is hidden from the command (CI installs it, and this must be checked there too)
    from click.testing import CliRunner

    from cep.cli import cli

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name == "pyspark" else real(name, *a, **k))
    r = CliRunner().invoke(cli, ["spark", "x.pattern", "--input", "dir"])
    assert r.exit_code == 1
    assert "PySpark" in r.stderr and "cep[spark]" in r.stderr
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_progress_flag_accepted_without_terminal(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(SMALL_BIG)
    r = cep("run", CARD, "-i", inp, "--no-progress")
    assert r.returncode == 0
    assert b"\r" not in r.stderr  # stderr is not a terminal: no bar either way
    r = cep("run", CARD, "-i", inp)
    assert b"\r" not in r.stderr


def test_progress_bar_on_a_terminal(tmp_path):
    """With stderr on a terminal (a pty here), a file input shows a tqdm bar; --no-progress hides it."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    inp = tmp_path / "in.jsonl"
    inp.write_bytes(b"".join(rec(type="Txn", ts=i, card="c", amount=150) for i in range(3000)))

    def stderr_on_pty(*extra):
        try:
            master, slave = pty.openpty()
        except OSError:
            pytest.skip("no pseudo-terminal available")
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a 100x24 terminal
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        p = subprocess.Popen([sys.executable, "-m", "cep.cli", "run", CARD, "-i", str(inp), "-o", os.devnull,
                              *extra], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave,
                             cwd=str(ROOT), env=env)
        os.close(slave)
        chunks = []
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        p.wait(120)
        os.close(master)
        return p.returncode, b"".join(chunks)

    rc, err = stderr_on_pty()
    assert rc == 0
    assert b"cep:" in err and b"%|" in err  # the bar: "cep:  42%|████ ..."
    rc, err = stderr_on_pty("--no-progress")
    assert rc == 0 and b"%|" not in err and b"3000 records" in err


# ------------------------------------------------------------ shipped patterns


def test_patterns_lists_and_prints_the_shipped_patterns():
    from cep import patterns as shipped

    files = sorted(p.stem for p in PATTERNS.glob("*.pattern"))
    assert shipped.names() == files
    r = cep("patterns")
    assert r.returncode == 0, r.stderr
    listed = [line.split()[0] for line in r.stdout.decode().splitlines()[: len(files)]]
    assert listed == files
    assert b"Card testing fraud." in r.stdout
    for name in files:
        printed = cep("patterns", name)
        assert printed.returncode == 0 and printed.stdout.decode() == (PATTERNS / f"{name}.pattern").read_text()
    bad = cep("patterns", "card_testin")
    assert bad.returncode == 1 and b"did you mean card_testing?" in bad.stderr


def test_a_shipped_pattern_runs_by_name_from_anywhere(tmp_path):
    r = cep("run", "card_testing", "--quiet", input=SMALL_BIG, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert [o["match"] for o in lines(r.stdout)] == [{"card": "c1", "first_ts": 100, "amount": 500}]
    assert cep("check", "card_testing", cwd=tmp_path).returncode == 0
    assert b"card_testing" in cep("explain", "card_testing", cwd=tmp_path).stdout


def test_an_existing_file_wins_over_a_shipped_name(tmp_path):
    write(tmp_path / "card_testing", "PATTERN mine SEQ(Txn a, Txn b)\n")
    r = cep("check", "card_testing", cwd=tmp_path)
    assert r.returncode == 0 and b"pattern mine" in r.stdout
    missing = cep("run", "no_such_pattern", input=b"", cwd=tmp_path)
    assert missing.returncode == 2 and b"no_such_pattern:1:1: cannot read file" in missing.stderr
