"""INFO lines in the local-cluster executors' stderr for a 4-micro-batch cep spark query (20 000 events), by logger.

    python bench/results/spark_1128f/executor_logs.py [KEY=VALUE ...]   # from a checkout; extra Spark settings
"""

import collections
import glob
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.getcwd())
from cep.connectors.spark_cli import build_parser, start_query  # noqa: E402
from cep.connectors.spark_session import make_session  # noqa: E402

from bench.spark_bench import PATTERN, make_events, spark_home_for_cluster, write_dir  # noqa: E402

work = Path(tempfile.mkdtemp(prefix="jvmlogs-"))
os.environ["SPARK_HOME"] = spark_home_for_cluster(work)
extra = dict(kv.split("=", 1) for kv in sys.argv[1:])
spark = make_session("local-cluster[2,1,1024]", 2, kafka=False, extra=extra)
write_dir(work / "in", make_events(20000), 4)
args = build_parser().parse_args([PATTERN, "-i", str(work / "in"), "-o", str(work / "out"), "--checkpoint",
                                  str(work / "ck"), "--available-now", "--max-per-batch", "1"])
q = start_query(spark, args)
q.awaitTermination()
spark.stop()
for f in glob.glob(os.environ["SPARK_HOME"] + "/work/*/*/stderr"):
    lines = Path(f).read_text().splitlines()
    info = [line for line in lines if " INFO " in line]
    print(f, len(lines), "lines,", sum(len(line) for line in lines), "chars,", len(info), "INFO")
    print(collections.Counter(line.split(" INFO ")[1].split(":")[0] for line in info).most_common(15))
