"""CORE (the C++ CEP engine, Python bindings ``pycer``) on a JSON-lines stream: the measured child.

Why a separate script: ``pycer`` ships a wheel for CPython 3.13 only, so this runs in its own 3.13
environment (``bench/.venv-core``, made by ``bench.core``) and imports nothing from cep; it reads the
same file the other systems read, builds one ``PyEvent`` per record, sends it to an in-process
``PyOfflineServer`` and writes CORE's output to the output file at the end (``get_output`` may be
called once: sending after it crashes pycer 0.1.6, so the offline server holds every match's text until
the end). Prints one JSON line: records, composites (CORE's output lines), run time, floor.

Usage (3.13 interpreter): ``python bench/core_runner.py --query Q --decl D -i IN -o OUT --fields a:str,b:float``
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="core_runner")
    ap.add_argument("--decl", required=True, help="CORE stream declaration (CREATE STREAM ...)")
    ap.add_argument("--query", required=True, help="CEQL query text")
    ap.add_argument("--fields", required=True,
                    help="comma list name:type (type int, float, str) in the declaration's attribute order")
    ap.add_argument("-i", "--input", required=True)
    ap.add_argument("-o", "--output", default="/dev/null")
    ap.add_argument("--no-floor", action="store_true")
    args = ap.parse_args(argv)

    import pycer

    try:
        from orjson import loads
    except ImportError:  # the environment is made with orjson; plain json keeps the runner usable
        loads = json.loads
    kinds = {"int": pycer.PyIntValue, "float": pycer.PyDoubleValue, "str": pycer.PyStringValue}
    fields = [(name, kinds[kind]) for name, kind in (f.split(":") for f in args.fields.split(","))]

    floor_s = -1.0
    if not args.no_floor:  # decode each record and build its values, nothing else
        t0 = time.perf_counter()
        with open(args.input, "rb") as f:
            for line in f:
                rec = loads(line)
                [make(rec[name]) for name, make in fields]
        floor_s = time.perf_counter() - t0

    server = pycer.PyOfflineServer()
    server.declare_stream(args.decl)
    server.add_query(args.query)
    send = server.send_event
    event = pycer.PyEvent
    records = 0
    t0 = time.perf_counter()
    with open(args.input, "rb") as f:
        for line in f:
            rec = loads(line)
            send(event(0, [make(rec[name]) for name, make in fields]))
            records += 1
    out = server.get_output()
    with open(args.output, "w") as o:
        o.write(out)
    run_s = time.perf_counter() - t0
    composites = out.count("\n[") + (1 if out.startswith("[") else 0)
    sys.stdout.write(json.dumps({"system": "core", "records": records, "composites": composites,
                                 "run_s": run_s, "floor_s": floor_s, "pid": os.getpid(),
                                 "python": sys.version.split()[0]}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
