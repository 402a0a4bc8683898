"""Shared pytest fixtures. Kept minimal: each helper's fixtures live in its own module and are imported here."""

# Kafka broker, Maven jar cache and the one SparkSession of a test run (owner: the kafka-spark connectors)
from kafka_fixture import jar_cache, kafka_broker, spark  # noqa: F401
