"""``python -m bench.where_time_goes``: where cep's microseconds per event go, and what the issue-15
candidates would save, measured outside the engine on the same stream in one process.

Why: issue 15 asks for a per-event cost that is a small multiple of parsing. Before the runtime is
changed, this measures (1) the `cep run` loop against its parse-only floor (paired: the floor's pass over each chunk
runs inside the loop, just before the loop reads that chunk, ``floor_and_loop``), (2) a breakdown by phase
(read, decode, push, expiry, insert, update path per atom, output building, encode, write) of the real
command: ``cep.commands.run.run`` with the functions listed in ``PHASES`` wrapped by a clock (own time
per function, the wrappers' cost calibrated and subtracted), so the table measures the code that runs
and fails loudly when a listed function is renamed, (3) a cProfile of the real command by own time,
(4) with ``--base DIR``, `cep run` of another checkout against this one, interleaved, and (5)
prototypes of the candidates, each run with the engine's own compiled runtime objects as a library:

- batched updates: the stream cut into batches of B records; per batch, expiry as one batch deletion
  per atom, then each atom's inserts as one batch (``PatternRuntime._batch_from``: every key
  group of the batch in one pass), against one update path call per event and atom; the final match
  count of both must agree. Also the mean batch size per (atom, key group): what a sort-merge per
  group (thesis Theorem 5) could share.
- expiry as one range deletion per group and window step: the floor such a scheme cannot go below
  (forgetting each event once) against the engine's expiry per event and atom.
- events as tuples: the reader's ``Event`` objects against tuples of the fields the pattern reads.

Writes ``results/where_time_goes.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import orjson

from bench import procs

RESULTS = procs.BENCH_DIR / "results"

# phase -> the real functions whose own time (their time minus the wrapped calls inside them) it is.
# Targets are "module:Class.attr" (a class attribute, wrapped on the class), "module:function" (a module
# global the run loop looks up when it starts), "decoder" (what make_decoder returns), or one of the
# engine's generated functions, wrapped after the engine is built and its handlers generated again
# around the wrapped parts (``_wrap_engine``): "handlers" (the engine's generated batch function,
# ``cep.runtime.handler``), "expiry" (the generated expiry), "update paths" (each atom's generated
# update path, for inserts and expiry), "builders" (each pattern's fused enumerate-and-build function
# per atom, ``cep.runtime.output.new_matches_fn``, and its single-match EMIT builder and match id).
PHASES: dict[str, tuple[str, ...]] = {
    "read (Source.take: chunks, lines, positions)": ("cep.io.readers:JsonlSource.take",
                                                     "cep.io.readers:JsonlSource.take_lines"),
    "decode (orjson, checks, Event)": ("decoder",),
    "push_batch (entry)": ("cep.runtime.engine:Engine.push", "cep.runtime.engine:Engine.push_batch"),
    "handler (generated batch loop, per type: late check, watermark, a single due event's expiry, filters, "
    "leaf tuples, holders, queues, counters)": ("handlers",),
    "expiry: due events, holders, forgetting, leaf tuples (generated; gap indexes, batches)": (
        "expiry", "cep.runtime.engine:Engine._forget"),
    "update paths (generated per atom: inserts and expiry)": ("update paths",),
    "output building (enumeration of new matches, match id, EMIT, Output tuples)": ("builders",),
    "encode (encode_outputs)": ("cep.commands.run:encode_outputs", "cep.commands.run:encode_output"),
    "write + flush (sink)": ("cep.io.writers:StreamSink.flush", "cep.io.writers:StreamSink.record_done"),
    "run loop (batches, decoding loop, error handling, ticks)": ("cep.commands.run:_Run.loop",),
}


def _engine(pattern: Path):
    from cep.lang.compiler import compile_files
    from cep.runtime.engine import Engine

    return Engine(compile_files([str(pattern)]))


def _prefix(path: Path, limit: int) -> Path:
    """The first ``limit`` records of ``path`` as a file of their own (the real command reads a file)."""
    if limit <= 0:
        return path
    out = Path(f"/tmp/cep-where-{path.stem}-{limit}.jsonl")
    if not out.exists():
        with open(path, "rb") as f, open(out, "wb") as g:
            for i, line in enumerate(f):
                if i == limit:
                    break
                g.write(line)
    return out


def _run_command(pattern: Path, path: Path, output: str = "/dev/null") -> None:
    from cep.commands.run import RunOptions, run

    err = io.StringIO()
    rc = run(RunOptions(patterns=[str(pattern)], input=str(path), output=output, quiet=True), err)
    if rc != 0:
        raise SystemExit(f"where_time_goes: cep run exited {rc}: {err.getvalue()}")


def _timed_decoder(pc: PhaseClock, decode, phase: str):
    """``decode`` timed per record as ``phase``: a decoder whose batch paths (``many``, and ``lines`` on
    the JSON lines path) take nothing, so every record goes through the timed ``decode`` (the phase is
    the per-record decode, as it was measured; ``plain`` takes nothing either)."""
    from cep.io.readers import no_fast_path

    timed = pc.wrap(decode, phase)
    timed.many = no_fast_path
    timed.lines = _no_lines
    timed.plain = _no_plain
    return timed


def _no_lines(lines: list, first: int) -> list:
    return []


def _no_plain(lines: list) -> None:
    """No batch is plain: the fused loop (``Engine.push_records``) would decode without the timed ``decode``."""
    return None


class PhaseClock:
    """Own time per phase of wrapped real functions (a phase's time excludes the wrapped calls made
    inside it, and the cost of those wrappers as its caller sees them, calibrated and subtracted)."""

    def __init__(self) -> None:
        self.ns: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list] = [[0, 0]]
        self.overhead = 0.0  # ns a wrapped call costs its caller beyond the callee's own measured time

    def wrap(self, fn, phase: str):
        clock = time.perf_counter_ns
        ns, calls, stack = self.ns, self.calls, self._stack

        def timed(*a, **k):
            frame = [0, 0]
            stack.append(frame)
            t0 = clock()
            try:
                return fn(*a, **k)
            finally:
                el = clock() - t0
                stack.pop()
                ns[phase] += el - frame[0] - frame[1] * self.overhead
                calls[phase] += 1
                parent = stack[-1]
                parent[0] += el
                parent[1] += 1

        timed.__wrapped__ = fn
        return timed

    def calibrate(self, k: int = 200_000) -> None:
        """The overhead a wrapped call adds to its caller: outer time per call minus inner time."""
        def noop() -> None:
            return None

        w = self.wrap(noop, "_calibrate")
        t0 = time.perf_counter_ns()
        for _ in range(k):
            w()
        outer = (time.perf_counter_ns() - t0) / k
        self.overhead = max(0.0, outer - self.ns.pop("_calibrate") / k)
        self.calls.pop("_calibrate")


def _resolve(target: str):
    mod, _, attr = target.partition(":")
    import importlib

    obj = importlib.import_module(mod)
    owner, name = obj, attr
    if "." in attr:
        cls, name = attr.split(".")
        owner = getattr(obj, cls)
    if name not in vars(owner):
        raise SystemExit(f"where_time_goes: {target} no longer exists: update PHASES in bench/where_time_goes.py "
                         "so the table measures the code that runs")
    return owner, name


def _wrap_engine(init, pc: PhaseClock, phases: dict[str, str]):
    """``Engine.__init__`` that wraps the engine's generated functions (``PHASES``' special targets)."""
    import cep.runtime.handler as handler
    from cep.runtime.handler import build_handlers

    def init_wrapped(self, *a, **k):
        init(self, *a, **k)
        for rt in self.runtimes:
            rt._prop_of_atom = {ai: pc.wrap(f, phases["update paths"]) for ai, f in rt._prop_of_atom.items()}
        self._builders = [pc.wrap(f, phases["builders"]) for f in self._builders]
        self._ids = [pc.wrap(f, phases["builders"]) for f in self._ids]
        fused = handler.new_matches_fn

        def wrapped_fused(*args, **kwargs):
            f = fused(*args, **kwargs)
            return None if f is None else pc.wrap(f, phases["builders"])

        handler.new_matches_fn = wrapped_fused
        try:
            h = self._handlers = build_handlers(self)  # generated again around the wrapped parts
        finally:
            handler.new_matches_fn = fused
        expire = pc.wrap(h.expire, phases["expiry"])
        h.expire = expire
        h.batch.__globals__["expire"] = expire  # the name the batch function calls it by
        h.batch = pc.wrap(h.batch, phases["handlers"])

    return init_wrapped


def instrumented(pattern: Path, path: Path, output: str = "/dev/null") -> dict:
    """The real ``cep run`` (``cep.commands.run.run``) with PHASES' functions wrapped; ns per phase."""
    import cep.commands.run as runner
    from cep.runtime.engine import Engine

    pc = PhaseClock()
    pc.calibrate()
    saved: list[tuple[object, str, object]] = []
    engine_phases: dict[str, str] = {}

    def patch(owner, name, value) -> None:
        saved.append((owner, name, vars(owner)[name] if isinstance(owner, type) else getattr(owner, name)))
        setattr(owner, name, value)

    try:
        for phase, targets in PHASES.items():
            for target in targets:
                if target == "decoder":
                    make = runner.make_decoder
                    patch(runner, "make_decoder", lambda *a, _m=make, _p=phase, **k: _timed_decoder(pc, _m(*a, **k), _p))
                elif target in ("handlers", "expiry", "update paths", "builders"):
                    engine_phases[target] = phase
                else:
                    owner, name = _resolve(target)
                    patch(owner, name, pc.wrap(getattr(owner, name) if not isinstance(owner, type)
                                               else vars(owner)[name], phase))
        if engine_phases:
            patch(Engine, "__init__", _wrap_engine(Engine.__init__, pc, engine_phases))
        gc.collect()
        _run_command(pattern, path, output)
    finally:
        for owner, name, value in reversed(saved):
            setattr(owner, name, value)
    loop_ns = pc.ns["run loop (batches, decoding loop, error handling, ticks)"]
    total = sum(pc.ns.values())
    return {"ns": dict(pc.ns), "calls": dict(pc.calls), "overhead_ns": pc.overhead, "total_ns": total,
            "loop_own_ns": loop_ns}


CHUNK = 8192  # records per paired chunk (a multiple of ``cep.commands.run.TICK``: the loop's batches stay as they are)
WARM = 2048  # records at the start of each chunk timed apart, on both sides: the switch's warm-up
BLOCK = 1  # chunks per block of the per-block ratios


class _Clock:
    """``time`` for ``cep.commands.run`` with ``perf_counter`` replaced by ``clock`` (the loop's own
    clock: ``_Run.t0`` and ``_Run.elapsed``)."""

    def __init__(self, clock) -> None:
        self.perf_counter = clock

    def __getattr__(self, name: str):
        return getattr(time, name)


def parse_chunk(take_lines, decode, limit: int) -> int:
    """The parse-only pass (``cep.io.readers.parse_only``'s JSON lines path: batches of ``BATCH``
    lines, ``decode.lines``, the records off its fast path one at a time) over the next ``limit``
    records of a source; returns how many it read (good or not), 0 at the end."""
    from cep.io.readers import BATCH, BadRecord, line_pairs

    many_lines = decode.lines
    got = 0
    while got < limit:
        first, lines = take_lines(min(BATCH, limit - got))
        if not lines:
            break
        got += len(lines)
        k = len(many_lines(lines, first))
        if k < len(lines):
            for pos, raw in line_pairs(first + k, lines[k:]):
                try:
                    decode(pos, raw)
                except BadRecord:
                    continue
    return got


class _Paired:
    """The loop's reader, paired with a parse-only pass over the same records.

    Installed as the ``take_lines`` of the source the real loop reads (``_Run.src``): before the loop
    gets the first line of each chunk of ``chunk`` records, the parse-only pass reads and decodes that
    same chunk from a second source on the same file, timed by ``clock``; its time is kept in
    ``floor`` and taken out of the loop's. The loop's batches never cross a chunk boundary, nor the
    end of a chunk's first ``warm`` records (multiples of the loop's tick, where its batches end
    anyway).

    Why ``warm``: each switch costs a warm-up (caches and branch predictors hold the other side's
    work), a cost no real run has, and it falls on the floor's small pass (measured on the dense
    stream: the floor's first 512-record batch after the loop costs ~1.4x its later ones, fading over
    a thousand or two records; the loop's first records cost what its later ones do), so timed whole
    the ratio fell with the chunk: 4.7x at 1,024 records, 5.5x at 4,096, 6.3x at 16,384 and 65,536
    (6 interleaved rounds, bench/results/dense.md 2026-11-28e). So the first ``warm`` records of
    each chunk are timed apart on both sides (``floor_warm``, ``loop_warm``) and the ratio is taken
    over the rest (the steady part): then 6.1x at 4,096 (warm 2,048) as at 16,384 (warm 4,096).

    Per chunk: ``floors[i]``, ``loops[i]`` (the steady parts' times: the loop's from its take of
    record ``warm`` of the chunk to the start of the next chunk's floor pass or the end of the input)
    and ``sizes[i]`` (their records), for chunks with a steady part."""

    def __init__(self, path: Path, chunk: int, warm: int, clock) -> None:
        from cep.io.readers import make_decoder, open_source

        if not 0 <= warm < chunk:
            raise ValueError(f"the warm-up ({warm}) must be shorter than the chunk ({chunk})")
        self.src = open_source(str(path))
        self.decode = make_decoder()  # `cep run`'s defaults, as the loop's (RunOptions)
        self.chunk, self.warm = chunk, warm
        self.clock = clock
        self.floor = 0.0  # all of the floor's time (taken out of the loop's clock)
        self.floor_warm = 0.0
        self.loop_warm = 0.0
        self.records = 0
        self.floors: list[float] = []
        self.loops: list[float] = []
        self.sizes: list[int] = []
        self.served = 0  # records handed to the loop
        self.boundary = 0  # where the next chunk starts
        self.steady_at = 0  # where this chunk's steady part starts
        self.since = None  # the clock when this chunk's steady loop time started
        self.start = 0.0  # the clock when this chunk's loop time started
        self.done = False

    def _switch(self) -> None:
        """The end of a chunk (the loop's time of its steady part) and the floor's pass over the next."""
        clock, take = self.clock, self.src.take_lines
        t0 = clock()
        if self.since is not None:
            self.loops.append(t0 - self.since)
        elif self.boundary:  # a chunk all warm-up (a short last one)
            self.loop_warm += t0 - self.start
        kw = parse_chunk(take, self.decode, self.warm)
        t1 = clock()
        k = parse_chunk(take, self.decode, self.chunk - self.warm) if kw == self.warm else 0
        t2 = clock()
        self.floor += t2 - t0
        self.floor_warm += t1 - t0
        if k:
            self.floors.append(t2 - t1)
            self.sizes.append(k)
        self.records += kw + k
        self.steady_at = self.boundary + kw if k else -1
        self.boundary += kw + k
        self.since = None
        self.done = not (kw + k)
        self.start = clock()

    def attach(self, src) -> None:
        from cep.io.readers import JsonlSource

        if type(src) is not JsonlSource:
            raise SystemExit("floor_and_loop: the paired floor reads JSON lines files only")
        take = src.take_lines

        def take_lines(limit: int):
            if not self.done:
                if self.served >= self.boundary:
                    self._switch()
                if self.served == self.steady_at:
                    t = self.clock()
                    self.loop_warm += t - self.start
                    self.since = t
                end = self.steady_at if self.served < self.steady_at else self.boundary
                limit = min(limit, end - self.served) if end > self.served else limit
            first, lines = take(limit)
            self.served += len(lines)
            return first, lines

        src.take_lines = take_lines  # the instance's: the loop looks it up once, after ``type(src) is JsonlSource``

    def close(self) -> None:
        self.src.close()


def floor_and_loop(pattern: Path, path: Path, chunk: int = CHUNK, clock=None, output: str = "/dev/null",
                   warm: int = WARM) -> dict:
    """The real `cep run` loop (``_Run.loop``, timed by the command itself) and the parse-only pass,
    paired: the floor's pass over each chunk of ``chunk`` records runs inside the loop, just before
    the loop reads that chunk (``_Paired``), so both see the same machine state; its time is taken out
    of the loop's. Both in ``clock`` (default ``time.perf_counter``; ``bench.floor_loop``:
    ``time.process_time``). Returns ``records``; ``floor_s`` and ``loop_s``, the steady parts' totals
    (the first ``warm`` records of each chunk apart: ``_Paired``) over ``steady_records``;
    ``floor_all_s`` and ``loop_all_s`` over every record; per chunk ``floors``, ``loops``, ``sizes``."""
    import cep.commands.run as runner

    clock = clock or time.perf_counter
    paired = _Paired(path, chunk, warm, clock)
    took: list[float] = []
    loop = runner._Run.loop

    def timed_loop(self):
        paired.attach(self.src)
        try:
            return loop(self)
        finally:
            took.append(self.elapsed)

    runner._Run.loop = timed_loop
    was = runner.time
    runner.time = _Clock(clock)
    try:
        gc.collect()
        _run_command(pattern, path, output)
    finally:
        runner._Run.loop = loop
        runner.time = was
        paired.close()
    n = paired.records
    if paired.served != n or len(paired.loops) != len(paired.floors):
        raise SystemExit(f"floor_and_loop: the loop read {paired.served} records, the floor {n}")
    loop_all = took[0] - paired.floor
    return {"records": n, "steady_records": sum(paired.sizes), "chunk": chunk, "warm": warm,
            "floor_s": sum(paired.floors), "loop_s": sum(paired.loops),
            "floor_all_s": paired.floor, "loop_all_s": loop_all,
            "floor_warm_s": paired.floor_warm, "loop_warm_s": paired.loop_warm,
            "floors": paired.floors, "loops": paired.loops, "sizes": paired.sizes}


def block_ratios(r: dict, block: int = BLOCK) -> list[float]:
    """The loop/floor ratio per block of ``block`` consecutive chunks (a shorter last block joins the
    one before it)."""
    fl, lo = r["floors"], r["loops"]
    cuts = list(range(0, len(fl), block))
    if len(cuts) > 1 and len(fl) - cuts[-1] < block:
        cuts.pop()
    ends = cuts[1:] + [len(fl)]
    return [sum(lo[a:b]) / sum(fl[a:b]) for a, b in zip(cuts, ends, strict=True) if sum(fl[a:b]) > 0]


def before_after(pattern: Path, path: Path, base: str, repeat: int) -> dict[str, dict[str, list[float]]]:
    """Wall and CPU times of `cep run` from ``base`` and from this checkout, interleaved."""
    got: dict[str, dict[str, list[float]]] = {"base": {"wall": [], "cpu": []}, "this checkout": {"wall": [], "cpu": []}}
    for _ in range(repeat):
        for name, env in (("base", procs.base_env(base)), ("this checkout", None)):
            r = procs.run_cep_cli([pattern], path, output="/dev/null", env=env)
            got[name]["wall"].append(r["wall_s"])
            got[name]["cpu"].append(r["cpu_s"])
    return got


def profile(pattern: Path, path: Path, top: int = 16) -> str:
    """cProfile of the real command over ``path``, by own time."""
    prof = cProfile.Profile()
    prof.enable()
    _run_command(pattern, path)
    prof.disable()
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


# ----------------------------------------------------------------------------- prototypes


def _records(path: Path, limit: int) -> list:
    from cep.io.readers import make_decoder, open_source

    decode = make_decoder()
    out = []
    for pos, raw in open_source(str(path)).records():
        out.append(decode(pos, raw))
        if len(out) == limit:
            break
    return out


def proto_batched(pattern: Path, path: Path, limit: int, batch_sizes: list[int], repeat: int = 3) -> list[dict]:
    """Insert + expire per event and atom vs per batch (per atom, every key group in one pass)."""
    from cep.lang.compiler import compile_files
    from cep.plan.physical import physical_plan
    from cep.plan.planner import plan_pattern
    from cep.runtime.iedyn import PatternRuntime

    cp = compile_files([str(pattern)])[0]
    W = cp.within
    evs = _records(path, limit)
    atoms = [(ai, a.type, a.filter) for ai, a in enumerate(cp.atoms)]
    key_attr = cp.partition_vars and cp.key_attrs(cp.atoms[0])[0]

    def fresh():
        return PatternRuntime(physical_plan(plan_pattern(cp)))

    def per_event() -> tuple[float, int]:
        rt = fresh()
        props = [rt._prop_of_atom[ai] for ai, _, _ in atoms]
        extract = rt.extract
        held: list = []  # (ts, ai, t) in arrival order
        head = 0
        gc.collect()
        t0 = time.perf_counter()
        for serial, e in enumerate(evs):
            limit_ts = e.ts - W
            while head < len(held) and held[head][0] < limit_ts:
                _, ai, t = held[head]
                props[ai](t, -1)
                head += 1
            for ai, typ, flt in atoms:
                if e.type == typ and (flt is None or flt(e)):
                    t = extract[ai](e, serial)
                    if t is not None:
                        props[ai](t, 1)
                        held.append((e.ts, ai, t))
        limit_ts = evs[-1].ts - W  # nothing left to expire at the end: the state of the last record
        while head < len(held) and held[head][0] < limit_ts:
            _, ai, t = held[head]
            props[ai](t, -1)
            head += 1
        return time.perf_counter() - t0, rt.count()

    def expire_batch(rt, held: list, head: int, limit_ts) -> int:
        """Every held tuple below ``limit_ts``: one batch deletion per atom."""
        due: dict[int, list] = defaultdict(list)
        while head < len(held) and held[head][0] < limit_ts:
            _, ai, t = held[head]
            due[ai].append(t)
            head += 1
        for ai, ts_ in due.items():
            rt._batch_from(rt._leaf_of_atom[ai])(dict.fromkeys(ts_, -1))
        return head

    def batched(bsize: int) -> tuple[float, int, float]:
        rt = fresh()
        extract = rt.extract
        leaf = rt._leaf_of_atom
        held: list = []
        head = 0
        groups = members = 0
        gc.collect()
        t0 = time.perf_counter()
        for start in range(0, len(evs), bsize):
            chunk = evs[start:start + bsize]
            # expiry at the batch's first record (a later record of the batch may expire more:
            # those go in the next batch, before its inserts; the final state is the same)
            head = expire_batch(rt, held, head, chunk[0].ts - W)
            for ai, typ, flt in atoms:
                d: dict = {}
                keys = set()
                for j, e in enumerate(chunk):
                    if e.type == typ and (flt is None or flt(e)):
                        t = extract[ai](e, start + j)
                        if t is not None:
                            d[t] = d.get(t, 0) + 1
                            held.append((e.ts, ai, t))
                            keys.add(e.fields.get(key_attr) if key_attr else None)
                if d:
                    rt._batch_from(leaf[ai])(d)
                    groups += len(keys)
                    members += len(d)
        expire_batch(rt, held, head, evs[-1].ts - W)
        el = time.perf_counter() - t0
        return el, rt.count(), members / max(1, groups)

    # interleaved rounds (the machine is shared): per event, then each batch size, ``repeat`` times
    times: dict[int, list[float]] = {1: [], **{b: [] for b in batch_sizes}}
    counts: dict[int, int] = {}
    per_group: dict[int, float] = {1: 1.0}
    for _ in range(repeat):
        s, counts[1] = per_event()
        times[1].append(s)
        for b in batch_sizes:
            s, counts[b], per_group[b] = batched(b)
            times[b].append(s)
    out = []
    for b in [1, *batch_sizes]:
        name = ("per event and atom (today's shape)" if b == 1
                else f"batch of {b} records, per atom, all key groups in one pass")
        out.append({"strategy": name, "batch": b, "s": min(times[b]), "median_s": statistics.median(times[b]),
                    "count": counts[b], "per_group": per_group[b], "runs": len(times[b])})
    return out


def proto_expiry_floor(path: Path, limit: int, window: int, key: str) -> dict:
    """Range deletion per group and window step cannot go below forgetting each event once:
    a per-key deque of (ts, serial) and one dict of events, popped per window step."""
    evs = _records(path, limit)
    store: dict[int, object] = {}
    groups: dict = defaultdict(list)
    heads: dict = defaultdict(int)
    order: list = []  # keys in arrival order of their oldest live event (a simple queue of (ts, key))
    qh = 0
    gc.collect()
    t0 = time.perf_counter()
    for serial, e in enumerate(evs):
        store[serial] = e
        k = e.fields[key]
        groups[k].append((e.ts, serial))
        order.append((e.ts, k))
        lim = e.ts - window
        while qh < len(order) and order[qh][0] < lim:
            _, k2 = order[qh]
            qh += 1
            g = groups[k2]
            h = heads[k2]
            # one range deletion: every expired entry of the group at once
            while h < len(g) and g[h][0] < lim:
                del store[g[h][1]]
                h += 1
            heads[k2] = h
    total = time.perf_counter() - t0
    return {"records": len(evs), "s": total}


def proto_tuples(path: Path, limit: int, fields: list[str]) -> dict:
    """Decoding into the reader's Event objects vs into a tuple of the fields the pattern reads."""
    from cep.io.readers import make_decoder, open_source

    lines = []
    for pos, raw in open_source(str(path)).records():
        lines.append((pos, raw))
        if len(lines) == limit:
            break
    decode = make_decoder()
    loads = orjson.loads
    gc.collect()
    t0 = time.perf_counter()
    for pos, raw in lines:
        decode(pos, raw)
    ev_s = time.perf_counter() - t0
    getters = fields
    gc.collect()
    t0 = time.perf_counter()
    for pos, raw in lines:
        r = loads(raw)
        (r["type"], r["ts"], *[r[f] for f in getters], pos)
    tup_s = time.perf_counter() - t0
    gc.collect()
    t0 = time.perf_counter()
    for _pos, raw in lines:
        loads(raw)
    json_s = time.perf_counter() - t0
    return {"records": len(lines), "event_s": ev_s, "tuple_s": tup_s, "json_s": json_s}


BATCH_HEAD = ["| strategy | runs | s best / median | speed-up vs per event, best / median | final match count "
              "| tuples per (atom, key group) per batch |", "|---|---|---|---|---|---|"]


def _batch_row(b: dict, base: dict) -> str:
    return (f"| {b['strategy']} | {b['runs']} | {b['s']:.2f} / {b['median_s']:.2f} | {base['s'] / b['s']:.2f}x / "
            f"{base['median_s'] / b['median_s']:.2f}x | {b['count']:,} | {b['per_group']:.2f} |")


def _prototypes_only(pattern: Path, path: Path, limit: int, args, argv, t_start: float) -> int:
    batches = [int(b) for b in args.batches.split(",")]
    n = limit if limit > 0 else 200_000
    bat = proto_batched(pattern, path, n, batches, args.repeat)
    ok = len({b["count"] for b in bat}) == 1
    L = [f"# Prototypes: {pattern.name} on {path.name}", "",
         f"Command: `python -m bench.where_time_goes {' '.join(sys.argv[1:] if argv is None else argv)}` ({time.perf_counter() - t_start:.0f} s, "
         f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {open('/proc/loadavg').read().split()[0]}).", "",
         *BATCH_HEAD]
    L += [_batch_row(b, bat[0]) for b in bat]
    L += ["", f"Final counts agree: {'yes' if ok else '**NO**'}."]
    Path(args.out).write_text("\n".join(L) + "\n")
    print("\n".join(L))
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.where_time_goes", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", default=str(RESULTS / "data" / "cards_1000000_1000_s11.jsonl"))
    ap.add_argument("--pattern", default=str(procs.REPO / "patterns" / "card_testing.pattern"))
    ap.add_argument("--limit", type=int, default=0, help="records (0: all)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batches", default="64,512")
    ap.add_argument("--out", default=str(RESULTS / "where_time_goes.md"))
    ap.add_argument("--prototypes-only", action="store_true", help="skip the floor, phase and cProfile passes")
    ap.add_argument("--base", help="another checkout: `cep run` of it and of this one as subprocesses, "
                    "interleaved, for a before/after ratio")
    args = ap.parse_args(argv)
    pattern, path = Path(args.pattern), Path(args.input)
    limit = args.limit or -1
    t_start = time.perf_counter()
    if args.prototypes_only:
        return _prototypes_only(pattern, path, limit, args, argv, t_start)
    data = _prefix(path, args.limit)
    fl = [floor_and_loop(pattern, data) for _ in range(args.repeat)]
    n = fl[0]["records"]
    ns = fl[0]["steady_records"]
    floors = sorted(r["floor_s"] for r in fl)
    loops = sorted(r["loop_s"] for r in fl)
    ph = min((instrumented(pattern, data) for _ in range(args.repeat)), key=lambda r: r["total_ns"])
    ab = before_after(pattern, data, args.base, args.repeat) if args.base else None
    prof = profile(pattern, _prefix(path, min(n, 200_000)))
    batches = [int(b) for b in args.batches.split(",")]
    bat = proto_batched(pattern, path, min(n, 200_000), batches, args.repeat)
    cp_window = _engine(pattern).patterns[0].within
    exp = proto_expiry_floor(path, min(n, 200_000), cp_window, "card")
    tup = proto_tuples(path, min(n, 200_000), ["card", "amount"])
    load = open("/proc/loadavg").read().split()[0]

    L = [f"# Where the time goes: {pattern.name} on {path.name} ({n:,} records)", "",
         f"Command: `python -m bench.where_time_goes {' '.join(sys.argv[1:] if argv is None else argv)}` "
         f"({time.perf_counter() - t_start:.0f} s, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
         f"load average {load}; `--repeat {args.repeat}`).", "",
         "## Loop against its parse-only floor", "",
         "| | best s | median s | µs/record (best) |", "|---|---|---|---|",
         f"| parse-only floor (`parse_chunk`: `cep.io.readers.parse_only`'s reader + decoder, paired per chunk inside the loop) | {floors[0]:.2f} | {floors[len(floors) // 2]:.2f} | {floors[0] / ns * 1e6:.2f} |",
         f"| `cep run` loop (`cep.commands.run`, timed by the command, the floor's passes taken out) | {loops[0]:.2f} | {loops[len(loops) // 2]:.2f} | {loops[0] / ns * 1e6:.2f} |",
         f"| ratio | {loops[0] / floors[0]:.1f}x | {loops[len(loops) // 2] / floors[len(floors) // 2]:.1f}x | |",
         ""]
    if ab is not None:
        L += ["## Before / after (`cep run` as a subprocess, whole process, rounds interleaved)", "",
              "CPU = user + system time of the process (`wait4`): on a loaded machine the wall time is mostly "
              "waiting for a core, the CPU time is the work done.", "",
              "| checkout | runs | wall s best / median | CPU s best / median | events/s best (wall) | speed-up wall best / median | speed-up CPU best / median |",
              "|---|---|---|---|---|---|---|"]
        bw, bc = ab["base"]["wall"], ab["base"]["cpu"]
        for name, t in ab.items():
            w, c = t["wall"], t["cpu"]
            L.append(f"| {name} | {len(w)} | {min(w):.2f} / {statistics.median(w):.2f} | {min(c):.2f} / {statistics.median(c):.2f} | "
                     f"{n / min(w):,.0f} | {min(bw) / min(w):.2f}x / {statistics.median(bw) / statistics.median(w):.2f}x | "
                     f"{min(bc) / min(c):.2f}x / {statistics.median(bc) / statistics.median(c):.2f}x |")
        L += ["", f"base = `{args.base}` (its `cep` first on PYTHONPATH).", ""]
    L += ["## By phase (the real `cep run`, its functions wrapped with a clock; best of the repeats)", "",
          "Each phase is the own time of the functions listed in `PHASES` (bench/where_time_goes.py): their "
          "time minus the wrapped calls inside them. A wrapped call costs its caller "
          f"{ph['overhead_ns']:.0f} ns beyond the callee's own time (calibrated, subtracted). Phases sum to "
          f"{ph['total_ns'] / 1e9:.2f} s against the plain loop's {loops[0]:.2f} s (best).", "",
          "| phase | calls | s | µs/record | share |", "|---|---|---|---|---|"]
    tot = ph["total_ns"]
    for p in PHASES:
        v = ph["ns"].get(p, 0.0)
        L.append(f"| {p} | {ph['calls'].get(p, 0):,} | {v / 1e9:.2f} | {v / n / 1e3:.2f} | {v / tot:.0%} |")
    L += ["", "## cProfile, own time (first 200,000 records)", "", "```", prof.strip()[:6000], "```", "",
          "## Prototypes (the first 200,000 records, the engine's runtime objects as a library)", "",
          "Batched updates (insert and expiry through the update paths only: no routing, output or bookkeeping):", "",
          *BATCH_HEAD]
    L += [_batch_row(b, bat[0]) for b in bat]
    ok = len({b["count"] for b in bat}) == 1
    L += ["", f"Final counts agree: {'yes' if ok else '**NO**'}.", "",
          f"Expiry floor (forget each event once, one range deletion per key group and window step): "
          f"{exp['s']:.2f} s for {exp['records']:,} records = {exp['s'] / exp['records'] * 1e6:.2f} µs/record, "
          f"against the engine's expiry phases (without the update paths they share with inserts) "
          f"{sum(v for p, v in ph['ns'].items() if p.startswith('expiry')) / n / 1e3:.2f} µs/record.", "",
          f"Events as tuples ({tup['records']:,} records): the reader's Event objects {tup['event_s'] / tup['records'] * 1e6:.2f} µs/record, "
          f"a tuple of the fields the pattern reads {tup['tuple_s'] / tup['records'] * 1e6:.2f} µs/record, "
          f"orjson.loads alone {tup['json_s'] / tup['records'] * 1e6:.2f} µs/record."]
    Path(args.out).write_text("\n".join(L) + "\n")
    print("\n".join(L))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
