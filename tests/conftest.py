"""Shared pytest fixtures. Kept minimal: each helper's fixtures live in its own module and are imported here."""

import os
import sys
from pathlib import Path

# Kafka broker, Maven jar cache and the one SparkSession of a test run (owner: the kafka-spark connectors)
from kafka_fixture import jar_cache, kafka_broker, spark  # noqa: F401

# no compiled-code cache across the tests' runs of `cep run` (cep.codegen.use_code_cache): they would fill
# the user's ~/.cache/cep with thousands of one-off patterns; tests/test_code_cache.py switches it on itself
os.environ.setdefault("CEP_CODE_CACHE", "0")


# With pytest-xdist (the default run: ``-n auto`` in pyproject.toml) the tests are handed out by the scheduler
# below. The modules of the tests that share the session's SparkSession and Kafka broker (test_spark*.py and
# test_kafka*.py but the deploy test, which starts JVMs of its own) are one unit, run by one process: the run
# starts one Spark JVM and one broker and resolves the Maven jars once, as without xdist. A module with
# module-scoped fixtures (a wheel built once, a stream produced once) is one unit too; every other test is a
# unit of its own, so the processes stay busy to the end. (pytest-xdist's own ``--dist loadgroup`` reads the
# group into the node id, which pytest 9.2 no longer lets it change: the groups were silently ignored.)
SHARED_JVMS = "jvm"


def _unit(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    name = Path(module).name
    if name.startswith(("test_spark", "test_kafka")) and name != "test_spark_deploy.py":
        return SHARED_JVMS
    if _has_module_fixtures(module):
        return module
    return nodeid


_MODULE_FIXTURES: dict[str, bool] = {}


def _has_module_fixtures(module: str) -> bool:
    if module not in _MODULE_FIXTURES:
        path = Path(__file__).resolve().parent.parent / module
        text = path.read_text() if path.is_file() else ""
        _MODULE_FIXTURES[module] = 'scope="module"' in text or 'scope="class"' in text
    return _MODULE_FIXTURES[module]


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") not in ("load", "loadscope", "loadgroup"):
        return None  # asked for another distribution: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    config.option.loadscopereorder = False  # the collection's order, below: the longest unit first
    return Units(config, log)


def pytest_collection_modifyitems(config, items):
    """In an xdist worker, the shared-JVM unit first, the deploy test next, then the other whole modules, then
    the single tests: the long units start first, so none is left running alone at the end (the same order
    in every worker, as xdist needs)."""
    if hasattr(config, "workerinput"):
        def rank(item) -> int:
            unit = _unit(item.nodeid)
            if unit == SHARED_JVMS:
                return 0
            return 1 if unit.endswith("test_spark_deploy.py") else 2 if unit.endswith(".py") else 3

        items.sort(key=rank)


def pytest_configure(config):
    """With PYTHONDONTWRITEBYTECODE set (some machines set it), compile the checkout's modules once, as
    installing cep does: else every ``cep`` subprocess of the tests and every xdist worker compiles all of cep
    again from source (about 0.15 s of CPU per process, several hundred processes). The same as
    bench/procs.py's ``with_bytecode``; the files go to the ``__pycache__`` directories git ignores."""
    if not sys.flags.dont_write_bytecode or hasattr(config, "workerinput"):  # once, in the main process
        return
    import compileall

    root = Path(__file__).resolve().parent.parent
    for package in ("cep", "connectors", "tests"):
        compileall.compile_dir(root / package, quiet=1)
