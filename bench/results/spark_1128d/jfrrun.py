"""scratch: JFR of a cep spark query, small micro-batches; prints steady start time."""

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
from cep.connectors.spark_cli import build_parser, start_query
from cep.connectors.spark_session import JVM_OPTIONS, make_session

from bench.spark_bench import PATTERN, ProgressMarks, make_events, spark_home_for_cluster, write_dir

master = sys.argv[1]
n = int(sys.argv[2])
files = int(sys.argv[3])
work = Path(sys.argv[4])
extra_conf = sys.argv[5:]
work.mkdir(parents=True, exist_ok=True)
write_dir(work / "in", make_events(n), files)
write_dir(work / "warm", make_events(n // files, seed=2), 1)
jfr = f"{JVM_OPTIONS} -XX:StartFlightRecording=filename={work}/jfr-%p.jfr,dumponexit=true,settings=/tmp/sj/fast.jfc"
extra = {"spark.driver.extraJavaOptions": jfr, "spark.executor.extraJavaOptions": jfr}
extra.update(dict(kv.split("=", 1) for kv in extra_conf))
if master.startswith("local-cluster"):
    os.environ["SPARK_HOME"] = spark_home_for_cluster(work)
spark = make_session(master, 2, kafka=False, extra=extra)
marks = []
ProgressMarks(
    lambda p: marks.append((json.loads(p)["batchId"], json.loads(p)["numInputRows"], time.time()))
).add_to(spark)


def run(inp, tag):
    a = build_parser().parse_args(
        [
            PATTERN,
            "-i",
            str(inp),
            "-o",
            str(work / f"out-{tag}"),
            "--checkpoint",
            str(work / f"ck-{tag}"),
            "--available-now",
            "--max-per-batch",
            "1",
        ]
    )
    q = start_query(spark, a)
    q.awaitTermination()
    return q


run(work / "warm", "warm")
marks.clear()
q = run(work / "in", "main")
data = [m for m in marks if m[1] > 0]
print(json.dumps({"since": data[2][2], "until": data[-1][2], "batches": len(data) - 3}))
print(q.lastProgress["durationMs"])
spark.stop()
