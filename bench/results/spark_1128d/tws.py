"""scratch: per-group plumbing of applyInPandasWithState vs transformWithStateInPandas vs transformWithState (rows):
64 groups x 1 row per micro-batch, a 6 kB state blob per group rewritten each batch, an event-time timer/timeout
set each batch; steady CPU of the whole process tree per micro-batch (20 files = 20 batches)."""

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.getcwd())
from cep.connectors.spark_session import make_session

from bench.spark_bench import ProgressMarks, tree_cpu_seconds

mode, master, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
G, PAY, FILES = 64, 6000, 20
(work / "in").mkdir(parents=True, exist_ok=True)
t0 = 1_700_000_000
for i in range(FILES):
    (work / "in" / f"p{i:03d}.txt").write_text(
        "".join(f"{g}\t{t0 + i * 100}\t{'x' * PAY}\n" for g in range(G))
    )
spark = make_session(master, 2, kafka=False)
marks = []
ProgressMarks(
    lambda p: marks.append((json.loads(p)["numInputRows"], tree_cpu_seconds(os.getpid())))
).add_to(spark)
from pyspark.sql import functions as F  # noqa: E402

df = spark.readStream.format("text").option("maxFilesPerTrigger", "1").load(str(work / "in"))
parts = F.split("value", "\t")
df = df.select(
    parts[0].cast("int").alias("g"),
    F.timestamp_seconds(parts[1].cast("long")).alias("evt"),
    parts[2].alias("payload"),
).withWatermark("evt", "120 seconds")
OUT = "g int, n long"
if mode == "apply":
    import pandas as pd
    from pyspark.sql.streaming.state import GroupStateTimeout

    def fn(key, pdfs, state):
        n = 0
        for pdf in pdfs:
            n += len(pdf)
        old = state.get[1] if state.exists else b""
        state.update(("nonce", (old[: PAY - 100] + b"y" * 100) if old else b"y" * PAY))
        state.setTimeoutTimestamp(max(state.getCurrentWatermarkMs(), 1) + 3_600_000)
        yield pd.DataFrame({"g": [int(key[0])], "n": [n]})

    out = df.groupBy("g").applyInPandasWithState(
        fn, OUT, "nonce string, blob binary", "append", GroupStateTimeout.EventTimeTimeout
    )
else:
    from pyspark.sql.streaming import StatefulProcessor

    rows_mode = mode == "rows"

    class P(StatefulProcessor):
        def init(self, handle):
            self.handle = handle
            self.st = handle.getValueState("s", "nonce string, blob binary")

        def handleInputRows(self, key, rows, timerValues):
            n = 0
            for r in rows:
                n += 1 if rows_mode else len(r)
            old = self.st.get()
            blob = old[1] if old is not None else b""
            self.st.update(
                ("nonce", (bytes(blob)[: PAY - 100] + b"y" * 100) if blob else b"y" * PAY)
            )
            for t in self.handle.listTimers():
                self.handle.deleteTimer(t)
            self.handle.registerTimer(max(timerValues.getCurrentWatermarkInMs(), 1) + 3_600_000)
            if rows_mode:
                from pyspark.sql import Row

                yield Row(g=int(key[0]), n=n)
            else:
                import pandas as pd

                yield pd.DataFrame({"g": [int(key[0])], "n": [n]})

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            return iter([])

        def close(self):
            pass

    spark.conf.set(
        "spark.sql.streaming.stateStore.providerClass",
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    )
    g = df.groupBy("g")
    if rows_mode:
        out = g.transformWithState(P(), OUT, "Append", "EventTime")
    else:
        out = g.transformWithStateInPandas(P(), OUT, "Append", "EventTime")
q = (
    out.writeStream.format("noop")
    .option("checkpointLocation", str(work / "ck"))
    .trigger(availableNow=True)
    .outputMode("append")
    .start()
)
q.awaitTermination()
data = [m for m in marks if m[0] > 0]
steady = data[2:]
per = (steady[-1][1] - steady[0][1]) / (len(steady) - 1)
print(
    json.dumps(
        {
            "mode": mode,
            "master": master,
            "batches": len(data),
            "cpu_per_batch": round(per, 3),
            "last": json.loads(
                q.lastProgress.json
                if hasattr(q.lastProgress, "json")
                else json.dumps(q.lastProgress)
            )["durationMs"],
        }
    )
)
spark.stop()
