"""Session fixtures for the Kafka and Spark tests: Maven jar cache, a real KRaft broker, one SparkSession.

Why session scope: resolving the jars (once per machine, cached in ``$CEP_JAR_CACHE`` or ``~/.cache/cep-maven``),
starting the broker (~5 s) and starting Spark (~10-30 s) are the expensive parts; every test uses its own topics,
directories and checkpoints. The broker is stopped by its process id; Spark by ``spark.stop()``.

Tests skip (with the reason) only when PySpark or kafka-python is not installed, and never in CI (``CI`` set in
the environment), where a missing extra fails them: CI installs ``.[test,kafka,spark]`` and must run every test.
A missing Java or Maven, or a broker that does not come up, always fails them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATTERNS = [str(ROOT / "patterns" / "card_testing.pattern"), str(ROOT / "patterns" / "smoke_then_heat.pattern")]
HAVE_KAFKA = importlib.util.find_spec("kafka") is not None
HAVE_SPARK = importlib.util.find_spec("pyspark") is not None and importlib.util.find_spec("pandas") is not None

IN_CI = bool(os.environ.get("CI"))
KAFKA_MISSING = "kafka-python is not installed (pip install 'cep[kafka]')"
SPARK_MISSING = "PySpark is not installed (pip install 'cep[spark]')"

# in CI nothing is skipped: a test whose extra is missing fails on its import or in its fixture
need_kafka = pytest.mark.skipif(not HAVE_KAFKA and not IN_CI, reason=KAFKA_MISSING)
need_spark = pytest.mark.skipif(not HAVE_SPARK and not IN_CI, reason=SPARK_MISSING)


def missing(reason: str) -> None:
    """Skip on a developer's machine; fail in CI, which must run every test."""
    if IN_CI:
        pytest.fail(f"{reason}, and CI must run the Kafka and Spark tests")
    pytest.skip(reason)


# ------------------------------------------------------------------------------------------------ data


def make_events(n: int = 900, seed: int = 7, t0: int = 1_700_000_000) -> list[dict]:
    """A deterministic stream for card_testing and smoke_then_heat (plus noise), time-ordered."""
    rnd = random.Random(seed)
    cards = [f"4111-{i}" for i in range(12)]
    areas = ["lab", "kitchen", "hall", "garage", "attic"]
    out = []
    t = t0
    for _ in range(n):
        t += rnd.randint(1, 40)
        r = rnd.random()
        if r < 0.6:
            amt = rnd.choice([rnd.uniform(1, 99), rnd.uniform(1, 99), rnd.uniform(401, 900), rnd.uniform(100, 400)])
            out.append({"type": "Txn", "ts": t, "card": rnd.choice(cards), "amount": round(amt, 2)})
        elif r < 0.75:
            out.append({"type": "Smoke", "ts": t, "area": rnd.choice(areas), "detector": f"D-{rnd.randint(1, 9)}"})
        elif r < 0.95:
            out.append({"type": "Temperature", "ts": t, "area": rnd.choice(areas), "celsius": rnd.randint(20, 90)})
        else:
            out.append({"type": "Noise", "ts": t, "x": rnd.random()})
    return out


def partition_key(ev: dict) -> str | None:
    return ev.get("card") or ev.get("area")


def write_jsonl(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def cep_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "cep.cli", *args]


def run_cep(*args: str, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(cep_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if check and r.returncode != 0:
        raise AssertionError(f"cep {' '.join(args)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return r


def file_reference(tmp: Path, events: list[dict], lateness: str = "1 d") -> list[dict]:
    """What ``cep run`` on a file emits for these events (the reference the other paths must match)."""
    inp = write_jsonl(tmp / "reference-input.jsonl", events)
    r = run_cep("run", *PATTERNS, "-i", str(inp), "--lateness", lateness, "-q")
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def content(outputs: list[dict]) -> Counter:
    """Composite events without their ids (ids name input positions, which differ between inputs)."""
    return Counter((o["pattern"], o["op"], json.dumps(o["match"], sort_keys=True)) for o in outputs)


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def jar_cache():
    from cep.connectors import jars

    return jars.resolve()


@pytest.fixture(scope="session")
def kafka_broker(jar_cache, tmp_path_factory):
    if not HAVE_KAFKA:
        missing(KAFKA_MISSING)
    from cep.connectors.broker import KafkaBroker

    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"), partitions=3)
    broker.start(timeout=120)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def spark(jar_cache):
    if not HAVE_SPARK:
        missing(SPARK_MISSING)
    from cep.connectors.spark_session import make_session

    session = make_session("local[2]", 2, kafka=True, app="cep-tests")
    try:
        yield session
    finally:
        session.stop()


def new_topic(broker, prefix: str, partitions: int = 3) -> str:
    return broker.create_topic(f"{prefix}-{uuid.uuid4().hex[:8]}", partitions=partitions)


def produce(broker, topic: str, events: list[dict]) -> None:
    """Produce each event keyed by its partition key (so one key's events stay in order in one partition)."""
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    try:
        for e in events:
            k = partition_key(e)
            p.send(topic, key=k.encode() if k else None, value=json.dumps(e).encode())
        p.flush(timeout=60)
    finally:
        p.close()


def consume_all(broker, topic: str) -> list[tuple[bytes | None, dict]]:
    """Every record of a topic as (key, JSON value), reading each partition to its end (bounded)."""
    import time

    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        ends = c.end_offsets(tps)
        out = []
        deadline = time.monotonic() + 60
        while any(c.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "could not read the topic to its end"
            for _tp, recs in c.poll(timeout_ms=500).items():
                out.extend((r.key, json.loads(r.value)) for r in recs)
        return out
    finally:
        c.close()
