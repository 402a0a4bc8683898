"""The route step in-process: N whole files of 10^5 bench events (instructions: run N=1 and N=3, subtract).

EV: the events file (``bench.spark_bench.make_events(100000)``, one ``json.dumps`` line each).
MOD: a copy of ``connectors/spark.py`` to run instead of the installed one (the variants); unset: the installed."""
import importlib.util
import os
import sys

sys.path.insert(0, os.getcwd())
import pandas as pd  # noqa: E402

from bench.spark_bench import PATTERN  # noqa: E402
from cep.gc_policy import stream_gc  # noqa: E402

if os.environ.get("MOD"):
    found = importlib.util.spec_from_file_location("spark_mod", os.environ["MOD"])
    S = importlib.util.module_from_spec(found)
    sys.modules["spark_mod"] = S
    found.loader.exec_module(S)
else:
    from cep.connectors import spark as S
N = int(sys.argv[1])
spec = S.pattern_spec(PATTERN, lateness=120)
text = open(os.environ.get("EV", "/tmp/route/ev100k.jsonl")).read()
route = S._route_batches(spec, whole_files=True)
with stream_gc():
    for b in range(N):
        files = pd.DataFrame({"pos": [f"file:///in/part{b:03d}.jsonl"], "value": [text]})
        df = pd.concat(list(route(iter([files]))))
