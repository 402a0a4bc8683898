"""PySpark's per-group Arrow -> pandas conversion in the state step (applyInPandasWithState's serializer calls
``ArrowBatchTransformer.to_pandas`` on each group's slice): CPU ms per one-row group with the state step's columns
(g, kg, value) and the watermark-marked column as a timestamp (before), a long (now), or absent (a floor).

    python bench/results/spark_1128f/to_pandas_per_group.py
"""

import time

import pyarrow as pa
from pyspark.sql.pandas.serializers import ArrowBatchTransformer

N = 64  # key groups per micro-batch (one packed route row each)
ROUNDS = 20
value = ["x" * 100_000] * N  # ~the packed rows' size (7.3 MB per 64 groups)
for rep in range(3):
    for kind in ("timestamp", "long", "none"):
        cols = [pa.array(range(N), pa.int32()), pa.array(range(N), pa.int32()), pa.array(value, pa.string())]
        names = ["g", "kg", "value"]
        if kind != "none":
            typ = pa.timestamp("us", tz="UTC") if kind == "timestamp" else pa.int64()
            cols.append(pa.array([9 * 10**15] * N, typ))
            names.append("evt")
        batch = pa.RecordBatch.from_arrays(cols, names=names)
        t = time.process_time()
        for _ in range(ROUNDS):
            for i in range(N):
                ArrowBatchTransformer.to_pandas(batch.slice(i, 1), timezone="UTC", schema=None,
                                                struct_in_pandas="dict", ndarray_as_list=False,
                                                prefer_int_ext_dtype=False, df_for_struct=False)
        print(f"round {rep}: evt {kind:9}: {(time.process_time() - t) / (N * ROUNDS) * 1000:.3f} ms per group")
