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
        m.setattr(handler_module, "new_matches_fn", lambda *a, **k: None)
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


# ---------------------------------------------------------------------------
# lines mode (Engine(lines=True)): the fused paths' composite events as encoded lines


def _written(text: str, records: list[dict], lines: bool, *, lateness: int = 0, time_field: str = "ts",
             time_unit: str = "s", batches: list[int] | None = None) -> tuple[bytes, list]:
    """What the run loop writes for these records (``encode_outputs`` of every batch's composite
    events, late records and refused retractions marked), and the composite events as returned."""
    from cep.errors import BatchInterrupted
    from cep.io.writers import encode_output, encode_outputs

    eng = Engine(compile_text(text, time_unit=time_unit), lateness=lateness, lines=lines)
    evs = [to_event(rec, i, time_field) for i, rec in enumerate(records, 1)]
    got: list = []
    sizes = iter(batches or [1])
    i = 0
    while i < len(evs):
        n = max(1, next(sizes, 1))
        part = evs[i:i + n]
        try:
            got += eng.push_batch(part)
            i += n
        except BatchInterrupted as bi:
            got += bi.outputs
            got.append(type(bi.__cause__).__name__)
            i += bi.index + 1
    out = []
    for o in got:
        if type(o) is str and not o.startswith("{"):
            out.append(o.encode() + b"\n")
            continue
        try:
            out.append(b"".join(encode_outputs([o])) if lines else encode_output(o))
        except TypeError as e:  # a value no JSON writer takes: the same error both ways
            out.append(f"! {type(e).__name__}\n".encode())
    return b"".join(out), got


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases(), st.lists(st.integers(1, 9), max_size=8))
def test_lines_mode_writes_the_bytes_of_encode_output(case, batches):
    """Random patterns (every EMIT kind, partition keys, windows, two patterns) over random streams
    with retractions and late records, pushed in random batches: the same bytes in the same order."""
    kw = {"lateness": case.lateness, "time_field": case.time_field, "time_unit": case.time_unit, "batches": batches}
    got, outs = _written(case.text, case.records, True, **kw)
    want, _ = _written(case.text, case.records, False, **kw)
    assert got == want


# JSON values of every kind the writers treat apart: integers beyond 64 bits (the stdlib's
# way, for the whole line), floats orjson and the stdlib write differently (1e16, 1e-07),
# -0.0, nan/inf (null), escapes and unicode, nested containers, tuples and sets (default)
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.integers(-2**70, 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.0, 0.0, 1e16, 1e-7, 1.5e300, 0.1, 2**64, -2**64 - 1, "\u2028", "a\"\\\n\t\x00\x7f", "é€😀"]),
    st.text(max_size=6))
_VALUES = st.recursive(_SCALARS, lambda ch: st.one_of(
    st.lists(ch, max_size=3), st.dictionaries(st.text(max_size=3), ch, max_size=3),
    st.tuples(ch, ch), st.frozensets(st.integers(0, 3), max_size=2)), max_leaves=6)


@st.composite
def _value_cases(draw):
    """A join of 1-3 elements whose EMIT items (bare attributes, ``alias.*``, the time, or none)
    read attributes holding any JSON value; join and order conditions only on ``x``."""
    k = draw(st.integers(1, 3))
    aliases = ["a", "b", "c"][:k]
    op = draw(st.sampled_from(["AND", "SEQ"]))
    lines = [f"PATTERN {draw(st.sampled_from(['p', 'p_é']))}",
             f"  {op}({', '.join(f'{t} {a}' for t, a in zip('ABC', aliases, strict=False))})"]
    if k > 1 and draw(st.booleans()):
        lines.append("  WHERE " + " AND ".join(f"{aliases[i]}.x <= {aliases[i + 1]}.x" for i in range(k - 1)))
    if draw(st.booleans()):
        items, names = [], set()
        for _ in range(draw(st.integers(1, 5))):
            a = draw(st.sampled_from(aliases))
            kind = draw(st.sampled_from(["star", "z", "w", "ts", "zas"]))
            if kind == "star":
                item, name = f"{a}.*", f"{a}.*"
            elif kind == "zas":
                name = draw(st.sampled_from(["v", "w2", "x\u00e9"]))
                item = f"{a}.z AS {name}"
            else:
                item = name = f"{a}.{kind}"
            if name in names:
                continue
            names.add(name)
            items.append(item)
        lines.append("  EMIT " + ", ".join(items))
    n = draw(st.integers(1, 9))
    recs = []
    for i in range(n):
        rec = {"type": draw(st.sampled_from("ABC"[:k])), "ts": i, "x": draw(st.integers(0, 2))}
        for attr in ("z", "w"):
            if draw(st.booleans()):
                rec[attr] = draw(_VALUES)
        recs.append(rec)
    return "\n".join(lines) + "\n", recs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_value_cases(), st.lists(st.integers(1, 9), max_size=4))
def test_lines_mode_bytes_for_every_value_type(vc, batches):
    text, recs = vc
    got, outs = _written(text, recs, True, batches=batches)
    want, _ = _written(text, recs, False, batches=batches)
    assert got == want


def test_lines_mode_returns_lines_and_keeps_outputs_where_it_must():
    """A bare-attribute pattern's matches come back as lines; a value orjson cannot write
    (beyond 64 bits), an expression item, and an ``alias.*`` beside an item its keys could
    repeat come back as Outputs (written exactly as before)."""
    recs = [{"type": "A", "ts": 1, "x": 1, "z": 2**70}, {"type": "B", "ts": 2, "x": 1, "z": 1e16},
            {"type": "A", "ts": 3, "x": 1, "z": "é"}, {"type": "B", "ts": 4, "x": 1, "z": -0.0}]
    text = "PATTERN p\n  SEQ(A a, B b)\n  EMIT a.z, b.z AS bz\n"
    got, outs = _written(text, recs, True)
    assert got == _written(text, recs, False)[0]
    assert [type(o).__name__ for o in outs] == ["Output", "Output", "str"]  # a1 (2**70) in the first two
    assert b'"a.z":1180591620717411303424,"bz":1e+16' in got  # the whole line as the stdlib writes it
    for text in ("PATTERN p\n  SEQ(A a, B b)\n  EMIT a.z + 1 AS z1\n", "PATTERN p\n  SEQ(A a, B b)\n  EMIT a.*, a.x\n"):
        got, outs = _written(text, recs[1:], True)
        assert got == _written(text, recs[1:], False)[0]
        assert outs and all(type(o) is Output for o in outs)


def test_lines_mode_caches_each_event_once(monkeypatch):
    """An event bound by an inner loop is encoded once however many matches hold it."""
    text = "PATTERN p\n  AND(A a, B b)\n  WHERE a.x < b.x\n  EMIT a.x AS ax, b.x AS bx\n"
    eng = Engine(compile_text(text), lines=True)
    for i in range(20):
        eng.push(Event("B", i, {"x": 100 + i}, f"b{i}"))
    outs = [o for i in range(20) for o in eng.push(Event("A", 20 + i, {"x": i}, f"a{i}"))]
    assert len(outs) == 400 and all(type(o) is str for o in outs)
    from cep.runtime import output as output_module

    calls = []
    real = output_module._fragment_fn

    def counting(*a):
        f = real(*a)

        def g(e):
            calls.append(e.pos)
            return f(e)
        return g

    monkeypatch.setattr(output_module, "_fragment_fn", counting)
    eng = Engine(compile_text(text), lines=True)
    for i in range(20):
        eng.push(Event("B", i, {"x": 100 + i}, f"b{i}"))
    outs2 = [o for i in range(20) for o in eng.push(Event("A", 20 + i, {"x": i}, f"a{i}"))]
    assert outs2 == outs
    assert sorted(calls) == sorted([f"a{i}" for i in range(20)] + [f"b{i}" for i in range(20)])
