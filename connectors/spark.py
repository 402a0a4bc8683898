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

Modules: this one builds the query (``detect``, ``drain``, the observed metrics); ``spark_spec`` holds what every
stage shares (``PatternSpec``, the rows' formats), ``spark_route`` stage 1, ``spark_pack`` the packed values
stages 1 and 3 hand on, ``spark_state`` stage 3, ``spark_session`` the session (``make_session``, importable from
here too) and ``spark_checkpoint`` a checkpoint's fit.

Stages:

1. ``_route_batches`` (``mapInPandas``): decode each record exactly as ``cep run`` does (``cep.io.readers.make_decoder``),
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
Spark groups the buckets into ``key_groups`` key groups (bucket % key_groups; ``detect()``'s default 16, a new
``cep spark`` checkpoint's one per state partition: ``PatternSpec.placed``), each holding its buckets' engines; a
key group's Spark key (the ``kg`` column) is its number, or with ``placed_on`` a label that Spark's hash puts on
the state partition chosen for it (``placed_labels``). Grouping by the raw key would build one engine per key per micro-batch (milliseconds each:
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

import math
from collections.abc import Iterator
from typing import Any

from cep.connectors.spark_route import _route_batches
from cep.connectors.spark_session import make_session  # noqa: F401 - the public API with detect (docs/kafka-spark.md)
from cep.connectors.spark_spec import (
    MATCH_OPS,
    OUT_SCHEMA,
    ROUTE_SCHEMA,
    SPARK_TIME_RANGE_US,
    STATE_SCHEMA,
    PatternSpec,
    SparkPathError,
    pattern_spec,
)
from cep.connectors.spark_state import (
    OUT_COLS,
    _batch_handler,
    _handler,
    _rows,
    _state_engines,
    out_schema,
    spark_delay_ms,
)

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
            for g, label, nonce, blob in zip(pdf["g"].tolist(), pdf["kg"].tolist(), pdf["nonce"], pdf["blob"],
                                             strict=True):
                if blob is None:
                    continue
                engines = _state_engines(spec, g, spec.kg_index(g, label), nonce, bytes(blob))
                for _eg, eng in sorted(engines.items()):
                    rows += _rows(spec, g, eng.advance_watermark(math.inf))
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
