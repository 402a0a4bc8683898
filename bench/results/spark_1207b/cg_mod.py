"""As cg_route.py, with the copy of connectors/spark.py at MOD (a variant)."""
import importlib.util
import os
import sys

sys.path.insert(0, os.getcwd())
import pandas as pd  # noqa: E402

from bench.spark_bench import PATTERN  # noqa: E402
from cep.gc_policy import stream_gc  # noqa: E402

found = importlib.util.spec_from_file_location("spark_mod", os.environ["MOD"])
S = importlib.util.module_from_spec(found)
sys.modules["spark_mod"] = S
found.loader.exec_module(S)
N = int(sys.argv[1])
spec = S.pattern_spec(PATTERN, lateness=120)
text = open(os.environ.get("EV", "/tmp/route/ev100k.jsonl")).read()
route = S._route_batches(spec, whole_files=True)
with stream_gc():
    for b in range(N):
        files = pd.DataFrame({"pos": [f"file:///in/part{b:03d}.jsonl"], "value": [text]})
        df = pd.concat(list(route(iter([files]))))
