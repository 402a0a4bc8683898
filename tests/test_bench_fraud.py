"""The fraud-stream bench (issue 15): counts checked against the oracle, CORE's absence said plainly,
and CORE's runner agreeing with the oracle (W + 1 on its exclusive window), in the 3.13 environment
the bench makes (pycer from PyPI, once; a machine without CPython 3.13 fails here, saying so)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from bench import core, fraud, streams


def _no_core(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(core, "VENV", tmp_path / "no-venv")
    monkeypatch.setattr(core, "_find_py313", lambda: None)


def test_core_unavailable_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _no_core(monkeypatch, tmp_path)
    with pytest.raises(core.CoreUnavailable, match="no CPython 3.13"):
        core.core_python()


def test_fraud_bench_checks_counts_and_reports_missing_core(monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    _no_core(monkeypatch, tmp_path)
    out = tmp_path / "fraud.md"
    rc = fraud.main(["--systems", "cep,core", "--sizes", "600:6", "--no-wide", "--repeat", "2",
                     "--data", str(tmp_path / "data"), "--out", str(out)])
    assert rc == 0
    text = out.read_text()
    assert "**CORE not run:** no CPython 3.13" in text
    recs = [orjson.loads(line) for line in
            (tmp_path / "data" / streams.CepStream("cards", 600, 6).filename).read_bytes().splitlines()]
    expected = streams.card_testing_count(recs)
    assert expected > 0
    row = next(line for line in text.splitlines() if line.startswith("| card_testing N=600 cards=6 | cep |"))
    assert f"| {expected} ({expected:,}) | yes |" in row
    csv_text = out.with_suffix(".csv").read_text()
    assert csv_text.splitlines()[0].startswith("stream,n,keys,window_s,system,runs")


def test_core_runner_agrees_with_oracle_on_inclusive_window(tmp_path: Path) -> None:
    # matches exactly W apart are in (cep's WITHIN is inclusive; CORE gets W + 1), W + 1 apart are out
    recs = [{"type": "Txn", "card": c, "amount": a, "ts": t} for c, a, t in [
        ("a", 5.0, 0), ("a", 6.0, 10), ("b", 1.0, 11), ("b", 2.0, 3000),
        ("a", 500.0, 3600),   # 3600 after a@0: in
        ("b", 900.0, 3611),   # 3600 after b@11: in
        ("b", 950.0, 3612),   # 3601 after b@11: out
        ("a", 7.0, 3700), ("a", 600.0, 3710)]]  # 3700 after a@10: out
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in recs))
    r = core.run_core(core.core_python(), fraud.CORE_DECL, fraud.CORE_QUERY.format(within=3601),
                      fraud.CORE_FIELDS, path, timeout=120)
    assert r["composites"] == streams.card_testing_count(recs) == 2


def test_where_time_goes_phases_and_batching_agree(tmp_path: Path) -> None:
    from bench import where_time_goes as wtg

    path = streams.write_stream(streams.CepStream("cards", 1500, 5), tmp_path)
    pattern = Path(fraud.workloads.PATTERNS_DIR / "card_testing.pattern")
    recs = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    from cep.runtime.engine import Engine

    push = Engine.push
    out = tmp_path / "out.jsonl"
    ph = wtg.instrumented(pattern, path, str(out))
    # the real command ran with every phase's functions wrapped: each one was called, the output is right;
    # the expiry functions may not be: the batch loop expires a single due event inline (the handler phase),
    # and at the end of the input nothing is pending (no final drop)
    assert len(out.read_bytes().splitlines()) == streams.card_testing_count(recs) > 0
    assert set(ph["ns"]) <= set(wtg.PHASES)
    assert all(ph["calls"][p] > 0 for p in wtg.PHASES if not p.startswith("expiry"))
    assert Engine.push is push  # and unwrapped afterwards
    bat = wtg.proto_batched(pattern, path, 1500, [7, 64], repeat=1)
    assert len({b["count"] for b in bat}) == 1 and bat[0]["count"] > 0
