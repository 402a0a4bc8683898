"""Where the CPU of a Spark micro-batch goes, on both sides: JVMs and Python workers (issue 11).

Why: ``bench.spark_bench`` says how the Spark path compares with ``cep run`` per CPU second; this says why. It runs
one ``cep spark`` query (files -> files, ``availableNow``, one file per micro-batch, after a warm-up query of one
micro-batch of the same size) and at the end of every micro-batch reads ``/proc``: user and system CPU seconds per
kind of process (driver Python, driver JVM, the local-cluster master and worker JVMs, executor JVMs, Python
workers) and per executor JVM thread (task threads, JIT compiler, GC). Steady state = the micro-batches after the
first. Optionally it looks inside each side:

- ``--jfr``: Java Flight Recorder on the executors (local-cluster) or the driver (local): JVM samples by the Spark
  operator class on the stack (the file source, Arrow to/from Python, shuffle, sort, state store, sink);
- ``--py-spy``: py-spy samples of the Python workers during the steady micro-batches, by cep / PySpark function;
- ``--gc-log``: the Python workers' garbage collections (a ``sitecustomize`` on their path logs, after each task's
  collection, CPython's per-generation counts, the CPU seconds spent collecting and the old generation's size).

Each micro-batch mark also records every Python worker's resident memory (``VmRSS``, ``VmHWM``, ``RssAnon`` from
``/proc/PID/status``): a soak (``--events 2000000 --files 40``) shows whether a long-running worker grows.

    python -m bench.spark_profile                                   # local-cluster[2,1,1024], 3 x 10^5 events
    python -m bench.spark_profile --jfr --py-spy --key-groups 16 --conf spark.sql.execution.arrow.maxRecordsPerBatch=50000
    python -m bench.spark_profile --master 'local[1]' --events 2000000 --files 40 --gc-log    # memory soak
    python -m bench.spark_profile --master 'local[1]' --pattern patterns/card_testing_run.pattern --keys 10000
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.spark_bench import PATTERN, ProgressMarks, make_events, spark_home_for_cluster, write_dir

KINDS = ("driver python", "driver JVM", "cluster master+worker JVMs", "executor JVMs", "python workers")


def _processes(faults: dict[int, int] | None = None) -> dict[int, tuple[int, str, float, float]]:
    """pid -> (parent pid, command line, user and system CPU seconds of itself and its reaped children);
    ``faults``, if given, gets pid -> minor page faults (of itself and its reaped children)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            raw = Path(f"/proc/{d}/stat").read_text()
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        f = raw[raw.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid ... utime stime cutime cstime
        out[int(d)] = (int(f[1]), cmd, (int(f[11]) + int(f[13])) / tick, (int(f[12]) + int(f[14])) / tick)
        if faults is not None:
            faults[int(d)] = int(f[7]) + int(f[8])
    return out


def _kind(pid: int, root: int, cmd: str) -> str:
    if pid == root:
        return "driver python"
    if "CoarseGrainedExecutorBackend" in cmd:
        return "executor JVMs"
    if "deploy.master.Master" in cmd or "deploy.worker.Worker" in cmd:
        return "cluster master+worker JVMs"
    if "java" in cmd.split(" ")[0]:
        return "driver JVM"
    return "python workers"


def _tree(root: int, procs: dict) -> list[int]:
    """``root`` and its live descendants."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    for pid, (ppid, *_rest) in procs.items():
        children[ppid].append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        if pid in procs:
            out.append(pid)
    return out


def python_workers(root: int) -> dict[int, float]:
    """The live Python worker processes of ``root``'s tree (PySpark daemons and the workers they fork): pid ->
    user + system CPU seconds."""
    procs = _processes()
    return {pid: round(procs[pid][2] + procs[pid][3], 2) for pid in _tree(root, procs)
            if _kind(pid, root, procs[pid][1]) == "python workers"}


MEMORY_FIELDS = ("VmRSS", "VmHWM", "RssAnon")  # resident now, its peak, and the anonymous (heap) part of it


def status_memory(text: str) -> list[float]:
    """``MEMORY_FIELDS`` in MB from the text of ``/proc/PID/status`` (0 for a field the kernel does not give)."""
    kb = dict.fromkeys(MEMORY_FIELDS, 0)
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in kb:
            kb[name] = int(value.split()[0])
    return [round(kb[f] / 1024, 1) for f in MEMORY_FIELDS]


def is_python_daemon(cmd: str) -> bool:
    """``cmd`` (a command line, arguments joined by spaces) is PySpark's daemon or a wrapper of it (``python -m
    pyspark.daemon``, ``-m cep.connectors.sparkdaemon``): the daemon and the workers it forks (same command line)."""
    args = cmd.split()
    return "-m" in args[:-1] and args[args.index("-m") + 1].endswith("daemon")


def python_worker_memory(root: int) -> dict[int, list[float]]:
    """The live PySpark daemons and Python workers of ``root``'s tree: pid -> ``MEMORY_FIELDS`` in MB.

    Why: a daemon that collects less garbage after each task (``cep.connectors.sparkdaemon``) must not let a
    long-running worker grow; its resident memory at the end of every micro-batch says whether it does."""
    procs = _processes()
    out = {}
    for pid in _tree(root, procs):
        if not is_python_daemon(procs[pid][1]):  # not the JVMs' launcher scripts
            continue
        try:
            out[pid] = status_memory(Path(f"/proc/{pid}/status").read_text())
        except OSError:  # ended since
            continue
    return out


def slope(ys: list[float]) -> float:
    """Least-squares growth per step of a series (0 for fewer than two points)."""
    n = len(ys)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(ys) / n
    return sum((x - mx) * (y - my) for x, y in enumerate(ys)) / sum((x - mx) ** 2 for x in range(n))


def batch_cpu(marks: list[dict[str, tuple[float, float, int]]]) -> list[dict[str, float]]:
    """CPU s (user + system) of each micro-batch between consecutive marks (``cpu_by_kind`` at each micro-batch's
    end), by kind of process.

    Why: the steady total averages the micro-batches; per micro-batch, a longer run shows whether the cost still
    falls (the JVMs' JIT and heap settle over the first ten or so) or grows (a worker that keeps more each batch).
    """
    return [{k: round(sum(b[k][:2]) - sum(a[k][:2]), 3) for k in b} for a, b in itertools.pairwise(marks)]


def memory_summary(series: list[dict[int, list[float]]]) -> dict:
    """Per worker pid over the marks of ``series`` (``python_worker_memory`` at each steady micro-batch's end):
    the marks it was alive at, its first / last / largest ``VmRSS``, its peak ``VmHWM``, and its ``VmRSS`` and
    ``RssAnon`` growth in MB per micro-batch (least squares; over the second half of its marks too: a worker
    that grows and stops is not the same as one that keeps growing)."""
    pids = dict.fromkeys(pid for m in series for pid in m)
    out = {}
    for pid in pids:
        rows = [m[pid] for m in series if pid in m]
        rss, anon = [r[0] for r in rows], [r[2] for r in rows]
        half = len(rss) // 2
        out[str(pid)] = {"marks": len(rows), "rss_first": rss[0], "rss_last": rss[-1], "rss_max": max(rss),
                         "hwm_max": max(r[1] for r in rows),
                         "rss_mb_per_batch": round(slope(rss), 3), "anon_mb_per_batch": round(slope(anon), 3),
                         "rss_mb_per_batch_2nd_half": round(slope(rss[half:]), 3)}
    return out


def cpu_by_kind(root: int) -> dict[str, tuple[float, float, int]]:
    """User and system CPU seconds and minor page faults of ``root``'s process tree by kind of process
    (``KINDS``)."""
    faults: dict[int, int] = {}
    procs = _processes(faults)
    totals = {k: [0.0, 0.0, 0] for k in KINDS}
    for pid in _tree(root, procs):
        _ppid, cmd, user, system = procs[pid]
        t = totals[_kind(pid, root, cmd)]
        t[0] += user
        t[1] += system
        t[2] += faults[pid]
    return {k: (u, s, n) for k, (u, s, n) in totals.items()}


# ``--gc-log``: put on the Python workers' path (a directory of its own); only the PySpark daemon's processes (and
# so the workers it forks) log. After every explicit ``gc.collect`` (the daemon's after each task) one JSON line to
# GC_LOG_DIR/gc-PID.jsonl: the generation asked, CPython's cumulative per-generation stats, the CPU seconds spent in
# collections of each generation (``gc.callbacks``), the old generation's object count and ``gc.garbage``.
GC_SITECUSTOMIZE = """\
import gc, json, os, sys, time

_argv = getattr(sys, "orig_argv", [])
if "-m" in _argv[:-1] and _argv[_argv.index("-m") + 1].endswith("daemon"):  # python -m pyspark.daemon (or cep's)
    _cpu, _start, _collect = [0.0, 0.0, 0.0], [0.0], gc.collect

    def _timed(phase, info):
        if phase == "start":
            _start[0] = time.process_time()
        else:
            _cpu[info["generation"]] += time.process_time() - _start[0]

    def _logged(generation=2):
        n = _collect(generation)
        line = {"at": time.time(), "asked": generation, "stats": gc.get_stats(), "cpu": _cpu,
                "old": len(gc.get_objects(2)), "garbage": len(gc.garbage)}
        with open(os.path.join(os.environ["GC_LOG_DIR"], f"gc-{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps(line) + "\\n")
        return n

    gc.callbacks.append(_timed)
    gc.collect = _logged
"""


def gc_summary(logs: dict[int, list[dict]], marks: list[float]) -> dict:
    """Per worker pid, from its ``--gc-log`` lines (``logs``) and the steady micro-batches' end times (``marks``,
    epoch s): the old generation's object count at each mark (its last line before it), and between the first and
    the last mark the explicit collections by generation asked, the collections, objects collected and CPU
    seconds per generation, the full collections CPython ran by itself (full ones minus the asked ones), and each
    full collection's micro-batch, objects freed and oldest generation after it."""
    out = {}
    for pid, lines in logs.items():
        at_mark = [max((ln for ln in lines if ln["at"] <= t), key=lambda ln: ln["at"], default=None) for t in marks]
        first, last = at_mark[0], at_mark[-1]
        if first is None or last is None or first is last:
            continue
        steady = [ln for ln in lines if first["at"] < ln["at"] <= last["at"]]
        # each full collection: the steady micro-batch it ran in (1 = the first after the first mark), the objects it
        # freed and the oldest generation's size after it (one-off garbage vs garbage made every batch)
        fulls = [[sum(t < ln["at"] for t in marks), ln["stats"][2]["collected"] - prev["stats"][2]["collected"],
                  ln["old"]] for prev, ln in zip([first, *steady], steady, strict=False)
                 if ln["stats"][2]["collections"] > prev["stats"][2]["collections"]]
        asked = collections.Counter(ln["asked"] for ln in steady)
        full = last["stats"][2]["collections"] - first["stats"][2]["collections"]
        out[str(pid)] = {
            "old_objects": [ln["old"] if ln else None for ln in at_mark],
            "asked": {str(g): n for g, n in sorted(asked.items())},
            "collections": [last["stats"][g]["collections"] - first["stats"][g]["collections"] for g in (0, 1, 2)],
            "collected": [last["stats"][g]["collected"] - first["stats"][g]["collected"] for g in (0, 1, 2)],
            "uncollectable": sum(st["uncollectable"] for st in last["stats"]), "garbage": last["garbage"],
            "cpu_s": [round(last["cpu"][g] - first["cpu"][g], 3) for g in (0, 1, 2)],
            "automatic_full": full - asked.get(2, 0), "fulls": fulls}
    return out


def read_gc_logs(d: Path) -> dict[int, list[dict]]:
    """The ``--gc-log`` lines under ``d``: pid -> its lines in order."""
    return {int(f.stem.split("-")[1]): [json.loads(ln) for ln in f.read_text().splitlines()]
            for f in sorted(d.glob("gc-*.jsonl"))}


# JVM work by the operator nearest the sampled frame (first rule that matches, scanning from the leaf)
JVM_CATEGORIES = (
    ("code generation (Janino compiling)", ("org.codehaus.", "CodeGenerator")),
    ("Arrow to/from Python", ("org.apache.arrow", ".python.", "ArrowWriter", "ArrowColumnVector", "api.python")),
    ("state store", ("org.rocksdb", ".state.", "StateStore")),
    ("sort", ("UnsafeExternalSorter", "UnsafeInMemorySorter", "SortExec", "RadixSort")),
    ("shuffle", (".shuffle.", "Shuffle", "network.", "io.netty")),
    ("file source", ("FileScan", "WholeText", "TextFileFormat", "HadoopFile", "LineRecordReader")),
    ("file sink", ("FileFormatWriter", "FileFormatDataWriter", "TextOutputWriter", "OutputCommitter")),
    ("generated code (projections, filters, explode)", ("GeneratedClass", "codegen", "expressions.")),
)


def _category(classes: list[str]) -> str:
    for c in classes:
        for name, marks in JVM_CATEGORIES:
            if any(m in c for m in marks):
                return name
    return "other: " + (classes[0].rsplit(".", 1)[0] if classes else "?")


def jvm_threads(root: int) -> dict[str, list[float]]:
    """[user, system] CPU seconds of the executor JVMs' and the driver JVM's threads, summed by thread name with
    digits dropped (``executor: Executor task launch worker``, ``driver: C2 CompilerThread``...); on a local
    master the driver JVM is the executor too (``driver:``)."""
    tick = os.sysconf("SC_CLK_TCK")
    procs = _processes()
    tree = _tree(root, procs)  # this query's processes only: other Spark jobs may run on the machine
    out: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for pid in tree:
        ppid, cmd = procs[pid][0], procs[pid][1]
        java = "java" in cmd.split(" ")[0]
        executor = "CoarseGrainedExecutorBackend" in cmd
        if not java or not (executor or ppid == root):
            continue
        side = "executor: " if executor else "driver: "
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            name = re.sub(r"[\d#-]+", "", raw[raw.index("(") + 1:raw.rindex(")")]).strip()
            f = raw[raw.rindex(")") + 2:].split()
            out[side + name][0] += int(f[11]) / tick
            out[side + name][1] += int(f[12]) / tick
        # processes the JVM forked and reaped (Hadoop's shell commands: ``chmod``...): their CPU, not a thread's
        f = Path(f"/proc/{pid}/stat").read_text()
        f = f[f.rindex(")") + 2:].split()
        out[side + "(reaped child processes)"][0] += int(f[13]) / tick
        out[side + "(reaped child processes)"][1] += int(f[14]) / tick
    return out


def jvm_allocated_bytes(spark) -> int | None:
    """Bytes the driver JVM's threads have allocated on the heap since it started (HotSpot's
    ``ThreadMXBean.getTotalThreadAllocatedBytes``, ended threads included), or None where not supported.

    Why: under load the CPU seconds of one run move by 10-20 % while a plan change moves the JVM's work by a few
    per cent; what the JVM allocates per micro-batch (plans, generated code, closures, serialized tasks) moves
    with its work but not with the machine's load."""
    try:
        return int(spark._jvm.java.lang.management.ManagementFactory.getThreadMXBean()
                   .getTotalThreadAllocatedBytes())
    except Exception:  # noqa: BLE001 - a JVM without it (or a refused reflective call): no figure
        return None


def jfr_profile(files: list[Path], since: float, top: int) -> dict:
    """JVM execution samples taken after ``since`` (epoch s): by operator category, by thread (digits dropped), by
    the leaf frame's class, and by method anywhere on the stack (inclusive: what a thread was inside of)."""
    from datetime import datetime

    cats: collections.Counter = collections.Counter()
    leaf: collections.Counter = collections.Counter()
    threads: collections.Counter = collections.Counter()
    incl: collections.Counter = collections.Counter()
    n = 0
    for f in files:
        r = subprocess.run(["jfr", "print", "--json", "--stack-depth", "128", "--events", "jdk.ExecutionSample",
                            str(f)], capture_output=True, text=True, check=True)
        for ev in json.loads(r.stdout)["recording"]["events"]:
            v = ev["values"]
            t = datetime.fromisoformat(re.sub(r"(\.\d{6})\d*", r"\1", v["startTime"]).replace("Z", "+00:00"))
            if t.timestamp() < since or not v.get("stackTrace"):
                continue
            frames = v["stackTrace"]["frames"]
            classes = [fr["method"]["type"]["name"].replace("/", ".").split("$$Lambda")[0] for fr in frames]
            n += 1
            cats[_category(classes)] += 1
            leaf[classes[0]] += 1
            thread = (v.get("sampledThread") or {}).get("javaName") or "?"
            threads[re.sub(r"[\d#-]+", "", thread).strip()] += 1
            methods = [f"{c.rsplit('.', 1)[-1]}.{fr['method']['name']}" for c, fr in zip(classes, frames, strict=True)]
            for m in dict.fromkeys(methods):
                incl[m] += 1
    return {"samples": n, "by_category": cats.most_common(), "by_thread": threads.most_common(top),
            "by_leaf_class": leaf.most_common(top), "inclusive": incl.most_common(4 * top)}


def pyspy_profile(raw: Path, top: int) -> dict:
    """py-spy collapsed stacks: by leaf function (self) and by every function on the stack (inclusive)."""
    self_: collections.Counter = collections.Counter()
    incl: collections.Counter = collections.Counter()
    n = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [fr.split(" (")[0] + " " + fr.split(" (")[1].split(":")[0].rsplit("/", 1)[-1]
                  if " (" in fr else fr for fr in stack.split(";")]
        frames = [fr for fr in frames if not fr.startswith(("process ", "thread "))]
        if not any(fr.startswith("main worker.py") for fr in frames):  # the daemon's idle loop, not work
            continue
        c = int(count)
        n += c
        self_[frames[-1]] += c
        for fr in dict.fromkeys(frames):
            incl[fr] += c
    return {"samples": n, "self": self_.most_common(top), "inclusive": incl.most_common(top)}


def child(args: argparse.Namespace) -> None:
    from cep.connectors.spark_cli import build_parser, start_query
    from cep.connectors.spark_session import make_session

    work = Path(args.work)
    extra = dict(kv.split("=", 1) for kv in args.conf)
    cluster = args.master.startswith("local-cluster")
    if cluster:
        os.environ["SPARK_HOME"] = spark_home_for_cluster(work)
    if args.jfr:
        from cep.connectors.spark_session import given_log_config, session_settings

        # JFR's profile settings with Java samples every ``--jfr-period`` ms (the JDK's profile.jfc, edited)
        jfc = Path(subprocess.run(["java", "-XshowSettings:properties", "-version"], capture_output=True,
                                  text=True).stderr.split("java.home = ")[1].split("\n")[0]) / "lib/jfr/profile.jfc"
        text = re.sub(r'(control="method-sampling-java-interval">)[^<]*', rf"\g<1>{args.jfr_period} ms",
                      jfc.read_text())
        (work / "sample.jfc").write_text(text)
        key = "spark.executor.extraJavaOptions" if cluster else "spark.driver.extraJavaOptions"
        # the JVM options the session would get (cep's JIT, collector and log configuration), and JFR
        base = session_settings(args.master, {}, log_config_given=given_log_config({}))[key]
        # deep stacks: Spark's are deeper than JFR's default 64 frames (the root side, the phase, was cut off)
        extra[key] = (f"{base} -XX:FlightRecorderOptions=stackdepth=1024 "
                      f"-XX:StartFlightRecording=settings={work}/sample.jfc")  # dumped by jcmd below
    spark = make_session(args.master, args.partitions, kafka=False, app="cep-profile", extra=extra)
    marks: list[dict] = []
    pyspy: list[subprocess.Popen] = []

    queries = [0]  # queries started: the warm-up, then the measured one

    def at_progress(progress: str) -> None:
        p = json.loads(progress)
        if p["batchId"] == 0:
            marks.clear()  # a new query (the warm-up's marks are not steady state)
            queries[0] += 1
        marks.append({"rows": p["numInputRows"], "cpu": cpu_by_kind(os.getpid()), "at": time.time(),
                      "alloc": jvm_allocated_bytes(spark),
                      "threads": jvm_threads(os.getpid()), "workers": python_workers(os.getpid()),
                      "memory": python_worker_memory(os.getpid()),
                      "durationMs": p["durationMs"], "state": p["stateOperators"][0] if p["stateOperators"]
                      else {}})
        # from the end of the measured query's first data batch: the steady batches only (as the CPU figures)
        if args.py_spy and not pyspy and queries[0] == 2 and p["numInputRows"] > 0:
            for pid, (_pp, cmd, _u, _s) in _processes().items():
                if "pyspark.daemon" in cmd:
                    pyspy.append(subprocess.Popen(
                        ["py-spy", "record", "--pid", str(pid), "--subprocesses", "--nonblocking",
                         "--format", "raw", "--rate", "50", "-o", str(work / f"pyspy-{pid}.txt")],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    # the bench's light listener (one Py4J call for the progress JSON; see ``ProgressMarks``)
    ProgressMarks(at_progress).add_to(spark)

    def run(inp: Path, tag: str):
        a = build_parser().parse_args([args.pattern, "-i", str(inp), "-o", str(work / f"out-{tag}"), "--checkpoint",
                                       str(work / f"ck-{tag}"), "--available-now", "--max-per-batch", "1",
                                       *(["--key-groups", str(args.key_groups)] if args.key_groups else [])])
        q = start_query(spark, a)
        q.awaitTermination()
        if q.exception() is not None:
            raise SystemExit(f"query failed: {q.exception()}")

    run(work / "warm", "warm")
    run(work / "in", "main")
    for p in pyspy:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
    if args.jfr:  # each JVM's recording, while it runs (a local master's JVM lives until this process ends)
        procs = _processes()
        for pid in _tree(os.getpid(), procs):
            if _kind(pid, os.getpid(), procs[pid][1]) in ("driver JVM", "executor JVMs"):
                subprocess.run(["jcmd", str(pid), "JFR.dump", f"filename={work}/jfr-{pid}.jfr"],
                               capture_output=True, check=True)
    spark.stop()
    data = [m for m in marks if m["rows"] > 0]
    # per kind: [user, system] CPU seconds of the steady micro-batches
    steady = {k: [round(data[-1]["cpu"][k][i] - data[0]["cpu"][k][i], 2) for i in (0, 1)] for k in KINDS}
    faults = {k: data[-1]["cpu"][k][2] - data[0]["cpu"][k][2] for k in KINDS}
    out = {"master": args.master, "partitions": args.partitions, "key_groups": args.key_groups, "conf": args.conf,
           "batch_events": args.events // args.files, "steady_batches": len(data) - 1,
           "steady_cpu_user_sys": steady, "steady_cpu_total": round(sum(sum(v) for v in steady.values()), 2),
           "steady_minor_faults": faults,
           "batch_cpu": batch_cpu([m["cpu"] for m in data]),
           "durationMs": [m["durationMs"] for m in data],
           # live Python worker pids at the end of each steady micro-batch: new pids = workers started anew
           "python_workers": [m["workers"] for m in data],
           # each Python worker's memory at the end of each steady micro-batch: pid -> VmRSS, VmHWM, RssAnon (MB)
           "python_workers_memory_fields": list(MEMORY_FIELDS),
           "python_workers_memory_mb": [m["memory"] for m in data],
           "python_workers_rss_mb_total": [round(sum(v[0] for v in m["memory"].values()), 1) for m in data],
           "python_workers_memory_summary": memory_summary([m["memory"] for m in data]),
           "state": [{k: m["state"].get(k) for k in ("numRowsTotal", "numRowsUpdated", "allUpdatesTimeMs",
                                                      "commitTimeMs", "memoryUsedBytes", "customMetrics")}
                     for m in data]}
    if len(data) > 1 and data[0]["alloc"] is not None:
        # the driver JVM's heap allocation per steady micro-batch (on local masters: all the JVM work)
        out["driver_jvm_alloc_mb_per_batch"] = round((data[-1]["alloc"] - data[0]["alloc"]) / 2**20 / (len(data) - 1), 1)
    if len(data) > 1:
        a, b = data[0]["threads"], data[-1]["threads"]
        delta = {k: [round(v[0] - a.get(k, [0, 0])[0], 2), round(v[1] - a.get(k, [0, 0])[1], 2)] for k, v in b.items()}
        out["jvm_threads_user_sys"] = sorted(((k, v) for k, v in delta.items() if sum(v) > 0.01),
                                             key=lambda kv: -sum(kv[1]))
    if cluster:  # what the executors logged (their stderr files under SPARK_HOME/work), warm-up query included
        logs = list((work / "spark-home" / "work").glob("*/*/stderr"))
        out["executor_log_lines"] = sum(len(f.read_text(errors="replace").splitlines()) for f in logs)
    if args.jfr:
        out["jfr"] = jfr_profile(sorted(work.glob("jfr-*.jfr")), data[0]["at"], args.top)
    if args.py_spy:
        out["py_spy"] = pyspy_profile_all(work, args.top)
    if args.gc_log:
        out["gc_log"] = gc_summary(read_gc_logs(work / "gc-log"), [m["at"] for m in data])
    print(json.dumps(out), flush=True)


def pyspy_profile_all(work: Path, top: int) -> dict:
    merged = work / "pyspy-all.txt"
    merged.write_text("".join(f.read_text() for f in sorted(work.glob("pyspy-*.txt")) if f != merged))
    return pyspy_profile(merged, top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.spark_profile", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=300_000)
    ap.add_argument("--files", type=int, default=3, help="input files = micro-batches")
    ap.add_argument("--master", default="local-cluster[2,1,1024]")
    ap.add_argument("--partitions", type=int, default=2, help="state partitions (spark.sql.shuffle.partitions)")
    ap.add_argument("--key-groups", type=int, default=None,
                    help="cep spark --key-groups (default: cep's, one key group per state partition)")
    ap.add_argument("--pattern", default=PATTERN, help="the query's pattern (on the bench's Txn events)")
    ap.add_argument("--keys", type=int, default=1000, help="distinct cards in the events")
    ap.add_argument("--conf", action="append", default=[], help="extra Spark setting KEY=VALUE (repeatable)")
    ap.add_argument("--jfr", action="store_true", help="JVM profile (Java Flight Recorder)")
    ap.add_argument("--jfr-period", type=int, default=10, help="JFR's Java sampling period, ms")
    ap.add_argument("--py-spy", action="store_true", help="Python worker profile (needs py-spy on PATH)")
    ap.add_argument("--gc-log", action="store_true", help="log the Python workers' garbage collections")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--keep", help="copy the py-spy stacks (collapsed) to this file")
    ap.add_argument("--keep-jfr", help="copy the JVMs' recordings (jfr-PID.jfr) into this directory")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args)
        return 0
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="cep-spark-profile-") as tmp:
        work = Path(tmp)
        write_dir(work / "in", make_events(args.events, keys=args.keys), args.files)
        write_dir(work / "warm", make_events(args.events // args.files, keys=args.keys, seed=2), 1)  # one batch's size
        path = [str(root)]
        if args.gc_log:
            (work / "gc-log").mkdir()
            (work / "gc-site").mkdir()
            (work / "gc-site" / "sitecustomize.py").write_text(GC_SITECUSTOMIZE)
            path.insert(0, str(work / "gc-site"))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, os.environ.get("PYTHONPATH", "")]),
               "GC_LOG_DIR": str(work / "gc-log")}
        cmd = [sys.executable, "-m", "bench.spark_profile", "--child", "--work", str(work), *(argv or sys.argv[1:])]
        r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
        if r.returncode != 0 or not lines:
            # the JVMs' stack frames aside, so the cause (a Python traceback, "query failed: ...") survives the cut
            text = "\n".join(ln for ln in r.stderr.splitlines() if not ln.lstrip().startswith(("at ", "... ")))
            print(text[-6000:], file=sys.stderr)
            return 1
        print(lines[-1])
        if args.keep_jfr:
            import shutil

            Path(args.keep_jfr).mkdir(parents=True, exist_ok=True)
            for f in work.glob("jfr-*.jfr"):
                shutil.copy(f, Path(args.keep_jfr) / f.name)
        if args.keep and (work / "pyspy-all.txt").is_file():
            Path(args.keep).write_text((work / "pyspy-all.txt").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
