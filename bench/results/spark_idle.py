"""CPU an idle Spark session's process tree burns per wall second (spark.md, 2026-12-07b end run):

    python bench/results/spark_idle.py 'local-cluster[2,1,1024]'
"""
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.spark_bench import spark_home_for_cluster, tree_cpu_seconds  # noqa: E402

master = sys.argv[1]
if master.startswith("local-cluster"):
    os.environ["SPARK_HOME"] = spark_home_for_cluster(Path(tempfile.mkdtemp()))
from cep.connectors.spark_session import make_session  # noqa: E402

spark = make_session(master, 2, kafka=False)
spark.range(1000).repartition(2).count()
time.sleep(5)
for _ in range(3):
    a, t = tree_cpu_seconds(os.getpid()), time.time()
    time.sleep(10)
    print(master, "idle CPU s per wall s:", round((tree_cpu_seconds(os.getpid()) - a) / (time.time() - t), 4), flush=True)
