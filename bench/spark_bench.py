"""Throughput of the scale-out paths: Spark (local cores x state partitions) and ``cep run`` on Kafka.

Why a separate benchmark: these paths pay for a JVM, a broker and micro-batches, so their figures answer "when is
Spark worth it" rather than "how fast is the engine". Each Spark configuration runs in a fresh process (the number
of local cores is fixed per session): a warm-up query first, then the timed query over the whole input with
``availableNow``. The warm-up reads ``--warm-batches`` micro-batches of the timed query's size (``--files-per-batch``
files of ``--events / --files`` events each; 2 000 events without it): the first micro-batch of a session costs 10-20 s
of JIT and Python worker start, and the JVMs keep compiling hot code through the first micro-batches of that size (on
local-cluster every executor JVM compiles its own, and the JVMs' CPU per micro-batch falls over the first tens of
them: ``bench.spark_profile``'s ``batch_cpu``, bench/results/spark.md 2026-12-07e), so with one warm-up batch (the
default) the steady state below still holds part of that warm-up, and ``--warm-batches 10`` measures the JVMs
closer to how a query that runs for hours sees them. The timed row's ``batch_cpu_s`` is each micro-batch's CPU (whole tree), to see
whether the window is flat. Events/s =
input events / wall time of the timed query (startup excluded). The CLI Kafka figure is the wall time of one
``cep run -i kafka://...&until=end -o kafka://...`` process (Python start included), next to the same run on files.

Per core against ``cep run``: the runs are interleaved, a slot of ``cep run`` runs before every Spark run and one
after the last (``schedule``), and each Spark run's steady events per CPU s is divided by the ``cep run`` figure of
its two neighbouring slots (``pair_ratios``); the table at the end gives every pair's ratio and their median per
master. ``--rounds N`` runs every master N times (the masters' order turned each round); ``--baseline-root`` runs
another checkout's Spark and ``cep run`` beside this one's, each run paired with its own checkout's ``cep run``.

    python -m bench.spark_bench                       # default: 60 000 events, local[1]/local[2] x 2/8 partitions
    python -m bench.spark_bench --events 20000 --cores 2 --partitions 4
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATTERN = str(ROOT / "patterns" / "card_testing.pattern")


def make_events(n: int, keys: int = 1000, seed: int = 1) -> list[dict]:
    rnd = random.Random(seed)
    t = 1_700_000_000
    out = []
    for _ in range(n):
        t += rnd.randint(0, 2)
        amt = rnd.choice([rnd.uniform(1, 99), rnd.uniform(1, 99), rnd.uniform(100, 900)])
        out.append({"type": "Txn", "ts": t, "card": f"c{rnd.randrange(keys)}", "amount": round(amt, 2)})
    return out


def write_dir(d: Path, events: list[dict], files: int) -> None:
    d.mkdir(parents=True, exist_ok=True)
    size = -(-len(events) // files)
    for i in range(files):
        (d / f"part{i:03d}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events[i * size:(i + 1) * size]))


def tree_cpu_seconds(root: int) -> float:
    """CPU seconds (user + system) of a process and every live descendant, reaped children included.

    Why: on a shared machine wall time says little about "per core"; the CPU time that the driver, the JVMs
    and the Python workers spent is what a core-for-core comparison with ``cep run`` needs.
    """
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            raw = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()  # after "pid (comm) "
        stats[int(d)] = fields
        children.setdefault(int(fields[1]), []).append(int(d))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        f = stats.get(pid)
        if f is not None:  # utime stime cutime cstime: fields 14-17 of stat, 12-15 after "pid (comm) "
            total += int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])
        todo.extend(children.get(pid, []))
    return total / tick


def spark_home_for_cluster(work: Path) -> str:
    """PySpark's directory as SPARK_HOME, by symbolic links: local-cluster workers write into SPARK_HOME/work."""
    import pyspark

    d = work / "spark-home"
    if not d.exists():
        d.mkdir()
        for entry in Path(pyspark.__file__).parent.iterdir():
            if entry.name != "work":
                (d / entry.name).symlink_to(entry)
    return str(d)


class ProgressMarks:
    """A streaming query listener that records ``mark(progress JSON)`` at the end of every micro-batch.

    Why not PySpark's ``StreamingQueryListener``: its wrapper converts every progress event into Python objects
    field by field before the listener sees it (tens of Py4J round trips per micro-batch, and Py4J resolves each
    class name it is asked for by probing the driver JVM's class path: failed class loads over every jar). In
    this bench's steady state that conversion was the driver JVM's busiest thread (``spark-listener-group-
    streams``: about 0.2 CPU s per 10^5-event micro-batch on local-cluster, bench/results/spark.md) plus driver
    Python time, all counted as the Spark path's CPU, while ``cep spark`` runs no listener. This one is the
    same Java interface (Py4J's callback, as PySpark's) and asks for the progress JSON only: two calls.
    """

    def __init__(self, mark) -> None:
        self.mark = mark
        self.marks: list = []

    def add_to(self, spark) -> None:
        from pyspark import SparkContext
        from pyspark.java_gateway import ensure_callback_server_started

        gw = SparkContext._gateway
        ensure_callback_server_started(gw)
        wrapper = gw.jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(self)
        spark._jsparkSession.streams().addListener(wrapper)

    def onQueryStarted(self, jevent) -> None:  # noqa: N802 - the Java interface's names
        self.marks = []

    def onQueryProgress(self, jevent) -> None:  # noqa: N802
        self.marks.append(self.mark(jevent.progress().json()))

    def onQueryIdle(self, jevent) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, jevent) -> None:  # noqa: N802
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def spark_child(args: argparse.Namespace) -> None:
    """One Spark configuration (runs in its own process): warm up, then time the full query."""
    from cep.connectors.spark_cli import build_parser, start_query
    from cep.connectors.spark_session import make_session

    work = Path(args.work)
    master = args.cores if not args.cores.isdigit() else f"local[{args.cores}]"
    if master.startswith("local-cluster"):
        os.environ["SPARK_HOME"] = spark_home_for_cluster(work)
    spark = make_session(master, args.partitions, kafka=bool(args.bootstrap), app="cep-bench")

    batch_ms: list[int] = []
    cpu: list[float] = []
    listener = ProgressMarks(lambda progress: (json.loads(progress)["numInputRows"], tree_cpu_seconds(os.getpid())))
    listener.add_to(spark)

    def run(inp: str, tag: str, out: str | None = None) -> tuple[float, int, int]:
        extra = ["--max-per-batch", str(args.files_per_batch)] if args.files_per_batch else []
        a = build_parser().parse_args([PATTERN, "-i", str(inp), "-o", out or str(work / f"out-{tag}"),
                                       "--checkpoint", str(work / f"ck-{tag}"), "--available-now", *extra])
        t0, c0 = time.perf_counter(), tree_cpu_seconds(os.getpid())
        q = start_query(spark, a)
        q.awaitTermination()
        el = time.perf_counter() - t0
        cpu[:] = [tree_cpu_seconds(os.getpid()) - c0]
        if q.exception() is not None:
            raise SystemExit(f"query failed: {q.exception()}")
        batch_ms[:] = [json.loads(p.json)["durationMs"]["triggerExecution"] for p in q.recentProgress
                       if p["numInputRows"] > 0]
        if out is not None:
            return el, len(q.recentProgress), -1
        outs = sum(1 for f in (work / f"out-{tag}").glob("part-*") for _ in open(f))
        return el, len(q.recentProgress), outs

    run(str(work / "warm"), f"warm-{args.cores}-{args.partitions}")
    el, batches, outs = run(str(work / "in"), f"main-{args.cores}-{args.partitions}")
    row = {"path": "spark files->files", "cores": master, "partitions": args.partitions,
           "warm_batches": args.warm_batches,
           "events": args.events, "batches": batches, "outputs": outs, "seconds": round(el, 2),
           "events_per_s": round(args.events / el), "cpu_s": round(cpu[0], 1),
           "events_per_cpu_s": round(args.events / cpu[0]), "batch_ms": batch_ms}
    if args.files_per_batch and len(batch_ms) > 1:
        # steady state: every micro-batch after the first (which pays worker start and JIT)
        per_batch = args.events / args.files * args.files_per_batch
        steady = batch_ms[1:]
        row["steady_events_per_s"] = round(per_batch * len(steady) / (sum(steady) / 1000))
        row["median_batch_s"] = round(sorted(steady)[len(steady) // 2] / 1000, 2)
        data = [m for m in listener.marks if m[0] > 0]
        if len(data) > 1:  # CPU from the end of the first data batch to the end of the last one
            row["steady_cpu_s"] = round(data[-1][1] - data[0][1], 1)
            row["steady_events_per_cpu_s"] = round(per_batch * (len(data) - 1) / (data[-1][1] - data[0][1]))
            row["batch_cpu_s"] = [round(b[1] - a[1], 3) for a, b in pairwise(data)]
    print(json.dumps(row), flush=True)
    if args.bootstrap:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        tout = f"bench-out-{args.cores}-{args.partitions}"
        admin = KafkaAdminClient(bootstrap_servers=args.bootstrap)
        admin.create_topics([NewTopic(tout, 3, 1)])
        admin.close()
        el, batches, _ = run(f"kafka://{args.bootstrap}/{args.topic}?from=earliest&until=end",
                             f"kafka-{args.cores}-{args.partitions}", f"kafka://{args.bootstrap}/{tout}")
        print(json.dumps({"path": "spark kafka->kafka", "cores": args.cores, "partitions": args.partitions,
                          "events": args.events, "batches": batches, "seconds": round(el, 2),
                          "events_per_s": round(args.events / el)}), flush=True)
    spark.stop()


def _timed_cli(args: list[str], root: Path, python: str = sys.executable) -> tuple[float, str]:
    """Wall time and stderr of one ``cep`` process run from the checkout ``root`` (by ``python``)."""
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    import resource

    t0, ru0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([python, "-m", "cep.cli", *args], check=True, cwd=root, env=env,
                       capture_output=True, text=True)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CLI_CPU[:] = [ru1.ru_utime + ru1.ru_stime - ru0.ru_utime - ru0.ru_stime]
    return time.perf_counter() - t0, r.stderr


CLI_CPU: list[float] = [0.0]  # CPU seconds of the last ``_timed_cli`` process


def _late(stderr: str) -> int | None:
    import re

    m = re.search(r"cep: \d+ records \((\d+) late", stderr)
    return int(m.group(1)) if m else None


def cli_rows(events: list[dict], work: Path, broker, tin: str, lateness: str, root: Path = ROOT,
             tag: str = "", python: str = sys.executable) -> list[dict]:
    """``cep run`` file->file, Kafka->file and Kafka->Kafka; ``root``: the checkout whose cep runs."""
    rows = []
    inp = work / "cli-input.jsonl"
    inp.write_text("".join(json.dumps(e) + "\n" for e in events))
    el, err = _timed_cli(["run", PATTERN, "-i", str(inp), "-o", str(work / "cli.out"), "--lateness", lateness],
                         root, python)
    outs = sum(1 for _ in open(work / "cli.out"))
    rows.append({"path": f"cep run file->file{tag}", "events": len(events), "outputs": outs, "late": _late(err),
                 "seconds": round(el, 2), "events_per_s": round(len(events) / el),
                 "cpu_s": round(CLI_CPU[0], 1), "events_per_cpu_s": round(len(events) / CLI_CPU[0]),
                 "cpu_s_exact": CLI_CPU[0]})
    if broker is not None:
        src = f"kafka://{broker.bootstrap}/{tin}?from=earliest&until=end"
        el, err = _timed_cli(["run", PATTERN, "-i", src, "-o", str(work / "cli-kafka.out"), "--lateness", lateness],
                             root, python)
        outs = sum(1 for _ in open(work / "cli-kafka.out"))
        rows.append({"path": f"cep run kafka->file{tag}", "events": len(events), "outputs": outs,
                     "late": _late(err), "seconds": round(el, 2), "events_per_s": round(len(events) / el)})
        tout = broker.create_topic(f"bench-cli-out-{uuid.uuid4().hex[:6]}")
        el, err = _timed_cli(["run", PATTERN, "-i", src, "-o", f"kafka://{broker.bootstrap}/{tout}",
                              "--lateness", lateness], root, python)
        rows.append({"path": f"cep run kafka->kafka{tag}", "events": len(events), "late": _late(err),
                     "seconds": round(el, 2), "events_per_s": round(len(events) / el)})
    return rows


def start_broker(events: list[dict], work: Path, partitions: int = 3):
    from cep.connectors.broker import KafkaBroker
    from kafka import KafkaProducer

    b = KafkaBroker(work / "broker", partitions=partitions).start()
    tin = b.create_topic("bench-in")
    p = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=20, batch_size=256 * 1024)
    t0 = time.perf_counter()
    for e in events:
        p.send(tin, key=e["card"].encode(), value=json.dumps(e).encode())
    p.flush()
    p.close()
    prod = time.perf_counter() - t0
    return b, tin, {"path": "kafka-python produce (setup)", "events": len(events), "seconds": round(prod, 2),
                    "events_per_s": round(len(events) / prod)}


def schedule(masters: list[str], partitions: list[str], rounds: int, roots: int, repeat: int) -> list[tuple]:
    """The order of the runs: ``("cli", i)`` (the i-th slot of ``cep run`` runs) and ``("spark", master,
    partitions, root index, round)``, a slot before every Spark run and one after the last.

    Why interleaved: on a shared machine either side of the per-core ratio moves by a third within minutes (the
    same ``cep run`` read 38.7k and 59.7k events per CPU s in two quiet runs ten minutes apart), so a Spark figure
    is compared with the ``cep run`` figures measured just before and just after it, not with runs minutes away.
    Each round turns the order of the masters (and of the checkouts) by one, so no master always follows another.
    ``repeat``: at least this many ``cep run`` figures in all, spread over the slots.
    """
    spark = []
    for rnd in range(rounds):
        ms = masters[rnd % len(masters):] + masters[:rnd % len(masters)]
        rs = list(range(roots))
        rs = rs[rnd % roots:] + rs[:rnd % roots]
        spark += [("spark", m, p, r, rnd) for m in ms for p in partitions for r in rs]
    slots = len(spark) + 1
    per_slot = max(1, -(-repeat // slots))
    order: list[tuple] = []
    for i, run in enumerate(spark):
        order += [("cli", i)] * per_slot + [run]
    return order + [("cli", len(spark))] * per_slot


def _median(xs: list[float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def pair_ratios(results: list[dict]) -> list[dict]:
    """Each Spark run's steady events per CPU s over ``cep run``'s in the slots just before and just after it
    (same checkout): events / the mean of those runs' CPU seconds (the mean cost, not the mean rate)."""
    out = []
    for r in results:
        if "steady_events_per_cpu_s" not in r or "slot" not in r:
            continue
        near = [c for c in results if c.get("path", "").startswith("cep run file->file")
                and c.get("root") == r["root"] and c.get("slot") in (r["slot"], r["slot"] + 1)]
        if not near:
            continue
        cpu = sum(c["cpu_s_exact"] for c in near) / len(near)
        cli = near[0]["events"] / cpu
        out.append({"cores": r["cores"], "partitions": r["partitions"], "root": r["root"], "round": r["round"],
                    "spark": r["steady_events_per_cpu_s"], "cep_run": round(cli),
                    "cep_run_each": [c["events_per_cpu_s"] for c in near],
                    "ratio": round(100 * r["steady_events_per_cpu_s"] / cli, 1)})
    return out


def ratio_report(pairs: list[dict], roots: list[str]) -> str:
    """Per-pair ratios and their medians, per master and checkout (markdown)."""
    lines = ["", "Per core, each Spark run against the `cep run` runs just before and after it (same checkout):", "",
             "| master | state partitions | checkout | round | spark steady events per CPU s | cep run (before, after) "
             "| ratio |", "|---|---|---|---|---|---|---|"]
    for q in pairs:
        lines.append(f"| {q['cores']} | {q['partitions']} | {roots[q['root']]} | {q['round'] + 1} | {q['spark']:,} | "
                     f"{q['cep_run']:,} ({' / '.join(f'{x:,}' for x in q['cep_run_each'])}) | {q['ratio']} % |")
    lines += ["", "| master | state partitions | checkout | pairs | ratio per pair | median ratio |",
              "|---|---|---|---|---|---|"]
    seen: dict[tuple, list[float]] = {}
    for q in pairs:
        seen.setdefault((q["cores"], q["partitions"], q["root"]), []).append(q["ratio"])
    for (c, p, root), rs in seen.items():
        lines.append(f"| {c} | {p} | {roots[root]} | {len(rs)} | {' / '.join(f'{x} %' for x in rs)} | "
                     f"**{_median(rs):.1f} %** |")
    for root in sorted({q["root"] for q in pairs}):
        rs = [q["ratio"] for q in pairs if q["root"] == root]
        lines.append(f"| all | | {roots[root]} | {len(rs)} | min {min(rs)} %, max {max(rs)} % | "
                     f"**{_median(rs):.1f} %** |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.spark_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--files", type=int, default=12, help="input files (one micro-batch reads all of them)")
    ap.add_argument("--files-per-batch", type=int, default=0, help="files per micro-batch (0: all in one)")
    ap.add_argument("--warm-batches", type=int, default=1,
                    help="micro-batches of the warm-up query before the timed one (each of the timed query's size)")
    ap.add_argument("--cores", default="1,2",
                    help="comma list of local cores, or masters (local-cluster[2,1,1024]; ';' separates them)")
    ap.add_argument("--partitions", default="2,8", help="comma list of state partitions")
    ap.add_argument("--no-spark", action="store_true")
    ap.add_argument("--no-kafka", action="store_true")
    ap.add_argument("--lateness", default="120", help="--lateness of the cep run rows (default 120 s)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="at least this many cep run rows, spread over the slots between the Spark runs")
    ap.add_argument("--rounds", type=int, default=1,
                    help="Spark runs per master (and per checkout), each between two cep run slots")
    ap.add_argument("--topic-partitions", type=int, default=3, help="partitions of the input topic")
    ap.add_argument("--baseline-root", default=None,
                    help="a checkout of another cep version (with its own .venv, else this interpreter): its "
                         "cep run rows and Spark runs are interleaved with these")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        args.partitions = int(args.partitions)
        spark_child(args)
        return 0

    roots = [ROOT] + ([Path(args.baseline_root).resolve()] if args.baseline_root else [])
    names = ["this checkout"] + ([f"baseline {roots[1]}"] if args.baseline_root else [])

    def python_of(root: Path) -> str:
        venv = root / ".venv" / "bin" / "python"
        return str(venv) if root != ROOT and venv.exists() else sys.executable

    events = make_events(args.events, args.keys)
    results = []
    with tempfile.TemporaryDirectory(prefix="cep-spark-bench-") as tmp:
        work = Path(tmp)
        broker, tin = None, None
        if not args.no_kafka:
            broker, tin, row = start_broker(events, work, args.topic_partitions)
            results.append(row)
            print(json.dumps(row), flush=True)
        try:
            masters = args.cores.split(";") if ";" in args.cores or "[" in args.cores else args.cores.split(",")
            if args.no_spark:
                order = [("cli", 0)] * args.repeat
            else:
                order = schedule(masters, args.partitions.split(","), args.rounds, len(roots), args.repeat)
                write_dir(work / "in", events, args.files)
                warm = args.events // args.files * args.files_per_batch if args.files_per_batch else 2000
                n_warm = max(1, args.warm_batches)
                write_dir(work / "warm", make_events(warm * n_warm, args.keys, seed=2),
                          n_warm * max(1, args.files_per_batch))
            kafka_args = ["--bootstrap", broker.bootstrap, "--topic", tin] if broker else []
            n_spark = 0  # Spark runs so far: the i-th Spark run sits between cep run slots i and i + 1
            for step in order:
                if step[0] == "cli":
                    for ri, root in enumerate(roots):
                        tag = "" if ri == 0 else " (baseline)"
                        for row in cli_rows(events, work, broker, tin, args.lateness, root, tag,
                                            python_of(root)):
                            row.update(slot=step[1], root=ri, load=os.getloadavg()[0])
                            results.append(row)
                            print(json.dumps(row), flush=True)
                    continue
                _, c, p, ri, rnd = step
                root = roots[ri]
                env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
                load = os.getloadavg()[0]
                # each run its own checkpoints and outputs (a run of the same master must not resume the last)
                run_dir = work / f"run{n_spark}"
                run_dir.mkdir()
                for d in ("in", "warm"):
                    (run_dir / d).symlink_to(work / d)
                r = subprocess.run([python_of(root), "-m", "bench.spark_bench", "--child", "--cores", c,
                                    "--partitions", p, "--events", str(args.events), "--work", str(run_dir),
                                    "--files-per-batch", str(args.files_per_batch), "--files", str(args.files),
                                    "--warm-batches", str(args.warm_batches),
                                    *kafka_args],
                                   cwd=root, env=env, capture_output=True, text=True)
                lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
                if r.returncode != 0 or not lines:
                    print(r.stderr[-3000:], file=sys.stderr)
                    return 1
                for ln in lines:
                    row = json.loads(ln)
                    if row.get("path") == "spark files->files":
                        row.update(slot=n_spark, root=ri, round=rnd, load=load)
                        if ri:
                            row["path"] += " (baseline)"
                    results.append(row)
                    print(json.dumps(row), flush=True)
                n_spark += 1
        finally:
            if broker is not None:
                broker.stop()
    print("\n| path | master | state partitions | micro-batches | events | outputs | late | seconds | events/s | "
          "CPU s | events per CPU s | load |\n|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        load = f"{r['load']:.1f}" if "load" in r else "-"
        if "steady_events_per_s" in r:
            print(f"| {r['path']} (steady state, median batch {r['median_batch_s']} s) | {r['cores']} | "
                  f"{r['partitions']} | {len(r['batch_ms']) - 1} | - | - | - | - | {r['steady_events_per_s']:,} | "
                  f"{r.get('steady_cpu_s', '-')} | {r.get('steady_events_per_cpu_s', '-')} | {load} |")
        print(f"| {r['path']} | {r.get('cores', '-')} | {r.get('partitions', '-')} | {r.get('batches', '-')} | "
              f"{r['events']} | {r.get('outputs', '-') if r.get('outputs', -1) >= 0 else '-'} | "
              f"{r.get('late', '-')} | {r['seconds']} | {r['events_per_s']:,} | {r.get('cpu_s', '-')} | "
              f"{r.get('events_per_cpu_s', '-')} | {load} |")
    pairs = pair_ratios(results)
    if pairs:
        print(ratio_report(pairs, names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
