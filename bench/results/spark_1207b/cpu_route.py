"""CPU s of the route step per whole file of 10^5 events, in-process: median of 8 files after 2."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.getcwd())
import pandas as pd  # noqa: E402
from cep.connectors import spark_route as RT
from cep.connectors import spark_spec as SP

from bench.spark_bench import PATTERN  # noqa: E402
from cep.gc_policy import stream_gc  # noqa: E402

spec = SP.pattern_spec(PATTERN, lateness=120)
text = open(os.environ.get("EV", "/tmp/route/ev100k.jsonl")).read()
route = RT._route_batches(spec, whole_files=True)
ts = []
with stream_gc():
    for b in range(10):
        files = pd.DataFrame({"pos": [f"file:///in/part{b:03d}.jsonl"], "value": [text]})
        t = time.process_time()
        out = list(route(iter([files])))
        ts.append(time.process_time() - t)
print(f"{os.getcwd()} {statistics.median(ts[2:]):.4f}")
