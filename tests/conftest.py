"""Shared pytest fixtures. Kept minimal: each helper's fixtures live in its own module and are imported here."""

import os

# Kafka broker, Maven jar cache and the one SparkSession of a test run (owner: the kafka-spark connectors)
from kafka_fixture import jar_cache, kafka_broker, spark  # noqa: F401

# no compiled-code cache across the tests' runs of `cep run` (cep.codegen.use_code_cache): they would fill
# the user's ~/.cache/cep with thousands of one-off patterns; tests/test_code_cache.py switches it on itself
os.environ.setdefault("CEP_CODE_CACHE", "0")
