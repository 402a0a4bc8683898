"""The run loop of ``cep run``: one source, one engine, sinks, checkpoints, a summary.

Why it is one flat loop over batches: the per-record path is measured (bench/).  The source
hands out what it has ready (``Source.take``: one read's complete lines, at most ``BATCH``
records, never past the next tick); each record costs one decode, the batch one
``Engine.push_batch`` (a plain batch of JSON lines: parsed in one pass, then one
``Engine.push_records``, which checks the records in the engine's own loop) and, only when it completed matches, their encoding and one flush, so
every composite event is written before the reader waits for more input (docs/language.md
section 4) and a busy input costs one write per batch, not per record.  Everything else
(checkpoints, the progress bar, the test hook's stop) runs on a "tick" every few hundred
records, and a batch ends at a tick, so checkpoints fall on the same records as one record at
a time.  Bad and late records leave through exceptions (``BatchInterrupted`` carries the
outputs of the records before one), which cost nothing on the common path.

Exit statuses (docs/language.md section 6): 0 ok, 2 pattern errors, 3 bad record (unless
``--on-error skip``), 1 anything else.  Output written before an error stays
written: sinks are flushed before every exit.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import IO, Any, NoReturn

from cep import codegen
from cep.commands.heap import setup_gc, stream_gc, tune_heap
from cep.errors import BatchInterrupted, LateEventError, PatternError, UnknownRetractionError
from cep.exit_codes import EXIT_OK, EXIT_OTHER, EXIT_PATTERN, EXIT_RECORD, EXIT_SIMULATED_CRASH
from cep.io.paths import PathClash, Role, check_checkpoint_path, check_roles
from cep.io.protocol import Sink, Source
from cep.io.readers import (
    BATCH,
    BadRecord,
    BadRow,
    BadSeek,
    CsvSource,
    InsertBatch,
    JsonlSource,
    SourceError,
    csv_decoder,
    line_pairs,
    make_decoder,
    no_fast_path,
    open_source,
)
from cep.io.writers import (
    SinkError,
    StreamSink,
    encode_output,
    encode_outputs,
    encode_record,
    make_key_fn,
    open_sink,
    raw_line,
)
from cep.records import record
from cep.units import check_time_unit, parse_duration

TICK = 256  # records between housekeeping checks
LINES = True  # JSON lines files and stdin take the raw-lines path (``_Run.loop``; tests compare it with the pairs path)
FUSED = True  # ... and their plain batches parsed in one pass, checked in the engine's loop (``Engine.push_records``; tests compare)



class RunError(Exception):
    """A run that cannot start or go on (exit status 1); the message is for the user."""


def parse_lateness(text: str, time_unit: str = "s") -> int | float:
    """``--lateness`` text (``5 s``, ``2min``, ``10``) in timestamp units; same units as patterns."""
    try:
        return parse_duration(text, time_unit)
    except ValueError as e:
        raise RunError(str(e)) from None


@record
class RunOptions:
    """Everything ``cep run`` takes (docs/language.md section 6, plus checkpoints from issue 5)."""

    patterns: list[str]
    input: str = "-"
    output: str = "-"
    fmt: str = "jsonl"
    type_field: str = "type"
    time_field: str = "ts"
    time_unit: str = "s"
    op_field: str = "op"
    lateness: str | None = None
    late_output: str | None = None
    on_error: str = "fail"
    errors: str | None = None
    checkpoint: str | None = None
    checkpoint_every: int = 10_000
    checkpoint_interval: float = 10.0
    quiet: bool = False
    progress: bool = True
    # test hooks (hidden options): stop after this many records, and then exit at once without
    # the final checkpoint or summary, as a crash would (status EXIT_SIMULATED_CRASH)
    test_stop_after: int | None = None
    test_crash_at_stop: bool = False
    idle_advance: str | None = None  # docs/language.md section 7, Decided matches: a quiet input's watermark follows the wall clock
    workers: int = 1  # processes splitting the patterns' keys (cep.commands.parallel); 1: this loop alone

    def result_options(self) -> dict[str, Any]:
        """The options that change results: a checkpoint must be resumed with the same ones."""
        return {
            "format": self.fmt, "type_field": self.type_field, "time_field": self.time_field,
            "time_unit": self.time_unit, "op_field": self.op_field, "lateness": self.lateness or "0",
        }


def _is_file_sink(s: Any) -> bool:
    return isinstance(s, StreamSink) and s.name != "-"


def check_paths(o: RunOptions) -> None:
    """Refuse (``RunError``) paths that would destroy data, before anything is opened for writing."""
    roles = [Role("pattern file", p, False) for p in o.patterns]
    roles.append(Role("-i", o.input, False))
    roles.append(Role("-o", o.output, True))
    if o.late_output:
        roles.append(Role("--late-output", o.late_output, True))
    if o.errors:
        roles.append(Role("--errors", o.errors, True))
    if o.checkpoint:
        roles.append(Role("--checkpoint", o.checkpoint, True))
    try:
        if o.checkpoint:
            check_checkpoint_path(o.checkpoint)
        check_roles(roles)
    except PathClash as e:
        raise RunError(str(e)) from None


class _Run:
    """State of one run, so the loop's helpers (bad records, checkpoints) share it."""

    def __init__(self, opts: RunOptions, err: IO[str]) -> None:
        self.o = opts
        self.err = err
        self.records = 0  # records this run (blank lines excluded)
        self.late = 0
        self.bad = 0
        self.outputs = 0  # outputs this run
        self.prior_outputs = 0
        self.resumed_at: int | None = None
        self.elapsed = 0.0  # seconds in the record loop
        self.sinks: dict[str, Sink] = {}
        self.src: Source | None = None
        self.engine: Any = None
        self.fp = ""
        self.start_counts: dict[str, dict[str, int]] = {}
        self.plans: list | None = None  # with --workers: the physical plans each worker's engine is built from
        self.report = True  # this process reports bad records (with --workers: worker 0 only)
        # with --workers: the peak of retained events and the composite events per pattern and op,
        # merged over the workers (``Engine.matches_emitted``'s form)
        self.merged: tuple[int | None, dict[str, dict[str, int]]] = (None, {})
        self.notes: list[str] = []  # more summary lines (--workers on a small input: one process)

    # ---------------------------------------------------------------- set up

    def setup(self) -> None:
        o = self.o
        from cep.lang.compiler import compile_files_with_warnings
        from cep.runtime.engine import Engine

        try:
            check_time_unit(o.time_unit)
        except ValueError as e:
            raise RunError(str(e)) from None
        check_paths(o)
        lateness = parse_lateness(o.lateness, o.time_unit) if o.lateness else 0
        try:
            patterns, warnings = compile_files_with_warnings(o.patterns, o.time_unit)  # error: exit 2
        except OSError as e:
            raise RunError(f"cannot read pattern file {e.filename or ''}: {e.strerror or e}") from None
        for w in warnings:  # the same warnings as `cep check`, before any output
            self.err.write(w.format() + "\n")
        self.patterns = patterns

        state = None
        if o.checkpoint:
            from cep.io import (
                checkpoint as ckpt,  # only with --checkpoint: not imported at start-up
            )

            if o.input == "-":
                raise RunError("--checkpoint needs a file or Kafka input: stdin cannot be resumed")
            self.fp = ckpt.fingerprint(o.patterns, o.result_options())
            if os.path.exists(o.checkpoint):
                try:
                    state = ckpt.load(o.checkpoint)
                except ckpt.CheckpointError as e:
                    raise RunError(str(e)) from None
                if state.fingerprint != self.fp:
                    raise RunError(
                        f"checkpoint {o.checkpoint} was written with other pattern files or options "
                        "(a resumed run needs the same patterns, --format, --type-field, --time-field, "
                        "--time-unit, --op-field and --lateness); delete it to start over"
                    )
                try:
                    ckpt.verify_resume(state, o.checkpoint, self._input_file(), self._output_specs())
                except ckpt.CheckpointError as e:
                    raise RunError(str(e)) from None
        # a partitioned source (Kafka) owns the watermark: the minimum over its partitions (cep.io.watermarks)
        partitioned = o.input.startswith("kafka://")
        if state is not None:
            try:
                # a resumed run takes the lines mode as a fresh one does (below)
                self.engine = Engine.loads(state.state, patterns, lines=not o.output.startswith("kafka://"))
            except Exception as e:  # noqa: BLE001 - StateError and any unreadable state
                raise RunError(f"cannot restore checkpoint {o.checkpoint}: {e}") from None
            self.engine.own_watermark = not partitioned
            self.prior_outputs = state.outputs
        elif o.workers > 1:  # cep.commands.parallel: planned once here, each worker builds its engine
            from cep.plan.physical import physical_plan
            from cep.plan.planner import plan_pattern

            self.plans = [physical_plan(plan_pattern(cp)) for cp in patterns]
        else:
            # a file or stdout takes the composite events as encoded lines (Engine(lines=True): no
            # Output per match); a keyed sink (Kafka) needs each one's partition key
            self.engine = Engine(patterns, lateness=lateness, own_watermark=not partitioned,
                                 lines=not o.output.startswith("kafka://"))
        if self.engine is not None:
            self.start_counts = {k: dict(v) for k, v in self.engine.matches_emitted.items()}
        self.lateness = lateness
        self.idle = None
        if o.idle_advance:
            if o.input.startswith("kafka://"):
                raise RunError("--idle-advance with a Kafka input is not supported yet; "
                               "the Kafka watermark advances with the partitions' records")
            if o.checkpoint:
                raise RunError("--idle-advance cannot be combined with --checkpoint in this version")
            from cep.units import TIME_UNITS

            self.idle = parse_lateness(o.idle_advance, "s")
            if not self.idle > 0:
                raise RunError(f"--idle-advance must be positive, got {o.idle_advance!r}")
            self.per_second = TIME_UNITS[o.time_unit]

        if o.fmt == "csv" and o.input.startswith("kafka://"):
            raise RunError("--format csv reads files and stdin; Kafka records are JSON objects")
        try:
            self.src = open_source(o.input, o.fmt)
            if state is not None:
                self.src.seek(state.position)
                self.resumed_at = (state.position or {}).get("record") if isinstance(state.position, dict) else None
        except (SourceError, BadSeek) as e:
            raise RunError(str(e)) from None
        except Exception as e:  # noqa: BLE001 - connector errors (unreachable broker, missing topic)
            raise RunError(f"input {o.input}: {e}") from None
        sizes = state.sizes if state is not None else {}
        try:
            self.sinks["output"] = open_sink(o.output, sizes.get("output") if state else None)
            if o.late_output:
                self.sinks["late"] = open_sink(o.late_output, sizes.get("late") if state else None)
            if o.errors:
                self.sinks["errors"] = open_sink(o.errors, sizes.get("errors") if state else None)
        except SinkError as e:
            raise RunError(str(e)) from None
        except Exception as e:  # noqa: BLE001 - connector errors (unreachable broker, missing topic)
            raise RunError(f"output: {e}") from None

    # ------------------------------------------------------------- the loop

    def loop(self) -> int:
        o = self.o
        src = self.src
        decode = make_decoder(o.type_field, o.time_field, o.time_unit, o.op_field)
        if o.fmt == "csv":
            decode = csv_decoder(decode)
        many = decode.many  # a batch's leading regular records in one call (JSON lines)
        eng = self.engine
        push_batch = eng.push_batch
        out = self.sinks["output"]
        keyed = not isinstance(out, StreamSink)
        if not keyed:
            write_lines = out.write_lines
        else:  # a keyed sink (Kafka): each composite event carries its partition key
            keys = {cp.name: make_key_fn(cp) for cp in self.patterns}
            write_out = out.write
        # after each batch that completed matches: a file or stdout is flushed; a sink with an
        # acknowledgement round trip (Kafka) says when it waits for one (``record_done``)
        flush = out.record_done
        encode = encode_output

        def write(outs: list) -> int:
            if keyed:
                for x in outs:
                    kf = keys.get(x.pattern)
                    write_out(encode(x), kf(x) if kf is not None else None)
            else:
                write_lines(encode_outputs(outs))
            return len(outs)

        skip = o.on_error == "skip"
        late_sink = self.sinks.get("late")

        def apply(evs: list, batch: list, lo: int, n_lo: int) -> int | None:
            """Push a run of decoded events and write their composite events (no flush); an event
            that raises is handled as ``push`` would have been.  Returns an exit status to stop with.
            The run is contiguous in the source's batch: ``evs[i]`` is ``batch[lo + i]``, record
            ``n_lo + i + 1`` (so nothing is kept per record for the rare event that raises).  On
            the JSON lines path ``batch`` holds the raw lines (``first`` not None: the number of
            its first record); their ``(pos, raw)`` pairs are made when an event raises."""
            nonlocal nout
            start = 0
            rows = None
            # no retraction among the events (``InsertBatch``, made by the reader): the engine's
            # loop tests no op per event; the events after a failing one are inserts too
            inserts = type(evs) is InsertBatch
            while start < len(evs):
                try:
                    nout += write(push_batch(evs[start:] if start else evs, inserts))
                    return None
                except BatchInterrupted as bi:
                    nout += write(bi.outputs)
                    i = start + bi.index
                    start = i + 1
                    cause = bi.__cause__
                    if rows is None:  # the JSON lines path's pairs are made now
                        rows = batch if first is None else line_pairs(first, batch)
                    pos, raw = rows[lo + i]
                    k = n_lo + i + 1
                    if isinstance(cause, LateEventError):
                        self.late += 1
                        if late_sink is not None:
                            if type(raw) is dict and evs[i].op == "-":
                                raw[o.op_field] = "-"
                            late_sink.write(raw_line(raw), None)
                        continue
                    self.records = k
                    if isinstance(cause, UnknownRetractionError):
                        if not self._bad(pos, raw, "retraction of an event that was never inserted "
                                         "(or was already retracted or expired)", skip):
                            return EXIT_RECORD
                        continue
                    stop(cause, pos)
            return None

        def stop(cause: BaseException, pos: str) -> NoReturn:
            """An event at ``pos`` raised ``cause`` (not late, not a bad retraction): the run stops
            with the record's line, or ``cause`` itself (Ctrl-C, ``CEP_DEBUG``) once what came before is
            written."""
            if not isinstance(cause, Exception) or os.environ.get("CEP_DEBUG"):
                flush()  # Ctrl-C: what the events before it completed is written first
                raise cause from None
            line = self._line_of(pos)
            where_ = f"input line {line}" if line is not None else f"input record {pos}"
            raise RunError(f"{where_}: internal error: {type(cause).__name__}: {cause}") from None

        def apply_lines(batch: list[bytes], recs: list, first: int) -> tuple[int, int | None]:
            """``apply`` for the parsed records of a plain batch of lines (``decode.plain``), checked
            in the engine's loop (``Engine.push_records``): how many it took (it stops at the first
            its loop does not take; the caller decodes that one and the rest) and an exit status.
            A late record goes to the late output, anything else an event raises stops the run, as
            in ``apply`` (there is no retraction in such a batch)."""
            nonlocal nout
            start = 0
            end = len(batch)
            while start < end:
                try:
                    took, outs = push_records(recs[start:] if start else recs, first + start, tf, tsf, None, opf)
                except BatchInterrupted as bi:
                    nout += write(bi.outputs)
                    i = start + bi.index
                    start = i + 1
                    cause = bi.__cause__
                    if isinstance(cause, LateEventError):
                        self.late += 1
                        if late_sink is not None:
                            late_sink.write(raw_line(batch[i]), None)
                        continue
                    self.records = n + i + 1
                    stop(cause, str(first + i))
                nout += write(outs)
                return start + took, None
            return end, None

        # a partitioned source (Kafka): per-partition event time, the engine's watermark is the minimum
        # over the active partitions minus the lateness; ticks (batch None) say a partition went idle
        clock = None
        take = src.take
        # a JSON lines file or stdin: the raw lines and their first record's number
        # (``JsonlSource.take_lines``), the fast run decoded by ``decode.lines`` (no position
        # strings, no pairs: made only for what goes off the fast path)
        take_lines = src.take_lines if type(src) is JsonlSource and o.fmt != "csv" and LINES else None
        many_lines = decode.lines if take_lines is not None else None
        # plain batches of such lines: parsed in one pass, checked in the engine's loop
        # (``decode.plain``, ``Engine.push_records``); not with a watermark a source or the wall
        # clock moves (below)
        push_records = eng.push_records if take_lines is not None and FUSED else None
        plain = decode.plain if push_records is not None else None
        tf, tsf, opf = o.type_field, o.time_field, o.op_field
        first: int | None = None
        if eng.own_watermark:
            if self.idle is not None:  # a quiet input's watermark follows the wall clock
                batches = _with_idle(take, BATCH, self.idle, self._idle_advance)
                push_records = None
            else:
                batches = None
        else:
            batches = src.partitioned_batches()
            push_records = None
            clock = src.clock
            many = no_fast_path  # each record's time moves its partition's clock: one at a time
            observe = clock.observe
            lateness = eng.lateness
            if clock.low is not None:
                eng.advance_watermark(clock.low - lateness)

        bar = self._progress_bar()
        every = max(1, o.checkpoint_every) if o.checkpoint else None
        next_ck = every or 0
        interval = o.checkpoint_interval if o.checkpoint else None
        next_ck_time = time.monotonic() + interval if interval else 0.0
        # files: housekeeping every TICK records; a stream (Kafka) may trickle, so
        # there the checkpoint timer is looked at after every record
        tick = TICK if isinstance(src, (JsonlSource, CsvSource)) else 1
        next_tick = min(tick, next_ck) if every else tick
        if o.test_stop_after is not None:
            next_tick = min(next_tick, o.test_stop_after)
        last_offset = src.offset
        n = 0
        nout = 0
        self.t0 = time.perf_counter()
        ended = False
        try:
            while True:
                # what the source has ready (a batch never passes the next housekeeping point, so
                # checkpoints and the test stop fall on the same records as one record at a time)
                if batches is None:
                    part = None
                    if take_lines is not None:
                        first, batch = take_lines(min(BATCH, next_tick - n))
                    else:
                        batch = take(min(BATCH, next_tick - n))
                    if not batch:
                        ended = True
                        break
                else:
                    got = next(batches, None)
                    if got is None:
                        ended = True
                        break
                    part, batch = got
                    if batch is None:  # a partition went idle: the watermark may move
                        if clock.low is not None:
                            k = write(eng.advance_watermark(clock.low - lateness))
                            if k:
                                nout += k
                                flush()
                        continue
                n0 = nout
                recs = plain(batch) if push_records is not None and first is not None else None
                if recs is not None:
                    took, status = apply_lines(batch, recs, first)
                    n += took
                    if status is not None:
                        self.outputs = nout
                        return status
                    if took < len(batch):  # a line the engine's loop does not decode: the rest as below
                        batch = batch[took:]
                        first += took
                    else:
                        batch = None
                lo, n_lo = 0, n  # where the run of events ``evs`` starts in the batch (``apply``)
                # the leading records of the decoder's fast path in one call (``decode.many``);
                # the first other record (slow path, bad, blank) and those after it one at a time
                if batch is None:  # taken whole by the engine's own decoding loop
                    evs, batch, k = [], (), 0
                elif first is not None:
                    evs = many_lines(batch, first)
                    k = len(evs)
                    if k < len(batch):  # a record off the fast path: the pairs, for what follows
                        batch = line_pairs(first, batch)
                        first = None
                else:
                    evs = many(batch)
                    k = len(evs)
                append = evs.append
                n += k
                for j, (pos, raw) in enumerate(batch[k:] if k else batch, k):
                    n += 1
                    try:
                        ev = decode(pos, raw)
                    except BadRecord as e:
                        if evs:  # the records before it are applied (and their output written) first
                            status = apply(evs, batch, lo, n_lo)
                            evs = []
                            append = evs.append
                            if status is not None:
                                self.outputs = nout
                                return status
                        lo, n_lo = j + 1, n
                        if type(raw) is bytes and not raw.strip():
                            n_lo = n = n - 1  # a blank line is not a record
                            continue
                        self.records = n
                        if not self._bad(pos, raw, str(e), skip):
                            self.outputs = nout
                            return EXIT_RECORD
                        continue
                    if clock is not None and observe(part, ev.ts):
                        if evs:
                            status = apply(evs, batch, lo, n_lo)
                            evs = []
                            append = evs.append
                            if status is not None:
                                self.outputs = nout
                                return status
                        lo, n_lo = j, n - 1
                        nout += write(eng.advance_watermark(clock.low - lateness))
                    if ev.op != "+" and type(evs) is InsertBatch:  # a retraction: no longer inserts only
                        evs = list(evs)
                        append = evs.append
                    append(ev)
                if evs:
                    status = apply(evs, batch, lo, n_lo)
                    if status is not None:
                        self.outputs = nout
                        return status
                if nout != n0:  # the batch's composite events, out before the source is read again
                    flush()
                if n >= next_tick:
                    self.records = n
                    self.outputs = nout
                    if o.test_stop_after is not None and n >= o.test_stop_after:
                        if o.test_crash_at_stop:
                            self._flush_all()
                            os._exit(EXIT_SIMULATED_CRASH)
                        break
                    if bar is not None:
                        off = src.offset
                        bar.update(off - last_offset)
                        last_offset = off
                    if every and n >= next_ck:
                        self.save_checkpoint()
                        next_ck = n + every
                        if interval:
                            next_ck_time = time.monotonic() + interval
                    elif interval and time.monotonic() >= next_ck_time:
                        self.save_checkpoint()
                        next_ck_time = time.monotonic() + interval
                        next_ck = n + every if every else 0
                    next_tick = n + tick
                    if every:
                        next_tick = min(next_tick, next_ck)
                    if o.test_stop_after is not None:
                        next_tick = min(next_tick, o.test_stop_after)
        finally:
            self.records = n
            self.outputs = nout + self.decided
            self.elapsed = time.perf_counter() - self.t0
            if bar is not None:
                bar.close()
        if o.checkpoint:
            self.save_checkpoint()
        if ended:
            # docs/language.md section 7, Decided matches: at the end of a bounded input the watermark becomes +infinity and decides
            # every pending match (after the checkpoint: a resumed run, whose sinks are cut back
            # to the checkpoint, decides them again over whatever input follows).  With none
            # pending the move would only expire every retained event, which nothing reads after
            # this (the summary's peak is kept), at the cost of compiling and running the
            # patterns' batch deletions: a tenth of a short run's process
            if self.engine.next_decision_time() is not None:
                self._write(self.engine.advance_watermark(math.inf))
            self.outputs = nout + self.decided
        return EXIT_OK

    decided = 0  # outputs written outside the record loop (idle advances, end of input)

    def _write(self, outs: list) -> None:
        """Write composite events decided by a watermark move, then flush."""
        if not outs:
            return
        out = self.sinks["output"]
        if isinstance(out, StreamSink):
            out.write_lines(encode_outputs(outs))
        else:
            keys = {cp.name: make_key_fn(cp) for cp in self.patterns}
            for x in outs:
                kf = keys.get(x.pattern)
                out.write(encode_output(x), kf(x) if kf is not None else None)
        out.record_done()
        self.decided += len(outs)

    def _idle_advance(self) -> None:
        """The input has been quiet for ``--idle-advance``: the watermark follows the wall clock,
        as if a record stamped with the current time had arrived."""
        self._write(self.engine.advance_watermark(time.time() * self.per_second - self.lateness))

    # --------------------------------------------------------------- helpers

    def _input_file(self) -> str | None:
        """The input when it is a file (its identity is checked on resume), else None."""
        i = self.o.input
        return None if i == "-" or i.startswith("kafka://") else i

    def _output_specs(self) -> dict[str, str | None]:
        return {"output": self.o.output, "late": self.o.late_output, "errors": self.o.errors}

    def _bad(self, pos: str, raw: Any, reason: str, skip: bool) -> bool:
        """Count a bad record; report it (skip) and return True, or stop the run (False)."""
        self.bad += 1
        if not self.report:  # another worker reports it (cep.commands.parallel)
            return skip
        line = self._line_of(pos)
        if not skip:
            self._flush_all()
            where = f"input line {line}" if line is not None else f"input record {pos}"
            self.err.write(f"cep: {where}: {reason}\n")
            return False
        if type(raw) is bytes:
            text: Any = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        elif isinstance(raw, BadRow):
            text = raw.text.rstrip("\r\n")
        else:
            text = raw
        report = {"line": line, "pos": pos, "reason": reason, "record": text}
        sink = self.sinks.get("errors")
        if sink is not None:
            sink.write(encode_record(report), None)
            sink.flush()
        else:
            self.err.write(encode_record(report).decode())
            self.err.flush()
        return True

    def _line_of(self, pos: str) -> int | None:
        try:
            return self.src.line_of(pos)
        except (ValueError, TypeError):
            return None

    def _progress_bar(self):
        o = self.o
        size = self.src.size
        if o.quiet or not o.progress or not size:
            return None
        isatty = getattr(self.err, "isatty", None)
        if not (isatty and isatty()):
            return None
        from tqdm import tqdm

        bar = tqdm(total=size, unit="B", unit_scale=True, file=self.err, desc="cep", leave=False)
        bar.update(self.src.offset)
        return bar

    def _flush_all(self) -> None:
        for s in self.sinks.values():
            try:
                s.flush()
            except Exception:  # noqa: BLE001 - flushing on the way out must not mask the real error
                pass

    def save_checkpoint(self) -> None:
        """Flush (and fsync) the outputs, then atomically write position + state + sizes."""
        from cep.io import checkpoint as ckpt

        sizes = {}
        for role, s in self.sinks.items():
            if _is_file_sink(s):
                s.sync()
                sizes[role] = s.size
            else:
                s.flush()
        position = self.src.position()
        inp = self._input_file()
        try:
            ckpt.save(
                self.o.checkpoint,
                ckpt.Checkpoint(
                    fingerprint=self.fp,
                    position=position,
                    state=self.engine.dumps(),
                    outputs=self.prior_outputs + self.outputs,
                    sizes=sizes,
                    paths={role: ckpt.where(spec) for role, spec in self._output_specs().items()},
                    input=ckpt.input_identity(inp, position["offset"]) if inp is not None else None,
                ),
            )
        except (ckpt.CheckpointError, OSError) as e:
            raise RunError(str(e) if isinstance(e, ckpt.CheckpointError)
                           else f"cannot read input {inp}: {e.strerror or e}") from None
        self.src.commit()  # Kafka: the group's offsets follow the checkpoint

    def finish(self) -> None:
        """Flush and close every sink after a run that ended well: a write error is the run's error."""
        try:
            while self.sinks:
                self.sinks.pop(next(iter(self.sinks))).close()
        except SinkError as e:
            raise RunError(str(e)) from None

    def close(self) -> None:
        self._flush_all()
        for s in self.sinks.values():
            try:
                s.close()
            except Exception:  # noqa: BLE001
                pass
        if self.src is not None:
            try:
                self.src.close()
            except Exception:  # noqa: BLE001
                pass

    def summary(self) -> None:
        """End-of-run report on stderr: records, late, bad, matches per pattern, speed, peak state."""
        if self.o.quiet:
            return
        eng = self.engine
        peak, counts = self.merged
        if eng is not None:
            peak, counts = eng.stats["peak_retained"], eng.matches_emitted
        el = self.elapsed
        rate = self.records / el if el > 0 else 0.0
        lines = [
            f"cep: {self.records} records ({self.late} late, {self.bad} bad) in {el:.2f} s, "
            f"{rate:,.0f} events/s, peak retained events {peak}"
        ]
        lines += [f"cep: {note}" for note in self.notes]
        if self.resumed_at is not None:
            lines.append(f"cep: resumed from checkpoint {self.o.checkpoint} after record {self.resumed_at}")
        for name, c in counts.items():
            s0 = self.start_counts.get(name, {})
            plus = c.get("+", 0) - s0.get("+", 0)
            minus = c.get("-", 0) - s0.get("-", 0)
            lines.append(f"cep:   {name}: {plus - minus} matches (+{plus} -{minus})")
        self.err.write("\n".join(lines) + "\n")
        self.err.flush()


_END = object()


def _with_idle(take: Callable[[int], list], limit: int, seconds: float,
               on_idle: Callable[[], None]) -> Iterator[tuple[None, list]]:
    """The batches of a source (``take(limit)``) read by a thread, as ``(None, batch)``, calling
    ``on_idle`` (in the caller's thread, between batches) each time none has arrived for ``seconds``.

    Why a thread: reading stdin blocks, and a quiet input must still let time pass.  The
    queue holds one batch, so the reader is at most one batch ahead.
    """
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=1)

    def read() -> None:
        try:
            while batch := take(limit):
                q.put(batch)
            q.put(_END)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            q.put(e)

    threading.Thread(target=read, name="cep-reader", daemon=True).start()
    while True:
        try:
            item = q.get(timeout=seconds)
        except queue.Empty:
            on_idle()
            continue
        if item is _END:
            return
        if isinstance(item, BaseException):
            raise item
        yield None, item


def run(opts: RunOptions, err: IO[str] | None = None) -> int:
    """Run patterns over the input; return the exit status (messages go to ``err``)."""
    err = err if err is not None else sys.stderr
    tune_heap()
    kept = codegen.use_code_cache(codegen.code_cache_dir())  # compiled generated code across runs
    try:
        return _run(opts, err)
    finally:
        codegen.use_code_cache(kept)


def _run(opts: RunOptions, err: IO[str]) -> int:
    pool = None
    note = None
    if opts.workers != 1:  # split over processes by partition key (cep.commands.parallel)
        from cep.commands import parallel

        why = parallel.refusal(opts)
        if why is not None:
            err.write(f"cep: error: {why}\n")
            return EXIT_OTHER
        note = parallel.single_below(opts)
        if note is None:
            pool = parallel.Pool()
        else:  # a small input: one process (the same results), said in the summary
            import dataclasses

            opts = dataclasses.replace(opts, workers=1)
    r = _Run(opts, err)
    if note is not None:
        r.notes.append(note)
    try:
        try:
            with setup_gc():
                r.setup()
        except PatternError as e:
            err.write(str(e) + "\n")
            return EXIT_PATTERN
        except RunError as e:
            err.write(f"cep: error: {e}\n")
            return EXIT_OTHER
        if pool is not None:  # only unkeyed patterns: fewer workers (or one process) do the same
            more = parallel.fewer(r)
            if more is not None:
                r.notes.append(more)
                if r.o.workers == 1:
                    pool = None
        if pool is None:
            with stream_gc():
                status = r.loop()
        else:
            status = parallel.supervise(r, pool)
        r.finish()
    except (RunError, SinkError) as e:
        if pool is not None:
            pool.kill()
        r._flush_all()
        if str(e):  # (empty: a worker reported its own error)
            err.write(f"cep: error: {e}\n")
        return EXIT_OTHER
    except BaseException:
        if pool is not None:
            pool.kill()
        r._flush_all()
        raise
    finally:
        r.close()
    r.summary()
    return status
