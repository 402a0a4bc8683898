"""The expiry path (``PatternRuntime._drop_of_atom``) and the inline updates of flat groups.

Why its own tests: the expiry path is generated apart from the update path (no path built, the
first fan-out applied while walking the sibling's range, a batch from ``MERGE_MIN`` sibling
tuples on), and the engine's property tests reach its large fan-outs and its out-of-order
deletions rarely.  Here two runtimes of one keyed SEQ take the same inserts (time order with
an occasional late event, equal times, several events per key so that groups grow past one
entry and fan-outs past ``MERGE_MIN``); then the same deletions in any order, through the
expiry path on one and the update path with -1 on the other.  After every deletion both
hold the same indexes and multiplicities, and the matches enumerated from the root are the
brute-force matches of the events still in.
"""

from __future__ import annotations

import itertools
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from cep.event import Event
from cep.lang.compiler import compile_text
from cep.plan.physical import physical_plan
from cep.plan.planner import plan_pattern
from cep.runtime import iedyn
from cep.runtime.sumlist import SumSortedMap

W = 10
PATTERN = f"""PATTERN p SEQ(T s1, T s2, T big)
  WHERE s1.amount < 100 AND s2.amount < 100 AND big.amount > 400
  PARTITION BY card WITHIN {W}
"""


def _runtime(share_leaves: bool = True) -> iedyn.PatternRuntime:
    return iedyn.PatternRuntime(physical_plan(plan_pattern(compile_text(PATTERN)[0]), share_leaves=share_leaves))


def _state(rt: iedyn.PatternRuntime) -> list:
    """Every stored index as plain sorted data, and every kept GMR."""
    out: list = [sorted(r.items()) if r is not None else None for r in rt.rho]
    for n in rt.nodes:
        for idx in n.stores:
            groups = {}
            for k, g in idx.groups.items():
                if type(g) is SumSortedMap:
                    # a flat map of one entry is a triple, but in a leaf's storage (``keep_one``); none is empty
                    assert len(g) >= (1 if idx.keep_one else 2)
                    groups[k] = list(g.entries())
                elif type(g) is tuple:
                    groups[k] = [g]
                else:
                    groups[k] = sorted(g.items())
            out.append(sorted(groups.items()))
    return out


def _brute(events: dict[int, Event]) -> Counter:
    got: Counter = Counter()
    for a, b, c in itertools.permutations(events.items(), 3):
        (sa, ea), (sb, eb), (sc, ec) = a, b, c
        if not (ea.fields["card"] == eb.fields["card"] == ec.fields["card"]):
            continue
        if ea.fields["amount"] < 100 and eb.fields["amount"] < 100 and ec.fields["amount"] > 400 \
                and ea.ts < eb.ts < ec.ts and ec.ts - ea.ts <= W:
            got[(sa, sb, sc)] += 1
    return got


def _matches(rt: iedyn.PatternRuntime) -> Counter:
    return Counter(tuple(rt.serials_of(s)) for s in rt.all_matches() if rt.residual_check is None
                   or rt.residual_check(s))


@st.composite
def streams(draw, bigs: bool = True):
    """Events in time order with an occasional late one, few keys, equal times, mostly small
    (``bigs=False``: no ``big`` at all, so every expiry of an ``s1`` takes the walk that finds
    the parent entries by sort key)."""
    n = draw(st.integers(3, 40))
    ts = 0
    out = []
    for _ in range(n):
        ts += draw(st.sampled_from([0, 1, 1, 1, 2]))
        late = draw(st.integers(0, 9)) == 0
        t = max(0, ts - draw(st.integers(1, 6))) if late else ts
        card = draw(st.sampled_from(["a", "a", "a", "b", None]))
        amount = draw(st.sampled_from([5, 5, 5, 50, 500, 250] if bigs else [5, 5, 50, 250]))
        out.append((t, card, amount))
    order = draw(st.permutations(range(n)))
    return out, order


@settings(max_examples=300, deadline=None)
@given(streams())
def test_the_expiry_path_equals_the_update_path_with_minus_one(stream) -> None:
    _expiry_equals_update(stream)


@settings(max_examples=200, deadline=None)
@given(streams(bigs=False))
def test_the_expiry_walk_by_sort_key_equals_the_update_path(stream) -> None:
    """No ``big``: the expiry of an ``s1`` lowers its later ``s2``'s parent weights finding each
    parent entry by its sort key alone (``_flat_walk_source``), equal times included."""
    _expiry_equals_update(stream)


def _expiry_equals_update(stream) -> None:
    events, order = stream
    drop_rt, prop_rt = _runtime(), _runtime()
    live: dict[int, Event] = {}
    held: dict[int, list[tuple[int, tuple]]] = {}
    filters = [lambda f: f["amount"] < 100, lambda f: f["amount"] < 100, lambda f: f["amount"] > 400]
    for s, (t, card, amount) in enumerate(events):
        e = Event("T", t, {"card": card, "amount": amount}, str(s), "+")
        for atom in range(3):
            if not filters[atom](e.fields):
                continue
            a = drop_rt.insert(atom, e, s)
            b = prop_rt.insert(atom, e, s)
            assert (a is None) == (b is None)
            if a is not None:
                held.setdefault(s, []).append((atom, a.tuple))
        if s in held:
            live[s] = e
    assert _state(drop_rt) == _state(prop_rt)
    assert _matches(drop_rt) == _brute(live)
    for s in order:
        for atom, t in held.get(s, ()):
            drop_rt._drop_of_atom[atom](t)
            prop_rt._prop_of_atom[atom](t, -1)
            assert _state(drop_rt) == _state(prop_rt)
        live.pop(s, None)
        assert _matches(drop_rt) == _brute(live)
    assert all(not g for n in drop_rt.nodes for idx in n.stores for g in [idx.groups])


def _insert_into_both(events, a_rt, b_rt):
    """Each event of ``events`` ((time, card, amount)) inserted into the atoms its amount qualifies
    for (s1, s2: under 100; big: over 400), in atom order, in both runtimes; yields
    ``(serial, event, atom, a_rt's leaf tuple)`` for each insertion ``a_rt`` kept."""
    for s, (t, card, amount) in enumerate(events):
        e = Event("T", t, {"card": card, "amount": amount}, str(s), "+")
        for atom in range(3):
            if (amount < 100) if atom < 2 else (amount > 400):
                a = a_rt.insert(atom, e, s)
                b_rt.insert(atom, e, s)
                if a is not None:
                    yield s, e, atom, a.tuple


@settings(max_examples=100, deadline=None)
@given(streams())
def test_batched_expiry_equals_one_by_one(stream) -> None:
    """``expire`` of several tuples of one atom (the path-less batch) leaves what deleting them
    one at a time leaves.  (Separate storages for s1 and s2: all of one atom's deletions, then
    all of the other's, is not how twins sharing a storage change, ``test_twins_batched_expiry``.)"""
    events, order = stream
    a_rt, b_rt = _runtime(share_leaves=False), _runtime(share_leaves=False)
    by_atom: dict[int, list[tuple]] = {}
    for _s, _e, atom, t in _insert_into_both(events, a_rt, b_rt):
        by_atom.setdefault(atom, []).append(t)
    for atom, tuples in sorted(by_atom.items()):
        cut = [tuples[i] for i in order if i < len(tuples)][: max(1, len(tuples) // 2)]
        a_rt.expire(atom, cut)
        for t in cut:
            b_rt._prop_of_atom[atom](t, -1)
        assert _state(a_rt) == _state(b_rt)


@settings(max_examples=100, deadline=None)
@given(streams())
def test_twins_batched_expiry_equals_one_by_one(stream) -> None:
    """s1 and s2 share a storage (``share_leaf_storage``): their batches one after the other (the
    engine's expiry of several events) leave what deleting each event from s1 then s2 leaves, and
    the matches of the events still in."""
    events, order = stream
    a_rt, b_rt = _runtime(), _runtime()
    held: dict[int, list[tuple[int, tuple]]] = {}
    live: dict[int, Event] = {}
    for s, e, atom, t in _insert_into_both(events, a_rt, b_rt):
        held.setdefault(s, []).append((atom, t))
        live[s] = e
    cut = [s for s in order if s in held][: max(1, len(held) // 2)]
    by_atom: dict[int, list[tuple]] = {}
    for s in cut:
        for atom, t in held[s]:
            by_atom.setdefault(atom, []).append(t)
            b_rt._drop_of_atom[atom](t)
        live.pop(s)
    for atom in sorted(by_atom):
        a_rt.expire(atom, by_atom[atom])
    assert _state(a_rt) == _state(b_rt)
    assert _matches(a_rt) == _brute(live) == _matches(b_rt)
