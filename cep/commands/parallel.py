"""``cep run --workers N``: the run split by partition key over N forked processes (Flink's
parallelism after ``keyBy``), for a file input.

Why this shape (docs/design.md, "Parallel runs"): the parent compiles and plans once, then forks
N workers, which inherit the compiled patterns, the plans and Python's string hash seed.  Every
worker reads and decodes the WHOLE input, so each sees every record's time: the watermark,
lateness, expiry and the record positions (so the composite ids) are exactly a single run's.  A
(pattern, event) pair is indexed and matched only by the worker that owns it
(``cep.plan.partition.ownership``: hash of the pattern's partition key value mod N; a pattern
without a key is run whole by one worker); when the input may hold a retraction (its op field's
name appears in it: ``insert_only``, a scan before the fork) the other workers hold the event
under a shadow bit (``Engine(share=...)``), so what a retraction finds and which retractions are
bad stay a single run's too; when it cannot, they skip it right after the watermark move
(``Engine(shadow=False)``; a retraction there fails the run), and the summary's peak is the
workers' sum.  The parent builds worker 0's engine before the fork (the first engine of a process
pays the lazy imports and the code generator's memos), then forks.  Each worker runs the ordinary
loop (``cep.commands.run._Run.loop``) with its output sink on a pipe; the parent writes the
complete lines it reads from the pipes as they come (the spec leaves the order across matches
open), so output still appears before the workers wait for input.  Late records and bad-record reports are written by worker 0 (every worker sees the same
ones), its messages reach the parent through a control pipe, and the parent merges the summary.
A worker that dies, or ends without its result, fails the run (exit 1), never a short output.

An input smaller than ``MIN_BYTES`` (4 MB; ``CEP_WORKERS_MIN_BYTES``) runs in one process, and the
summary says so (``single_below``): the results are the same, only the time differs.

Not supported (refused at start, exit 1): stdin, pipes and Kafka inputs (every worker must read the
whole input), Kafka outputs, ``--checkpoint`` and ``--idle-advance``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import selectors
import signal
import struct
import sys
import time
import traceback
from typing import Any

import orjson

from cep.commands.heap import stream_gc
from cep.exit_codes import EXIT_OK, EXIT_OTHER, EXIT_RECORD
from cep.io.readers import SourceError, open_source
from cep.io.writers import SinkError, StreamSink

_SCAN = 1 << 20  # bytes per read of the insert-only scan
_HEAD = struct.Struct("<cI")  # a control message: kind (b"E" stderr text, b"R" the result) and length
_READ = 1 << 20


def _lines(o: Any) -> bool:
    """Whether the engines take the lines mode (``Engine(lines=True)``: the composite events of the
    fused paths come back as their encoded lines): the workers write files, stdout or their pipes,
    never a keyed sink (a Kafka output is refused, ``refusal``), as ``cep run``'s own engine does."""
    return not o.output.startswith("kafka://")


def refusal(o: Any) -> str | None:
    """Why ``--workers`` cannot run with these options (one line), or None."""
    if o.workers < 1:
        return f"--workers must be at least 1, got {o.workers}"
    if o.workers == 1:
        return None
    if o.input == "-":
        return "--workers needs a file input (-i FILE): each worker reads the whole input, stdin can be read once"
    if o.input.startswith("kafka://"):
        return "--workers reads files; a Kafka topic is split by its partitions (run one cep per consumer)"
    if os.path.exists(o.input) and not os.path.isfile(o.input):
        return f"--workers needs a regular file input: {o.input} can be read once (a pipe or a device)"
    if o.output.startswith("kafka://") or any(x and x.startswith("kafka://") for x in (o.late_output, o.errors)):
        return "--workers writes files or stdout, not Kafka"
    if o.checkpoint:
        return "--workers cannot be combined with --checkpoint in this version"
    if o.idle_advance:
        return "--workers cannot be combined with --idle-advance (a file input does not go quiet)"
    if o.test_stop_after is not None:
        return "--workers cannot be combined with the test stop hooks"
    return None


def _spellings(op_field: str) -> re.Pattern[bytes]:
    """Every way a JSON text can spell the string ``op_field`` (each character literal, as a
    ``\\uXXXX`` escape in either case, or, for the characters that have one, a short escape),
    between its quotes."""
    short = {'"': b'\\"', "\\": b"\\\\", "/": b"\\/", "\b": b"\\b", "\f": b"\\f", "\n": b"\\n",
             "\r": b"\\r", "\t": b"\\t"}
    parts = []
    for ch in op_field:
        units = [ord(ch)] if ord(ch) <= 0xFFFF else [0xD800 + ((ord(ch) - 0x10000) >> 10), 0xDC00 + ((ord(ch) - 0x10000) & 0x3FF)]
        alts = [b"".join(rb"\\u(?i:" + f"{u:04x}".encode() + b")" for u in units)]
        if ch in short:
            alts.append(re.escape(short[ch]))
        if ch not in '"\\' and ord(ch) >= 0x20:
            alts.append(re.escape(ch.encode("utf-8")))
        parts.append(b"(?:" + b"|".join(alts) + b")")
    return re.compile(b'"' + b"".join(parts) + b'"')


def insert_only(path: str, fmt: str, op_field: str) -> bool:
    """Whether no record of the file ``path`` can be a retraction: its op field's name appears
    nowhere in it, in any spelling (JSON lines: the quoted name, or any escaped form of it; CSV:
    the name's bytes, which a header cell naming that column contains).  False when unsure.

    Why: a worker keeps the events other workers own (shadow bits) only so that a retraction finds
    what it would find in one process; with none in the input it need not even filter them
    (``Engine(shadow=False)``: about a tenth of a worker's work on card testing).  The scan is one
    ``find`` per MB (about 0.1 s CPU for 86 MB), done once by the parent before it forks.  A file
    that grows meanwhile is still safe: a retraction reaching such a worker fails the run."""
    if fmt == "csv":
        if '"' in op_field:
            return False
        plain, spelled = op_field.encode("utf-8"), None
    else:
        plain, spelled = orjson.dumps(op_field), _spellings(op_field)
    keep = 2 + 12 * len(op_field)  # the longest spelling: a match across two reads is found
    tail = b""
    try:
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(_SCAN):
                data = tail + chunk if tail else chunk
                if plain in data:
                    return False
                if spelled is not None and b"\\" in data and spelled.search(data):
                    return False
                tail = data[-keep:]
    except OSError:
        return False
    return True


MIN_BYTES = 4 << 20  # a smaller input runs in one process (``single_below``); CEP_WORKERS_MIN_BYTES sets it


def single_below(o: Any) -> str | None:
    """Why this run of ``--workers N`` goes in one process (its input is smaller than
    ``MIN_BYTES``, or ``CEP_WORKERS_MIN_BYTES``), as a summary line; None to split it.

    Why: a split costs a fixed part (the insert-only scan, the fork, worker 0's engine built
    before it, the relay through pipes: about 0.05 s CPU) and every worker decodes the whole
    input, so on card testing a worker does about two thirds of one process's work per record;
    below a few MB the split saves less wall time than the start-up it adds to, and on a busy
    machine (no free core) it is slower.  Safe: the results of a split are by construction one
    process's (the same lines, ids and summary counts), so running one process changes nothing
    but the time (Flink would still run its parallel operators; there a job is long-lived)."""
    try:
        limit = int(os.environ.get("CEP_WORKERS_MIN_BYTES", MIN_BYTES))
        size = os.path.getsize(o.input)
    except (OSError, ValueError):
        return None
    if size >= limit:
        return None
    return (f"--workers {o.workers}: ran in one process: the input ({size:,} bytes) is smaller than {limit:,} bytes, "
            "where a split does not pay (the results are the same)")


def fewer(r: Any) -> str | None:
    """After set-up (patterns compiled and planned): when fewer than ``--workers`` workers would
    have any matching to do, run that many, and say so (a summary line); None when all would.

    Why: a pattern without a partition key runs whole in one worker (``ownership``: such patterns
    are dealt round robin), so with only such patterns at most one worker per pattern matches
    anything; a worker with nothing to match still decodes the whole input (about a third of one
    process's work on card testing) for nothing.  With one busy worker the run is one process's
    (``r.engine`` built here).  Safe: the results do not depend on the number of workers."""
    from cep.plan.partition import ownership

    o = r.o
    rules = ownership(r.patterns, o.workers)
    if any(not isinstance(rule, int) for rule in rules):
        return None
    busy = len(set(rules))
    if busy >= o.workers:
        return None
    r.o = dataclasses.replace(o, workers=busy)
    why = "no pattern has a partition key" if len(rules) == 1 else f"no pattern has a partition key and there are {len(rules)}"
    if busy > 1:
        return f"--workers {o.workers}: ran {busy} workers: {why} (each such pattern runs whole in one worker)"
    from cep.runtime.engine import Engine

    r.engine = Engine(r.patterns, lateness=r.lateness, plans=r.plans, lines=_lines(r.o))
    r.start_counts = {k: dict(v) for k, v in r.engine.matches_emitted.items()}
    return f"--workers {o.workers}: ran in one process: {why} (such a pattern runs whole in one worker)"


class _ControlWriter:
    """A worker's stderr: text framed onto its control pipe, written by the parent to its own."""

    def __init__(self, fd: int, tty: bool) -> None:
        self.fd = fd
        self.tty = tty

    def write(self, text: str) -> int:
        _send(self.fd, b"E", text.encode("utf-8", errors="replace"))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:  # a progress bar (worker 0) draws on the parent's terminal
        return self.tty


def _send(fd: int, kind: bytes, payload: bytes) -> None:
    data = _HEAD.pack(kind, len(payload)) + payload
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _worker(run: Any, me: int, workers: int, data_fd: int, ctl_fd: int, tty: bool, shadow: bool) -> int:
    """A worker's whole life after the fork: its engine and input, the ordinary loop, its result.
    ``shadow``: hold the events other workers own (the input may hold retractions).
    Returns the process's exit status."""
    from cep.runtime.engine import Engine

    run.err = _ControlWriter(ctl_fd, tty and me == 0)
    if me != 0:  # worker 0 reports bad records and writes late records; the others only count them
        run.report = False
        run.o = dataclasses.replace(run.o, progress=False)
        run.sinks.pop("late", None)
        run.sinks.pop("errors", None)
    run.sinks["output"] = StreamSink(os.fdopen(data_fd, "wb"), f"worker {me} pipe", close=True)
    try:
        if me != 0:  # worker 0's engine was built by the parent before the fork (``supervise``)
            run.engine = Engine(run.patterns, lateness=run.lateness, plans=run.plans, share=(me, workers), shadow=shadow,
                                lines=_lines(run.o))
        run.src = open_source(run.o.input, run.o.fmt)  # its own file offset
        with stream_gc():
            status = run.loop()
        run.finish()
    except (SinkError, SourceError) as e:
        run.err.write(f"cep: error: {e}\n")
        return EXIT_OTHER
    except Exception as e:  # noqa: BLE001 - RunError and internal errors: the parent fails the run
        from cep.commands.run import RunError

        if isinstance(e, RunError) or not os.environ.get("CEP_DEBUG"):
            run.err.write(f"cep: error: {e if isinstance(e, RunError) else f'{type(e).__name__}: {e}'}\n")
        else:
            run.err.write(traceback.format_exc())
        return EXIT_OTHER
    eng = run.engine
    _send(ctl_fd, b"R", orjson.dumps({
        "status": status, "records": run.records, "late": run.late, "bad": run.bad,
        "peak": eng.stats["peak_retained"], "counts": eng.matches_emitted}))
    return EXIT_OK


def _fork(run: Any, me: int, workers: int, tty: bool, shadow: bool) -> tuple[int, int, int]:
    """Start worker ``me``: (its pid, the read ends of its data and control pipes)."""
    data_r, data_w = os.pipe()
    ctl_r, ctl_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: never returns into the parent's code, never runs its exit handlers
        status = EXIT_OTHER
        try:
            os.close(data_r)
            os.close(ctl_r)
            signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C stops the parent, which stops the workers
            status = _worker(run, me, workers, data_w, ctl_w, tty, shadow)
        except BaseException:  # noqa: BLE001 - whatever happens, this process ends here
            try:
                os.write(2, f"cep: worker {me}: {traceback.format_exc()}".encode())
            except OSError:
                pass
        finally:
            os._exit(status)
    os.close(data_w)
    os.close(ctl_w)
    return pid, data_r, ctl_r


class Pool:
    """The parent's view of its workers: pids, pipes, the partial lines and results read so far."""

    def __init__(self) -> None:
        self.pids: list[int] = []
        self.tails: list[bytes] = []  # per worker, the bytes after its last complete output line
        self.ctl: list[bytes] = []  # per worker, unparsed control bytes
        self.results: list[dict | None] = []
        self.exits: dict[int, int] = {}  # worker -> wait status, once reaped

    def kill(self) -> None:
        """Stop every worker still running (a failed run), and reap them."""
        for w, pid in enumerate(self.pids):
            if w not in self.exits:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.reap()

    def reap(self) -> None:
        for w, pid in enumerate(self.pids):
            if w not in self.exits:
                self.exits[w] = os.waitpid(pid, 0)[1]


def _failure(w: int, workers: int, status: int) -> str:
    """The message for a worker that ended without its result ("": it reported its own error)."""
    if os.WIFEXITED(status) and os.waitstatus_to_exitcode(status) == EXIT_OTHER:
        return ""
    return _death(w, workers, status)


def _death(w: int, workers: int, status: int) -> str:
    how = (f"was killed by signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
           else f"exited with status {os.waitstatus_to_exitcode(status)}")
    return f"worker {w} of {workers} {how} before it finished: the output is incomplete"


def supervise(r: Any, pool: Pool) -> int:
    """Fork the workers of the run ``r`` (set up: patterns, plans, sinks), relay their output and
    messages until every one has ended, merge their results into ``r`` (counters, ``r.merged``).
    Returns the run's exit status; raises ``RunError`` when a worker failed (its message empty
    when the worker reported its own error)."""
    from cep.commands.run import RunError

    o, err = r.o, r.err
    r.src.close()  # each worker opens the input itself
    workers = o.workers
    out = r.sinks["output"]
    sys.stdout.flush()
    sys.stderr.flush()
    tty = bool(getattr(err, "isatty", None) and err.isatty())
    sel = selectors.DefaultSelector()
    t0 = time.perf_counter()
    shadow = not insert_only(o.input, o.fmt, o.op_field)
    # worker 0's engine, built before the fork: the first engine of a process pays the lazy imports
    # and fills the code generator's memos (about 50 ms for card testing, the next one about 4 ms),
    # so the workers inherit them instead of each paying them again
    from cep.runtime.engine import Engine

    r.engine = Engine(r.patterns, lateness=r.lateness, plans=r.plans, share=(0, workers), shadow=shadow,
                      lines=_lines(o))
    for w in range(workers):
        pid, data_fd, ctl_fd = _fork(r, w, workers, tty, shadow)
        pool.pids.append(pid)
        pool.tails.append(b"")
        pool.ctl.append(b"")
        pool.results.append(None)
        sel.register(data_fd, selectors.EVENT_READ, (w, True))
        sel.register(ctl_fd, selectors.EVENT_READ, (w, False))
    r.engine = None  # worker 0's: the parent's summary is the workers' merged results (``r.merged``)
    failed: str | None = None
    while sel.get_map():
        for key, _ in sel.select():
            w, is_data = key.data
            chunk = os.read(key.fd, _READ)
            if not chunk:
                sel.unregister(key.fd)
                os.close(key.fd)
                if not is_data and pool.results[w] is None and failed is None:
                    pool.exits[w] = os.waitpid(pool.pids[w], 0)[1]  # gone without its result
                    failed = _failure(w, workers, pool.exits[w])
                    pool.kill()  # the run has failed: the others need not finish
                continue
            if is_data:
                buf = pool.tails[w] + chunk
                cut = buf.rfind(b"\n") + 1  # complete lines only: workers' lines never interleave
                if cut:
                    out.write(buf[:cut])
                    out.flush()
                pool.tails[w] = buf[cut:]
                continue
            buf = pool.ctl[w] + chunk
            while len(buf) >= _HEAD.size:
                kind, n = _HEAD.unpack_from(buf)
                if len(buf) < _HEAD.size + n:
                    break
                payload = buf[_HEAD.size:_HEAD.size + n]
                buf = buf[_HEAD.size + n:]
                if kind == b"E":
                    err.write(payload.decode("utf-8", errors="replace"))
                    err.flush()
                else:
                    pool.results[w] = orjson.loads(payload)
            pool.ctl[w] = buf
    pool.reap()
    r.elapsed = time.perf_counter() - t0
    if failed is None:
        for w in range(workers):
            if pool.results[w] is None or pool.exits[w] != 0 or pool.tails[w]:
                failed = _failure(w, workers, pool.exits[w]) or _death(w, workers, pool.exits[w])
                break
    if failed is not None:
        raise RunError(failed)
    results: list[dict] = pool.results  # type: ignore[assignment]
    statuses = {res["status"] for res in results}
    first = results[0]
    if len(statuses) != 1 or any((res["records"], res["late"], res["bad"]) != (first["records"], first["late"], first["bad"])
                                 for res in results):
        raise RunError("the workers disagree on the input (records, late, bad or exit status): "
                       "the output may be wrong; please report this")
    r.records, r.late, r.bad = first["records"], first["late"], first["bad"]
    counts: dict[str, dict[str, int]] = {}
    for res in results:
        for name, c in res["counts"].items():
            row = counts.setdefault(name, {"+": 0, "-": 0})
            row["+"] += c["+"]
            row["-"] += c["-"]
    r.outputs = sum(c["+"] + c["-"] for c in counts.values())
    # with shadows every worker holds what one process holds; without, each holds its own share
    r.merged = (first["peak"] if shadow else sum(res["peak"] for res in results), counts)
    status = statuses.pop()
    if status not in (EXIT_OK, EXIT_RECORD):
        raise RunError(f"the workers ended with status {status}")
    return status
