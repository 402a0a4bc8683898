"""Runs the workloads on every system and collects one row per (workload, system).

Why this shape: a row is the unit of the results table and CSV; each system runs in a fresh child
process on the same input file (so memory is per run and comparable), and every row carries the
oracle's expected count so a wrong count shows up next to its timing instead of hiding behind it.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

import orjson

from bench import procs, streams, thesis, workloads
from bench.workloads import Workload

MEMORY_PASS_RECORDS = 20_000  # the tracemalloc pass runs on a prefix: several windows, a fraction of the time


def load_average() -> str:
    """The 1/5/15-minute load averages: how much other work shared the machine."""
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


def machine_info() -> dict:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 1048576:.0f} GiB"
    except OSError:
        pass
    java = ""
    try:
        import subprocess

        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    except (OSError, IndexError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory": mem, "python": platform.python_version(),
            "java": java, "os": platform.platform()}


def _cached(path: Path, key: str, compute) -> object:
    """A per-input-file cache of derived figures (oracle counts, window occupancy)."""
    side = path.with_suffix(".meta.json")
    meta = orjson.loads(side.read_bytes()) if side.exists() else {}
    if key not in meta:
        meta[key] = compute()
        side.write_bytes(orjson.dumps(meta))
    return meta[key]


def select(profile: str, names: set[str] | None, sizes: list[int] | None, data_dir: Path) -> list[Workload]:
    thesis.write_query_files(workloads.QUERY_DIR)
    want_all = names is None
    qnames = None if want_all else {n for n in names if n in thesis.QUERIES}
    out: list[Workload] = []
    if want_all or qnames:
        out += workloads.thesis_workloads(profile, data_dir, qnames, sizes)
    cep_names = None if want_all or "cep" in names else {n for n in names if n in workloads.CEP_EPL}
    if want_all or "cep" in names or cep_names:
        out += workloads.cep_workloads(profile, data_dir, cep_names)
    if not want_all and "card_target" in names:
        out += workloads.cep_workloads(profile, data_dir, None, target=True)
    if want_all or "sweep" in names:
        out += workloads.sweep_workloads(profile, data_dir)
    return out


def _base_row(w: Workload, system: str) -> dict:
    return {"family": w.family, "workload": w.name, "query": w.query, "order": w.order, "n": w.n,
            "system": system, "note": w.note, **{f"param_{k}": v for k, v in w.params.items()}}


def _finish(row: dict, res: dict, expected: int | None) -> dict:
    row.update({k: v for k, v in res.items() if k not in ("system", "stderr")})
    run_s = res.get("run_s") or 0.0
    records = res.get("records") or row["n"]
    row["events_per_s"] = records / run_s if run_s > 0 else None
    median = row.get("run_s_median")
    row["events_per_s_median"] = records / median if median else None
    floor = res.get("floor_s")
    row["x_floor"] = run_s / floor if floor and floor > 0 else None
    comps = res.get("composites")
    row["expected"] = expected
    if comps is not None and comps > 0:
        row["us_per_composite"] = run_s / comps * 1e6
    if expected is not None and comps is not None:
        row["count_ok"] = comps == expected
    return row


def run_workload(w: Workload, systems: set[str], out_dir: Path, timeout: float, progress=None,
                 repeat: int = 1, base: str | None = None) -> list[dict]:
    path = w.make_input()
    records = None

    def recs():
        nonlocal records
        if records is None:
            records = streams.read_records(path)
        return records

    expected = _cached(path, f"expected:{w.query}", lambda: w.expected(recs())) if w.expected else None
    prefix_window = None
    if w.window is not None and "cep mem" in systems:
        prefix_window = _cached(path, f"window:{w.window}:{MEMORY_PASS_RECORDS}", lambda: streams.max_window_occupancy(
            recs()[:MEMORY_PASS_RECORDS], w.window))
    window_events = None
    if w.window is not None:
        window_events = _cached(path, f"window:{w.window}", lambda: streams.max_window_occupancy(recs(), w.window))
    records = None
    runs: list[tuple[str, object]] = []  # (system, () -> result), in the order of a round
    if "cep" in systems:
        runs.append(("cep", lambda: procs.run_cep_inprocess(w.patterns, path, timeout=timeout,
                                                            time_unit=w.time_unit)))
        if w.seq_patterns:
            runs.append(("cep SEQ", lambda: procs.run_cep_inprocess(w.seq_patterns, path, timeout=timeout,
                                                                    time_unit=w.time_unit)))
    if "cep" in systems and base is not None:
        env = procs.base_env(base)
        runs.append(("cep base", lambda: procs.run_cep_inprocess(w.patterns, path, timeout=timeout,
                                                                 time_unit=w.time_unit, env=env, cwd=base)))
    if "cep mem" in systems and w.family == "cep":
        runs.append(("cep mem", lambda: procs.run_cep_inprocess(
            w.patterns, path, timeout=timeout, time_unit=w.time_unit,
            extra=["--tracemalloc", "--limit", str(MEMORY_PASS_RECORDS)])))
    if "cep run" in systems and w.cli:
        def cli():
            res = procs.run_cep_cli(w.patterns, path, timeout=timeout, time_unit=w.time_unit)
            res["records"] = w.n
            return res

        runs.append(("cep run", cli))
    if "esper" in systems and w.epl is not None:
        runs.append(("esper", lambda: procs.run_esper(w.epl, path, timeout=timeout,
                                                      time_scale=w.esper_time_scale)))
        for system, epl in w.epl_variants.items():
            runs.append((system, lambda epl=epl: procs.run_esper(epl, path, timeout=timeout,
                                                                 time_scale=w.esper_time_scale)))

    # rounds interleave the systems (cep, Esper, cep, Esper, ...): on a shared machine a burst of other
    # work then slows one round of every system instead of all the runs of one
    results: dict[str, list[dict]] = {system: [] for system, _ in runs}
    errors: dict[str, str] = {}
    for rnd in range(max(1, repeat)):
        for system, fn in runs:
            if system in errors or (system == "cep mem" and rnd > 0):
                continue
            if progress is not None:
                progress.set_postfix_str(f"{w.name} [{system}] {rnd + 1}/{repeat}")
            try:
                results[system].append(fn())
            except procs.RunFailed as e:
                errors[system] = str(e)[-300:]

    rows: list[dict] = []
    for system, _ in runs:
        row = _base_row(w, system)
        row["window_events"] = window_events
        if system in errors:
            row["error"] = errors[system]
            row["expected"] = expected
            rows.append(row)
            continue
        got = results[system]
        res = min(got, key=lambda r: r.get("run_s") or 0)  # best of N: the least disturbed run
        row["repeats"] = len(got)
        times = [r.get("run_s") or 0 for r in got]
        row["run_s_all"] = " ".join(f"{t:.4f}" for t in times)
        row["run_s_median"] = statistics.median(times)
        cpus = [r.get("loop_cpu_s") or r["cpu_s"] for r in got if r.get("cpu_s")]
        if cpus:  # CPU time of the loop: what a loaded machine moves least (Esper's counts its JIT threads)
            row["cpu_s_best"] = min(cpus)
            row["cpu_s_median"] = statistics.median(cpus)
        if system == "cep mem":
            row["window_events"] = prefix_window
            bpe = res.get("bytes_per_event") or 0
            if prefix_window and bpe:
                row["window_mb"] = prefix_window * bpe / 1048576.0
                row["state_x_window"] = res["live_peak_mb"] / row["window_mb"]
                row["traced_x_window"] = res["traced_peak_mb"] / row["window_mb"]
            rows.append(_finish(row, res, None))
            continue
        # a wrong count in any round is a wrong count
        bad = next((r for r in got if expected is not None and r.get("composites") not in (None, expected)), None)
        rows.append(_finish(row, bad or res, expected))
    floor = next((r.get("floor_s") for r in rows if r["system"] == "cep" and r.get("floor_s")), None)
    for r in rows:
        if r["system"] == "cep run" and floor and r.get("run_s"):
            r["floor_s"] = floor  # the in-process run's parse-only floor: same file, same reader
            r["x_floor"] = r["run_s"] / floor
    return rows


def run_all(ws: list[Workload], systems: set[str], out_dir: Path, timeout: float, show_progress: bool = True,
            on_rows=None, repeat: int = 1, base: str | None = None) -> list[dict]:
    from tqdm import tqdm

    rows: list[dict] = []
    bar = tqdm(ws, desc="bench", unit="workload", disable=not show_progress)
    t0 = time.perf_counter()
    for w in bar:
        rows += run_workload(w, systems, out_dir, timeout, bar, repeat, base)
        if on_rows is not None:
            on_rows(rows)  # partial results survive an interrupted run
    bar.close()
    for r in rows:
        r["bench_elapsed_s"] = time.perf_counter() - t0
    return rows
