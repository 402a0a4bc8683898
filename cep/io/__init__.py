"""Input and output for the run loop: record sources and decoders, JSON-lines sinks.

Kept apart from the engine core (``cep.runtime.engine`` does no I/O); connectors for
Kafka is ``cep.io.kafka`` (same source/sink protocol); Spark lives in ``cep.connectors``.
"""

from cep.io.readers import BadRecord, make_decoder, open_source, parse_only
from cep.io.writers import encode_output, open_sink

__all__ = ["BadRecord", "encode_output", "make_decoder", "open_sink", "open_source", "parse_only"]
