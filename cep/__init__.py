"""cep: a complex event processing engine built on IEDYN.

Layers, one-way, one folder each: language (``cep.lang``: parser, checker,
compiler to a GCQ) -> plan (``cep.plan``: GYO reduction, join tree, indexes)
-> runtime (``cep.runtime``: IEDYN and the engine with event time) -> I/O
(``cep.io``: readers, writers, Kafka, checkpoints) -> connectors
(``cep.connectors``: Spark) -> commands (``cep.commands``, ``cep.cli``).
The engine core does no I/O and imports nothing above it.
"""

__version__ = "0.1.0"
