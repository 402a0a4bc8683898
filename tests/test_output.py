"""The output side: the fused enumerate-and-build functions (cep.runtime.output) against the
single-match path, match ids, the match builder, and the run loop's GC policy.

The fused function of an atom builds the composite events of an insert inside the enumeration's
loops; the single-match path (``Engine._output``: ``events_of``, the match builder, the id and key
functions) builds each match alone.  Both must give the same Outputs in the same order, for every
kind of EMIT item (bare attributes, ``alias.*``, expressions, none), null join values, partition
keys, residual filters and retractions; the property tests compare the engine with the reference.
"""

from __future__ import annotations

import gc
import linecache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import cases
from test_engine_properties import to_event

import cep.runtime.handler as handler_module
from cep.errors import LateEventError
from cep.event import Event, Output, match_id, match_id_fn
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine
from cep.runtime.output import match_builder, new_matches_fn


def _run(case, engine: Engine) -> list:
    outs: list = []
    for i, rec in enumerate(case.records, 1):
        try:
            outs += engine.push(to_event(rec, i, case.time_field))
        except LateEventError:
            outs.append("late")
    return outs


def _single_match_engine(text: str, case) -> Engine:
    """An engine whose handlers build every match alone (no fused function)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(handler_module, "new_matches_fn", lambda *a: None)
        return Engine(compile_text(text, time_unit=case.time_unit), lateness=case.lateness)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_fused_outputs_equal_the_single_match_path(case):
    fused = Engine(compile_text(case.text, time_unit=case.time_unit), lateness=case.lateness)
    single = _single_match_engine(case.text, case)
    got, want = _run(case, fused), _run(case, single)
    assert got == want  # same Outputs (pattern, op, id, match, key), same order
    assert all(type(o) is Output for o in got if o != "late")
    assert fused.matches_emitted == single.matches_emitted
    assert fused.stats == single.stats


TEXT = """PATTERN q
  SEQ(A a, B b, C c)
  WHERE a.x = b.x AND b.x = c.x AND a.v < c.v
  PARTITION BY x
  EMIT a.v AS av, b.*, c.v + 1 AS cv1, c.s AS s
"""


def test_fused_function_reads_each_event_where_its_loop_binds_it():
    """The inserted event's reads come before any loop; the others' inside their own loop."""
    (cp,) = compile_text(TEXT)
    eng = Engine([cp])
    rt = eng.runtimes[0]
    f = new_matches_fn(cp, rt, eng.events, [0], 2)
    assert f is not None
    src = "".join(linecache.getlines(f.__code__.co_filename))
    head = src.split("roots, D = split(chain)")[0]
    assert "e2 = e" in head and "fd2.get('v')" not in head  # c.v only inside the expression item
    assert "fd2.get('s')" in head and "E[" not in head
    assert src.count("E[") == 2  # a and b, each once, in the loop binding it


def test_outputs_of_every_emit_kind_and_null_keys():
    (cp,) = compile_text(TEXT)
    eng = Engine([cp])
    ev = [Event("A", 1, {"x": 1, "v": 5}, "1"), Event("B", 2, {"x": 1, "v": 0, "n": None}, "2"),
          Event("A", 3, {"x": None, "v": 1}, "3"), Event("C", 4, {"x": 1, "v": 9, "s": "z"}, "4"),
          Event("C", 5, {"x": 1, "v": 2}, "5")]
    outs = [o for e in ev for o in eng.push(e)]
    assert outs == [Output("q", "+", match_id("q", ("1", "2", "4")),
                           {"av": 5, "b.x": 1, "b.v": 0, "b.n": None, "cv1": 10, "s": "z"}, (1,))]


@given(st.lists(st.text(min_size=0, max_size=6), min_size=1, max_size=4), st.text(min_size=1, max_size=5))
def test_generated_ids_are_match_id(positions, name):
    events = [Event("A", 0, {}, p) for p in positions]
    assert match_id_fn(name, len(events))(events) == match_id(name, tuple(positions))
    assert match_id_fn(name, len(events) + 1)(events) == match_id(name, tuple(positions))  # the general path


def test_match_builder_without_emit_maps_aliases_to_fields():
    (cp,) = compile_text("PATTERN p\n  SEQ(A a, B b)\n")
    fa, fb = {"v": 1}, {"w": 2}
    got = match_builder(cp)([Event("A", 1, fa, "1"), Event("B", 2, fb, "2")])
    assert got == {"a": fa, "b": fb} and got["a"] is fa


def test_run_loop_gc_policy_freezes_and_restores():
    from cep.commands.heap import stream_gc

    before = gc.get_threshold()
    with stream_gc():
        assert gc.get_threshold()[0] > before[0]
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("flag", [False, True])
def test_run_loop_output_is_the_same_with_and_without_the_gc_policy(tmp_path, flag, monkeypatch):
    """`cep run` in-process writes the same bytes whether the GC policy applies or not."""
    from click.testing import CliRunner

    from cep.cli import cli

    if not flag:
        import contextlib

        import cep.commands.run as run_module

        monkeypatch.setattr(run_module, "stream_gc", contextlib.nullcontext)
    pat = tmp_path / "p.pattern"
    pat.write_text("PATTERN p\n  AND(A a, B b)\n  WHERE a.v < b.v\n  EMIT a.v AS av, b.v AS bv\n")
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(f'{{"type":"{"AB"[i % 2]}","ts":{i},"v":{(i * 7) % 13}}}\n' for i in range(300)))
    out = tmp_path / f"out{flag}.jsonl"
    r = CliRunner().invoke(cli, ["run", str(pat), "-i", str(inp), "-o", str(out)])
    assert r.exit_code == 0, r.output
    lines = out.read_bytes().splitlines()
    eng = Engine(compile_text(pat.read_text()))
    want = [o for i, line in enumerate(inp.read_text().splitlines(), 1)
            for o in eng.push(_event(line, i))]
    from cep.io.writers import encode_output

    assert lines == [encode_output(o).rstrip(b"\n") for o in want]


def _event(line: str, i: int) -> Event:
    import json

    rec = json.loads(line)
    return Event(rec["type"], rec["ts"], rec, str(i))


def test_encode_outputs_is_encode_output_of_each():
    from cep.io.writers import encode_output, encode_outputs

    outs = [Output("p", "+", "ab", {"n": 3, "s": "x\u00e9\"", "l": [1, {"k": None}], "f": 0.5}),
            Output("p", "-", "cd", {"b": True}, (1,))]
    def joined(xs):
        return b"".join(encode_outputs(xs))

    assert joined(outs) == b"".join(encode_output(o) for o in outs)
    big = outs + [Output("p", "+", "ef", {"n": 10**30})]  # beyond 64 bits: every line still exact
    assert joined(big) == b"".join(encode_output(o) for o in big)
    assert joined(big).endswith(b'{"pattern":"p","op":"+","id":"ef","match":{"n":1000000000000000000000000000000}}\n')
    assert encode_outputs([]) == []
    many = [Output("p", "+", f"{i:016x}", {"i": i}) for i in range(2500)]  # three chunks
    assert len(encode_outputs(many)) == 3 and joined(many) == b"".join(encode_output(o) for o in many)
