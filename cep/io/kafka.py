"""Kafka source and sink for ``cep run`` (kafka-python), implementing the run loop's Source/Sink protocol.

Why a thin layer: the run loop owns parsing, the engine, checkpoints and output formatting; this module only
moves bytes. A source reads every partition of one topic by manual assignment (no consumer-group rebalancing, so
a checkpoint's per-partition offsets are the whole truth) and yields ``("<topic>/<partition>/<offset>", value)``
(a position names one record of one topic: composite-event ids are hashes of positions); its position is
``{"topic": T, "offsets": {"<partition>": next offset}, "clock": PartitionClock state}``. A sink produces each
output line with the key the run loop gives it (the pattern's partition key), ``acks=all``.

Event time is per partition (``cep.io.watermarks.PartitionClock``): the run loop reports each record's time to
the source's clock, and the source tells it (a ``(partition, None)`` tick from ``partitioned_batches``)
when a partition goes idle, so the watermark is the minimum over the partitions that still have records to give.

URLs: ``kafka://HOST:PORT[,HOST:PORT...]/TOPIC?group=G&from=earliest|latest&until=end&idle=SECONDS``

* ``from``: where to start when there is neither a checkpoint nor a committed offset of ``group``
  (default ``latest``, as Kafka consumers do).
* ``group``: offsets are committed to this consumer group at a clean close, and read from it at start when there
  is no checkpoint. The checkpoint, when there is one, wins.
* ``until=end``: stop once every partition has been read to its end (for batch jobs and tests); by default the
  source follows the topic until the run is interrupted. A partition read to its end has finished: it no longer
  holds the watermark back.
* ``idle``: seconds without a record after which a partition with no lag (read to its end offset) is idle and
  left out of the watermark (default 10; Flink's ``withIdleness``).

An unreachable broker or a missing topic raises ``KafkaConnectorError`` after a few bounded retries.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from cep.io.protocol import Sink, Source
from cep.io.readers import BATCH
from cep.io.watermarks import PartitionClock

RETRIES = 3
RETRY_BACKOFF_S = 0.5
CONNECT_TIMEOUT_MS = 3000
REQUEST_TIMEOUT_MS = 15000
POLL_TIMEOUT_MS = 500
# the output sink waits for the broker's acknowledgements at this many pending lines, or when it writes this
# long after the last wait (and always at checkpoints and exit)
ACK_EVERY = 1000
ACK_INTERVAL_S = 0.5


class KafkaConnectorError(RuntimeError):
    """A Kafka URL, broker or topic problem, with a message meant for the user."""


@dataclass
class KafkaURL:
    servers: list[str]
    topic: str
    group: str | None = None
    start: str = "latest"
    until_end: bool = False
    idle_s: float = 10.0
    options: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return ",".join(self.servers)


def parse_url(url: str) -> KafkaURL:
    """``kafka://HOST:PORT[,HOST:PORT]/TOPIC?group=G&from=earliest|latest&until=end&idle=SECONDS``."""
    parts = urlsplit(url)
    if parts.scheme != "kafka":
        raise KafkaConnectorError(f"not a kafka:// URL: {url!r}")
    servers = [s for s in parts.netloc.split(",") if s]
    topic = unquote(parts.path.lstrip("/"))
    if not servers or not topic or "/" in topic:
        raise KafkaConnectorError(f"a Kafka URL is kafka://HOST:PORT/TOPIC, got {url!r}")
    for s in servers:
        host, _, port = s.rpartition(":")
        if not host or not port.isdigit():
            raise KafkaConnectorError(f"bad Kafka broker address {s!r} in {url!r} (want HOST:PORT)")
    q = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    known = {"group", "from", "until", "idle"}
    unknown = sorted(set(q) - known)
    if unknown:
        raise KafkaConnectorError(f"unknown Kafka URL option(s) {', '.join(unknown)} in {url!r} "
                                  f"(known: {', '.join(sorted(known))})")
    start = q.get("from", "latest")
    if start not in ("earliest", "latest"):
        raise KafkaConnectorError(f"from= must be earliest or latest, got {start!r}")
    until = q.get("until", "")
    if until not in ("", "end"):
        raise KafkaConnectorError(f"until= must be end, got {until!r}")
    try:
        idle_s = float(q.get("idle", "10"))
    except ValueError:
        idle_s = -1.0
    if not idle_s >= 0:
        raise KafkaConnectorError(f"idle= must be a number of seconds >= 0, got {q.get('idle')!r}")
    return KafkaURL(servers, topic, q.get("group") or None, start, until == "end", idle_s, q)


_UNREACHABLE = {"NoBrokersAvailable", "KafkaConnectionError", "KafkaTimeoutError", "MetadataEmptyBrokerList"}


def _retrying(what: str, where: str, fn):
    """Call ``fn`` up to RETRIES times; turn the last failure into a KafkaConnectorError."""
    from kafka.errors import KafkaConfigurationError

    last: Exception | None = None
    for attempt in range(RETRIES):
        try:
            return fn()
        except KafkaConfigurationError as e:
            raise KafkaConnectorError(f"bad Kafka configuration: {e}") from None
        except KafkaConnectorError:
            raise
        except Exception as e:  # noqa: BLE001 - transient network/metadata errors are retried, then reported
            last = e
        if attempt + 1 < RETRIES:
            time.sleep(RETRY_BACKOFF_S * (attempt + 1))
    if type(last).__name__ in _UNREACHABLE:
        raise KafkaConnectorError(f"cannot reach a Kafka broker at {where} ({what}; {RETRIES} attempts)") from None
    raise KafkaConnectorError(f"Kafka {what} failed at {where} after {RETRIES} attempts: {last!r}") from None


def _quiet_kafka_logs() -> None:
    # kafka-python logs every failed connection attempt at ERROR/WARNING: the user gets our one message instead
    logging.getLogger("kafka").setLevel(logging.CRITICAL)


def _partitions(client, u: KafkaURL) -> list[int]:
    """The topic's partitions, or a clear error when it does not exist (never auto-creates it)."""

    def look():
        topics = client.topics() if hasattr(client, "topics") else set(client.list_topics())
        if u.topic not in topics:
            raise LookupError(u.topic)
        parts = client.partitions_for_topic(u.topic)
        if not parts:
            raise LookupError(u.topic)
        return sorted(parts)

    last: Exception | None = None
    for attempt in range(RETRIES):
        try:
            return look()
        except LookupError as e:  # the topic may be being created: retry a little, then report
            last = e
        except Exception as e:  # noqa: BLE001
            last = e
        if attempt + 1 < RETRIES:
            time.sleep(RETRY_BACKOFF_S * (attempt + 1))
    if isinstance(last, LookupError):
        raise KafkaConnectorError(f"Kafka topic {u.topic!r} does not exist on {u.where} "
                                  f"(create it first; cep does not create topics)")
    raise KafkaConnectorError(f"cannot read the metadata of Kafka topic {u.topic!r} at {u.where}: {last!r}")


def record_position(topic: str, partition: int, offset: int) -> str:
    """The position of one Kafka record: ``<topic>/<partition>/<offset>`` (topic names have no ``/``)."""
    return f"{topic}/{partition}/{offset}"


class KafkaSource(Source):
    """Every partition of one topic, read in offset order per partition; resumable by per-partition offsets.

    ``clock`` holds each partition's event-time progress (the run loop reports record times to it; this source
    marks partitions idle), so the watermark is per partition.
    """

    def __init__(self, url: str) -> None:
        from kafka import KafkaConsumer

        _quiet_kafka_logs()
        self.url = parse_url(url)
        u = self.url
        self.consumer = _retrying("connect", u.where, lambda: KafkaConsumer(
            bootstrap_servers=u.servers, group_id=u.group, enable_auto_commit=False,
            allow_auto_create_topics=False, auto_offset_reset=u.start, client_id="cep-source",
            request_timeout_ms=REQUEST_TIMEOUT_MS, bootstrap_timeout_ms=CONNECT_TIMEOUT_MS,
            max_poll_records=2000, fetch_max_wait_ms=200))
        self.partitions = _partitions(self.consumer, u)
        self.clock = PartitionClock(self.partitions)
        self._next: dict[int, int] = {}
        self._seek_to: dict[int, int] | None = None
        self._started = False
        self._closed = False

    def _tps(self, parts=None):
        from kafka import TopicPartition

        return [TopicPartition(self.url.topic, p) for p in (self.partitions if parts is None else parts)]

    def _start(self) -> None:
        u = self.url
        tps = self._tps()
        self.consumer.assign(tps)
        given = self._seek_to or {}
        missing = [tp for tp in tps if tp.partition not in given]
        committed: dict[int, int] = {}
        if u.group and missing:
            for tp in missing:
                off = _retrying("read committed offsets", u.where, lambda tp=tp: self.consumer.committed(tp))
                if off is not None:
                    committed[tp.partition] = off
        rest = [tp for tp in missing if tp.partition not in committed]
        if rest:
            ends = _retrying("list offsets", u.where, lambda: (
                self.consumer.beginning_offsets(rest) if u.start == "earliest" else self.consumer.end_offsets(rest)))
            committed.update({tp.partition: off for tp, off in ends.items()})
        for tp in tps:
            off = given.get(tp.partition, committed.get(tp.partition))
            self.consumer.seek(tp, off)
            self._next[tp.partition] = off
        self._started = True

    def _at_end(self) -> bool:
        tps = self._tps()
        ends = _retrying("list offsets", self.url.where, lambda: self.consumer.end_offsets(tps))
        return all(self.consumer.position(tp) >= ends.get(tp, 0) for tp in tps)

    def records(self) -> Iterator[tuple[str, bytes]]:
        """``(position, value)`` of every record (idleness ticks left out); ``position()`` is after it."""
        for _p, batch in self.partitioned_batches(limit=1):
            if batch is not None:
                yield from batch

    def partitioned_batches(self, limit: int = BATCH) -> Iterator[tuple[int, list[tuple[str, bytes]] | None]]:
        """``(partition, [(position, value), ...])``: one partition's records from one poll, at most ``limit``
        at a time, and ``(partition, None)`` when a partition becomes idle (the caller reads ``clock.low``
        again).

        Why batches: the run loop applies what a poll returned as one batch and writes its output before it
        polls again (what the broker has ready is what is ready), rather than paying the per-batch work
        once per record; records of one partition stay in offset order and partitions are never mixed in
        a batch, so the caller's per-partition clock sees them as before.
        """
        if not self._started:
            self._start()
        u = self.url
        topic = u.topic
        last_seen = dict.fromkeys(self.partitions, time.monotonic())
        while not self._closed:
            polled = self.consumer.poll(timeout_ms=POLL_TIMEOUT_MS)
            if polled:
                now = time.monotonic()
                for tp in sorted(polled, key=lambda t: t.partition):
                    p = tp.partition
                    last_seen[p] = now
                    batch: list[tuple[str, bytes]] = []
                    for rec in polled[tp]:
                        # a tombstone carries no event; its offset is consumed with the batch
                        if rec.value is not None:
                            batch.append((record_position(topic, p, rec.offset), rec.value))
                        if len(batch) == limit:
                            self._next[p] = rec.offset + 1
                            yield p, batch
                            batch = []
                    self._next[p] = polled[tp][-1].offset + 1
                    if batch:
                        yield p, batch
            elif u.until_end and self._at_end():
                return
            yield from ((p, None) for p in self._newly_idle(last_seen, fresh=not polled))

    def _newly_idle(self, last_seen: dict[int, float], fresh: bool) -> list[int]:
        """Partitions that just became idle: no lag, and finished (``until=end``) or silent for ``idle``."""
        clock = self.clock
        candidates = [p for p in self.partitions if p not in clock.idle]
        if not candidates:
            return []
        now = time.monotonic()
        u = self.url
        if not u.until_end:
            candidates = [p for p in candidates if now - last_seen[p] >= u.idle_s]
            if not candidates:
                return []
        tps = self._tps(candidates)
        ends = {tp.partition: self.consumer.highwater(tp) for tp in tps}
        if fresh and any(e is None for e in ends.values()):  # nothing fetched yet: ask the broker
            listed = _retrying("list offsets", u.where, lambda: self.consumer.end_offsets(tps))
            ends = {tp.partition: listed.get(tp) for tp in tps}
        out = []
        for tp in tps:
            end = ends[tp.partition]
            if end is not None and self.consumer.position(tp) >= end:
                clock.set_idle(tp.partition)
                out.append(tp.partition)
        return out

    def position(self) -> dict:
        if not self._started:
            offsets = {str(p): o for p, o in (self._seek_to or {}).items()}
        else:
            offsets = {str(p): o for p, o in sorted(self._next.items())}
        return {"topic": self.url.topic, "offsets": offsets, "clock": self.clock.state()}

    def seek(self, position) -> None:
        if not isinstance(position, dict) or "offsets" not in position:
            raise KafkaConnectorError(f"not a Kafka source position: {position!r}")
        if position.get("topic") not in (None, self.url.topic):
            raise KafkaConnectorError(f"the checkpoint was taken on Kafka topic {position.get('topic')!r}, "
                                      f"not {self.url.topic!r}")
        self._seek_to = {int(p): int(o) for p, o in position["offsets"].items()}
        if "clock" in position:
            self.clock.restore(position["clock"])
        if self._started:
            self._start()

    def commit(self) -> None:
        """Commit the current positions to the consumer group (if any)."""
        if not self.url.group or not self._started:
            return
        from kafka import OffsetAndMetadata, TopicPartition

        offsets = {TopicPartition(self.url.topic, p): OffsetAndMetadata(o, "", -1) for p, o in self._next.items()}
        _retrying("commit offsets", self.url.where, lambda: self.consumer.commit(offsets))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.commit()
        finally:
            self.consumer.close()


class KafkaSink(Sink):
    """Produces each output line (without its newline) to one topic, keyed as the run loop says."""

    def __init__(self, url: str) -> None:
        from kafka import KafkaAdminClient, KafkaProducer

        _quiet_kafka_logs()
        self.url = parse_url(url)
        u = self.url
        if u.group or u.until_end or "from" in u.options:
            raise KafkaConnectorError("group=, from= and until= are input options; an output URL is "
                                      "kafka://HOST:PORT/TOPIC")
        admin = _retrying("connect", u.where, lambda: KafkaAdminClient(
            bootstrap_servers=u.servers, request_timeout_ms=REQUEST_TIMEOUT_MS,
            bootstrap_timeout_ms=CONNECT_TIMEOUT_MS, client_id="cep-sink-admin"))
        try:
            if u.topic not in _retrying("list topics", u.where, lambda: set(admin.list_topics())):
                raise KafkaConnectorError(f"Kafka topic {u.topic!r} does not exist on {u.where} "
                                          f"(create it first; cep does not create topics)")
        finally:
            admin.close()
        self.producer = _retrying("connect", u.where, lambda: KafkaProducer(
            bootstrap_servers=u.servers, acks="all", linger_ms=5, client_id="cep-sink",
            allow_auto_create_topics=False, max_block_ms=REQUEST_TIMEOUT_MS,
            request_timeout_ms=REQUEST_TIMEOUT_MS, delivery_timeout_ms=60000,
            bootstrap_timeout_ms=CONNECT_TIMEOUT_MS, retries=5))
        self._pending: list = []
        self._next_ack = time.monotonic() + ACK_INTERVAL_S

    def write(self, line: bytes, key: bytes | None) -> None:
        if line.endswith(b"\n"):
            line = line[:-1]
        try:
            self._pending.append(self.producer.send(self.url.topic, value=line, key=key))
        except Exception as e:  # noqa: BLE001 - e.g. metadata timeout: report which topic and broker
            raise KafkaConnectorError(f"cannot produce to Kafka topic {self.url.topic!r} at {self.url.where}: "
                                      f"{e!r}") from None
        if len(self._pending) >= ACK_EVERY:
            self.flush()

    def record_done(self) -> None:
        """The run loop wrote one input record's composite events.

        They are with the producer, which sends them within ``linger_ms``; waiting for the
        broker's acknowledgement after every record would cost a round trip per record. The
        guarantee is at-least-once either way: every checkpoint and every exit flushes (waits
        for every acknowledgement) first, and a restart re-emits what came after the last
        checkpoint with the same ids. Acknowledgements are also awaited when a record's lines
        come ``ACK_INTERVAL_S`` or more after the last wait, and at ``ACK_EVERY`` pending lines,
        so a refused write stops the run soon after it happens.
        """
        if self._pending and time.monotonic() >= self._next_ack:
            self.flush()

    def flush(self) -> None:
        """Block until every line written so far is acknowledged; raise if any was not."""
        self.producer.flush(timeout=REQUEST_TIMEOUT_MS / 1000 * 4)
        self._next_ack = time.monotonic() + ACK_INTERVAL_S
        pending, self._pending = self._pending, []
        for f in pending:
            if not f.is_done:
                raise KafkaConnectorError(f"Kafka did not acknowledge output to {self.url.topic!r} at "
                                          f"{self.url.where} in time")
            if f.exception is not None:
                raise KafkaConnectorError(f"Kafka refused output to {self.url.topic!r} at {self.url.where}: "
                                          f"{f.exception!r}")

    def close(self) -> None:
        try:
            self.flush()
        finally:
            self.producer.close(timeout=5)


def open_source(url: str) -> KafkaSource:
    """The run loop's entry point for ``-i kafka://...``."""
    return KafkaSource(url)


def open_sink(url: str) -> KafkaSink:
    """The run loop's entry point for ``-o kafka://...``."""
    return KafkaSink(url)
