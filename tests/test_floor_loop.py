"""bench.floor_loop: the `cep run` loop and its parse-only floor, paired per chunk in one run.

The measurement must keep the floor's time out of the loop's (the floor runs inside the loop, just
before the loop reads each chunk), read every record in both, and leave the run's output as the
command makes it.  The clock is injected: with a clock that only the floor's pass and the engine
advance (by known amounts per record), every figure is known exactly.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from cephelp import PATTERNS

from bench import floor_loop, streams
from bench import where_time_goes as wtg
from cep.runtime.engine import Engine

PATTERN = PATTERNS / "card_testing.pattern"
FLOOR, LOOP = 3.0, 7.0  # fake clock units per record: the floor's pass, the engine's push


@pytest.fixture(scope="module")
def stream(tmp_path_factory) -> Path:
    return streams.write_stream(streams.CepStream("cards", 9000, 40), tmp_path_factory.mktemp("fl"))


def _fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A clock that only the floor's pass and the engine move: FLOOR and LOOP per record."""
    now = [0.0]
    parse, push = wtg.parse_chunk, Engine.push_batch

    def floor_pass(take_lines, decode, limit):
        k = parse(take_lines, decode, limit)
        now[0] += FLOOR * k
        return k

    def engine_push(self, events, *a, **k):
        now[0] += LOOP * len(events)
        return push(self, events, *a, **k)

    push_records = Engine.push_records

    def engine_records(self, records, *a, **k):  # (cep run's plain batches: the records the engine took)
        took, outs = push_records(self, records, *a, **k)
        now[0] += LOOP * took
        return took, outs

    monkeypatch.setattr(wtg, "parse_chunk", floor_pass)
    monkeypatch.setattr(Engine, "push_batch", engine_push)
    monkeypatch.setattr(Engine, "push_records", engine_records)
    return now


def test_the_loops_clock_excludes_the_floors_time(stream: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = _fake_clock(monkeypatch)
    r = wtg.floor_and_loop(PATTERN, stream, chunk=1024, clock=lambda: now[0], warm=0)
    n = len(stream.read_bytes().splitlines())
    assert r["records"] == r["steady_records"] == n == sum(r["sizes"]) == 9000
    assert r["sizes"] == [1024] * 8 + [9000 - 8 * 1024]
    assert r["floor_s"] == r["floor_all_s"] == FLOOR * n  # each record's floor pass once
    assert r["loop_s"] == r["loop_all_s"] == LOOP * n  # the loop's own clock, the floor's passes taken out (once)
    assert r["floors"] == [FLOOR * k for k in r["sizes"]]
    assert r["loops"] == [LOOP * k for k in r["sizes"]]  # each chunk's loop time after its floor pass
    assert wtg.block_ratios(r, 4) == [pytest.approx(LOOP / FLOOR)] * 2  # 4 + 5 chunks (the short tail joins)
    out = floor_loop.lines(r, 4)
    assert out[0] == f"floor {FLOOR * 1e6:.2f} us  loop {LOOP * 1e6:.2f} us  ratio {LOOP / FLOOR:.2f}"
    assert "2 blocks of 4 chunks (9,000 records): ratio median 2.33" in out[1]


def test_the_warm_up_of_each_chunk_is_timed_apart_on_both_sides(stream: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = _fake_clock(monkeypatch)
    r = wtg.floor_and_loop(PATTERN, stream, chunk=2048, clock=lambda: now[0], warm=512)
    # chunks of 2048 records from 0: four whole ones and 808 records; the first 512 of each apart
    assert r["sizes"] == [1536] * 4 + [808 - 512] and r["steady_records"] == 9000 - 5 * 512
    assert r["floors"] == [FLOOR * k for k in r["sizes"]] and r["loops"] == [LOOP * k for k in r["sizes"]]
    assert r["floor_s"] == FLOOR * r["steady_records"] and r["loop_s"] == LOOP * r["steady_records"]
    assert r["floor_warm_s"] == FLOOR * 5 * 512 and r["loop_warm_s"] == LOOP * 5 * 512
    assert r["floor_all_s"] == FLOOR * 9000 and r["loop_all_s"] == LOOP * 9000
    short = wtg.floor_and_loop(PATTERN, stream, chunk=2048, clock=lambda: now[0], warm=1024)
    assert short["sizes"] == [1024] * 4  # the last 808 records: all warm-up, no steady part
    assert short["loop_warm_s"] == LOOP * (4 * 1024 + 808) and short["loop_all_s"] == LOOP * 9000


def test_the_paired_run_writes_what_cep_run_writes(stream: Path, tmp_path: Path) -> None:
    from cep.commands.run import _Run

    loop = _Run.loop
    plain, paired = tmp_path / "plain.jsonl", tmp_path / "paired.jsonl"
    wtg._run_command(PATTERN, stream, str(plain))
    r = wtg.floor_and_loop(PATTERN, stream, chunk=512, output=str(paired), warm=0)
    assert _Run.loop is loop  # unwrapped afterwards
    assert paired.read_bytes() == plain.read_bytes() and plain.stat().st_size > 0
    assert r["records"] == 9000 and len(r["floors"]) == len(r["loops"]) == 18
    r = wtg.floor_and_loop(PATTERN, stream, chunk=1024, warm=256, output=str(paired))
    assert paired.read_bytes() == plain.read_bytes()


def test_the_loop_costs_more_than_its_floor(stream: Path, capsys: pytest.CaptureFixture) -> None:
    # the loop parses each record as the floor does, then runs the engine and writes: above 1x on any machine
    r = wtg.floor_and_loop(PATTERN, stream, chunk=1024, clock=time.process_time, warm=256)
    assert r["loop_s"] > r["floor_s"] > 0
    assert floor_loop.main([str(PATTERN), str(stream), "--chunk", "2048", "--warm", "512", "--block", "2"]) == 0
    first, second, third = capsys.readouterr().out.splitlines()
    m = re.fullmatch(r"floor ([\d.]+) us  loop ([\d.]+) us  ratio ([\d.]+)", first)
    assert m and float(m[3]) > 1
    assert second.startswith("paired: 9,000 records in chunks of 2,048, the first 512 of each apart; "
                             "2 blocks of 2 chunks (6,440 records): ratio median")
    assert third.startswith("all records (warm-ups included): floor")


def test_outside_loop_splits_the_real_commands_process(stream: Path) -> None:
    from bench import outside_loop as ol

    r = ol.run_once(PATTERN, stream, None)
    assert list(r) == ["interpreter start (site, .pth files)", "imports (cep.cli, cep.commands.run)",
                       "setup (compile patterns, build the engine, open input and output)",
                       "run(): heap, gc, between setup and loop", "loop (read, decode, push, encode, write)",
                       "end of input (watermark to +inf) and closing the sinks", "summary",
                       "after the command (exit status, gc.freeze)", ol.TEARDOWN, ol.WHOLE]
    assert r["loop (read, decode, push, encode, write)"] > 0 and r["setup (compile patterns, build the engine, "
                                                                  "open input and output)"] > 0
    assert sum(v for k, v in r.items() if k != ol.WHOLE) == pytest.approx(r[ol.WHOLE], abs=1e-3)
    assert "| outside the loop (whole - loop) |" in "\n".join(ol.table([r, r]))
