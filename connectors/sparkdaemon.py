"""PySpark's daemon for cep's Python workers, without a full garbage collection after every task.

Why: PySpark's daemon (``pyspark.daemon``) forks the Python workers and, in a reused worker, runs ``gc.collect()``
after every task. A cep worker keeps its key groups' engines, the compiled patterns, pandas and pyarrow between
tasks, so each of those full collections walks the whole heap: ~45 ms each, after each of a micro-batch's tasks
(the route task and one per state partition), ~0.3 CPU s per 10^5-event micro-batch on ``local[1]``, about a
seventh of the Spark path's CPU (bench/results/spark.md, 2026-12-07b). ``cep run`` has no such collection: what
exists when its record loop starts is frozen and CPython's own thresholds do the rest (``cep.gc_policy``).

Here the collection after a task is of the young generations, which frees the cycles a task made and dropped as
before, and a full collection follows only once the oldest generation has grown by a quarter since the last one:
CPython's own rule for full collections. CPython cannot apply that rule in a cep worker by itself: the record
loops freeze what exists and unfreeze it into the oldest generation (``cep.gc_policy.stream_gc``, per key group),
which CPython's count of objects promoted does not see, so without this check cyclic garbage that reached the
oldest generation would wait for PySpark's next full collection, and there would be none. Counting the oldest
generation (``gc.get_objects(2)``) costs ~12 ms in a worker holding cep's engines (against ~45 ms for a full
collection): after every task that was ~0.06 CPU s per micro-batch (bench/results/spark.md, 2026-12-07b). So it is
counted only once the interpreter's allocated memory blocks (``sys.getallocatedblocks()``, ~30 us) have grown by
``BLOCKS_GROWTH`` since the last count: garbage holds its blocks until it is collected, so garbage that piles up
raises that number, and a collection brings it back down. In a steady stream it stays put and no task pays for a
count. The price: where most blocks are untracked objects (strings, numbers), the oldest generation may grow by
more than a quarter before it is counted (by up to 1/16 of all blocks), a bounded delay. (Not the resident memory:
the allocator keeps what a collection frees, so a gate on it would only ever rise.)

Spark runs this module instead of ``pyspark.daemon`` when ``spark.python.daemon.module`` names it (SPARK-22959, a
setting made for wrappers of PySpark's daemon like this one); ``make_session`` sets it where the Python workers
run the driver's own interpreter (so this module imports at the daemon's start), and docs/kafka-spark.md says
how to set it on a cluster. Everything else is PySpark's own daemon, imported and run as is.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any

from pyspark import daemon

AFTER_TASK_GENERATION = 1  # the youngest two generations: what a task made and dropped in cycles
OLDEST = 2
OLDEST_GROWTH = 1.25  # a full collection once the oldest generation has grown by a quarter (CPython's own rule)
BLOCKS_GROWTH = 1 + 1 / 16  # the oldest generation is counted once the allocated blocks have grown by 1/16


class AfterTaskGc:
    """The ``gc`` module as ``pyspark.daemon`` sees it: a full ``collect()`` (PySpark's only call, after each
    task) collects the young generations, and the oldest too once it has grown by ``OLDEST_GROWTH`` since its
    last collection here (the first call collects it: no size known yet), counted only when ``blocks()`` has
    grown by ``BLOCKS_GROWTH`` since the last count; any other name is the ``gc`` module's own. A worker forked by
    the daemon starts with the daemon's copy and counts for itself."""

    def __init__(self, blocks: Callable[[], int] = sys.getallocatedblocks) -> None:
        self.oldest_after_full = 0  # objects in the oldest generation after the last full collection here
        self.blocks_at_count = 0  # ``blocks()`` when the oldest generation was last counted (or collected)
        self.blocks = blocks

    def collect(self, generation: int = OLDEST) -> int:
        found = gc.collect(min(generation, AFTER_TASK_GENERATION))
        if generation >= OLDEST and (now := self.blocks()) >= self.blocks_at_count * BLOCKS_GROWTH:
            self.blocks_at_count = now
            if len(gc.get_objects(OLDEST)) > self.oldest_after_full * OLDEST_GROWTH:
                found += gc.collect(OLDEST)
                self.oldest_after_full = len(gc.get_objects(OLDEST))
                self.blocks_at_count = self.blocks()
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)


daemon.gc = AfterTaskGc()

if __name__ == "__main__":
    daemon.manager()
