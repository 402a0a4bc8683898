"""The batch update path's sort-merge (``PatternRuntime._merge_source``) against the reference.

Why its own tests: the generated batch path sort-merges a delta only from ``MERGE_MIN`` changes
on, and the property tests' streams are small, so they mostly take the per-change probes.  Here
the threshold is 1, so every batch that can merge does (window expiry of several events, every
fan-out of two or more sibling tuples), and the engine must still agree with the reference:
its outputs and its current matches, counted from the root's multiplicities.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from strategies import Case, cases
from test_engine_properties import PROFILE, check_case
from test_expiry_properties import expiry_cases

from cep import codegen
from cep.runtime import iedyn


@pytest.fixture(autouse=True)
def merge_every_batch(monkeypatch):
    monkeypatch.setattr(iedyn, "MERGE_MIN", 1)


def test_the_threshold_reaches_the_generated_code():
    """The sort-merge is in the generated batch path of a keyed SEQ with a window."""
    from cep.lang.compiler import compile_text
    from cep.plan.physical import physical_plan
    from cep.plan.planner import plan_pattern

    cp = compile_text("PATTERN p SEQ(A a, B b, C c) PARTITION BY s WITHIN 5\n")[0]
    rt = iedyn.PatternRuntime(physical_plan(plan_pattern(cp)))
    assert any("runs" in codegen.code_of(f).co_varnames for f in rt._batches.values())


@settings(settings.get_profile(PROFILE))
@given(expiry_cases())
def test_merged_batches_of_expiry_agree_with_reference(case: Case) -> None:
    check_case(case)


@settings(settings.get_profile(PROFILE))
@given(cases())
def test_merged_fan_outs_agree_with_reference(case: Case) -> None:
    check_case(case)
