"""The plan layer: a GCQ -> a generalized join tree and its indexes (``planner``).

Every decision ``cep explain`` can print is made here: the tree, which
predicates are indexed and which only filtered, the query class.
"""
