"""bench.worker_marks' analysis of the workers' mark logs (no Spark: a log written by hand)."""

from pathlib import Path

from bench.worker_marks import GAP, per_batch, tasks_of

# one worker: the warm-up query's batch 0, then the main query's batches 0, 1 and 2 (a route task and a state
# task each, batch 2's state task with an automatic collection inside the engine), then a no-data batch 3
LOG = """\
0.0 0 +main
0.0 0 =task warm 0 0 0
0.1 0 +udf_route_batches
0.3 0 -udf_route_batches
0.3 0 -main
{main}"""
TASK = """\
{t0} {f0} +main
{t0} {f0} =task q {b} 1 0
{t1} {f0} +udf_route_batches
{t2} {f0} +_router()
{t3} {f1} -_router()
{t4} {f1} -udf_route_batches
{t4} {f1} -main
{t4} {f1} +marks.write
{t5} {f1} -marks.write
{t5} {f1} +gc.collect
{t6} {f1} -gc.collect
{t6} {f1} +main
{t6} {f1} =task q {b} 2 0
{t7} {f1} +Engine.push_batch
{t7} {f1} +gc.gen0
{t8} {f2} -gc.gen0
{t9} {f2} -Engine.push_batch
{t9} {f2} -main
"""


def write_log(tmp_path: Path) -> Path:
    tasks = []
    t, f = 1.0, 100
    for b in range(3):
        gc = 0.05 if b == 2 else 0.0
        ts = [t, t + 0.01, t + 0.02, t + 0.12, t + 0.13, t + 0.5, t + 0.52, t + 0.6, t + 0.6 + gc, t + 0.9]
        tasks.append(TASK.format(**{f"t{i}": f"{x:.6f}" for i, x in enumerate(ts)}, b=b, f0=f, f1=f + 40,
                                 f2=f + 50))
        t, f = t + 1.0, f + 100
    tasks.append(f"{t:.6f} {f} +main\n{t:.6f} {f} =task q 3 2 0\n{t + 0.01:.6f} {f} -main\n")
    log = tmp_path / "wlog-1.txt"
    log.write_text(LOG.format(main="".join(tasks)))
    return log


def test_each_mark_gets_the_cpu_and_faults_while_it_is_innermost(tmp_path):
    tasks = tasks_of(write_log(tmp_path))
    assert [key for key, _c, _f in tasks] == [("warm", "0")] + [("q", str(b)) for b in (0, 0, 1, 1, 2, 2, 3)]
    (_key, cpu, faults) = tasks[1]
    # the task's own marks, then the gap after it: the daemon's collection and what is outside any mark (the
    # marks' own writing is left out)
    assert round(cpu["_router()"], 6) == 0.1 and faults["_router()"] == 40
    assert round(cpu["udf_route_batches"], 6) == 0.02 and round(cpu["main"], 6) == 0.01
    assert round(cpu["gc.collect"], 6) == 0.02 and round(cpu[GAP], 6) == 0 and "marks.write" not in cpu


def test_steady_batches_are_the_main_query_s_routed_batches_after_the_first(tmp_path):
    by_kind, n = per_batch([write_log(tmp_path)])
    assert n == 2  # batches 1 and 2 of q: not the warm-up query, q's first batch or its no-data batch
    route, state = by_kind["route tasks (1.0 per batch)"], by_kind["state tasks (1.0 per batch)"]
    assert round(route["_router()"][0], 6) == 0.1 and route["_router()"][1] == 40
    # batch 2's automatic collection inside the engine is the collection's, not the engine's
    assert round(state["gc.gen0"][0], 6) == 0.025 and round(state["Engine.push_batch"][0], 6) == 0.275
