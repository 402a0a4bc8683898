"""The Esper side of the absence, strategy and Kleene benches computes the oracle's composite events.

Each workload's EPL (``bench.absence.ESPER``, ``bench.kleene.esper_forms``) runs through the bench's own
path (``bench.side_by_side.compare``: the `cep run` loop and Esper on one file) on a tiny stream: the
bench's generator plus hand-placed events on every window boundary (a shipment exactly at o.ts + w and
one second after it, a cancel exactly w before a payment, a rise exactly 600 s long, two payments of one
order, a quote of another symbol between contiguous ones). Every system's count must equal the bench's
oracle, and the oracle must equal the reference evaluator (``tests/reference.py``, the spec by brute force).

Skipped only when Java or Maven is missing; with ``CI`` set that fails instead, like the Kafka and Spark
tests: CI must run every test.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import reference

from bench import absence, kleene, side_by_side
from bench.absence import DAY, T0
from bench.side_by_side import Comparison

IN_CI = bool(os.environ.get("CI"))


@pytest.fixture(scope="module")
def esper() -> None:
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        reason = f"{' and '.join(missing)} not on PATH: the Esper side of the bench cannot run"
        if IN_CI:
            pytest.fail(f"{reason}, and CI must run it")
        pytest.skip(reason)
    why = side_by_side.esper_unavailable()
    assert why is None, why


E = T0 + 10 * DAY  # the hand-placed events come after the generated ones (which span a few hours)


def _orders_edges() -> list[dict]:
    def ev(typ: str, t: int, oid: int) -> dict:
        return {"type": typ, "ts": t, "order_id": oid, **({"customer": "c"} if typ == "Order" else {})}

    recs = [
        ev("Order", E, 1), ev("Shipment", E + 2 * DAY, 1),                      # shipped exactly at o.ts + w
        ev("Order", E + 60, 2), ev("Shipment", E + 60 + 2 * DAY + 1, 2),        # one second too late
        ev("Order", E + 120, 3),                                                # never: decided at the end
        ev("Order", E + 180, 4), ev("Pay", E + 3780, 4), ev("Pay", E + 180 + DAY, 4),  # two payments, 2nd at w
        ev("Order", E + 240, 5), ev("Pay", E + 340, 5), ev("Cancel", E + 440, 5), ev("Pay", E + 540, 5),
        ev("Order", E + 300, 6), ev("Cancel", E + 400, 6), ev("Pay", E + 400 + DAY, 6),  # cancel exactly w before
        ev("Order", E + 500, 7), ev("Cancel", E + 600, 7), ev("Pay", E + 601 + DAY, 7),  # w + 1 before
    ]
    return sorted(recs, key=lambda r: r["ts"])


def _quotes_edges() -> list[dict]:
    def q(t: int, sym: str, price: float) -> dict:
        return {"type": "Quote", "ts": E + t, "symbol": sym, "price": price}

    return [q(0, "A", 10.0), q(60, "A", 11.0),                          # next higher exactly 60 s later
            q(100, "B", 5.0), q(161, "B", 6.0),                         # 61 s later: none for the first
            q(200, "C", 1.0), q(500, "C", 2.0), q(510, "A", 1.0), q(800, "C", 3.0),   # rise of exactly 600 s
            q(1000, "D", 1.0), q(1300, "D", 2.0), q(1601, "D", 3.0),    # 601 s
            q(2000, "E", 1.0), q(2001, "E", 0.5), q(2002, "E", 2.0), q(2003, "E", 3.0)]  # a dip breaks one


STREAMS = {"orders": lambda: absence.orders_stream(300) + _orders_edges(),
           "quotes": lambda: absence.quotes_stream(400, symbols=5) + _quotes_edges()}


@pytest.mark.parametrize("name", sorted(absence.ESPER))
def test_absence_epl_counts_equal_the_oracle(esper: None, name: str, tmp_path: Path) -> None:
    kind, with_gap, _, oracle, _, _ = absence.PAIRS[name]
    records = STREAMS[kind]()
    expected = oracle(records)
    assert expected > 0
    edges = _orders_edges() if kind == "orders" else _quotes_edges()
    # the bench's oracle is the spec's: the reference evaluator agrees on the boundary cases
    assert oracle(edges) == reference.evaluate(with_gap, edges).count("p")
    rows = absence.esper_rows(name, records, expected, tmp_path, repeat=1)
    assert [r["system"] for r in rows] == ["cep", "esper"]
    assert all(r["count_ok"] for r in rows), rows


def test_kleene_epl_counts_and_aggregates_equal_the_oracle(esper: None, tmp_path: Path) -> None:
    run = 3
    events = kleene.stream(8 * kleene.USERS, run)
    w = run * kleene.USERS + kleene.USERS // 2
    forms = kleene.esper_forms(w, tmp_path, mr_timeout=300)
    assert [f.system for f in forms] == ["esper", "esper match_recognize", "esper until"]
    rows = side_by_side.compare(Comparison("brute_force", kleene.KLEENE.format(w=w), forms),
                                [e.fields for e in events], kleene.oracle_count(events, run), tmp_path,
                                check=lambda ms: [kleene.check_match(kleene.flat(m), run) for m in ms])
    assert kleene.oracle_count(events, run) == 2 * kleene.USERS
    assert all(r["count_ok"] for r in rows), rows


def test_kleene_subquery_window_is_cep_leading_gap(esper: None, tmp_path: Path) -> None:
    # failures exactly w before the success count, w + 1 before do not; a success in between does not
    # end the run (cep's repeated alias takes every failure of its gap)
    w = 100

    def login(t: int, ok: bool, k: int) -> dict:
        return {"type": "Login", "ts": t, "user": "u", "success": ok, "k": k}

    records = [login(0, False, 1), login(1, False, 2), login(50, True, 0), login(60, False, 3),
               login(101, True, 0)]
    text = kleene.KLEENE.format(w=w)
    expected = reference.evaluate(text, records).count("brute_force")
    assert expected == 2
    forms = kleene.esper_forms(w, tmp_path, mr_timeout=300)[:1]
    seen: list[dict] = []
    rows = side_by_side.compare(Comparison("leading_gap", text, forms), records, expected, tmp_path,
                                check=lambda ms: seen.extend(sorted((kleene.flat(m) for m in ms),
                                                                    key=lambda m: m["since"])))
    assert all(r["count_ok"] for r in rows), rows
    # cep then Esper: ok@50 takes k=1,2; ok@101 takes k=2 (ts 1 = 101 - w) and k=3, not k=1 (ts 0)
    for m in (seen[:2], seen[2:]):
        assert [(x["n"], x["total"], x["since"]) for x in m] == [(2, 3, 0), (2, 5, 1)]
