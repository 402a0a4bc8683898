"""Property tests aimed at window expiry (issue 15): the engine against the reference on
streams built to make expiry do more than one thing at a time.

``tests/strategies.py`` moves time in small steps, so its streams mostly expire one event per
step.  Here time moves in bursts: many events (of several keys, and equal events) share a
time, then the time jumps to just before, exactly at, or just past the window's edge, so one
watermark step expires many events at once, from several key groups and several atoms of one
event (its type is in two or three elements); retractions of events still in the window are
interleaved, events arrive out of order within the lateness, and the state is saved and
reloaded mid-stream.  ``CEP_HYPOTHESIS_PROFILE=long`` runs many more examples.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import Case, _record_key
from test_engine_properties import PROFILE, check_case

KEYS = ["u", "v", "w"]


@st.composite
def windowed_patterns(draw) -> str:
    """One or two keyed SEQ/AND patterns over types A and B with a small window."""
    texts = []
    for i in range(draw(st.integers(1, 2))):
        op = draw(st.sampled_from(["SEQ", "SEQ", "AND"]))
        k = draw(st.integers(2, 3))
        aliases = ["a", "b", "c"][:k]
        if op == "AND":
            types = ["A", "B", "C"][:k]
        else:
            types = [draw(st.sampled_from(["A", "A", "B"])) for _ in range(k)]
        lines = [f"PATTERN w{i}", f"  {op}(" + ", ".join(f"{t} {a}" for t, a in zip(types, aliases, strict=True)) + ")"]
        conds = []
        if draw(st.booleans()):
            conds.append(f"{aliases[0]}.x < {aliases[-1]}.x")
        if draw(st.booleans()):
            conds.append(f"{aliases[0]}.x >= 0")
        if conds:
            lines.append("  WHERE " + " AND ".join(conds))
        if draw(st.booleans()):
            lines.append("  PARTITION BY s")
        lines.append(f"  WITHIN {draw(st.sampled_from([1, 2, 3]))}")
        texts.append("\n".join(lines) + "\n")
    return "".join(texts)


@st.composite
def bursty_streams(draw, lateness: int) -> list[dict]:
    """Bursts of events at one time, time jumps around the window's edge, retractions."""
    steps = draw(st.lists(st.tuples(
        st.sampled_from(["burst", "burst", "jump", "retract", "dup"]),
        st.integers(1, 6),  # burst size
        st.sampled_from([0, 1, 2, 3, 4, 7]),  # jump
        st.integers(0, 63),  # which record
        st.lists(st.tuples(st.sampled_from(["A", "A", "B", "C"]), st.sampled_from(KEYS),
                           st.sampled_from([0, 1, 2, 2.5, -1]), st.integers(-lateness, 0)),
                 min_size=6, max_size=6),
    ), min_size=1, max_size=14))
    records: list[dict] = []
    present: list[dict] = []
    now = 0
    max_ts = None
    for action, size, jump, pick, evs in steps:
        wm = None if max_ts is None else max_ts - lateness
        if action == "jump":
            now += jump
            continue
        if action == "retract":
            on_time = [r for r in present if wm is None or r["ts"] >= wm]
            if on_time:
                rec = on_time[pick % len(on_time)]
                records.append({**rec, "op": "-"})
                key = _record_key(rec)
                present.remove(next(r for r in present if _record_key(r) == key))
            continue
        if action == "dup" and present:
            picks = [present[pick % len(present)]]
        else:
            picks = [{"type": t, "ts": max(0, now + back), "s": s, "x": x} for t, s, x, back in evs[:size]]
        for rec in picks:
            if wm is not None and rec["ts"] < wm:
                continue  # keep the stream free of late records: expiry is under test here
            records.append(dict(rec))
            present.append(dict(rec))
            max_ts = rec["ts"] if max_ts is None else max(max_ts, rec["ts"])
            wm = max_ts - lateness
    return records


@st.composite
def expiry_cases(draw) -> Case:
    lateness = draw(st.sampled_from([0, 0, 1, 2]))
    return Case(draw(windowed_patterns()), draw(bursty_streams(lateness)), lateness)


@settings(settings.get_profile(PROFILE))
@given(expiry_cases())
def test_bursts_of_expiry_agree_with_reference(case: Case) -> None:
    """Many events leave at one watermark step (several groups, several atoms of one event,
    equal times at the window's edge), interleaved with retractions."""
    check_case(case)


@settings(settings.get_profile(PROFILE), max_examples=max(20, settings.get_profile(PROFILE).max_examples // 3))
@given(expiry_cases(), st.integers(1, 40))
def test_bursts_of_expiry_survive_dumps_loads(case: Case, restore_at: int) -> None:
    check_case(case, restore_at)
