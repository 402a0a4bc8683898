"""One measured cep run, in a process of its own: ``python -m bench.run_cep ARGS`` prints a JSON object.

Why a child process: peak memory (``ru_maxrss``) must be this run's alone, and a run must not inherit
the warm caches or garbage of the previous one. The loop is the one of ``cep run`` (``cep.commands.run``):
the same heap and GC settings (``cep.commands.heap``), source, batches and decoder (``cep.io.readers``:
``take`` what the input has ready, at most ``BATCH`` records), ``Engine.push_batch``, ``encode_outputs``
into the same sink, flushed after each batch
that completed matches, so every composite event is written before the reader waits for input. Around
it: the per-record latency (from before its batch is decoded until the batch's composite events are
written: each record of a batch gets the batch's), the peak of ``Engine.retained_events``, and, first,
in the same process, the parse-only floor (``cep.io.readers.parse_only``: same source, same decoder,
nothing else).
"""

from __future__ import annotations

import argparse
import gc
import math
import resource
import sys
import time
from array import array

import orjson


def _ignore(_: int) -> None:
    pass


def _live_bytes() -> int:
    """Traced memory still in use after a full collection (garbage and free lists emptied)."""
    import tracemalloc

    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def percentile(sorted_values, q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, int(round(q * len(sorted_values))) - 1))
    return sorted_values[i]


def rss_mb() -> float:
    """Peak resident memory of this process image: VmHWM.

    Not ``ru_maxrss``: Linux carries the parent's high-water mark across fork+exec, so a child started
    by a big parent would report the parent's size. VmHWM belongs to the memory map made by exec.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:  # pragma: no cover
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize() / 1048576.0
    except OSError:  # pragma: no cover
        return 0.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run_cep")
    ap.add_argument("patterns", nargs="+")
    ap.add_argument("-i", "--input", required=True)
    ap.add_argument("-o", "--output", default="/dev/null")
    ap.add_argument("--time-unit", default="s")
    ap.add_argument("--no-floor", action="store_true")
    ap.add_argument("--sample-every", type=int, default=256, help="records between retained-state samples")
    ap.add_argument("--profile", help="write cProfile stats of the engine loop to this file")
    ap.add_argument("--limit", type=int, default=0, help="stop after this many records (0: all)")
    ap.add_argument("--tracemalloc", action="store_true",
                    help="memory pass: trace the engine's allocations (slower; no latency figures)")
    args = ap.parse_args(argv)

    from cep.commands.heap import stream_gc, tune_heap
    from cep.io.readers import BATCH, make_decoder, open_source, parse_only
    from cep.io.writers import encode_outputs, open_file_sink
    from cep.lang.compiler import compile_files
    from cep.runtime.engine import Engine

    tune_heap()  # as `cep run` does before it reads anything
    base_rss = current_rss_mb()
    floor_s = -1.0
    n_total = 0
    if not args.no_floor:
        t0 = time.perf_counter()
        n_total = parse_only(args.input, time_unit=args.time_unit)
        if args.limit:
            n_total = min(n_total, args.limit)
        floor_s = time.perf_counter() - t0
        gc.collect()

    t_compile = time.perf_counter()
    compiled = compile_files(args.patterns, time_unit=args.time_unit)
    engine = Engine(compiled, lines=True)  # as `cep run` builds it for a file output
    compile_s = time.perf_counter() - t_compile

    src = open_source(args.input)
    decode = make_decoder(time_unit=args.time_unit)
    sink = open_file_sink(args.output)
    write_lines = sink.write_lines
    flush = sink.flush
    clock = time.perf_counter_ns
    lat = array("q")
    record_latency = lat.append
    traced_base = 0
    if args.tracemalloc:
        import tracemalloc

        record_latency = _ignore  # no growing array in the traced figure
        gc.collect()
        tracemalloc.start()
        traced_base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
    every = args.sample_every
    # memory pass: the engine's retained state is sampled as live memory after a full collection
    # (which also empties CPython's free lists of small tuples, floats and dicts): the traced peak
    # alone counts per-record garbage and free-list memory that the engine does not retain
    live_every = every * 4 if args.tracemalloc else 0
    live_peak = 0
    deciles: list[int] = []  # retained events after each tenth of the input: is the state flat?
    next_mark = n_total // 10 if n_total >= 10 else 0
    peak_retained = 0
    composites = 0
    records = 0

    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    with stream_gc():  # `cep run`'s GC policy around its record loop (cep.commands.heap)
        t0 = time.perf_counter()
        c0 = time.process_time()
        push_batch = engine.push_batch
        take = src.take
        stop = args.limit or -1
        while batch := take(BATCH if stop < 0 else min(BATCH, stop - records)):
            r0 = clock()
            outs = push_batch([decode(pos, raw) for pos, raw in batch])
            if outs:
                write_lines(encode_outputs(outs))
                composites += len(outs)
                flush()
            el = clock() - r0
            for _ in batch:
                record_latency(el)
            for _ in batch:  # per-record bookkeeping of the measurement (samples, deciles)
                records += 1
                if records % every == 0:
                    n = engine.retained_events
                    if n > peak_retained:
                        peak_retained = n
                    if live_every and records % live_every == 0:
                        live_peak = max(live_peak, _live_bytes() - traced_base)
                if records == next_mark:
                    deciles.append(engine.retained_events)
                    next_mark += n_total // 10
            if records == stop:
                break
        # as `cep run` does at the end of a bounded input: the watermark becomes +infinity and decides every
        # pending match (docs/language.md section 7, Decided matches)
        outs = engine.advance_watermark(math.inf)
        write_lines(encode_outputs(outs))
        composites += len(outs)
        flush()
        run_s = time.perf_counter() - t0
        cpu_s = time.process_time() - c0  # CPU time of the loop: less moved by other work on a shared machine
    if prof is not None:
        prof.disable()
        prof.dump_stats(args.profile)
    peak_rss = rss_mb()  # before the latency samples are sorted into a list
    mem = {}
    if args.tracemalloc:
        import tracemalloc

        state_peak = tracemalloc.get_traced_memory()[1] - traced_base
        live_peak = max(live_peak, _live_bytes() - traced_base)
        # what one event costs as read (Event + its dict), to size "the events in a window"
        before = tracemalloc.get_traced_memory()[0]
        keep = []
        src2 = open_source(args.input)
        for pos, raw in src2.records():
            keep.append(decode(pos, raw))
            if len(keep) >= 10000:
                break
        src2.close()
        per_event = (tracemalloc.get_traced_memory()[0] - before) / max(1, len(keep))
        del keep
        tracemalloc.stop()
        mem = {"traced_peak_mb": state_peak / 1048576.0, "live_peak_mb": live_peak / 1048576.0,
               "bytes_per_event": per_event}
    peak_retained = max(peak_retained, engine.retained_events)
    sink.close()
    src.close()
    lat_sorted = sorted(lat)
    result = {
        "system": "cep",
        "records": records,
        "composites": composites,
        "compile_s": compile_s,
        "floor_s": floor_s,
        "run_s": run_s,
        "cpu_s": cpu_s,
        "p50_us": percentile(lat_sorted, 0.50) / 1e3,
        "p99_us": percentile(lat_sorted, 0.99) / 1e3,
        "peak_retained": peak_retained,
        "final_retained": engine.retained_events,
        "state_size": engine.state_size() if hasattr(engine, "state_size") else None,
        "base_rss_mb": base_rss,
        "peak_rss_mb": peak_rss,
        "retained_deciles": deciles,
        "python": sys.version.split()[0],
        **mem,
    }
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
