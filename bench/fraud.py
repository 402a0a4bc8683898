"""``python -m bench.fraud``: keyed SEQ-of-3 fraud streams on cep, `cep run`, Esper and CORE, one run.

Why: issue 15 sets per-event targets against CORE (C++, Python bindings ``pycer``) and Esper on the
card-testing streams (two small purchases then a large one on the same card within a window). Every
system reads the same file in the same run, rounds are interleaved (the machine is shared, so ratios
within one run are what counts), every count is checked against the exact oracle
(``streams.card_testing_count``), and each row reports the best and the median of ``--repeat`` runs.

Streams: card testing with a 1-hour window at 5*10^3 / 2*10^4 / 2*10^5 / 10^6 events over 200-1,000
cards (``streams.cards``), and the output-heavy stream of ``bench.heap_tuning`` (2*10^4 events over 20
cards, 30-minute window, about 1.34 million matches). Windows: cep's WITHIN is inclusive; Esper's
``timer:within`` gets W + 1 ms; CORE's WITHIN is exclusive on the integer ``ts`` attribute, so it gets
W + 1. Writes ``results/fraud.md`` and ``results/fraud.csv``.
"""

from __future__ import annotations

import argparse
import csv
import shlex
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench import core, harness, heap_tuning, procs, streams, workloads

RESULTS = procs.BENCH_DIR / "results"

CORE_DECL = "CREATE STREAM S {\n  EVENT Txn { card:string, amount:double, ts:int }\n}"
CORE_FIELDS = "card:str,amount:float,ts:int"
CORE_QUERY = """SELECT ALL * FROM S
WHERE (Txn as s1; Txn as s2; Txn as big)
FILTER s1[amount < 100] AND s2[amount < 100] AND big[amount > 400]
PARTITION BY [card]
WITHIN {within} [ts]
CONSUME BY NONE"""

EPL = workloads.EPL_SCHEMAS["cards"] + """@name('card_testing') select s1.card as card, s1.ts as first_ts, big.amount as amount
from pattern [every s1=Txn(amount < 100) -> (every s2=Txn(card = s1.card, amount < 100)
  -> every big=Txn(card = s1.card, amount > 400)) where timer:within({ms} milliseconds)];
"""

SYSTEMS = ("cep", "cep run", "esper", "core")
# also measurable, not run by default: `cep run` with its options, e.g. "cep run --workers 2"
# (whole-process wall and CPU of the parent and its workers, peak RSS summed over them)
BASE = " (base)"  # suffix of a cep system run from the --base checkout


@dataclass(frozen=True)
class FraudStream:
    name: str
    n: int
    keys: int
    window_s: int
    path: Path
    pattern: Path


def make_streams(data_dir: Path, sizes: list[tuple[int, int]], wide: bool) -> list[FraudStream]:
    out = []
    for n, keys in sorted(sizes):
        path = streams.write_stream(streams.CepStream("cards", n, keys), data_dir)
        out.append(FraudStream(f"card_testing N={n} cards={keys}", n, keys, 3600, path,
                               workloads.PATTERNS_DIR / "card_testing.pattern"))
    if wide:
        pattern, path = heap_tuning.write_inputs(data_dir)
        out.insert(sum(1 for f in out if f.n < LARGE), FraudStream("card_testing 30 min N=20000 cards=20 (output-heavy)", 20_000, 20, 1800,
                               path, pattern))
    return out


def oracle(s: FraudStream) -> int:
    def count() -> int:
        with open(s.path, "rb") as f:
            return streams.card_testing_count([orjson.loads(line) for line in f], window=s.window_s)
    return harness._cached(s.path, f"card_testing_w{s.window_s}", count)


def run_one(system: str, s: FraudStream, epl: Path, core_py: str | None, timeout: float,
            base: str | None = None) -> dict:
    """One measured run: records, composites, whole-process wall time, peak RSS (and cep's floor).
    ``base``: the checkout the ``(base)`` systems run."""
    env = procs.base_env(base) if system.endswith(BASE) and base else None
    system = system.removesuffix(BASE)
    if system == "cep":
        r = procs.run_cep_inprocess([s.pattern], s.path, timeout=timeout, env=env)
    elif system.startswith("cep run"):
        r = procs.run_cep_cli([s.pattern], s.path, timeout=timeout, env=env, extra=shlex.split(system)[2:])
    elif system == "esper":
        r = procs.run_esper(epl, s.path, timeout=timeout)
    else:
        assert core_py is not None
        r = core.run_core(core_py, CORE_DECL, CORE_QUERY.format(within=s.window_s + 1), CORE_FIELDS, s.path,
                          timeout=timeout)
    return {"composites": r.get("composites"), "wall_s": r["wall_s"], "run_s": r.get("run_s", r["wall_s"]),
            "cpu_s": r.get("cpu_s"),
            "floor_s": r.get("floor_s", -1.0), "peak_rss_mb": r.get("peak_rss_mb")}


def summarise(s: FraudStream, system: str, runs: list[dict], expected: int) -> dict:
    walls = [r["wall_s"] for r in runs]
    loops = [r["run_s"] for r in runs]
    cpus = [r["cpu_s"] for r in runs if r.get("cpu_s") is not None]
    floors = [r["floor_s"] for r in runs if r["floor_s"] and r["floor_s"] > 0]
    counts = {r["composites"] for r in runs}
    best = min(runs, key=lambda r: r["wall_s"])
    return {"stream": s.name, "n": s.n, "keys": s.keys, "window_s": s.window_s, "system": system,
            "runs": len(runs), "expected": expected, "composites": ",".join(str(c) for c in sorted(counts, key=str)),
            "count_ok": counts == {expected},
            "best_wall_s": min(walls), "median_wall_s": statistics.median(walls),
            "best_ev_s": s.n / min(walls), "median_ev_s": s.n / statistics.median(walls),
            "best_loop_s": min(loops), "median_loop_s": statistics.median(loops),
            "best_cpu_s": min(cpus) if cpus else None, "median_cpu_s": statistics.median(cpus) if cpus else None,
            "floor_s": min(floors) if floors else None,
            "x_floor": (min(loops) / min(floors)) if floors else None,
            "peak_rss_mb": best["peak_rss_mb"]}


def write_report(rows: list[dict], skipped: dict[str, str], command: str, elapsed: float, out: Path) -> None:
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    m = harness.machine_info()
    lines = ["# Fraud streams: cep, `cep run`, Esper, CORE (issue 15)", "",
             f"Command: `{command}` ({elapsed:.0f} s, finished {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}). "
             f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory']}; Python {m['python']}; {m['java']}; "
             f"load average at the end {open('/proc/loadavg').read().split()[0]}.", ""]
    for system, why in skipped.items():
        lines.append(f"**{system} not run:** {why}")
        lines.append("")
    lines += ["Whole process = wall time of a fresh process from start to exit (interpreter or JVM start, "
              "compile, read, detect, write to /dev/null); events/s = input records / that time. "
              "`cep` is the measured `cep run` loop in a child (`bench.run_cep`): its whole-process time also "
              "contains a parse-only pass over the file (the floor), so the loop column is the comparable one; "
              "x floor = loop time / parse-only time (best of each). CORE = pycer's offline server, one "
              "`send_event` per record, the output text fetched once at the end (its RSS holds every match's text).",
              "",
              "| stream | system | runs | composites (oracle) | ok | whole-process ev/s best / median | loop s best / median | CPU s best / median | x floor | peak RSS MB | vs CORE (best ev/s) | vs base best / median (wall; CPU) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    by_stream: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_stream.setdefault(r["stream"], {})[r["system"]] = r
    for stream, systems in by_stream.items():
        core_r = systems.get("core")
        for system, r in systems.items():
            # like for like: the cep loop against CORE's loop, whole processes against CORE's whole process
            if core_r is None or system == "core":
                vs = "-"
            elif system.removesuffix(BASE) == "cep":
                vs = f"{core_r['best_loop_s'] / r['best_loop_s']:.2f}x (loops)"
            else:
                vs = f"{r['best_ev_s'] / core_r['best_ev_s']:.2f}x"
            xf = f"{r['x_floor']:.1f}" if r["x_floor"] else "-"
            cpu = f"{r['best_cpu_s']:.2f} / {r['median_cpu_s']:.2f}" if r["best_cpu_s"] is not None else "-"
            b = systems.get(system + BASE)
            if b is None:
                vb = "-"
            elif system == "cep":  # loops: the whole process also holds the parse-only pass
                vb = f"{b['best_loop_s'] / r['best_loop_s']:.2f}x / {b['median_loop_s'] / r['median_loop_s']:.2f}x (loops)"
            else:
                vb = (f"{r['best_ev_s'] / b['best_ev_s']:.2f}x / {r['median_ev_s'] / b['median_ev_s']:.2f}x; "
                      f"{b['best_cpu_s'] / r['best_cpu_s']:.2f}x / {b['median_cpu_s'] / r['median_cpu_s']:.2f}x")
            lines.append(f"| {stream} | {system} | {r['runs']} | {r['composites']} ({r['expected']:,}) | {'yes' if r['count_ok'] else '**NO**'} "
                         f"| {r['best_ev_s']:,.0f} / {r['median_ev_s']:,.0f} | {r['best_loop_s']:.2f} / {r['median_loop_s']:.2f} "
                         f"| {cpu} | {xf} | {r['peak_rss_mb']:.0f} | {vs} | {vb} |")
    lines += ["", "vs CORE = throughput ratio (above 1: faster than CORE): best whole-process events/s for `cep run` "
              "and Esper; for the `cep` row the best loop times (cep's loop against CORE's read-send-output loop). "
              "vs base (with `--base`): this checkout's throughput over the base checkout's, best and median, "
              "same stream, rounds interleaved; by wall time, then by CPU time (user + system of the process, "
              "from `wait4`: on a loaded machine the wall time is mostly waiting for a core, the CPU time is "
              "the work done)."]
    out.write_text("\n".join(lines) + "\n")


LARGE = 1_000_000
SIZES = [(5_000, 200), (20_000, 500), (200_000, 1_000), (1_000_000, 1_000)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fraud", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds; best and median reported")
    ap.add_argument("--repeat-large", type=int, default=None,
                    help=f"rounds for streams of >= {LARGE:,} events (default: --repeat)")
    ap.add_argument("--sizes", help="comma list N:cards (default 5000:200,20000:500,200000:1000,1000000:1000); "
                    "`--sizes none`: only the output-heavy stream")
    ap.add_argument("--no-wide", action="store_true", help="skip the output-heavy 20k/20-card stream")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help=f"comma list of {', '.join(SYSTEMS)}, or `cep run` with options (`cep run --workers 2`)")
    ap.add_argument("--data", default=str(RESULTS / "data"))
    ap.add_argument("--out", default=str(RESULTS / "fraud.md"))
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--base", help="another checkout (e.g. `git worktree add /tmp/base <commit>`): its "
                    "`cep run` runs interleaved with this checkout's, for before/after ratios")
    args = ap.parse_args(argv)
    if args.repeat_large is None:
        args.repeat_large = args.repeat
    if args.sizes == "none":
        sizes = []
    else:
        sizes = [tuple(int(x) for x in p.split(":")) for p in args.sizes.split(",")] if args.sizes else SIZES
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    skipped: dict[str, str] = {}
    core_py = None
    if "core" in systems:
        try:
            core_py = core.core_python()
        except core.CoreUnavailable as e:
            skipped["CORE"] = str(e)
            systems.remove("core")
    if "esper" in systems:
        try:
            procs.build_esper()
        except (procs.RunFailed, OSError) as e:
            skipped["Esper"] = str(e)
            systems.remove("esper")
    if args.base:
        systems = [x for s_ in systems for x in ((s_, s_ + BASE) if s_.startswith("cep run") else (s_,))]
    for name, why in skipped.items():
        print(f"bench.fraud: {name} not available, running without it: {why}", file=sys.stderr)

    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    fstreams = make_streams(data, sizes, not args.no_wide)
    expected = {s.name: oracle(s) for s in fstreams}
    epls = {}
    for s in fstreams:
        epls[s.name] = data / f"card_testing_w{s.window_s}.epl"
        epls[s.name].write_text(EPL.format(ms=s.window_s * 1000 + 1))
    runs: dict[tuple[str, str], list[dict]] = {}
    command = "python -m bench.fraud" + "".join(" " + shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    t0 = time.perf_counter()
    rows: list[dict] = []
    # stream by stream (smallest first), the systems interleaved within each round; the report is
    # rewritten after each stream, so a run cut short still leaves every finished stream's figures
    for s in fstreams:
        rounds = args.repeat_large if s.n >= LARGE else args.repeat
        for rnd in range(rounds):
            for system in systems:
                try:
                    r = run_one(system, s, epls[s.name], core_py, args.timeout, args.base)
                except procs.RunFailed as e:
                    print(f"bench.fraud: {s.name} {system} failed: {e}", file=sys.stderr)
                    continue
                runs.setdefault((s.name, system), []).append(r)
                ok = "ok" if r["composites"] == expected[s.name] else f"WRONG (oracle {expected[s.name]})"
                print(f"round {rnd + 1} {s.name:52} {system:8} {r['composites']} {ok} wall {r['wall_s']:7.2f} s "
                      f"loop {r['run_s']:7.2f} s rss {r['peak_rss_mb'] or 0:6.0f} MB", flush=True)
        rows += [summarise(s, system, runs[(s.name, system)], expected[s.name])
                 for system in systems if (s.name, system) in runs]
        if rows:
            write_report(rows, skipped, command, time.perf_counter() - t0, Path(args.out))
    if rows:
        print(Path(args.out).read_text())
    return 0 if all(r["count_ok"] for r in rows) and len(rows) == len(fstreams) * len(systems) else 1


if __name__ == "__main__":
    raise SystemExit(main())
