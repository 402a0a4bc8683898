"""The Spark Structured Streaming path: same composite events as ``cep run``, state survives restarts.

One SparkSession for the whole test run (session fixture ``spark``, local[2], 2 state partitions); each query
has its own directories and checkpoint and runs with ``availableNow`` (or is stopped mid-stream on purpose).
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections import Counter
from pathlib import Path

import pytest
from kafka_fixture import (
    PATTERNS,
    ROOT,
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
    """The lines of the committed part files (a file sink commits each micro-batch once; with side outputs,
    ``foreachBatch`` writes one ``batch=<id>`` directory per micro-batch, committed by its ``_SUCCESS``)."""
    meta = path / "_spark_metadata"
    if not meta.is_dir():
        return [json.loads(line) for d in sorted(path.glob("batch=*")) if (d / "_SUCCESS").exists()
                for f in sorted(d.glob("part-*")) for line in f.read_text().splitlines() if line.strip()]
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


def test_session_settings_fill_in_only_what_the_deployment_does_not_give():
    """make_session's settings: cep's defaults where the deployment (spark-submit, spark-defaults.conf,
    PYSPARK_SUBMIT_ARGS) sets nothing; a setting it gives is never replaced, whichever default it is."""
    from cep.connectors.spark_session import (
        CHECKPOINT_FILE_MANAGER,
        DRIVER_JAVA_OPTIONS,
        EXECUTOR_JAVA_OPTIONS,
        JVM_OPTIONS,
        LOCAL_DEFAULTS,
        LOCAL_FS_DEFAULTS,
        LOG_OPTION,
        PRETOUCH_OPTION,
        ROCKSDB_DEFAULTS,
        SESSION_DEFAULTS,
        session_settings,
    )

    defaults = {**SESSION_DEFAULTS, **ROCKSDB_DEFAULTS}
    # cep's log4j2 configuration: the driver's JVM, and the executors' on this machine's masters only
    logs = {DRIVER_JAVA_OPTIONS: f"{JVM_OPTIONS} {LOG_OPTION}",
            EXECUTOR_JAVA_OPTIONS: f"{JVM_OPTIONS} -Xms1024m {PRETOUCH_OPTION} {LOG_OPTION}"}
    local = session_settings("local[2]", {})
    assert local == {**defaults, **LOCAL_DEFAULTS, **LOCAL_FS_DEFAULTS, **logs, "spark.sql.shuffle.partitions": "4"}
    assert session_settings("local-cluster[2,1,1024]", {}) == {**defaults, **LOCAL_FS_DEFAULTS, **logs,
                                                               "spark.sql.shuffle.partitions": "4"}
    assert session_settings("spark://elsewhere:7077", {}) == {
        **defaults, DRIVER_JAVA_OPTIONS: f"{JVM_OPTIONS} {LOG_OPTION}", EXECUTOR_JAVA_OPTIONS: f"{JVM_OPTIONS} -Xms1024m {PRETOUCH_OPTION}",
        "spark.sql.shuffle.partitions": "4"}
    for key in local:  # each of cep's settings, given by the deployment: kept as given (absent here)
        given = {key: "deployment's"}
        for master in ("local[2]", "local-cluster[2,1,1024]", "spark://elsewhere:7077"):
            assert key not in session_settings(master, given), (key, master)
    # an explicit state partition count (``cep spark --state-partitions``) wins over the deployment's
    assert session_settings("local[2]", {"spark.sql.shuffle.partitions": "9"}, 3)[
        "spark.sql.shuffle.partitions"] == "3"
    assert "spark.sql.streaming.stateStore.providerClass" not in session_settings("local[2]", {}, rocksdb=False)
    assert CHECKPOINT_FILE_MANAGER not in session_settings("local[2]", {"spark.hadoop.fs.defaultFS": "hdfs://nn:8020"})


def test_the_executors_start_with_their_whole_heap_when_its_size_is_known(monkeypatch):
    """cep's executor options hold ``-Xms`` = the executor memory as Spark sizes ``-Xmx``, pre-touched (spark.executor.memory,
    SPARK_EXECUTOR_MEMORY, SPARK_MEM, else 1024 MiB; spark-submit's --executor-memory reaches the settings through
    ``given_spark_conf``, tests/test_spark_deploy.py), and none when the size is not one Spark reads; a
    deployment's own executor options are kept as given."""
    from cep.connectors.spark_session import (
        EXECUTOR_JAVA_OPTIONS,
        executor_memory_mb,
        session_settings,
    )

    for var in ("PYSPARK_SUBMIT_ARGS", "SPARK_EXECUTOR_MEMORY", "SPARK_MEM"):
        monkeypatch.delenv(var, raising=False)
    assert executor_memory_mb({}, {}) == 1024
    for value, mb in (("4g", 4096), ("4G", 4096), ("512m", 512), ("2048", 2048), ("1gb", 1024), ("1t", 2**20),
                      ("3145728k", 3072), ("536870912b", 512), (" 2g ", 2048)):
        assert executor_memory_mb({"spark.executor.memory": value}, {}) == mb, value
    for bad in ("lots", "1.5g", "2x", "", "0"):
        assert executor_memory_mb({"spark.executor.memory": bad}, {}) is None, bad
    assert executor_memory_mb({}, {"SPARK_EXECUTOR_MEMORY": "3g", "SPARK_MEM": "5g"}) == 3072
    assert executor_memory_mb({}, {"SPARK_MEM": "5g"}) == 5120
    assert executor_memory_mb({"spark.executor.memory": "2g"}, {"SPARK_EXECUTOR_MEMORY": "3g"}) == 2048
    for master in ("local-cluster[2,1,1024]", "spark://elsewhere:7077"):
        assert "-Xms2048m -XX:+AlwaysPreTouch" in session_settings(master, {"spark.executor.memory": "2g"})[
            EXECUTOR_JAVA_OPTIONS]
        # (no heap size, no pre-touch: it would touch only the JVM's own small initial heap)
        without = session_settings(master, {"spark.executor.memory": "lots"})[EXECUTOR_JAVA_OPTIONS]
        assert "-Xms" not in without and "PreTouch" not in without
        assert EXECUTOR_JAVA_OPTIONS not in session_settings(master, {EXECUTOR_JAVA_OPTIONS: "-Xss4m"})
    monkeypatch.setenv("SPARK_EXECUTOR_MEMORY", "768m")
    assert "-Xms768m" in session_settings("local-cluster[2,1,1024]", {})[EXECUTOR_JAVA_OPTIONS]


def test_cep_s_python_daemon_only_where_the_workers_run_this_interpreter_and_unless_given():
    """cep's daemon for the Python workers (``cep.connectors.sparkdaemon``) is set on this machine's masters when
    the workers run the driver's interpreter (so the daemon imports cep when it starts); never on a cluster master
    (the executors' Python may get cep only with a task's files), nor when the deployment names a daemon."""
    import sys

    from cep.connectors.spark_session import (
        CEP_DAEMON_DEFAULTS,
        PYTHON_DAEMON_MODULE,
        session_settings,
        workers_python,
    )

    assert CEP_DAEMON_DEFAULTS == {PYTHON_DAEMON_MODULE: "cep.connectors.sparkdaemon"}
    for master in ("local[2]", "local", "local-cluster[2,1,1024]"):
        assert session_settings(master, {}, workers_run_this_python=True).items() >= CEP_DAEMON_DEFAULTS.items()
        assert PYTHON_DAEMON_MODULE not in session_settings(master, {})
        assert PYTHON_DAEMON_MODULE not in session_settings(master, {PYTHON_DAEMON_MODULE: "pyspark.daemon"},
                                                            workers_run_this_python=True)
    assert PYTHON_DAEMON_MODULE not in session_settings("spark://elsewhere:7077", {}, workers_run_this_python=True)
    # the workers' interpreter: PYSPARK_PYTHON (spark-submit sets it from spark.pyspark.python), else the setting
    given = {"spark.pyspark.python": "/opt/py/bin/python3"}
    assert workers_python({}, {"PYSPARK_PYTHON": sys.executable}) == sys.executable
    assert workers_python(given, {"PYSPARK_PYTHON": sys.executable}) == sys.executable
    assert workers_python(given, {}) == "/opt/py/bin/python3"
    assert workers_python({}, {}) == "python3"


def test_cep_s_daemon_collects_the_oldest_generation_only_once_it_has_grown_by_a_quarter():
    """PySpark's daemon calls ``gc.collect()`` after every task; in cep's daemon that collection frees the cycles
    of the young generations every time, and those of the oldest once it has grown by a quarter since its last
    full collection there (a full collection walked a cep worker's whole heap after every task: ~45 ms each). The
    oldest generation is counted (~12 ms in a worker) only once the allocated memory blocks have grown by 1/16
    since the last count or full collection: here a number the test sets."""
    import gc
    import sys
    import weakref

    from cep.connectors.sparkdaemon import BLOCKS_GROWTH, OLDEST_GROWTH, AfterTaskGc
    from pyspark import daemon

    assert isinstance(daemon.gc, AfterTaskGc) and daemon.gc.blocks is sys.getallocatedblocks
    assert daemon.gc.get_threshold() == gc.get_threshold()  # every other name is the gc module's

    class Node:
        pass

    def garbage_cycle(old: bool) -> weakref.ref:
        a, b = Node(), Node()
        a.b, b.a = b, a
        if old:
            gc.collect(1)  # it survives a collection of the young generations: now in the oldest
        return weakref.ref(a)

    blocks = [100_000]
    after_task = AfterTaskGc(blocks=lambda: blocks[0])

    def frees_half(phase: str, info: dict) -> None:  # a full collection gives the garbage's blocks back
        if phase == "stop" and info["generation"] == 2:
            blocks[0] //= 2

    enabled = gc.isenabled()
    gc.disable()  # no automatic collection in between
    gc.callbacks.append(frees_half)
    try:
        old_ref = garbage_cycle(old=True)
        after_task.collect()  # the first one is full (no size of the oldest generation yet)
        assert old_ref() is None
        size = after_task.oldest_after_full
        assert size == len(gc.get_objects(2)) and after_task.blocks_at_count == blocks[0] == 50_000  # (after it)
        for _ in range(3):  # then: the young generations only
            old_ref, young_ref = garbage_cycle(old=True), garbage_cycle(old=False)
            after_task.collect()
            assert young_ref() is None and old_ref() is not None
        grown = [[i] for i in range(int(size * (OLDEST_GROWTH - 1)) + 10)]  # tracked objects, kept
        gc.collect(1)
        after_task.collect()  # grown by a quarter, but the allocated blocks have not moved: not counted
        assert old_ref() is not None
        blocks[0] = int(50_000 * BLOCKS_GROWTH) - 1
        after_task.collect()  # nor with the blocks just short of 1/16 more
        assert old_ref() is not None and after_task.blocks_at_count == 50_000
        blocks[0] += 1
        after_task.collect()  # counted: the oldest generation has grown by a quarter, a full collection
        assert old_ref() is None and after_task.oldest_after_full >= size + len(grown)
        assert after_task.blocks_at_count == blocks[0] == int(50_000 * BLOCKS_GROWTH) // 2  # the blocks after it
        old_ref = garbage_cycle(old=True)
        blocks[0] = int(blocks[0] * BLOCKS_GROWTH) + 1
        after_task.collect()  # counted again, but grown by less than a quarter: the oldest generation is left
        assert old_ref() is not None and after_task.blocks_at_count == blocks[0]
    finally:
        gc.callbacks.remove(frees_half)
        if enabled:
            gc.enable()


def test_cep_s_log_config_is_added_only_where_the_deployment_gives_none(tmp_path):
    """cep's log4j2 configuration (WARN, not Spark's INFO) goes into the JVM options make_session fills in, unless
    the deployment configures log4j2 itself: by a system property in its JVM options, LOG4J_CONFIGURATION_FILE,
    a log4j2 file in Spark's configuration directory or in a directory of its extra class path."""
    from cep.connectors.spark_session import (
        DRIVER_JAVA_OPTIONS,
        EXECUTOR_JAVA_OPTIONS,
        LOG_CONFIG,
        LOG_OPTION,
        given_log_config,
        session_settings,
    )

    assert LOG_CONFIG.is_file() and "rootLogger.level = warn" in LOG_CONFIG.read_text()
    assert not given_log_config({}, {})
    assert not given_log_config({DRIVER_JAVA_OPTIONS: "-Xss4m"}, {"SPARK_HOME": str(tmp_path)})
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text("")
    assert not given_log_config({}, {"SPARK_CONF_DIR": str(conf)})
    (conf / "log4j2.properties").write_text("rootLogger.level = info\n")
    assert given_log_config({}, {"SPARK_CONF_DIR": str(conf)})
    assert given_log_config({}, {"SPARK_HOME": str(tmp_path)})  # $SPARK_HOME/conf
    assert given_log_config({"spark.executor.extraClassPath": f"/nowhere.jar{os.pathsep}{conf}"}, {})
    assert given_log_config({}, {"LOG4J_CONFIGURATION_FILE": "/etc/mine.xml"})
    for key in (DRIVER_JAVA_OPTIONS, EXECUTOR_JAVA_OPTIONS):  # given for one side: kept for both
        assert given_log_config({key: "-Xss4m -Dlog4j2.configurationFile=/etc/mine.xml"}, {})
    for env in ("JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS"):
        assert given_log_config({}, {env: "-Dlog4j.configurationFile=/etc/mine.xml"})
    assert given_log_config({}, {"PYSPARK_SUBMIT_ARGS": "--driver-java-options '-Dlog4j2.configurationFile=x' "
                                                        "pyspark-shell"})
    assert not given_log_config({}, {"PYSPARK_SUBMIT_ARGS": "--master local[2] pyspark-shell"})
    for master in ("local[2]", "local-cluster[2,1,1024]", "spark://elsewhere:7077"):
        settings = session_settings(master, {}, log_config_given=True)
        assert all(LOG_OPTION not in v and "log4j" not in v for v in settings.values()), (master, settings)


def test_cep_s_local_file_system_class_only_for_jvms_it_starts_and_unless_given():
    """cep's local file system class (no ``chmod`` process per created file) is set, class and class paths
    together, on this machine's masters when make_session starts the JVMs with the class compiled; never on a
    cluster master, or when the deployment gives any of the three settings."""
    from cep.connectors.localfs import CLASS_NAME
    from cep.connectors.spark_session import (
        DRIVER_CLASS_PATH,
        EXECUTOR_CLASS_PATH,
        FILE_IMPL,
        local_fs_settings,
        session_settings,
    )

    mine = {FILE_IMPL: CLASS_NAME, DRIVER_CLASS_PATH: "/c", EXECUTOR_CLASS_PATH: "/c"}
    assert local_fs_settings("/c") == mine
    for master in ("local[2]", "local", "local-cluster[2,1,1024]"):
        assert session_settings(master, {}, local_fs_classes="/c").items() >= mine.items(), master
        assert not mine.keys() & session_settings(master, {}).keys()  # not compiled: Hadoop's class
        for key in mine:  # one of them given: none of cep's (a class path without the class, or the reverse)
            assert not mine.keys() & session_settings(master, {key: "given"}, local_fs_classes="/c").keys()
        # (another default file system: ``file:`` paths still go through the class)
        assert session_settings(master, {"spark.hadoop.fs.defaultFS": "hdfs://nn:8020"},
                                local_fs_classes="/c").items() >= mine.items()
    assert not mine.keys() & session_settings("spark://elsewhere:7077", {}, local_fs_classes="/c").keys()


def test_cep_s_local_file_system_class_compiles_once_into_the_private_cache(tmp_path, monkeypatch):
    """``localfs.classes_dir`` compiles the shipped source with Spark's Janino (no JDK needed) into cep's private
    cache, and reuses what is there; no private cache: no class."""
    from cep.connectors import localfs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = localfs.classes_dir()
    assert out is not None and out.startswith(str(tmp_path / "cache" / "cep" / "hadoop-fs"))
    for name, text in localfs.RESOURCES.items():  # (the empty YARN defaults beside the classes)
        assert Path(out, name).read_bytes() == text
    stamps = [os.stat(Path(out, f)).st_mtime_ns for f in localfs.DIR_FILES]
    assert localfs.classes_dir() == out
    assert [os.stat(Path(out, f)).st_mtime_ns for f in localfs.DIR_FILES] == stamps
    # make_session asks for it only when it is about to start a local master's JVMs
    from cep.connectors.spark_session import local_fs_classes
    from pyspark import SparkContext

    starts = SparkContext._jvm is None and not os.environ.get("PYSPARK_GATEWAY_PORT")
    assert local_fs_classes("local[2]") == (out if starts else None)
    assert local_fs_classes("spark://elsewhere:7077") is None
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-class-path /mine.jar pyspark-shell")
    assert local_fs_classes("local[2]") is None  # (spark-submit's would replace cep's driver class path)
    (tmp_path / "cache" / "cep").chmod(0o777)  # others could write there: not a private cache, no class
    assert localfs.classes_dir() is None
    assert localfs.classes_dir(jars_dir=tmp_path) is None  # no Spark jars there


def test_partition_analysis_routes_by_key():
    from cep.lang.compiler import compile_text
    from cep.plan.partition import partition_attrs

    cp, = compile_text("PATTERN p SEQ(A a, B b) WHERE a.x = b.y WITHIN 10")
    assert partition_attrs(cp) == {"A": ("x",), "B": ("y",)}
    cp, = compile_text("PATTERN p SEQ(A a, B b) WITHIN 10")
    assert partition_attrs(cp) is None  # no key: one group
    cp, = compile_text("PATTERN p SEQ(A a, A b) WHERE a.x = b.y WITHIN 10")
    assert partition_attrs(cp) is None  # the key attribute depends on the alias: one group


def test_group_keys_follow_value_equality():
    from cep.connectors.spark_spec import _canon_key, kafka_key

    assert _canon_key([1]) == _canon_key([1.0]) != _canon_key(["1"])
    assert _canon_key([True]) != _canon_key([1])
    assert kafka_key(["4111-1"]) == "4111-1" and kafka_key([7.0]) == "7" and kafka_key(["a", 2]) == '["a",2]'


def test_route_step_packs_one_row_per_group_and_the_state_step_unpacks_it():
    import pandas as pd
    from cep.connectors import spark_pack as PK
    from cep.connectors import spark_route as RT
    from cep.connectors import spark_spec as SP
    from cep.connectors import spark_state as ST

    spec = SP.pattern_spec("PATTERN p SEQ(A a, B b) WHERE a.k = b.k WITHIN 10\n"
                          "PATTERN q SEQ(A a, C c) WITHIN 10\n", key_groups=4, on_error="skip")
    recs = [{"type": "A", "ts": 5, "k": 1}, {"type": "B", "ts": 3, "k": 1}, {"type": "A", "ts": 4, "k": 2},
            {"type": "Z", "ts": 9}, {"type": "C", "ts": 7}]
    values = [json.dumps(r) for r in recs] + ['{"type": "A",\n "ts": 6, "k": 1}', "{bad", ""]
    pos = [f"f:{i + 1}" for i in range(len(values))]
    route = RT._route_batches(spec)
    frames = list(route(iter([pd.DataFrame({"pos": pos[:4], "value": values[:4]}),
                              pd.DataFrame({"pos": pos[4:], "value": values[4:]})])))
    assert len(frames) == 1  # held until the task's input ends
    df = frames[0]
    kg = {k: zlib.crc32(SP._canon_key([k]).encode()) % 4 for k in (1, 2)}
    got = {(g, k): list(PK._unpack([rows])) for (g, k), rows in df.groupby(["g", "kg"])}
    # the record with a newline in its text goes alone in rows of one record each; the others of its group are packed
    assert got == {(0, kg[1]): [("f:1", values[0]), ("f:2", values[1]), ("f:6", values[5])],
                   (0, kg[2]): [("f:3", values[2])],
                   (1, 0): [("f:1", values[0]), ("f:3", values[2]), ("f:5", values[4]), ("f:6", values[5])],
                   (SP.BAD_ROW_GROUP, 0): [("f:7", got[(SP.BAD_ROW_GROUP, 0)][0][1])]}
    assert json.loads(got[(SP.BAD_ROW_GROUP, 0)][0][1])["pos"] == "f:7"
    packed = df[(df.g == 1)]
    assert len(packed) == 4 and {v[0] for v in packed.value} == {"s"}  # f:6 forces the group's rows apart
    assert {v[0] for v in df[(df.g == 0) & (df.kg == kg[1])].value} == {"s"}
    # the row's time is the largest of its records (Spark's watermark as over one row per record), as Spark's
    # event-time column (offset and clamped: ``spark_time_us``)
    assert df[(df.g == 0) & (df.kg == kg[2])].evt.tolist() == [4_000_000 + SP.SPARK_TIME_OFFSET_US]
    assert set(df[df.g == 1].evt) == {SP.spark_time_us(7_000_000)}
    plain = list(route(iter([pd.DataFrame({"pos": pos[:3], "value": values[:3]})])))[0]
    row = plain[(plain.g == 0) & (plain.kg == kg[1])]
    # packed: the count and the positions' common prefix, each position's rest, the texts; led by PLAIN_MARK when
    # the records' bytes passed ``plain_lines`` (the state step does not test them again), not when they did not
    assert row.value.tolist() == [f"p2 f:\n1\n2\n{values[0]}\n{values[1]}"] and row.evt.tolist() == [SP.spark_time_us(5_000_000)]
    assert PK._unpacked(row.value.tolist()[0]) == (["f:1", "f:2"], values[:2])
    assert PK._lines_of(row.value.tolist()) == (["f:1", "f:2"], [v.encode() for v in values[:2]], True)
    # a "[" in a string is plain (a nested value, found where the record is parsed, is a bad record); an integer
    # of 19 digits is not (orjson reads it as a float: the state step takes ``decode.lines``' path)
    bracket = json.dumps({"type": "A", "ts": 2, "k": 1, "s": "a[b"})
    odd = list(route(iter([pd.DataFrame({"pos": pos[:3], "value": [values[0], bracket, values[2]]})])))[0]
    assert odd[(odd.g == 0) & (odd.kg == kg[1])].value.tolist() == [f"p2 f:\n1\n2\n{values[0]}\n{bracket}"]
    big = json.dumps({"type": "A", "ts": 2, "k": 1, "n": 10**19})
    odd = list(route(iter([pd.DataFrame({"pos": pos[:3], "value": [values[0], big, values[2]]})])))[0]
    row = odd[(odd.g == 0) & (odd.kg == kg[1])]
    assert row.value.tolist() == [f"2 f:\n1\n2\n{values[0]}\n{big}"]
    assert PK._lines_of(row.value.tolist()) == (["f:1", "f:2"], [values[0].encode(), big.encode()], False)
    assert list(RT._route_batches(spec)(iter([pd.DataFrame({"pos": ["x\n1", "x\n2"], "value": values[:2]})])))[0][
        lambda f: f.g == 0].value.map(PK._unpacked).tolist() == [(["x\n1"], [values[0]]), (["x\n2"], [values[1]])]
    assert PK._unpacked(PK._pack(["ab", "a", "abc"], ["1", "2", "3"])[0]) == (["ab", "a", "abc"], ["1", "2", "3"])
    assert PK._pack(["p", "q"], ["1", "2"]) == ["2 \np\nq\n1\n2"]  # no common prefix
    # a whole file (the text source's ``wholetext``) routes as its lines, named <file>:<line>, blanks skipped
    text = "\n".join([values[0], "", values[1], "  \t", values[2], "\r", values[4]]) + "\n"
    whole = list(RT._route_batches(spec, whole_files=True)(iter([pd.DataFrame({"pos": ["/d/f"], "value": [text]})])))
    assert {(g, k): list(PK._unpack([rows])) for (g, k), rows in whole[0].groupby(["g", "kg"])} == {
        (0, kg[1]): [("/d/f:1", values[0]), ("/d/f:3", values[1])], (0, kg[2]): [("/d/f:5", values[2])],
        (1, 0): [("/d/f:1", values[0]), ("/d/f:5", values[2]), ("/d/f:7", values[4])]}
    # two files in one task: a group's records of both in one row, under the common prefix of their paths
    two = list(RT._route_batches(spec, whole_files=True)(iter([pd.DataFrame(
        {"pos": ["/d/f", "/d/g"], "value": [text, "\n".join([values[4], values[0]])]})])))[0]
    assert two[two.g == 1].value.tolist() == [
        "p5 /d/\nf:1\nf:5\nf:7\ng:1\ng:2\n" + "\n".join(values[i] for i in (0, 2, 4, 4, 0))]
    assert list(PK._unpack([two[two.g == 1]])) == [
        ("/d/f:1", values[0]), ("/d/f:5", values[2]), ("/d/f:7", values[4]), ("/d/g:1", values[4]),
        ("/d/g:2", values[0])]
    # a late record is late in each pattern that uses its type; its text rides on its first pattern's row
    from bench.spark_state import FakeGroupState

    handler = ST._handler(spec)
    late = []
    for g in (0, 1):
        st = FakeGroupState()
        st.watermark_ms = ST.spark_watermark_after(spec, 100)
        key = (g, kg[1] if g == 0 else 0)
        late += [r for out in handler(key, [df[(df.g == key[0]) & (df.kg == key[1])]], st)
                 for r in out.itertuples(index=False) if r.op == "late" and r.id == "f:1"]
    assert [(r.pattern, r.value) for r in late] == [("p", values[0]), ("q", None)]


def test_packed_output_rows_hold_the_same_lines_and_counts():
    """``pack_output`` (``cep spark`` to a directory): a group's composite events are one row whose value is
    their lines in order, with their + and - counts; side rows (late records) are as without packing."""
    import dataclasses

    import pandas as pd
    from cep.connectors import spark_pack as PK
    from cep.connectors import spark_route as RT
    from cep.connectors import spark_spec as SP
    from cep.connectors import spark_state as ST

    from bench.spark_state import FakeGroupState

    text = ("PATTERN p SEQ(A a, B b) WHERE a.k = b.k WITHIN 10\n"
            "PATTERN q SEQ(A a, NOT C c, B b) WHERE a.k = b.k WITHIN 10\n")
    recs = [{"type": "A", "ts": 1, "k": 1}, {"type": "A", "ts": 2, "k": 1}, {"type": "B", "ts": 3, "k": 1}]
    recs += [dict(recs[2], op="-"), {"type": "B", "ts": 5, "k": 1}, {"type": "C", "ts": 6, "k": 1}]  # "-": retracts
    values = [json.dumps(r) for r in recs]
    df = next(RT._route_batches(SP.pattern_spec(text, key_groups=1))(
        iter([pd.DataFrame({"pos": [f"f:{i + 1}" for i in range(len(values))], "value": values})])))
    # k = 1's engine bucket for p (one key group of ENGINE_BUCKETS engines); q is not keyed (bucket 0)
    eg = [zlib.crc32(SP._canon_key([1]).encode()) % SP.ENGINE_BUCKETS, 0]
    assert [set(df[df.g == g].eg) for g in (0, 1)] == [{eg[0]}, {0}]
    late = [pd.DataFrame({"g": [g], "kg": [0], "eg": [eg[g]], "evt": [SP.SPARK_TIME_RANGE_US[1]], "value": PK._pack(["f:9"], [values[0]])})
            for g in (0, 1)]

    def run(pack: bool) -> list[list]:
        spec = dataclasses.replace(SP.pattern_spec(text, key_groups=1), pack_output=pack, names=["p", "q"])
        handler, out = ST._handler(spec), []
        for g in (0, 1):
            st = FakeGroupState()
            for batch in ([df[df.g == g]], [late[g]]):
                out += [list(r) for f in handler((g, 0), batch, st) for r in f.itertuples(index=False)]
                st.watermark_ms = ST.spark_watermark_after(spec, 6)
        return out

    plain, packed = run(False), run(True)
    events = [r for r in plain if r[1] in ("+", "-")]
    assert {r[1] for r in events} == {"+", "-"} and {r[0] for r in events} == {"p", "q"}
    # packed rows: pattern, op, value, n_plus, n_minus (``PACKED_OUT_COLS``)
    lines = [r for r in packed if r[1] == SP.LINES_OP]
    assert [ln for r in lines for ln in r[2].split("\n")] == [r[5] for r in events]
    for name in ("p", "q"):
        mine = [r for r in events if r[0] == name]
        assert [r[3:] for r in lines if r[0] == name] == [[sum(r[1] == "+" for r in mine),
                                                         sum(r[1] == "-" for r in mine)]]
    side = [r for r in plain if r[1] not in ("+", "-")]
    assert side and [r for r in packed if r[1] != SP.LINES_OP] == [[r[0], r[1], r[5], 0, 0] for r in side]


def test_output_frames_are_those_of_their_rows():
    """``_frame`` builds the handler's frame from columns: the same values and dtypes as ``pd.DataFrame(rows)``
    (object columns, the packed counts int64), with and without ``pack_output`` (then pattern, op, value and
    the counts only), empty or not."""
    import dataclasses

    import pandas as pd
    from cep.connectors import spark_spec as SP
    from cep.connectors import spark_state as ST

    spec = SP.pattern_spec("PATTERN p SEQ(A a, B b) WITHIN 10")
    side = [(None, "late", "f:1", None, None, None), (None, "error", "f:2", None, None, '{"line":null}')]
    cases = {False: [[], [("p", "+", "id1", "{}", None, "v"), *side], side[:1]],
             True: [[], [("p", SP.LINES_OP, None, None, None, "x\ny", 2, 0)], [*side, ("p", SP.LINES_OP, None, None,
                                                                                   None, "z", 0, 1)]]}
    for pack, rowss in cases.items():
        names = ST.PACKED_OUT_COLS if pack else ST.OUT_COLS
        for rows in rowss:
            got = ST._frame(dataclasses.replace(spec, pack_output=pack), rows)
            want = pd.DataFrame([(r[0], r[1], r[5], *(r[6:] or (0, 0))) if pack else r for r in rows],
                                columns=names)
            assert got.equals(want) and list(got.dtypes) == list(want.dtypes) and list(got.columns) == names


def test_route_row_time_is_the_largest_record_time_in_us():
    """A packed route row's ``evt`` is the largest event time of its records in microseconds as Spark's
    event-time column (``spark_time_us``; the route step keeps the largest time in time units and converts it
    once): with fractional millisecond times, ISO times, several patterns per type and bad records
    (``_NO_TIME_US``: the bottom of Spark's range), over several decode chunks."""
    import random

    import pandas as pd
    from cep.connectors import spark_pack as PK
    from cep.connectors import spark_route as RT
    from cep.connectors import spark_spec as SP

    from cep.io.readers import BadRecord, make_decoder

    text = ("PATTERN p SEQ(A a, B b) WHERE a.k = b.k WITHIN 10\n"
            "PATTERN q SEQ(A a, C c) WITHIN 5\n")
    spec = SP.pattern_spec(text, key_groups=4, on_error="skip", time_unit="ms")
    rnd = random.Random(7)
    values = []
    for i in range(2 * SP.DECODE_CHUNK + 17):
        r = {"type": rnd.choice("ABC"), "ts": 10_000 + i - rnd.randrange(50) + rnd.choice([0.0007, 0.2507]),
             "k": rnd.choice(["x", "y", "z", 1, 2])}
        if rnd.random() < 0.03:
            r["ts"] = "1970-01-01T00:00:05.123456Z"  # off the fast path (earlier than the rest)
        values.append("{bad" if rnd.random() < 0.01 else json.dumps(r))
    pos = [f"f:{i + 1}" for i in range(len(values))]
    df = pd.concat(RT._route_batches(spec)(iter([pd.DataFrame({"pos": pos, "value": values})])))
    decode = make_decoder(time_unit="ms")
    times: dict = {}
    for (g, kg), rows in df.groupby(["g", "kg"]):
        for p, v in PK._unpack([rows]):
            try:
                us = int(round(decode(p, v.encode()).ts * 1000))
            except BadRecord:
                us = SP._NO_TIME_US
            times[(g, kg)] = max(times.get((g, kg), us), us)
    got = {(g, kg): int(t) for g, kg, t in zip(df["g"], df["kg"], df["evt"], strict=True)}
    assert got == {k: SP.spark_time_us(us) for k, us in times.items()} and len(got) > 4
    assert got[(SP.BAD_ROW_GROUP, 0)] == SP.SPARK_TIME_RANGE_US[0]


@pytest.mark.parametrize(("frac", "nested"), [(0, True), (0.0004, True), (0, False), (0.0004, False)])
def test_batched_route_and_state_steps_equal_one_record_at_a_time(frac, nested):
    """The route step decodes with ``decode.lines`` and caches key groups, the state step pushes a group's
    records in one ``push_batch``: over a mixed stream longer than a decode chunk (records off the fast path:
    ISO times, retractions, numeric and boolean keys, bad and blank lines; late records and unknown retractions
    in the middle of a group's batch) the packs, side rows, composite events and the state at the end of the
    step are those of decoding, routing and pushing one record at a time under Spark's watermark.
    With whole-second times the engine moves its own watermark with the records from where it passes Spark's
    (``_own_watermark_from``); with times finer than Spark's milliseconds (``frac``) it holds Spark's.
    The route step reads the records in its own loop (nested records are bad records it finds as it parses
    them); without a nested value among the bytes (``nested`` False: ``plain_lines``) the state step does too,
    rather than through ``decode.lines``' events."""
    import random

    import pandas as pd
    from cep.connectors import spark_pack as PK
    from cep.connectors import spark_route as RT
    from cep.connectors import spark_spec as SP
    from cep.connectors import spark_state as ST

    from cep.errors import LateEventError, UnknownRetractionError
    from cep.io.readers import BadRecord, make_decoder
    from cep.lang.gcq import read_key
    from cep.plan.partition import partition_attrs

    text = ("PATTERN p SEQ(A a, B b) WHERE a.k = b.k WITHIN 10\n"
            "PATTERN q SEQ(A a, C c) WITHIN 5\n")
    spec = SP.pattern_spec(text, key_groups=3, on_error="skip")
    rnd = random.Random(5)
    values, recs = [], []
    for i in range(3 * SP.DECODE_CHUNK):
        r = {"type": rnd.choice("ABCZ"), "ts": 1000 + i // 3 - rnd.randrange(8) + frac,
             "k": rnd.choice(["x", "y", "z", 1, 1.0, 2, True])}
        if rnd.random() < 0.03:
            r["ts"] = f"1970-01-01T00:{int(r['ts']) // 60:02d}:{int(r['ts']) % 60:02d}Z"  # off the fast path
        line = json.dumps(r)
        recs.append(r)
        if rnd.random() < 0.04:
            line = json.dumps(dict(rnd.choice(recs), op="-"))  # a retraction: of a record, or (expired) of none
        elif rnd.random() < 0.01:
            line = rnd.choice(["{bad", "", "  ", '{"type": "A"}', '{"type": "A", "ts": 1, "k": [1]}', '[1]',
                               '{"type": "A", "ts": 1, "op": "x"}', '{"type": "", "ts": 1}', '{"type": "A", "ts": 2, "k": {"a": 1}}'])
            if not nested:
                line = line.replace("[1]", "1").replace('{"a": 1}', '"a"')
        values.append(line)
    assert PK.plain_lines([v.encode() for v in values]) is not nested
    pos = [f"f:{i + 1}" for i in range(len(values))]
    df = pd.concat(RT._route_batches(spec)(iter([pd.DataFrame({"pos": pos, "value": values})])))
    # a (pattern, engine bucket)'s records; its key group (Spark's group) is the bucket % key_groups
    got = {(g, k): list(PK._unpack([rows])) for (g, k), rows in df.groupby(["g", "eg"])}
    assert (df.kg == df.eg % 3).all() and spec.engine_buckets() == 3 * (SP.ENGINE_BUCKETS // 3)

    decode = make_decoder()
    want: dict = {}
    for p, v in zip(pos, values, strict=True):
        try:
            ev = decode(p, v.encode())
        except BadRecord as e:
            if v.strip():
                want.setdefault((SP.BAD_ROW_GROUP, 0), []).append((p, SP.error_report(p, str(e), v.encode())))
            continue
        for g, cp in enumerate(spec.compile()):
            attrs = partition_attrs(cp)
            if ev.type in {a.type for a in cp.atoms}:
                eg = 0 if attrs is None else zlib.crc32(
                    SP._canon_key(read_key(ev, attrs[ev.type])).encode()) % spec.engine_buckets()
                want.setdefault((g, eg), []).append((p, v))
    assert got == want and len(got) > 3

    wm = 1000 + len(values) // 6  # the second half of each group's records is on time
    sides = []
    for (g, kg), rows in df.groupby(["g", "eg"]):
        if g == SP.BAD_ROW_GROUP:
            continue
        eng = spec.new_engine(g, own_watermark=False)
        eng.advance_watermark(wm)
        side, outs = ST._push_values(spec, eng, g, rows.value.tolist())
        ref = spec.new_engine(g, own_watermark=False)
        ref.advance_watermark(wm)
        evs = sorted(((decode(p, v.encode()), v) for p, v in got[(g, kg)]), key=lambda e: (e[0].ts, e[0].op == "-"))
        ref_side, ref_outs = [], []
        for ev, v in evs:
            try:
                ref_outs += ref.push(ev)
            except LateEventError:
                ref_side.append((spec.names[g], "late", ev.pos, None, None, v if g == 0 or ev.type == "C" else None))
            except UnknownRetractionError:
                if g == 0 or ev.type == "C":
                    ref_side.append((None, "error", ev.pos, None, None, SP.error_report(
                        ev.pos, "retraction of an event that was never inserted (or was already retracted or "
                        "expired)", v.encode())))
        on_time = [ev.ts for ev, _v in evs if ev.ts >= wm]
        if not on_time:  # a bucket of late records only (key "a" of three records at time 2): Spark's holds
            assert eng.watermark == wm and side == ref_side and not outs and not ref_outs
            sides += side
            continue
        top = max(on_time)
        # the engine's own watermark moved with the records (whole seconds), or Spark's held (finer times)
        assert eng.watermark == (top if not frac else wm)
        assert side == ref_side
        assert [(o.pattern, o.op, o.id) for o in outs] == [(o.pattern, o.op, o.id) for o in ref_outs]
        # the state step's move to the watermark Spark will compute from the group's records
        ahead = ST.engine_watermark(spec, ST.spark_watermark_after(spec, eng.max_ts))
        assert ahead == int(top)  # Spark's milliseconds: the fraction below them is lost
        eng.advance_watermark(ahead)
        ref.advance_watermark(ahead)
        # the same state, but for the peak of retained events: lower when the watermark moves with the records
        mine, theirs = (json.loads(e.dumps().split(b"\n", 1)[1]) for e in (eng, ref))
        peaks = mine["stats"].pop("peak_retained"), theirs["stats"].pop("peak_retained")
        assert mine == theirs and (peaks[0] < peaks[1] if not frac else peaks[0] == peaks[1])
        sides += side
    assert {r[1] for r in sides} == {"late", "error"}


@pytest.mark.parametrize("shuffled", [False, True])
def test_the_state_step_reads_records_as_decode_does_and_sorts_only_what_is_out_of_order(shuffled):
    """``_decode_group``: a group's lines give the events ``decode`` gives (type, time, fields, position, op:
    records off the fast path too), whether their times never go down, and whether none is a retraction; the
    state step sorts only records out of time order, and pushes inserts-only batches as such: its composite
    events are those of pushing the records one at a time in time order."""
    import random

    from cep.connectors import spark_pack as PK
    from cep.connectors import spark_spec as SP
    from cep.connectors import spark_state as ST

    from cep.io.readers import make_decoder

    spec = SP.pattern_spec("PATTERN p SEQ(A a, B b) WHERE a.k = b.k WITHIN 10\n", key_groups=1)
    decode = make_decoder()
    rnd = random.Random(3)
    recs = [{"type": rnd.choice("AB"), "ts": 100 + i // 2, "k": rnd.choice(["x", "y", 1, 1.0])} for i in range(400)]
    recs[7]["ts"] = "1970-01-01T00:01:43Z"  # off the fast path: decode reads the ISO time (103)
    recs[9]["op"] = "+"
    if shuffled:
        rnd.shuffle(recs)
    lines = [json.dumps(r).encode() for r in recs]
    poss = [f"/d/f:{i + 1}" for i in range(len(lines))]
    assert PK.plain_lines(lines)
    evs, ordered, inserts = ST._decode_group(spec, decode, lines, poss)
    want = [decode(p, raw) for p, raw in zip(poss, lines, strict=True)]
    assert [(e.type, e.ts, e.fields, e.pos, e.op) for e in evs] == [(e.type, e.ts, e.fields, e.pos, e.op) for e in want]
    assert (ordered, inserts) == (not shuffled, True)
    minus = [*lines[:5], json.dumps(dict(recs[3], op="-")).encode()]
    assert ST._decode_group(spec, decode, minus, poss[:6])[2] is False
    # a "[" in the bytes: decode.lines' events (order not looked at)
    odd = [*lines[:3], b'{"type": "A", "ts": 1, "k": "[x"}']
    assert not PK.plain_lines(odd)
    evs, *flags = ST._decode_group(spec, decode, odd, poss[:4])
    assert [e.fields for e in evs] == [decode(p, raw).fields for p, raw in zip(poss, odd, strict=False)] and flags == [False, True]

    eng = spec.new_engine(0, own_watermark=False)
    side, outs = ST._push_values(spec, eng, 0, PK._pack(poss, [x.decode() for x in lines]))
    ref = spec.new_engine(0, own_watermark=False)
    ref_outs = []
    for ev in sorted(want, key=lambda e: e.ts):
        ref_outs += ref.push(ev)
    assert side == [] and len(ref_outs) > 20
    assert [(o.op, o.id) for o in outs] == [(o.op, o.id) for o in ref_outs]


def test_plain_lines_finds_what_decode_lines_test_finds():
    """``plain_lines`` (a numpy view of the bytes) flags a nested value, a ``:`` then ``{`` with blanks between and
    a run of 19 digits as ``decode.lines``' test of a batch (``cep.io.readers._flat``) does; digits that only a
    blank separates are no run (no JSON number holds a blank), where ``_flat`` deletes the blank first."""
    from cep.connectors import spark_pack as PK

    from cep.io.readers import _flat

    cases = [b'{"a": 1}', b'{"a": {"b": 1}}', b'{"a":{"b":1}}', b'{"a": \t{"b": 1}}', b' {"a": 1}', b'{"a": "x{y"}',
             b'{"a": ": {"}', b'{"a": 1234567890123456789}', b'{"a": 123456789012345678}', b'{"a": [1]}', b"",
             b'{"a": 1}\r', b'x :{', b'{"a": "12 {"}']
    for case in cases:
        for lines in ([case], [b'{"z": 0}', case, b'{"q": 2}']):
            assert PK.plain_lines(lines) is _flat(b"\n".join(lines)), lines
    spaced = b'{"a": "123456789 0123456789"}'
    assert PK.plain_lines([spaced]) and not _flat(spaced)


ODD_LINES = {  # one line put among a whole file's plain records: each takes the route's loop, not its passes
    "clean": None, "nested dict": '{"type": "A", "ts": 9, "k": "c1", "n": {"a": 1}}',
    "nested list": '{"type": "B", "ts": 9, "k": "c1", "n": [1]}', "retraction": '{"type": "A", "ts": 9, "k": "c2", "op": "-"}',
    "bad op": '{"type": "A", "ts": 9, "k": "c2", "op": "x"}', "op +": '{"type": "A", "ts": 9, "k": "c2", "op": "+"}',
    "bool time": '{"type": "A", "ts": true, "k": "c1"}', "ISO time": '{"type": "A", "ts": "1970-01-01T00:00:09Z", "k": "c1"}',
    "int key": '{"type": "A", "ts": 9, "k": 1}', "missing key": '{"type": "B", "ts": 9}',
    "other type": '{"type": "Z", "ts": 9}', "empty type": '{"type": "", "ts": 9, "k": "c1"}',
    "null type": '{"type": null, "ts": 9, "k": "c1"}',
    "missing and empty keys": '{"type": "B", "ts": 9}\n{"type": "A", "ts": 9, "k": ""}\n{"type": "B", "ts": 10, "k": ""}',
    "long integer": '{"type": "A", "ts": 9, "k": "c1", "n": 12345678901234567890}', "blank": "  ", "not JSON": "{bad",
    "float time": '{"type": "B", "ts": 9.5, "k": "c3"}', "not an object": '"A"',
    "equal keys of other types": '{"type": "A", "ts": 9, "k": 1}\n{"type": "B", "ts": 9, "k": 1.0}\n{"type": "B", "ts": 9, "k": true}',
}


@pytest.mark.parametrize("odd", list(ODD_LINES))
def test_a_whole_file_s_route_rows_are_those_of_routing_one_record_at_a_time(odd):
    """A whole file's route rows with one odd line among plain records (a nested value, an op, a bad time,
    key or type, a long integer, a blank or bad line): each (pattern, engine bucket)'s row holds the records
    ``decode`` keeps, routed by their key as one record at a time, in file order, its time the largest of
    them, bad records in the bad records' row; the rows are marked plain unless the file has an integer of 19
    digits (nested values are found per record), and the state step reads marked rows as ``decode`` does; a
    path holding the separator makes one row per record."""
    import random

    import pandas as pd
    from cep.connectors import spark_pack as PK
    from cep.connectors import spark_route as RT
    from cep.connectors import spark_spec as SP
    from cep.connectors import spark_state as ST

    from cep.io.readers import BadRecord, make_decoder
    from cep.lang.gcq import read_key

    spec = SP.pattern_spec("PATTERN p SEQ(A a, B b) WHERE a.k = b.k WITHIN 10\n", key_groups=4, on_error="skip")
    rnd = random.Random(11)
    records = [json.dumps({"type": rnd.choice("AB"), "ts": 10 + i // 3 - rnd.randrange(4), "k": f"c{rnd.randrange(40)}",
                         "n": rnd.random()}) for i in range(2500)]
    for at, path in ((1234, "/d/f"), (0, "/d/f"), (1234, "/d/a\nb")):  # the odd line(s) first: the loop's first record
        lines = list(records)
        if ODD_LINES[odd] is not None:
            lines[at:at] = ODD_LINES[odd].split("\n")
        text = "\n".join(lines) + "\n"
        df = pd.concat(RT._route_batches(spec, whole_files=True)(iter([pd.DataFrame({"pos": [path], "value": [text]})])))
        got = {(g, eg): list(PK._unpack([rows])) for (g, eg), rows in df.groupby(["g", "eg"], sort=False)}
        decode = make_decoder()
        want: dict = {}
        tops: dict = {}
        for i, line in enumerate(lines, 1):
            pos = f"{path}:{i}"
            try:
                ev = decode(pos, line.encode())
            except BadRecord as e:
                if line.strip():
                    want.setdefault((SP.BAD_ROW_GROUP, 0), []).append((pos, SP.error_report(pos, str(e), line.encode())))
                    tops[(SP.BAD_ROW_GROUP, 0)] = SP._NO_TIME_US
                continue
            if ev.type in "AB":
                key = (0, zlib.crc32(SP._canon_key(read_key(ev, ("k",))).encode()) % spec.engine_buckets())
                want.setdefault(key, []).append((pos, line))
                tops[key] = max(tops.get(key, -10**18), int(round(ev.ts * 1_000_000)))
        assert got == want and len(got) > 8
        assert {(g, eg): int(t) for g, eg, t in zip(df.g, df.eg, df.evt, strict=True)} == {
            k: SP.spark_time_us(t) for k, t in tops.items()}
        values = df[df.g == 0].value.tolist()
        if "\n" in path:
            assert {v[0] for v in values} == {"s"}
            continue
        # packed rows are plain but for a file with an integer of 19 digits (a fraction's digits are no integer's;
        # a nested record is a bad record: the loop finds it where it parses it)
        packed = [v for v in values if v[0] != "s"]  # (a row of one record: the missing key's)
        assert all(v[0] == SP.PLAIN_MARK for v in packed) is (odd != "long integer")
        assert all(v[0] != SP.PLAIN_MARK for v in packed) is (odd == "long integer")
        for v in values[:3]:
            poss, raws, plain = PK._lines_of([v])
            evs, _ordered, _inserts = ST._decode_group(spec, decode, raws, poss, plain or None)
            assert [(e.type, e.ts, e.fields, e.pos) for e in evs] == [
                (e.type, e.ts, e.fields, e.pos) for e in (decode(p, r) for p, r in zip(poss, raws, strict=True))]


def test_line_numbers_are_written_as_percent_d_writes_them():
    """``_line_numbers``: each number then the separator, as ``%d`` writes it, from the worker's texts (made as
    needed) or, past ``LINE_TEXTS_MAX``, formatted."""
    from cep.connectors import spark_pack as PK
    from cep.connectors import spark_spec as SP

    top = PK.LINE_TEXTS_MAX
    for case in ([0, 1, 9, 10, 11, 99, 100, 999, 1000, 65535, 99999], [7], list(range(0, top, 997)),
                 [5, top - 1], [3, top, top + 10**6]):
        assert PK._line_numbers(case) == "".join(f"{x}{SP.PACK_SEP}" for x in case)
    assert len(PK._LINE_TEXTS) == top


def test_the_engine_moves_its_own_watermark_only_where_it_is_spark_s():
    """``_own_watermark_from``: the index of a group's time-ordered records from which the engine may move its
    watermark with them: where time - lateness reaches the engine's watermark (never back), and only when the
    largest time - lateness is exactly the watermark Spark will compute (its milliseconds, its range)."""
    from types import SimpleNamespace as NS

    from cep.connectors import spark_spec as SP
    from cep.connectors import spark_state as ST

    def at(times, wm=100, mx=None, lateness=5, unit="s", spec_lateness=None):
        spec = SP.pattern_spec("PATTERN p SEQ(A a, B b) WITHIN 10", time_unit=unit,
                              lateness=lateness if spec_lateness is None else spec_lateness)
        return ST._own_watermark_from(NS(lateness=lateness, max_ts=mx, watermark=wm), [NS(ts=t) for t in times],
                                     spec)

    times = [90, 100, 104, 105, 110]
    assert at(times) == 3  # 105 - 5 reaches the watermark 100: the records before it hold it
    assert at(times, mx=120) == 0 and at(times, wm=None) == 0  # already there; no watermark yet
    assert at(times, mx=103) == 3  # the group's earlier records were below it
    assert at([], wm=100) is None
    assert at([*times[:-1], 110.0004]) is None  # finer than Spark's milliseconds
    assert at([*times[:-1], 110.5]) == 3  # whole milliseconds
    assert at([90_000, 105_000], wm=100_000, lateness=5_000, unit="ms") == 1
    assert at([90_000, 105_001], wm=100_000, lateness=5_000, unit="us") is None
    assert at([90_000, 105_000], wm=100_000, lateness=5_000, unit="us") == 1
    assert at([90, 10**10], wm=100) is None  # beyond the range of Spark's time column
    assert at(times, lateness=5.0, spec_lateness=5) is None  # a float watermark where Spark's is an integer
    # event times at or below zero (Spark's time column takes them): the same rule
    assert at([-30, -20, -16, -15, -10], wm=-20) == 3 and at([-30, -20, -16, -15, 0], wm=-20) == 3
    assert at([-3, -1], wm=None) == 0


def test_progress_reads_the_recent_reports_only_when_a_new_one_came():
    """``cep spark``'s progress poll: every micro-batch's report is collected, and the retained list (up to
    100 reports, converted on each read) is read only when the newest report changed."""
    from types import SimpleNamespace

    from cep.connectors.spark_cli import Progress

    class Query:
        def __init__(self) -> None:
            self.reports: list = []
            self.reads = 0

        @property
        def lastProgress(self):  # noqa: N802 - PySpark's name
            return self.reports[-1] if self.reports else None

        @property
        def recentProgress(self):  # noqa: N802
            self.reads += 1
            return self.reports[-2:]  # what Spark retains (numRecentProgressUpdates = 2 here)

    def report(batch: int, rows: int) -> SimpleNamespace:
        return SimpleNamespace(json=json.dumps({"batchId": batch, "numInputRows": rows, "timestamp": str(batch)}))

    q, prog = Query(), Progress()
    prog.collect(q)
    assert q.reads == 0 and prog.batches == {}
    for b in range(5):
        q.reports.append(report(b, 10 + b))
        prog.collect(q)
        prog.collect(q)  # nothing new: the list is not read
        assert q.reads == b + 1
    q.reports += [report(5, 0), report(6, 16)]  # two reports between polls, one of them idle
    prog.collect(q)
    assert sorted(prog.batches) == [0, 1, 2, 3, 4, 6] and prog.input_rows() == 10 + 11 + 12 + 13 + 14 + 16
    prog.collect(q, full=True)
    assert q.reads == 7


# ------------------------------------------------------------------------------------------ with Spark


def test_the_session_jvms_get_cep_jit_default_unless_given(spark):
    """make_session's JVM defaults (C1 only, the parallel collector) reach the driver JVM it starts and the
    executors' settings."""
    from cep.connectors.spark_session import GC_OPTIONS, JIT_OPTIONS, JVM_OPTIONS

    jvm = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    args = list(jvm.getRuntimeMXBean().getInputArguments())
    assert JVM_OPTIONS.split() == [JIT_OPTIONS, GC_OPTIONS]
    assert JIT_OPTIONS in args and GC_OPTIONS in args, args
    assert {b.getName() for b in jvm.getGarbageCollectorMXBeans()} == {"PS Scavenge", "PS MarkSweep"}
    executor = spark.sparkContext.getConf().get("spark.executor.extraJavaOptions").split()
    assert JIT_OPTIONS in executor and GC_OPTIONS in executor, executor


def test_the_session_jvms_log_through_cep_s_log_config(spark):
    """make_session's log4j2 configuration is the one the driver JVM's log4j2 loaded, and the
    executors' JVM options carry it (the test session: a local master, no log4j2 configuration given)."""
    from cep.connectors.spark_session import LOG_CONFIG, LOG_OPTION

    jvm = spark.sparkContext._jvm
    assert LOG_OPTION in list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    config = jvm.org.apache.logging.log4j.LogManager.getContext(False).getConfiguration()
    assert config.getConfigurationSource().getLocation() == str(LOG_CONFIG)
    # (its root level is ERROR by now: make_session's setLogLevel, for the driver only)
    assert LOG_OPTION in spark.sparkContext.getConf().get("spark.executor.extraJavaOptions")


def test_the_session_s_python_workers_run_cep_s_daemon(spark):
    """make_session's local session (the workers run this interpreter): the Python workers are forked by cep's
    daemon, whose after-task collection is cep's."""

    def probe(batches):
        import sys

        import pandas as pd
        from pyspark import daemon

        for _ in batches:
            pass
        yield pd.DataFrame({"main": [sys.modules["__main__"].__spec__.name], "gc": [type(daemon.gc).__name__]})

    rows = spark.range(0, 2, 1, 2).mapInPandas(probe, "main string, gc string").collect()
    assert {(r.main, r.gc) for r in rows} == {("cep.connectors.sparkdaemon", "AfterTaskGc")}


def test_the_session_s_local_file_system_sets_permissions_without_a_process(spark, tmp_path):
    """The test session's ``file:`` file system is cep's class (make_session started its JVM on a local master),
    and it does what Hadoop's does: a created file gets ``0666 & ~umask`` and a checksum file, a directory
    ``0777 & ~umask``, ``setPermission`` sets the bits given; and the JVM forks no process for any of it."""
    from cep.connectors.localfs import CLASS_NAME

    jvm = spark.sparkContext._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    fs = jvm.org.apache.hadoop.fs.FileSystem.getLocal(conf)
    assert fs.getClass().getName() == CLASS_NAME
    assert fs.getRawFileSystem().getClass().getName() == CLASS_NAME + "$RawLocalFileSystem"
    umask = os.umask(0)
    os.umask(umask)
    jvm_pid = int(str(jvm.java.lang.ProcessHandle.current().pid()))

    def reaped_children_ticks() -> int:  # the JVM's reaped children's CPU ticks, and its process reaper's
        f = Path(f"/proc/{jvm_pid}/stat").read_text()
        return sum(map(int, f[f.rindex(")") + 2:].split()[13:15]))

    before = reaped_children_ticks()
    path = jvm.org.apache.hadoop.fs.Path
    for i in range(40):
        out = fs.create(path(str(tmp_path / f"f{i}")))
        out.write(b"x")
        out.close()
        assert fs.mkdirs(path(str(tmp_path / f"d{i}")))
    assert reaped_children_ticks() == before  # (80 `chmod` processes with Hadoop's class: ~0.2 CPU s)
    assert (tmp_path / "f0").stat().st_mode & 0o7777 == 0o666 & ~umask
    assert (tmp_path / ".f0.crc").is_file()
    assert (tmp_path / "d0").stat().st_mode & 0o7777 == 0o777 & ~umask
    perm = jvm.org.apache.hadoop.fs.permission.FsPermission
    for mode in (0o600, 0o751, 0o644, 0o1777):
        fs.setPermission(path(str(tmp_path / "d1")), perm(f"{mode:o}"))
        assert (tmp_path / "d1").stat().st_mode & 0o7777 == mode, oct(mode)


def test_the_session_s_hadoop_configurations_hold_no_yarn_defaults(spark):
    """The test session's JVM (make_session started it on a local master) finds cep's empty ``yarn-default.xml``
    (``localfs.RESOURCES``) before Hadoop's: once ``JobConf`` has added MapReduce's and YARN's defaults to every
    ``Configuration`` (Spark's file sink loads it), a new one holds Hadoop's core and MapReduce defaults, and no
    YARN default (Hadoop's file sets ``yarn.resourcemanager.hostname`` to 0.0.0.0)."""
    jvm = spark.sparkContext._jvm
    jvm.org.apache.hadoop.mapred.JobConf()  # (its class initializer adds mapred-default.xml and yarn-default.xml)
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    assert list(conf.getPropertySources("fs.defaultFS")) == ["core-default.xml"]
    assert list(conf.getPropertySources("mapreduce.job.maps")) == ["mapred-default.xml"]
    assert conf.get("yarn.resourcemanager.hostname") is None
    assert conf.size() < 800  # (1,136 with YARN's 527)


def test_the_session_commits_rocksdb_state_as_changelogs(spark):
    """make_session's state store: RocksDB, committing each micro-batch as a changelog (the killed-query and
    resume tests below restore state from such checkpoints)."""
    from cep.connectors.spark_session import ROCKSDB_DEFAULTS

    for k, v in ROCKSDB_DEFAULTS.items():
        assert spark.conf.get(k) == v, k


def test_local_checkpoints_go_through_the_file_system_api_and_resume_either_way(spark, data, tmp_path):
    """On a local master make_session has Spark write checkpoint files through Hadoop's FileSystem API (no
    ``readlink`` process per rename); a query's own setting still wins, and a checkpoint written through
    FileContext (Spark's default) resumes through the FileSystem API with nothing lost."""
    from cep.connectors.spark_cli import start_query
    from cep.connectors.spark_session import CHECKPOINT_FILE_MANAGER, FS_CHECKPOINT_FILE_MANAGER

    def manager(path: Path) -> str:  # the manager Spark picks for a checkpoint path under the session's settings
        jvm = spark.sparkContext._jvm
        conf = spark._jsparkSession.sessionState().newHadoopConf()
        fm = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager.create(
            jvm.org.apache.hadoop.fs.Path(str(path)), conf)
        return fm.getClass().getName()

    assert spark.conf.get(CHECKPOINT_FILE_MANAGER) == FS_CHECKPOINT_FILE_MANAGER
    assert manager(tmp_path / "x") == FS_CHECKPOINT_FILE_MANAGER
    events, ref = data
    half = len(events) // 2
    inp, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    inp.mkdir()
    write_jsonl(inp / "a.jsonl", events[:half])
    file_context = FS_CHECKPOINT_FILE_MANAGER.replace("FileSystemBased", "FileContextBased")
    spark.conf.set(CHECKPOINT_FILE_MANAGER, file_context)
    try:
        assert manager(ck) == file_context
        q = start_query(spark, cli_args("-i", str(inp), "-o", str(out), "--checkpoint", str(ck), "--available-now"))
        q.awaitTermination()
        assert q.exception() is None
    finally:
        spark.conf.set(CHECKPOINT_FILE_MANAGER, FS_CHECKPOINT_FILE_MANAGER)
    first = read_dir_output(out)
    write_jsonl(inp / "b.jsonl", events[half:])
    _resumed_is_one_run(spark, inp, out, ck, first, ref)


def test_files_to_files_matches_cep_run(spark, data, tmp_path):
    from cep.connectors.spark_cli import query_spec, start_query

    events, ref = data
    split_files(events, tmp_path / "in", 3)
    args = cli_args("-i", str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"),
                    "--available-now")
    q = start_query(spark, args)
    q.awaitTermination()
    assert q.exception() is None
    got = read_dir_output(tmp_path / "out")
    assert content(got) == content(ref)
    assert len({o["id"] for o in got}) == len(got)
    # the directory output is packed (a group's lines per row): the metrics still count composite events
    names = query_spec(args).names
    assert {(n, op): metrics_total(q, f"{op}:{n}") for n in names for op in "+-"} == {
        (n, op): sum(o["pattern"] == n and o["op"] == op for o in got) for n in names for op in "+-"}


def test_one_pattern_s_packed_metrics_are_the_sums_of_its_rows_counts(spark, data, tmp_path):
    """With one pattern the observed ``+:``/``-:`` metrics of packed output sum the count columns of every row
    (``metric_columns``' plain sums): still the composite events written, per op. The packed rows have only the
    columns ``cep spark`` reads, so Spark adds no projection above the state step to drop the others."""
    from cep.connectors.spark_cli import build_parser, start_query

    events, _ref = data
    split_files(events, tmp_path / "in", 2)
    args = build_parser().parse_args([PATTERNS[0], "--lateness", "1 d", "-i", str(tmp_path / "in"), "-o",
                                      str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"), "--available-now"])
    q = start_query(spark, args)
    q.awaitTermination()
    assert q.exception() is None
    got = read_dir_output(tmp_path / "out")
    name = Path(PATTERNS[0]).stem
    assert {o["pattern"] for o in got} == {name} and metrics_total(q, f"+:{name}") > 0
    assert [metrics_total(q, f"{op}:{name}") for op in "+-"] == [sum(o["op"] == op for o in got) for op in "+-"]
    plan = q._jsq.streamingQuery().lastExecution().executedPlan()
    parents, todo = [], [plan]
    while todo:
        node = todo.pop()
        kids = [node.children().apply(i) for i in range(node.children().size())]
        parents += [node.nodeName() for k in kids if k.nodeName() == "FlatMapGroupsInPandasWithState"]
        todo += kids
    assert parents == ["CollectMetrics"]


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


def _resumed_is_one_run(spark, inp: Path, out: Path, ck: Path, first: list, ref) -> None:
    """The query run again on checkpoint ``ck`` over what is in ``inp`` now: it adds to ``first`` (the output
    before the stop), and the whole output is that of one uninterrupted run (``ref``)."""
    from cep.connectors.spark_cli import start_query

    q = start_query(spark, cli_args("-i", str(inp), "-o", str(out), "--checkpoint", str(ck), "--available-now"))
    q.awaitTermination()
    assert q.exception() is None
    got = read_dir_output(out)
    assert 0 < len(first) < len(got)
    assert content(got) == content(ref)


def test_a_new_checkpoint_places_one_key_group_on_each_state_partition(spark, data, tmp_path):
    """A new checkpoint of 4 state partitions gets 4 key groups per pattern, each in its own partition (Spark's
    state store says where each key group's state is: ``partition_id``), and the output is ``cep run``'s.
    Numbered 0-3 as before placement, pattern 1's key groups would hash to partitions 0, 3, 1, 1."""
    from cep.connectors import spark_checkpoint as C
    from cep.connectors import spark_spec as SP
    from cep.connectors.spark_cli import query_spec, start_query

    events, ref = data
    inp, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    split_files(events, inp, 3)
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    try:
        q = start_query(spark, cli_args("-i", str(inp), "-o", str(out), "--checkpoint", str(ck), "--available-now"))
        q.awaitTermination()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    assert q.exception() is None
    assert content(read_dir_output(out)) == content(ref)
    spec = C.check_checkpoint(str(ck), query_spec(cli_args("-i", "-", "-o", "-", "--checkpoint", "-")))
    assert (spec.key_groups, spec.placed_on) == (4, 4)
    states = spark.read.format("statestore").load(str(ck)).selectExpr("key.g AS g", "key.kg AS kg", "partition_id")
    placed = {(r.g, spec.kg_index(r.g, r.kg)): r.partition_id for r in states.collect()}
    assert {g for g, _ in placed} == {0, 1}
    assert all(part == (g * 4 + i) % 4 for (g, i), part in placed.items()), placed
    assert [SP.spark_partition_of(1, label, 4) for label in range(4)] == [0, 3, 1, 1]


@pytest.mark.parametrize("layout", [{"key_groups": 64}, {"key_groups": 16, "group_engines": 4}],
                         ids=["64-of-one-engine", "16x4-not-placed"])
def test_a_checkpoint_of_an_earlier_layout_resumes_as_written(spark, data, tmp_path, layout):
    """Checkpoints written by earlier versions resume without --key-groups in their own layout, their key groups
    keyed as they were: 64 key groups of one engine each (no ``group_engines`` in the record), and 16 key groups
    of 4 engines keyed by their index (no ``placed_on``). The state they hold (partial matches across the stop) is
    read, and the output is that of one uninterrupted run. The checkpoint is started as those versions started
    it: their record, written before the first run."""
    from cep.connectors import spark_checkpoint as C
    from cep.connectors import spark_spec as SP
    from cep.connectors.spark_cli import query_spec, start_query

    events, ref = data
    files = split_files(events, tmp_path / "all", 6)
    inp, out, ck = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    inp.mkdir()
    ck.mkdir()
    meta = C.checkpoint_fingerprint(query_spec(cli_args("-i", "-", "-o", "-", "--checkpoint", "-")))
    del meta["placed_on"], meta["group_engines"]
    (ck / C.CHECKPOINT_META).write_text(json.dumps({**meta, **layout}))  # the record as written then
    for f in files[:3]:
        f.rename(inp / f.name)
    q = start_query(spark, cli_args("-i", str(inp), "-o", str(out), "--checkpoint", str(ck), "--available-now"))
    q.awaitTermination()
    assert q.exception() is None
    states = spark.read.format("statestore").load(str(ck)).selectExpr("key.kg AS kg", "value.groupState.nonce AS n")
    kgs = {(r.kg, r.n.split(":")[0]) for r in states.collect()}
    want = SP.pattern_spec(PATTERNS, key_groups=layout["key_groups"], group_engines=layout.get("group_engines", 1))
    assert kgs and {kg for kg, _ in kgs} <= set(range(want.key_groups)) and {n for _, n in kgs} == {want.layout()}
    assert json.loads((ck / C.CHECKPOINT_META).read_text()) == {**meta, **layout}
    first = read_dir_output(out)
    for f in files[3:]:
        f.rename(inp / f.name)
    _resumed_is_one_run(spark, inp, out, ck, first, ref)


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
    assert content(values) == content(ref) == content(cli)
    # the same input positions (<topic>/<partition>/<offset>) as the CLI's Kafka source, so the same ids
    assert Counter(v["id"] for v in values) == Counter(v["id"] for v in cli)
    assert len({v["id"] for v in values}) == len(values)
    for key, v in got:  # the record key is the pattern's partition key
        want = v["match"]["card"] if v["pattern"] == "card_testing" else v["match"]["area"]
        assert key == want.encode()


# ------------------------------------------------------------------------------------------ time, late, ids, errors


def metrics_total(q, name: str) -> int:
    """A counter of the query's observed metrics, summed over its micro-batches."""
    from cep.connectors.spark_cli import Progress

    p = Progress()
    p.collect(q)
    return p.metric(name)


def test_event_times_at_and_below_zero(spark, tmp_path):
    """Spark's watermark starts at 0: times <= 0 must still be processed (the example's smoke is at ts 0)."""
    from cep.connectors.spark_cli import build_parser, start_query

    example = ROOT / "examples" / "smoke_then_heat"
    lines = (example / "input.jsonl").read_text().splitlines()
    shifted = [json.dumps({**json.loads(ln), "ts": json.loads(ln)["ts"] - 1000}) for ln in lines if ln.strip()]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "input.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "neg").mkdir()
    (tmp_path / "neg" / "input.jsonl").write_text("\n".join(shifted) + "\n")
    expected = [json.loads(ln) for ln in (example / "expected.jsonl").read_text().splitlines() if ln.strip()]
    assert len(expected) == 2
    for name, shift in (("in", 0), ("neg", -1000)):
        args = build_parser().parse_args([str(ROOT / "patterns" / "smoke_then_heat.pattern"), "-i",
                                          str(tmp_path / name), "-o", str(tmp_path / f"out-{name}"),
                                          "--checkpoint", str(tmp_path / f"ck-{name}"), "--available-now"])
        q = start_query(spark, args)
        q.awaitTermination()
        assert q.exception() is None
        got = read_dir_output(tmp_path / f"out-{name}")
        want = [{**o, "match": {**o["match"], "smoke_ts": o["match"]["smoke_ts"] + shift,
                                "heat_ts": o["match"]["heat_ts"] + shift}} for o in expected]
        assert content(got) == content(want), name


def test_ids_name_the_full_file_path(spark, tmp_path):
    from cep.connectors.spark_cli import build_parser, start_query

    example = ROOT / "examples" / "smoke_then_heat" / "input.jsonl"
    for day in ("day=1", "day=2"):
        (tmp_path / "in" / day).mkdir(parents=True)
        (tmp_path / "in" / day / "part.jsonl").write_text(example.read_text())
    args = build_parser().parse_args([str(ROOT / "patterns" / "smoke_then_heat.pattern"), "-i",
                                      str(tmp_path / "in"), "-o", str(tmp_path / "out"),
                                      "--checkpoint", str(tmp_path / "ck"), "--available-now", "--lateness", "1 h"])
    q = start_query(spark, args)
    q.awaitTermination()
    assert q.exception() is None
    got = read_dir_output(tmp_path / "out")
    assert len(got) == 2 * 2 + 2 * 2  # each file's 2 matches, and the 2 x 2 smoke/heat pairs across the files
    assert len({o["id"] for o in got}) == len(got)


def test_late_records_are_counted_and_written(spark, tmp_path):
    """A record below Spark's watermark reaches the engine, is counted per pattern and goes to --late-output."""
    from cep.connectors.spark_cli import build_parser, start_query

    d = tmp_path / "in"
    d.mkdir()
    t0 = 1_700_000_000
    first = [{"type": "Smoke", "ts": t0, "area": "lab", "detector": "D-1"},
             {"type": "Temperature", "ts": t0 + 10, "area": "lab", "celsius": 80},
             {"type": "Temperature", "ts": t0 + 500, "area": "hall", "celsius": 20}]
    late = [{"type": "Smoke", "ts": t0 + 100, "area": "hall", "detector": "D-2"},  # wm is t0 + 500 - 60
            {"type": "Temperature", "ts": t0 + 450, "area": "hall", "celsius": 90}]  # within the lateness
    write_jsonl(d / "a.jsonl", first)
    q = None
    args = build_parser().parse_args([str(ROOT / "patterns" / "smoke_then_heat.pattern"), "-i", str(d),
                                      "-o", str(tmp_path / "out"), "--late-output", str(tmp_path / "late"),
                                      "--checkpoint", str(tmp_path / "ck"), "--available-now",
                                      "--lateness", "60 s"])
    q = start_query(spark, args)
    q.awaitTermination()
    assert q.exception() is None
    write_jsonl(d / "b.jsonl", late)  # a second query on the checkpoint: a later micro-batch
    q = start_query(spark, args)
    q.awaitTermination()
    assert q.exception() is None
    got = read_dir_output(tmp_path / "out")
    assert [o["match"]["celsius"] for o in got] == [80]  # the late smoke does not pair with the heat at +450
    assert read_dir_output(tmp_path / "late") == [late[0]]
    assert metrics_total(q, "late_records") == 1 and metrics_total(q, "late:smoke_then_heat") == 1
    # the state step has an event-time timeout, yet Spark dropped nothing before cep saw it
    dropped = [op["numRowsDroppedByWatermark"] for p in q.recentProgress
               for op in json.loads(p.json)["stateOperators"]]
    assert dropped and set(dropped) == {0}


def test_the_state_step_s_watermark_column_is_a_constant_long(spark, tmp_path):
    """The column marked as the state step's watermark column is a long, not a timestamp: PySpark converts each
    group's columns to pandas, a timestamp with a time-zone conversion per group and micro-batch. The watermark
    itself still comes from the records' times (the route step's ``evt`` under ``withWatermark``), and no row is
    below the mark (the late test above: Spark drops nothing)."""
    from cep.connectors.spark import WATERMARK_DELAY_KEY, detect
    from cep.connectors.spark_spec import SPARK_TIME_RANGE_US

    d = tmp_path / "in"
    d.mkdir()
    write_jsonl(d / "a.jsonl", [{"type": "Smoke", "ts": 1, "area": "lab", "detector": "D-1"}])
    files = spark.readStream.format("text").option("wholetext", "true").load(str(d))
    events = files.selectExpr("_metadata.file_path AS file", "value AS text")
    out = detect(events, str(ROOT / "patterns" / "smoke_then_heat.pattern"), lateness=60, side_outputs=True)
    plan, states, marks = out._jdf.queryExecution().analyzed(), [], []
    todo = [plan]
    while todo:
        node = todo.pop()
        if node.getClass().getSimpleName() == "FlatMapGroupsInPandasWithState":
            states.append(node)
        if node.getClass().getSimpleName() == "EventTimeWatermark":
            marks.append(node)
        todo += [node.children().apply(i) for i in range(node.children().size())]
    assert len(states) == 1
    # the watermark's event-time column is the route step's own ``evt`` (no projection of Spark's in between)
    assert [m.child().getClass().getSimpleName() for m in marks] == ["MapInPandas"]
    assert [f.name() for f in marks[0].child().schema().fields()][3] == "evt"
    fields = json.loads(states[0].child().schema().json())["fields"]
    marked = [f for f in fields if WATERMARK_DELAY_KEY in f["metadata"]]
    assert [(f["name"], f["type"]) for f in marked] == [("evt", "long")]
    assert "timestamp" not in {f["type"] for f in fields}  # nothing else of the kind reaches the workers
    assert SPARK_TIME_RANGE_US[1] == 9 * 10**15  # the mark: the top of the time range (in us, as the timestamp's)


def test_bad_records_skipped_are_reported(spark, tmp_path):
    from cep.connectors.spark_cli import build_parser, start_query

    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text('{"type": "Smoke", "ts": 1, "area": "lab"}\n{"type": "Smoke", "ts": }\n'
                               '{"type": "Temperature", "ts": 5, "area": "lab", "celsius": 99}\n')
    args = build_parser().parse_args([str(ROOT / "patterns" / "smoke_then_heat.pattern"), "-i", str(d),
                                      "-o", str(tmp_path / "out"), "--errors", str(tmp_path / "errors"),
                                      "--on-error", "skip", "--checkpoint", str(tmp_path / "ck"),
                                      "--available-now"])
    q = start_query(spark, args)
    q.awaitTermination()
    assert q.exception() is None
    assert len(read_dir_output(tmp_path / "out")) == 1
    errors = read_dir_output(tmp_path / "errors")
    assert [(e["pos"].endswith("/in/a.jsonl:2"), e["record"]) for e in errors] == [(True, '{"type": "Smoke", "ts": }')]
    assert "JSON" in errors[0]["reason"]
    assert metrics_total(q, "bad_records") == 1


def test_a_line_that_is_not_utf8_is_a_bad_record_as_in_cep_run(spark, tmp_path):
    """A whole file's line that is not UTF-8 is a bad record, reported as ``cep run --errors`` reports it (its
    reason and text), and the other records match as in ``cep run``: the route step gets the file's bytes as
    read (``input_records``' binary column), not text that Arrow must decode."""
    from cep.connectors.spark_cli import build_parser, start_query

    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_bytes(b'{"type": "Smoke", "ts": 1, "area": "lab"}\n{"type": "Smoke", "ts": 2, "area": "l\xffb"}\n'
                                b'{"type": "Temperature", "ts": 5, "area": "lab", "celsius": 99}\n')
    pattern = str(ROOT / "patterns" / "smoke_then_heat.pattern")
    args = build_parser().parse_args([pattern, "-i", str(d), "-o", str(tmp_path / "out"),
                                      "--errors", str(tmp_path / "errors"), "--on-error", "skip",
                                      "--checkpoint", str(tmp_path / "ck"), "--available-now"])
    q = start_query(spark, args)
    q.awaitTermination()
    assert q.exception() is None
    r = run_cep("run", pattern, "-i", str(d / "a.jsonl"), "--on-error", "skip", "--errors", str(tmp_path / "ref-errors"))
    ref = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert content(read_dir_output(tmp_path / "out")) == content(ref) and len(ref) == 1
    want = [json.loads(line) for line in (tmp_path / "ref-errors").read_text().splitlines()]
    got = read_dir_output(tmp_path / "errors")
    assert [(e["pos"].endswith("/in/a.jsonl:2"), e["reason"], e["record"]) for e in got] == \
        [(True, w["reason"], w["record"]) for w in want] and len(want) == 1
    assert metrics_total(q, "bad_records") == 1


@pytest.mark.parametrize("output", ["topic", "directory"])
def test_late_and_bad_records_go_to_kafka_topics(spark, kafka_broker, tmp_path, output):
    """``--late-output`` and ``--errors`` as Kafka topics (real broker): each late record once, as read, and the
    bad record's report, beside the composite events in their own topic, or in a directory (packed output rows,
    which have no ``key`` column: the side topics get null keys)."""
    from cep.connectors.spark_cli import build_parser, start_query
    from kafka import KafkaProducer

    t0 = 1_700_000_000
    first = [{"type": "Smoke", "ts": t0, "area": "lab", "detector": "D-1"},
             {"type": "Temperature", "ts": t0 + 10, "area": "lab", "celsius": 80},
             {"type": "Temperature", "ts": t0 + 500, "area": "hall", "celsius": 20}]
    late = {"type": "Smoke", "ts": t0 + 100, "area": "hall", "detector": "D-2"}  # the watermark is t0 + 440
    values = [json.dumps(e).encode() for e in first] + [json.dumps(late).encode(), b'{"type": "Smoke", "ts": }']
    tin, tout, tlate, terr = (new_topic(kafka_broker, n, partitions=1) for n in ("in", "out", "late", "err"))
    p = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    for v in values:
        p.send(tin, value=v)
    p.flush(timeout=60)
    p.close()
    k = f"kafka://{kafka_broker.bootstrap}"
    args = build_parser().parse_args([str(ROOT / "patterns" / "smoke_then_heat.pattern"),
                                      "-i", f"{k}/{tin}?from=earliest&until=end",
                                      "-o", f"{k}/{tout}" if output == "topic" else str(tmp_path / "out"),
                                      "--late-output", f"{k}/{tlate}", "--errors", f"{k}/{terr}",
                                      "--on-error", "skip", "--max-per-batch", "3", "--lateness", "60 s",
                                      "--checkpoint", str(tmp_path / "ck")])
    q = start_query(spark, args)
    q.awaitTermination()
    assert q.exception() is None
    got = consume_all(kafka_broker, tout) if output == "topic" else [(None, v) for v in read_dir_output(tmp_path / "out")]
    assert [v["match"]["celsius"] for _, v in got] == [80]
    assert consume_all(kafka_broker, tlate) == [(None, late)]
    (errors,) = [v for _, v in consume_all(kafka_broker, terr)]
    assert errors["pos"] == f"{tin}/0/4" and errors["record"] == '{"type": "Smoke", "ts": }'
    assert metrics_total(q, "late_records") == 1 and metrics_total(q, "bad_records") == 1


def test_cli_bad_record_is_one_located_line_exit_3(tmp_path):
    """A subprocess ``cep spark`` (its own Spark): exit 3 and one line naming the record, no Java trace."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_text('{"type": "Smoke", "ts": 1, "area": "lab"}\n{"type": "Smoke", "ts": }\n')
    r = run_cep("spark", str(ROOT / "patterns" / "smoke_then_heat.pattern"), "-i", str(d), "-o",
                str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"), "--available-now",
                "--master", "local[1]", "--state-partitions", "1", timeout=600, check=False)
    assert r.returncode == 3, r.stderr[-3000:]
    ours = [ln for ln in r.stderr.splitlines() if ln.startswith("cep")]
    assert len(ours) == 1 and "a.jsonl:2" in ours[0] and "JSON" in ours[0], r.stderr[-3000:]
    assert "at org.apache" not in r.stderr and "Traceback" not in r.stderr


def test_drain_without_an_end_of_input_is_refused_before_spark_starts(tmp_path, capsys):
    from cep.connectors.spark_cli import main

    (tmp_path / "in").mkdir()
    code = main([str(ROOT / "patterns" / "unshipped_orders.pattern"), "-i", str(tmp_path / "in"), "-o",
                 str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"), "--drain", str(tmp_path / "d")])
    assert code == 1
    assert capsys.readouterr().err == ("cep spark: error: --drain needs --available-now (or until=end): a query "
                                       "that runs on has no end of input\n")
    assert not (tmp_path / "ck").exists()


def test_checkpoint_of_other_patterns_or_key_groups_is_refused(tmp_path):
    """Checked before Spark starts: one line, exit 1."""
    from cep.connectors.spark_checkpoint import check_checkpoint
    from cep.connectors.spark_spec import pattern_spec

    ck = str(tmp_path / "ck")
    check_checkpoint(ck, pattern_spec(PATTERNS, key_groups=64), 2)
    check_checkpoint(ck, pattern_spec(PATTERNS, key_groups=64))  # the same: accepted
    r = run_cep("spark", *PATTERNS, "-i", str(tmp_path), "-o", str(tmp_path / "out"), "--checkpoint", ck,
                "--key-groups", "32", check=False)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--key-groups" in r.stderr, r.stderr
    r = run_cep("spark", PATTERNS[0], "-i", str(tmp_path), "-o", str(tmp_path / "out"), "--checkpoint", ck,
                check=False)
    assert r.returncode == 1 and "pattern files" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_placed_key_groups_spread_evenly_and_map_back():
    """``placed_labels``: distinct labels, key group i of pattern g on partition (g*K + i) mod N by Spark's hash
    (``spark_partition_of``, checked against Spark itself in the placement test with Spark), every partition its
    share; ``kg_index`` maps a label back, keeps the bad records' key, and refuses a label that is not one of the
    placement's in one line."""
    import dataclasses

    from cep.connectors import spark_spec as SP

    for g, k, n in ((0, 4, 4), (1, 4, 4), (2, 3, 7), (0, 16, 4), (1, 200, 200), (0, 2, 2), (3, 5, 1)):
        labels = SP.placed_labels(g, k, n)
        assert len(set(labels)) == k and min(labels) >= 0
        assert [SP.spark_partition_of(g, lab, n) for lab in labels] == [(g * k + i) % n for i in range(k)]
        spec = dataclasses.replace(SP.pattern_spec(PATTERNS), key_groups=k, placed_on=n)
        assert spec.kg_labels(g) == labels and [spec.kg_index(g, lab) for lab in labels] == list(range(k))
    assert SP.pattern_spec(PATTERNS).kg_labels(0) == list(range(SP.DEFAULT_KEY_GROUPS))
    spec = SP.pattern_spec(PATTERNS).placed(4)
    assert spec.kg_index(SP.BAD_ROW_GROUP, 0) == 0
    with pytest.raises(SP.SparkPathError, match="not a key group of this checkpoint's placement"):
        spec.kg_index(0, max(spec.kg_labels(0)) + 1000)


def test_a_checkpoint_keeps_its_key_group_layout_unless_one_is_given(tmp_path):
    """A new checkpoint of N state partitions records one key group per partition, placed on them (a given
    --key-groups is kept, placed too; ``detect()``'s own default stays DEFAULT_KEY_GROUPS, not placed); a call
    that does not know the state partitions (before Spark starts) records nothing. A resumed query takes the
    checkpoint's layout and placement when the caller gives none (a checkpoint written before key groups held
    several engines has no ``group_engines``: 64 key groups of one engine each; one written before placement has
    no ``placed_on``), and a given --key-groups that contradicts it is refused in one line. Checked before Spark
    starts."""
    from cep.connectors import spark_checkpoint as C
    from cep.connectors import spark_spec as SP

    default = SP.pattern_spec(PATTERNS)
    assert (default.key_groups, default.group_engines, default.placed_on) == (
        SP.DEFAULT_KEY_GROUPS, SP.ENGINE_BUCKETS // SP.DEFAULT_KEY_GROUPS, None)
    assert default.layout() == f"{default.key_groups}x{default.group_engines}"
    ck = tmp_path / "ck"
    assert C.check_checkpoint(str(ck), default) == default and not (ck / C.CHECKPOINT_META).exists()
    new = C.check_checkpoint(str(ck), default, 4)
    assert (new.key_groups, new.group_engines, new.placed_on) == (4, SP.ENGINE_BUCKETS // 4, 4)
    meta = json.loads((ck / C.CHECKPOINT_META).read_text())
    assert (meta["key_groups"], meta["group_engines"], meta["placed_on"]) == (4, 16, 4)
    given = C.check_checkpoint(str(tmp_path / "given"), SP.pattern_spec(PATTERNS, key_groups=8), 4)
    assert (given.key_groups, given.group_engines, given.placed_on) == (8, 8, 4)
    many = C.check_checkpoint(str(tmp_path / "many"), SP.pattern_spec(PATTERNS), 200)
    assert (many.key_groups, many.group_engines, many.layout()) == (200, 1, "200")
    old = tmp_path / "old"
    C.check_checkpoint(str(old), SP.pattern_spec(PATTERNS, key_groups=64), 2)
    meta = json.loads((old / C.CHECKPOINT_META).read_text())
    assert (meta["group_engines"], meta["placed_on"]) == (1, 2)
    del meta["group_engines"], meta["placed_on"]  # as written before key groups held several engines
    (old / C.CHECKPOINT_META).write_text(json.dumps(meta))
    for given, want in (({}, (64, 1)), ({"key_groups": 64}, (64, 1))):
        spec = C.check_checkpoint(str(old), SP.pattern_spec(PATTERNS, **given), 2)
        assert (spec.key_groups, spec.group_engines, spec.layout(), spec.placed_on) == (*want, "64", None)
    spec = C.check_checkpoint(str(ck), SP.pattern_spec(PATTERNS), 8)  # Spark keeps the checkpoint's 4
    assert (spec.key_groups, spec.group_engines, spec.placed_on) == (new.key_groups, new.group_engines, 4)
    with pytest.raises(SP.SparkPathError, match="--key-groups"):
        C.check_checkpoint(str(old), SP.pattern_spec(PATTERNS, key_groups=SP.DEFAULT_KEY_GROUPS))
    r = run_cep("spark", *PATTERNS, "-i", str(tmp_path), "-o", str(tmp_path / "out"), "--checkpoint", str(old),
                "--key-groups", "16", check=False)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--key-groups" in r.stderr, r.stderr


def test_a_key_group_s_engines_round_trip_through_its_state():
    """A key group of several engine buckets stores them in one state row (``_state_blob``) and loads each
    bucket's engine back (the same state); a state of another layout (its nonce's head) is refused."""
    import pandas as pd
    from cep.connectors import spark_pack as PK
    from cep.connectors import spark_route as RT
    from cep.connectors import spark_spec as SP
    from cep.connectors import spark_state as ST

    from bench.spark_state import FakeGroupState

    spec = SP.pattern_spec("PATTERN p SEQ(A a, B b) WHERE a.k = b.k WITHIN 10\n", key_groups=2)
    assert spec.group_engines == SP.ENGINE_BUCKETS // 2
    recs = [{"type": "A", "ts": i, "k": i % 9} for i in range(40)]
    df = next(RT._route_batches(spec)(iter([pd.DataFrame({"pos": [f"f:{i}" for i in range(40)],
                                                          "value": [json.dumps(r) for r in recs]})])))
    assert set(df.kg) == {0, 1} and (df.kg == df.eg % 2).all()
    kg = int(df.kg.value_counts().idxmax())
    rows = df[df.kg == kg]
    assert rows.eg.nunique() > 1  # several buckets in this key group
    st = FakeGroupState()
    ST._ENGINES.clear()
    assert ST._group_step(spec, 0, kg, [rows], st) == []
    nonce, blob = st.get
    assert nonce.startswith(f"{spec.layout()}:")
    engines = ST._state_engines(spec, 0, kg, nonce, blob)
    assert sorted(engines) == sorted(set(rows.eg))
    cached = kept = ST._ENGINES[(spec.cache_id(), 0, kg)][1]
    assert {eg: e.dumps() for eg, e in engines.items()} == {eg: e.dumps() for eg, e in cached.items()}
    assert sum(e.retained_events for e in engines.values()) == len(rows.value.map(PK._unpacked).sum())
    # the next micro-batch (B records matching some A's) on a worker that cached the engines and on one that
    # loads them from the state: the same composite events and the same state after
    bs = [{"type": "B", "ts": 41 + i, "k": i} for i in range(9)]
    df2 = next(RT._route_batches(spec)(iter([pd.DataFrame({"pos": [f"g:{i}" for i in range(9)],
                                                           "value": [json.dumps(r) for r in bs]})])))
    rows2 = df2[df2.kg == kg]
    outs, states = [], []
    for cached in (True, False):
        st2 = FakeGroupState()
        st2.update(st.get)
        st2.watermark_ms = ST.spark_watermark_after(spec, 39)
        ST._ENGINES.clear()
        if cached:  # as the first step left them (``_save``)
            ST._ENGINES[(spec.cache_id(), 0, kg)] = (nonce, dict(kept))
        outs.append(sorted(ST._group_step(spec, 0, kg, [rows2], st2)))
        states.append({eg: e.dumps() for eg, e in ST._state_engines(spec, 0, kg, *st2.get).items()})
    assert outs[0] == outs[1] and {r[1] for r in outs[0]} == {"+"}
    assert states[0] == states[1]
    with pytest.raises(SP.SparkPathError, match="key-group layout"):
        ST._state_engines(SP.pattern_spec(spec.sources[0][1], key_groups=64), 0, kg, nonce, blob)


# ------------------------------------------------------------------------------------------ against cep run


def skewed_partitions(seed: int, n: int, parts: int, skew: int, lateness: int) -> tuple[list[list[dict]], list[dict]]:
    """Random events in ``parts`` partitions (by partition key), each in time order, partition p lagging the
    first by ``p * skew`` seconds of event time (within the lateness), plus one record far below the watermark
    at the end of every partition. Returns (partitions, the late records)."""
    import random

    rnd = random.Random(seed)
    events = make_events(n=n, seed=seed)
    by_part: list[list[dict]] = [[] for _ in range(parts)]
    for e in events:
        k = e.get("card") or e.get("area") or str(rnd.random())
        by_part[sum(k.encode()) % parts].append(e)
    late = []
    for p, evs in enumerate(by_part):
        lag = p * skew
        for e in evs:
            e["ts"] -= lag
        t0 = evs[0]["ts"]
        rec = {"type": "Txn", "ts": t0 - 10 * lateness, "card": f"late-{p}", "amount": 5.0}
        evs.append(rec)
        late.append(rec)
    assert (parts - 1) * skew < lateness
    return by_part, late


@pytest.mark.kafka
@need_kafka
@pytest.mark.parametrize("seed", [3, 29])
def test_random_events_through_skewed_kafka_partitions_match_cep_run(spark, kafka_broker, tmp_path, seed):
    """Property-style: the same random events through ``cep run`` on a file (time order) and through Spark
    (3-partition topic, partitions skewed in time within the lateness, several micro-batches) give the same
    net output, and the late records are counted alike."""
    from cep.connectors.spark_cli import start_query
    from kafka import KafkaProducer

    # the lateness covers the skew plus the event-time span of a micro-batch (Spark admits a partition's offsets
    # per batch, not its times, so at a batch boundary one partition may be ahead by about a batch's span)
    lateness = 3 * 3600
    by_part, late = skewed_partitions(seed, n=900, parts=3, skew=1000, lateness=lateness)
    tin = new_topic(kafka_broker, "skew-in")
    prod = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all", linger_ms=5)
    for p, evs in enumerate(by_part):
        for e in evs:
            prod.send(tin, partition=p, value=json.dumps(e).encode())
    prod.flush(timeout=60)
    prod.close()

    body = sorted((e for evs in by_part for e in evs if e not in late), key=lambda e: e["ts"])
    inp = write_jsonl(tmp_path / "events.jsonl", body + late)
    r = run_cep("run", *PATTERNS, "-i", str(inp), "--lateness", f"{lateness} s")
    ref = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert f"({len(late)} late," in r.stderr

    q = start_query(spark, cli_args_lateness(
        lateness, "-i", f"kafka://{kafka_broker.bootstrap}/{tin}?from=earliest&until=end",
        "-o", str(tmp_path / "out"), "--checkpoint", str(tmp_path / "ck"), "--max-per-batch", "150",
        "--late-output", str(tmp_path / "late")))
    q.awaitTermination()
    assert q.exception() is None
    assert len(q.recentProgress) >= 4  # several micro-batches
    got = read_dir_output(tmp_path / "out")
    assert net(got) == net(ref)
    assert metrics_total(q, "late_records") == len(late)
    assert sorted(map(json.dumps, read_dir_output(tmp_path / "late"))) == sorted(map(json.dumps, late))


def cli_args_lateness(lateness: int, *argv: str):
    from cep.connectors.spark_cli import build_parser

    return build_parser().parse_args([*PATTERNS, "--lateness", f"{lateness} s", *argv])


def net(outputs) -> Counter:
    """The net multiset of composite events: each ``+`` counts 1, each ``-`` takes one away."""
    c: Counter = Counter()
    for o in outputs:
        c[(o["pattern"], json.dumps(o["match"], sort_keys=True))] += 1 if o["op"] == "+" else -1
    return +c


def test_killed_query_restarts_from_checkpoint(spark, data, tmp_path):
    """SIGKILL a ``cep spark`` process mid-stream, restart on its checkpoint: every composite event is there,
    each exactly once (the directory sink commits each micro-batch once through _spark_metadata)."""
    import os
    import signal
    import subprocess

    from cep.connectors.spark_cli import start_query
    from kafka_fixture import cep_cmd

    events, ref = data
    split_files(events, tmp_path / "in", 8)
    out, ck = tmp_path / "out", tmp_path / "ck"
    argv = ["spark", *PATTERNS, "--lateness", "1 d", "-i", str(tmp_path / "in"), "-o", str(out),
            "--checkpoint", str(ck), "--max-per-batch", "1", "--trigger-interval", "200 milliseconds",
            "--master", "local[1]", "--state-partitions", "2"]
    log = open(tmp_path / "stderr.txt", "wb")  # noqa: SIM115 - closed below; a pipe could fill and block it
    proc = subprocess.Popen(cep_cmd(*argv), stdout=subprocess.DEVNULL, stderr=log, start_new_session=True,
                            cwd=ROOT)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            commits = [f for f in (ck / "commits").glob("*") if f.name.isdigit()] if (ck / "commits").is_dir() else []
            if len(commits) >= 3:
                break
            time.sleep(0.5)
        assert proc.poll() is None, (tmp_path / "stderr.txt").read_text()[-3000:]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and Python workers: one process group
        proc.wait(timeout=60)
        log.close()
    first = read_dir_output(out)
    assert 0 < len(first) < len(ref)

    q = start_query(spark, cli_args("-i", str(tmp_path / "in"), "-o", str(out), "--checkpoint", str(ck),
                                    "--available-now", "--state-partitions", "2"))
    q.awaitTermination()
    assert q.exception() is None
    got = read_dir_output(out)
    assert content(got) == content(ref)
    assert len({o["id"] for o in got}) == len(got)


# ------------------------------------------------------------------------------------------ spec section 7

ABSENCE = ["patterns/unshipped_orders.pattern", "patterns/withdrawal_without_login.pattern",
           "patterns/next_higher_quote.pattern", "patterns/rising_readings.pattern",
           "patterns/account_takeover.pattern"]


def test_gap_types_are_routed_like_the_match_key():
    from cep.lang.compiler import compile_text
    from cep.plan.partition import partition_attrs

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


def test_a_trailing_not_is_decided_by_other_keys_rows_through_a_timer(spark, tmp_path):
    """A key group that gets no more rows still decides its pending match when Spark's watermark, carried by
    other keys' rows in a later micro-batch, passes the match's gap (an event-time timeout fires it)."""
    import os
    import zlib

    from cep.connectors.spark_cli import build_parser, start_query
    from cep.connectors.spark_spec import _canon_key

    pat = "patterns/unshipped_orders.pattern"
    groups = 64

    def group(order_id: int) -> int:
        return zlib.crc32(_canon_key([order_id]).encode()) % groups

    a = 1
    b = next(i for i in range(2, 100) if group(i) != group(a))  # B's rows never reach A's key group
    c = next(i for i in range(b + 1, 200) if group(i) not in (group(a), group(b)))
    t0, day = 1_700_000_000, 86400
    first = [{"type": "Order", "ts": t0, "order_id": a, "customer": "A"},
             {"type": "Order", "ts": t0 + 10, "order_id": c, "customer": "C"},
             {"type": "Shipment", "ts": t0 + 3600, "order_id": c}]
    second = [{"type": "Order", "ts": t0 + 3 * day, "order_id": b, "customer": "B"}]
    d = tmp_path / "in"
    d.mkdir()
    for k, (name, evs) in enumerate([("a.jsonl", first), ("b.jsonl", second)]):
        f = write_jsonl(d / name, evs)
        os.utime(f, (t0 + k * 100, t0 + k * 100))  # one file a micro-batch, in this order
    args = build_parser().parse_args([pat, "-i", str(d), "-o", str(tmp_path / "out"), "--lateness", "1 h",
                                      "--key-groups", str(groups), "--checkpoint", str(tmp_path / "ck"),
                                      "--available-now", "--max-per-batch", "1"])
    q = start_query(spark, args)
    q.awaitTermination()
    assert q.exception() is None
    got = read_dir_output(tmp_path / "out")
    ref = [json.loads(x) for x in run_cep("run", pat, "-i", str(write_jsonl(tmp_path / "all.jsonl", first + second)),
                                          "-q").stdout.splitlines()]
    want = [o for o in ref if o["match"]["order_id"] == a]  # B is decided only by the end of the file
    assert len(want) == 1 and len(ref) == 2
    assert content(got) == content(want)
    data_batches = [p for p in q.recentProgress if p["numInputRows"] > 0]
    assert len(data_batches) == 2  # A's group got rows only in the first
    # --drain: what the end of the input decides (B's order: no shipment can come any more)
    from cep.connectors.spark_cli import drain_to

    args.drain = str(tmp_path / "drained")
    assert drain_to(spark, args) == 1
    drained = [json.loads(line) for f in sorted((tmp_path / "drained").glob("part-*"))
               for line in f.read_text().splitlines()]
    assert content(got + drained) == content(ref)


def test_single_element_patterns_run_keyed_over_micro_batches_like_cep_run(spark, tmp_path):
    """A pattern whose positive part is one element (repetition or NOT around it) is partitioned by its gaps'
    key: several key groups, several micro-batches, and the composite events of ``cep run``."""
    import os

    from cep.connectors.spark import drain
    from cep.connectors.spark_cli import build_parser, query_spec, start_query

    for name in ("failed_logins", "unshipped_orders"):
        pat = str(ROOT / "patterns" / f"{name}.pattern")
        lines = (ROOT / "examples" / name / "input.jsonl").read_text().splitlines()
        events = sorted((json.loads(x) for x in lines if x.strip()), key=lambda e: e["ts"])
        files = split_files(events, tmp_path / name / "in", 3)
        for k, f in enumerate(files):
            os.utime(f, (1_700_000_000 + k * 100, 1_700_000_000 + k * 100))
        args = build_parser().parse_args([pat, "-i", str(tmp_path / name / "in"), "-o", str(tmp_path / name / "out"),
                                          "--checkpoint", str(tmp_path / name / "ck"), "--available-now",
                                          "--max-per-batch", "1", "--key-groups", "8", "--lateness", "30 d"])
        q = start_query(spark, args)
        q.awaitTermination()
        assert q.exception() is None
        got = read_dir_output(tmp_path / name / "out")
        # a lateness longer than the input: the watermark passes few gaps or none; the rest is decided by the end
        # of the input, which a streaming query has not got: ``drain`` decides them from the checkpoint's state
        want = [json.loads(x) for x in (ROOT / "examples" / name / "expected.jsonl").read_text().splitlines()]
        assert want, name
        drained = [json.loads(r.value) for r in drain(spark, str(tmp_path / name / "ck"), query_spec(args)).collect()]
        assert drained, name
        assert content(got + drained) == content(want), name
        groups = {r.key.kg for r in spark.read.format("statestore").load(str(tmp_path / name / "ck")).collect()}
        assert len(groups) > 1, name  # keyed: the pending matches sit in several key groups


KLEENE = ["failed_logins", "card_testing_run", "overheating_run"]


def test_repeated_types_are_routed_like_the_match_key():
    from cep.lang.compiler import compile_text
    from cep.plan.partition import partition_attrs

    cp, = compile_text("PATTERN p SEQ(Reading b, Reading{3,} hot, NOT Reading ok, Reading back) "
                       "PARTITION BY sensor WITHIN 1 h")
    assert partition_attrs(cp) == {"Reading": ("sensor",)}
    cp, = compile_text("PATTERN p SEQ(Login{3,} f, Login ok) PARTITION BY user WITHIN 10 min")
    assert partition_attrs(cp) == {"Login": ("user",)}  # one positive element: keyed by its gaps' equalities
    cp, = compile_text("PATTERN p SEQ(Order o, NOT Shipment s) WHERE s.order_id = o.order_id WITHIN 2 days")
    assert partition_attrs(cp) == {"Order": ("order_id",), "Shipment": ("order_id",)}
    cp, = compile_text("PATTERN p SEQ(Login{3,} f, Login ok) WITHIN 10 min")
    assert partition_attrs(cp) is None  # no equality with the gap: one group
    cp, = compile_text("PATTERN p SEQ(A a, NOT B b, NOT C c) WHERE b.x = a.x AND c.y = a.y WITHIN 10")
    assert partition_attrs(cp) is None  # the gaps equate different attributes: one group
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


def test_idle_key_groups_state_is_removed_once_the_watermark_expires_it(spark, tmp_path):
    """A key group that gets no more rows keeps no state once Spark's watermark has passed its window: its
    event-time timeout is the engine's ``empty_at`` and the timed-out group removes its state (the state rows
    of the query's progress drop)."""
    import os
    import zlib

    from cep.connectors.spark_cli import build_parser, start_query
    from cep.connectors.spark_spec import _canon_key

    pat = tmp_path / "p.pattern"
    pat.write_text("PATTERN p\n  SEQ(A a, B b)\n  PARTITION BY k\n  WITHIN 1 hour\n")
    groups = 64

    def group(k: int) -> int:
        return zlib.crc32(_canon_key([k]).encode()) % groups

    idle = [1, next(k for k in range(2, 100) if group(k) != group(1))]
    busy = next(k for k in range(3, 200) if group(k) not in map(group, idle))
    t0, day = 1_700_000_000, 86400
    first = [{"type": "A", "ts": t0 + i, "k": k} for i, k in enumerate(idle)]
    second = [{"type": "A", "ts": t0 + day, "k": busy}]  # moves the watermark a day on; its own group stays
    d = tmp_path / "in"
    d.mkdir()
    for i, (name, evs) in enumerate([("a.jsonl", first), ("b.jsonl", second)]):
        os.utime(write_jsonl(d / name, evs), (t0 + i * 100, t0 + i * 100))  # one file a micro-batch, in order
    args = build_parser().parse_args([str(pat), "-i", str(d), "-o", str(tmp_path / "out"), "--lateness", "1 min",
                                      "--key-groups", str(groups), "--checkpoint", str(tmp_path / "ck"),
                                      "--available-now", "--max-per-batch", "1"])
    q = start_query(spark, args)
    q.awaitTermination()
    assert q.exception() is None
    rows = [(p["numInputRows"], p["stateOperators"][0]["numRowsTotal"]) for p in q.recentProgress
            if p["stateOperators"]]
    # batch 1: the idle keys' groups; batch 2: + the busy key's group; then a no-data batch under the new
    # watermark times the idle groups out and removes their state
    assert [n for n, _ in rows][:2] == [1, 1]
    assert [total for _, total in rows] == [2, 3, 1]
