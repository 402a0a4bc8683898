"""Property tests of the expiry fan-out's in-place walk of the parent group (issue 15,
``PatternRuntime._flat_walk_source``).

Why separate from ``test_expiry_properties``: the walk runs where a non-guard leaf expires and
the parent's group holds several entries of one key (card testing's ``s1``: each expiry lowers
the ``{card, s2.ts}`` tuple of every later small purchase in the window), and a wrong weight
there rarely shows in the output (enumeration skips a stale parent tuple whose leaves are gone).
So besides the outputs against the reference evaluator, the engine's indexes after every record
must equal the indexes an engine rebuilds from the same retained events (``Engine.loads``
re-inserts them): every group, entry and weight.  The streams are dense in few keys (groups of
many entries), in order with some disorder within the lateness, with equal times, duplicates
and retractions.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Case, _record_key
from test_engine_properties import PROFILE, check_case, to_event

from cep import codegen
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine
from cep.runtime.sumlist import SumSortedMap

PATTERNS = [
    # card testing's shape: three atoms of one type, the first two under one filter
    "PATTERN ct\n  SEQ(T s1, T s2, T big)\n  WHERE s1.x < 5 AND s2.x < 5 AND big.x > 6\n"
    "  PARTITION BY k\n  WITHIN {w}\n",
    # no filters: every event is in all three atoms
    "PATTERN all3\n  SEQ(T a, T b, T c)\n  PARTITION BY k\n  WITHIN {w}\n",
    # two types, the middle one the other
    "PATTERN two\n  SEQ(T a, U b, T c)\n  WHERE a.x < 5\n  PARTITION BY k\n  WITHIN {w}\n",
    # four atoms: two leaves whose expiry walks
    "PATTERN four\n  SEQ(T a, T b, T c, T d)\n  PARTITION BY k\n  WITHIN {w}\n",
]


def _group_entries(g) -> list:
    if type(g) is tuple:
        return [repr(g)]
    if type(g) is SumSortedMap:
        return sorted(repr(e) for e in g.entries())
    return sorted(repr(e) for e in g.items())


def index_state(eng: Engine) -> list:
    """Every stored group of every node of every pattern, and the kept T-reduct counts, as plain
    sorted data (entries of equal sort keys in any order)."""
    out = []
    for rt in eng.runtimes:
        for n in rt.nodes:
            for idx in n.stores:
                out.append(sorted((repr(k), _group_entries(g)) for k, g in idx.groups.items()))
        out.append([sorted(repr(x) for x in rho.items()) if rho is not None else None for rho in rt.rho])
    return out


@st.composite
def dense_cases(draw) -> Case:
    w = draw(st.sampled_from([2, 3, 5, 8]))
    text = draw(st.sampled_from(PATTERNS)).format(w=w)
    lateness = draw(st.sampled_from([0, 0, 1]))
    records: list[dict] = []
    present: list[dict] = []
    now = 0
    max_ts = None
    for _ in range(draw(st.integers(5, 60))):
        action = draw(st.sampled_from(["ev", "ev", "ev", "ev", "tick", "retract", "dup"]))
        wm = None if max_ts is None else max_ts - lateness
        if action == "tick":
            now += draw(st.sampled_from([1, 1, 2, w]))
            continue
        if action == "retract" or (action == "dup" and present):
            on_time = [r for r in present if wm is None or r["ts"] >= wm]
            if not on_time:
                continue
            rec = on_time[draw(st.integers(0, len(on_time) - 1))]
            if action == "retract":
                records.append({**rec, "op": "-"})
                key = _record_key(rec)
                present.remove(next(r for r in present if _record_key(r) == key))
                continue
            rec = dict(rec)
        else:
            rec = {"type": draw(st.sampled_from(["T", "T", "U"])), "ts": max(0, now - draw(st.integers(0, lateness))),
                   "k": draw(st.sampled_from(["a", "a", "b"])), "x": draw(st.sampled_from([0, 1, 4, 7, 9]))}
        if wm is not None and rec["ts"] < wm:
            continue
        records.append(rec)
        present.append(dict(rec))
        max_ts = rec["ts"] if max_ts is None else max(max_ts, rec["ts"])
    return Case(text, records, lateness)


def check_indexes(case: Case) -> None:
    """After every third record and the last, the live engine's indexes equal those of an engine
    rebuilt from its state."""
    cps = compile_text(case.text)
    eng = Engine(cps, lateness=case.lateness)
    for i, rec in enumerate(case.records, 1):
        eng.push(to_event(rec, i, "ts"))
        if i % 3 == 0 or i == len(case.records):
            fresh = Engine.loads(eng.dumps(), cps)
            assert index_state(eng) == index_state(fresh), f"indexes differ from a rebuild after record {i}"


@settings(settings.get_profile(PROFILE), max_examples=max(20, settings.get_profile(PROFILE).max_examples // 2))
@given(dense_cases())
def test_expiry_walk_agrees_with_reference_and_rebuild(case: Case) -> None:
    check_case(case)
    check_indexes(case)


def test_the_walk_is_generated_for_these_patterns() -> None:
    """Each pattern above reaches the walk (else the property test would not test it)."""
    for text in PATTERNS:
        point = codegen.mark()
        Engine(compile_text(text.format(w=3)), lateness=0)
        walks = [f for f, src in codegen.defined_since(point) if "drop leaf" in f and "pks, pit, pw" in src]
        assert walks, f"no expiry path of {text.split()[1]} walks its parent's group"


def test_one_expiry_empties_two_parent_entries() -> None:
    """``two``: the T at 0 is the only ``a`` of the U at 1, 2 and 2 (parent entries {k, b.ts} 1 and
    2); the T at 4 expires it alone (a one-event step: the walk, not the batch path), and both
    entries reach zero in one walk: they go from the group, last first."""
    cps = compile_text(PATTERNS[2].format(w=3))
    eng = Engine(cps, lateness=0)
    for i, (typ, ts, x) in enumerate([("T", 0, 0), ("U", 1, 0), ("U", 2, 0), ("U", 2, 1), ("T", 4, 0), ("T", 5, 0)], 1):
        eng.push(to_event({"type": typ, "ts": ts, "k": "a", "x": x}, i, "ts"))
        assert index_state(eng) == index_state(Engine.loads(eng.dumps(), cps)), f"after record {i}"


def test_one_expiry_under_one_big_purchase_lowers_the_parent_tuple_once() -> None:
    """``ct``: small purchases at 0, 1, 2 and one big at 3 (the only tuple of its group); the
    expiry of the one at 0 walks the parent entries {k, s2.ts} of 1 and 2 and lowers the parent
    tuple {k, big.ts} by their changes' sum in one step (``_one_sibling_walk``: the big purchase's
    group is looked up once, not per entry).  Indexes against a rebuild after every record, outputs
    against the reference."""
    cps = compile_text(PATTERNS[0].format(w=5))
    eng = Engine(cps, lateness=0)
    rows = [(0, 0), (1, 0), (2, 0), (3, 9), (6, 1), (7, 1), (8, 9), (9, 0), (13, 0)]
    records = [{"type": "T", "ts": ts, "k": "a", "x": x} for ts, x in rows]
    for i, rec in enumerate(records, 1):
        eng.push(to_event(rec, i, "ts"))
        assert index_state(eng) == index_state(Engine.loads(eng.dumps(), cps)), f"after record {i}"
    check_case(Case(PATTERNS[0].format(w=5), records, 0))


def test_the_walk_under_one_big_purchase_skips_a_small_one_at_its_time() -> None:
    """``ct``: small purchases at 0, 1 and 3 and a big one at 3: the expiry of the one at 0 walks
    the small ones at 1 and 3, and only the one at 1 is before the big purchase (``s2.ts < big.ts``
    is strict: a walk counting the one at 3 lowers the parent tuple twice).  Indexes against a
    rebuild after every record, outputs against the reference."""
    cps = compile_text(PATTERNS[0].format(w=5))
    eng = Engine(cps, lateness=0)
    records = [{"type": "T", "ts": ts, "k": "a", "x": x} for ts, x in [(0, 0), (1, 0), (3, 0), (3, 9), (6, 1), (9, 1)]]
    for i, rec in enumerate(records, 1):
        eng.push(to_event(rec, i, "ts"))
        assert index_state(eng) == index_state(Engine.loads(eng.dumps(), cps)), f"after record {i}"
    check_case(Case(PATTERNS[0].format(w=5), records, 0))
