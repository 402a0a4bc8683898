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

Esper side by side (``--no-esper`` to skip; ``bench.side_by_side``): the pattern as a `cep run` loop and
as two EPL forms on the same file, each match's aggregates checked like cep's. ``esper``: a success
with correlated subqueries over ``Login(success = false)#time(w + 1 ms)`` (count, sum, avg, max and
first of the user's failures in the window, ``exists`` for the ``{1,}``): exactly cep's leading gap
``ok.ts - w <= t < ok.ts``. ``esper match_recognize``: ``pattern (F+ OK)`` per user, what the issue
names; its rows are contiguous, so a run ends at the previous success and has no time bound (the
same matches on this stream, where w covers exactly one run), and it starts a partial match at every
failure, so its cost grows with L per event; it runs under ``--mr-timeout``. ``esper until``: a context
per user and ``every ([1:] f=... until ok=...)``, the same run as match_recognize's, one instance per user.
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path

from bench import side_by_side
from bench.side_by_side import Comparison, EsperForm
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


LOGIN_SCHEMA = "@public @buseventtype create map schema Login(user string, success boolean, k long, ts long);\n"
ESPER_SUBQUERY = LOGIN_SCHEMA + """@name('brute_force') select ok.user as user,
  (select count(*) as n, sum(f.k) as total, avg(f.k) as mean, max(f.k) as top, first(f.ts) as since
   from Login(success = false)#time({ms} milliseconds) as f where f.user = ok.user) as agg
from Login(success = true) as ok
where exists (select * from Login(success = false)#time({ms} milliseconds) as f where f.user = ok.user);
"""
ESPER_MR = LOGIN_SCHEMA + """@name('brute_force') select * from Login
match_recognize (
  partition by user
  measures OK.user as user, count(F.k) as n, sum(F.k) as total, avg(F.k) as mean, max(F.k) as top,
    F.firstOf().ts as since
  pattern (F+ OK)
  define F as F.success = false, OK as OK.success = true
);
"""
ESPER_UNTIL = LOGIN_SCHEMA + """create context ByUser partition by user from Login;
@name('brute_force') context ByUser select ok.user as user, f.countOf() as n, f.sumOf(x => x.k) as total,
  f.average(x => x.k) as mean, f.max(x => x.k) as top, f.firstOf().ts as since
from pattern [every ([1:] f=Login(success = false) until ok=Login(success = true))];
"""


def esper_forms(w: int, data_dir: Path, mr_timeout: float) -> tuple[EsperForm, ...]:
    """The EPL forms for window ``w`` (time units = seconds), written into ``data_dir``."""
    data_dir.mkdir(parents=True, exist_ok=True)
    sub = data_dir / f"brute_force_subquery_w{w}.epl"
    sub.write_text(ESPER_SUBQUERY.format(ms=w * 1000 + 1))
    mr = data_dir / "brute_force_match_recognize.epl"
    mr.write_text(ESPER_MR)
    until = data_dir / "brute_force_until.epl"
    until.write_text(ESPER_UNTIL)
    return (
        EsperForm("esper", sub, True,
                  "correlated subqueries over `Login(success = false)#time(w + 1 ms)` per success: count, sum, "
                  "avg, max, first of the user's failures with ts >= ok.ts - w (cep's leading gap), `exists` "
                  "for `{1,}`"),
        EsperForm("esper match_recognize", mr, False,
                  "`match_recognize (partition by user ... pattern (F+ OK))`: contiguous rows, so the run is "
                  "the failures since the user's previous success, with no time bound (cep: every failure in "
                  "[ok.ts - w, ok.ts), across successes); the same matches on this stream, where w covers "
                  "exactly one run. It keeps a partial match per failure of the run, so its cost per event "
                  "grows with L", timeout_s=mr_timeout),
        EsperForm("esper until", until, False,
                  "a context per user and `every ([1:] f=Login(success = false) until ok=Login(success = true))` "
                  "with enumeration methods on f (countOf, sumOf, average, max, firstOf): like match_recognize, "
                  "the run is the failures since the previous success, with no time bound; the same matches "
                  "on this stream"),
    )


def flat(match: dict) -> dict:
    """A match with a subquery row (Esper's ``agg``) merged into it."""
    out: dict = {}
    for k, v in match.items():
        out.update(v) if isinstance(v, dict) else out.__setitem__(k, v)
    return out


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


def oracle_count(events: list[Event], run: int) -> int:
    """One match per success after a complete run."""
    return sum(1 for e in events if e.fields["success"] and e.ts >= USERS * run)


def check_match(m: dict, run: int) -> None:
    """The oracle's aggregates: the run's k = 1..L, and it began at the user's first failure of it."""
    assert m["n"] == run and m["total"] == run * (run + 1) // 2 and m["top"] == run, m
    assert m["mean"] == (run + 1) / 2, m
    assert m["since"] % (USERS * (run + 1)) == m["since"] % USERS, m  # the run's first turn: k = 1


def check(outs: list, events: list[Event], run: int) -> None:
    want = oracle_count(events, run)
    assert len(outs) == want, (len(outs), want)
    for o in outs:
        check_match(o.match, run)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--runs", default=",".join(map(str, RUN_LENGTHS)))
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--no-esper", action="store_true", help="skip the side-by-side runs (cep run loop and Esper)")
    ap.add_argument("--repeat", type=int, default=1, help="interleaved rounds of the side-by-side runs")
    ap.add_argument("--mr-timeout", type=float, default=600, help="seconds for one match_recognize run")
    args = ap.parse_args(argv)
    out = Path(args.out)
    load_start = side_by_side.load_average()
    esper_missing = None if args.no_esper else side_by_side.esper_unavailable()
    sbs: list[dict] = []
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
        if not args.no_esper and esper_missing is None:
            data = out / "data"
            comparison = Comparison(f"brute_force L={run}", KLEENE.format(w=w), esper_forms(w, data, args.mr_timeout))
            sbs += side_by_side.compare(comparison, [e.fields for e in events], oracle_count(events, run), data,
                                        args.repeat, check=lambda ms, run=run: [check_match(flat(m), run) for m in ms])
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
    lines += side_by_side.report_section(
        sbs, args.no_esper, esper_missing, out / "kleene_esper.csv", load_start=load_start,
        preamble=side_by_side.PREAMBLE + " Every match's count, sum, avg, max and first checked against the oracle "
        "in every system.")
    (out / "kleene.md").write_text("\n".join(lines) + "\n")
    (out / "kleene.csv").write_text("run_length,matches,kleene_us_per_event,baseline_us_per_event,ratio,"
                                    "peak_retained,retained_per_window\n"
                                    + "".join(",".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in r)
                                              + "\n" for r in rows))
    print("\n".join(lines))
    return 0 if all(r["count_ok"] is not False for r in sbs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
