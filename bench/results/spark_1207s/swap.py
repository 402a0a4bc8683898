"""Two simulated Spark workers that swap the key groups every micro-batch (each group's cache entry stale, as on
local[2]) against one worker (all hits): the same rows and states; CPU of each. CG=swap|hits: run one mode only
(for cachegrind, cg.sh). B micro-batches of N bench events (card testing, lateness 120, 16 x 4 key groups, packed)."""

import json
import os
import sys
import time
from collections import OrderedDict

import pandas as pd
from cep.connectors import spark_route as RT
from cep.connectors import spark_spec as SP
from cep.connectors import spark_state as ST

from bench.spark_bench import PATTERN, make_events
from bench.spark_state import FakeGroupState
from cep.gc_policy import stream_gc

B = int(os.environ.get("B", "5"))
N = int(os.environ.get("N", "50000"))
spec = SP.pattern_spec(PATTERN, lateness=120)
spec.match_column, spec.pack_output = False, True
events = make_events(N * B, 1000)
route, handler = RT._route_batches(spec, whole_files=True), ST._handler(spec)
frames = []
for b in range(B):
    part = events[b * N:(b + 1) * N]
    text = "".join(json.dumps(e) + "\n" for e in part)
    files = pd.DataFrame({"pos": [f"file:///in/part{b:03d}.jsonl"], "value": [text]})
    frames.append((pd.concat(list(route(iter([files])))), max(e["ts"] for e in part)))


def run(swap: bool) -> tuple[list, dict, float]:
    """Every micro-batch through the handler; with ``swap`` the worker cache alternates between two (a worker
    each). Returns the output frames (as CSV), the final state bytes, and the CPU of micro-batches 2 on."""
    caches = [OrderedDict(), OrderedDict()]
    states, rows, max_ts, cpu = {}, [], None, 0.0
    for b, (df, mx) in enumerate(frames):
        ST._ENGINES = caches[b % 2 if swap else 0]
        wm = 0 if max_ts is None else ST.spark_watermark_after(spec, max_ts)
        groups = [(key, r.drop(columns=["evt"])) for key, r in df.groupby(["g", "kg"])]
        t = time.process_time()
        for key, r in groups:
            st = states.setdefault(key, FakeGroupState())
            st.watermark_ms = wm
            rows.extend(f.to_csv() for f in handler(key, iter([r]), st))
        if b > 1:
            cpu += time.process_time() - t
        max_ts = mx
    return rows, {k: bytes(v.get[1]) for k, v in states.items() if v.exists}, cpu


if os.environ.get("CG"):
    with stream_gc():
        run(os.environ["CG"] == "swap")
    sys.exit(0)
with stream_gc():
    a, b, a2, b2 = run(False), run(True), run(False), run(True)
assert a[0] == b[0], "rows differ"
assert a[1] == b[1], "states differ"
print(f"same rows ({len(a[0])} frames) and states; state step CPU (batches 2..): hits {a[2]:.3f} {a2[2]:.3f}, "
      f"swapped {b[2]:.3f} {b2[2]:.3f}")
