"""cep: a complex event processing engine built on IEDYN.

Layers, one-way: language (``cep.ast``, ``cep.parser``, ``cep.compiler``) ->
plan (``cep.planner``) -> runtime (``cep.runtime``, ``cep.engine``) ->
I/O (``cep.io``) -> command line (``cep.cli``).  The engine core does no I/O.
"""

__version__ = "0.1.0"
