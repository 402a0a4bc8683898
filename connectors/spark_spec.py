"""What every stage of cep's Spark query shares: the spec of a pattern set (``PatternSpec``: patterns, key groups,
time unit, fields, options; compiled and planned once per process) and the formats of the rows the stages hand on
(route rows, output rows, state), with their constants.

Why a module of its own: the route step (``spark_route``), the packed values (``spark_pack``), the state step
(``spark_state``) and the query (``spark``) all read these; one home each, so the stages agree by construction.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

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


# Spark's groups of partition keys (``--key-groups``) of a ``detect()`` that is given no count, and the engine
# buckets in all (each key group holds ENGINE_BUCKETS // key_groups engines, at least one). Why 64 buckets: the
# engine is cheapest per event with about 64 on the bench stream (1 000 keys). ``cep spark`` starts a new
# checkpoint with one key group per state partition instead (``check_checkpoint``, ``placed_labels``): PySpark's
# per-group cost falls with fewer groups, and a key group more than the state partitions adds no parallelism
# (a state partition is one task). ``detect()`` does not see the checkpoint its caller writes to, so its
# default is a constant that a resumed query gets again.
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
    # the state partitions the key groups are placed on (``placed_labels``: each its own partition, as Flink
    # assigns key-group ranges), or None: a key group's Spark key is its index, hashed to a partition by Spark
    # (every checkpoint written before placement; ``detect()`` unless given a spec). Fixed for a checkpoint's life.
    placed_on: int | None = None
    given: frozenset = frozenset()  # which of key_groups / group_engines the caller chose (not defaults)
    names: list[str] = field(default_factory=list)
    match_column: bool = True  # False: ``match`` is null (``cep spark`` writes only ``value``; saves a JSON per output)
    # True: one output row per group and micro-batch for the composite events (``_out_rows``), for a text sink
    # (``cep spark`` to a directory), and only the columns of ``PACKED_OUT_SCHEMA``; ``detect()``'s documented
    # shape is one row per composite event
    pack_output: bool = False

    def cache_id(self) -> tuple:
        return (tuple(self.sources), self.time_unit, self.type_field, self.time_field, self.op_field,
                self.lateness, self.on_error, self.key_groups, self.group_engines, self.placed_on)

    def placed(self, partitions: int) -> PatternSpec:
        """This spec for a new checkpoint of ``partitions`` state partitions: one key group per state partition
        (unless the caller chose a count), each holding ``ENGINE_BUCKETS // key_groups`` engines (unless
        chosen), placed on the partitions (``placed_labels``).

        Why one per partition: a state partition is one task, so more key groups add no parallelism, and
        PySpark pays per group and micro-batch (~2 ms of the worker's CPU and some of the executor's:
        bench/results/spark.md); the placement keeps every partition busy."""
        kg = self.key_groups if "key_groups" in self.given else partitions
        ge = self.group_engines if "group_engines" in self.given else max(1, ENGINE_BUCKETS // kg)
        return replace(self, key_groups=kg, group_engines=ge, placed_on=partitions)

    def kg_labels(self, g: int) -> list[int]:
        """Pattern ``g``'s key groups' Spark keys (the ``kg`` column), by key-group index: their indexes, or
        with ``placed_on`` the labels that Spark's hash partitioning puts on the partitions ``placed_labels``
        chose."""
        if self.placed_on is None:
            return list(range(self.key_groups))
        return placed_labels(g, self.key_groups, self.placed_on)

    def kg_index(self, g: int, label: int) -> int:
        """The key-group index of pattern ``g``'s Spark key ``label`` (``kg_labels``' inverse; the bad records'
        group keeps its key)."""
        if self.placed_on is None or g == BAD_ROW_GROUP:
            return label
        index = _placement(g, self.key_groups, self.placed_on)[1].get(label)
        if index is None:
            raise SparkPathError(f"a state of pattern {g} is keyed {label}, not a key group of this checkpoint's "
                                 f"placement ({self.key_groups} key groups on {self.placed_on} state partitions)")
        return index

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


# ---------------------------------------------------------------------------------------- key-group placement


def _murmur3_int(value: int, seed: int) -> int:
    """Murmur3 x86_32 of a 4-byte integer, as Spark's ``Murmur3_x86_32.hashInt`` (unsigned 32-bit result)."""
    k = (value & 0xFFFFFFFF) * 0xCC9E2D51 & 0xFFFFFFFF
    k = ((k << 15) | (k >> 17)) * 0x1B873593 & 0xFFFFFFFF
    h = seed ^ k
    h = (((h << 13) | (h >> 19)) & 0xFFFFFFFF) * 5 + 0xE6546B64 & 0xFFFFFFFF
    h ^= 4
    h = (h ^ (h >> 16)) * 0x85EBCA6B & 0xFFFFFFFF
    h = (h ^ (h >> 13)) * 0xC2B2AE35 & 0xFFFFFFFF
    return h ^ (h >> 16)


def spark_partition_of(g: int, label: int, partitions: int) -> int:
    """The state partition of Spark group ``(g, kg=label)``: Spark's hash partitioning of two int columns,
    ``pmod(murmur3(kg, murmur3(g, 42)), partitions)`` (Spark keeps this function for stateful operators across
    versions: their state is laid out by it, ``StatefulOpClusteredDistribution``)."""
    h = _murmur3_int(label, _murmur3_int(g, 42))
    return (h - (1 << 32) if h >= 1 << 31 else h) % partitions


def placed_labels(g: int, key_groups: int, partitions: int) -> list[int]:
    """Pattern ``g``'s key-group labels on ``partitions`` state partitions: key group ``i`` goes to partition
    ``(g * key_groups + i) % partitions``, and its label is the smallest free non-negative int that Spark hashes
    there (``spark_partition_of``).

    Why: Spark hashes the group keys to the state partitions, and a few keys hash unevenly (4 key groups
    numbered 0-3 of pattern 0 land on 2 of 4 partitions), so with the key groups numbered as they are, one key
    group per state partition would leave partitions idle and others doubled. Labels chosen this way give every
    partition its share, as Flink gives each operator instance a range of key groups; the engines and their
    buckets are the same either way, only the Spark key of a key group changes.
    """
    return _placement(g, key_groups, partitions)[0]


_PLACEMENTS: dict[tuple[int, int, int], tuple[list[int], dict[int, int]]] = {}


def _placement(g: int, key_groups: int, partitions: int) -> tuple[list[int], dict[int, int]]:
    """``placed_labels`` and its inverse (label -> key-group index), made once per process."""
    key = (g, key_groups, partitions)
    found = _PLACEMENTS.get(key)
    if found is None:
        want: dict[int, list[int]] = {}
        for i in reversed(range(key_groups)):
            want.setdefault((g * key_groups + i) % partitions, []).append(i)
        labels, left, label = [0] * key_groups, key_groups, 0
        while left:
            waiting = want.get(spark_partition_of(g, label, partitions))
            if waiting:
                labels[waiting.pop()] = label
                left -= 1
            label += 1
        found = _PLACEMENTS[key] = (labels, {lab: i for i, lab in enumerate(labels)})
    return found


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


DECODE_CHUNK = 1024  # records per ``decode.many`` call (a record off its fast path ends a chunk's fast part)


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
