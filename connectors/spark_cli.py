"""``cep spark FILE.pattern ... --input kafka://...|DIR --output kafka://...|DIR --checkpoint DIR``.

Why a separate command: a Spark query is a long-lived job with its own checkpoint (offsets, state, committed
output), so its options differ from ``cep run``'s. Kafka goes through Spark's own Kafka source and sink
(``spark-sql-kafka-0-10``, jars from the Maven cache); a directory input is read as JSON-lines files (positions
``<file name>:<line>``), a directory output is written as JSON-lines part files, exactly once per micro-batch.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cep import patterns as shipped
from cep.exit_codes import EXIT_INTERRUPTED, EXIT_OK, EXIT_OTHER, EXIT_PATTERN
from cep.units import TIME_UNITS, parse_duration


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cep spark", description=(
        "Run patterns on Spark Structured Streaming. Events are grouped by each pattern's partition key; each "
        "key's engine state lives in Spark's state store and is checkpointed with the query."))
    p.add_argument("patterns", nargs="+", help="pattern files")
    p.add_argument("-i", "--input", required=True,
                   help="kafka://HOST:PORT/TOPIC?from=earliest|latest[&until=end] or a directory of JSON-lines files")
    p.add_argument("-o", "--output", required=True, help="kafka://HOST:PORT/TOPIC or a directory")
    p.add_argument("--checkpoint", required=True, help="Spark checkpoint directory (offsets, state, commits)")
    p.add_argument("--state-partitions", type=int, default=None,
                   help="number of state partitions (spark.sql.shuffle.partitions); fixed by the first run of "
                        "a checkpoint (default 4 for a new checkpoint)")
    p.add_argument("--key-groups", type=int, default=64,
                   help="hash buckets of partition key values, the unit of state (default 64); fixed for the "
                        "life of a checkpoint, and an upper bound on useful state partitions")
    p.add_argument("--master", default=None,
                   help="Spark master; default: the one spark-submit or the Spark configuration gives, else local[*]")
    p.add_argument("--type-field", default="type")
    p.add_argument("--time-field", default="ts")
    p.add_argument("--time-unit", default="s", choices=list(TIME_UNITS))
    p.add_argument("--op-field", default="op")
    p.add_argument("--lateness", default=None, help="allowed lateness, a duration (e.g. '5 s')")
    p.add_argument("--on-error", default="fail", choices=["fail", "skip"])
    p.add_argument("--available-now", action="store_true",
                   help="process what is available now, then stop (implied by until=end in a Kafka URL)")
    p.add_argument("--trigger-interval", default="1 second", help="micro-batch interval when running on")
    p.add_argument("--max-per-batch", type=int, default=None,
                   help="admission limit per micro-batch (Kafka records, or files for a directory)")
    p.add_argument("--timeout", type=float, default=None, help="stop after this many seconds (streaming)")
    p.add_argument("--no-rocksdb", action="store_true", help="use Spark's default (in-memory) state store")
    return p


def _is_kafka(spec: str) -> bool:
    return spec.startswith("kafka://")


def check_kafka(url: str, *, source: bool) -> None:
    """Fail fast (bounded) on an unreachable broker or a missing topic, before Spark starts."""
    from cep.io.kafka import open_sink, open_source, parse_url

    u = parse_url(url)
    if source:
        src = open_source(f"kafka://{u.where}/{u.topic}")
        src.consumer.close()
    else:
        sink = open_sink(f"kafka://{u.where}/{u.topic}")
        sink.producer.close(timeout=5)


def read_input(spark, spec: str, max_per_batch: int | None):
    """The input as a streaming DataFrame with ``pos`` and ``value`` columns."""
    from pyspark.sql import functions as F

    if _is_kafka(spec):
        from cep.io.kafka import parse_url

        u = parse_url(spec)
        r = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", u.where)
             .option("subscribe", u.topic).option("startingOffsets", u.start))
        if max_per_batch:
            r = r.option("maxOffsetsPerTrigger", str(max_per_batch))
        df = r.load()
        from cep.connectors.spark import kafka_position

        return df.select(kafka_position().alias("pos"), F.col("value").cast("string").alias("value"))
    path = Path(spec)
    if not path.is_dir():
        raise FileNotFoundError(f"input directory {spec} does not exist (cep spark reads a directory of "
                                "JSON-lines files, or kafka://...)")
    r = spark.readStream.format("text").option("wholetext", "true")
    if max_per_batch:
        r = r.option("maxFilesPerTrigger", str(max_per_batch))
    files = r.load(str(path))
    lines = files.select(F.element_at(F.split(F.input_file_name(), "/"), -1).alias("file"),
                         F.posexplode(F.split(F.col("value"), "\n")).alias("i", "value"))
    lines = lines.where(F.trim(F.col("value")) != "")
    return lines.select(F.concat(F.col("file"), F.lit(":"), (F.col("i") + 1).cast("string")).alias("pos"),
                        F.col("value"))


def write_output(out, spec: str, checkpoint: str, trigger: dict):
    """Start the query writing composite events to Kafka (key = partition key) or to a directory."""
    if _is_kafka(spec):
        from cep.io.kafka import parse_url

        u = parse_url(spec)
        w = out.select("key", "value").writeStream.format("kafka") \
            .option("kafka.bootstrap.servers", u.where).option("topic", u.topic)
    else:
        Path(spec).mkdir(parents=True, exist_ok=True)
        w = out.select("value").writeStream.format("text").option("path", spec)
    return w.option("checkpointLocation", checkpoint).outputMode("append").trigger(**trigger).start()


def start_query(spark, args: argparse.Namespace):
    """Build and start the streaming query (used by main and by tests/benchmarks with their own session)."""
    from cep.connectors.spark import detect, pattern_spec

    lateness = 0
    if args.lateness:
        lateness = parse_duration(args.lateness, args.time_unit)
    spec = pattern_spec(args.patterns, time_unit=args.time_unit, type_field=args.type_field,
                        time_field=args.time_field, op_field=args.op_field, lateness=lateness,
                        on_error=args.on_error, key_groups=args.key_groups)
    events = read_input(spark, args.input, args.max_per_batch)
    out = detect(events, spec)
    until_end = _is_kafka(args.input) and "until=end" in args.input
    trigger = {"availableNow": True} if (args.available_now or until_end) else {
        "processingTime": args.trigger_interval}
    return write_output(out, args.output, args.checkpoint, trigger)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.patterns = [shipped.resolve(p) for p in args.patterns]  # a shipped pattern by its name
    err = sys.stderr
    from cep.connectors.spark import SparkPathError, checkpoint_state_partitions, make_session

    from cep.errors import PatternError

    try:
        from cep.connectors.spark import pattern_spec

        pattern_spec(args.patterns, time_unit=args.time_unit)  # pattern errors before Spark starts
        if args.lateness:
            parse_duration(args.lateness, args.time_unit)  # and a bad --lateness
    except PatternError as e:
        err.write(str(e) + "\n")
        return EXIT_PATTERN
    except (SparkPathError, ValueError) as e:
        err.write(f"cep spark: error: {e}\n")
        return EXIT_OTHER
    kafka = _is_kafka(args.input) or _is_kafka(args.output)
    try:
        if _is_kafka(args.input):
            check_kafka(args.input, source=True)
        if _is_kafka(args.output):
            check_kafka(args.output, source=False)
    except Exception as e:  # noqa: BLE001 - KafkaConnectorError and URL errors: one line for the user
        err.write(f"cep spark: error: {e}\n")
        return EXIT_OTHER
    stored = checkpoint_state_partitions(args.checkpoint)
    parts = args.state_partitions or stored  # None: what the Spark configuration gives, else 4
    if stored is not None and args.state_partitions and args.state_partitions != stored:
        err.write(f"cep spark: note: checkpoint {args.checkpoint} was created with {stored} state partitions; "
                  f"Spark keeps {stored} (start a new checkpoint to change it)\n")
        parts = stored
    spark = make_session(args.master, parts, kafka=kafka, rocksdb=not args.no_rocksdb, app="cep spark")
    parts = int(spark.conf.get("spark.sql.shuffle.partitions"))
    t0 = time.monotonic()
    try:
        q = start_query(spark, args)
        q.awaitTermination(args.timeout)
        if q.isActive:
            q.stop()
        exc = q.exception()
        if exc is not None:
            err.write(f"cep spark: error: the query failed: {exc}\n")
            return EXIT_OTHER
        rows = sum(p.get("numInputRows", 0) for p in q.recentProgress)
        el = time.monotonic() - t0
        err.write(f"cep spark: {rows} source rows (files, for a directory input) in {len(q.recentProgress)} "
                  f"micro-batches, {el:.1f} s; "
                  f"{parts} state partitions; checkpoint {args.checkpoint}\n")
        return EXIT_OK
    except KeyboardInterrupt:
        err.write("cep spark: interrupted; the checkpoint resumes the query\n")
        return EXIT_INTERRUPTED
    except (SparkPathError, FileNotFoundError) as e:
        err.write(f"cep spark: error: {e}\n")
        return EXIT_OTHER
    finally:
        spark.stop()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
