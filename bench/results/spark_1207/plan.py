"""The executed plan of ``cep spark``'s bench query (files -> files, card_testing, local[1], 2 state partitions)
after its last micro-batch, and each micro-batch's observed metrics.

    python bench/results/spark_1207/plan.py          (from the checkout whose plan is wanted; needs /tmp/cards200k.jsonl)
"""
import tempfile
from pathlib import Path

from cep.connectors.spark_cli import build_parser, start_query
from cep.connectors.spark_session import make_session

spark = make_session("local[1]", 2, kafka=False)
d = Path(tempfile.mkdtemp())
src = Path("/tmp/cards200k.jsonl").read_bytes().split(b"\n")
(d / "in").mkdir()
for i in range(3):
    (d / "in" / f"p{i}.jsonl").write_bytes(b"\n".join(src[i * 20000:(i + 1) * 20000]) + b"\n")
args = build_parser().parse_args(["patterns/card_testing.pattern", "-i", str(d / "in"), "-o", str(d / "out"),
                                  "--checkpoint", str(d / "ck"), "--available-now", "--max-per-batch", "1"])
q = start_query(spark, args)
q.awaitTermination()
print(q._jsq.streamingQuery().lastExecution().executedPlan().treeString())
for p in q.recentProgress:
    print(p["batchId"], p["numInputRows"], p.get("observedMetrics"))
