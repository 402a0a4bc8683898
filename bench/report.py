"""results.csv, results.md and the PNG plots from the rows of a benchmark run.

Why ratios next to absolute figures: the targets are relative (cep vs Esper on the same stream, cep vs
its own parse-only floor, time per composite event as output grows), and absolute times on a shared
2-core machine move from run to run while ratios measured in the same run move much less.
"""

from __future__ import annotations

import csv
from pathlib import Path

CSV_FIELDS = ["family", "workload", "query", "order", "n", "system", "expected", "composites", "count_ok",
              "records", "run_s", "run_s_median", "run_s_all", "floor_s", "x_floor", "events_per_s",
              "events_per_s_median", "cpu_s", "cpu_s_best", "cpu_s_median", "us_per_composite", "p50_us", "p99_us",
              "peak_rss_mb", "base_rss_mb", "peak_heap_mb", "peak_retained", "final_retained", "state_size",
              "window_events", "compile_s", "wall_s", "param_x", "param_key_domain", "error", "note"]


def write_csv(rows: list[dict], path: Path) -> None:
    extra = sorted({k for r in rows for k in r} - set(CSV_FIELDS))
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=CSV_FIELDS + extra, extrasaction="ignore")
        wr.writeheader()
        for r in rows:
            wr.writerow(r)


def _f(v, fmt: str = "{:,.0f}") -> str:
    if v is None or v == "":
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    try:
        return fmt.format(v)
    except (ValueError, TypeError):
        return str(v)


def _by(rows: list[dict]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in rows:
        out.setdefault(r["workload"], {})[r["system"]] = r
    return out


def _count_cell(r: dict | None) -> str:
    if r is None:
        return "-"
    if r.get("error"):
        return "failed"
    c = _f(r.get("composites"))
    if r.get("count_ok") is False:
        c += " (≠)"
    return c


def _ratio(a, b) -> str:
    if not a or not b:
        return "-"
    return f"{a / b:.2f}x"


def _cpu_ratio(c: dict | None, e: dict | None, key: str) -> str:
    """Throughput ratio from CPU time of the loop (Esper's: every JVM thread): Esper's time / cep's."""
    if not c or not e or not c.get(key) or not e.get(key):
        return "-"
    return f"{e[key] / c[key]:.2f}x"


def _base_ratio(b: dict | None, e: dict | None) -> str:
    """``cep base`` (another checkout, ``--base``) over Esper, best (median)."""
    if not b or not e or b.get("error") or e.get("error"):
        return "-"
    return (f"{_ratio(b.get('events_per_s'), e.get('events_per_s'))} "
            f"({_ratio(b.get('events_per_s_median'), e.get('events_per_s_median'))})")


def _lat(r: dict | None) -> str:
    if r is None or r.get("error") or r.get("p50_us") is None:
        return "-"
    return f"{r['p50_us']:.0f} / {r['p99_us']:.0f}"


def comparison_table(rows: list[dict], family: str) -> list[str]:
    groups = _by([r for r in rows if r["family"] == family])
    lines = ["| workload | expected | cep | Esper | cep ev/s best (median) | Esper ev/s best (median) | "
             "cep/Esper best | cep/Esper median | cep/Esper CPU best (median) | cep base/Esper best (median) | "
             "cep p50/p99 µs | Esper p50/p99 µs | cep peak RSS MB | Esper peak RSS MB (heap) | "
             "SEQ: cep / Esper pattern count | SEQ: cep / Esper pattern ev/s | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, sysrows in groups.items():
        c, e = sysrows.get("cep"), sysrows.get("esper")
        s, es = sysrows.get("cep SEQ"), sysrows.get("esper SEQ")
        b = sysrows.get("cep base")
        any_row = c or e or s or es
        cps = c.get("events_per_s") if c else None
        eps = e.get("events_per_s") if e else None
        cpm = c.get("events_per_s_median") if c else None
        epm = e.get("events_per_s_median") if e else None
        erss = "-"
        if e and not e.get("error"):
            erss = f"{e.get('peak_rss_mb', 0):,.0f} ({e.get('peak_heap_mb', 0):,.0f})"
        crss = _f(c.get("peak_rss_mb")) if c and not c.get("error") else "-"
        seq_counts = seq_eps = ""
        if s or es:
            seq_counts = f"{_count_cell(s)} / {_count_cell(es)}"
            seq_eps = (f"{_f(s.get('events_per_s')) if s else '-'} / "
                       f"{_f(es.get('events_per_s')) if es and not es.get('error') else '-'}")
        lines.append(
            f"| {name} | {_f(any_row.get('expected'))} | {_count_cell(c)} | {_count_cell(e)} | "
            f"{_f(cps)} ({_f(cpm)}) | {_f(eps)} ({_f(epm)}) | {_ratio(cps, eps)} | {_ratio(cpm, epm)} | "
            f"{_cpu_ratio(c, e, 'cpu_s_best')} ({_cpu_ratio(c, e, 'cpu_s_median')}) | {_base_ratio(b, e)} | "
            f"{_lat(c)} | {_lat(e)} | {crss} | {erss} | {seq_counts} | "
            f"{seq_eps} | {any_row.get('note', '')} |")
    return lines


def cep_table(rows: list[dict]) -> list[str]:
    groups = _by([r for r in rows if r["family"] == "cep"])
    lines = ["| workload | system | composites (expected) | time s | parse-only floor s | x floor | events/s | "
             "p50/p99 µs | peak RSS MB | peak retained events | max events in one window |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, sysrows in groups.items():
        for system in ("cep", "cep run", "esper", "esper join"):
            r = sysrows.get(system)
            if r is None:
                continue
            if r.get("error"):
                lines.append(f"| {name} | {system} | failed: {r['error'][:120]} | | | | | | | | |")
                continue
            comp = "-" if r.get("composites") is None else _count_cell(r)
            lines.append(
                f"| {name} | {system} | {comp} ({_f(r.get('expected'))}) | {_f(r.get('run_s'), '{:.2f}')} | "
                f"{_f(r.get('floor_s'), '{:.2f}')} | {_f(r.get('x_floor'), '{:.2f}')} | "
                f"{_f(r.get('events_per_s'))} | {_lat(r)} | {_f(r.get('peak_rss_mb'))} | "
                f"{_f(r.get('peak_retained'))} | {_f(r.get('window_events'))} |")
    return lines


def memory_table(rows: list[dict]) -> list[str]:
    lines = ["| workload | engine state peak MB (live) | traced peak MB (incl. transient) | events in the fullest window "
             "| those events as read, MB | state / window events | traced / window events "
             "| retained events after each tenth of the prefix |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["system"] != "cep mem":
            continue
        if r.get("error"):
            lines.append(f"| {r['workload']} | failed: {r['error'][:100]} | | | | | | |")
            continue
        dec = r.get("retained_deciles") or []
        lines.append(f"| {r['workload']} | {_f(r.get('live_peak_mb'), '{:.2f}')} | "
                     f"{_f(r.get('traced_peak_mb'), '{:.2f}')} | {_f(r.get('window_events'))} | "
                     f"{_f(r.get('window_mb'), '{:.2f}')} | {_f(r.get('state_x_window'), '{:.2f}x')} | "
                     f"{_f(r.get('traced_x_window'), '{:.2f}x')} | {' '.join(str(d) for d in dec)} |")
    return lines


def sweep_table(rows: list[dict]) -> list[str]:
    lines = ["| workload | composites | cep time s | cep µs/composite | cep marginal µs/composite | "
             "Esper time s | Esper µs/composite | Esper marginal µs/composite |",
             "|---|---|---|---|---|---|---|---|"]
    groups = _by([r for r in rows if r["family"] == "sweep"])
    prev: dict[str, tuple[float, float]] = {}
    last_query = None
    for name, sysrows in groups.items():
        query = next(iter(sysrows.values()))["query"]
        if query != last_query:
            prev = {}  # marginal cost only between points of the same query
            last_query = query
        cells = [name]
        c = sysrows.get("cep")
        cells.append(_count_cell(c) if c else "-")
        for system in ("cep", "esper"):
            r = sysrows.get(system)
            if r is None or r.get("error") or not r.get("composites"):
                cells += ["-", "-", "-"]
                continue
            t, n = r["run_s"], r["composites"]
            marg = "-"
            if system in prev and n > prev[system][1]:
                marg = f"{(t - prev[system][0]) / (n - prev[system][1]) * 1e6:.2f}"
            prev[system] = (t, n)
            cells += [f"{t:.2f}", f"{t / n * 1e6:.2f}", marg]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def summary(rows: list[dict]) -> list[str]:
    out = []
    bad = [r for r in rows if r.get("count_ok") is False]
    failed = [r for r in rows if r.get("error")]
    ok = [r for r in rows if r.get("count_ok")]
    out.append(f"- counts: {len(ok)} runs equal the oracle, {len(bad)} differ, {len(failed)} failed"
               + ("" if not bad else ": " + "; ".join(f"{r['workload']} [{r['system']}] "
                                                     f"{r.get('composites')} vs {r.get('expected')}" for r in bad)))
    for r in rows:
        if r["system"] == "cep mem" and r.get("state_x_window"):
            out.append(f"- memory ({r['workload']}): engine state peak {r['state_x_window']:.2f}x the events of "
                       f"the fullest window (target <= 2x: {'met' if r['state_x_window'] <= 2 else 'NOT met'})")
    for r in rows:
        if r["family"] == "cep" and r["query"] == "card_testing" and r["system"] in ("cep", "cep run") \
                and not r.get("error"):
            eps = r.get("events_per_s") or 0
            xf = r.get("x_floor") or 0
            out.append(f"- card testing ({r['workload']}, {r['system']}; the target is set at 10^6 events): {eps:,.0f} events/s "
                       f"(target >= 50,000: {'met' if eps >= 50_000 else 'NOT met'}), {xf:.2f}x the parse-only "
                       f"floor (issue 15's target <= 5x: {'met' if xf and xf <= 5 else 'NOT met'}; "
                       f"issue 6's first aim <= 3x: {'met' if xf and xf <= 3 else 'NOT met'})")
    groups = _by([r for r in rows if r["family"] == "thesis"])
    pairs = [(s["cep"], s["esper"]) for s in groups.values() if s.get("cep") and s.get("esper")
             and not s["cep"].get("error") and not s["esper"].get("error")]
    if pairs:
        def at_least(key: str) -> int:
            return sum((c.get(key) or 0) >= (e.get(key) or 0) for c, e in pairs)

        lessmem = sum((c.get("peak_rss_mb") or 0) < (e.get("peak_rss_mb") or 0) for c, e in pairs)
        below = ", ".join(f"{c['workload']} {c['events_per_s'] / e['events_per_s']:.2f}x" for c, e in pairs
                          if (c.get("events_per_s") or 0) < (e.get("events_per_s") or 0)) or "none"
        based = [(s["cep base"], s["esper"]) for s in groups.values() if s.get("cep base") and s.get("esper")
                 and not s["cep base"].get("error") and not s["esper"].get("error")]
        if based:
            base_ok = sum((b.get("events_per_s") or 0) >= (e.get("events_per_s") or 0) for b, e in based)
            base_med = sum((b.get("events_per_s_median") or 0) >= (e.get("events_per_s_median") or 0)
                           for b, e in based)
            base_below = ", ".join(f"{b['workload']} {b['events_per_s'] / e['events_per_s']:.2f}x" for b, e in based
                                   if (b.get("events_per_s") or 0) < (e.get("events_per_s") or 0)) or "none"
            out.append(f"- thesis Q1-Q12, `cep base` (--base, the same run): >= Esper's on {base_ok} of "
                       f"{len(based)} (best), {base_med} of {len(based)} (median); below Esper (best): {base_below}")
        cpu_at_most = sum((c.get("cpu_s_best") or 0) <= (e.get("cpu_s_best") or 0) for c, e in pairs)
        out.append(f"- thesis Q1-Q12: cep throughput >= Esper's on {at_least('events_per_s')} of {len(pairs)} "
                   f"workloads (best of {pairs[0][0].get('repeats', 1)}), on {at_least('events_per_s_median')} of "
                   f"{len(pairs)} (median), on {cpu_at_most} of {len(pairs)} by CPU time (best); below Esper "
                   f"(best): {below}; peak RSS below Esper's on {lessmem} of {len(pairs)}")
    return out


def write_markdown(rows: list[dict], machine: dict, command: str, elapsed: float, path: Path,
                   plots: list[str]) -> None:
    lines = ["# Benchmark results", "",
             f"Command: `{command}` ({elapsed:.0f} s). Machine: {machine.get('cpu')}, {machine.get('cores')} cores, "
             f"{machine.get('memory')}; Python {machine.get('python')}; {machine.get('java')}; load average "
             f"{machine.get('load_start', '-')} at the start, {machine.get('load_end', '-')} at the end (the "
             "machine is shared: compare the ratios, measured in one run with the systems interleaved per "
             "round).", "",
             "## Summary", "", *summary(rows), ""]
    if any(r["family"] == "cep" for r in rows):
        lines += ["## CEP patterns (patterns/) on synthetic streams", "",
                  "`cep` = the `cep run` loop in-process (same reader, engine and writer; the floor is the same "
                  "reader's parse-only pass in the same process); `cep run` = the command as a subprocess, "
                  "wall time including interpreter start, imports and compilation; Esper = EPL patterns "
                  "with `every` on each element (all matches), time from the first record to the last, its "
                  "floor = its own parse-only pass. Output goes to /dev/null as JSON lines in every system.",
                  "", *cep_table(rows), ""]
        if any(r["system"] == "cep mem" for r in rows):
            lines += ["Memory pass (separate run with tracemalloc, the first "
                      "20,000 records): the engine's retained state (live traced memory after a full "
                      "`gc.collect()`, sampled every 1,024 records and at the end, maximum: retained "
                      "events, indexes, leaf tuples) against the size of the events of the fullest window "
                      "as the reader makes them (Event + dict; the target is <= 2x); beside it the raw "
                      "traced peak, which also counts per-record garbage (outputs, range lists) and the "
                      "free lists where CPython keeps freed small tuples; and the retained events over the "
                      "run (flat = bounded by the window).", "",
                      *memory_table(rows), ""]
    if any(r["family"] == "thesis" for r in rows):
        lines += ["## Thesis Q1-Q12 (Table 4.1)", "",
                  "cep: AND patterns with the inequalities in WHERE; Esper: appendix A.2.2's joins with "
                  "`#keepall` windows (nothing expires, as in the thesis). On temporally ordered streams also "
                  "the SEQ form: `qN_seq.pattern` in cep, and in Esper a pattern with `every` on each element "
                  "(the automaton plan: one instance per partial match). Counts are composite events, one per tuple of input events, in every system "
                  "(also for the projected Q7-Q12: neither cep nor Esper removes duplicates after projection). "
                  "Peak RSS is the whole process (Python interpreter ~20 MB, JVM); Esper's used heap in "
                  "parentheses.", "", *comparison_table(rows, "thesis"), ""]
    if any(r["family"] == "sweep" for r in rows):
        lines += ["## Selectivity sweep (section 4.5.2)", "",
                  "Q1 and Q4 at a fixed size each; the joining fraction x grows, so does the output. Constant "
                  "delay means the marginal time per extra composite event stays flat as output grows.", "", *sweep_table(rows), ""]
    for p in plots:
        lines.append(f"![{p}]({p})")
    path.write_text("\n".join(lines) + "\n")


def plots(rows: list[dict], out_dir: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    made = []
    groups = _by([r for r in rows if r["family"] == "thesis"])
    names = [n for n, s in groups.items() if s.get("cep") and not s["cep"].get("error")]
    if names:
        fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.45), 4.5))
        xs = range(len(names))
        cep = [groups[n]["cep"].get("events_per_s") or 0 for n in names]
        esp = [(groups[n].get("esper") or {}).get("events_per_s") or 0 for n in names]
        ax.bar([x - 0.2 for x in xs], cep, 0.4, label="cep")
        ax.bar([x + 0.2 for x in xs], esp, 0.4, label="Esper")
        ax.set_yscale("log")
        ax.set_ylabel("input events / s")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(names, rotation=75, ha="right", fontsize=7)
        ax.legend()
        ax.set_title("Thesis Q1-Q12: throughput")
        fig.tight_layout()
        fig.savefig(out_dir / "thesis_throughput.png", dpi=110)
        plt.close(fig)
        made.append("thesis_throughput.png")
        fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.45), 4.5))
        cm = [groups[n]["cep"].get("peak_rss_mb") or 0 for n in names]
        em = [(groups[n].get("esper") or {}).get("peak_rss_mb") or 0 for n in names]
        ax.bar([x - 0.2 for x in xs], cm, 0.4, label="cep")
        ax.bar([x + 0.2 for x in xs], em, 0.4, label="Esper")
        ax.set_ylabel("peak RSS, MiB")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(names, rotation=75, ha="right", fontsize=7)
        ax.legend()
        ax.set_title("Thesis Q1-Q12: peak memory (whole process)")
        fig.tight_layout()
        fig.savefig(out_dir / "thesis_memory.png", dpi=110)
        plt.close(fig)
        made.append("thesis_memory.png")
    sweep = _by([r for r in rows if r["family"] == "sweep"])
    if sweep:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
        queries = sorted({next(iter(s.values()))["query"] for s in sweep.values()})
        for system, query in ((sy, q) for sy in ("cep", "esper") for q in queries):
            label = f"{'cep' if system == 'cep' else 'Esper'} {query.upper()}"
            pts = [(s[system]["composites"], s[system]["run_s"]) for s in sweep.values()
                   if s.get(system) and not s[system].get("error") and s[system].get("composites")
                   and s[system]["query"] == query]
            if not pts:
                continue
            pts.sort()
            a1.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=label)
            a2.plot([p[0] for p in pts], [p[1] / p[0] * 1e6 for p in pts], "o-", label=label)
        a1.set_xlabel("composite events")
        a1.set_ylabel("time, s")
        a1.set_title("selectivity sweep: time")
        a2.set_xscale("log")
        a2.set_xlabel("composite events")
        a2.set_ylabel("µs per composite event")
        a2.set_title("time per composite event")
        a1.legend()
        a2.legend()
        fig.tight_layout()
        fig.savefig(out_dir / "sweep.png", dpi=110)
        plt.close(fig)
        made.append("sweep.png")
    cep_rows = _by([r for r in rows if r["family"] == "cep"])
    if cep_rows:
        names = list(cep_rows)
        fig, ax = plt.subplots(figsize=(9, 4))
        xs = range(len(names))
        for off, system in ((-0.3, "cep"), (-0.1, "cep run"), (0.1, "esper"), (0.3, "esper join")):
            vals = [(cep_rows[n].get(system) or {}).get("events_per_s") or 0 for n in names]
            ax.bar([x + off for x in xs], vals, 0.2, label=system)
        ax.axhline(50_000, color="k", ls="--", lw=0.8, label="50k events/s target")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(names, rotation=20, ha="right", fontsize=7)
        ax.set_ylabel("input events / s")
        ax.set_title("CEP patterns: throughput")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out_dir / "cep_throughput.png", dpi=110)
        plt.close(fig)
        made.append("cep_throughput.png")
    return made


BEGIN = "<!-- BEGIN RESULTS"
END = "<!-- END RESULTS -->"


def update_readme(readme: Path, results_md: Path, rel_dir: str = "results/") -> bool:
    """Paste the latest results.md into README.md between the markers (image links made relative)."""
    if not readme.exists():
        return False
    text = readme.read_text()
    a = text.find(BEGIN)
    b = text.find(END)
    if a < 0 or b < a:
        return False
    a = text.index("\n", a) + 1
    body = results_md.read_text().split("\n", 1)[1].lstrip("\n")  # drop the "# Benchmark results" title
    body = body.replace("## ", "### ").replace("](", "](" + rel_dir)
    readme.write_text(text[:a] + body + text[b:])
    return True
