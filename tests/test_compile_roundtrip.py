"""compile -> print -> compile gives the same query (issue 2).

Pattern texts come from the grammar-shaped strategy of ``tests/strategies.py``;
the compiled GCQ of a text and of its canonical print must agree on every
part the planner and the runtime read.
"""

from hypothesis import HealthCheck, given, settings
from strategies import patterns

from cep.lang.compiler import compile_pattern
from cep.lang.parser import parse_text
from cep.lang.printer import format_pattern


def summary(cp):
    return (
        cp.name,
        cp.op,
        [(a.alias, a.type, a.vars, a.attrs, a.filter_text) for a in cp.atoms],
        sorted((v.name, v.refs) for v in cp.variables.values()),
        [(p.vars, p.text, p.origin, p.linear) for p in cp.predicates],
        cp.within,
        cp.partition_vars,
        None if cp.emit is None else [(e.name, e.star) for e in cp.emit],
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns())
def test_compile_print_compile_is_the_same_query(text):
    (p,) = parse_text(text)
    printed = format_pattern(p)
    (p2,) = parse_text(printed)
    assert summary(compile_pattern(p)) == summary(compile_pattern(p2))


def test_item_text_with_double_quotes_and_a_keyword_survives_printing():
    # found by hypothesis: the text ``a.sIN("w")`` cannot be re-spaced (``sIN`` is one word), and the
    # canonical form quotes with ' -- the printer keeps the user's quotes in the canonical form
    text = 'PATTERN p\n  AND(A a, B b)\n  EMIT a.x, a.s IN ("w")\n'
    (p,) = parse_text(text)
    (p2,) = parse_text(format_pattern(p))
    assert [i.text for i in p2.emit] == [i.text for i in p.emit] == ["a.x", 'a.sIN("w")']
    assert summary(compile_pattern(p)) == summary(compile_pattern(p2))
