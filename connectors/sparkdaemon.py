"""PySpark's daemon for cep's Python workers, without a full garbage collection after every task.

Why: PySpark's daemon (``pyspark.daemon``) forks the Python workers and, in a reused worker, runs ``gc.collect()``
after every task. A cep worker keeps its key groups' engines, the compiled patterns, pandas and pyarrow between
tasks, so each of those full collections walks the whole heap: ~45 ms each, after each of a micro-batch's tasks
(the route task and one per state partition), ~0.3 CPU s per 10^5-event micro-batch on ``local[1]``, about a
seventh of the Spark path's CPU (bench/results/spark.md, 2026-12-07c). ``cep run`` has no such collection: what
exists when its record loop starts is frozen and CPython's own thresholds do the rest (``cep.gc_policy``).

Here the collection after a task is of the young generations only: the cycles a task made and dropped are freed
as before, and what survived into the oldest generation is left to CPython's own full collections (run once the
objects that survived have grown by a quarter of the old generation), as in any long-running Python process.
Memory stays bounded by the same rule.

Spark runs this module instead of ``pyspark.daemon`` when ``spark.python.daemon.module`` names it (SPARK-22959, a
setting made for wrappers of PySpark's daemon like this one); ``make_session`` sets it where the Python workers
run the driver's own interpreter (so this module imports at the daemon's start), and docs/kafka-spark.md says
how to set it on a cluster. Everything else is PySpark's own daemon, imported and run as is.
"""

from __future__ import annotations

import gc
from typing import Any

from pyspark import daemon

AFTER_TASK_GENERATION = 1  # the youngest two generations: what a task made and dropped in cycles


class AfterTaskGc:
    """The ``gc`` module as ``pyspark.daemon`` sees it: ``collect`` goes no further than the young generations
    (PySpark's only call is the collection after each task); any other name is the ``gc`` module's own."""

    @staticmethod
    def collect(generation: int = 2) -> int:
        return gc.collect(min(generation, AFTER_TASK_GENERATION))

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)


daemon.gc = AfterTaskGc()

if __name__ == "__main__":
    daemon.manager()
