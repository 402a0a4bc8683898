"""``Engine.empty_at()``: the watermark above which an engine holds no event (issue 11, idle Spark key groups).

Spark drops an idle key group's state on an event-time timeout set to ``empty_at()``; a bound too early would drop
events a later match needs (checked here: above it nothing is retained, so nothing is lost), one too late keeps
state for nothing (checked: at exactly ``empty_at()`` an event is still retained, for integer times). Random v1,
gap and Kleene patterns over random streams (tests/strategies.py), own watermark, state saved and reloaded.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Case, cases, gap_cases, kleene_cases
from test_engine_properties import PROFILE, run_engine

from cep.runtime.engine import Engine


def check_empty_at(case: Case) -> None:
    eng, cps, _outs, _late = run_engine(case)
    at = eng.empty_at()
    if at is None:
        assert eng.retained_events == 0
        return
    assert eng.retained_events > 0
    assert Engine.loads(eng.dumps(), cps).empty_at() == at  # a function of the saved state alone
    if eng.watermark is not None:
        assert at >= eng.watermark  # what the watermark already passed has been dropped
    unwindowed = any(cp.within is None for cp in cps)
    if at == math.inf:
        assert unwindowed
        return
    above = Engine.loads(eng.dumps(), cps)
    above.advance_watermark(at + 1)
    assert above.retained_events == 0
    assert above.empty_at() is None
    if all(type(e.ts) is int for e in eng.events.values()) and all(
            type(cp.within) is int for cp in cps if cp.within is not None):
        exact = Engine.loads(eng.dumps(), cps)
        exact.advance_watermark(at)
        assert exact.retained_events > 0  # not later than needed


@settings(settings.get_profile(PROFILE), max_examples=150)
@given(st.one_of(cases(), gap_cases(), gap_cases(trailing_not=True), kleene_cases()))
def test_above_empty_at_nothing_is_retained_and_at_it_something_is(case):
    check_empty_at(case)


def test_empty_at_follows_the_window_of_the_last_event():
    from cep.event import Event
    from cep.lang.compiler import compile_text

    cps = compile_text("PATTERN p SEQ(A a, B b) PARTITION BY k WITHIN 10\n")
    eng = Engine(cps, lateness=2)
    assert eng.empty_at() is None
    eng.push(Event("A", 100, {"type": "A", "ts": 100, "k": 1}, "1"))
    eng.push(Event("A", 104, {"type": "A", "ts": 104, "k": 2}, "2"))
    assert eng.empty_at() == 114
    eng.advance_watermark(114)
    assert eng.retained_events == 1
    eng.advance_watermark(114.5)
    assert eng.retained_events == 0 and eng.empty_at() is None
