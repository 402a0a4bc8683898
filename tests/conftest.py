"""Shared pytest fixtures. Kept minimal: each helper's fixtures live in its own module and are imported here."""

import os
import sys
from pathlib import Path

import pytest

# Kafka broker, Maven jar cache and the one SparkSession of a test run (owner: the kafka-spark connectors)
from kafka_fixture import jar_cache, kafka_broker, spark  # noqa: F401

# no compiled-code cache across the tests' runs of `cep run` (cep.codegen.use_code_cache): they would fill
# the user's ~/.cache/cep with thousands of one-off patterns; tests/test_code_cache.py switches it on itself
os.environ.setdefault("CEP_CODE_CACHE", "0")


# With pytest-xdist (the default run: ``-n auto --dist loadgroup`` in pyproject.toml), the tests that use the
# session's SparkSession or Kafka broker run on one worker, so the run starts one Spark JVM and one broker, as
# without xdist; every other test (the local-cluster deploy test and the subprocess ``cep spark`` runs among
# them: they start JVMs of their own) goes to whichever worker is free.
SHARED_JVMS = ("spark", "kafka_broker")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the group into the node id
def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(name in SHARED_JVMS for name in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("jvm"))


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
