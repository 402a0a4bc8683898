"""The compiler's memoized parts give the query a fresh build gives (issue 12).

``cep check`` of 10,000 patterns spent a fifth of compiling on building the same
order and window conditions, identity variables and match parameters again and
again; the compiler now memoizes them by alias names and window
(``compiler._flat_order``, ``_identity_variable``, ``_params``), and the query's
variables by the references that make them (``_query_variables``).  These tests hold a
compile with warm memos to what a compile with empty ones builds, on random
patterns, and check that ``3600`` and ``3600.0`` (equal, printed differently) stay
apart.
"""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import and_within_patterns, gap_patterns, kleene_patterns, patterns

from cep.lang import compiler
from cep.lang.parser import parse_text

MEMOS = (compiler._flat_order, compiler._identity_variable, compiler._params, compiler._query_variables)


def query(cp):
    """Every part of a compiled pattern the planner, the runtime and the printers read."""
    return (
        [(a.alias, a.type, a.position, a.vars, a.attrs, a.filter_text, a.filter_expr) for a in cp.atoms],
        [(v.name, v.refs) for v in cp.variables.values()],
        [(p.id, p.vars, p.text, p.origin, p.expr, p.linear) for p in cp.predicates],
        cp.within, cp.partition_vars, cp.order,
        None if cp.emit is None else [(e.name, e.star, e.text, e.attr, e.slot) for e in cp.emit],
        [(g.alias, g.types, g.origin, g.after, g.before, g.key_attrs, g.key_sources, g.filter_text,
          g.residual_text, g.aggregates) for g in cp.gaps],
        cp.aggregates,
    )


def compiled_fresh(p, generate):
    for memo in MEMOS:
        memo.cache_clear()
    return compiled(p, generate)


def compiled(p, generate):
    if generate:
        return compiler.compile_pattern(p)
    with compiler.without_code():
        return compiler.compile_pattern(p)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(patterns(), and_within_patterns(), gap_patterns(), kleene_patterns()), st.booleans())
def test_warm_memos_give_the_query_a_fresh_build_gives(text, generate):
    (p,) = parse_text(text)
    fresh = query(compiled_fresh(p, generate))
    compiled(p, generate)  # (the memos warm)
    assert query(compiled(p, generate)) == fresh


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(patterns(), and_within_patterns(), gap_patterns(), kleene_patterns()), min_size=2,
                max_size=8), st.booleans())
def test_memos_warmed_by_other_patterns_give_each_the_query_a_fresh_build_gives(texts, generate):
    # (the strategies reuse alias and attribute names: one pattern's memo entries meet another's)
    ps = [parse_text(t)[0] for t in texts]
    fresh = [query(compiled_fresh(p, generate)) for p in ps]
    for memo in MEMOS:
        memo.cache_clear()
    assert [query(compiled(p, generate)) for p in ps] == fresh
    assert [query(compiled(p, generate)) for p in reversed(ps)] == fresh[::-1]


def test_an_integer_and_a_float_window_stay_apart():
    texts = ["PATTERN p\n  SEQ(A a, B b, C c)\n  WITHIN 3600\n", "PATTERN p\n  SEQ(A a, B b, C c)\n  WITHIN 3600.0\n"]
    a, b = (compiled(parse_text(t)[0], False) for t in texts)
    assert [p.text for p in a.predicates if p.origin != "seq"] == ["b.ts - a.ts <= 3600", "c.ts - b.ts <= 3600",
                                                                   "c.ts - a.ts <= 3600"]
    assert [p.text for p in b.predicates if p.origin != "seq"] == ["b.ts - a.ts <= 3600.0", "c.ts - b.ts <= 3600.0",
                                                                   "c.ts - a.ts <= 3600.0"]
