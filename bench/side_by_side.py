"""cep and Esper side by side on one stream: the same file, rounds interleaved, counts against the oracle.

Why: the absence, strategy and Kleene benches (``bench.absence``, ``bench.kleene``) measure cep
in-process against itself (the pattern with and without its gap element); a user choosing an engine
wants the same composite events from Esper on the same input. This module adds Esper as one more
system to those benches. Each round runs cep's measured ``cep run`` loop (``bench.run_cep``: reader,
engine, writer, the end of input deciding every pending match) and every EPL form in fresh processes
(``procs.run_cep_inprocess`` and ``procs.run_esper``, the one home for running each system), on the same
JSON-lines file, so per-event cost, peak RSS and the count compare like for like; each count is checked
against the bench's oracle. An EPL form is either exact (the same composite events on every stream the
bench makes) or the closest EPL can say, with what differs in its note: never a figure made up.
"""

from __future__ import annotations

import csv
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from bench import procs

EPL_DIR = procs.BENCH_DIR / "epl"


@dataclass(frozen=True)
class EsperForm:
    """One EPL statement file computing (or approximating) a cep pattern's composite events."""

    system: str  # the row's label: "esper", "esper match_recognize", ...
    epl: Path
    exact: bool  # the same composite events as cep on the bench's streams, by construction
    note: str  # how the EPL maps onto cep's semantics, and for an inexact form what differs
    type_map: tuple[tuple[str, str], ...] = ()  # record type -> EPL event type (Order is an EPL keyword)
    timeout_s: float | None = None  # a form known to blow up (quadratic) gets a bound; the row says so


@dataclass(frozen=True)
class Comparison:
    """A cep pattern and its EPL forms; ``end_advance_ms`` moves Esper's clock past its last timers at
    the end of the input (the counterpart of cep deciding every pending match there)."""

    workload: str
    pattern: str
    forms: tuple[EsperForm, ...]
    end_advance_ms: int = 0


def esper_unavailable() -> str | None:
    """Why Esper cannot run here (no Java or Maven, a failed build), or None once it is built."""
    try:
        procs.build_esper()
    except (procs.RunFailed, OSError) as e:
        return str(e)
    return None


def write_jsonl(records: list[dict], path: Path) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def _matches(path: str) -> list[dict]:
    with open(path, "rb") as f:
        return [orjson.loads(line)["match"] for line in f if line.strip()]


def compare(c: Comparison, records: list[dict], expected: int, data_dir: Path, repeat: int = 1,
            timeout: float = 1800, check: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """Run cep and every EPL form of ``c`` on ``records`` for ``repeat`` interleaved rounds.

    Returns one row per system: the counts seen, whether they equal ``expected``, the loop's best wall
    and CPU time, per-event CPU cost and throughput over ``len(records)`` input records, peak RSS of the
    run with the least CPU, and for Esper rows cep's throughput over this form's (by CPU time: the
    machine is shared, so wall time also counts other work's turns). ``check``, when given, is applied to the ``match``
    objects each run writes (a figure such as an aggregate that the count alone would not catch).
    """
    n = len(records)
    data_dir.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"\W+", "_", c.workload)
    stream = data_dir / f"{slug}_{n}.jsonl"
    if not stream.exists():
        write_jsonl(records, stream)
    pattern = data_dir / f"{slug}.pattern"
    pattern.write_text(c.pattern)

    def run_cep(out: str) -> dict:
        return procs.run_cep_inprocess([pattern], stream, output=out, timeout=timeout)

    def esper(form: EsperForm) -> Callable[[str], dict]:
        return lambda out: procs.run_esper(form.epl, stream, output=out, timeout=form.timeout_s or timeout,
                                           end_advance_ms=c.end_advance_ms, type_map=dict(form.type_map))

    systems: list[tuple[str, Callable[[str], dict], str]] = [("cep", run_cep, "the `cep run` loop")]
    systems += [(f.system, esper(f), ("exact: " if f.exact else "closest form: ") + f.note) for f in c.forms]
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in systems}
    failed: dict[str, str] = {}
    for _ in range(repeat):
        for name, fn, _ in systems:
            if name in failed:
                continue
            out = "/dev/null"
            if check is not None:
                fd, out = tempfile.mkstemp(prefix=f"cep-{slug}-", suffix=".jsonl")
                os.close(fd)
            try:
                res = fn(out)
                if check is not None:
                    check(_matches(out))
            except procs.RunFailed as e:
                failed[name] = str(e).splitlines()[0].split(": ", 1)[0][:200]  # "timed out after 600 s"
                print(f"  {c.workload} n={n} {name}: {failed[name]}", flush=True)
                continue
            finally:
                if out != "/dev/null":
                    os.unlink(out)
            runs[name].append(res)
            print(f"  {c.workload} n={n} {name}: {res['composites']} (oracle {expected}) loop {res['run_s']:.2f} s "
                  f"cpu {res['cpu_s']:.2f} s rss {res['peak_rss_mb']:.0f} MB", flush=True)
    rows = []
    cep_best = min(r["cpu_s"] for r in runs["cep"])
    for name, _, note in systems:
        if not runs[name]:
            rows.append({"workload": c.workload, "n": n, "system": name, "runs": 0, "composites": None,
                         "oracle": expected, "count_ok": None, "failed": failed[name], "note": note})
            continue
        best = min(runs[name], key=lambda r: r["cpu_s"])
        counts = sorted({r["composites"] for r in runs[name]})
        rows.append({
            "workload": c.workload, "n": n, "system": name, "runs": len(runs[name]),
            "composites": ",".join(map(str, counts)), "oracle": expected, "count_ok": counts == [expected],
            "loop_wall_s": round(min(r["run_s"] for r in runs[name]), 3), "loop_cpu_s": round(best["cpu_s"], 3),
            "us_per_event": round(best["cpu_s"] / n * 1e6, 2), "events_per_cpu_s": round(n / best["cpu_s"]) if best["cpu_s"] else None,
            "peak_rss_mb": round(best["peak_rss_mb"], 1),
            # a tiny run can read 0.00 CPU s (the clock's resolution): no ratio then, rather than a crash
            "cep_over_system": round(best["cpu_s"] / cep_best, 2) if name != "cep" and cep_best else None,
            "note": note,
        })
    return rows


PREAMBLE = ("cep = the `cep run` loop (`bench.run_cep`: reader, engine, writer; the end of input decides every "
            "pending match) in a fresh process; Esper 8.9.0 = `bench/esper`'s runner (same file, its own JSON "
            "reader, external clock set to each record's time, then moved past the last timers at the end) in a "
            "fresh JVM. Both write JSON lines. Loop = from the first record to the last output; its wall time "
            "(best of the runs, rounds interleaved) and its CPU time (the whole process: for the JVM every "
            "thread, JIT compilers and collector included), us/event = loop CPU s / input records, cep/Esper "
            "throughput = Esper's loop CPU time / cep's (above 1: cep faster); CPU time, because the machine "
            "is shared and wall time also counts other work's turns. Peak RSS = the process's VmHWM (JVM with "
            "-Xmx4g, SerialGC).")


def table(rows: list[dict]) -> list[str]:
    """The markdown table of ``compare`` rows; notes are numbered below it (they are long)."""
    notes: list[str] = []
    lines = ["| workload | events | system | composites (oracle) | ok | loop wall s | loop CPU s | us/event (CPU) | "
             "events per CPU s | cep/Esper throughput | peak RSS MB | semantics |",
             "|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if r["note"] not in notes:
            notes.append(r["note"])
        if r["count_ok"] is None:
            lines.append(f"| {r['workload']} | {r['n']:,} | {r['system']} | - ({r['oracle']:,}) | - | "
                         f"{r['failed']} | | | | | | [{notes.index(r['note']) + 1}] |")
            continue
        ratio = f"{r['cep_over_system']:.2f}x" if r["cep_over_system"] is not None else "-"
        per_cpu_s = f"{r['events_per_cpu_s']:,}" if r["events_per_cpu_s"] is not None else "-"
        lines.append(f"| {r['workload']} | {r['n']:,} | {r['system']} | {r['composites']} ({r['oracle']:,}) | "
                     f"{'yes' if r['count_ok'] else '**NO**'} | {r['loop_wall_s']:.2f} | {r['loop_cpu_s']:.2f} | "
                     f"{r['us_per_event']:.2f} | {per_cpu_s} | {ratio} | {r['peak_rss_mb']:.0f} | "
                     f"[{notes.index(r['note']) + 1}] |")
    lines.append("")
    lines += [f"[{i}] {note}" for i, note in enumerate(notes, 1)]
    return lines


def report_section(rows: list[dict], skipped: bool, missing: str | None, csv_path: Path, preamble: str = PREAMBLE,
                   load_start: str = "") -> list[str]:
    """The "Side by side with Esper" section of a bench's markdown (and its CSV beside it)."""
    lines = ["", "## Side by side with Esper", ""]
    if skipped:
        lines.append("Not run (`--no-esper`).")
    elif missing is not None:
        lines.append(f"**Esper not run:** {missing}")
    else:
        lines += [preamble, "", *table(rows)]
        write_csv(rows, csv_path)
    lines += ["", f"Load average (1, 5, 15 min) at the start: {load_start}; at the end: {load_average()}."]
    return lines


def write_csv(rows: list[dict], path: Path) -> None:
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
