"""The parser accepts the whole language of docs/language.md and builds the expected trees.

Covers: every example of docs/language.md and every ``patterns/*.pattern`` file,
normalization (``==``, ``<>``, keyword case, units, negative literals, EMIT
item text), precedence, comments and strings, section-7 trees (with
``allow_phase2``), the warnings API, file input, and the guarantee that any
text or bytes raise nothing but ``PatternError``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cep.errors import PatternError
from cep.lang import ast
from cep.lang import parser as parser_mod
from cep.lang.parser import parse_expr, parse_file, parse_text, parse_text_with_warnings

ROOT = Path(__file__).resolve().parent.parent
LANGUAGE_DOC = ROOT / "docs" / "language.md"
PATTERN_FILES = sorted((ROOT / "patterns").glob("*.pattern"))

A, L = ast.Attr, ast.Literal


def doc_examples(info: str) -> list[str]:
    """The fenced code blocks of docs/language.md marked ```INFO (read from the checkout)."""
    text = LANGUAGE_DOC.read_text(encoding="utf-8")
    return re.findall(rf"^```{re.escape(info)}\n(.*?)^```$", text, re.M | re.S)


def test_language_doc_has_examples():
    assert len(doc_examples("pattern")) >= 3, "docs/language.md lost its ```pattern examples"
    assert not doc_examples("pattern-not-supported"), "every construct of the language is supported now"


@pytest.mark.parametrize("text", doc_examples("pattern"))
def test_language_doc_examples_parse(text):
    assert parse_text(text)


def test_spec_example_tree():
    (p,) = parse_text(doc_examples("pattern")[0])
    assert p == ast.Pattern(
        name="card_testing",
        structure=ast.Structure(
            "SEQ", (ast.Element("Txn", "s1"), ast.Element("Txn", "s2"), ast.Element("Txn", "big"))
        ),
        where=ast.And(
            ast.And(ast.Compare("<", A("s1", "amount"), L(100)), ast.Compare("<", A("s2", "amount"), L(100))),
            ast.Compare(">", A("big", "amount"), L(400)),
        ),
        partition_by=("card",),
        within=ast.Duration(1, "h"),
        emit=(
            ast.EmitItem(A("s1", "card"), "card", "s1.card"),
            ast.EmitItem(A("s1", "ts"), "first_ts", "s1.ts"),
            ast.EmitItem(A("big", "amount"), "amount", "big.amount"),
        ),
    )
    assert p.loc.line == 2 and p.loc.col == 1
    assert p.structure.elements[2].alias_loc == ast.Loc(3, 27, 3, 30)


def test_pattern_files_exist():
    assert PATTERN_FILES, "patterns/*.pattern missing"


@pytest.mark.parametrize("path", PATTERN_FILES, ids=lambda p: p.name)
def test_pattern_files_parse(path):
    patterns = parse_file(path)
    assert patterns and all(p.file == str(path) for p in patterns)


# ------------------------------------------------------------- normalization


def where(cond: str) -> ast.Expr:
    (p,) = parse_text(f"PATTERN p SEQ(A a, B b) WHERE {cond}")
    assert p.where is not None
    return p.where


def test_comparison_operators_are_normalized():
    assert where("a.x == 1") == ast.Compare("=", A("a", "x"), L(1))
    assert where("a.x <> 1") == ast.Compare("!=", A("a", "x"), L(1))
    for op in ("=", "!=", "<", "<=", ">", ">="):
        assert where(f"a.x {op} b.y") == ast.Compare(op, A("a", "x"), A("b", "y"))


def test_keywords_are_case_insensitive_names_are_not():
    lower = parse_text("pattern P seq(Txn T1, txn t1) where T1.Amount > 1 and t1.amount in (1) "
                       "partition by Card within 2 Hours emit T1.x as X")[0]
    upper = parse_text("PATTERN P SEQ(Txn T1, txn t1) WHERE T1.Amount > 1 AND t1.amount IN (1) "
                       "PARTITION BY Card WITHIN 2 hours EMIT T1.x AS X")[0]
    assert lower == upper
    assert [e.alias for e in lower.structure.elements] == ["T1", "t1"]
    assert [e.type for e in lower.structure.elements] == ["Txn", "txn"]
    assert lower.structure.op == "SEQ"


@pytest.mark.parametrize(
    ("written", "unit"),
    [
        ("ms", "ms"), ("millisecond", "ms"), ("milliseconds", "ms"),
        ("s", "s"), ("sec", "s"), ("second", "s"), ("seconds", "s"),
        ("min", "min"), ("minute", "min"), ("minutes", "min"),
        ("h", "h"), ("hour", "h"), ("hours", "h"), ("HOURS", "h"),
        ("d", "d"), ("day", "d"), ("days", "d"),
    ],
)  # fmt: skip
def test_duration_units(written, unit):
    (p,) = parse_text(f"PATTERN p SEQ(A a) WITHIN 3 {written}")
    assert p.within == ast.Duration(3, unit)


def test_duration_without_unit_and_glued_unit():
    assert parse_text("PATTERN p SEQ(A a) WITHIN 60")[0].within == ast.Duration(60, None)
    assert parse_text("PATTERN p SEQ(A a) WITHIN 1.5h")[0].within == ast.Duration(1.5, "h")
    assert parse_text("PATTERN p SEQ(A a) WITHIN 10 WHERE a.x = 1")[0].within == ast.Duration(10, None)


def test_precedence_and_associativity():
    x, y, z = A("a", "x"), A("a", "y"), A("b", "z")
    c1, c2, c3 = (ast.Compare(">", v, L(0)) for v in (x, y, z))
    assert where("a.x > 0 OR a.y > 0 AND b.z > 0") == ast.Or(c1, ast.And(c2, c3))
    assert where("(a.x > 0 OR a.y > 0) AND b.z > 0") == ast.And(ast.Or(c1, c2), c3)
    assert where("NOT a.x > 0 AND a.y > 0") == ast.And(ast.Not(c1), c2)
    assert where("a.x - a.y - b.z > 0") == ast.Compare(">", ast.Arith("-", ast.Arith("-", x, y), z), L(0))
    assert where("a.x + a.y * b.z % 2 > 0") == ast.Compare(
        ">", ast.Arith("+", x, ast.Arith("%", ast.Arith("*", y, z), L(2))), L(0)
    )
    assert where("-a.x * 2 > 0") == ast.Compare(">", ast.Arith("*", ast.Neg(x), L(2)), L(0))
    assert where("b.z > a.x * 1.1") == ast.Compare(">", z, ast.Arith("*", x, L(1.1)))


def test_negative_number_literals_fold():
    assert where("a.x > -5") == ast.Compare(">", A("a", "x"), L(-5))
    assert where("a.x > - 2.5") == ast.Compare(">", A("a", "x"), L(-2.5))
    assert where("a.x > -(5)") == ast.Compare(">", A("a", "x"), ast.Neg(L(5)))
    assert where("a.x - -5 > 0") == ast.Compare(">", ast.Arith("-", A("a", "x"), L(-5)), L(0))


def test_in_lists():
    assert where("a.x IN (1, 'two', b.y)") == ast.InList(A("a", "x"), (L(1), L("two"), A("b", "y")))
    assert where("a.x NOT IN (1)") == ast.InList(A("a", "x"), (L(1),), True)
    assert where("NOT a.x IN (1)") == ast.Not(ast.InList(A("a", "x"), (L(1),)))


def test_literals_and_strings():
    assert where("a.x = 'it''s' OR a.x = \"say \"\"hi\"\"\"") == ast.Or(
        ast.Compare("=", A("a", "x"), L("it's")), ast.Compare("=", A("a", "x"), L('say "hi"'))
    )
    assert where(r"a.x = 'it\'s'") == ast.Compare("=", A("a", "x"), L("it's"))
    assert where('a.x = "dq \\" \\\\ \\n"') == ast.Compare("=", A("a", "x"), L('dq " \\ \n'))
    assert where("a.x = '-- not a comment # either'") == ast.Compare(
        "=", A("a", "x"), L("-- not a comment # either")
    )
    assert where("a.b = TRUE OR a.c = false OR a.d != null") == ast.Or(
        ast.Or(ast.Compare("=", A("a", "b"), L(True)), ast.Compare("=", A("a", "c"), L(False))),
        ast.Compare("!=", A("a", "d"), L(None)),
    )
    e = where("a.x = 1.0 OR a.x = 1e3 OR a.x = 7")
    values = [e.left.left.right.value, e.left.right.right.value, e.right.right.value]
    assert values == [1.0, 1000.0, 7] and [type(v) for v in values] == [float, float, int]


def test_comments():
    text = "# hash comment\nPATTERN p -- trailing\n  SEQ(A a) # another\n  WHERE a.x > 1 -- x\n"
    assert parse_text(text)[0].where == ast.Compare(">", A("a", "x"), L(1))


def test_several_patterns_and_clause_order():
    text = (
        "PATTERN one SEQ(A a, B b) EMIT a.x WITHIN 5 s WHERE a.k = b.k PARTITION BY u\n"
        "PATTERN two AND(A a, B b)\n"
    )
    one, two = parse_text(text)
    assert (one.name, two.name) == ("one", "two")
    assert one.within == ast.Duration(5, "s") and one.partition_by == ("u",)
    assert one.emit == (ast.EmitItem(A("a", "x"), None, "a.x"),)
    assert two.structure.op == "AND" and two.where is None and two.emit is None


def test_emit_items_text_and_name():
    (p,) = parse_text("PATTERN p SEQ(A a, B b) EMIT a.x AS x, b.y  *  2, a.*, b.ts - a.ts, a.k in ( 1 ,2 ), "
                      "a.s = 'a b' -- c\n , (a.q)")
    assert p.emit is not None
    assert [(i.name, i.text, i.star) for i in p.emit] == [
        ("x", "a.x", None),
        (None, "b.y*2", None),
        (None, "a.*", "a"),
        (None, "b.ts-a.ts", None),
        (None, "a.kIN(1,2)", None),
        (None, "a.s='a b'", None),
        (None, "(a.q)", None),
    ]


def test_attribute_names_after_a_dot_may_be_keywords():
    assert where("a.in = 1") == ast.Compare("=", A("a", "in"), L(1))


def test_expression_locations():
    e = where("a.x >= 10")
    assert e.loc == ast.Loc(1, 31, 1, 40)
    assert e.left.loc == ast.Loc(1, 31, 1, 34)
    assert e.right.loc == ast.Loc(1, 38, 1, 40)


def test_phase2_trees():
    (p,) = parse_text(
        "PATTERN p SEQ(A a, NOT B b, C+ c, AND(D d, E e)) WHERE count(c) > 2 AND AVG(c.v) < 1 "
        "WITHIN 1 h USING Skip_Till_Any_Match",
        allow_phase2=True,
    )
    els = p.structure.elements
    assert [(e.kind, e.type, e.alias) for e in els] == [
        ("event", "A", "a"), ("not", "B", "b"), ("kleene", "C", "c"), ("nested", "", ""),
    ]  # fmt: skip
    assert els[3].nested == ast.Structure("AND", (ast.Element("D", "d"), ast.Element("E", "e")))
    assert p.where == ast.And(
        ast.Compare(">", ast.Call("count", (A("c", ""),)), L(2)),
        ast.Compare("<", ast.Call("avg", (A("c", "v"),)), L(1)),
    )
    assert p.using == "skip_till_any_match"
    (q,) = parse_text("PATTERN q SEQ(A a, B b) USING Skip_Till_Next_Match")
    assert q.using == "skip_till_next_match"


def test_parse_expr():
    assert parse_expr("a.x + 1") == ast.Arith("+", A("a", "x"), L(1))
    with pytest.raises(PatternError):
        parse_expr("a.x +")


# ------------------------------------------------------------------ warnings


def test_warnings_api():
    text = "PATTERN p SEQ(A a) WHERE a.x = 1 AND 'x' = 1"
    patterns, warnings = parse_text_with_warnings(text)
    assert len(patterns) == 1 and [w.severity for w in warnings] == ["warning"]
    assert parse_text(text) == patterns  # the same patterns, warnings not kept anywhere
    assert not hasattr(parser_mod, "last_warnings")
    assert parse_text_with_warnings("PATTERN p SEQ(A a)")[1] == []


def test_parsing_leaves_the_garbage_collector_alone(monkeypatch):
    """The parser runs inside long-lived processes (Spark workers, services): the collector is theirs."""
    import gc

    def refuse() -> None:
        raise AssertionError("the parser switched the garbage collector off")

    monkeypatch.setattr(gc, "disable", refuse)
    monkeypatch.setattr(gc, "freeze", refuse)
    text = "\n".join(f"PATTERN p{i} SEQ(A a, B b) WHERE a.x < b.y WITHIN 5 s" for i in range(20))
    assert len(parse_text_with_warnings(text)[0]) == 20
    assert gc.isenabled()


# ---------------------------------------------------------------------- files


def test_parse_file_and_bytes(tmp_path):
    f = tmp_path / "x.pattern"
    f.write_bytes("\ufeffPATTERN p SEQ(A a) WHERE a.name = 'Zoë'\n".encode())
    (p,) = parse_file(f)
    assert p.where == ast.Compare("=", A("a", "name"), L("Zoë"))
    assert parse_text(b"PATTERN p SEQ(A a)") == [ast.Pattern("p", ast.Structure("SEQ", (ast.Element("A", "a"),)))]


def test_undecodable_and_missing_files(tmp_path):
    f = tmp_path / "bad.pattern"
    f.write_bytes(b"PATTERN p\nSEQ(A a) WHERE a.x = '\xff'\n")
    with pytest.raises(PatternError) as info:
        parse_file(f)
    (d,) = info.value.diagnostics
    assert (d.file, d.loc.line, d.loc.col, d.message) == (str(f), 2, 23, "not valid UTF-8 (byte 0xff)")
    with pytest.raises(PatternError) as info:
        parse_file(tmp_path / "missing.pattern")
    assert info.value.diagnostics[0].message.startswith("cannot read file: ")


# ------------------------------------------------------- robustness (hypothesis)

_WORDS = st.sampled_from(
    "PATTERN SEQ AND OR NOT IN WHERE PARTITION BY WITHIN EMIT AS USING TRUE FALSE NULL "
    "Txn a b s1 x.y a.b ( ) , . * + - / % = == != <> < <= > >= 1 2.5 'str' \"q\" -- # \n hour ms count "
    "skip_till_next_match \\ ' \"".split(" ")
)


def _only_pattern_errors(data) -> None:
    try:
        parse_text(data, "fuzz.pattern", allow_phase2=True)
    except PatternError as e:
        assert e.diagnostics
        for d in e.diagnostics:
            assert d.loc.line >= 1 and d.loc.col >= 1
            assert not d.message.startswith("internal")
            d.format()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_arbitrary_text_raises_only_pattern_error(text):
    _only_pattern_errors(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary())
def test_arbitrary_bytes_raise_only_pattern_error(data):
    _only_pattern_errors(data)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_WORDS, max_size=40).map(" ".join))
def test_token_soup_raises_only_pattern_error(text):
    _only_pattern_errors("PATTERN p SEQ(Txn a, Txn b) " + text)
    _only_pattern_errors(text)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_file_bytes(tmp_path_factory, data):
    f = tmp_path_factory.mktemp("fuzz") / "f.pattern"
    f.write_bytes(data)
    try:
        parse_file(f)
    except PatternError:
        pass
