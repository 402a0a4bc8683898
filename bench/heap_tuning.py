"""``python -m bench.heap_tuning``: ``cep run`` on an output-heavy stream with glibc heap tuning off and on.

Why: on a stream whose matches outnumber its events by ~70x, glibc's default trimming made about a
third of ``cep run``'s time system time (pages given back and faulted in again); ``cep run`` now sets
the allocator's thresholds itself (``cep.commands.heap``).  This runs the same ``cep run`` as a
subprocess with ``CEP_HEAP_TUNING=0`` (glibc defaults) and without it (tuned), interleaved in one run,
plus the issue's workaround (``MALLOC_TRIM_THRESHOLD_`` in the environment), and reports per run: wall, user and system time, minor page faults and peak RSS (``os.wait4``, the
child's own ``resource.struct_rusage``), plus the match count (the same in both, or the run fails).
Results go to ``bench/results/heap_tuning.md``.

The stream: 20,000 ``Txn`` events one second apart over 20 cards, 60% small amounts, 5% large; the
pattern is card testing (two small purchases then a large one, same card) with a window of 30 minutes,
giving about 1.34 million matches.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path

import orjson

RESULTS = Path(__file__).resolve().parent / "results" / "heap_tuning.md"

PATTERN = """\
-- card testing with a wide window: an output-heavy run (~67 matches per event)
PATTERN card_testing_wide
  SEQ(Txn s1, Txn s2, Txn big)
  WHERE s1.amount < 100 AND s2.amount < 100 AND big.amount > 400
  PARTITION BY card
  WITHIN 30 min
  EMIT s1.card AS card, s1.ts AS first_ts, big.amount AS amount
"""

VARIANTS = {
    "glibc defaults (CEP_HEAP_TUNING=0)": {"CEP_HEAP_TUNING": "0"},
    "tuned (cep run default)": {},
    "env MALLOC_TRIM_THRESHOLD_=536870912, no tuning": {"CEP_HEAP_TUNING": "0",
                                                        "MALLOC_TRIM_THRESHOLD_": "536870912"},
}


def write_inputs(directory: Path, events: int = 20_000, keys: int = 20, seed: int = 7) -> tuple[Path, Path]:
    """The pattern file and the stream (deterministic for a seed)."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    pattern = directory / "card_testing_wide.pattern"
    pattern.write_text(PATTERN)
    stream = directory / f"cards_{events}_{keys}.jsonl"
    with stream.open("wb") as f:
        for i in range(events):
            u = rng.random()
            amount = round(rng.uniform(1, 99), 2) if u < 0.6 else (
                round(rng.uniform(401, 2000), 2) if u < 0.65 else round(rng.uniform(100, 400), 2))
            rec = {"type": "Txn", "ts": 1_700_000_000 + i, "card": f"card-{rng.randrange(keys)}",
                   "amount": amount}
            f.write(orjson.dumps(rec) + b"\n")
    return pattern, stream


def run_once(pattern: Path, stream: Path, extra_env: dict[str, str]) -> dict:
    """One ``cep run`` subprocess: its own rusage (user, sys, minor faults, peak RSS) and match count."""
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_TRIM_THRESHOLD_", "CEP_HEAP_TUNING")}
    env.update(extra_env)
    cmd = [sys.executable, "-m", "cep.cli", "run", str(pattern), "-i", str(stream), "-o", "/dev/null",
           "--no-progress"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"cep run failed ({proc.returncode}): {err.decode(errors='replace')}")
    matches = None
    for line in err.decode().splitlines():
        if "matches (+" in line:
            matches = int(line.split(":")[-1].split()[0])
    return {"wall": wall, "user": ru.ru_utime, "sys": ru.ru_stime, "minflt": ru.ru_minflt,
            "maxrss_mb": ru.ru_maxrss / 1024, "matches": matches}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.heap_tuning", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="runs per variant, interleaved (default 3)")
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--keys", type=int, default=20)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent / "results" / "data"))
    ap.add_argument("--out", default=str(RESULTS), help="markdown results file ('-': print only)")
    args = ap.parse_args(argv)
    pattern, stream = write_inputs(Path(args.data), args.events, args.keys)
    runs: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    for _ in range(args.repeat):
        for name, env in VARIANTS.items():
            r = run_once(pattern, stream, env)
            runs[name].append(r)
            print(f"{name:48} wall {r['wall']:6.2f} s  user {r['user']:6.2f} s  sys {r['sys']:5.2f} s  "
                  f"minflt {r['minflt']:>9,}  peak RSS {r['maxrss_mb']:6.1f} MB  matches {r['matches']:,}",
                  flush=True)
    counts = {r["matches"] for rs in runs.values() for r in rs}
    if len(counts) != 1:
        print(f"match counts differ between runs: {sorted(counts)}", file=sys.stderr)
        return 1
    best = {name: min(rs, key=lambda r: r["user"] + r["sys"]) for name, rs in runs.items()}
    base, tuned = (best[n] for n in list(VARIANTS)[:2])
    cpu = {n: b["user"] + b["sys"] for n, b in best.items()}
    lines = [
        "# cep run with glibc heap tuning off and on",
        "",
        f"`python -m bench.heap_tuning --repeat {args.repeat}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores, shared machine).",
        f"Stream: {args.events:,} events over {args.keys} keys, {counts.pop():,} matches, output to /dev/null.",
        f"Variants run interleaved; the best of {args.repeat} by user+sys time is shown.",
        "",
        "| variant | wall s | user s | sys s | user+sys s | minor faults | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, b in best.items():
        lines.append(f"| {name} | {b['wall']:.2f} | {b['user']:.2f} | {b['sys']:.2f} | {cpu[name]:.2f} | "
                     f"{b['minflt']:,} | {b['maxrss_mb']:.1f} |")
    lines += [
        "",
        f"Tuned / defaults: user+sys {cpu[list(VARIANTS)[1]] / cpu[list(VARIANTS)[0]]:.2f}x, "
        f"system time {tuned['sys'] / max(base['sys'], 1e-9):.2f}x, "
        f"minor faults {tuned['minflt'] / max(base['minflt'], 1):.3f}x, "
        f"peak RSS {tuned['maxrss_mb'] / base['maxrss_mb']:.2f}x.",
        "",
        "All runs:",
        "",
    ]
    for name, rs in runs.items():
        for r in rs:
            lines.append(f"- {name}: wall {r['wall']:.2f} s, user {r['user']:.2f} s, sys {r['sys']:.2f} s, "
                         f"{r['minflt']:,} minor faults, peak RSS {r['maxrss_mb']:.1f} MB")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out != "-":
        Path(args.out).write_text(text)
        print(f"written to {args.out}; command: {shlex.join(['python', '-m', 'bench.heap_tuning', *(argv or sys.argv[1:])])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
