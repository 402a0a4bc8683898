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

import weakref
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


def new_matches_fn(cp: CompiledPattern, rt: Any, events: dict, emitted: list[int], atom: int,
                   lines: bool = False) -> Callable | None:
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
    if lines:
        got = _line_runs(cp)
        if got is not None:
            return _new_lines_fn(cp, rt, events, emitted, atom, *got)
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


# ---------------------------------------------------------------------------
# lines mode: each composite event as its encoded JSON line (``Engine(lines=True)``)


def _line_runs(cp: CompiledPattern) -> tuple[list[tuple[int, list[tuple]]], bool] | None:
    """The match object's items as runs of consecutive items read from one event (atom
    position, items), and whether an ``alias.*`` item is among them; None when some item is
    not read from one event alone (an expression, an aggregate slot) or when an ``alias.*``
    item's keys could repeat another item's name (a dict display keeps the first position
    and the last value of a repeated key: the per-event encoding below could not)."""
    if cp.aggregates:
        return None
    items: list[tuple[int, tuple]] = []
    star = False
    if cp.emit is None:
        pos = {a.alias: i for i, a in enumerate(cp.atoms)}
        if any(alias not in pos for alias in cp.output_aliases):
            return None
        items = [(pos[alias], ("alias", alias)) for alias in cp.output_aliases]
    else:
        prefixes = [f"{cp.atoms[spec.star].alias}." for spec in cp.emit if spec.star is not None]
        if len(set(prefixes)) != len(prefixes):
            return None
        star = bool(prefixes)
        for spec in cp.emit:
            if spec.star is not None:
                items.append((spec.star, ("star", f"{cp.atoms[spec.star].alias}.")))
            elif spec.attr is not None and spec.slot is None:
                if any(spec.name.startswith(p) for p in prefixes):
                    return None
                items.append((spec.attr[0], ("attr", spec.name, spec.attr[1])))
            else:
                return None
    runs: list[tuple[int, list[tuple]]] = []
    for i, item in items:
        if runs and runs[-1][0] == i:
            runs[-1][1].append(item)
        else:
            runs.append((i, [item]))
    return runs, star


def _fragment_fn(cp: CompiledPattern, i: int, runs: list[list[tuple]], star: bool) -> Callable:
    """``frag(e)``: event ``e``'s part of every line of a match holding it as atom ``i``: the
    JSON text of each of its runs of items (``"name":value,...``, encoded by orjson as
    ``encode_output`` encodes the whole line, so the bytes are the same), one string for one
    run, a tuple for several; with an ``alias.*`` item in the pattern each run starts with its
    comma (an alias without fields has none); False when orjson cannot encode a value (an
    integer beyond 64 bits: the line takes ``encode_output``'s way, per match)."""
    body = ["    fd = e.fields"]
    outs = []
    for r, run in enumerate(runs):
        parts = []
        for item in run:
            if item[0] == "alias":
                parts.append(f"{item[1]!r}: fd")
            elif item[0] == "star":
                parts.append(f"**{{{item[1]!r} + _k: _v for _k, _v in fd.items()}}")
            else:
                _, name, attr = item
                parts.append(f"{name!r}: e.ts" if attr == TIME_ATTR else f"{name!r}: fd.get({attr!r})")
        body.append(f"        j{r} = dumps({{{', '.join(parts)}}}, default=default)")
        outs.append(f'("," + j{r}[1:-1].decode() if len(j{r}) > 2 else "")' if star else f"j{r}[1:-1].decode()")
    lines = ["def frag(e):", body[0], "    try:", *body[1:],
             f"        return {outs[0] if len(outs) == 1 else '(' + ', '.join(outs) + ')'}",
             "    except TypeError:", "        return False"]
    import orjson

    from cep.io.writers import _default  # the writer's rule for sets, tuples and SQL booleans

    return codegen.define(f"{cp.name}: line fragment of {cp.atoms[i].alias}", "\n".join(lines) + "\n", "frag",
                          {"dumps": orjson.dumps, "default": _default})


_LINE_CACHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # PatternRuntime -> (events, caches by atom)


def _cached_fragments(frag: Callable, events: dict, part: Callable | None = None) -> tuple[dict, Callable]:
    """A cache of ``(pos, frag(event))`` (with ``part``: ``(frag(event), part(event))``) by
    serial, and its miss function (serial -> the pair, stored).  Why: an event bound by an inner loop is in many matches (q1: every S below an R),
    and encoding it is a dict and an orjson call.  Serials are never reused, so an entry stays
    right; entries of events the engine no longer holds are dropped when the cache has doubled."""
    cache: dict[int, tuple] = {}
    limit = [4096]

    def miss(s: int) -> tuple:
        e = events[s]
        got = cache[s] = (e.pos, frag(e)) if part is None else (frag(e), part(e))
        if len(cache) > limit[0]:
            for old in [x for x in cache if x not in events]:
                del cache[old]
            limit[0] = max(4096, 2 * len(cache))
        return got

    return cache, miss


def _new_lines_fn(cp: CompiledPattern, rt: Any, events: dict, emitted: list[int], atom: int,
                  runs: list[tuple[int, list[tuple]]], star: bool) -> Callable | None:
    """``new_matches_fn`` appending each composite event as its JSON line (a str, newline
    ended, exactly ``encode_output``'s bytes once encoded) instead of an ``Output``.

    Why: per composite event the rest is fixed cost (docs: bench/results/output_ab.md): a
    dict display, a 4-key dict, an orjson call over both, the Output tuple, and freeing them
    all.  Here each event's part of the line is encoded once (``_fragment_fn``: the inserted
    event's on its first match, the others' cached by serial), and a match's line is one
    f-string of constant text, its id and its events' parts.  A match with a part orjson could
    not encode is built as an ``Output`` as before (``encode_outputs`` writes both)."""
    k = len(cp.atoms)
    by_atom: dict[int, list[list[tuple]]] = {}
    seed = match_id_seed(cp.name)
    slot_of_run: list[tuple[int, int]] = []
    for i, run in runs:
        slot_of_run.append((i, len(by_atom.setdefault(i, []))))
        by_atom[i].append(run)
    env: dict[str, Any] = {"E": events, "Output": Output, "NEW": tuple.__new__, "NAME": cp.name,
                           "SEED": seed, "emitted": emitted, "BUILD": match_builder(cp)}
    # one cache per atom, shared by the pattern's functions (an event inserted as one atom is bound
    # by loops later): kept on the runtime, whose events dict it serves
    shared = _LINE_CACHES.get(rt)
    if shared is None or shared[0] is not events:
        shared = _LINE_CACHES[rt] = (events, {})
    # two events, both with items (q1, q2): each event's share of the id is cached with its part of
    # the line, the first's as the hash state that has read its position and NUL, the second's as
    # its position's bytes: a match's id is a copy, an update and the digest (the bytes hashed are
    # match_id's: BLAKE2b is streaming), no f-string and encode per match
    pair = k == 2 and set(by_atom) == {0, 1}

    def first_part(e: Any) -> Any:
        st = seed()
        st.update(f"{e.pos}\x00".encode())
        return st

    def last_part(e: Any) -> bytes:
        return e.pos.encode()

    for i, rs in by_atom.items():
        if i not in shared[1]:
            shared[1][i] = _cached_fragments(_fragment_fn(cp, i, rs, star), events,
                                             (first_part if i == 0 else last_part) if pair else None)
        env[f"C{i}"], env[f"M{i}"] = shared[1][i]

    def bind(i: int, tv: str) -> list[str]:
        if i == atom:
            return []
        got = [f"sv{i} = {tv}[{rt.slot_serial[i]}]"]
        if i in by_atom:
            return [*got, f"{f'x{i}, q{i}' if pair else f'p{i}, x{i}'} = C{i}.get(sv{i}) or M{i}(sv{i})"]
        return [*got, f"p{i} = E[sv{i}].pos"]

    def ref(i: int, r: int) -> str:
        return f"x{i}" if len(by_atom[i]) == 1 else f"x{i}[{r}]"

    import orjson

    def lit(text: str) -> str:
        return text.replace("{", "{{").replace("}", "}}")

    head = lit('{"pattern":' + orjson.dumps(cp.name).decode() + ',"op":"+","id":"')
    if star:
        body = ["b = " + " + ".join(ref(i, r) for i, r in slot_of_run), "b = b[1:]"]
        items = "{b}"
    else:
        body = []
        items = ",".join("{" + ref(i, r) + "}" for i, r in slot_of_run)
    line = "f" + repr(head + "{h.hexdigest()}" + lit('","match":{') + items + lit("}}") + "\n")
    if pair:
        id_lines, mid = ["h = q0.copy()", "h.update(q1)"], "h.hexdigest()"
    else:
        id_lines, mid = match_id_source("SEED", [f"p{i}" for i in range(k)])
    key = match_key_source(cp, "e0")
    slow_events = [f"e{i} = E[sv{i}]" for i in range(k) if i != atom]
    test = " or ".join(f"x{i} is False" for i in by_atom)
    match = []
    if atom in by_atom:  # the inserted event's part: on its first match (cached for later loops)
        sv = f"s{atom}[{rt.slot_serial[atom]}]"
        match.append(f"if x{atom} is None:")
        match.append(f"    x{atom}, q{atom} = C{atom}.get({sv}) or M{atom}({sv})" if pair else
                     f"    x{atom} = (C{atom}.get({sv}) or M{atom}({sv}))[1]")
    match += [*id_lines,f"if {test}:", *[f"    {s}" for s in slow_events],
              f"    append(NEW(Output, (NAME, '+', {mid}, BUILD(({''.join(f'e{i}, ' for i in range(k))})), "
              f"{key if key else 'None'})))",
              "else:", *[f"    {s}" for s in body], f"    append({line})"]
    loops = rt.loop_source(bind, match, env, inserted=atom)
    if loops is None:
        return None
    env["split"] = rt.split_chain
    lines = ["def out(chain, e, outs):", f"    e{atom} = e", *([] if pair else [f"    p{atom} = e.pos"]),
             *([f"    x{atom} = None"] if atom in by_atom else []),
             "    append = outs.append", "    n = len(outs)", "    roots, D = split(chain)", *loops,
             "    emitted[0] += len(outs) - n"]
    return codegen.define(f"{cp.name}: new lines of {cp.atoms[atom].alias}", "\n".join(lines) + "\n", "out", env)
