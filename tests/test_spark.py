"""The Spark Structured Streaming path: same composite events as ``cep run``, state survives restarts.

One SparkSession for the whole test run (session fixture ``spark``, local[2], 2 state partitions); each query
has its own directories and checkpoint and runs with ``availableNow`` (or is stopped mid-stream on purpose).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from kafka_fixture import (
    PATTERNS,
    consume_all,
    content,
    file_reference,
    make_events,
    need_kafka,
    need_spark,
    new_topic,
    produce,
    run_cep,
    write_jsonl,
)

pytestmark = [pytest.mark.spark, need_spark]


def cli_args(*argv: str):
    from cep.connectors.spark_cli import build_parser

    return build_parser().parse_args([*PATTERNS, "--lateness", "1 d", *argv])


def read_dir_output(path: Path) -> list[dict]:
    """The lines of the committed part files (a file sink commits each micro-batch once)."""
    meta = path / "_spark_metadata"
    committed = set()
    for f in meta.iterdir():
        if f.name.split(".")[0].isdigit():
            for line in f.read_text().splitlines()[1:]:
                committed.add(Path(json.loads(line)["path"].replace("file://", "")).name)
    out = []
    for f in sorted(path.glob("part-*")):
        if f.name in committed:
            out.extend(json.loads(line) for line in f.read_text().splitlines() if line.strip())
    return out


def split_files(events: list[dict], d: Path, n: int) -> list[Path]:
    """Write events into n files, in time order (file i holds the i-th slice)."""
    d.mkdir(parents=True, exist_ok=True)
    size = -(-len(events) // n)
    return [write_jsonl(d / f"part{i:02d}.jsonl", events[i * size:(i + 1) * size]) for i in range(n)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    events = make_events(n=700, seed=11)
    ref = file_reference(tmp_path_factory.mktemp("sparkref"), events)
    assert len(ref) > 20
    return events, ref


# ------------------------------------------------------------------------------------------ no Spark needed


def test_partition_analysis_routes_by_key():
    from cep.connectors.spark import partition_attrs

    from cep.lang.compiler import compile_text

    cp, = compile_text("PATTERN p SEQ(A a, B b) WHERE a.x = b.y WITHIN 10")
    assert partition_attrs(cp) == {"A": ("x",), "B": ("y",)}
    cp, = compile_text("PATTERN p SEQ(A a, B b) WITHIN 10")
    assert partition_attrs(cp) is None  # no key: one group
    cp, = compile_text("PATTERN p SEQ(A a, A b) WHERE a.x = b.y WITHIN 10")
    assert partition_attrs(cp) is None  # the key attribute depends on the alias: one group


def test_group_keys_follow_value_equality():
    from cep.connectors.spark import _canon_key, kafka_key

    assert _canon_key([1]) == _canon_key([1.0]) != _canon_key(["1"])
    assert _canon_key([True]) != _canon_key([1])
    assert kafka_key(["4111-1"]) == "4111-1" and kafka_key([7.0]) == "7" and kafka_key(["a", 2]) == '["a",2]'


# ------------------------------------------------------------------------------------------ with Spark


def test_files_to_files_matches_cep_run(spark, data, tmp_path):
    from cep.connectors.spark_cli import start_query

    events, ref = data
    split_files(events, tmp_path / "in", 3)
    q = start_query(spark, cli_args("-i", str(tmp_path / "in"), "-o", str(tmp_path / "out"),
                                    "--checkpoint", str(tmp_path / "ck"), "--available-now"))
    q.awaitTermination()
    assert q.exception() is None
    got = read_dir_output(tmp_path / "out")
    assert content(got) == content(ref)
    assert len({o["id"] for o in got}) == len(got)


def test_detect_on_a_static_dataframe_with_structured_columns(spark, data):
    from cep.connectors.spark import detect

    events, ref = data
    rows = [{**e, "pos": str(i + 1), "card": e.get("card"), "area": e.get("area"), "amount": e.get("amount"),
             "detector": e.get("detector"), "celsius": e.get("celsius"), "x": e.get("x")} for i, e in
            enumerate(events)]
    df = spark.createDataFrame(rows, "type string, ts long, card string, amount double, area string, "
                                     "detector string, celsius long, x double, pos string")
    got = [json.loads(r.value) for r in detect(df, PATTERNS, lateness=86400).collect()]
    # to_json drops nulls, so the records equal the file's; positions are line numbers, so ids equal too
    assert Counter(o["id"] for o in got) == Counter(o["id"] for o in ref)
    assert content(got) == content(ref)


def test_query_stopped_mid_stream_resumes_from_checkpoint(spark, data, tmp_path):
    from cep.connectors.spark_cli import start_query

    events, ref = data
    split_files(events, tmp_path / "in", 6)
    full_out = tmp_path / "full"
    q = start_query(spark, cli_args("-i", str(tmp_path / "in"), "-o", str(full_out),
                                    "--checkpoint", str(tmp_path / "ck-full"), "--available-now"))
    q.awaitTermination()
    expected = {o["id"]: o for o in read_dir_output(full_out)}
    assert content(expected.values()) == content(ref)

    out, ck = tmp_path / "out", tmp_path / "ck"
    q = start_query(spark, cli_args("-i", str(tmp_path / "in"), "-o", str(out), "--checkpoint", str(ck),
                                    "--max-per-batch", "1", "--trigger-interval", "100 milliseconds"))
    deadline = time.monotonic() + 300
    while q.isActive and time.monotonic() < deadline:
        done = [p for p in q.recentProgress if p["numInputRows"] > 0]
        if len(done) >= 2:  # two files in: partial matches are in the state store; stop the query now
            break
        time.sleep(0.2)
    q.stop()
    assert q.exception() is None
    first = read_dir_output(out)
    assert 0 < len(first) < len(expected)  # stopped mid-stream

    q = start_query(spark, cli_args("-i", str(tmp_path / "in"), "-o", str(out), "--checkpoint", str(ck),
                                    "--available-now"))
    q.awaitTermination()
    assert q.exception() is None
    assert sum(p["numInputRows"] for p in q.recentProgress) < sum(1 for e in events)  # resumed, not redone
    got = read_dir_output(out)
    ids = Counter(o["id"] for o in got)
    assert set(ids) == set(expected)  # nothing lost, including matches spanning the stop
    for o in got:  # repeats (if any) are the same composite event under the same id
        assert o == expected[o["id"]]


@pytest.mark.kafka
@need_kafka
def test_kafka_to_kafka_matches_cep_run(spark, kafka_broker, data, tmp_path):
    from cep.connectors.spark_cli import start_query

    events, ref = data
    tin = new_topic(kafka_broker, "spark-in")
    produce(kafka_broker, tin, events)
    src = f"kafka://{kafka_broker.bootstrap}/{tin}?from=earliest&until=end"

    cli_out = new_topic(kafka_broker, "spark-cli-out")
    run_cep("run", *PATTERNS, "-i", src, "-o", f"kafka://{kafka_broker.bootstrap}/{cli_out}",
            "--lateness", "1 d", "-q")
    cli = [v for _, v in consume_all(kafka_broker, cli_out)]

    out = new_topic(kafka_broker, "spark-out")
    q = start_query(spark, cli_args("-i", src, "-o", f"kafka://{kafka_broker.bootstrap}/{out}",
                                    "--checkpoint", str(tmp_path / "ck")))
    q.awaitTermination()
    assert q.exception() is None
    got = consume_all(kafka_broker, out)
    values = [v for _, v in got]
    assert content(values) == content(ref)
    # same input positions (p<partition>:<offset>) as the CLI's Kafka source, so the same ids
    assert Counter(v["id"] for v in values) == Counter(v["id"] for v in cli)
    for key, v in got:  # the record key is the pattern's partition key
        want = v["match"]["card"] if v["pattern"] == "card_testing" else v["match"]["area"]
        assert key == want.encode()


# ------------------------------------------------------------------------------------------ spec section 7

ABSENCE = ["patterns/unshipped_orders.pattern", "patterns/withdrawal_without_login.pattern",
           "patterns/next_higher_quote.pattern", "patterns/rising_readings.pattern",
           "patterns/account_takeover.pattern"]


def test_gap_types_are_routed_like_the_match_key():
    from cep.connectors.spark import partition_attrs

    from cep.lang.compiler import compile_text

    cp, = compile_text("PATTERN p SEQ(A a, NOT B b, C c) WHERE b.k = a.x AND c.y = a.x")
    assert partition_attrs(cp) == {"A": ("x",), "C": ("y",), "B": ("k",)}
    cp, = compile_text("PATTERN p SEQ(A a, NOT B b, C c) WHERE c.y = a.x")
    assert partition_attrs(cp) is None  # any B may lie in the gap: one group
    cp, = compile_text("PATTERN p SEQ(R a, R b) PARTITION BY s USING strict_contiguity")
    assert partition_attrs(cp) == {"R": ("s",)}


def test_detect_decides_pending_matches_at_the_end_of_a_static_dataframe(spark, tmp_path):
    """A static DataFrame is a bounded input: the same composite events as ``cep run`` on the file."""
    from cep.connectors.spark import detect
    from cephelp import ROOT

    pats = [str(ROOT / p) for p in ABSENCE]
    for name in ("unshipped_orders", "withdrawal_without_login", "next_higher_quote", "rising_readings",
                 "account_takeover"):
        lines = (ROOT / "examples" / name / "input.jsonl").read_text().splitlines()
        df = spark.createDataFrame([(str(i), line) for i, line in enumerate(lines, 1)], "pos string, value string")
        got = [json.loads(r.value) for r in detect(df, pats, key_groups=4).collect()]
        ref = run_cep("run", *pats, "-i", str(ROOT / "examples" / name / "input.jsonl"), "-q")
        want = [json.loads(x) for x in ref.stdout.splitlines() if x.strip()]
        assert want, name
        assert Counter(json.dumps(o, sort_keys=True) for o in got) == \
            Counter(json.dumps(o, sort_keys=True) for o in want), name


def test_streaming_watermark_decides_pending_matches(spark, tmp_path):
    """Micro-batches: pending matches are decided by a later batch's watermark (or a state timeout)."""
    from cep.connectors.spark_cli import start_query

    from cep.lang.compiler import compile_files

    pat = "patterns/unshipped_orders.pattern"
    day = 86400
    events = []
    for i in range(40):
        t = 1_700_000_000 + i * 7200
        events.append({"type": "Order", "ts": t, "order_id": i, "customer": f"c{i % 3}"})
        if i % 3:
            events.append({"type": "Shipment", "ts": t + day * (i % 4), "order_id": i})
    events.sort(key=lambda e: e["ts"])
    last = events[-1]["ts"]
    events.append({"type": "Order", "ts": last + 10 * day, "order_id": 999, "customer": "late"})  # moves time on
    ref = [json.loads(x) for x in run_cep("run", pat, "-i", str(write_jsonl(tmp_path / "all.jsonl", events)),
                                          "-q").stdout.splitlines()]
    decided_by_stream = [o for o in ref if o["match"]["order_id"] != 999]  # the last one needs the end
    assert len(decided_by_stream) >= 10
    import os

    for k, f in enumerate(split_files(events, tmp_path / "in", 4)):
        os.utime(f, (1_700_000_000 + k * 100, 1_700_000_000 + k * 100))  # one file a batch, in time order
    from cep.connectors.spark_cli import build_parser

    args = build_parser().parse_args([pat, "-i", str(tmp_path / "in"), "-o", str(tmp_path / "out"),
                                      "--checkpoint", str(tmp_path / "ck"), "--available-now",
                                      "--max-per-batch", "1"])
    q = start_query(spark, args)
    q.awaitTermination()
    assert q.exception() is None
    got = read_dir_output(tmp_path / "out")
    assert compile_files([pat])[0].decided
    assert content(got) == content(decided_by_stream)


KLEENE = ["failed_logins", "card_testing_run", "overheating_run"]


def test_repeated_types_are_routed_like_the_match_key():
    from cep.connectors.spark import partition_attrs

    from cep.lang.compiler import compile_text

    cp, = compile_text("PATTERN p SEQ(Reading b, Reading{3,} hot, NOT Reading ok, Reading back) "
                       "PARTITION BY sensor WITHIN 1 h")
    assert partition_attrs(cp) == {"Reading": ("sensor",)}
    cp, = compile_text("PATTERN p SEQ(Login{3,} f, Login ok) PARTITION BY user WITHIN 10 min")
    assert partition_attrs(cp) is None  # one positive element has no partition variable: one group
    cp, = compile_text("PATTERN p SEQ(A a, B+ b, C c) WHERE c.y = a.x")
    assert partition_attrs(cp) is None  # any B may be repeated: one group


def test_detect_gives_the_kleene_examples_like_cep_run(spark):
    """Spec 7.3 through Spark (the same Engine in each key group): the repetition examples give
    the same composite events as ``cep run`` on the files, aggregates included."""
    from cep.connectors.spark import detect
    from cephelp import ROOT

    for name in KLEENE:
        pat = next(a for a in (ROOT / "examples" / name / "run.sh").read_text().split() if a.endswith(".pattern"))
        lines = (ROOT / "examples" / name / "input.jsonl").read_text().splitlines()
        df = spark.createDataFrame([(str(i), line) for i, line in enumerate(lines, 1)], "pos string, value string")
        got = [json.loads(r.value) for r in detect(df, [str(ROOT / pat)], key_groups=3).collect()]
        want = [json.loads(x) for x in (ROOT / "examples" / name / "expected.jsonl").read_text().splitlines()]
        assert want, name
        assert Counter(json.dumps(o, sort_keys=True) for o in got) == \
            Counter(json.dumps(o, sort_keys=True) for o in want), name
