"""A pattern's composite events as generated code: the match object, and the fused
enumerate-and-build function of the new matches an insert completes.

Why: on output-heavy streams (the thesis' joins, the fraud stream with 1.34 million matches)
the engine spends most of its time per composite event, not per input event.  A match used
to cost a generator step of the enumeration (a list of leaf tuples), a call mapping it to its
events (another list), a call of the match builder reading every EMIT attribute of every
event, and the id and key from those events.  But the enumeration is nested loops, one per
node of the join tree, and an event bound by an outer loop is the same for every match below
it: so the output is built inside the loops (``PatternRuntime.loop_source``), each event's
fields read once in the loop that binds it, and the inserted event's before any loop.  What
is left per match is the innermost event's reads, one dict display, the id's hash and the
``Output`` tuple.

One home for each rule: the match object's items (``_items``: EMIT, or each alias's fields
without it) serve both the builder of single matches (``match_builder``) and the fused
function; the id is ``cep.event.match_id_source``, the key ``match_key_source``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from cep import codegen
from cep.event import Output, match_id_seed, match_id_source
from cep.lang.gcq import TIME_ATTR, CompiledPattern

__all__ = ["match_builder", "match_key_source", "new_matches_fn"]


class _Items:
    """The items of a match object as source: per atom, the lines that read what the items
    need from its event ``e<i>`` (hoistable to where the event is bound); the dict display
    over those names (and over the aggregate slots ``g<j>``); the names the lines call."""

    def __init__(self) -> None:
        self.reads: dict[int, list[str]] = {}
        self.display = "{}"
        self.env: dict[str, Any] = {}
        self.names: dict[int, dict[str, str]] = {}  # per atom: attribute -> the local its reads set


def _items(cp: CompiledPattern) -> _Items:
    """The match object of ``cp`` (docs/language.md section 5): with EMIT, its items in order
    (a bare attribute as read, ``alias.*`` as prefixed fields, an aggregate slot, or an
    expression over the events and slots); without it, each alias's fields (a repeated
    alias's list of events from its slot)."""
    out = _Items()
    k = len(cp.atoms)
    reads: dict[int, dict[str, None]] = {i: {} for i in range(k)}  # ordered sets of lines
    items: list[str] = []

    def fields(i: int) -> str:
        reads[i][f"fd{i} = e{i}.fields"] = None
        return f"fd{i}"

    if cp.emit is None:
        pos = {a.alias: i for i, a in enumerate(cp.atoms)}
        events_slot = {cp.gaps[a.gap].alias: j for j, a in enumerate(cp.aggregates) if a.fn == "events"}
        for alias in cp.output_aliases:
            items.append(f"{alias!r}: {fields(pos[alias])}" if alias in pos else f"{alias!r}: g{events_slot[alias]}")
    else:
        args = ", ".join([f"e{i}" for i in range(k)] + [f"g{j}" for j in range(len(cp.aggregates))])
        for j, spec in enumerate(cp.emit):
            if spec.star is not None:
                prefix = f"{cp.atoms[spec.star].alias}."
                f = fields(spec.star)
                reads[spec.star][f"v{j} = {{{prefix!r} + _k: _v for _k, _v in {f}.items()}}"] = None
                items.append(f"**v{j}")
            elif spec.attr is not None:
                i, name = spec.attr
                reads[i][f"v{j} = e{i}.ts" if name == TIME_ATTR else f"v{j} = {fields(i)}.get({name!r})"] = None
                out.names.setdefault(i, {}).setdefault(name, f"v{j}")
                items.append(f"{spec.name!r}: v{j}")
            elif spec.slot is not None:
                items.append(f"{spec.name!r}: g{spec.slot}")
            else:
                out.env[f"_f{j}"] = spec.fn
                items.append(f"{spec.name!r}: _f{j}({args})")
    out.reads = {i: list(lines) for i, lines in reads.items()}
    out.display = "{" + ", ".join(items) + "}"
    return out


def match_builder(cp: CompiledPattern) -> Callable[[Sequence[Any]], dict]:
    """One generated function: the events of a match (atom order) -> its ``match`` object (docs/language.md section 5).

    Why generated: it runs once per composite event of the paths that build single matches
    (retractions, decided matches of patterns with gap elements, ``Engine.matches``), so the
    EMIT items become one dict display (bare attributes read inline, other items call their
    compiled expression) instead of a loop over item objects.
    """
    it = _items(cp)
    k, m = len(cp.atoms), len(cp.aggregates)
    lines = ["def build(events, aggs=()):", f"    {''.join(f'e{i}, ' for i in range(k))}= events"]
    if m:
        lines.append(f"    {''.join(f'g{j}, ' for j in range(m))}= aggs")
    lines += [f"    {line}" for i in range(k) for line in it.reads[i]]
    lines.append(f"    return {it.display}")
    return codegen.define(f"{cp.name}: match builder", "\n".join(lines) + "\n", "build", it.env)


def match_key_source(cp: CompiledPattern, first: str, known: dict[str, str] | None = None) -> str | None:
    """Python source of the partition key of a match of ``cp`` whose first event is held by the
    name ``first`` (the rule of ``gcq.read_key``); None for a pattern without a partition key.
    ``known``: attributes of that event already read into locals (an EMIT of the key: q2's
    ``r.k``), used instead of reading them again (this runs per composite event)."""
    a0 = cp.atoms[0] if cp.atoms else None
    if not cp.partition_vars or a0 is None:
        return None
    known = known or {}
    items = "".join(known[a] + ", " if a in known else f"{first}.ts, " if a == TIME_ATTR
                    else f"{first}.fields.get({a!r}), " for a in cp.key_attrs(a0))
    return f"({items})"


def new_matches_fn(cp: CompiledPattern, rt: Any, events: dict, emitted: list[int], atom: int) -> Callable | None:
    """``out(chain, e, outs)``: append to ``outs`` the composite events (``+``) of the matches
    that inserting event ``e`` into ``atom`` added (``chain``: the update path's deltas, not
    None), and count them in ``emitted[0]``; ``events`` are the engine's events by serial.

    The same matches in the same order as building each match of ``rt.changes(chain)``: the
    enumeration's own loops (``PatternRuntime.loop_source``), with each event's reads
    (its EMIT attributes, its position for the id, the key from the first event) where its loop
    binds it, and ``e``'s before the loops (every new match holds ``e`` in ``atom``: its leaf's
    delta is its one tuple).  None when the loops cannot be generated (a tree too deep for
    Python's nested blocks) or the pattern has aggregate slots (gap elements: the engine
    decides those matches, ``Engine._complete``).
    """
    if cp.aggregates:
        return None
    k = len(cp.atoms)
    it = _items(cp)
    env: dict[str, Any] = {**it.env, "E": events, "Output": Output, "NEW": tuple.__new__,
                           "NAME": cp.name, "SEED": match_id_seed(cp.name), "emitted": emitted}
    key = match_key_source(cp, "e0", it.names.get(0))

    def reads(i: int) -> list[str]:
        got = [f"p{i} = e{i}.pos", *it.reads[i]]
        return got + [f"key = {key}"] if key is not None and i == 0 else got

    def bind(i: int, tv: str) -> list[str]:
        return [] if i == atom else [f"e{i} = E[{tv}[{rt.slot_serial[i]}]]", *reads(i)]

    id_lines, mid = match_id_source("SEED", [f"p{i}" for i in range(k)])
    match = [*id_lines, f"append(NEW(Output, (NAME, '+', {mid}, {it.display}, {'key' if key else 'None'})))"]
    loops = rt.loop_source(bind, match, env, inserted=atom)
    if loops is None:
        return None
    env["split"] = rt.split_chain
    lines = ["def out(chain, e, outs):", f"    e{atom} = e", *[f"    {line}" for line in reads(atom)],
             "    append = outs.append", "    n = len(outs)", "    roots, D = split(chain)", *loops,
             "    emitted[0] += len(outs) - n"]
    return codegen.define(f"{cp.name}: new matches of {cp.atoms[atom].alias}", "\n".join(lines) + "\n", "out", env)
