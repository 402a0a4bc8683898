"""Does cyclic garbage made inside cep's stream_gc sections get collected in a worker whose after-task
collection stops at generation 1 (cep's daemon) or is full (PySpark's)?  No Spark: a loop of "tasks", each
of GROUPS ``stream_gc`` sections (as the state step's key groups) that make CYCLES dropped reference cycles
(a dict holding itself and a 1 kB string); with HOLD=1 a section's cycles live until the next section drops them
(cyclic structures that outlive one ``stream_gc`` section: frozen, then unfrozen into the oldest generation); after
each task gc.collect(AFTER), or with AFTER=daemon cep's daemon's after-task collection (``AfterTaskGc``).

    python bench/results/spark_1207b_soak/cycles.py AFTER TASKS GROUPS CYCLES HOLD
"""
import gc
import resource
import sys

from cep.gc_policy import stream_gc

tasks, groups, cycles, hold = (int(a) for a in sys.argv[2:6])
if sys.argv[1] == "daemon":
    from cep.connectors.sparkdaemon import AfterTaskGc

    collect = AfterTaskGc().collect
else:
    after = int(sys.argv[1])

    def collect() -> int:
        return gc.collect(after)
held: list = []
ballast = [{"i": i, "s": str(i)} for i in range(120_000)]  # a worker's long-lived objects (~117k)
gc.collect()
for t in range(tasks):
    for _ in range(groups):
        with stream_gc():
            made = []
            for i in range(cycles):
                d = {"s": "x" * 1000 + str(i)}
                d["self"] = d
                made.append(d)
            held[:] = made if hold else []
            del d, made
    collect()
    if t % (tasks // 8) == 0 or t == tasks - 1:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        st = gc.get_stats()
        print(f"task {t:4d}: gen2 objects {len(gc.get_objects(2)):8d} full collections {st[2]['collections']:4d}"
              f" collected by full {st[2]['collected']:8d} maxrss {rss:7.1f} MB", flush=True)
