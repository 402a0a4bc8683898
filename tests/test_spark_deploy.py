"""Deploying the Spark path: the wheel carries what the connectors need, the pack ships cep to executors, and
``spark-submit`` decides the master and the configuration.

The cluster test runs a real multi-process cluster on one machine (``local-cluster[2,1,1024]``: a master, two
workers and two executor JVMs, each with its own Python workers), submitted with ``spark-submit`` from a
directory and a ``PYTHONPATH`` where cep is not importable; the executors' Python cannot import cep by itself
(checked), so cep reaches them only through the archive that ``--archives`` ships.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from kafka_fixture import PATTERNS, content, file_reference, make_events, need_spark, write_jsonl

pytestmark = [pytest.mark.spark, need_spark]

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = out.glob("cep-*.whl")
    return whl


@pytest.fixture(scope="module")
def archive(wheel, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pack") / "cep-env.zip"
    r = subprocess.run([sys.executable, "-m", "cep.connectors.pack", str(out), "--wheel", str(wheel)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return out


def test_the_wheel_installs_the_poms_the_grammar_and_the_patterns(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for need in ("cep/connectors/jars/pom.xml", "cep/connectors/jars/broker/pom.xml",
                 "cep/connectors/jars/spark-kafka/pom.xml", "cep/grammar/pattern.lark",
                 "cep/patterns/card_testing.pattern", "cep/connectors/spark.py", "cep/connectors/spark_spec.py", "cep/connectors/spark_route.py",
                 "cep/connectors/spark_pack.py", "cep/connectors/spark_state.py", "cep/connectors/spark_session.py",
                 "cep/connectors/spark_checkpoint.py", "cep/connectors/sparkdaemon.py", "cep/io/kafka.py",
                 "cep/connectors/log4j2.properties", "cep/connectors/jvm/cep/hadoop/LocalFileSystem.java"):
        assert need in names, need


def test_the_archive_holds_cep_and_its_dependencies(archive):
    names = zipfile.ZipFile(archive).namelist()
    tops = {n.split("/")[0] for n in names}
    assert {"cep", "lark", "sortedcontainers", "orjson", "click", "tqdm"} <= tops
    assert any(n.startswith("orjson/") and n.endswith(".so") for n in names)  # compiled parts too
    assert "cep/connectors/jars/spark-kafka/pom.xml" in names


def test_an_editable_install_is_refused_with_the_way_out(tmp_path):
    r = subprocess.run([sys.executable, "-m", "cep.connectors.pack", str(tmp_path / "x.zip")],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 1 and "--wheel" in r.stderr
    assert not (tmp_path / "x.zip").exists()


def test_settings_given_to_spark_submit_are_read_before_cep_adds_its_own(tmp_path):
    (tmp_path / "spark-defaults.conf").write_text("# comment\nspark.sql.shuffle.partitions  9\n"
                                                 "spark.master\tspark://elsewhere:7077\n")
    env = {**os.environ, "SPARK_CONF_DIR": str(tmp_path),
           "PYSPARK_SUBMIT_ARGS": "--master local-cluster[2,1,1024] --conf spark.ui.enabled=true "
                                  "--executor-memory 512m --conf spark.executor.memory=2g pyspark-shell"}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    code = "import json; from cep.connectors.spark_session import given_spark_conf as g; print(json.dumps(g()))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["spark.master"] == "local-cluster[2,1,1024]"  # --master wins over spark-defaults.conf
    assert got["spark.sql.shuffle.partitions"] == "9" and got["spark.ui.enabled"] == "true"
    assert got["spark.executor.memory"] == "512m"  # spark-submit's flag wins over its --conf, as spark-submit reads them
    from cep.connectors.spark_cli import build_parser

    assert build_parser().parse_args(["p.pattern", "-i", "a", "-o", "b", "--checkpoint", "c"]).master is None


def python_without_cep(d: Path) -> str:
    """A Python for the executors with PySpark's worker requirements but without cep.

    This interpreter run with ``-S`` and its site-packages directories on ``PYTHONPATH``: the packages there
    import, but ``.pth`` files are not processed, so an editable (development) install of cep is invisible.
    """
    import site

    dirs = [p for p in [*site.getsitepackages(), site.getusersitepackages()] if os.path.isdir(p)]
    exe = d / "python-without-cep"
    exe.write_text("#!/bin/sh\n"
                   f'export PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{os.pathsep.join(dirs)}"\n'
                   f'exec "{sys.executable}" -S "$@"\n')
    exe.chmod(0o755)
    return str(exe)


def spark_home_copy(d: Path) -> str:
    """PySpark's directory as SPARK_HOME, by symbolic links: local-cluster workers write into SPARK_HOME/work."""
    import pyspark

    src = Path(pyspark.__file__).parent
    d.mkdir()
    for entry in src.iterdir():
        if entry.name != "work":
            (d / entry.name).symlink_to(entry)
    return str(d)


def test_cep_spark_on_a_local_cluster_gets_cep_from_the_shipped_archive(archive, tmp_path):
    events = make_events(n=500, seed=31)
    ref = file_reference(tmp_path, events)
    assert len(ref) > 20
    inp = tmp_path / "in"
    inp.mkdir()
    write_jsonl(inp / "a.jsonl", events[:250])
    write_jsonl(inp / "b.jsonl", events[250:])
    work = tmp_path / "submit"  # cwd of the driver: no cep package here
    work.mkdir()
    spark_home = spark_home_copy(tmp_path / "spark-home")
    executor_python = python_without_cep(tmp_path)
    probe = subprocess.run([executor_python, "-c", "import pyspark, pandas, pyarrow\ntry:\n import cep\n"
                            "except ImportError:\n print('no cep')"], capture_output=True, text=True, cwd=work,
                           env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, timeout=60)
    assert probe.stdout.strip() == "no cep", probe.stderr  # the executors' Python cannot import cep by itself
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR")}
    env.update(SPARK_HOME=spark_home, PYSPARK_PYTHON=executor_python, PYSPARK_DRIVER_PYTHON=sys.executable)
    cmd = [os.path.join(spark_home, "bin", "spark-submit"), "--master", "local-cluster[2,1,1024]",
           "--archives", f"{archive}#cep-env", "--conf", "spark.executorEnv.PYTHONPATH=cep-env",
           "--conf", "spark.sql.shuffle.partitions=3", "--conf", "spark.ui.enabled=false",
           "--conf", "spark.executor.extraJavaOptions=-Dcep.test.given=1",
           # the documented opt-in where the executors' Python gets cep from the archive (docs/kafka-spark.md)
           "--conf", "spark.python.daemon.module=cep.connectors.sparkdaemon",
           str(ROOT / "tests" / "spark_cluster_driver.py"),
           *PATTERNS, "--lateness", "1 d", "-i", str(inp), "-o", str(tmp_path / "out"),
           "--checkpoint", str(tmp_path / "ck"), "--available-now", "--no-rocksdb"]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env=env, timeout=540)
    print(f"spark-submit on local-cluster: {time.monotonic() - t0:.0f} s")
    assert r.returncode == 0, r.stderr[-4000:]
    lines = r.stdout.splitlines()
    assert "MASTER local-cluster[2,1,1024]" in lines  # spark-submit's master, not cep's default
    workers = json.loads(next(ln for ln in lines if ln.startswith("WORKERS "))[len("WORKERS "):])
    assert len({w["pid"] for w in workers}) >= 2  # Python workers of both executors
    for w in workers:  # cep came from the archive, unpacked in the executor's directory
        assert w["file"].startswith(str(tmp_path / "spark-home" / "work")), w
        assert w["file"].endswith("/cep-env/cep/__init__.py"), w
        # the executors' JVM options are spark-submit's, not cep's default (JIT_OPTIONS)
        assert "-Dcep.test.given=1" in w["jvm"] and "TieredStopAtLevel" not in w["jvm"], w["jvm"]
        assert w["daemon"] == "cep.connectors.sparkdaemon", w  # imported from the archive when the daemon starts
    # spark-submit runs the Python driver with its stderr joined to stdout
    said = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("cep spark")]
    assert any("3 state partitions" in ln for ln in said), said  # spark-submit's, not cep's default 4
    out = []
    for f in sorted((tmp_path / "out").glob("part-*")):
        out.extend(json.loads(line) for line in f.read_text().splitlines() if line.strip())
    assert content(out) == content(ref)
