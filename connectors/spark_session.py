"""The SparkSession cep runs in: ``make_session()``, and cep's settings where the deployment gives none.

Why a module of its own: what a session needs (the JVMs' options, the state store, the local file system class,
the Python workers' daemon, where the deployment's own settings come from) is one job, apart from the query
(``cep.connectors.spark``: ``detect``) that runs in it; every default here is one a deployment overrides, and
each says why it is cep's (measurements in bench/results/spark.md).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

# The JVMs' JIT: C1 only. Why: a cep micro-batch keeps little of its time in JVM loops (file source, Arrow,
# shuffle, state store) but touches a large part of Spark's code and plans (and generates code) anew each
# micro-batch, so the optimizing compiler (C2) was still compiling at steady state: on local-cluster it took 5.3
# of the executors' 9.2 CPU s per two 10^5-event micro-batches, and about half the driver's CPU; C1 alone cut
# the JVMs' CPU per micro-batch by a third without slowing the task threads (bench/results/spark.md). A
# deployment that sets extraJavaOptions itself (spark-submit --conf, --driver-java-options) keeps its own.
JIT_OPTIONS = "-XX:TieredStopAtLevel=1"
# The JVMs' garbage collector: the parallel (throughput) collector, not G1 (Java 17's default). Why: every
# micro-batch moves large short-lived buffers through the JVMs (a whole input file as one string, the packed route
# rows, Arrow batches), which G1 allocates as humongous objects in the old generation and answers with
# concurrent marking cycles: on local-cluster G1's concurrent and GC threads took ~0.15 CPU s per 10^5-event
# micro-batch of each kind of JVM, the parallel collector's a third of that (bench/results/spark.md). Its
# pauses stop the tasks briefly, which a micro-batch engine can afford; a deployment that sets its own
# extraJavaOptions keeps its own collector.
GC_OPTIONS = "-XX:+UseParallelGC"
JVM_OPTIONS = f"{JIT_OPTIONS} {GC_OPTIONS}"
# The executors' initial heap: all of it (``-Xms`` = the executor memory, as Spark sizes ``-Xmx``). Why: with a
# small initial heap the parallel collector grows and shrinks the generations as a micro-batch's buffers come and
# go, and the pages it hands back are faulted in again: on local-cluster the executors' system time and page
# faults fell by a fifth and their CPU by 0.04-0.07 s per 10^5-event micro-batch in 4 of 4 pairs
# (bench/results/spark.md, 2026-12-07c). Only with cep's executor options (a deployment that sets
# extraJavaOptions keeps its own), and only when the executor memory is known (``executor_memory_mb``).
EXECUTOR_MEMORY = "spark.executor.memory"
# ... and every page of that heap touched at start (``-XX:+AlwaysPreTouch``, beside that ``-Xms``). Why: a heap
# page is faulted in (and zeroed by the kernel) the first time the JVM writes it, and the parallel collector
# promotes each young collection's survivors into old-generation pages never used before, until the old
# generation has filled once: on local-cluster that lasted ~50 micro-batches of 10^5 events, with young pauses of
# ~100 ms (5-15 ms once the pages were in), the executors' GC threads mostly in system time and their CPU per
# micro-batch falling from ~0.68 to ~0.30 s over those batches (bench/results/spark.md, 2026-12-07e). Touched at
# start, the executors run as they do after that from their first micro-batch (-0.11 CPU s per micro-batch over
# the first ten, faults halved). The cost: each executor touches its heap when it starts (0.3 s and 0.5 CPU s per
# GB here), and holds it resident from then on, as a long-running one does anyway.
PRETOUCH_OPTION = "-XX:+AlwaysPreTouch"
# The JVMs' logging: cep's log4j2 configuration (Spark's defaults at WARN, not INFO), shipped in this package.
# Why: Spark's default executors log ~80 INFO lines per micro-batch each (tasks, broadcasts, shuffle blocks,
# state store commits), ~6 % of local-cluster executors' Java samples (bench/results/spark.md); make_session's
# ``setLogLevel`` reaches the driver's JVM only. Added to the JVM options of the driver and of executors on this
# machine (local, local-cluster: the file's path exists there) unless the deployment gives its own log4j2
# configuration (``given_log_config``), which then stays in force.
LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
LOG_OPTION = f"-Dlog4j2.configurationFile={LOG_CONFIG}"
DRIVER_JAVA_OPTIONS, EXECUTOR_JAVA_OPTIONS = "spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"

# cep's settings for a session; anything the deployment gives (spark-submit, spark-defaults.conf,
# PYSPARK_SUBMIT_ARGS) wins over these
SESSION_DEFAULTS = {
    DRIVER_JAVA_OPTIONS: JVM_OPTIONS,
    EXECUTOR_JAVA_OPTIONS: JVM_OPTIONS,
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.streaming.stateStore.stateSchemaCheck": "true",
}
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# RocksDB state: commit a micro-batch as a changelog of the rows it wrote, not as a new checkpoint of the whole
# database (files copied into the checkpoint directory every micro-batch); snapshots are made in the
# background. Why: cep rewrites its 64 key-group rows every micro-batch, and the per-batch RocksDB checkpoint
# was a fifth of the executors' CPU (bench/results/spark.md). Spark reads checkpoints written either way.
ROCKSDB_DEFAULTS = {"spark.sql.streaming.stateStore.providerClass": ROCKSDB,
                    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
LOCAL_DEFAULTS = {"spark.ui.enabled": "false", "spark.driver.memory": "2g"}  # a local session only
# Checkpoint files through Hadoop's FileSystem API, not its FileContext API (Spark's default), on this machine's
# masters (local, local-cluster) with the local file system as the default. Why: without Hadoop's native library
# (PySpark ships none) the local file system forks a process for each symbolic-link check and each permission it
# sets: FileContext's rename checks four links (file and checksum file, source and target), each a `readlink`
# process, and every created file gets a `chmod` process. A micro-batch writes six checkpoint files (offsets,
# commits, the file source's and the file sink's logs, a RocksDB changelog per state partition): ~70 processes
# forked by the JVMs per micro-batch (JFR on local[1]: 2,223 in 33 micro-batches), ~18 through the FileSystem API
# (587: the `chmod`s remain), ~0.1 CPU s less per micro-batch on the driver (bench/results/spark.md).
# Both write a temporary file and rename it; on a local file system the rename is as atomic either way (Spark
# itself falls back to this manager on file systems without FileContext). A deployment's own setting wins.
CHECKPOINT_FILE_MANAGER = "spark.sql.streaming.checkpointFileManagerClass"
FS_CHECKPOINT_FILE_MANAGER = \
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
LOCAL_FS_DEFAULTS = {CHECKPOINT_FILE_MANAGER: FS_CHECKPOINT_FILE_MANAGER}
# The local file system class of the JVMs make_session starts on this machine's masters: cep's
# ``cep.hadoop.LocalFileSystem`` (connectors/localfs.py), Hadoop's with the permission bits of created files set
# through java.nio, not by a forked ``chmod`` process (16 per micro-batch, ~0.05 CPU s: bench/results/spark.md).
# Set as a whole (the class, and its directory on the driver's and executors' class paths) or not at all: not when
# the deployment gives any of the three, nor when the classes cannot be compiled (``localfs.classes_dir``). The
# directory also holds an empty ``yarn-default.xml``: no YARN defaults in these JVMs' Hadoop configurations
# (``localfs.RESOURCES``).
FILE_IMPL, DRIVER_CLASS_PATH, EXECUTOR_CLASS_PATH = \
    "spark.hadoop.fs.file.impl", "spark.driver.extraClassPath", "spark.executor.extraClassPath"


# The Python workers' daemon on this machine's masters, when they run this interpreter: cep's
# ``cep.connectors.sparkdaemon``, PySpark's daemon without its full garbage collection after every task (~0.3 CPU s
# per 10^5-event micro-batch in a worker that keeps cep's engines: bench/results/spark.md). Only where the daemon
# can import cep when it starts: the workers' interpreter is this one (a deployment that ships cep to its
# executors sets it itself, docs/kafka-spark.md). A deployment's own setting wins.
PYTHON_DAEMON_MODULE = "spark.python.daemon.module"
CEP_DAEMON_DEFAULTS = {PYTHON_DAEMON_MODULE: "cep.connectors.sparkdaemon"}


def local_fs_settings(classes: str) -> dict[str, str]:
    """The settings that make the JVMs' ``file:`` file system cep's class, compiled into ``classes``."""
    from cep.connectors.localfs import CLASS_NAME

    return {FILE_IMPL: CLASS_NAME, DRIVER_CLASS_PATH: classes, EXECUTOR_CLASS_PATH: classes}


SUBMIT_FLAGS = {"--master": "spark.master", "--executor-memory": EXECUTOR_MEMORY}  # spark-submit's, that cep reads


def given_spark_conf() -> dict[str, str]:
    """The Spark settings the deployment gives, before cep adds its own.

    Under ``spark-submit`` (or with a running SparkContext) the driver JVM already holds them: its ``SparkConf``.
    Otherwise ``spark-submit`` is about to be launched by PySpark: ``$SPARK_CONF_DIR/spark-defaults.conf`` (or
    ``$SPARK_HOME/conf/``), then ``--conf`` and the flags of ``SUBMIT_FLAGS`` in ``PYSPARK_SUBMIT_ARGS``, then
    ``MASTER``, as spark-submit reads them.
    """
    from pyspark import SparkConf, SparkContext

    if SparkContext._jvm is not None or os.environ.get("PYSPARK_GATEWAY_PORT"):
        SparkContext._ensure_initialized()
        return dict(SparkConf().getAll())
    conf: dict[str, str] = {}
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else None)
    defaults = Path(conf_dir, "spark-defaults.conf") if conf_dir else None
    if defaults is not None and defaults.is_file():
        for line in defaults.read_text().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                k, _, v = line.replace("\t", " ").partition(" ")
                conf[k] = v.strip()
    import shlex

    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    flags: dict[str, str] = {}
    for i, a in enumerate(args[:-1]):
        if a in SUBMIT_FLAGS:
            flags[SUBMIT_FLAGS[a]] = args[i + 1]
        elif a == "--conf" and "=" in args[i + 1]:
            k, _, v = args[i + 1].partition("=")
            conf[k] = v
    conf.update(flags)  # (spark-submit: its own flags win over --conf)
    if "spark.master" not in conf and os.environ.get("MASTER"):
        conf["spark.master"] = os.environ["MASTER"]
    return conf


_SIZE_UNITS_MB = {"": 1, "b": 1 / 2**20, "k": 1 / 1024, "kb": 1 / 1024, "m": 1, "mb": 1, "g": 1024, "gb": 1024,
                  "t": 2**20, "tb": 2**20, "p": 2**30, "pb": 2**30}


def executor_memory_mb(given: Mapping[str, str], environ: Mapping[str, str] = os.environ) -> int | None:
    """The executors' heap in MiB as Spark sizes it (``SparkContext``: ``spark.executor.memory`` of the
    deployment's settings, ``given_spark_conf``, where ``spark-submit --executor-memory`` lands too; else
    ``SPARK_EXECUTOR_MEMORY``, else ``SPARK_MEM``, else 1024; a number without a unit is MiB); None when a value
    is not a size Spark reads (then cep adds no ``-Xms``: one larger than Spark's ``-Xmx`` would stop the JVM)."""
    import re

    value = given.get(EXECUTOR_MEMORY)
    if value is None:
        value = environ.get("SPARK_EXECUTOR_MEMORY") or environ.get("SPARK_MEM") or "1024"
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", value.lower())
    if m is None or m.group(2) not in _SIZE_UNITS_MB:
        return None
    mb = int(int(m.group(1)) * _SIZE_UNITS_MB[m.group(2)])
    return mb if mb > 0 else None


LOG4J2_FILES = tuple(f"log4j2{t}.{e}" for t in ("-test", "") for e in ("properties", "yaml", "yml", "json", "jsn", "xml"))


def given_log_config(given: dict[str, str], environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the deployment gives the JVMs a log4j2 configuration of its own (then cep's ``LOG_CONFIG`` is not
    added): a ``log4j`` system property in its JVM options (``extraJavaOptions`` of the driver or the executors,
    ``JDK_JAVA_OPTIONS``, ``JAVA_TOOL_OPTIONS``, ``PYSPARK_SUBMIT_ARGS``), ``LOG4J_CONFIGURATION_FILE``, or a log4j2 file in Spark's
    configuration directory (``SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``: on the JVMs' class path) or in a
    directory of the given extra class paths."""
    options = [given.get(DRIVER_JAVA_OPTIONS, ""), given.get(EXECUTOR_JAVA_OPTIONS, ""),
               environ.get("JDK_JAVA_OPTIONS", ""), environ.get("JAVA_TOOL_OPTIONS", ""),
               environ.get("PYSPARK_SUBMIT_ARGS", "")]  # (its --driver-java-options are not in ``given``)
    if any("-Dlog4j" in o for o in options) or environ.get("LOG4J_CONFIGURATION_FILE"):
        return True
    dirs = [environ.get("SPARK_CONF_DIR") or (os.path.join(environ["SPARK_HOME"], "conf")
                                               if environ.get("SPARK_HOME") else "")]
    for key in ("spark.driver.extraClassPath", "spark.executor.extraClassPath"):
        dirs += given.get(key, "").split(os.pathsep)
    return any(d and os.path.isfile(os.path.join(d, f)) for d in dirs for f in LOG4J2_FILES)


def session_settings(master: str, given: dict[str, str], state_partitions: int | None = None, *,
                     rocksdb: bool = True, log_config_given: bool = False,
                     local_fs_classes: str | None = None, workers_run_this_python: bool = False) -> dict[str, str]:
    """The settings ``make_session`` adds to a session on ``master``: cep's defaults that ``given`` (the
    deployment's settings, ``given_spark_conf``) does not set, and the state partitions (an explicit
    ``state_partitions`` wins over the deployment's; without either, 4); cep's executor options start the executors
    with their whole heap (``EXECUTOR_MEMORY``). ``log_config_given``: the deployment
    gives its own log4j2 configuration (``given_log_config``): cep's ``LOG_OPTION`` is not added.
    ``local_fs_classes``: the directory of cep's compiled local file system class (``localfs.classes_dir``), for
    JVMs this session starts: its settings are added on local masters unless the deployment gives one of them.
    ``workers_run_this_python``: the Python workers run this interpreter (``workers_python``), so cep's daemon
    (``CEP_DAEMON_DEFAULTS``) is set on local masters."""
    wanted = dict(SESSION_DEFAULTS)
    heap_mb = executor_memory_mb(given)
    if heap_mb is not None:
        wanted[EXECUTOR_JAVA_OPTIONS] += f" -Xms{heap_mb}m {PRETOUCH_OPTION}"
    if not log_config_given and " " not in str(LOG_CONFIG):  # (a path with a space would need quoting)
        wanted[DRIVER_JAVA_OPTIONS] += " " + LOG_OPTION
        if master.startswith(("local[", "local-cluster[")) or master == "local":
            wanted[EXECUTOR_JAVA_OPTIONS] += " " + LOG_OPTION
    if master.startswith("local[") or master == "local":
        wanted.update(LOCAL_DEFAULTS)
    if master.startswith(("local[", "local-cluster[")) or master == "local":
        if given.get("spark.hadoop.fs.defaultFS", "file:").startswith("file:"):
            wanted.update(LOCAL_FS_DEFAULTS)
        if local_fs_classes and not {FILE_IMPL, DRIVER_CLASS_PATH, EXECUTOR_CLASS_PATH} & given.keys():
            wanted.update(local_fs_settings(local_fs_classes))
        if workers_run_this_python:
            wanted.update(CEP_DAEMON_DEFAULTS)
    wanted["spark.sql.shuffle.partitions"] = str(state_partitions or 4)
    if rocksdb:
        wanted.update(ROCKSDB_DEFAULTS)
    return {k: v for k, v in wanted.items()
            if k not in given or (k == "spark.sql.shuffle.partitions" and state_partitions)}


def local_fs_classes(master: str) -> str | None:
    """The directory of cep's local file system class (``localfs.classes_dir``, compiled on first use) when this
    process is about to start the JVMs of a local or local-cluster master, else None: the class path of a running
    JVM is fixed, and spark-submit's ``--driver-class-path`` (in ``PYSPARK_SUBMIT_ARGS``) would replace the
    driver's ``extraClassPath``."""
    from pyspark import SparkContext

    if not (master.startswith(("local[", "local-cluster[")) or master == "local") \
            or SparkContext._jvm is not None or os.environ.get("PYSPARK_GATEWAY_PORT") \
            or "--driver-class-path" in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return None
    from cep.connectors.localfs import classes_dir

    return classes_dir()


def workers_python(given: dict[str, str], environ: Mapping[str, str]) -> str:
    """The interpreter the Python workers run: ``PYSPARK_PYTHON``, what PySpark hands to the executors (spark-submit
    sets it from ``spark.pyspark.python``), else that setting, else ``python3`` as PySpark's default."""
    return environ.get("PYSPARK_PYTHON") or given.get("spark.pyspark.python") or "python3"


def make_session(master: str | None = None, state_partitions: int | None = None, *, kafka: bool = True,
                 rocksdb: bool = True, app: str = "cep", extra: dict[str, str] | None = None):
    """A SparkSession set up for cep: state partitions, UTC, RocksDB state, Kafka connector jars.

    The deployment decides: a master or setting given by ``spark-submit``, ``spark-defaults.conf`` or
    ``PYSPARK_SUBMIT_ARGS`` is kept; cep only fills in what is not set. ``master`` (an explicit argument, e.g.
    ``cep spark --master``) wins; with none given anywhere the master is ``local[*]``. ``state_partitions``
    (``spark.sql.shuffle.partitions``, default 4) likewise. On a local (or local-cluster) master the Python workers are this
    interpreter (``PYSPARK_PYTHON``, unless set); on a cluster the executors need cep and its dependencies:
    ship them with ``python -m cep.connectors.pack`` (docs/kafka-spark.md, "Deploying on a cluster").
    """
    from pyspark.sql import SparkSession

    given = given_spark_conf()
    master = master or given.get("spark.master") or "local[*]"
    if master.startswith(("local[", "local-cluster[")) or master == "local":
        # this machine's executors run this interpreter (and so this cep), not whatever ``python3`` is on PATH
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = SparkSession.builder.master(master).appName(given.get("spark.app.name", app))
    for k, v in session_settings(master, given, state_partitions, rocksdb=rocksdb,
                                 log_config_given=given_log_config(given),
                                 local_fs_classes=local_fs_classes(master),
                                 workers_run_this_python=workers_python(given, os.environ) == sys.executable).items():
        b = b.config(k, v)
    if kafka:
        from cep.connectors import jars

        jars.check_spark_version()
        have = [j for j in given.get("spark.jars", "").split(",") if j]
        b = b.config("spark.jars", ",".join(have + jars.spark_kafka_jars()))
    for k, v in (extra or {}).items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
