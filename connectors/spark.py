"""cep on Spark Structured Streaming: ``detect(events, patterns, ...)`` -> a DataFrame of composite events.

Why this shape: the engine core (``cep.runtime.engine.Engine``) is a plain Python object whose state is plain data (``Engine.dumps()``: versioned JSON, no pickle), so Spark
only has to (1) route every input record to the group(s) that need it and (2) keep the engine states of each group
in its state store. A group is ``(pattern, key group)``, a key group holding a few hash buckets of partition key
values, one engine each (see "Key groups" below).
The compiler's partition analysis (``CompiledPattern.partition_vars`` and each atom's ``attrs``) says which
attribute of each event type holds the key, so events of one key meet in one engine and different key groups
run on different executors. A pattern without a partition key runs as one group (one task). State lives in the state store (``applyInPandasWithState``, state =
the group's ``Engine.dumps()`` bytes: ``_state_blob``), checkpointed with the query, so a restart resumes the same
state; an event-time timeout drops a group's state once the watermark has passed its window.

Stages:

1. ``_route`` (``mapInPandas``): decode each record exactly as ``cep run`` does (``cep.io.readers.make_decoder``),
   find the group(s) of every pattern that uses its type, and emit ONE row per group of the task's input:
   ``(g, kg, eg, evt, value)``, ``value`` holding the group's records packed (their count, the positions without
   their common prefix, the texts, joined by a newline, in input order: ``_pack``), ``evt`` = the largest event
   time among them as Spark's event-time column (``spark_time_us``). Why packed: every row costs Spark per-row
   work (Arrow both ways, shuffle, sort, pandas) that grows with the rows, not the bytes; with one row per record
   it was most of the JVMs' CPU. The watermark is unchanged: Spark's is the largest ``evt`` over all rows, the
   same as over all records.
2. ``withWatermark`` on ``evt`` (delay = lateness + 1 ms: the watermark ``cep run`` would have at the start of
   the micro-batch; Spark's own late-row filter is kept off, see ``detect``).
3. ``groupBy(g, kg).applyInPandasWithState(_handler)``: per key group, get the engine (kept in the Python
   worker between micro-batches while the stored state's nonce matches; else loaded from the state bytes),
   advance its watermark to Spark's, push the batch's rows in event-time order, emit the composite events, save
   the state.

Key groups: the partition key value is hashed (crc32 of its canonical JSON) into ``engine_buckets()`` buckets
(64 by default), as Flink does; a bucket's engine holds every key of its bucket and partitions them internally, and
Spark groups the buckets into ``key_groups`` key groups (bucket % key_groups; 16 by default), each holding its
buckets' engines. Grouping by the raw key would build one engine per key per micro-batch (milliseconds each:
planning and runtime construction), which dominated the cost; a Spark group per bucket pays PySpark's per-group
cost 64 times a micro-batch, while fewer, larger buckets make the engine slower per event (``engine_buckets``).
The key-group count bounds the parallelism; both counts are fixed for the life of a checkpoint.

Output columns: ``pattern, op, id, match`` (match as a JSON string), ``key`` (the partition key as the Kafka
record key, as ``cep run`` keys it: null without one) and ``value`` (the output line exactly as ``cep run`` writes it, no newline).
``cep spark`` writing to a directory sets ``PatternSpec.pack_output``: then a group's composite events of a
micro-batch are ONE row (``op = "lines"``, ``value`` = their lines joined by a newline, ``n_plus``/``n_minus``
their counts, from which the observed metrics are summed), which the text sink writes as those same lines;
Kafka output and ``detect()``'s callers keep one row per composite event.
"""

from __future__ import annotations

import bisect
import gc
import math
import operator
import os
import uuid
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cep.connectors.spark_session import make_session  # noqa: F401 - the public API with detect (docs/kafka-spark.md)

from cep.gc_policy import stream_gc
from cep.io.readers import _DIGITS, _INTEGER_RUN
from cep.longints import has_long_digit_run_numpy
from cep.plan.partition import partition_attrs
from cep.units import TIME_UNITS

# one row per (pattern, engine bucket): see _packed_frame; kg = the key group (Spark's group), eg = the bucket,
# evt = Spark's event-time column (``spark_time_us``: microseconds, handed over as a plain int64)
ROUTE_SCHEMA = "g int, kg int, eg int, evt timestamp, value string"
PLAIN_MARK = "p"  # leads a packed value of flat records without long integers (``_pack_segments``)
PACK_SEP = "\n"  # joins a packed row's parts (a record whose position or text holds it rides alone: ``_pack``)
PACK_SEP_BYTES = PACK_SEP.encode()
PACK_RECORDS = 200_000  # routed records a route task holds before it emits its packed rows (bounds its memory)
OUT_SCHEMA = "pattern string, op string, id string, match string, key string, value string"
# ``PatternSpec.pack_output`` (``cep spark`` to a directory): a group's composite events of a micro-batch are one
# row, op = LINES_OP, value = their output lines joined by a newline, n_plus / n_minus = how many of each op
LINES_OP = "lines"
MATCH_OPS = ("+", "-", LINES_OP)  # the ops of rows that hold composite events (one each, or packed)
# A packed output row has only what ``cep spark`` reads of it: ``value`` (the sinks), ``pattern``, ``op`` and the
# counts (the observed metrics), not ``id``, ``match`` and ``key`` (always null on its rows but the side rows'
# ``id``). Why: Spark prunes columns nobody reads with a projection right above the state step, a code-generated
# stage of its own in every micro-batch (closure cleaned, planned, generated per task: bench/results/spark.md)
PACKED_OUT_SCHEMA = "pattern string, op string, value string, n_plus int, n_minus int"
STATE_SCHEMA = "nonce string, blob binary"
TIME_US = {u: 1_000_000 // per_s for u, per_s in TIME_UNITS.items()}  # microseconds per time unit

# Spark's event-time column is the event time (in us) plus SPARK_TIME_OFFSET_US, clamped to SPARK_TIME_RANGE_US.
# Why: Spark's watermark starts at 0 and only moves forward, so with raw times a stream of times <= 0 (or below
# the delay) never gets a watermark; the offset (10^15 us, about 31.7 years) keeps every plausible time above 0.
# The clamp keeps the column inside what pandas' datetime64[ns] holds (a timestamp column reaching the Python
# workers is converted to it; the state step's marked column, the top of this range, is a long now: ``detect``);
# a clamped time can only make the watermark lower than exact (the engine then accepts more, never less).
SPARK_TIME_OFFSET_US = 10**15
SPARK_TIME_RANGE_US = (1, 9 * 10**15)
BAD_ROW_GROUP = -1  # route rows of bad records (``on_error="skip"``): value = the error report line
SIDE_OPS = ("late", "error")  # output rows that are not composite events (see detect())
BAD_RECORD_MARK = "cep-bad-record: "  # prefix of a bad record's message inside Spark's failure text


# A new query's Spark groups of partition keys (``--key-groups``) and the engine buckets in all (each key group holds
# ENGINE_BUCKETS // key_groups engines, at least one). Why 16 and 64: PySpark's per-group cost falls with fewer
# groups, while the engine is cheapest per event with about 64 buckets on the bench stream (1 000 keys);
# 16 key groups still spread over the default 4 state partitions (Spark hashes the groups to them: 3-5 each).
DEFAULT_KEY_GROUPS = 16
ENGINE_BUCKETS = 64


class SparkPathError(ValueError):
    """A pattern set or input the Spark path cannot run, with a message for the user."""


# ---------------------------------------------------------------------------------------------- pattern specs


@dataclass
class PatternSpec:
    """What the workers need to rebuild the compiled patterns (compiled objects hold code and do not pickle)."""

    sources: list[tuple[str, str]]  # (filename, text) of each pattern file
    time_unit: str = "s"
    type_field: str = "type"
    time_field: str = "ts"
    op_field: str = "op"
    lateness: int | float = 0  # in time units
    on_error: str = "fail"  # fail | skip
    # Spark's groups of partition key values (the unit of state and of parallelism), each holding
    # ``group_engines`` engines (hash buckets of their own): see ``engine_buckets``; both fixed for the life of a
    # checkpoint (``check_checkpoint`` reads them from it)
    key_groups: int = DEFAULT_KEY_GROUPS
    group_engines: int = 1
    given: frozenset = frozenset()  # which of key_groups / group_engines the caller chose (not defaults)
    names: list[str] = field(default_factory=list)
    match_column: bool = True  # False: ``match`` is null (``cep spark`` writes only ``value``; saves a JSON per output)
    # True: one output row per group and micro-batch for the composite events (``_out_rows``), for a text sink
    # (``cep spark`` to a directory), and only the columns of ``PACKED_OUT_SCHEMA``; ``detect()``'s documented
    # shape is one row per composite event
    pack_output: bool = False

    def cache_id(self) -> tuple:
        return (tuple(self.sources), self.time_unit, self.type_field, self.time_field, self.op_field,
                self.lateness, self.on_error, self.key_groups, self.group_engines)

    def engine_buckets(self) -> int:
        """The hash buckets of partition key values, one engine each: ``key_groups * group_engines``; bucket
        ``b`` is in key group ``b % key_groups``.

        Why two counts: PySpark pays per group and micro-batch (Arrow -> pandas of the group's rows, the state
        object's pickle both ways, a state and an output frame: bench/results/spark.md), so fewer Spark groups
        are cheaper; but one engine per fewer, larger buckets costs more per event (the engine's indexes and
        batch paths over more keys: 8 instead of 64 buckets, ~15-20 % more). A key group holds the engines of
        its buckets in its one state row (``_state_blob``).
        """
        return self.key_groups * self.group_engines

    def layout(self) -> str:
        """The state layout's name, at the head of every state's nonce: ``"64"`` (one engine per key group, the
        state blob an ``Engine.dumps``) or ``"16x4"`` (``_state_blob``'s several engines)."""
        return str(self.key_groups) if self.group_engines == 1 else f"{self.key_groups}x{self.group_engines}"

    def compile(self) -> list:
        """The compiled patterns, once per process for the same text and time unit."""
        key = (tuple(self.sources), self.time_unit)
        cached = _COMPILED.get(key)
        if cached is None:
            from cep.lang.compiler import compile_text

            cached = []
            for fname, text in self.sources:
                cached.extend(compile_text(text, fname, self.time_unit))
            _COMPILED[key] = cached
        return cached

    def plans(self) -> list:
        """The compiled patterns' physical plans, once per process (as ``compile``).

        Why: a worker builds an engine for a key group whenever it has none cached for the stored state
        (its first batch, a group that moved between workers), and planning is most of building one.
        The plans are immutable; each engine still builds its own runtime and holds only its own data.
        """
        key = (tuple(self.sources), self.time_unit)
        cached = _PLANS.get(key)
        if cached is None:
            from cep.plan.physical import physical_plan
            from cep.plan.planner import plan_pattern

            cached = _PLANS[key] = [physical_plan(plan_pattern(cp)) for cp in self.compile()]
        return cached

    def new_engine(self, g: int, *, own_watermark: bool = True, lines: bool = False):
        """A fresh engine for pattern ``g``, from this process's compiled patterns and plans; ``lines``:
        its new matches come back as encoded lines (``Engine(lines=True)``), for callers that only pack them
        (``_out_rows`` with ``pack_output``)."""
        from cep.runtime.engine import Engine

        return Engine([self.compile()[g]], lateness=self.lateness, own_watermark=own_watermark,
                      plans=[self.plans()[g]], lines=lines)

    def load_engine(self, g: int, blob: bytes, *, lines: bool = False):
        """Pattern ``g``'s engine from its saved state (``Engine.dumps``), from this process's plans."""
        from cep.runtime.engine import Engine

        return Engine.loads(blob, [self.compile()[g]], [self.plans()[g]], lines=lines)


# per process (Spark's Python workers are reused across tasks): compiled patterns and physical plans, keyed by
# the pattern text and time unit; they hold no key group's data
_COMPILED: dict[Any, list] = {}
_PLANS: dict[Any, list] = {}


def pattern_spec(patterns: str | os.PathLike | Sequence[str | os.PathLike], **kw: Any) -> PatternSpec:
    """Pattern files (paths) or pattern text -> a spec; compiles once here so errors surface on the driver."""
    if isinstance(patterns, (str, os.PathLike)):
        patterns = [patterns]
    sources = []
    for p in patterns:
        s = str(p)
        if "\n" not in s and Path(s).is_file():
            sources.append((s, Path(s).read_text()))
        elif "\n" in s or s.lstrip().upper().startswith("PATTERN"):
            sources.append(("<pattern>", s))
        else:
            raise SparkPathError(f"no such pattern file: {s}")
    given = frozenset(k for k in ("key_groups", "group_engines") if kw.get(k) is not None)
    kw = {k: v for k, v in kw.items() if v is not None or k not in ("key_groups", "group_engines")}
    spec = PatternSpec(sources, **kw, given=given)
    if spec.time_unit not in TIME_US:
        raise SparkPathError(f"unknown time unit {spec.time_unit!r} (use s, ms or us)")
    for name, v in (("key_groups", spec.key_groups), ("group_engines", spec.group_engines)):
        if type(v) is not int or v < 1:
            raise SparkPathError(f"{name} must be a positive integer, got {v!r}")
    if "group_engines" not in given:
        spec.group_engines = max(1, ENGINE_BUCKETS // spec.key_groups)
    if spec.on_error not in ("fail", "skip"):
        raise SparkPathError(f"on_error must be fail or skip, got {spec.on_error!r}")
    cps = spec.compile()
    names = [cp.name for cp in cps]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SparkPathError(f"pattern names must be unique: {', '.join(dup)}")
    spec.names = names
    return spec


def _canon_key(values: Sequence[Any]) -> str:
    """The group key: numbers by value (1 == 1.0), booleans apart from numbers, as compact JSON."""
    import orjson

    out = []
    for v in values:
        if type(v) is float and v.is_integer():
            v = int(v)
        out.append(v)
    return orjson.dumps(out).decode()


def kafka_key(values: Sequence[Any]) -> str:
    """The output record key of a composite event: the partition key value (a string as is, else JSON).

    The same rule as ``cep run`` on Kafka (``cep.io.writers.kafka_key``), so both paths key alike.
    """
    from cep.io.writers import kafka_key as key_bytes

    return key_bytes(list(values)).decode()


# ---------------------------------------------------------------------------------------------- stage 1: route


DECODE_CHUNK = 1024  # records per ``decode.many`` call (a record off its fast path ends a chunk's fast part)
KEY_CACHE_SIZE = 100_000  # string partition keys whose key group a route step remembers (then starts afresh)


def _router(spec: PatternSpec):
    """``route(lines, start, prefix, poss, packs) -> routed``: each record ``lines[i]`` (raw bytes, ``i >= start``) to
    its groups' packs (see ``_route_batches``), its position being ``prefix + str(i)`` (a whole file: ``i`` is
    the line number) or ``poss[i]``: ``packs[(g, bucket)] = [largest time in time units, segments]``, a segment
    being ``(prefix, position rests, texts)`` of one call; bad records (with ``on_error="skip"``) to
    ``(BAD_ROW_GROUP, 0)`` as their report, blank ones nowhere."""
    import orjson

    from cep.io.readers import BadRecord, make_decoder
    from cep.lang.gcq import TIME_ATTR, read_key

    cps = spec.compile()
    loads = orjson.loads
    type_field, time_field, op_field = spec.type_field, spec.time_field, spec.op_field
    decode = make_decoder(spec.type_field, spec.time_field, spec.time_unit, spec.op_field)
    factor = TIME_US[spec.time_unit]
    groups = spec.engine_buckets()  # a record's bucket; its key group is the bucket % key_groups (_packed_frame)
    skip = spec.on_error == "skip"
    crc32 = zlib.crc32
    tracked = gc.is_tracked
    # type -> [(g, attrs or None, the one attribute of a one-field key or None)]
    routes: dict[str, list[tuple[int, tuple[str, ...] | None, str | None]]] = {}
    for g, cp in enumerate(cps):
        attrs = partition_attrs(cp)
        types = [a.type for a in cp.atoms] + [t for gap in cp.gaps for t in gap.types]
        for t in dict.fromkeys(types):
            a = None if attrs is None else attrs[t]
            one = a[0] if a is not None and len(a) == 1 and a[0] != TIME_ATTR else None
            routes.setdefault(t, []).append((g, a, one))
    # key group of a one-field string key (the common case): crc32 of its canonical JSON, once per key
    kg_of: dict[str, int] = {}

    def group_of(ev, attrs, one) -> int:
        """The key group of ``ev`` for a pattern keyed by ``attrs`` (``one``: its one attribute, if so)."""
        if attrs is None:
            return 0
        if one is not None and type(v := ev.fields.get(one)) is str:
            kg = kg_of.get(v)
            if kg is None:
                if len(kg_of) >= KEY_CACHE_SIZE:
                    kg_of.clear()
                kg = kg_of[v] = crc32(_canon_key((v,)).encode()) % groups
            return kg
        return crc32(_canon_key(read_key(ev, attrs)).encode()) % groups

    def pack_of(cur: dict, key: tuple[int, int]) -> list:
        pack = cur.get(key)
        if pack is None:
            pack = cur[key] = [-math.inf, []]
        return pack

    def add(cur: dict, key: tuple[int, int], ts, i: int) -> None:
        pack = cur.get(key)
        if pack is None:
            cur[key] = [ts, [i]]
        else:
            if ts > pack[0]:
                pack[0] = ts
            pack[1].append(i)

    # the common case: a type read by one pattern with a one-field key (the loop below, without calls)
    single = {t: found[0] for t, found in routes.items() if len(found) == 1 and found[0][2] is not None}

    def route(lines: list[bytes], start: int, prefix: str, poss: list[str] | None, packs: dict,
              plain: bool | None = None) -> int:
        """Route ``lines[start:]`` into ``packs``; the routed (record, group) pairs.

        The records are decoded as ``cep run`` decodes a JSON lines file (``decode.lines``: a chunk's leading
        records on the fast path in one call, the record that ends the run one at a time, then on), and a
        group's records are gathered as indexes into ``lines`` (one list append per record), made a segment
        of texts and position rests once per group at the end. A pack's time is the largest event time of its
        records in time units (``_packed_frame`` converts it to us: the conversion is monotonic, so the largest
        converted time is the converted largest), -inf for the bad records' group.
        ``plain`` (``no_long_integer`` of the lines' bytes; computed when not given): the records on
        ``decode.lines``' fast path are read from their dicts without making its events (the route needs a
        record's type, time and key only): the same records take that path, with the same values (the events
        are made in the state step). Why: making 10^5 events per micro-batch that are dropped at once was a
        third of the route step. A record holding a dict or a list (a bad record) leaves that path where it is
        parsed (``gc.is_tracked``, as ``decode.plain`` finds it), so its bytes are not scanned for one.
        """
        cur: dict[tuple[int, int], list] = {}  # (g, bucket) -> [largest time, indexes into lines]
        # the type of the record before (none yet) and its ``single`` route: (sg, sattrs, sone), the pattern's
        # key cache ``scache``
        last_type, last_route = _NO_TYPE, None
        at_value: list[dict[str, list]] = [{} for _ in cps]  # per pattern: a string key value -> its pack in cur
        bad: list[tuple[str, bytes]] = []
        many = decode.lines
        end = len(lines)
        if plain is None:
            plain = no_long_integer(b"\n".join(lines[start:]))
        for lo in range(start, end, DECODE_CHUNK):
            hi = min(lo + DECODE_CHUNK, end)
            if plain:
                # decode.lines' fast path without its events: each record's type, time and key read from its
                # dict (see ``no_long_integer``); up to the first record off that path. A string key seen before in
                # this call finds its pack in one look-up (``at_value``)
                for i in range(lo, hi):  # noqa: B007 - i: where the run stopped
                    try:
                        rec = loads(lines[i])
                        typ = rec[type_field]
                        ts = rec[time_field]
                    except Exception:  # noqa: BLE001 - decode gives the precise reason
                        break
                    if typ != last_type:  # a type is checked, and its route found, once per run of it (most
                        # files hold one type, or few in runs): per record, a string compare
                        if type(typ) is not str or not typ:
                            break
                        last_type, last_route = typ, single.get(typ)
                        if last_route is not None:
                            sg, sattrs, sone = last_route
                            scache = at_value[sg]
                    tt = type(ts)
                    if (tt is not int and tt is not float) or tracked(rec):
                        break
                    if op_field in rec:  # most records have none
                        op = rec.pop(op_field)
                        if op != "+" and op != "-":
                            break
                    if last_route is not None:
                        try:
                            v = rec[sone]
                        except KeyError:
                            v = None
                        if type(v) is str:
                            pack = scache.get(v)
                            if pack is None:
                                pack = scache[v] = pack_of(cur, (sg, group_of(_plain_event(typ, ts, rec), sattrs, sone)))
                        else:
                            pack = pack_of(cur, (sg, group_of(_plain_event(typ, ts, rec), sattrs, sone)))
                        if ts > pack[0]:
                            pack[0] = ts
                        pack[1].append(i)
                        continue
                    found = routes.get(typ)
                    if found:
                        ev = _plain_event(typ, ts, rec)
                        for g, attrs, one in found:
                            add(cur, (g, group_of(ev, attrs, one)), ts, i)
                else:
                    i = hi
                slow = i
            else:
                evs = many(lines[lo:hi], lo)
                slow = lo + len(evs)
                for i, ev in enumerate(evs, lo):
                    typ = ev.type
                    one_route = single.get(typ)
                    if one_route is not None:
                        g, _attrs, one = one_route
                        v = ev.fields.get(one)
                        if type(v) is str and (kg := kg_of.get(v)) is not None:
                            key = (g, kg)
                        else:
                            key = (g, group_of(ev, _attrs, one))
                        ts = ev.ts
                        pack = cur.get(key)
                        if pack is None:
                            cur[key] = [ts, [i]]
                        else:
                            if ts > pack[0]:
                                pack[0] = ts
                            pack[1].append(i)
                        continue
                    for g, attrs, one in routes.get(typ, ()):
                        add(cur, (g, group_of(ev, attrs, one)), ev.ts, i)
            # the record that ends the fast run and the rest of the chunk one at a time (as ``cep run``)
            for k in range(slow, hi):
                raw = lines[k]
                pos = prefix + (str(k) if poss is None else poss[k])
                try:
                    ev = decode(pos, raw)
                except BadRecord as e:
                    if not raw.strip():  # a blank record (as ``cep run`` skips a blank line)
                        continue
                    if not skip:
                        raise SparkPathError(f"{BAD_RECORD_MARK}input record {pos}: {e}") from None
                    bad.append((pos, error_report(pos, str(e), raw).encode()))
                    continue
                for g, attrs, one in routes.get(ev.type, ()):
                    add(cur, (g, group_of(ev, attrs, one)), ev.ts, k)
        at = lines.__getitem__
        for key, (ts, idx) in cur.items():
            # a whole file's position rests are its line numbers, kept as ints (``_pack_segments`` writes them)
            seg = (prefix, idx if poss is None else list(map(poss.__getitem__, idx)), list(map(at, idx)), plain)
            pack = packs.get(key)
            if pack is None:
                packs[key] = [ts, [seg]]
            else:
                if ts > pack[0]:
                    pack[0] = ts
                pack[1].append(seg)
        if bad:
            pack = packs.setdefault((BAD_ROW_GROUP, 0), [-math.inf, []])
            pack[1].append(("", [p for p, _r in bad], [r for _p, r in bad], False))
        return sum(len(idx) for _ts, idx in cur.values()) + len(bad)

    route.factor = factor  # type: ignore[attr-defined]
    route.key_groups = spec.key_groups  # type: ignore[attr-defined]
    return route


_NO_TYPE = object()  # equal to no record's type (``_router``'s loop: the type of the record before)


def no_long_integer(blob: bytes) -> bool:
    """Whether no record in ``blob`` (JSON lines) can hold an integer orjson reads as a float: no run of 19
    digits but a fraction's (``decode.plain``'s test: ``cep.longints``, ``cep.io.readers._INTEGER_RUN``).

    The route step's test of a batch's bytes: with it, its loop reads records without ``decode.lines``' scan
    of their values, finding nested ones (bad records) where it parses them (``_router``). Why the digits on a
    numpy view (``has_long_digit_run_numpy``): ~50 instructions a record against ~830 for
    ``has_long_digit_run``'s translate and search; ``plain_lines``' other pass, for a ``{`` after a ``:``, was
    ~480 (the route parses every record anyway)."""
    return not has_long_digit_run_numpy(blob) or _INTEGER_RUN.search(blob) is None


def plain_lines(lines: list[bytes]) -> bool:
    """Whether no record of ``lines`` can hold a nested value or a number ``decode`` reads other than orjson:
    ``decode.lines``' test of a batch's bytes (``cep.io.readers``), over all of them at once.

    Then ``decode.lines`` takes its fast path without its scan of the values for every chunk of them, and a
    record's event is its type, its time and its dict, the op field popped (``_plain_event``,
    ``_decode_group``): the state step reads records so without making ``decode.lines``' events (the route
    step tests its batches with ``no_long_integer`` and finds nested records as it parses them). Both tested
    properties are properties of one record (one line: a ``[``, a ``:`` then ``{`` with only blanks between, a
    run of 19 digits), so the lines joined by a newline show them exactly when some line holds them.
    The bytes are looked at as a numpy array (``has_long_digit_run_numpy``, ``_nested_object``). Why:
    ``decode.lines``' own test (``bytes.translate`` deleting blanks, then two searches) was ~1,100 instructions
    a record; the array's passes are ~550 (the digit runs ~50).
    """
    import numpy as np

    blob = b"\n".join(lines)
    if b"[" in blob:
        return False
    view = np.frombuffer(blob, np.uint8)
    return not has_long_digit_run_numpy(blob) and not _nested_object(blob, view)


_BLANKS = (32, 9, 13)  # the blanks ``decode.lines``' test deletes before it looks for ``:{``


def _nested_object(blob: bytes, view) -> bool:
    """Whether a ``{`` follows a ``:`` with only blanks between (a nested object, or such text in a string): the
    byte before each ``{``, and where that is a blank, the test of ``cep.io.readers`` (rare)."""
    import numpy as np

    opens = np.flatnonzero(view == 123)
    before = view[opens[opens > 0] - 1]
    if (before == 58).any():
        return True
    if np.isin(before, _BLANKS).any():
        return b":{" in blob.translate(_DIGITS, bytes(_BLANKS))
    return False


def _plain_event(typ: str, ts: int | float, rec: dict):
    """The event ``decode`` makes of a record on its fast path (for its key: position and op unused)."""
    from cep.event import Event

    ev = Event.__new__(Event)
    ev.type, ev.ts, ev.fields, ev.pos, ev.op = typ, ts, rec, "", "+"
    return ev


_NO_TIME_US = -(2**62)  # the time of a bad record's row: clamps to the bottom of Spark's range, moves no watermark


def spark_time_us(us: int) -> int:
    """Spark's event-time column (in us) for an event time of ``us`` microseconds: offset by
    ``SPARK_TIME_OFFSET_US`` and clamped to ``SPARK_TIME_RANGE_US`` (see there).

    The route step emits it (``_packed_frame``) rather than ``detect`` computing it in Spark: a projection in
    the plan costs Spark per micro-batch (its closure cleaned, optimized, its code generated in each task)."""
    lo, hi = SPARK_TIME_RANGE_US
    return min(max(us + SPARK_TIME_OFFSET_US, lo), hi)


def error_report(pos: str, reason: str, raw: bytes) -> str:
    """A bad record as ``cep run --errors`` reports it: one JSON object (line, pos, reason, record).

    ``line`` is null: on Spark the position (file path and line, or Kafka topic, partition and offset) says where.
    """
    import orjson

    text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
    return orjson.dumps({"line": None, "pos": pos, "reason": reason, "record": text}).decode()


def _route_batches(spec: PatternSpec, whole_files: bool = False):
    """mapInPandas: a task's records -> one packed row per group (see the module docstring, stage 1).

    ``whole_files``: each input row is a whole file (``pos`` = its path, ``value`` = its text), split into lines
    here, line ``i`` (from 1) being the record at ``<path>:<i>`` and blank lines no records, as ``cep run`` reads
    a file. Why here: splitting in Spark (``posexplode``, a filter, a position per line) is per-row JVM work on
    every record, and ``bytes.split`` is a fraction of it. The records go to the router as raw bytes (a whole
    file's ``split``; ``input_records`` gives bytes, a text value is encoded), as ``cep run`` reads them.
    """

    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        route = _router(spec)
        packs: dict[tuple[int, int], list] = {}  # (g, kg) -> [largest time, segments]: see ``_router``
        held = 0
        for pdf in batches:
            with stream_gc():
                if whole_files:
                    for pos, value in zip(pdf["pos"].tolist(), pdf["value"].tolist(), strict=True):
                        if value is None:
                            continue
                        raw = value.encode() if isinstance(value, str) else bytes(value)
                        # line i at index i (a blank line is no record: ``route`` skips it, keeping its number)
                        held += route([b"", *raw.split(b"\n")], 1, f"{pos}:", None, packs, no_long_integer(raw))
                else:
                    poss, lines = [], []
                    for pos, value in zip(pdf["pos"].tolist(), pdf["value"].tolist(), strict=True):
                        if value is not None:
                            poss.append(pos)
                            lines.append(value.encode() if isinstance(value, str) else bytes(value))
                    held += route(lines, 0, "", poss, packs)
            if held >= PACK_RECORDS:  # checked per input batch (a whole file is one)
                yield _packed_frame(packs, route.factor, route.key_groups)
                packs, held = {}, 0
        if packs:
            yield _packed_frame(packs, route.factor, route.key_groups)

    return fn


def _packed_frame(packs: dict[tuple[int, int], list], factor: int, key_groups: int):
    """The route step's output rows: one per (pattern, engine bucket), its records in one ``value``
    (``_pack_segments``), ``kg`` = the bucket's key group (Spark groups by ``g, kg``), ``eg`` = the bucket;
    ``evt`` = Spark's event-time column (``spark_time_us``) of the pack's largest time (in time units, ``factor``
    us each), of ``_NO_TIME_US`` for bad records (-inf). ``evt`` is an int64 column of microseconds: PySpark
    hands a non-datetime column to Arrow as is, and Arrow takes integers as the timestamp's microseconds (a
    ``datetime64`` column would cost a time-zone conversion per frame).

    A group whose positions or texts hold the separator themselves (a Kafka value with a newline in it, say)
    is emitted one record per row.
    """
    import pandas as pd

    rows = []
    for (g, eg), (ts, segs) in packs.items():
        evt = spark_time_us(_NO_TIME_US if ts == -math.inf else int(round(ts * factor)))
        kg = eg % key_groups
        rows.extend((g, kg, eg, evt, value) for value in _pack_segments(segs))
    return pd.DataFrame(rows, columns=["g", "kg", "eg", "evt", "value"])


def _common_prefix(strs: list[str]) -> str:
    """The longest common prefix of ``strs`` (that of the smallest and the largest)."""
    lo, hi = min(strs), max(strs)
    k = 0
    for a, b in zip(lo, hi, strict=False):
        if a != b:
            break
        k += 1
    return lo[:k]


def _pack_segments(segs: list[tuple[str, list[str] | list[int], list[bytes], bool]]) -> list[str]:
    """A group's records as route-row values (``_pack``'s format): ``segs`` are ``(prefix, position rests, raw
    texts, plain)``, record ``j`` of a segment at position ``prefix + str(rests[j])``, ``plain`` whether its texts
    passed ``no_long_integer`` and the router's loop (which parses each record and takes none holding a dict or
    a list: a bad record): a value of only such texts starts with ``PLAIN_MARK``, so the state step does not
    test its bytes again (``_lines_of``; the test is one of each record's bytes, so it holds for any of
    them).

    Why segments: the router gathers a group's records of one input (a whole file: its path and the line
    numbers) without making a position string per record; a pack of one segment takes its prefix as given
    (``"<path>:"``), the texts joined as bytes and decoded once, and a whole file's line numbers (ints) written
    from per-worker texts (``_line_numbers``; ``str`` of each was ~10 % of the route step), with no count of
    separators (its texts are its lines). Several segments (several files in one
    task, bad records) share the common prefix of theirs; positions without a given prefix (Kafka, a ``pos``
    column) get their common prefix found, as ``_pack`` does.
    """
    if len(segs) == 1:
        prefix, rests, texts, plain = segs[0]
    else:
        prefix = _common_prefix([s[0] for s in segs])
        k = len(prefix)
        rests = []
        for p, rs, _t, _plain in segs:
            rs = _texts(rs)
            rests += [p[k:] + r for r in rs] if len(p) > k else rs
        texts = [t for s in segs for t in s[2]]
        plain = all(s[3] for s in segs)
    n = len(texts)
    if n > 1:
        head = f"{PLAIN_MARK if plain else ''}{n} "
        if type(rests[0]) is int:
            # a whole file's line numbers, each then the separator; its texts are its lines (split at the
            # separator): only the prefix (its path) may hold one
            if PACK_SEP not in prefix:
                return [f"{head}{prefix}{PACK_SEP}{_line_numbers(rests)}{PACK_SEP_BYTES.join(texts).decode()}"]
        else:
            if not prefix:
                prefix = _common_prefix(rests)
                if prefix:
                    k = len(prefix)
                    rests = [r[k:] for r in rests]
            value = PACK_SEP.join([f"{head}{prefix}", *rests, PACK_SEP_BYTES.join(texts).decode()])
            if value.count(PACK_SEP) == 2 * n:
                return [value]
    return [f"s{len(p)}{PACK_SEP}{p}{t}" for p, t in zip([prefix + r for r in _texts(rests)],
                                                          [t.decode() for t in texts], strict=True)]


LINE_TEXTS_MAX = 1 << 17  # line numbers whose texts a worker keeps (``_line_numbers``: ~8 MB at most)
_LINE_TEXTS: list[str] = []  # ``f"{i}{PACK_SEP}"`` at index i, made as the files routed need them


def _line_numbers(rests: list[int]) -> str:
    """``(f"%d{PACK_SEP}" * len(rests)) % tuple(rests)`` for a segment's line numbers (ascending: the router
    appends them in file order), from texts made once per worker (``_LINE_TEXTS``) up to ``LINE_TEXTS_MAX``.

    Why: formatting each number with ``%d`` was ~700 instructions a record of the route step's ~11,000; a
    look-up and a join are ~100, and a Python worker routes files of the same lengths again and again."""
    top = rests[-1]
    if top >= LINE_TEXTS_MAX:
        return (f"%d{PACK_SEP}" * len(rests)) % tuple(rests)
    have = len(_LINE_TEXTS)
    if top >= have:
        _LINE_TEXTS.extend([f"{i}{PACK_SEP}" for i in range(have, top + 1)])
    return "".join(map(_LINE_TEXTS.__getitem__, rests))


def _texts(rests: list[str] | list[int]) -> list[str]:
    """Position rests as strings (a whole file's are its line numbers)."""
    return list(map(str, rests)) if rests and type(rests[0]) is int else rests


def _pack(poss: list[str], texts: list[str]) -> list[str]:
    """Records ``(poss[i], texts[i])`` as route-row values: one value for all of them, or one per record.

    Packed: ``"<n> <prefix>"``, then each position without the positions' common prefix, then each text, joined
    by ``PACK_SEP``. Why one column and the prefix apart: each column and byte of a route row costs Spark
    (Arrow both ways, shuffle write and read, sort, pandas), and the positions of a file's records
    (``<file path>:<line>``) or a Kafka partition's (``<topic>/<partition>/<offset>``) share most of their
    characters: without the prefix they are a few bytes each, against ~60 for a full file path.
    A record whose position or text holds the separator rides alone: ``"s<len(position)>"``, the separator,
    then its position and text, not split (``_unpack``).
    """
    n = len(texts)
    if n > 1:
        lo, hi = min(poss), max(poss)  # the common prefix of all is that of the smallest and the largest
        k = 0
        for a, b in zip(lo, hi, strict=False):
            if a != b:
                break
            k += 1
        prefix = lo[:k]
        value = PACK_SEP.join([f"{n} {prefix}", *(p[k:] for p in poss), *texts] if k else
                              [f"{n} ", *poss, *texts])
        if value.count(PACK_SEP) == 2 * n:
            return [value]
    return [f"s{len(p)}{PACK_SEP}{p}{t}" for p, t in zip(poss, texts, strict=True)]


def _unpacked(value: str) -> tuple[list[str], list[str]]:
    """The positions and texts of one route-row value (``_pack``)."""
    if value[0] == "s":
        i = value.index(PACK_SEP)
        k = int(value[1:i]) + i + 1
        return [value[i + 1:k]], [value[k:]]
    parts = value.split(PACK_SEP)
    head = parts[0]
    sp = head.index(" ")
    n, prefix = int(head[1:sp] if head[0] == PLAIN_MARK else head[:sp]), head[sp + 1:]
    poss = parts[1:n + 1]
    if prefix:
        poss = [prefix + p for p in poss]
    return poss, parts[n + 1:]


def _unpack(pdfs) -> Iterator[tuple[str, str]]:
    """A group's ``(position, text)`` records from its packed rows, in row order."""
    for pdf in pdfs:
        for value in pdf["value"].tolist():
            poss, texts = _unpacked(value)
            yield from zip(poss, texts, strict=True)


def _lines_of(values: list[str]) -> tuple[list[str], list[bytes], bool]:
    """The records of a bucket's packed row values, in row order: their positions and raw texts (bytes), and
    whether every row was marked plain by the route step (``_pack_segments``: its texts are flat records without
    long integers, what ``plain_lines`` would pass: the route tests their bytes with ``no_long_integer`` and each
    record for nested values as it parses it).

    Why bytes: the state step decodes them as ``cep run`` decodes a JSON lines file (``decode.lines``); a
    packed value's texts are encoded once and split, not one record at a time.
    """
    poss: list[str] = []
    lines: list[bytes] = []
    plain = True
    for value in values:
        if value[0] == "s":
            (p,), (t,) = _unpacked(value)
            poss.append(p)
            lines.append(t.encode())
            plain = False
            continue
        sp = value.index(" ")
        if value[0] == PLAIN_MARK:
            n = int(value[1:sp])
        else:
            n = int(value[:sp])
            plain = False
        parts = value.split(PACK_SEP, n + 1)
        prefix = parts[0][sp + 1:]
        poss += [prefix + r for r in parts[1:n + 1]] if prefix else parts[1:n + 1]
        lines += parts[n + 1].encode().split(PACK_SEP.encode())
    return poss, lines, plain and bool(lines)


# ---------------------------------------------------------------------------------------------- stage 2: state


def _key_fns(spec: PatternSpec) -> list:
    """Per pattern, ``Output -> Kafka key bytes`` (the CLI's rule: the partition key read from the match)."""
    from cep.io.writers import make_key_fn

    fns = _KEY_FNS.get(spec.cache_id())
    if fns is None:
        fns = _KEY_FNS[spec.cache_id()] = [make_key_fn(cp) for cp in spec.compile()]
    return fns


_KEY_FNS: dict[tuple, list] = {}


def _lead_patterns(spec: PatternSpec) -> dict[str, int]:
    """Event type -> the first pattern that uses it: the group whose late row carries a late record's text.

    Why: a record routed to several patterns is late in each of them (one ``late`` row per pattern, counted per
    pattern), but a late-records output holds it once, as ``cep run --late-output`` does.
    """
    lead = _LEADS.get(spec.cache_id())
    if lead is None:
        lead = {}
        for g, cp in enumerate(spec.compile()):
            for t in [a.type for a in cp.atoms] + [t for gap in cp.gaps for t in gap.types]:
                lead.setdefault(t, g)
        _LEADS[spec.cache_id()] = lead
    return lead


_LEADS: dict[tuple, dict[str, int]] = {}


def _push_values(spec: PatternSpec, eng, g: int, values: list[str]) -> tuple[list[tuple], list]:
    """Push one bucket's records of a micro-batch (its packed row values) in event-time order; return the side rows
    (late records, bad records) and the composite events (``Output``s, for ``_out_rows``).

    A record below the engine's watermark (Spark's, see ``engine_watermark``) is late: it becomes a ``late`` row
    (counted per pattern; the record itself rides on its first pattern's row only, so a late-records output holds
    each record once, as ``cep run --late-output`` does).
    The records go to the engine in one ``push_batch`` (as ``cep run``'s batch loop): a late record or an unknown
    retraction interrupts it (``BatchInterrupted``: the outputs before it), and the batch goes on after it.
    """
    from cep.errors import BatchInterrupted, LateEventError, UnknownRetractionError
    from cep.io.readers import make_decoder

    decode = make_decoder(spec.type_field, spec.time_field, spec.time_unit, spec.op_field)
    poss, lines, plain = _lines_of(values)
    evs, ordered, inserts = _decode_group(spec, decode, lines, poss, plain or None)
    arrived = evs
    # packed rows of a group come from several tasks in no guaranteed order: event time, inserts before
    # retractions of equal time (a stable sort: one task's records keep their input order); records already in
    # time order and no retraction among them (one file's, as a rule) are that order
    if not inserts:
        evs = sorted(evs, key=_push_order)
    elif not ordered:
        evs = sorted(evs, key=_TS)
    name = spec.names[g]
    lead = _lead_patterns(spec)
    rows: list[tuple] = []
    outs: list = []
    text_of: dict[int, bytes] | None = None  # id(event) -> its text, built at the first side row
    push_batch = eng.push_batch
    n = len(evs)
    own = None if eng.own_watermark else _own_watermark_from(eng, evs, spec)
    try:
        for lo, hi in ((0, n),) if own is None else ((0, own), (own, n)):
            eng.own_watermark = own is not None and lo == own
            start = lo
            while start < hi:
                try:
                    outs += push_batch(evs[start:hi] if start or hi < n else evs, inserts)
                    break
                except BatchInterrupted as bi:
                    outs += bi.outputs
                    i = start + bi.index
                    start = i + 1
                    ev, cause = evs[i], bi.__cause__
                if text_of is None:
                    text_of = {id(e): t for e, t in zip(arrived, lines, strict=True)}
                raw = text_of[id(ev)]
                value = raw.decode()
                if isinstance(cause, LateEventError):
                    rows.append((name, "late", ev.pos, None, None, value if lead.get(ev.type) == g else None))
                elif isinstance(cause, UnknownRetractionError):
                    reason = ("retraction of an event that was never inserted (or was already retracted or "
                              "expired)")
                    if spec.on_error != "skip":
                        raise SparkPathError(f"{BAD_RECORD_MARK}input record {ev.pos}: {reason}") from None
                    if lead.get(ev.type) == g:
                        rows.append((None, "error", ev.pos, None, None, error_report(ev.pos, reason, raw)))
                else:
                    raise cause
    finally:
        if own is not None:
            eng.own_watermark = False
    return rows, outs


def _decode_group(spec: PatternSpec, decode, lines: list[bytes], poss: list[str],
                  plain: bool | None = None) -> tuple[list, bool, bool]:
    """A group's records decoded as ``cep run`` decodes a JSON lines file, each event at its position; whether
    their times never go down, and whether none is a retraction (``Engine.push_batch``'s ``inserts``).

    Lines that ``plain_lines`` passes are read as ``decode.lines`` reads them without its scan (their events are
    those ``decode`` makes: the tests), in one loop that also notes the order and the ops; a record off that path
    goes through ``decode``. Otherwise ``decode.lines`` in chunks, then the rest of a chunk one at a time.
    Why one loop: a second decode of every record (the route step read them first) was the state step's largest
    cost after the engine's (~0.2 of ~2.3 CPU s per 10^5 records), and the order and the ops were two passes more.
    ``plain``: True when the route step found the lines plain (their packed rows say so: ``_lines_of``), None
    to test them here.
    """
    import orjson

    from cep.io.readers import LineEvent

    evs: list = []
    if plain if plain is not None else plain_lines(lines):
        loads = orjson.loads
        type_field, time_field, op_field = spec.type_field, spec.time_field, spec.op_field
        append = evs.append
        new = LineEvent  # its ``pos`` is ``_n`` (a string here: the position itself)
        ordered, inserts = True, True
        top = -math.inf
        for raw, pos in zip(lines, poss, strict=True):
            try:
                rec = loads(raw)
                typ = rec[type_field]
                ts = rec[time_field]
            except Exception:  # noqa: BLE001 - decode gives the precise reason
                rec = None
            else:
                tt = type(ts)
                if type(typ) is not str or (tt is not int and tt is not float) or not typ:
                    rec = None
                elif op_field in rec:
                    op = rec.pop(op_field)
                    if op == "-":
                        inserts = False
                    elif op != "+":
                        rec = None
                else:
                    op = "+"
            if rec is None:  # off the fast path (an ISO time, say): as ``decode`` reads it
                ev = decode(pos, raw)
                ts = ev.ts
                if ev.op != "+":
                    inserts = False
            else:
                ev = new()
                ev.type = typ
                ev.ts = ts
                ev.fields = rec
                ev._n = pos
                ev.op = op
            append(ev)
            if ts < top:
                ordered = False
            else:
                top = ts
        return evs, ordered, inserts
    many = decode.lines
    end = len(lines)
    big = end > DECODE_CHUNK
    for lo in range(0, end, DECODE_CHUNK):
        got = many(lines[lo:lo + DECODE_CHUNK] if big else lines, lo)
        evs += got
        for k in range(lo + len(got), min(lo + DECODE_CHUNK, end)):
            evs.append(decode(poss[k], lines[k]))  # BadRecord: not expected here
    for ev, pos in zip(evs, poss, strict=True):
        ev.pos = pos
    return evs, False, not any(ev.op == "-" for ev in evs)


def _own_watermark_from(eng, evs: list, spec: PatternSpec) -> int | None:
    """Where in ``evs`` (a group's records of a micro-batch, in event-time order) the engine may move its
    watermark with the records, as ``cep run`` does (``own_watermark``), rather than hold Spark's until the
    end of the batch; None when it may not.

    Why: held, the engine keeps every record of the batch until the end (~100 per key at 10^5 events per
    micro-batch, against the ~4 a one-hour window holds on the bench stream), its indexes grow by that, and
    the batch's expiry runs at the end as one large drop (12 % of the state step in-process). Exact because:
    the records are pushed in time order, so a watermark moved by them never makes a later one of them late;
    it only starts to move at the first record whose own watermark (time - lateness) is not below the
    engine's (Spark's, so it never moves back); and it ends at the largest time - lateness, which must be the
    watermark the state step moves to at the end anyway (``spark_watermark_after``: the same value and type,
    checked here; not so for times finer than Spark's milliseconds or clamped to its range), and Spark's next
    watermark is at least that. Expiry, decisions and matches at a watermark depend only on the records below
    it, all pushed by then.
    """
    if not evs:
        return None
    lateness = eng.lateness
    mx = eng.max_ts
    top = evs[-1].ts
    if mx is not None and mx > top:
        top = mx
    want = top - lateness
    ahead = engine_watermark(spec, spark_watermark_after(spec, top))
    if type(ahead) is not type(want) or ahead != want:
        return None
    wm = eng.watermark
    if wm is None or (mx is not None and mx - lateness >= wm):
        return 0
    return bisect.bisect_left(evs, wm + lateness, key=_TS)


def _push_order(e) -> tuple:
    return e.ts, e.op == "-"


_TS = operator.attrgetter("ts")


def _rows(spec: PatternSpec, g: int, outs: list) -> list[tuple]:
    """Output rows of composite events (also those a watermark move decides: gap elements)."""
    from cep.io.writers import dumps_exact, encode_output

    if not outs:
        return []
    key_fn = _key_fns(spec)[g]
    rows: list[tuple] = []
    for o in outs:
        line = encode_output(o).decode().rstrip("\n")
        kb = key_fn(o) if key_fn is not None else None
        rows.append((o.pattern, o.op, o.id, dumps_exact(o.match).decode() if spec.match_column else None,
                     kb.decode() if kb is not None else None, line))
    return rows


def _out_rows(spec: PatternSpec, g: int, outs: list) -> list[tuple]:
    """The output rows of a group's composite events: one per event (``_rows``), or with ``spec.pack_output``
    one for all of them (``LINES_OP``: their lines as ``cep run`` writes them, joined by a newline, and the
    counts of ``+`` and ``-``).

    Why packed: every output row costs Spark per-row work (Arrow from Python, the observed metrics, the sink)
    on the JVM side, about 0.6 rows per input event; a text sink writes the joined value followed by a newline,
    which is byte for byte the lines one row each would give (an output line is JSON: it holds no newline).
    """
    if not spec.pack_output:
        return _rows(spec, g, outs)
    if not outs:
        return []
    from cep.io.writers import encode_outputs

    text = b"".join(encode_outputs(outs)).decode()[:-1]
    # an encoded line (the engine's lines mode: a new match of an insert) is a "+"
    n_minus = [o[1] for o in outs if type(o) is not str].count("-")
    return [(spec.names[g], LINES_OP, None, None, None, text, len(outs) - n_minus, n_minus)]


def _frame(spec: PatternSpec, rows: list[tuple]):
    """The handler's pandas output: ``OUT_COLS``, or with ``spec.pack_output`` ``PACKED_OUT_COLS`` (a row's
    pattern, op and value, and its counts: side rows, of six columns, count 0).

    Built from its columns, each an array of the dtype ``pd.DataFrame(rows)`` infers (object: strings and nulls;
    int64: the counts). Why: inferring the columns from a list of rows cost ~0.35 ms per group (a group's one
    packed row as a rule), from columns ~0.2 ms; a micro-batch makes one frame per group (64)."""
    import numpy as np
    import pandas as pd

    if spec.pack_output:
        names, texts = PACKED_OUT_COLS, 3
        rows = [(r[0], r[1], r[5], *(r[6:] or (0, 0))) for r in rows]
    else:
        names, texts = OUT_COLS, len(OUT_COLS)
    if not rows:
        return pd.DataFrame(rows, columns=names)
    data = {}
    for i, (name, col) in enumerate(zip(names, zip(*rows, strict=True), strict=True)):
        if i < texts:
            data[name] = arr = np.empty(len(col), dtype=object)
            arr[:] = col
        else:
            data[name] = np.array(col, dtype=np.int64)
    return pd.DataFrame(data)


def out_schema(spec: PatternSpec) -> str:
    return PACKED_OUT_SCHEMA if spec.pack_output else OUT_SCHEMA


OUT_COLS = ["pattern", "op", "id", "match", "key", "value"]
PACKED_OUT_COLS = ["pattern", "op", "value", "n_plus", "n_minus"]

# Engines kept in the Python worker between micro-batches, keyed by (spec, pattern, key group): the key group's
# engines by bucket, valid only while the state store holds the same nonce (a replayed or foreign state has
# another nonce and is loaded from its bytes). A step takes its entry out of the cache and puts it back when it
# saves, so a step that fails half way leaves no half-updated engines behind for a retry.
_ENGINES: OrderedDict = OrderedDict()
ENGINE_CACHE_SIZE = 512  # key groups


def _engines_for(spec: PatternSpec, g: int, kg: int, state) -> dict[int, Any]:
    """The key group's engines by bucket: from the worker cache when it matches the stored state, else from the
    state bytes (``_state_engines``); none for a new state.

    The engines do not derive a watermark from their own rows (``own_watermark=False``): a key group holds keys
    from every input partition, and one partition running ahead would make another's rows late. Spark's
    global watermark moves them instead (``engine_watermark``).
    """
    if not state.exists:
        return {}
    nonce, blob = state.get
    hit = _ENGINES.pop((spec.cache_id(), g, kg), None)
    if hit is not None and hit[0] == nonce:
        return hit[1]
    engines = _state_engines(spec, g, kg, nonce, bytes(blob), lines=spec.pack_output)
    for eng in engines.values():
        eng.own_watermark = False
    return engines


def _state_engines(spec: PatternSpec, g: int, kg: int, nonce: str, blob: bytes, *, lines: bool = False) -> dict:
    """The engines by bucket of a stored state (``_state_blob``), after checking its layout (the nonce's head)."""
    layout = nonce.split(":", 1)[0]
    if layout != spec.layout():
        raise SparkPathError(f"this checkpoint's state was written with --key-groups {layout.replace('x', ' and ')} "
                             f"engines each, not {spec.layout().replace('x', ' and ')}: the key-group layout is "
                             "fixed for the life of a checkpoint")
    if spec.group_engines == 1:
        return {kg: spec.load_engine(g, blob, lines=lines)}
    head, _, rest = blob.partition(b"\n")
    engines, at = {}, 0
    for part in head.split(b" "):
        eg, size = map(int, part.split(b":"))
        engines[eg] = spec.load_engine(g, rest[at:at + size], lines=lines)
        at += size
    return engines


def _state_blob(spec: PatternSpec, engines: dict[int, Any]) -> bytes:
    """The state bytes of a key group's engines: one engine's ``dumps`` (one engine per key group: the layout of
    checkpoints written before key groups held several), else a head line of ``<bucket>:<size>`` for each
    engine, then their ``dumps`` in that order."""
    if spec.group_engines == 1:
        (eng,) = engines.values()
        return eng.dumps()
    blobs = [eng.dumps() for eng in engines.values()]
    head = " ".join(f"{eg}:{len(b)}" for eg, b in zip(engines, blobs, strict=True)).encode()
    return b"\n".join([head, b"".join(blobs)])


def _save(spec: PatternSpec, g: int, kg: int, state, engines: dict[int, Any]) -> None:
    nonce = f"{spec.layout()}:{uuid.uuid4().hex}"
    state.update((nonce, _state_blob(spec, engines)))
    ck = (spec.cache_id(), g, kg)
    _ENGINES[ck] = (nonce, engines)
    while len(_ENGINES) > ENGINE_CACHE_SIZE:
        _ENGINES.popitem(last=False)


def spark_delay_ms(spec: PatternSpec) -> int:
    """The ``withWatermark`` delay: the lateness in whole milliseconds (Spark's watermark unit), rounded up."""
    return int(-(-spec.lateness * TIME_US[spec.time_unit] // 1000))


def engine_watermark(spec: PatternSpec, wm_ms: int) -> int | float | None:
    """The engine watermark (in time units) that Spark's global watermark ``wm_ms`` stands for; None before any.

    Spark's watermark is ``max over every partition of floor_ms(time + offset) - delay`` as of the end of the
    previous micro-batch, so this is ``max time - lateness`` (``cep run``'s watermark over the same records),
    lower by under 1 ms when times have sub-millisecond parts (the engine then accepts a little more).
    """
    if wm_ms <= 0:
        return None
    factor = TIME_US[spec.time_unit]
    lateness_us = int(round(spec.lateness * factor))
    return _from_us((wm_ms + spark_delay_ms(spec)) * 1000 - SPARK_TIME_OFFSET_US - lateness_us, factor)


def spark_watermark_after(spec: PatternSpec, max_ts: int | float) -> int:
    """The watermark (ms) Spark computes after a batch whose largest event time is ``max_ts``: the same offset,
    clamp, millisecond floor and delay as Spark, so the engine can move to it before Spark does."""
    return spark_time_us(int(round(max_ts * TIME_US[spec.time_unit]))) // 1000 - spark_delay_ms(spec)


def timer_ms(spec: PatternSpec, decision_time: int | float) -> int:
    """The event-time timeout (Spark ms) after which Spark's watermark decides a match due at ``decision_time``.

    Spark calls a timed-out group once its watermark is *above* the timeout; the engine decides a match once its
    watermark (``engine_watermark``) is at (or, for a strict gap end, above) the decision time. The smallest
    Spark watermark ``W`` with ``engine_watermark(W) > decision_time`` covers both cases, so the timeout is
    ``W - 1``, clamped to the time range Spark's column holds.
    """
    factor = TIME_US[spec.time_unit]
    lateness_us = int(round(spec.lateness * factor))
    if decision_time == math.inf:
        return SPARK_TIME_RANGE_US[1] // 1000
    need_us = decision_time * factor + SPARK_TIME_OFFSET_US + lateness_us  # (W + delay) * 1000 must pass this
    w = math.floor(need_us / 1000) + 1 - spark_delay_ms(spec)
    return max(1, min(w - 1, SPARK_TIME_RANGE_US[1] // 1000))


def _handler(spec: PatternSpec):
    """applyInPandasWithState: one key group's engines in the state store, under Spark's global watermark.

    Spark's late-row filter is off (see ``detect``), so every row reaches the engine, and a late one is counted
    and reported (a ``late`` row) rather than dropped unseen. A group with pending matches (gap elements) sets an
    event-time timeout at its next decision time, so Spark calls it when the watermark passes that time even if
    the group gets no more rows (the watermark is carried by other keys' rows; with ``availableNow`` the final
    no-data batch fires it too). Without pending matches the timeout is where the watermark will have expired
    every event the group retains (``Engine.empty_at``): an idle group's state is then removed, not kept until
    it next gets rows.
    """

    def fn(key, pdfs, state) -> Iterator[Any]:
        with stream_gc():
            rows = _group_step(spec, int(key[0]), int(key[1]), pdfs, state)
        if rows:
            yield _frame(spec, rows)

    return fn


def _by_bucket(pdfs) -> dict[int, list[str]]:
    """A key group's packed row values by engine bucket (``eg``), in row order."""
    out: dict[int, list[str]] = {}
    for pdf in pdfs:
        if len(pdf):
            for eg, value in zip(pdf["eg"].tolist(), pdf["value"].tolist(), strict=True):
                out.setdefault(eg, []).append(value)  # (a packed row per bucket and route task: a few per group)
    return out


def _group_step(spec: PatternSpec, g: int, kg: int, pdfs, state) -> list[tuple]:
    """One key group's micro-batch (see ``_handler``): its output rows; its state saved, removed or timed.

    Every engine of the group moves to Spark's watermark (deciding pending matches, expiring events); the
    engines of the buckets with rows then push them (``_push_values``) and move ahead to the watermark their
    own rows imply.
    """
    if g == BAD_ROW_GROUP:
        return [(None, "error", pos, None, None, report) for pos, report in _unpack(pdfs)]
    engines = _engines_for(spec, g, kg, state)
    values = _by_bucket(pdfs)
    for eg in values:
        if eg not in engines:
            engines[eg] = spec.new_engine(g, own_watermark=False, lines=spec.pack_output)
    wm = engine_watermark(spec, state.getCurrentWatermarkMs())
    rows: list[tuple] = []
    outs: list = []
    wake = None
    for eg in sorted(engines):
        eng = engines[eg]
        if wm is not None:
            # moving the watermark decides pending matches (patterns with gap elements)
            outs += eng.advance_watermark(wm)
        mine = values.get(eg)
        if mine:
            side, pushed = _push_values(spec, eng, g, mine)
            rows += side
            outs += pushed
        if eng.max_ts is not None:
            # Spark's next watermark is at least this bucket's own (its rows are among all rows), so expiring and
            # deciding up to it now loses nothing and saves a state of window + lateness, not the whole batch
            ahead = engine_watermark(spec, spark_watermark_after(spec, eng.max_ts))
            if ahead is not None:
                outs += eng.advance_watermark(ahead)
        if eng.retained_events == 0:
            del engines[eg]  # a bucket's engine that holds nothing is made afresh when it gets rows again
            continue
        # wake up at the next pending decision, or once the watermark has expired every event: then the
        # engine holds nothing and is dropped, even if its bucket never gets rows again
        at = eng.next_decision_time()
        if at is None:
            at = eng.empty_at()
        if at is not None and at != math.inf and (wake is None or at < wake):
            wake = at
    rows += _out_rows(spec, g, outs)

    if not engines:
        if state.exists:
            state.remove()
    else:
        _save(spec, g, kg, state, engines)
        if wake is not None:
            state.setTimeoutTimestamp(max(timer_ms(spec, wake), state.getCurrentWatermarkMs(), 1))
    return rows


def _batch_handler(spec: PatternSpec):
    """applyInPandas for a static DataFrame: one fresh engine per engine bucket over all its rows."""

    def fn(key, pdf):
        g = int(key[0])
        if g == BAD_ROW_GROUP:
            rows = [(None, "error", pos, None, None, report) for pos, report in _unpack([pdf])]
        else:
            rows, outs = [], []
            for _eg, values in sorted(_by_bucket([pdf]).items()):
                eng = spec.new_engine(g, lines=spec.pack_output)
                side, pushed = _push_values(spec, eng, g, values)
                # a static DataFrame is a bounded input: its end decides every pending match
                rows += side
                outs += pushed + eng.advance_watermark(math.inf)
            rows += _out_rows(spec, g, outs)
        return _frame(spec, rows)

    return fn


def _from_us(us: int, factor: int) -> int | float:
    if factor == 1:
        return us
    q, r = divmod(us, factor)
    return q if r == 0 else us / factor


# ---------------------------------------------------------------------------------------------- public API


# the JSON form of timestamps in structured input: ISO-8601 with microseconds and the offset (Z in UTC), which
# ``cep run`` reads exactly (an integer when a whole number of time units)
TIMESTAMP_JSON = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"
TIMESTAMP_NTZ_JSON = "yyyy-MM-dd'T'HH:mm:ss.SSSSSS"


def input_records(events, spec: PatternSpec):
    """``events`` as ``(pos, value)``: each record's position and its JSON text as bytes (``binary``), as ``cep
    run`` reads it.

    Why bytes: the route step reads records as bytes (``_route_batches``); a ``string`` column reaches it as
    Python text, decoded from UTF-8 by Arrow and encoded again there (a whole file: ~4 ms and ~1,600 page
    faults per 10^5 records, ~7 MB), and a line that is not UTF-8 would fail the conversion rather than be a
    bad record, as ``cep run`` reports it. A ``binary`` column gives the bytes as read (a Kafka value: as
    consumed).

    Whole files (``file`` and ``text`` columns, as the ``wholetext`` text source with the file path): ``(path,
    text)``, split into line records by the route step (``_route_batches``).

    JSON text when ``events`` has a string or binary ``value`` column and no column named like the time field;
    otherwise each row's columns other than the position columns are the record (``to_json``): integer columns
    give JSON integers and floating ones JSON floats (``5`` stays ``5``, ``5.0`` stays ``5.0``, as ``cep run``
    keeps a file's number forms), a timestamp column gives an ISO-8601 time with microseconds (UTC offset; a
    timestamp without time zone is read as UTC), a null column is an absent field (as Spark's JSON writer).
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    cols = set(events.columns)
    if whole_files(events):
        return events.select(F.col("file").cast("string").alias("pos"),
                             F.col("text").cast("binary").alias("value"))
    if "pos" in cols:
        pos, pos_cols = F.col("pos").cast("string"), {"pos"}
    elif {"topic", "partition", "offset"} <= cols:
        pos, pos_cols = kafka_position(), {"topic", "partition", "offset"}
    else:
        raise SparkPathError("detect() needs each record's position: a 'pos' column, or Kafka's 'topic', "
                             "'partition' and 'offset' columns (composite-event ids are derived from positions)")
    value_type = events.schema["value"].dataType if "value" in cols else None
    if isinstance(value_type, (StringType, BinaryType)) and spec.time_field not in cols:
        value = F.col("value")
    else:
        data = [c for c in events.columns if c not in pos_cols]
        if spec.time_field not in data:
            raise SparkPathError(f"detect() needs the records: a JSON 'value' column, or a column per field "
                                 f"including the time field {spec.time_field!r} (columns: {', '.join(data)})")
        value = F.to_json(F.struct(*[F.col(f"`{c}`") for c in data]),
                          {"timestampFormat": TIMESTAMP_JSON, "timestampNTZFormat": TIMESTAMP_NTZ_JSON})
    return events.select(pos.alias("pos"), value.cast("binary").alias("value"))


def whole_files(events) -> bool:
    """Whether ``events`` holds whole JSON-lines files: ``file`` (the path) and ``text`` columns, no ``pos``."""
    cols = set(events.columns)
    return {"file", "text"} <= cols and "pos" not in cols


def typed_match(out, match_schema: str | None):
    """The ``match`` column as a struct of ``match_schema`` (a DDL string), or left as JSON text without one."""
    if match_schema is None:
        return out
    from pyspark.sql import functions as F

    return out.withColumn("match", F.from_json(F.col("match"), match_schema))


def kafka_position():
    """The position column of a Kafka record, ``<topic>/<partition>/<offset>``: ``cep run``'s Kafka position
    (``cep.io.kafka.record_position``), so both paths give a record, and so a composite event, the same id."""
    from pyspark.sql import functions as F

    return F.concat_ws("/", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string"))



def detect(
    events,
    patterns,
    *,
    time_field: str = "ts",
    type_field: str = "type",
    op_field: str = "op",
    time_unit: str = "s",
    lateness: int | float = 0,
    on_error: str = "fail",
    key_groups: int | None = None,
    group_engines: int | None = None,
    match_schema: str | None = None,
    side_outputs: bool = False,
):
    """Composite events of ``patterns`` over the streaming (or batch) DataFrame ``events``.

    ``events`` is either JSON text (a string or binary ``value`` column, as from Kafka or a text source, and no
    ``time_field`` column) or a structured DataFrame whose columns are the record's fields, the time field a
    number or a timestamp (see ``input_records``). Each record also needs a position, which names it in
    composite-event ids: a ``pos`` string column, or Kafka's ``topic``, ``partition`` and ``offset`` columns
    (``pos = "<topic>/<partition>/<offset>"``, as ``cep run`` on Kafka). Or whole JSON-lines files, a row per
    file: ``file`` (its path) and ``text`` columns (the ``wholetext`` text source); line ``i`` is the record at
    ``<file>:<i>``, split in the route step (cheaper than a Spark row per line).

    ``patterns``: pattern file path(s), pattern text, or a ``PatternSpec``. ``lateness`` is in time units.
    ``key_groups``: Spark's groups of partition key values (the unit of state and of parallelism; default
    ``DEFAULT_KEY_GROUPS``), each holding ``group_engines`` engines (default ``ENGINE_BUCKETS // key_groups``,
    at least one), both fixed for the life of a checkpoint: a query resumed on a checkpoint written with other
    counts fails (``cep spark`` reads them from the checkpoint; checkpoints written before key groups held
    several engines have 64 key groups of one engine each: ``key_groups=64, group_engines=1``).
    ``match_schema``: a DDL string (``"card string, first_ts long, amount double"``) to get ``match`` as a
    struct of those typed fields (``from_json``: a field missing or of another type is null); without it
    ``match`` is the JSON text.
    Returns a DataFrame with columns pattern, op, id, match, key, value (the ``cep run`` output line).

    Time: the engine takes Spark's global watermark (max event time over all partitions - lateness, as of the
    previous micro-batch); a row below it is late. Late rows and bad records (``on_error="skip"``) are counted
    in the query's observed metrics (``query.lastProgress["observedMetrics"]["cep"]``: ``late_records``,
    ``bad_records``, ``late:<pattern>``, ``+:<pattern>``, ``-:<pattern>``). With ``side_outputs=True`` they
    are also rows of the result: ``op = "late"`` (``pattern`` = the pattern that found it late, ``id`` = its
    position, ``value`` = the record on one row per record, null on the others) and ``op = "error"``
    (``value`` = the ``cep run --errors`` report); filter on ``op`` to send them elsewhere.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.state import GroupStateTimeout

    spec = patterns if isinstance(patterns, PatternSpec) else pattern_spec(
        patterns, time_unit=time_unit, type_field=type_field, time_field=time_field, op_field=op_field,
        lateness=lateness, on_error=on_error, key_groups=key_groups, group_engines=group_engines)
    routed = input_records(events, spec).mapInPandas(_route_batches(spec, whole_files(events)), ROUTE_SCHEMA)
    if not events.isStreaming:
        # (no watermark in a batch: ``evt`` would only cost a time-zone conversion per group in the workers)
        out = routed.drop("evt").groupBy("g", "kg").applyInPandas(_batch_handler(spec), out_schema(spec))
    else:
        delay = spark_delay_ms(spec)
        # ``evt`` comes from the route step (``spark_time_us``): one projection fewer than computing it here
        routed = routed.withWatermark("evt", f"{delay} milliseconds")
        # Under an event-time timeout Spark drops the rows whose watermark column is below the watermark before
        # the stateful function sees them, and counts them only as numRowsDroppedByWatermark. cep must see them
        # (late rows are counted per pattern and written to the late output), so the column the state step sees
        # as the watermark column is a constant at the top of the time range, marked with the watermark's
        # metadata: no row is below it, while the watermark itself still comes from ``evt`` above.
        # ``evt`` is not shuffled: the state step reads the records' times from their texts.
        # The marked column is a long (the top of the range in us, what the timestamp holds): Spark's late-row
        # test compares it with the watermark in us either way, and PySpark hands every group's columns to the
        # state step as pandas, where a long is a plain copy and a timestamp a time-zone conversion (~0.2-0.3 ms
        # per group and micro-batch, bench/results/spark.md)
        keep = [c for c in routed.columns if c != "evt"]
        top = F.lit(SPARK_TIME_RANGE_US[1]).cast("long").alias("evt", metadata={WATERMARK_DELAY_KEY: delay})
        routed = routed.select(*keep, top)
        out = routed.groupBy("g", "kg").applyInPandasWithState(
            _handler(spec), out_schema(spec), STATE_SCHEMA, "append", GroupStateTimeout.EventTimeTimeout)
        out = out.observe(METRICS, *metric_columns(spec))
    return typed_match(out if side_outputs else out.where(F.col("op").isin(*MATCH_OPS)), match_schema)


def drain(spark, checkpoint: str, patterns, **kw: Any):
    """The composite events that the end of the input would decide: a static DataFrame (columns as ``detect``).

    Why: a streaming query has no end, so Spark never sends the final watermark that Flink's bounded sources emit
    (``MAX_WATERMARK``); matches whose gaps reach past the last watermark (a trailing ``NOT``, a repetition
    closing the input) stay pending in the state store when an ``availableNow`` query stops. This reads the
    checkpoint's state store as of its last committed micro-batch (Spark's ``statestore`` source) and moves each
    key group's engine to +infinity, as the end of a file does for ``cep run``. It writes nothing back: the
    checkpoint is unchanged, and it declares the input ended (as Flink's ``stop --drain``) -- a query resumed
    later on the checkpoint may still emit these matches again (same ids) or, if later records fall in their
    gaps, never emit them.
    ``patterns``: as for ``detect`` (the checkpoint's patterns and options; ``kw``: ``detect``'s options).
    """
    spec = patterns if isinstance(patterns, PatternSpec) else pattern_spec(patterns, **kw)
    states = spark.read.format("statestore").load(checkpoint)
    rows = states.selectExpr("key.g AS g", "key.kg AS kg", "value.groupState.nonce AS nonce",
                             "value.groupState.blob AS blob")
    return rows.mapInPandas(_drain_batches(spec), OUT_SCHEMA).where("op IN ('+', '-')")


def _drain_batches(spec: PatternSpec):
    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        import pandas as pd

        for pdf in batches:
            rows: list[tuple] = []
            for g, kg, nonce, blob in zip(pdf["g"], pdf["kg"], pdf["nonce"], pdf["blob"], strict=True):
                if blob is None:
                    continue
                for _eg, eng in sorted(_state_engines(spec, int(g), int(kg), nonce, bytes(blob)).items()):
                    rows += _rows(spec, int(g), eng.advance_watermark(math.inf))
            yield pd.DataFrame(rows, columns=OUT_COLS)

    return fn


WATERMARK_DELAY_KEY = "spark.watermarkDelayMs"  # Spark's column metadata marking an event-time watermark column
METRICS = "cep"  # the name of the observed metrics on the streaming query's progress


def metric_columns(spec: PatternSpec) -> list:
    """Per micro-batch counts: late records, bad records, and per pattern late rows and composite events.

    With ``spec.pack_output`` a pattern's composite events are the sums of the packed rows' ``n_plus`` /
    ``n_minus`` (``_out_rows``; side rows count 0, ``_frame``), over all rows when there is one pattern. Why
    the plain sums: ``observe`` generates the aggregates' update code in every task of every micro-batch
    (Spark's ``AggregatingAccumulator``), in proportion to their expressions (bench/results/spark.md).
    """
    from pyspark.sql import functions as F

    op, pattern = F.col("op"), F.col("pattern")
    cols = [F.count(F.when((op == "late") & F.col("value").isNotNull(), 1)).alias("late_records"),
            F.count(F.when(op == "error", 1)).alias("bad_records")]
    for name in spec.names:
        cols.append(F.count(F.when((op == "late") & (pattern == name), 1)).alias(f"late:{name}"))
        for what, n in (("+", "n_plus"), ("-", "n_minus")):
            if not spec.pack_output:
                count = F.count(F.when((op == what) & (pattern == name), 1))
            elif len(spec.names) == 1:
                count = F.coalesce(F.sum(n), F.lit(0))  # (a sum of ints is a long)
            else:
                count = F.coalesce(F.sum(F.when(pattern == name, F.col(n))), F.lit(0))
            cols.append(count.alias(f"{what}:{name}"))
    return cols
