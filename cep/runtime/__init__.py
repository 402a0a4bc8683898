"""The runtime layer: IEDYN over a plan (``iedyn``) and the multi-pattern engine
with event time (``engine``).  No I/O; state is plain data.
"""
