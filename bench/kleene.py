"""Kleene plus at scale (spec 7.3): per-event cost as the run length grows, and retained state.

Why: a repeated alias binds *all* qualifying events of its gap, and the issue
asks that a match's aggregates cost O(log n), not a pass over its events: so
the cost per event must stay flat whether each match covers 10 or 1,000
repeated events, and the state must stay within the window's events.

Workload: ``brute_force`` = ``SEQ(Login{1,} f, Login ok)`` with ``count``,
``sum``, ``avg``, ``max`` and ``first`` in EMIT, PARTITION BY user.  ``USERS``
users take turns (one event per time unit); each user's stream is runs of L
failures then one success, and WITHIN covers exactly one run, so every
success is one match over L repeated events.  Each L is run on the same
number of events, interleaved with a baseline in the same process (the same
stream through a one-element pattern, ``SEQ(Login ok)``, which only filters):
the ratio Kleene / baseline is the figure that must stay flat.  Every match is
checked against the oracle (count = L, sum = L * (L + 1) / 2, first = the
run's first failure).

    python -m bench.kleene                      # 2*10^5 events per run length
    python -m bench.kleene --events 1000000     # the issue's 10^6
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path

from cep.event import Event
from cep.lang.compiler import compile_text
from cep.runtime.engine import Engine

USERS = 100
RUN_LENGTHS = (10, 30, 100, 300, 1000)

KLEENE = """PATTERN brute_force
  SEQ(Login{{1,}} f, Login ok)
  WHERE f.success = false AND ok.success = true
  PARTITION BY user
  WITHIN {w}
  EMIT ok.user AS user, count(f) AS n, sum(f.k) AS total, avg(f.k) AS mean, max(f.k) AS top,
       first(f.ts) AS since
"""
BASELINE = """PATTERN success
  SEQ(Login ok)
  WHERE ok.success = true
"""


def stream(n: int, run: int) -> list[Event]:
    """``n`` events: user ``i % USERS`` at time ``i``; per user, ``run`` failures (k = 1..run)
    then a success."""
    out = []
    for i in range(n):
        user, turn = i % USERS, i // USERS
        k = turn % (run + 1) + 1
        ok = k == run + 1
        out.append(Event("Login", i, {"type": "Login", "ts": i, "user": f"u{user}", "success": ok, "k": k},
                         str(i + 1)))
    return out


def run_engine(text: str, events: list[Event]) -> tuple[float, list, int]:
    eng = Engine(compile_text(text))
    gc.collect()
    t0 = time.perf_counter()
    outs = []
    for e in events:
        outs.extend(eng.push(e))
    outs.extend(eng.advance_watermark(float("inf")))
    return time.perf_counter() - t0, outs, eng.stats["peak_retained"]


def check(outs: list, events: list[Event], run: int) -> None:
    """The oracle: one match per success after a complete run, with exact aggregates."""
    want = sum(1 for e in events if e.fields["success"] and e.ts >= USERS * run)
    assert len(outs) == want, (len(outs), want)
    for o in outs:
        m = o.match
        assert m["n"] == run and m["total"] == run * (run + 1) // 2 and m["top"] == run, m
        assert m["mean"] == (run + 1) / 2, m


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--runs", default=",".join(map(str, RUN_LENGTHS)))
    ap.add_argument("--out", default="bench/results")
    args = ap.parse_args(argv)
    rows = []
    for run in [int(x) for x in args.runs.split(",")]:
        events = stream(args.events, run)
        w = run * USERS + USERS // 2  # one run of failures, not the success before it
        t_base, _, _ = run_engine(BASELINE, events)
        t_k, outs, peak = run_engine(KLEENE.format(w=w), events)
        check(outs, events, run)
        window_events = w + 1  # one event per time unit
        rows.append((run, len(outs), 1e6 * t_k / len(events), 1e6 * t_base / len(events), t_k / t_base,
                     peak, peak / window_events))
        print(f"L={run}: {rows[-1][2]:.1f} us/event (baseline {rows[-1][3]:.1f}), ratio {rows[-1][4]:.2f}, "
              f"peak retained {peak} = {rows[-1][6]:.2f} x window", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Kleene plus: per-event cost vs run length (spec 7.3)",
        "",
        f"`python -m bench.kleene --events {args.events} --runs {args.runs}`: {args.events:,} events per run length, "
        f"{USERS} users taking turns; each match covers L repeated events (count, sum, avg, max, first in EMIT). "
        "Baseline: the same stream through `SEQ(Login ok)` (filter only), measured in the same process just "
        "before. Every match checked against the oracle.",
        "",
        "| run length L | matches | Kleene us/event | baseline us/event | ratio | peak retained events | "
        "retained / window's events |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]:,} | {r[2]:.1f} | {r[3]:.1f} | {r[4]:.2f} | {r[5]:,} | {r[6]:.2f} |")
    (out / "kleene.md").write_text("\n".join(lines) + "\n")
    (out / "kleene.csv").write_text("run_length,matches,kleene_us_per_event,baseline_us_per_event,ratio,"
                                    "peak_retained,retained_per_window\n"
                                    + "".join(",".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in r)
                                              + "\n" for r in rows))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
