"""The parser's table loop (``cep.lang.lalr``) gives what Lark's own parser gives, on any text.

The loop runs Lark's LALR tables with its own lexer and builds the AST as it
reduces; Lark parses every text the loop rejects.  So for every text, both
must accept (with the same AST, locations, depths and issues) or both reject.
The other direction is checked on Lark's tree walked by the same actions.
"""

from __future__ import annotations

import dataclasses
import random
import re
from contextlib import contextmanager
from pathlib import Path

import strategies as cs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lark.exceptions import UnexpectedInput

from cep.lang import lalr, parser
from cep.lang.grammar_cache import lark_parser
from cep.lang.lalr import Rejected, TableParser, walk_tree

ROOT = Path(__file__).resolve().parent.parent


def deep(x):
    """Every field of an AST value, locations included (equality ignores them)."""
    if dataclasses.is_dataclass(x):
        return (type(x).__name__, tuple((f.name, deep(getattr(x, f.name))) for f in dataclasses.fields(x)))
    if isinstance(x, (list, tuple)):
        return tuple(deep(i) for i in x)
    if isinstance(x, float):
        return repr(x)  # (nan)
    return x


def by_tables(text: str, start: str = "start", tree: bool = True, tables: TableParser | None = None):
    b = parser._Builder(text, "f")
    try:
        value = (tables or parser._tables()).parse(text, start, b)
    except Rejected:
        return None
    return deep(value) if tree else None, [(i.loc, i.message) for i in b.issues]


def by_lark(text: str, start: str = "start", tree: bool = True):
    try:
        parsed = lark_parser().parse(text, start=start)
    except UnexpectedInput:
        return None
    b = parser._Builder(text, "f")
    value = walk_tree(parsed, b)
    return deep(value) if tree else None, [(i.loc, i.message) for i in b.issues]


def same(text: str, start: str = "start", tree: bool = True) -> None:
    """Both accept with the same AST (``tree``) and issues, or both reject."""
    assert by_tables(text, start, tree) == by_lark(text, start, tree), text


def shipped_and_documented() -> list[str]:
    texts = [p.read_text() for p in sorted((ROOT / "patterns").glob("*.pattern"))]
    doc = (ROOT / "docs" / "language.md").read_text()
    texts += re.findall(r"```(?:pattern|cep)?\n(.*?)```", doc, re.S)
    return texts


def test_shipped_and_documented_patterns():
    texts = shipped_and_documented()
    assert len(texts) > 20
    accepted = 0
    for t in texts:
        same(t)
        accepted += by_tables(t) is not None
    assert accepted >= 15  # (the loop is the path taken, not the fallback)


def test_mutated_patterns_agree():
    """Deleted, inserted and copied characters: errors of every kind, and odd texts that parse."""
    rnd = random.Random(12)
    base = shipped_and_documented()
    pieces = list("(),.+-*/%<>=!'\"{}#\n \t\\") + [
        "AND", "or", "Not", "WHERE", "EMIT", "PATTERN", "SEQ", "x", "1", "2.5e3", "IN", "--", "AS",
        "WITHIN", "h", "é", "ſeq", "\u0663", "\r\n", "null", "TRUE"]  # fmt: skip
    for _ in range(1500):
        t = rnd.choice(base)
        for _k in range(rnd.randint(1, 3)):
            i = rnd.randrange(len(t) + 1)
            op = rnd.random()
            if op < 0.4:
                t = t[:i] + t[i + rnd.randint(1, 5) :]
            elif op < 0.8:
                t = t[:i] + rnd.choice(pieces) + t[i:]
            else:
                j = rnd.randrange(len(t) + 1)
                t = t[:i] + t[j : j + 12] + t[i:]
        same(t)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(cs.pattern_files(), cs.patterns(), cs.gap_patterns(), cs.kleene_patterns()))
def test_generated_patterns_agree(text):
    same(text)
    assert by_tables(text) is not None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("ab1 .,()<=>-+*/'\"#\n{}") + ["AND", "OR", "NOT", "IN", "x.y", "--"]),
                max_size=30))
def test_expressions_agree(parts):
    same("".join(parts), "expr_only")


def test_depth_limit_is_reported_where_lark_would():
    """The node that crosses the limit last in the text is the one reported, as before."""
    deep_a = "(" * 230 + "a.x" + ")" * 230
    deep_b = "f(" * 240 + "b.y" + ")" * 240
    for where in (f"{deep_a} > 1 AND {deep_b} > 2", f"{deep_b} > 1 OR {deep_a} > 2",
                  " OR ".join(f"a.x{i} > {i}" for i in range(300)), "- " * 250 + "a.x > 1"):
        text = f"PATTERN p SEQ(A a, B b) WHERE {where}"
        same(text, tree=False)  # (too deep for a recursive comparison)
        issues = by_tables(text, tree=False)[1]  # type: ignore[index]
        assert [m for _, m in issues] == [f"nested too deeply (more than {parser.MAX_DEPTH} levels)"]


def test_negative_literals_fold_only_from_a_number():
    text = "PATTERN p SEQ(A a) WHERE - 5 = a.x AND - - 5 = a.y AND -(5) = a.z AND -true = a.w"
    same(text)
    where = parser.parse_text(text)[0].where
    assert "Literal(value=-5)" in repr(where) and "Neg(operand=Literal(value=-5))" in repr(where)
    assert "Neg(operand=Literal(value=5))" in repr(where) and "Neg(operand=Literal(value=True))" in repr(where)


# ------------------------------------------------- generated code per pattern shape
# A shape met often runs as generated straight-line code (``TableParser._shape``): the texts below
# repeat their patterns, with shapes generated from their second use on, so that path builds the
# AST, and compare it with Lark's.


@contextmanager
def shapes_from_second_use():
    before = lalr._GENERATE_AT
    lalr._GENERATE_AT = 2
    try:
        yield
    finally:
        lalr._GENERATE_AT = before


def test_repeated_shipped_patterns_agree_through_generated_shapes():
    texts = shipped_and_documented()
    fresh = parser._table_parser()  # (no shapes from other tests)
    with shapes_from_second_use():
        for t in texts:
            text = "\n".join([t] * 6)
            assert by_tables(text, tables=fresh) == by_lark(text), text
        text = "\n".join(texts + texts[::-1] + texts)
        assert by_tables(text, tables=fresh) == by_lark(text)
    assert sum(v is not None for v in fresh._shapes.values()) > 10  # (the generated path ran)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(cs.patterns(), cs.gap_patterns(), cs.kleene_patterns()), min_size=1, max_size=3),
       st.lists(st.integers(0, 2), min_size=2, max_size=8), st.sampled_from(["\n", " ", "\n-- c\n", "#x\n\n"]))
def test_repeated_generated_patterns_agree(pieces, order, sep):
    text = sep.join(pieces[k % len(pieces)] for k in order * 4)
    with shapes_from_second_use():
        same(text)
        assert by_tables(text) is not None


def test_repeated_deep_patterns_report_depth_as_lark():
    """A shape holding a node at the depth limit reports it from the generated code, as the loop does."""
    for where in ("(" * 199 + "a.x" + ")" * 199 + " > 1", "(" * 201 + "a.x" + ")" * 201 + " > 1",
                  " OR ".join(f"a.x{i} > {i}" for i in range(205)), "- " * 201 + "a.x > 1"):
        text = f"PATTERN p SEQ(A a, B b) WHERE {where}\n"
        for n in (1, 2, 6):
            with shapes_from_second_use():
                same(text * n, tree=False)
                assert by_tables(text * n, tree=False) == by_lark(text * n, tree=False)


def test_odd_line_breaks_and_blanks_keep_lark_positions():
    """Lines end at \\n only (\\r, form feed and U+2028 are blanks inside a line), as Lark counts."""
    for text in ["PATTERN p\r\n SEQ(A a,\r\n B b)\r\n WITHIN 1 h\r\n",
                 "PATTERN p\x0c SEQ(A a,\u2028 B b) WHERE a.x\x0b> 1 --c\u2028x\n EMIT a.x",
                 "\n\n   PATTERN p SEQ(A a) -- end without newline",
                 "PATTERN p SEQ(A a) WHERE a.x = 'it''s' AND a.y <> \"q\\\"\" # c\n"]:
        same(text)
        same(text + "\n" + text)
        assert by_tables(text) is not None
