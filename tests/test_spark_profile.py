"""bench/spark_profile.py's memory and garbage-collection records (no Spark: its pure functions, and its
``--gc-log`` sitecustomize in a plain Python process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.spark_profile import (
    GC_SITECUSTOMIZE,
    batch_cpu,
    gc_summary,
    is_python_daemon,
    memory_summary,
    read_gc_logs,
    slope,
    status_memory,
)

STATUS = """Name:\tpython3
VmPeak:\t  900000 kB
VmHWM:\t  204800 kB
VmRSS:\t  102400 kB
RssAnon:\t   51200 kB
RssFile:\t   51200 kB
"""


def test_status_memory_reads_rss_peak_and_anonymous_in_mb():
    assert status_memory(STATUS) == [100.0, 200.0, 50.0]
    # a zombie's status has none of them
    assert status_memory("Name:\tx\nState:\tZ (zombie)\n") == [0.0, 0.0, 0.0]


def test_batch_cpu_is_each_micro_batch_s_user_and_system_time_by_kind():
    marks = [{"driver JVM": (1.0, 0.5, 10), "python workers": (2.0, 0.0, 5)},
             {"driver JVM": (1.25, 0.5, 20), "python workers": (3.5, 0.25, 9)},
             {"driver JVM": (2.0, 1.0, 30), "python workers": (3.5, 0.25, 9)}]
    # page faults (the third field) are not CPU; a kind idle in a micro-batch took 0
    assert batch_cpu(marks) == [{"driver JVM": 0.25, "python workers": 1.75},
                                {"driver JVM": 1.25, "python workers": 0.0}]
    assert batch_cpu(marks[:1]) == []


def test_only_the_daemons_command_lines_are_python_workers():
    assert is_python_daemon("/v/bin/python -m pyspark.daemon")
    assert is_python_daemon("/v/bin/python -m cep.connectors.sparkdaemon ")
    # the profile's own driver, even with the daemon's setting on its command line
    assert not is_python_daemon("/v/bin/python -m bench.spark_profile --conf spark.python.daemon.module=pyspark.daemon")
    assert not is_python_daemon("bash /opt/spark/bin/spark-submit pyspark-shell")
    assert not is_python_daemon("/v/bin/python -m")


def test_slope_is_the_least_squares_growth_per_step():
    assert slope([]) == 0.0 and slope([5.0]) == 0.0
    assert slope([1.0, 2.0, 3.0, 4.0]) == pytest.approx(1.0)
    assert slope([3.0, 1.0, 3.0, 1.0]) == pytest.approx(-0.4)


def test_memory_summary_per_worker_over_the_marks_it_was_alive_at():
    series = [{1: [50.0, 50.0, 40.0], 2: [100.0, 110.0, 80.0]},
              {1: [50.0, 50.0, 40.0], 2: [102.0, 110.0, 82.0]},
              {1: [50.0, 50.0, 40.0], 2: [104.0, 110.0, 84.0], 3: [90.0, 95.0, 70.0]},
              {1: [50.0, 50.0, 40.0], 2: [104.0, 112.0, 84.0], 3: [91.0, 95.0, 71.0]}]
    s = memory_summary(series)
    assert s["1"]["rss_mb_per_batch"] == 0.0 and s["1"]["marks"] == 4
    w = s["2"]
    assert (w["rss_first"], w["rss_last"], w["rss_max"], w["hwm_max"]) == (100.0, 104.0, 104.0, 112.0)
    assert w["rss_mb_per_batch"] == pytest.approx(1.4) and w["anon_mb_per_batch"] == pytest.approx(1.4)
    assert w["rss_mb_per_batch_2nd_half"] == 0.0  # grew, then stopped
    assert s["3"]["marks"] == 2 and s["3"]["rss_mb_per_batch"] == pytest.approx(1.0)


def _line(at: float, asked: int, full: int, collected2: int, cpu2: float, old: int) -> dict:
    stats = [{"collections": 10 * at, "collected": 0, "uncollectable": 0},
             {"collections": at, "collected": 5, "uncollectable": 0},
             {"collections": full, "collected": collected2, "uncollectable": 0}]
    return {"at": at, "asked": asked, "stats": stats, "cpu": [0.0, 0.0, cpu2], "old": old, "garbage": 0}


def test_gc_summary_counts_between_the_first_and_the_last_mark():
    lines = [_line(1, 2, 1, 0, 0.1, 100),   # the warm-up's
             _line(2, 1, 1, 0, 0.1, 120),   # last before the first mark (2.5)
             _line(3, 1, 2, 30, 0.3, 110),  # an automatic full collection in between
             _line(4, 2, 3, 40, 0.4, 105),  # an asked one
             _line(5, 1, 3, 40, 0.4, 125),  # last before the last mark (5.5)
             _line(6, 1, 3, 40, 0.4, 999)]  # after it
    s = gc_summary({7: lines}, [2.5, 4.5, 5.5])["7"]
    assert s["old_objects"] == [120, 105, 125]
    assert s["asked"] == {"1": 2, "2": 1}
    assert s["collections"] == [30, 3, 2] and s["collected"] == [0, 0, 40]
    assert s["cpu_s"] == [0.0, 0.0, 0.3]
    assert s["automatic_full"] == 1
    assert s["fulls"] == [[1, 30, 110], [1, 10, 105]]  # both in the micro-batch between the marks 2.5 and 4.5
    # a worker with no line before the first mark, or one line in all: nothing between two marks
    assert gc_summary({8: lines[4:]}, [2.5, 5.5]) == {} and gc_summary({9: lines[:1]}, [2.5, 5.5]) == {}


def test_the_gc_log_sitecustomize_logs_a_daemons_collections_only(tmp_path: Path):
    (tmp_path / "site").mkdir()
    (tmp_path / "log").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(GC_SITECUSTOMIZE)
    (tmp_path / "site" / "fakedaemon.py").write_text("import gc\ngc.collect(1)\ngc.collect()\n")
    (tmp_path / "site" / "other.py").write_text("import gc\ngc.collect()\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site"), "GC_LOG_DIR": str(tmp_path / "log")}
    for module in ("fakedaemon", "other"):
        subprocess.run([sys.executable, "-m", module], env=env, check=True, cwd=tmp_path)
    [(pid, lines)] = read_gc_logs(tmp_path / "log").items()
    assert [ln["asked"] for ln in lines] == [1, 2]
    assert lines[1]["stats"][2]["collections"] == lines[0]["stats"][2]["collections"] + 1
    assert all(ln["old"] > 0 and ln["garbage"] == 0 for ln in lines)
    assert json.loads(json.dumps(lines)) == lines and pid > 0
