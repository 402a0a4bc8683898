"""``python -m bench``: generate the workloads, run cep and Esper on them, write results under bench/results.

Profiles: the default (meant to finish in under 5 minutes on a quiet 2-core machine) runs Q1-Q12 at
one size per query in both stream orders, four of the thesis' stream sizes made selective, the CEP
patterns at 5*10^4-2*10^5 events and the selectivity sweep; ``--quick`` is a 1-2 minute smoke version;
``--full`` runs larger sizes (the thesis' sizes for every query, the CEP patterns at 10^6 events).
``--workloads card_target`` is the issue's target run: card testing, 10^6 events over 10^4 cards.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

from bench import harness, procs, report, workloads

ALL = [*(f"q{i}" for i in range(1, 13)), "cep", "sweep", "card_target", *workloads.CEP_EPL]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", help=f"comma list of {', '.join(ALL)} (default: all)")
    ap.add_argument("--sizes", help="comma list of stream sizes for Q1-Q12 (replaces the profile's sizes)")
    prof = ap.add_mutually_exclusive_group()
    prof.add_argument("--quick", action="store_true", help="tiny sizes, 1-2 minutes")
    prof.add_argument("--full", action="store_true", help="larger sizes (tens of minutes)")
    ap.add_argument("--no-esper", action="store_true", help="do not build or run the Esper side")
    ap.add_argument("--no-cli", action="store_true", help="skip the `cep run` subprocess runs")
    ap.add_argument("--no-memory", action="store_true", help="skip the tracemalloc memory pass (CEP patterns)")
    ap.add_argument("--out", default=str(workloads.BENCH_DIR / "results"), help="results directory")
    ap.add_argument("--data", default=None, help="where generated streams go (default: OUT/data)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run before it is killed")
    ap.add_argument("--repeat", type=int, default=1, help="run each measurement N times, keep the fastest")
    ap.add_argument("--base", help="another checkout (e.g. `git worktree add /tmp/base main`): its cep runs "
                    "as system `cep base`, interleaved with the others, for before/after ratios in one run")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)

    profile = "quick" if args.quick else "full" if args.full else "default"
    names = None
    if args.workloads:
        names = {n.strip() for n in args.workloads.split(",") if n.strip()}
        unknown = names - set(ALL)
        if unknown:
            ap.error(f"unknown workload(s): {', '.join(sorted(unknown))} (choose from {', '.join(ALL)})")
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    out_dir = Path(args.out)
    data_dir = Path(args.data) if args.data else out_dir / "data"
    out_dir.mkdir(parents=True, exist_ok=True)
    data_dir.mkdir(parents=True, exist_ok=True)

    systems = {"cep", "cep run", "cep mem"}
    if args.no_memory:
        systems.discard("cep mem")
    if args.no_cli:
        systems.discard("cep run")
    if not args.no_esper:
        try:
            procs.build_esper()
            systems.add("esper")
        except (procs.RunFailed, OSError) as e:
            print(f"bench: Esper not available, running without it: {e}", file=sys.stderr)

    ws = harness.select(profile, names, sizes, data_dir)
    load_start = harness.load_average()
    t0 = time.perf_counter()
    rows = harness.run_all(ws, systems, out_dir, args.timeout, show_progress=not args.no_progress,
                           on_rows=lambda rs: report.write_csv(rs, out_dir / "results.csv"), repeat=args.repeat,
                           base=args.base)
    elapsed = time.perf_counter() - t0
    command = "python -m bench" + ("" if argv is None and len(sys.argv) <= 1 else " " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])))
    report.write_csv(rows, out_dir / "results.csv")
    made = report.plots(rows, out_dir)
    machine = {**harness.machine_info(), "load_start": load_start, "load_end": harness.load_average()}
    report.write_markdown(rows, machine, command, elapsed, out_dir / "results.md", made)
    print(f"bench: {len(rows)} runs in {elapsed:.0f} s; {out_dir / 'results.md'}")
    if out_dir.resolve() == (workloads.BENCH_DIR / "results").resolve():
        report.update_readme(workloads.BENCH_DIR / "README.md", out_dir / "results.md")
    for line in report.summary(rows):
        print(line)
    return 1 if any(r.get("count_ok") is False for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
