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
