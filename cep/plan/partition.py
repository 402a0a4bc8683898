"""The partition key of a pattern per event type: which attributes route an event to its key group.

Why here (the plan layer): a key-partitioned run needs it wherever events are split by key, and
there is more than one such place: Spark's key groups (``cep.connectors.spark``) and the workers
of ``cep run --workers N`` (``cep.runtime.handler``: each worker indexes only the (pattern,
event) pairs whose key it owns).  Both must split alike, so the rule has this one home.
"""

from __future__ import annotations

from cep.lang.gcq import CompiledPattern

__all__ = ["gap_keyed_attrs", "partition_attrs"]


def partition_attrs(cp: CompiledPattern) -> dict[str, tuple[str, ...]] | None:
    """Per event type, the attributes holding the partition key; None when the pattern runs as one group.

    None when the pattern has no partition variable, or when two atoms of the same type read the key from
    different attributes (then an event's key depends on the alias it plays, and one group per event would
    not be enough).
    """
    if not cp.partition_vars:
        return gap_keyed_attrs(cp)
    by_type: dict[str, tuple[str, ...]] = {}
    for atom in cp.atoms:
        attrs = cp.key_attrs(atom)
        prev = by_type.setdefault(atom.type, attrs)
        if prev != attrs:
            return None
    # gap elements (NOT, strategies): an event that may lie in a match's gap must meet the match's
    # engine, so its type is routed by the gap attributes equated with the partition key
    for gap in cp.gaps:
        attrs_list = []
        for v in cp.partition_vars:
            found = None
            for gattr, (ai, src) in zip(gap.key_attrs, gap.key_sources, strict=True):
                atom = cp.atoms[ai]
                if v in atom.vars and atom.attrs[atom.vars.index(v)] == src:
                    found = gattr
                    break
            if found is None:
                return None  # the gap's events are not keyed like the match: one group
            attrs_list.append(found)
        for t in gap.types:
            prev = by_type.setdefault(t, tuple(attrs_list))
            if prev != tuple(attrs_list):
                return None
    return by_type


def gap_keyed_attrs(cp: CompiledPattern) -> dict[str, tuple[str, ...]] | None:
    """Per event type, the routing attributes of a pattern with one positive element; None: one group.

    Such a pattern has no partition variable (a variable shared by every positive element), but each match depends
    only on gap events (NOT, repetition, strategies) equal to its element on the gap's key equalities
    (``PARTITION BY`` gives them): routing the element by the attributes every gap equates, and each gap's events
    by the attributes equated with them, brings a match and every event it depends on into one key group.
    """
    if len(cp.atoms) != 1 or not cp.gaps:
        return None
    common: set[str] | None = None
    for gap in cp.gaps:
        sources = {src for _ai, src in gap.key_sources}
        common = sources if common is None else common & sources
    if not common:
        return None
    attrs = tuple(sorted(common))
    by_type = {cp.atoms[0].type: attrs}
    for gap in cp.gaps:
        by_source = {src: gattr for gattr, (_ai, src) in zip(gap.key_attrs, gap.key_sources, strict=True)}
        gattrs = tuple(by_source[a] for a in attrs)
        for t in gap.types:
            if by_type.setdefault(t, gattrs) != gattrs:
                return None  # an event's key would depend on the role it plays
    return by_type


def ownership(patterns: list[CompiledPattern], workers: int) -> list[dict[str, tuple[str, ...]] | int]:
    """How ``cep run --workers`` splits the (pattern, event) pairs: per pattern, its key attributes per
    event type (``partition_attrs``: an event belongs to worker ``hash(key value) % workers``, the
    value alone for one attribute, else the tuple), or, for a pattern that runs as one group, the
    worker that runs it whole (such patterns are dealt round robin, so several of them spread).

    Why Python's ``hash``: equal keys hash alike (``1`` and ``1.0`` included), it costs one call per
    event, and forked workers share the string hash seed.  A value that cannot be hashed (a list or
    an object: a null key for the engine) belongs to worker 0.
    """
    out: list[dict[str, tuple[str, ...]] | int] = []
    whole = 0
    for cp in patterns:
        attrs = partition_attrs(cp)
        if attrs is None:
            out.append(whole % workers)
            whole += 1
        else:
            out.append(attrs)
    return out
