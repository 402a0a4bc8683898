"""Packaging promises that a fresh machine relies on (checked without installing anything)."""

from __future__ import annotations

import re

from cephelp import ROOT


def test_spark_extra_pins_the_pyspark_of_the_kafka_connector():
    # Spark's Kafka connector comes from Maven Central at the version in the pom; it only works with the
    # same PySpark, which the `spark` extra pins. The two drifted once (4.0.1 vs 4.2.0): keep them equal.
    pyproject = (ROOT / "pyproject.toml").read_text()
    pin = re.search(r'"pyspark\[sql\]==([0-9.]+)"', pyproject)
    assert pin, "the spark extra must pin pyspark[sql]==X.Y.Z"
    pom = (ROOT / "connectors" / "jars" / "spark-kafka" / "pom.xml").read_text()
    want = re.search(r"<spark\.version>([0-9.]+)</spark\.version>", pom)
    assert want
    assert pin.group(1) == want.group(1)


def test_the_test_command_installs_every_extra_the_tests_use():
    # CI runs the README's test command; the Kafka and Spark tests need their extras installed there
    cmd = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if "pytest" in line]
    assert len(cmd) == 1
    extras = re.search(r"-e '\.\[([a-z,]+)\]'", cmd[0])
    assert extras and {"test", "kafka", "spark"} <= set(extras.group(1).split(","))


def test_ruff_clean():
    # the standard is "ruff clean"; ruff is in the test extra, so CI holds every change to it
    import shutil
    import subprocess
    import sys

    ruff = shutil.which("ruff")
    cmd = [ruff] if ruff else [sys.executable, "-m", "ruff"]
    r = subprocess.run([*cmd, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
