"""``cep run`` with Kafka in and out, against a real Apache Kafka broker (KRaft) started by the session fixture.

What must hold: Kafka -> Kafka gives the same composite events as ``cep run`` on a file with the same records;
the output record key is the pattern's partition key; a run stopped mid-stream and resumed from its checkpoint
loses no composite event, and any repeat carries an id already emitted; an unreachable broker or a missing topic
is a clear error, not a hang.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import pytest
from kafka_fixture import (
    PATTERNS,
    consume_all,
    content,
    file_reference,
    make_events,
    need_kafka,
    new_topic,
    produce,
    run_cep,
    write_jsonl,
)

pytestmark = [pytest.mark.kafka, need_kafka]


@pytest.fixture(scope="module")
def stream(kafka_broker, tmp_path_factory):
    """One input topic with the test stream, and the file-run reference."""
    events = make_events()
    topic = new_topic(kafka_broker, "cli-in")
    produce(kafka_broker, topic, events)
    ref = file_reference(tmp_path_factory.mktemp("ref"), events)
    assert len(ref) > 20  # the stream must produce matches for the comparison to mean anything
    return topic, events, ref


def kafka_url(broker, topic: str, **q: str) -> str:
    qs = "&".join(f"{k}={v}" for k, v in q.items())
    return f"kafka://{broker.bootstrap}/{topic}" + (f"?{qs}" if qs else "")


def test_source_reads_every_partition_and_resumes_from_a_position(kafka_broker, stream):
    from cep.io.kafka import open_source

    topic, events, _ = stream
    src = open_source(kafka_url(kafka_broker, topic, **{"from": "earliest", "until": "end"}))
    first = []
    for pos, raw in src.records():
        first.append((pos, raw))
        if len(first) == 300:
            break
    mark = src.position()
    src.close()
    assert mark["topic"] == topic and sum(mark["offsets"].values()) == 300

    src = open_source(kafka_url(kafka_broker, topic, **{"from": "latest", "until": "end"}))
    src.seek(mark)
    rest = list(src.records())
    src.close()
    got = first + rest
    assert len(got) == len(events)
    assert len({pos for pos, _ in got}) == len(events)  # each record once, named <topic>/<partition>/<offset>
    assert all(pos.split("/")[0] == topic and len(pos.split("/")) == 3 for pos, _ in got)
    assert Counter(json.loads(raw)["ts"] for _, raw in got) == Counter(e["ts"] for e in events)


def test_group_offsets_are_committed_at_close(kafka_broker, stream):
    from cep.io.kafka import open_source

    topic, events, _ = stream
    url = kafka_url(kafka_broker, topic, group="g-commit", **{"from": "earliest", "until": "end"})
    src = open_source(url)
    n = sum(1 for _ in zip(range(100), src.records(), strict=False))
    src.close()
    assert n == 100
    src = open_source(url)  # no checkpoint: resumes from the group's committed offsets
    rest = sum(1 for _ in src.records())
    src.close()
    assert rest == len(events) - 100


def test_kafka_to_kafka_matches_file_run(kafka_broker, stream):
    topic, _, ref = stream
    out = new_topic(kafka_broker, "cli-out")
    run_cep("run", *PATTERNS, "-i", kafka_url(kafka_broker, topic, **{"from": "earliest", "until": "end"}),
            "-o", kafka_url(kafka_broker, out), "--lateness", "1 d", "-q")
    got = consume_all(kafka_broker, out)
    values = [v for _, v in got]
    assert content(values) == content(ref)
    assert len({v["id"] for v in values}) == len(values)


def test_output_key_is_the_partition_key(kafka_broker, stream):
    topic, _, _ = stream
    out = new_topic(kafka_broker, "cli-key")
    run_cep("run", *PATTERNS, "-i", kafka_url(kafka_broker, topic, **{"from": "earliest", "until": "end"}),
            "-o", kafka_url(kafka_broker, out), "--lateness", "1 d", "-q")
    got = consume_all(kafka_broker, out)
    assert got
    for key, v in got:
        want = v["match"]["card"] if v["pattern"] == "card_testing" else v["match"]["area"]
        assert key == want.encode(), (key, v)


def test_stopped_run_resumes_from_checkpoint_without_loss(kafka_broker, stream, tmp_path):
    topic, events, ref = stream
    full = new_topic(kafka_broker, "cli-full")
    src = kafka_url(kafka_broker, topic, **{"from": "earliest", "until": "end"})
    run_cep("run", *PATTERNS, "-i", src, "-o", kafka_url(kafka_broker, full), "--lateness", "1 d", "-q")
    expected = {v["id"]: v for _, v in consume_all(kafka_broker, full)}

    out = new_topic(kafka_broker, "cli-restart")
    ck = tmp_path / "run.ckpt"
    common = ["run", *PATTERNS, "-i", src, "-o", kafka_url(kafka_broker, out), "--lateness", "1 d", "-q",
              "--checkpoint", str(ck), "--checkpoint-every", "100"]
    # stop mid-stream without a final checkpoint (as a crash would), then resume
    r = run_cep(*common, "--test-stop-after", "450", "--test-crash-at-stop", check=False)
    assert r.returncode != 0 and ck.exists()
    r = run_cep(*[a for a in common if a != "-q"])
    m = re.search(r"cep: (\d+) records", r.stderr)
    assert m and int(m.group(1)) < len(events)  # the resumed run started from the checkpoint, not the start
    got = [v for _, v in consume_all(kafka_broker, out)]
    ids = Counter(v["id"] for v in got)
    assert set(ids) == set(expected)  # nothing lost
    for v in got:  # a repeat is the same composite event under the same id
        assert v == expected[v["id"]]
    assert content([expected[i] for i in ids]) == content(ref)


def test_missing_topic_is_a_clear_error(kafka_broker):
    from cep.io.kafka import KafkaConnectorError, open_sink, open_source

    with pytest.raises(KafkaConnectorError, match="does not exist"):
        open_source(f"kafka://{kafka_broker.bootstrap}/no-such-topic?from=earliest")
    with pytest.raises(KafkaConnectorError, match="does not exist"):
        open_sink(f"kafka://{kafka_broker.bootstrap}/no-such-topic")
    r = run_cep("run", PATTERNS[0], "-i", f"kafka://{kafka_broker.bootstrap}/no-such-topic", check=False)
    assert r.returncode == 1 and "does not exist" in r.stderr


def test_unreachable_broker_is_a_clear_error_after_bounded_retries(monkeypatch):
    from cep.connectors.broker import free_port

    from cep.io import kafka

    monkeypatch.setattr(kafka, "CONNECT_TIMEOUT_MS", 500)
    monkeypatch.setattr(kafka, "RETRY_BACKOFF_S", 0.1)
    url = f"kafka://127.0.0.1:{free_port()}/t"
    with pytest.raises(kafka.KafkaConnectorError, match="cannot reach a Kafka broker"):
        kafka.open_source(url)
    with pytest.raises(kafka.KafkaConnectorError, match="cannot reach a Kafka broker"):
        kafka.open_sink(url)


def test_bad_urls_are_rejected():
    from cep.io.kafka import KafkaConnectorError, parse_url

    assert parse_url("kafka://h:1,h2:2/t?group=g&from=earliest&until=end").servers == ["h:1", "h2:2"]
    for bad in ("kafka://h/t", "kafka://h:1/", "kafka://h:1/t?from=middle", "kafka://h:1/t?colour=red",
                "http://h:1/t"):
        with pytest.raises(KafkaConnectorError):
            parse_url(bad)


def test_sink_waits_for_acknowledgements_in_batches_not_per_record(kafka_broker):
    # per input record the lines go to the producer; acknowledgements are awaited every
    # ACK_INTERVAL_S (or ACK_EVERY lines), at checkpoints (flush) and at exit (close)
    from cep.io import kafka as ck

    out = new_topic(kafka_broker, "cli-acks", partitions=1)
    sink = ck.open_sink(f"kafka://{kafka_broker.bootstrap}/{out}")
    try:
        for i in range(5):
            sink.write(b'{"n": %d}\n' % i, None)
            sink.record_done()
        assert len(sink._pending) == 5  # no round trip per record
        sink._next_ack = 0.0  # the interval is over: the next record waits for the acknowledgements
        sink.write(b'{"n": 5}\n', None)
        sink.record_done()
        assert sink._pending == []
        sink.write(b'{"n": 6}\n', None)
    finally:
        sink.close()  # exit: everything acknowledged
    assert sorted(v["n"] for _, v in consume_all(kafka_broker, out)) == list(range(7))


# ------------------------------------------------------------------------------ event time across partitions


def produce_to(broker, topic: str, by_partition: dict[int, list[dict]]) -> None:
    """Produce each partition's events, in the given order, to that partition."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    try:
        for part, events in by_partition.items():
            for e in events:
                p.send(topic, partition=part, value=json.dumps(e).encode())
        p.flush(timeout=60)
    finally:
        p.close()


def skewed_partitions(events: list[dict], parts: int, lateness: int, seed: int) -> dict[int, list[dict]]:
    """Events split over partitions, each partition in time order up to a disorder within ``lateness``."""
    rnd = random.Random(seed)
    out: dict[int, list[dict]] = {p: [] for p in range(parts)}
    for e in events:
        out[rnd.randrange(parts)].append(e)
    for evs in out.values():  # local disorder: swap neighbours less than the lateness apart
        for i in range(len(evs) - 1):
            if rnd.random() < 0.3 and evs[i + 1]["ts"] - evs[i]["ts"] <= lateness:
                evs[i], evs[i + 1] = evs[i + 1], evs[i]
    return out


def summary_late(stderr: str) -> int:
    m = re.search(r"cep: (\d+) records \((\d+) late", stderr)
    assert m, stderr
    return int(m.group(2))


def test_partitions_read_out_of_step_give_the_file_result_and_nothing_late(kafka_broker, tmp_path):
    # per-partition watermarks: a partition read ahead of another does not make the other's records late
    lateness = 60
    events = make_events(n=3000, seed=23)
    parts = skewed_partitions(events, 3, lateness, seed=5)
    topic = new_topic(kafka_broker, "skew", partitions=3)
    produce_to(kafka_broker, topic, parts)
    url = kafka_url(kafka_broker, topic, **{"from": "earliest", "until": "end"})

    # the test means something: in the order the source delivers the records, one watermark over every
    # partition (max time seen - lateness) would call many of them late
    from cep.io.kafka import open_source

    src = open_source(url)
    order = [json.loads(raw)["ts"] for _, raw in src.records()]
    src.close()
    assert len(order) == len(events)
    high, late_if_global = None, 0
    for t in order:
        if high is not None and t < high - lateness:
            late_if_global += 1
        high = t if high is None else max(high, t)
    assert late_if_global > 100

    out = tmp_path / "kafka.jsonl"
    r = run_cep("run", *PATTERNS, "-i", url, "-o", str(out), "--lateness", str(lateness),
                "--late-output", str(tmp_path / "late.jsonl"))
    assert summary_late(r.stderr) == 0
    assert (tmp_path / "late.jsonl").read_text() == ""
    got = [json.loads(line) for line in out.read_text().splitlines()]

    sorted_ref = file_reference(tmp_path, sorted(events, key=lambda e: e["ts"]), lateness=str(lateness))
    unsorted = write_jsonl(tmp_path / "unsorted.jsonl", [e for p in sorted(parts) for e in parts[p]])
    r = run_cep("run", *PATTERNS, "-i", str(unsorted), "--lateness", "1000 d")
    unsorted_ref = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(sorted_ref) > 50
    assert content(got) == content(sorted_ref) == content(unsorted_ref)
    assert len({(o["id"], o["op"]) for o in got}) == len(got)


def test_a_record_late_for_every_partition_is_counted_and_written(kafka_broker, tmp_path):
    # every partition has moved past the record's time + lateness (the checkpoint keeps each partition's
    # event time, so the resumed run judges it as one run would): it is late, counted, and written out
    topic = new_topic(kafka_broker, "late", partitions=3)
    t0 = 1_700_000_000
    first = {p: [{"type": "Smoke", "ts": t0 + 100 * i + p, "area": f"a{p}", "detector": "D"} for i in range(5)]
             for p in range(3)}
    produce_to(kafka_broker, topic, first)
    url = kafka_url(kafka_broker, topic, **{"from": "earliest", "until": "end"})
    ck, out, late = tmp_path / "run.ckpt", tmp_path / "out.jsonl", tmp_path / "late.jsonl"
    common = ["run", *PATTERNS, "-i", url, "-o", str(out), "--lateness", "30 s", "--late-output", str(late),
              "--checkpoint", str(ck)]
    r = run_cep(*common)
    assert summary_late(r.stderr) == 0
    stale = {"type": "Temperature", "ts": t0 + 10, "area": "a0", "celsius": 99}
    fresh = {"type": "Temperature", "ts": t0 + 450, "area": "a1", "celsius": 99}
    produce_to(kafka_broker, topic, {0: [stale], 1: [fresh]})
    r = run_cep(*common)
    assert summary_late(r.stderr) == 1
    assert [json.loads(line) for line in late.read_text().splitlines()] == [stale]
    matches = [json.loads(line) for line in out.read_text().splitlines()]
    assert any(m["match"].get("area") == "a1" for m in matches)  # the fresh record was processed
    assert not any(m["match"].get("area") == "a0" and m["match"].get("celsius") == 99 for m in matches)


def test_equal_offsets_in_two_partitions_give_different_ids(kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "ids", partitions=2)
    t0 = 1_700_000_000
    pair = [{"type": "Smoke", "ts": t0, "area": "lab", "detector": "D"},
            {"type": "Temperature", "ts": t0 + 5, "area": "lab", "celsius": 80}]
    produce_to(kafka_broker, topic, {0: pair, 1: [{**e, "ts": e["ts"] + 1000} for e in pair]})
    out = tmp_path / "out.jsonl"
    run_cep("run", PATTERNS[1], "-i", kafka_url(kafka_broker, topic, **{"from": "earliest", "until": "end"}),
            "-o", str(out), "-q")
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(got) == 2  # one match per partition, from offsets 0 and 1 of each
    assert got[0]["id"] != got[1]["id"]
