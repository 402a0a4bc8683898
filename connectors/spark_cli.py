"""``cep spark FILE.pattern ... --input kafka://...|DIR --output kafka://...|DIR --checkpoint DIR``.

Why a separate command: a Spark query is a long-lived job with its own checkpoint (offsets, state, committed
output), so its options differ from ``cep run``'s. Kafka goes through Spark's own Kafka source and sink
(``spark-sql-kafka-0-10``, jars from the Maven cache); a directory input is read as JSON-lines files (positions
``<file path>:<line>``), a directory output is written as JSON-lines part files, exactly once per micro-batch.
Late records and bad records are counted (the summary line, the query's observed metrics) and, with
``--late-output`` / ``--errors``, written out beside the composite events (one query, ``foreachBatch``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cep import patterns as shipped
from cep.exit_codes import EXIT_INTERRUPTED, EXIT_OK, EXIT_OTHER, EXIT_PATTERN, EXIT_RECORD
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
    p.add_argument("--key-groups", type=int, default=None,
                   help="groups of partition key values, the unit of state (default for a new checkpoint: one "
                        "per state partition, each holding 64 / key-groups engines, at least one); fixed for the "
                        "life of a checkpoint (a resumed query keeps the checkpoint's), and an upper bound on "
                        "useful state partitions")
    p.add_argument("--master", default=None,
                   help="Spark master; default: the one spark-submit or the Spark configuration gives, else local[*]")
    p.add_argument("--type-field", default="type")
    p.add_argument("--time-field", default="ts")
    p.add_argument("--time-unit", default="s", choices=list(TIME_UNITS))
    p.add_argument("--op-field", default="op")
    p.add_argument("--lateness", default=None, help="allowed lateness, a duration (e.g. '5 s')")
    p.add_argument("--on-error", default="fail", choices=["fail", "skip"],
                   help="a bad record stops the query with exit 3 (fail), or is counted and reported (skip)")
    p.add_argument("--late-output", default=None,
                   help="write late records here (kafka://HOST:PORT/TOPIC or a directory), as cep run does")
    p.add_argument("--errors", default=None,
                   help="with --on-error skip: write bad-record reports here (kafka://... or a directory)")
    p.add_argument("--available-now", action="store_true",
                   help="process what is available now, then stop (implied by until=end in a Kafka URL)")
    p.add_argument("--drain", default=None, metavar="TARGET",
                   help="with --available-now: afterwards, decide the matches still pending as the end of the "
                        "input would (NOT, repetition, strategies) and write them to TARGET (kafka://... or a "
                        "directory); declares the input ended, as Flink's stop --drain")
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
    """The input as a streaming DataFrame: Kafka's as ``pos`` and ``value``, a directory's as whole files
    (``file`` and ``text``: ``detect`` names line ``i`` of a file ``<file>:<i>``)."""
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
    # the file's full path names its records (two part.jsonl in different folders are different records);
    # detect() splits the text into lines in its route step (cheaper than one Spark row per line)
    return files.select(F.col("_metadata.file_path").alias("file"), F.col("value").alias("text"))




def write_output(out, spec: str, checkpoint: str, trigger: dict, late: str | None = None,
                 errors: str | None = None):
    """Start the query writing composite events to Kafka (key = partition key) or to a directory.

    Without side outputs: Spark's streaming sink (a directory is the file sink, exactly once through its
    ``_spark_metadata`` log). With ``late`` and/or ``errors``: one ``foreachBatch`` writes every target, each
    micro-batch into ``batch=<id>`` below a directory (overwritten when Spark replays the batch, so exactly once
    too) or into its Kafka topic (at least once, as Spark's Kafka sink).
    """
    from cep.connectors.spark_spec import MATCH_OPS
    from pyspark.sql import functions as F

    if late is None and errors is None:
        out = out.where(F.col("op").isin(*MATCH_OPS))
        if _is_kafka(spec):
            from cep.io.kafka import parse_url

            u = parse_url(spec)
            w = out.select("key", "value").writeStream.format("kafka") \
                .option("kafka.bootstrap.servers", u.where).option("topic", u.topic)
        else:
            Path(spec).mkdir(parents=True, exist_ok=True)
            w = out.select("value").writeStream.format("text").option("path", spec)
        return w.option("checkpointLocation", checkpoint).outputMode("append").trigger(**trigger).start()

    targets = [(spec, F.col("op").isin(*MATCH_OPS))]
    if late is not None:
        targets.append((late, (F.col("op") == "late") & F.col("value").isNotNull()))
    if errors is not None:
        targets.append((errors, F.col("op") == "error"))

    def write_batch(df, batch_id: int) -> None:
        df.persist()  # the stateful stage must run once per batch, whatever the number of targets
        try:
            for target, cond in targets:
                write_rows(df.where(cond), target, batch_id)
        finally:
            df.unpersist()

    return (out.writeStream.foreachBatch(write_batch).option("checkpointLocation", checkpoint)
            .outputMode("append").trigger(**trigger).start())


def write_rows(df, target: str, batch_id: int) -> None:
    """One micro-batch's rows (``key``, ``value``) to a Kafka topic or to ``DIR/batch=<id>/``; rows without a
    ``key`` column (``PACKED_OUT_SCHEMA``: directory output, whose side rows have no key) go with a null key."""
    if _is_kafka(target):
        from pyspark.sql import functions as F

        from cep.io.kafka import parse_url

        u = parse_url(target)
        key = "key" if "key" in df.columns else F.lit(None).cast("string").alias("key")
        df.select(key, "value").write.format("kafka").option("kafka.bootstrap.servers", u.where) \
            .option("topic", u.topic).save()
    else:
        df.select("value").write.mode("overwrite").text(str(Path(target) / f"batch={batch_id}"))


def query_spec(args: argparse.Namespace):
    """The pattern spec of the command line (compiles the patterns: errors surface here)."""
    from cep.connectors.spark_spec import pattern_spec

    lateness = 0
    if args.lateness:
        lateness = parse_duration(args.lateness, args.time_unit)
    return pattern_spec(args.patterns, time_unit=args.time_unit, type_field=args.type_field,
                        time_field=args.time_field, op_field=args.op_field, lateness=lateness,
                        on_error=args.on_error, key_groups=args.key_groups)


def runs_to_end(args: argparse.Namespace) -> bool:
    """Whether the query stops once the input available now is read (``--available-now``, or ``until=end``)."""
    return args.available_now or (_is_kafka(args.input) and "until=end" in args.input)


def start_query(spark, args: argparse.Namespace):
    """Build and start the streaming query (used by main and by tests/benchmarks with their own session)."""
    from cep.connectors.spark import detect
    from cep.connectors.spark_checkpoint import check_checkpoint

    spec = check_checkpoint(args.checkpoint, query_spec(args), int(spark.conf.get("spark.sql.shuffle.partitions")))
    spec.match_column = False  # the targets take ``value`` (and ``key``) only
    # a directory's text sink writes a group's lines as one row (``spark._out_rows``: the same bytes, fewer rows
    # through Spark); Kafka needs one record per composite event, keyed by its partition key
    spec.pack_output = not _is_kafka(args.output)
    events = read_input(spark, args.input, args.max_per_batch)
    out = detect(events, spec, side_outputs=True)
    trigger = {"availableNow": True} if runs_to_end(args) else {
        "processingTime": args.trigger_interval}
    return write_output(out, args.output, args.checkpoint, trigger, args.late_output, args.errors)


def drain_to(spark, args: argparse.Namespace) -> int:
    """After an ``availableNow`` query: the pending matches the end of the input decides, to ``args.drain``
    (a Kafka topic, at least once; or a directory, replaced, committed by its ``_SUCCESS``); their number."""
    from cep.connectors.spark import drain

    commits = Path(args.checkpoint) / "commits"
    if not commits.is_dir() or not any(p.name.isdigit() for p in commits.iterdir()):
        return 0  # no micro-batch committed: no state, nothing pending
    from cep.connectors.spark_checkpoint import check_checkpoint

    drained = drain(spark, args.checkpoint, check_checkpoint(args.checkpoint, query_spec(args))).persist()
    try:
        if _is_kafka(args.drain):
            write_rows(drained, args.drain, 0)
        else:
            drained.select("value").write.mode("overwrite").text(args.drain)
        return drained.count()
    finally:
        drained.unpersist()


class Progress:
    """Every micro-batch's progress of a query, collected while it runs (``recentProgress`` keeps only the last
    100), and the totals the summary line reports."""

    def __init__(self) -> None:
        self.batches: dict[int, dict] = {}
        self.newest: str | None = None  # the JSON of the newest progress when last collected

    def collect(self, q, *, full: bool = False) -> None:
        """Take the progress reports the query made since the last call.

        Why the newest one first: ``recentProgress`` converts every retained report (up to 100) on each call,
        a Py4J call and a JSON document each; polled every second that was the driver's steady CPU while a
        query ran. A new report is always the newest one (``lastProgress``), so the list is read only when that
        changed (or with ``full``).
        """
        import json

        if not full:
            last = q.lastProgress
            newest = None if last is None else last.json
            if newest == self.newest:
                return
        texts = [prog.json for prog in q.recentProgress]  # PySpark's reports, as the plain JSON Spark reports
        for text in texts:
            p = json.loads(text)
            if p.get("numInputRows", 0) or p.get("observedMetrics"):
                self.batches[p["batchId"]] = p
        self.newest = texts[-1] if texts else None

    def metric(self, name: str) -> int:
        from cep.connectors.spark import METRICS

        return sum(int(p.get("observedMetrics", {}).get(METRICS, {}).get(name) or 0) for p in self.batches.values())

    def input_rows(self) -> int:
        return sum(p.get("numInputRows", 0) for p in self.batches.values())

    def dropped_by_spark(self) -> int:
        return sum(op.get("numRowsDroppedByWatermark", 0) for p in self.batches.values()
                   for op in p.get("stateOperators", []))

    def summary(self, names: list[str]) -> str:
        per = ", ".join(f"{n} +{self.metric(f'+:{n}')} -{self.metric(f'-:{n}')} late {self.metric(f'late:{n}')}"
                        for n in names)
        return (f"{self.input_rows()} source rows in {len(self.batches)} micro-batches; "
                f"{self.metric('late_records')} late, {self.metric('bad_records')} bad; {per}; "
                f"rows dropped by Spark's watermark: {self.dropped_by_spark()}")


def run_query(q, timeout: float | None) -> Progress:
    """Wait for the query (up to ``timeout`` s), collecting its progress; stop it when still active."""
    progress = Progress()
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))
        try:
            done = q.awaitTermination(wait)
        except Exception:  # noqa: BLE001 - a failed query: the caller reads q.exception()
            done = True
        progress.collect(q, full=done)
        if done or (deadline is not None and time.monotonic() >= deadline):
            break
    if q.isActive:
        q.stop()
        progress.collect(q, full=True)
    return progress


def bad_record_line(failure: str) -> str | None:
    """The located message of a bad record inside Spark's failure text (a Python traceback in a Java one)."""
    import re

    from cep.connectors.spark_spec import BAD_RECORD_MARK

    m = re.search(re.escape(BAD_RECORD_MARK) + r"([^\n]*)", failure)
    return m.group(1).strip() if m else None


def failure_line(failure: str) -> str:
    """One line for a failed query: the last Python error of Spark's text, else its first line."""
    import re

    found = re.findall(r"^(\w*(?:Error|Exception): .*)$", failure, re.M)
    return found[-1] if found else failure.strip().splitlines()[0]


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.patterns = [shipped.resolve(p) for p in args.patterns]  # a shipped pattern by its name
    err = sys.stderr
    from cep.connectors.spark_checkpoint import check_checkpoint, checkpoint_state_partitions
    from cep.connectors.spark_session import make_session
    from cep.connectors.spark_spec import SparkPathError

    from cep.errors import PatternError

    if args.drain is not None and not runs_to_end(args):
        err.write("cep spark: error: --drain needs --available-now (or until=end): a query that runs on has no "
                  "end of input\n")
        return EXIT_OTHER
    try:
        # pattern errors and a checkpoint of other patterns, before Spark starts
        spec = check_checkpoint(args.checkpoint, query_spec(args))
    except PatternError as e:
        err.write(str(e) + "\n")
        return EXIT_PATTERN
    except (SparkPathError, ValueError) as e:
        err.write(f"cep spark: error: {e}\n")
        return EXIT_OTHER
    targets = [args.input, args.output, args.late_output, args.errors]
    kafka = any(t is not None and _is_kafka(t) for t in targets)
    try:
        for i, t in enumerate(targets):
            if t is not None and _is_kafka(t):
                check_kafka(t, source=i == 0)
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
    spark.sparkContext.setLogLevel("FATAL")  # a failed task is reported once, as one line, below
    t0 = time.monotonic()
    try:
        q = start_query(spark, args)
        progress = run_query(q, args.timeout)
        exc = q.exception()
        el = time.monotonic() - t0
        if exc is not None:
            text = str(exc)
            bad = bad_record_line(text)
            if bad is not None:
                err.write(f"cep spark: {bad}\n")
                return EXIT_RECORD
            err.write(f"cep spark: error: the query failed: {failure_line(text)}\n")
            return EXIT_OTHER
        unit = " (files, for a directory input)" if not _is_kafka(args.input) else ""
        drained = f"; {drain_to(spark, args)} drained to {args.drain}" if args.drain is not None else ""
        err.write(f"cep spark: {progress.summary(spec.names)}{unit}{drained}; {el:.1f} s; {parts} state "
                  f"partitions; checkpoint {args.checkpoint}\n")
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
