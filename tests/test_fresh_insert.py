"""The insert form of a leaf's update path (``PatternRuntime.insert_path``, ``NodeIndex.update_source``'s
``fresh``): the batch loop's new leaf tuples (their serial is new) enter their leaf's storage with no
presence or sign tests, and a flat map appends an entry whose key equals the last one; inlined in the
batch loop where the leaf stores one sorted index (``insert_inline``, ``NodeIndex.fresh_source``).

Why a test of its own: the reference comparison sees outputs, and the expiry tests compare indexes
sorted (entries of equal keys in any order).  Here the engine with the insert form and the same engine
with every insert through the general path (``_prop_of_atom[a](t, 1)``) must hold the same groups in
the same layout (triple, flat map, blocked), entry for entry in the same order, after every batch.
A mutant that puts a new entry before an equal key (``sk <= g[0]`` in the pair) or appends out of
order fails it.
"""

from __future__ import annotations

from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Case
from test_engine_properties import PROFILE, check_case, to_event
from test_expiry_walk import PATTERNS, dense_cases

from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine
from cep.runtime.iedyn import PatternRuntime
from cep.runtime.sumlist import SumSortedMap


def _layout(g) -> object:
    if type(g) is SumSortedMap:
        if g._blocks is None:
            return ("flat", list(g._keys), list(g._items), list(g._weights))
        return ("blocked", [repr(e) for e in g.entries()])
    return ("plain", repr(g))


def exact_state(eng: Engine) -> list:
    """Every stored group of every node, in its layout and order, and the T-reduct counts."""
    out = []
    for rt in eng.runtimes:
        for n in rt.nodes:
            for idx in n.stores:
                out.append([(repr(k), _layout(g)) for k, g in idx.groups.items()])
        out.append([sorted(repr(x) for x in rho.items()) if rho is not None else None for rho in rt.rho])
    return out


def _general_engine(cps, lateness: int) -> Engine:
    """The engine whose batch loop inserts through the general update path only."""
    with mock.patch.object(PatternRuntime, "insert_path", lambda self, atom: None):
        return Engine(cps, lateness=lateness)


def _batches(case: Case, size: int):
    events = [to_event(rec, i, "ts") for i, rec in enumerate(case.records, 1)]
    return [events[i:i + size] for i in range(0, len(events), size)]


def check_same_as_general(case: Case, size: int) -> None:
    cps = compile_text(case.text)
    eng, gen = Engine(cps, lateness=case.lateness), _general_engine(cps, case.lateness)
    for batch in _batches(case, size):
        assert eng.push_batch(batch) == gen.push_batch(batch)
        assert exact_state(eng) == exact_state(gen)


@settings(settings.get_profile(PROFILE), max_examples=max(20, settings.get_profile(PROFILE).max_examples // 2))
@given(dense_cases(), st.sampled_from([1, 3, 64]))
def test_the_insert_form_keeps_the_groups_of_the_general_path(case: Case, size: int) -> None:
    check_case(case)
    check_same_as_general(case, size)


def test_card_testings_s2_inserts_by_its_insert_form_and_s1_and_big_do_not() -> None:
    (cp,) = cps = compile_text(PATTERNS[0].format(w=3))
    eng = Engine(cps, lateness=0)
    rt = eng.runtimes[0]
    s1, s2, big = (cp.atoms.index(a) for a in cp.atoms)
    assert rt.insert_path(s2) is not None
    assert rt.insert_path(s1) is None  # stores nothing of its own (reads s2's storage)
    assert rt.insert_path(big) is None  # gates n3: its wrapper builds the gated group
    assert f"insert into leaf {rt._leaf_of_atom[s2]}" in rt._inserts[rt._leaf_of_atom[s2]].__code__.co_filename
    # the batch loop runs the leaf's index update inline and the rest of the path past the gate
    assert "after its insert" in rt._rests[rt._leaf_of_atom[s2]].__code__.co_filename


def test_many_small_purchases_at_equal_times_grow_a_group_past_the_flat_layout() -> None:
    """One key, more entries than a flat map holds (the append branch's length bound, then
    ``incr``'s blocked layout), times repeating and a few late ones, the gate open: groups and
    outputs as the general path's."""
    text = PATTERNS[0].format(w=1000)
    records = []
    for i in range(700):
        ts = i // 3 - (1 if i % 97 == 5 else 0)
        # a big purchase first: every later small one passes the gate (no match: it comes first)
        records.append({"type": "T", "ts": max(ts, 0), "k": "a", "x": 9 if i == 0 else 1})
    case = Case(text, records, 1)
    check_same_as_general(case, 1)  # compared after every record: the flat map's last length too
    cps = compile_text(text)
    eng = Engine(cps, lateness=1)
    for batch in _batches(case, 50):
        eng.push_batch(batch)
    groups = [idx.groups for n in eng.runtimes[0].nodes for idx in n.stores]
    assert any(type(g) is SumSortedMap and g._blocks is not None for gs in groups for g in gs.values())


def test_a_leafs_storage_keeps_a_flat_map_down_to_one_entry_and_drops_it_empty() -> None:
    """``NodeIndex.keep_one``: card testing's s2 storage (a leaf's: one entry per event) grows to a
    flat map with a card's second small purchase and stays one when the first expires (the next
    small purchase appends to it: no map made again); the group goes with its last entry.  The
    big purchases' storage (a gating leaf) still turns a map of one into a triple.  Outputs and
    layouts as the general path's after every record."""
    text = PATTERNS[0].format(w=3)
    # x < 5 small, x > 6 big, 6 neither (it moves the watermark only)
    rows = [(0, 1), (1, 1), (2, 9), (4, 9), (4, 1), (6, 1), (8, 6), (10, 6), (11, 1)]
    case = Case(text, [{"type": "T", "ts": ts, "k": "a", "x": x} for ts, x in rows], 0)
    check_same_as_general(case, 1)
    (cp,) = cps = compile_text(text)
    eng = Engine(cps, lateness=0)
    rt = eng.runtimes[0]
    small = rt.nodes[rt._leaf_of_atom[cp.atoms.index(cp.atoms[1])]].stores[0]
    bigs = rt.nodes[rt._leaf_of_atom[cp.atoms.index(cp.atoms[2])]].S
    gated = rt.nodes[next(iter(rt._gated))].stores[0]
    assert small.keep_one and not bigs.keep_one and not gated.keep_one
    layouts = []
    for batch in _batches(case, 1):
        eng.push_batch(batch)
        layouts.append((_layout(small.groups["a"])[0] if "a" in small.groups else None,
                        [_layout(g)[0] for g in bigs.groups.values()]))
    assert layouts == [
        ("plain", []), ("flat", []), ("flat", ["plain"]),
        ("flat", ["flat"]),  # 4: the small purchase at 0 expired, one left: still a flat map
        ("flat", ["flat"]),  # the small one at 4 appended to it
        ("flat", ["plain"]),  # 6: 1 expired, 6 appended; the big one at 2 expired: a triple
        ("flat", []),  # 8: 4 expired (one left), and the last big one
        (None, []),  # 10: 6 expired, the group with it
        ("plain", []),  # 11: a new group, a triple
    ]
