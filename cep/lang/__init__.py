"""The language layer: pattern text -> AST -> checked AST -> GCQ (``compiler``).

Nothing here knows about plans, indexes or I/O.  The grammar is package data
(``cep.grammar``), so an installed ``cep`` parses without the source tree.
"""
