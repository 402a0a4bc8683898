"""One measured cep run, in a process of its own: ``python -m bench.run_cep ARGS`` prints a JSON object.

Why a child process: peak memory (``ru_maxrss``) must be this run's alone, and a run must not inherit
the warm caches or garbage of the previous one. The loop is the one of ``cep run`` (``cep.runner``):
the same source and decoder (``cep.io.readers``), ``Engine.push``, ``encode_output`` into the same sink,
flushed after each record that completed matches, so every composite event is written before the next
record is read. Around it: the per-record latency (from before the record is decoded until its
composite events are written), the peak of ``Engine.retained_events``, and, first, in the same
process, the parse-only floor (``cep.io.readers.parse_only``: same source, same decoder, nothing else).
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from array import array

import orjson


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
    args = ap.parse_args(argv)

    from cep.compiler import compile_files
    from cep.engine import Engine
    from cep.io.readers import make_decoder, open_source, parse_only
    from cep.io.writers import encode_output, open_file_sink

    base_rss = current_rss_mb()
    floor_s = -1.0
    if not args.no_floor:
        t0 = time.perf_counter()
        parse_only(args.input, time_unit=args.time_unit)
        floor_s = time.perf_counter() - t0
        gc.collect()

    t_compile = time.perf_counter()
    compiled = compile_files(args.patterns, time_unit=args.time_unit)
    engine = Engine(compiled)
    compile_s = time.perf_counter() - t_compile

    src = open_source(args.input)
    decode = make_decoder(time_unit=args.time_unit)
    sink = open_file_sink(args.output)
    write_line = sink.write_line
    flush = sink.flush
    push = engine.push
    clock = time.perf_counter_ns
    lat = array("q")
    record_latency = lat.append
    every = args.sample_every
    peak_retained = 0
    composites = 0
    records = 0

    prof = None
    if args.profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    t0 = time.perf_counter()
    for pos, raw in src.records():
        r0 = clock()
        outs = push(decode(pos, raw))
        if outs:
            for o in outs:
                write_line(encode_output(o))
            composites += len(outs)
            flush()
        record_latency(clock() - r0)
        records += 1
        if records % every == 0:
            n = engine.retained_events
            if n > peak_retained:
                peak_retained = n
    flush()
    run_s = time.perf_counter() - t0
    if prof is not None:
        prof.disable()
        prof.dump_stats(args.profile)
    peak_rss = rss_mb()  # before the latency samples are sorted into a list
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
        "p50_us": percentile(lat_sorted, 0.50) / 1e3,
        "p99_us": percentile(lat_sorted, 0.99) / 1e3,
        "peak_retained": peak_retained,
        "final_retained": engine.retained_events,
        "state_size": engine.state_size() if hasattr(engine, "state_size") else None,
        "base_rss_mb": base_rss,
        "peak_rss_mb": peak_rss,
        "python": sys.version.split()[0],
    }
    sys.stdout.write(orjson.dumps(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
