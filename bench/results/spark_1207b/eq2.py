"""The base's route rows (BASE_SPARK: its connectors/spark.py) against this checkout's: equal but for PLAIN_MARK?

Whole files (two in one task) and a ``pos`` column, fail and skip, clean and with a bad time and a nested record."""
import importlib.util
import os
import sys
import types

sys.path.insert(0, os.getcwd())
import pandas as pd  # noqa: E402
from cep.connectors import spark_route, spark_spec  # noqa: E402

from bench.spark_bench import PATTERN  # noqa: E402

# this checkout's two functions (connectors/spark.py before the stages had modules of their own)
S = types.SimpleNamespace(pattern_spec=spark_spec.pattern_spec, _route_batches=spark_route._route_batches)
found = importlib.util.spec_from_file_location("spark_base", os.environ.get("BASE_SPARK", "/tmp/base-s10/connectors/spark.py"))
B = importlib.util.module_from_spec(found)
sys.modules["spark_base"] = B
found.loader.exec_module(B)
text = open(os.environ.get("EV", "/tmp/route/ev100k.jsonl")).read()
bad = text.replace('"Txn", "ts": 1700000100,', '"Txn", "ts": "x",', 1).replace(
    '{"type": "Txn", "ts": 1700000200', '{"type": "Txn", "ts": 1700000200, "n": [1]', 1)


def rows(M, t, kw):
    """(columns without the plain mark, marked values) of both route modes, or the error."""
    spec = M.pattern_spec(PATTERN, lateness=120, **kw)
    try:
        f = pd.concat(list(M._route_batches(spec, whole_files=True)(iter([pd.DataFrame(
            {"pos": ["file:///a.jsonl", "file:///b.jsonl"], "value": [t, text[:5000]]})]))))
        f2 = pd.concat(list(M._route_batches(spec)(iter([pd.DataFrame(
            {"pos": [f"k/0/{i}" for i in range(3000)], "value": t.split("\n")[:3000]})]))))
    except Exception as e:  # noqa: BLE001 - compared
        return repr(e), None
    out = [(d["g"], d["kg"], d["eg"], d["evt"], [v[1:] if v[0] == "p" else v for v in d["value"]])
           for d in (f.to_dict("list"), f2.to_dict("list"))]
    return out, [sum(v[0] == "p" for v in d["value"]) for d in (f, f2)]


for t in (text, bad):
    for kw in ({}, {"on_error": "skip"}):
        (mine, marks), (base, base_marks) = rows(S, t, kw), rows(B, t, kw)
        print(kw, "bad" if t is bad else "clean", "same rows:", mine == base, "marked:", marks, "base:", base_marks)
