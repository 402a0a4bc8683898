"""Process-time marks in PySpark's Python workers (``bench.worker_marks``; loaded through ``PYTHONPATH``).

Why: sampling profilers miss CPU a worker spends in long C calls or between tasks (py-spy counts wall-active
samples, ``ITIMER_PROF`` loses ticks), which is how PySpark's full ``gc.collect()`` after every task went unseen
(bench/results/spark.md, 2026-12-07b). Here every worker appends ``"<process_time> <faults> <tag>"`` lines, at the end of
each task, to ``$CEP_WMARKS/wlog-<pid>.txt`` (with the minor page faults so far between the two):
``+name``/``-name`` a call's entry and exit, ``>name``/``<name`` a
generator's ``next``, ``=task <query id> <batch id> <stage> <partition>`` the task (Spark's local properties).

Marked: PySpark's worker entry (``main``) and its per-task steps and serializers, the UDFs cep hands to Spark
(``_route_batches``/``_handler``'s ``fn``), the stage-1 and stage-2 functions (connectors/spark_route.py,
spark_pack.py, spark_state.py), the engine's batch calls, ``gc.collect`` (the daemon's collection after a task)
and every collection CPython runs (``gc.gen<N>``, from ``gc.callbacks``: an automatic one is inside whatever
allocated). Nothing happens without ``CEP_WMARKS``.
"""

import os

if os.environ.get("CEP_WMARKS"):
    import functools
    import gc
    import importlib
    import resource
    import time
    import types

    _LOG: list = []
    _pt = time.process_time
    _ru = resource.getrusage
    _SELF = resource.RUSAGE_SELF
    _OUT = os.environ["CEP_WMARKS"]

    def _mark(tag):
        _LOG.append((_pt(), _ru(_SELF).ru_minflt, tag))

    def _marked(f, name):
        """``f`` with marks around each call (and each ``next`` of a generator it returns)."""

        @functools.wraps(f)
        def w(*a, **k):
            _mark("+" + name)
            try:
                r = f(*a, **k)
            finally:
                _mark("-" + name)
            if isinstance(r, types.GeneratorType):
                return _marked_gen(r, name)
            if name in _FACTORIES and callable(r):
                return _marked(r, name + "()")
            return r

        return w

    def _marked_gen(it, name):
        while True:
            _mark(">" + name)
            try:
                x = next(it)
            except StopIteration:
                _mark("<" + name)
                return
            _mark("<" + name)
            yield x

    def _wrap(mod, name):
        obj = importlib.import_module(mod)
        parts = name.split(".")
        for p in parts[:-1]:
            obj = getattr(obj, p)
        f = getattr(obj, parts[-1])
        w = _marked(f, name)
        if isinstance(obj, type) and isinstance(obj.__dict__.get(parts[-1]), staticmethod):
            w = staticmethod(w)
        setattr(obj, parts[-1], w)

    _FACTORIES = {"_router"}  # returns the per-file route function: marked too
    PYSPARK = {
        "pyspark.worker": ["read_udfs", "setup_spark_files", "setup_broadcasts", "setup_memory_limits",
                           "check_python_version", "report_times", "send_accumulator_updates"],
        "pyspark.sql.pandas.serializers": [
            "ArrowStreamSerializer.load_stream", "ArrowStreamSerializer.dump_stream",
            "ArrowStreamPandasUDFSerializer.dump_stream", "ApplyInPandasWithStateSerializer.load_stream",
            "ApplyInPandasWithStateSerializer.dump_stream"],
        "pyspark.sql.conversion": ["ArrowBatchTransformer.to_pandas", "PandasToArrowConversion.convert"],
    }
    CEP = {
        # each function in the module whose globals its callers look it up in (an imported name is marked there)
        "cep.connectors.spark_route": ["_router", "_packed_frame"],
        "cep.connectors.spark_pack": ["_pack_segments"],
        "cep.connectors.spark_state": ["_by_bucket", "_group_step", "_engines_for", "_lines_of", "_decode_group",
                                       "_push_values", "_out_rows", "_frame", "_save", "_state_engines"],
        "cep.runtime.engine": ["Engine.push_batch", "Engine.advance_watermark", "Engine.dumps", "Engine.loads"],
    }
    UDFS = ("_route_batches.<locals>.fn", "_handler.<locals>.fn")  # what cep hands to Spark

    def _read_command(f):
        """PySpark's ``read_command`` with cep's UDFs it returns marked (by their qualified names)."""

        @functools.wraps(f)
        def w(*a, **k):
            r = f(*a, **k)
            if isinstance(r, tuple) and r and getattr(r[0], "__qualname__", "") in UDFS:
                r = (_marked(r[0], "udf" + r[0].__qualname__.split(".")[0]), *r[1:])  # udf_route_batches...
            return r

        return w

    def _task_tag():
        from pyspark import TaskContext

        tc = TaskContext.get()
        if tc is None:
            return "=task - - - -"
        return (f"=task {tc.getLocalProperty('sql.streaming.queryId') or '-'} "
                f"{tc.getLocalProperty('streaming.sql.batchId') or '-'} {tc.stageId()} {tc.partitionId()}")

    _ready: list = []

    def _install_cep():
        """cep's functions, marked at a worker's first task (importing them in the daemon would change it)."""
        for mod, names in CEP.items():
            for name in names:
                _wrap(mod, name)

    import pyspark.worker as _w

    for _mod, _names in PYSPARK.items():
        for _name in _names:
            _wrap(_mod, _name)
    _w.read_command = _read_command(_w.read_command)
    _read_udfs = _w.read_udfs

    def _read_udfs_tagged(*a, **k):
        _LOG.append((_pt(), _ru(_SELF).ru_minflt, _task_tag()))
        return _read_udfs(*a, **k)

    _w.read_udfs = _read_udfs_tagged
    _orig_main = _w.main

    def main(infile, outfile):
        if not _ready:
            _ready.append(True)
            _install_cep()
        _mark("+main")
        try:
            return _orig_main(infile, outfile)
        finally:
            _mark("-main")
            _mark("+marks.write")  # its end opens the next task's lines: the analysis leaves it out
            with open(f"{_OUT}/wlog-{os.getpid()}.txt", "a") as fh:
                fh.writelines(f"{t:.6f} {f} {tag}\n" for t, f, tag in _LOG)
            _LOG.clear()
            _mark("-marks.write")

    _w.main = main
    _gcc = gc.collect

    def _collect(*a):
        _mark("+gc.collect")
        try:
            return _gcc(*a)
        finally:
            _mark("-gc.collect")

    gc.collect = _collect

    def _gc_phase(phase, info):
        """CPython's own collections (automatic or not), by generation: ``gc.gen<N>`` marks."""
        _mark(("+" if phase == "start" else "-") + f"gc.gen{info['generation']}")

    gc.callbacks.append(_gc_phase)
