"""The Python examples of docs/kafka-spark.md run as written, against the real broker and local files.

Each ```python block is run in order in one namespace, in a Python program of its own from a directory holding the repository's patterns, an
``in/`` directory of JSON-lines files and topics ``events`` (with the test stream) and ``matches`` on the test
broker; the only change to the text is the broker address. Their results must be what ``cep run`` gives.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from kafka_fixture import (
    consume_all,
    content,
    make_events,
    need_kafka,
    need_spark,
    produce,
    run_cep,
    write_jsonl,
)

pytestmark = [pytest.mark.spark, pytest.mark.kafka, need_spark, need_kafka]

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "kafka-spark.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def cep_run_reference(tmp: Path, pattern: str, events: list[dict]) -> Counter:
    inp = write_jsonl(tmp / f"ref-{Path(pattern).stem}.jsonl", sorted(events, key=lambda e: e["ts"]))
    r = run_cep("run", str(ROOT / pattern), "-i", str(inp), "--lateness", "30", "-q")
    return content([json.loads(line) for line in r.stdout.splitlines()])


def test_the_guide_links_and_python_examples_run_as_written(kafka_broker, tmp_path):
    assert "docs/kafka-spark.md" in (ROOT / "README.md").read_text()
    blocks = python_blocks(GUIDE.read_text())
    assert len(blocks) >= 3

    events = make_events(n=600, seed=41)
    for topic in ("events", "matches"):
        kafka_broker.create_topic(topic, partitions=3)
    produce(kafka_broker, "events", events)
    work = tmp_path / "work"
    shutil.copytree(ROOT / "patterns", work / "patterns")
    (work / "in").mkdir()
    write_jsonl(work / "in" / "a.jsonl", events[:300])
    write_jsonl(work / "in" / "b.jsonl", events[300:])
    # a program of its own (a new Spark driver), run from that directory: Spark resolves the relative paths
    # of the examples against the driver JVM's directory, which must be the program's
    program = ["import json"]
    for i, code in enumerate(blocks):
        code = code.replace("127.0.0.1:9092", kafka_broker.bootstrap)
        program.append(f"exec(compile({code!r}, 'kafka-spark.md python block {i + 1}', 'exec'))")
    program.append("print('FOUND ' + json.dumps([r.asDict(recursive=True) for r in found.collect()]))")
    (work / "examples.py").write_text("\n".join(program) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS",)}
    r = subprocess.run([sys.executable, "examples.py"], cwd=work, capture_output=True, text=True, env=env,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]

    card = cep_run_reference(tmp_path, "patterns/card_testing.pattern", events)
    smoke = cep_run_reference(tmp_path, "patterns/smoke_then_heat.pattern", events)
    assert sum(card.values()) > 5 and sum(smoke.values()) > 5
    got = consume_all(kafka_broker, "matches")
    assert content([v for _, v in got]) == card  # Kafka in, Kafka out
    assert all(k == v["match"]["card"].encode() for k, v in got)
    lines = []
    for f in sorted((work / "out").glob("part-*")):
        lines.extend(json.loads(line) for line in f.read_text().splitlines() if line.strip())
    assert content(lines) == smoke  # files in, files out

    (row,) = json.loads(next(ln for ln in r.stdout.splitlines() if ln.startswith("FOUND "))[6:])
    assert (row["pattern"], row["op"]) == ("card_testing", "+")  # the structured example: typed fields
    assert row["match"] == {"card": "4111-1", "first_ts": 1709294400, "amount": 950.0}
