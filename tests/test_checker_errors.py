"""Every pattern check reports the exact position and message (docs/language.md section 6)."""

from __future__ import annotations

import pytest

from cep.errors import PatternError
from cep.lang.parser import parse_text, parse_text_with_warnings

HEAD = "PATTERN p\n  SEQ(Txn s1, Txn s2)\n"


def diags(text: str, **kw) -> list[tuple[int, int, str, str]]:
    with pytest.raises(PatternError) as info:
        parse_text(text, "f.pattern", **kw)
    return [(d.loc.line, d.loc.col, d.severity, d.message) for d in info.value.diagnostics]


def errors(text: str, **kw) -> list[tuple[int, int, str]]:
    return [(line, col, msg) for line, col, sev, msg in diags(text, **kw) if sev == "error"]


def test_unknown_alias_suggests_nearest():
    assert errors(HEAD + "  WHERE sl.amount > 1\n") == [(3, 9, "unknown alias 'sl' (did you mean s1?)")]


def test_unknown_alias_case_difference_suggested():
    assert errors(HEAD + "  WHERE S2.amount > 1\n") == [(3, 9, "unknown alias 'S2' (did you mean s2?)")]


def test_unknown_alias_without_close_name():
    assert errors(HEAD + "  EMIT zzz.a\n") == [(3, 8, "unknown alias 'zzz'")]


def test_unknown_alias_in_star_item():
    assert errors(HEAD + "  EMIT s3.*\n") == [(3, 8, "unknown alias 's3' (did you mean s1?)")]


def test_alias_defined_twice():
    assert errors("PATTERN p SEQ(A x, B y, C x)\n") == [
        (1, 27, "alias 'x' is defined twice (first at line 1, col 17)")
    ]


def test_and_with_repeated_type():
    assert errors("PATTERN p\n  AND(Txn a, Card b, Txn c)\n") == [
        (
            2,
            22,
            "type 'Txn' appears twice in AND (first at line 2, col 7); "
            "the types in one AND must be pairwise different",
        )
    ]


def test_seq_may_repeat_a_type():
    assert parse_text("PATTERN p SEQ(Txn a, Txn b)")[0].structure.op == "SEQ"


def test_bad_duration_unit_with_suggestion():
    assert errors(HEAD + "  WITHIN 1 hr\n") == [
        (3, 12, "unknown duration unit 'hr' (did you mean h?); use ms, s, min, h or d")
    ]
    assert errors(HEAD + "  WITHIN 5 minuts\n") == [
        (3, 12, "unknown duration unit 'minuts' (did you mean minutes?); use ms, s, min, h or d")
    ]


def test_bad_duration_unit_without_suggestion():
    assert errors(HEAD + "  WITHIN 5 fortnights\n") == [
        (3, 12, "unknown duration unit 'fortnights'; use ms, s, min, h or d")
    ]


def test_emit_names_twice():
    assert errors(HEAD + "  EMIT s1.card AS card, s2.card AS card\n") == [
        (3, 25, "two EMIT items are named 'card' (the first at line 3, col 8)")
    ]


def test_emit_default_name_collides_with_as_name():
    # the default name of "s2 . amount" is its text without spaces: s2.amount
    assert errors(HEAD + "  EMIT s2.amount, s2 . amount\n") == [
        (3, 19, "two EMIT items are named 's2.amount' (the first at line 3, col 8)")
    ]


def test_partition_by_twice():
    assert errors(HEAD + "  PARTITION BY card, user, card\n") == [
        (3, 28, "attribute 'card' is listed twice in PARTITION BY")
    ]


@pytest.mark.parametrize(
    ("within", "col", "shown"),
    [("0 hours", 10, "0 h"), ("0", 10, "0"), ("-5 s", 10, "-5 s"), ("0.0 min", 10, "0.0 min")],
)
def test_within_not_positive(within, col, shown):
    assert errors(HEAD + f"  WITHIN {within}\n") == [(3, col, f"WITHIN must be positive, got {shown}")]


@pytest.mark.parametrize(
    ("clause", "again", "name"),
    [
        ("WHERE s1.a = 1", "WHERE s2.a = 2", "WHERE"),
        ("PARTITION BY card", "PARTITION BY user", "PARTITION BY"),
        ("WITHIN 1 h", "WITHIN 2 h", "WITHIN"),
        ("EMIT s1.a", "EMIT s2.a", "EMIT"),
    ],
)
def test_clause_given_twice(clause, again, name):
    assert errors(HEAD + f"  {clause}\n  {again}\n") == [
        (4, 3, f"{name} clause is given twice (first at line 3, col 3)")
    ]


def test_literal_comparison_of_different_types_is_a_warning():
    text = HEAD + "  WHERE s1.a > 1 AND 1 = 'one'\n"
    patterns, warnings = parse_text_with_warnings(text, "f.pattern")
    assert len(patterns) == 1
    assert [(w.loc.line, w.loc.col, w.severity, w.message) for w in warnings] == [
        (3, 22, "warning", "comparison between a number and a string is never true")
    ]
    assert warnings[0].format() == (
        "f.pattern:3:22: warning: comparison between a number and a string is never true\n"
        "      WHERE s1.a > 1 AND 1 = 'one'\n" + " " * (4 + 21)
        + "^"
    )


def test_boolean_is_not_a_number_warning():
    _, warnings = parse_text_with_warnings(HEAD + "  WHERE TRUE != 1\n")
    assert [(w.loc.col, w.message) for w in warnings] == [
        (9, "comparison between a boolean and a number is never true")
    ]


def test_comparison_with_null_is_a_warning():
    _, warnings = parse_text_with_warnings(HEAD + "  WHERE s1.a = NULL\n")
    assert [(w.loc.line, w.loc.col, w.message) for w in warnings] == [(3, 9, "comparison with null is never true")]


def test_same_type_literals_and_attributes_give_no_warning():
    _, warnings = parse_text_with_warnings(HEAD + "  WHERE 1 < 2 AND s1.a = 'x' AND s1.b = s2.b\n")
    assert warnings == []


def test_warnings_are_included_when_errors_raise():
    assert diags(HEAD + "  WHERE 1 = 'a' AND zz.a = 1\n") == [
        (3, 9, "warning", "comparison between a number and a string is never true"),
        (3, 21, "error", "unknown alias 'zz'"),
    ]


@pytest.mark.parametrize(
    ("line", "col", "message"),
    [
        ("  WITHN 1 hour", 3, "(did you mean WITHIN?)"),
        ("  WHERE s1.a > 1 ANDD s2.a > 1", 18, "(did you mean AND?)"),
        ("  PARTITON BY card", 3, "(did you mean PARTITION?)"),
        ("  EMITT s1.a", 3, "(did you mean EMIT?)"),
        ("  were s1.a > 1", 3, "(did you mean WHERE?)"),
    ],
)
def test_misspelled_keyword_suggestion(line, col, message):
    (err,) = errors(HEAD + line + "\n")
    assert err[:2] == (3, col)
    assert err[2].endswith(message)
    assert err[2].startswith("expected ")


def test_syntax_error_message_expected_found():
    assert errors(HEAD + "  WITHN 1 hour\n") == [
        (
            3,
            3,
            "expected a clause (WHERE, PARTITION BY, WITHIN, EMIT, USING), PATTERN or end of input, "
            "found 'WITHN' (did you mean WITHIN?)",
        )
    ]
    assert errors("PATTERN p SEQ(Txn s1 Txn s2)") == [(1, 22, "expected ',' or ')', found 'Txn'")]
    assert errors("PATTERN p SEQ(Txn s1, Txn s2) WHERE s1.a >") == [
        (1, 43, "expected an expression, found end of input")
    ]
    assert errors("PATTERN p SEQ(Txn s1) WHERE s1.a > 1 s1.b < 2") == [
        (
            1,
            38,
            "expected an operator, a clause (WHERE, PARTITION BY, WITHIN, EMIT, USING), PATTERN or end of input, "
            "found 's1'",
        )
    ]
    assert errors("PATTERN p SEQ(Txn s1) WHERE s1.a < 1 < 2") == [
        (
            1,
            38,
            "expected an operator, a clause (WHERE, PARTITION BY, WITHIN, EMIT, USING), PATTERN or end of input, "
            "found '<'",
        )
    ]
    assert errors("PATTERN p SEQ(Txn s1) PARTITION card") == [(1, 33, "expected BY, found 'card'")]
    assert errors("SEQ(Txn s1)") == [(1, 1, "expected PATTERN, found 'SEQ'")]
    assert errors("") == [(1, 1, "expected PATTERN, found end of input")]
    assert errors("-- only a comment\n") == [(1, 1, "expected PATTERN, found end of input")]


def test_lexical_errors():
    assert errors("PATTERN p SEQ(Txn s1) WHERE s1.a = 'abc\n") == [(1, 36, "unterminated string")]
    assert errors("PATTERN p SEQ(Txn s1) WHERE s1.a @ 1") == [(1, 34, "unexpected character '@'")]
    assert errors("PATTERN p SEQ(Txn s1) WHERE s1.a = 1e999") == [(1, 36, "number out of range: 1e999")]


def test_every_broken_pattern_is_reported():
    text = (
        "PATTERN a SEQ(Txn s1, Txn s2) WHERE s1.x >\n"
        "PATTERN b SEQ(Txn s1, Txn s2) WHERE s1.x > 1 WITHIN 1 hr\n"
        "PATTERN c SEQ(Txn s1 Txn s2)\n"
        "PATTERN d SEQ(Txn s1, Txn s2) EMIT s3.x\n"
        "PATTERN b SEQ(Txn s1)\n"
    )
    assert errors(text) == [
        (1, 43, "expected an expression, found end of input"),
        (2, 55, "unknown duration unit 'hr' (did you mean h?); use ms, s, min, h or d"),
        (3, 22, "expected ',' or ')', found 'Txn'"),
        (4, 36, "unknown alias 's3' (did you mean s1?)"),
        (5, 9, "pattern 'b' is defined twice (first at line 2)"),
    ]


def test_text_before_the_first_pattern_is_an_error():
    assert errors("hello\nPATTERN p SEQ(Txn s1) WHERE s1.a >\n") == [
        (1, 1, "expected PATTERN, found 'hello'"),
        (2, 35, "expected an expression, found end of input"),
    ]


def test_pattern_defined_twice():
    assert errors("PATTERN p SEQ(A a)\n\nPATTERN p SEQ(B b)\n") == [
        (3, 9, "pattern 'p' is defined twice (first at line 1)")
    ]


def test_keywords_are_reserved_names():
    # a keyword is always lexed as the keyword, so it cannot be a name
    assert errors("PATTERN p SEQ(Txn s1, where s2)") == [(1, 23, "expected a name, AND, NOT or SEQ, found 'where'")]
    assert errors("PATTERN p SEQ(Txn s1) EMIT s1.a AS within") == [(1, 36, "expected a name, found 'within'")]
    assert errors("PATTERN p SEQ(Txn s1) PARTITION BY a, emit") == [(1, 39, "expected a name, found 'emit'")]
    assert errors("PATTERN seq SEQ(Txn s1)") == [(1, 9, "expected a name, found 'seq' (a keyword cannot be used as a name)")]


def test_a_misplaced_keyword_is_reported_where_it_stands():
    assert errors("PATTERN p SEQ(Txn s1) WHERE s1.x > AND s1.y = 1") == [
        (1, 36, "expected an expression, found 'AND'")
    ]
    assert errors("PATTERN p SEQ(Txn s1) WHERE s1.x >\n  PARTITION BY card") == [
        (2, 3, "expected an expression, found 'PARTITION'")
    ]


def test_every_broken_clause_of_a_pattern_is_reported():
    text = (
        "PATTERN a SEQ(Txn s1, Txn s2)\n"
        "  WHERE s1.x > AND sl.y = 1\n"
        "  PARTITION BY card,\n"
        "  WITHIN 1 hr\n"
        "  EMIT s1.x AS a, s2.x AS a, s3.y\n"
        "PATTERN b SEQ(A a) WITHIN WHERE a.x = 1 EMIT q.x\n"
        "PATTERN c SEQ(A a, B b WHERE a.x = 1\n"
    )
    assert errors(text) == [
        (2, 16, "expected an expression, found 'AND'"),
        (4, 3, "expected a name, found 'WITHIN'"),
        (4, 12, "unknown duration unit 'hr' (did you mean h?); use ms, s, min, h or d"),
        (5, 19, "two EMIT items are named 'a' (the first at line 5, col 8)"),
        (5, 30, "unknown alias 's3' (did you mean s1?)"),
        (6, 27, "expected a number or '-', found 'WHERE'"),
        (6, 46, "unknown alias 'q'"),
        (7, 24, "expected ',' or ')', found 'WHERE'"),
    ]


def test_attribute_names_may_be_keywords():
    (p,) = parse_text("PATTERN p SEQ(Txn s1) WHERE s1.in = 1 AND s1.AND = 2")
    assert "in" in repr(p.where) and "AND" in repr(p.where)


def test_bare_names():
    assert errors("PATTERN p SEQ(Txn s1) WHERE amount > 1") == [
        (1, 29, "'amount' is not an attribute reference: write <alias>.amount")
    ]
    assert errors("PATTERN p SEQ(Txn s1) WHERE s1 > 1") == [
        (1, 29, "alias 's1' needs an attribute here: write s1.<attribute>")
    ]


def test_unknown_function():
    assert errors("PATTERN p SEQ(Txn s1) WHERE cnt(s1) > 1") == [
        (1, 29, "unknown function 'cnt' (did you mean count?)")
    ]


def test_unknown_strategy():
    assert errors("PATTERN p SEQ(Txn s1) USING skip_till_next") == [
        (
            1,
            29,
            "unknown strategy 'skip_till_next' (did you mean skip_till_next_match?); use "
            "skip_till_any_match, skip_till_next_match or strict_contiguity",
        )
    ]


# ------------------------------------------------------ section 7.3: Kleene plus

_AGG_EMIT = ("'b' is repeated: 'b.x' has one value per event; EMIT an aggregate instead: first(b.x) or "
             "last(b.x) (the value in the first or last event), count(b.x), sum(b.x), avg(b.x), min(b.x) "
             "or max(b.x)")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PATTERN p SEQ(A a, B+ b)", [(1, 20, "a trailing Kleene element needs WITHIN (its gap ends at the window's edge)")]),
        ("PATTERN p SEQ(B{2,} b, A a)", [(1, 15, "a leading Kleene element needs WITHIN (its gap ends at the window's edge)")]),
        ("PATTERN p AND(A a, B+ b) WITHIN 1", [(1, 20, "a Kleene element (repetition) is only allowed inside SEQ in this version")]),
        ("PATTERN p SEQ(A a, SEQ(B b, C+ c, D d), E e)",
         [(1, 29, "a Kleene element may only stand in the outermost SEQ (a nested structure holds positive elements only)")]),
        ("PATTERN p SEQ(A a, B+ b, C c) EMIT b.x", [(1, 36, _AGG_EMIT)]),
        ("PATTERN p SEQ(A a, B+ b, C c) EMIT a.x + b.x AS s", [(1, 42, _AGG_EMIT)]),
        ("PATTERN p SEQ(A a, B+ b, C c) EMIT b.*",
         [(1, 36, "'b' is repeated: it binds a list of events, so 'b.*' has no single value; EMIT aggregates "
                  "of it, e.g. count(b), last(b.<attribute>)")]),
        ("PATTERN p SEQ(A a, B+ b, C c) EMIT count(a)",
         [(1, 36, "count() aggregates a repeated alias (Type+ x), but 'a' binds one event: use a.<attribute> directly")]),
        ("PATTERN p SEQ(A a, B+ b, C c) WHERE sum(a.x) > 1",
         [(1, 37, "sum() aggregates a repeated alias (Type+ x), but 'a' binds one event: use a.x directly")]),
        ("PATTERN p SEQ(A a, B+ b, C c) EMIT sum(b)", [(1, 40, "sum() needs an attribute: write sum(b.<attribute>)")]),
        ("PATTERN p SEQ(A a, B+ b, C c) EMIT sum(b.x + 1)",
         [(1, 40, "the argument of sum() is an attribute of a repeated alias: write sum(x.attribute)")]),
        ("PATTERN p SEQ(A a, B+ b, C c) WHERE count(b, a) > 1", [(1, 37, "count() takes one argument")]),
        ("PATTERN p SEQ(A a, B+ b, C c) WHERE total(b.x) > 1",
         [(1, 37, "unknown function 'total'")]),
        ("PATTERN p SEQ(A a, NOT B b, C c) EMIT count(b)",
         [(1, 45, "'b' is a NOT alias: it binds no event, so it has no aggregate")]),
        ("PATTERN p SEQ(A a, B+ b, C c) WHERE b.x > avg(b.x)",
         [(1, 37, "this condition both selects the events of 'b' (b.x) and uses an aggregate of it; split it "
                  "into conditions joined by AND (one per event, one on the aggregate)")]),
        ("PATTERN p SEQ(A a, B+ b, C+ c, D d) WHERE count(b) > count(c)",
         [(1, 43, "a condition may mention at most one NOT or repeated alias, this one mentions 'b' and 'c'; "
                  "split it into conditions joined by AND")]),
        ("PATTERN p SEQ(A a, B{0} b, C c)",
         [(1, 20, "'B{0...}' allows no event: a Kleene element needs at least one (write NOT B b for none)")]),
        ("PATTERN p SEQ(A a, B{3,2} b, C c)", [(1, 20, "'B{3,2}': the upper bound is below the lower bound")]),
        ("PATTERN p SEQ(A a, B{1.5} b, C c)", [(1, 20, "a repetition count must be a whole number, got 1.5")]),
        ("PATTERN p SEQ(B+ b)", [(1, 11, "SEQ needs a positive element (one that is neither NOT nor repeated)")]),
        ("PATTERN p SEQ(A a, B+ b, C c) USING strict_contiguity",
         [(1, 31, "USING strict_contiguity cannot be combined with a NOT or Kleene element (at line 1, col 20) "
                  "in this version")]),
    ],
)
def test_kleene_misuse_is_a_located_error(text, expected):
    assert errors(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "PATTERN p SEQ(A a, B+ b, C c)",
        "PATTERN p SEQ(B{3,} b, A a) WHERE b.ok = false AND count(b) < 10 WITHIN 10 min EMIT count(b), first(b.ts)",
        "PATTERN p SEQ(A a, B{2,5} b, C c) WHERE b.x < c.x AND sum(b.x) > a.x EMIT avg(b.x) * 2 AS d, max(b.y)",
        "PATTERN p SEQ(A a, B{2} b, NOT X x, C c) WHERE (b.x = 1 OR b.y = 2) EMIT last(b.x), count(b.x)",
        "PATTERN p SEQ(A a, B+ b, C c) USING skip_till_next_match",
    ],
)
def test_kleene_constructs_are_accepted(text):
    parse_text(text)


# ------------------------------------------------- section 7: NOT, USING, nesting


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PATTERN p SEQ(NOT A a, B b)", [(1, 15, "a leading NOT needs WITHIN (its gap ends at the window's edge)")]),
        ("PATTERN p SEQ(A a, NOT B b)", [(1, 20, "a trailing NOT needs WITHIN (its gap ends at the window's edge)")]),
        ("PATTERN p SEQ(A a, NOT B b, NOT C c)",
         [(1, 20, "a trailing NOT needs WITHIN (its gap ends at the window's edge)"),
          (1, 29, "a trailing NOT needs WITHIN (its gap ends at the window's edge)")]),
        ("PATTERN p AND(A a, NOT B b)", [(1, 20, "NOT is only allowed inside SEQ")]),
        ("PATTERN p SEQ(A a, SEQ(B b, NOT C c), D d)",
         [(1, 29, "NOT may only stand in the outermost SEQ (a nested structure holds positive elements only)")]),
        ("PATTERN p SEQ(NOT A a, NOT B b) WITHIN 1",
         [(1, 11, "SEQ needs a positive element (one that is neither NOT nor repeated)")]),
        ("PATTERN p SEQ(A a, NOT B b, NOT C c, D d) WHERE b.x = c.x",
         [(1, 49, "a condition may mention at most one NOT or repeated alias, this one mentions 'b' and 'c'; "
                  "split it into conditions joined by AND")]),
        ("PATTERN p SEQ(A a, NOT B b, D d) EMIT b.x", [(1, 39, "'b' is a NOT alias: it binds no event, so EMIT cannot use it")]),
        ("PATTERN p SEQ(A a, NOT B b, D d) EMIT b.*", [(1, 39, "'b' is a NOT alias: it binds no event, so EMIT cannot use it")]),
        ("PATTERN p SEQ(A a, NOT B b, D d) EMIT a.x + b.x AS s",
         [(1, 45, "'b' is a NOT alias: it binds no event, so EMIT cannot use it")]),
        ("PATTERN p SEQ(A a, NOT B b, C c) USING strict_contiguity",
         [(1, 34, "USING strict_contiguity cannot be combined with a NOT or Kleene element (at line 1, col 20) "
                  "in this version")]),
        ("PATTERN p SEQ(A a, AND(B b, C c)) USING skip_till_next_match",
         [(1, 35, "USING skip_till_next_match applies to a flat SEQ; this pattern nests structures")]),
        ("PATTERN p AND(A a, B b) USING strict_contiguity",
         [(1, 25, "USING strict_contiguity applies to SEQ (an AND has no order to select by)")]),
        ("PATTERN p SEQ(A a, AND(B b, B c))",
         [(1, 29, "type 'B' appears twice in AND (first at line 1, col 24); the types in one AND must be pairwise different")]),
    ],
)
def test_section7_misuse_is_a_located_error(text, expected):
    assert errors(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "PATTERN p SEQ(A a, NOT B b, C c)",
        "PATTERN p SEQ(NOT A a, NOT X x, B b) WITHIN 1 h",
        "PATTERN p SEQ(A a, NOT B b, NOT C c, D d) WHERE b.x = a.x AND (c.x = d.x OR c.y = 1)",
        "PATTERN p SEQ(A a, B b) USING skip_till_next_match",
        "PATTERN p SEQ(A a, NOT X x, B b) USING skip_till_next_match",
        "PATTERN p SEQ(A a, B b) USING strict_contiguity",
        "PATTERN p AND(A a, B b) USING skip_till_any_match",
        "PATTERN p SEQ(A a, AND(B b, SEQ(C c, D d)), NOT X x, E e) WITHIN 5",
    ],
)
def test_section7_constructs_are_accepted(text):
    parse_text(text)


def test_diagnostic_format_has_file_line_col_and_caret():
    with pytest.raises(PatternError) as info:
        parse_text(HEAD + "  WHERE sl.amount > 1\n", "x/card.pattern")
    assert str(info.value) == (
        "x/card.pattern:3:9: unknown alias 'sl' (did you mean s1?)\n"
        "      WHERE sl.amount > 1\n"
        "            ^"
    )


def test_too_deep_nesting_is_an_error_not_a_crash():
    deep = "(" * 300 + "s1.a" + ")" * 300
    (err,) = errors(f"PATTERN p SEQ(Txn s1) WHERE {deep} > 1")
    assert err[2] == "nested too deeply (more than 200 levels)"
    chain = " AND ".join(["s1.a > 1"] * 400)
    (err,) = errors(f"PATTERN p SEQ(Txn s1) WHERE {chain}")
    assert err[2] == "nested too deeply (more than 200 levels)"
