"""``cep check``: summaries on stdout, located diagnostics on stderr, exit 0 or 2."""

from __future__ import annotations

import io
from pathlib import Path

from cep.commands.check import run_check

ROOT = Path(__file__).resolve().parent.parent
PATTERN_FILES = sorted(str(p) for p in (ROOT / "patterns").glob("*.pattern"))


def check(*paths) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = run_check([str(p) for p in paths], out, err)
    return rc, out.getvalue(), err.getvalue()


def write(tmp_path: Path, name: str, text: str) -> Path:
    f = tmp_path / name
    f.write_text(text, encoding="utf-8")
    return f


CARD = """\
-- Card testing
PATTERN card_testing
  SEQ(Txn s1, Txn s2, Txn big)
  WHERE s1.amount < 100 AND s2.amount < 100 AND big.amount > 400 AND big.amount > s1.amount * 5
  PARTITION BY card
  WITHIN 1 hour
  EMIT s1.card AS card, s1.ts AS first_ts, big.amount
"""


def test_summary_of_one_pattern(tmp_path):
    f = write(tmp_path, "card.pattern", CARD)
    rc, out, err = check(f)
    assert (rc, err) == (0, "")
    assert out == (
        f"pattern card_testing  ({f}:2)\n"
        "  structure:        SEQ(Txn s1, Txn s2, Txn big)\n"
        "  aliases:          s1: Txn, s2: Txn, big: Txn\n"
        "  filters:          s1: s1.amount < 100\n"
        "                    s2: s2.amount < 100\n"
        "                    big: big.amount > 400\n"
        "  equalities:       s1.card = s2.card = big.card\n"
        "  cross predicates: big.amount > s1.amount * 5\n"
        "  order:            s1.ts < s2.ts < big.ts\n"
        "  window:           1 h = 3600 s\n"
        "  partition key:    s1.card\n"
        "  output:           card = s1.card\n"
        "                    first_ts = s1.ts\n"
        "                    big.amount\n"
        "ok: 1 pattern(s) in 1 file(s), 0 warning(s)\n"
    )


def test_summary_without_window_partition_or_emit(tmp_path):
    f = write(tmp_path, "and.pattern", "PATTERN both AND(Smoke s, Heat h) WHERE s.room = h.room\n")
    rc, out, _ = check(f)
    assert rc == 0
    assert "  structure:        AND(Smoke s, Heat h)\n" in out
    assert "  equalities:       s.room = h.room\n" in out
    assert "  window:           none (unbounded: every event is kept)\n" in out
    assert "  partition key:    s.room\n" in out
    assert "  output:           each alias's whole event: s, h\n" in out
    assert "order:" not in out


def test_all_pattern_files_check():
    assert PATTERN_FILES
    rc, out, err = check(*PATTERN_FILES)
    assert (rc, err) == (0, "")
    assert out.count("pattern ") >= len(PATTERN_FILES)
    assert out.endswith(f"ok: {out.count('  structure:')} pattern(s) in {len(PATTERN_FILES)} file(s), 0 warning(s)\n")


def test_errors_exit_2_with_located_messages(tmp_path):
    good = write(tmp_path, "good.pattern", CARD)
    bad = write(tmp_path, "bad.pattern", "PATTERN p\n  SEQ(Txn s1, Txn s2)\n  WHERE sl.amount > 1\n  WITHIN 1 hr\n")
    rc, out, err = check(good, bad)
    assert rc == 2
    assert "pattern card_testing" in out and "ok:" not in out
    assert err == (
        f"{bad}:3:9: unknown alias 'sl' (did you mean s1?)\n"
        "      WHERE sl.amount > 1\n"
        "            ^\n"
        f"{bad}:4:12: unknown duration unit 'hr' (did you mean h?); use ms, s, min, h or d\n"
        "      WITHIN 1 hr\n"
        "               ^\n"
        "2 error(s), 0 warning(s)\n"
    )


def test_syntax_error_exit_2(tmp_path):
    f = write(tmp_path, "s.pattern", "PATTERN p SEQ(Txn s1 Txn s2)\n")
    rc, out, err = check(f)
    assert rc == 2 and out == ""
    assert err.startswith(f"{f}:1:22: expected ',' or ')', found 'Txn'\n")


def test_warnings_do_not_fail(tmp_path):
    f = write(tmp_path, "w.pattern", "PATTERN p SEQ(A a) WHERE a.x = NULL\n")
    rc, out, err = check(f)
    assert rc == 0
    assert err.startswith(f"{f}:1:26: warning: comparison with null is never true\n")
    assert out.endswith("ok: 1 pattern(s) in 1 file(s), 1 warning(s)\n")


def test_kleene_misuse_is_located(tmp_path):
    f = write(tmp_path, "n.pattern", "PATTERN p SEQ(A a, B+ b, C c) WITHIN 1 h\n  EMIT b.x\n")
    rc, _, err = check(f)
    assert rc == 2
    assert f"{f}:2:8: 'b' is repeated: 'b.x' has one value per event; EMIT an aggregate instead" in err


def test_same_pattern_name_in_two_files(tmp_path):
    a = write(tmp_path, "a.pattern", "PATTERN p SEQ(A a)\n")
    b = write(tmp_path, "b.pattern", "PATTERN p SEQ(B b)\n")
    rc, _, err = check(a, b)
    assert rc == 2
    assert f"{b}:1:1: pattern 'p' is also defined in {a}" in err


def test_missing_and_undecodable_files(tmp_path):
    bad = tmp_path / "bin.pattern"
    bad.write_bytes(b"\xff\xfe")
    rc, _, err = check(tmp_path / "nope.pattern", bad)
    assert rc == 2
    assert f"{tmp_path / 'nope.pattern'}:1:1: cannot read file:" in err
    assert f"{bad}:1:1: not valid UTF-8 (byte 0xff)" in err


def test_cli_check_uses_run_check(tmp_path):
    from click import testing as click_testing

    from cep.cli import cli

    f = write(tmp_path, "card.pattern", CARD)
    res = click_testing.CliRunner().invoke(cli, ["check", str(f)])
    assert res.exit_code == 0 and "pattern card_testing" in res.output


def test_compiler_diagnostics_get_their_source_line(tmp_path, monkeypatch):
    from cep.errors import Diagnostic, PatternError
    from cep.lang import ast, compiler

    def reject(p, time_unit="s"):
        raise PatternError([Diagnostic(p.file, ast.Loc(2, 3), "rejected by the compiler")])

    monkeypatch.setattr(compiler, "compile_pattern", reject)
    f = write(tmp_path, "c.pattern", "PATTERN p\n  SEQ(A a)\n")
    rc, out, err = check(f)
    assert rc == 2 and out == ""
    assert err == f"{f}:2:3: rejected by the compiler\n      SEQ(A a)\n      ^\n1 error(s), 0 warning(s)\n"
