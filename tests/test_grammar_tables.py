"""The shipped parser tables (``cep/lang/grammar_tables.py``) are the ones Lark computes from the grammar.

The table loop runs on generated plain data so that ``cep run`` and ``cep check`` never import Lark
(``cep.lang.tablegen``); this rebuilds the data from ``grammar/pattern.lark`` with Lark and fails,
naming the command that regenerates it, when the two differ.  Lark is still what locates a syntax
error: a text that parses must not load it, a text that does not must get Lark's located message.
"""

from __future__ import annotations

import subprocess
import sys

from cephelp import PATTERNS, ROOT
from lark import Lark

from cep.lang import grammar_tables, tablegen
from cep.lang.grammar_cache import grammar_text, lark_parser


def test_shipped_tables_are_the_grammars():
    shipped = (ROOT / "cep" / "lang" / "grammar_tables.py").read_text(encoding="utf-8")
    assert tablegen.source(lark_parser()) == shipped, (
        f"cep/lang/grammar_tables.py is not what grammar/pattern.lark gives: run `{tablegen.COMMAND}`")


def test_tables_do_not_depend_on_the_hash_seed_or_the_cache():
    """Lark numbers its states by set iteration: the generated file must not."""
    probe = ("from lark import Lark\nfrom cep.lang import tablegen, grammar_cache as g\n"
             "l = Lark(g.grammar_text(), parser='lalr', lexer='basic', start=['start', 'expr_only'],"
             " propagate_positions=True, maybe_placeholders=False)\nprint(tablegen.source(l), end='')")
    shipped = (ROOT / "cep" / "lang" / "grammar_tables.py").read_text(encoding="utf-8")
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=str(ROOT),
                             env={"PYTHONHASHSEED": seed, "PATH": ""}, timeout=120, check=True).stdout
        assert out == shipped


def test_a_changed_grammar_gives_other_tables():
    """(The comparison above can fail: one more terminal in the grammar changes the file.)"""
    changed = grammar_text().replace('PERCENT: "%"', 'PERCENT: "%"\nCARET: "^"').replace(
        '(STAR | SLASH | PERCENT)', '(STAR | SLASH | PERCENT | CARET)')
    assert changed != grammar_text()
    other = Lark(changed, parser="lalr", lexer="basic", start=["start", "expr_only"], propagate_positions=True,
                 maybe_placeholders=False)
    assert tablegen.source(other) != tablegen.source(lark_parser())
    assert tablegen.tables(other)["TERMINALS"] != grammar_tables.TERMINALS


_PROBE = """
import sys
from cep.commands.check import run_check
rc = run_check([sys.argv[1]], sys.stdout, sys.stderr)
print("LARK" if any(m == "lark" or m.startswith("lark.") for m in sys.modules) else "NO LARK", rc)
"""


def test_check_loads_lark_only_for_a_syntax_error(tmp_path):
    bad = tmp_path / "bad.pattern"
    bad.write_text("PATTERN p\n  SEQ(A a, B b)\n  WHERE a.x = = 1\n")
    got = {}
    for name, path in (("good", PATTERNS / "card_testing.pattern"), ("bad", bad)):
        r = subprocess.run([sys.executable, "-c", _PROBE, str(path)], capture_output=True, text=True,
                           cwd=str(ROOT), timeout=120)
        got[name] = (r.stdout.splitlines()[-1], r.stderr)
    assert got["good"][0] == "NO LARK 0"
    assert got["bad"][0] == "LARK 2"
    assert f"{bad}:3:15: expected an expression, found '='" in got["bad"][1]
