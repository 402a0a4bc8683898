"""Driver program of the local-cluster test, run by ``spark-submit`` (tests/test_spark_deploy.py).

It reports where the executors' Python workers import cep from, then runs ``cep spark`` (``spark_cli.main``)
with no ``--master``: the master, the state partitions and the shipped archive all come from spark-submit.
"""

from __future__ import annotations

import json
import sys


def where(batches):
    import os
    import sys
    from pathlib import Path

    import pandas as pd

    import cep

    # the executor JVM's command line: a Python worker's parent is PySpark's daemon, whose parent is the JVM
    daemon = Path(f"/proc/{os.getppid()}/stat").read_text()
    jvm = daemon[daemon.rindex(")") + 2:].split()[1]
    cmdline = Path(f"/proc/{jvm}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    for _ in batches:
        yield pd.DataFrame({"file": [cep.__file__], "exe": [sys.executable], "pid": [os.getpid()],
                            "jvm": [cmdline], "daemon": [sys.modules["__main__"].__spec__.name]})


def main(argv: list[str]) -> int:
    from cep.connectors.spark_cli import main as cep_spark
    from cep.connectors.spark_session import make_session

    spark = make_session(kafka=False)
    print("MASTER " + spark.sparkContext.master, flush=True)
    rows = spark.range(0, 4, 1, 4).mapInPandas(where, "file string, exe string, pid long, jvm string, daemon string"
                                               ).collect()
    print("WORKERS " + json.dumps([r.asDict() for r in rows]), flush=True)
    return cep_spark(argv)  # getOrCreate: the same session; stops it at the end


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
