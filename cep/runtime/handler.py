"""The engine's generated per-event-type handlers and its generated expiry (issue 15).

Why: ``Engine.push`` used to walk, for every event, a route list per type (a tuple unpacked
per atom, one filter call per atom, one insert call per atom computing the same leaf tuple
again), a loop over the expiry queues, and a dict of counters.  None of that depends on the
event: it is fixed by the patterns.  So, per engine, this module writes one function
``batch(events, outs)``: a loop over the events whose body, per event type, does all the work
one event of that type causes, in straight-line code (the watermark, the highest time, the
next serial and the counters live in the loop's locals; a call and a dict lookup per event
were a measurable part of its cost):

- the late check and the watermark move (with the decisions and the expiry it triggers);
- the atom filters inlined, each attribute the filters read fetched once for all of them
  (card testing reads ``amount`` once, not three times);
- each distinct leaf-tuple shape computed once (the atoms ``s1`` and ``s2`` of card testing
  have the same tuple, so the event is one tuple shared by both);
- the atoms' generated update paths (``PatternRuntime._prop_of_atom``) called directly, the
  new matches enumerated and built inline (no per-output method chain);
- the holder mask, the expiry-queue registration and the counters (plain ints on the engine).

Expiry is generated the same way, and the loop calls it only when a window's oldest time
(``Engine._oldest``, a lower bound kept on insert) is before ``watermark - w``: per window, the
due entries ``(ts, serial, leaf tuple or None)`` are popped from the in-order queue (or the heap
of out-of-order ones), and one due event (the common in-order case: the watermark moves with
every event) goes through its atoms' expiry paths with the entry's leaf tuple (recomputed per
shape only when the atoms holding it have different shapes); several go the same way, one after
the other (a batch per atom through the general batch path cost ~4x as much per entry for the
3-5 entries a jump of the watermark makes due).

The loop is written four times (``_batch``): for an engine that owns its watermark, again for a
batch of inserts only, again for parsed JSON records of inserts only (``Engine.push_records``: the
record's checks in the loop, its Event made only when the engine keeps or emits it, ``_fused_head``), and
for an engine whose source owns the watermark.

Everything rare stays in ``Engine``'s plain methods: retractions, decided matches of patterns
with gap elements (``_complete``/``_decide``), gap-index expiry, batch expiry.  The sources
are made with ``cep.codegen.define``, so a traceback shows the generated line and
``cep explain --generated`` lists them.
"""

from __future__ import annotations

import heapq
import math
from typing import TYPE_CHECKING, Any

from cep import codegen
from cep.errors import BatchInterrupted
from cep.event import LineEvent
from cep.lang.expr import inline_conditions, inline_number_tests
from cep.lang.gcq import TIME_ATTR
from cep.runtime.iedyn import leaf_tuple_line
from cep.runtime.output import new_matches_fn

if TYPE_CHECKING:  # the engine builds its handlers; this module only reads its structures
    from cep.runtime.engine import Engine

__all__ = ["Handlers", "build_handlers", "quiet_inserter"]


class Handlers:
    """An engine's generated functions: ``batch(events, outs)`` pushes events (appending their
    composite events to ``outs``; ``_batch``), and ``expire(wm)`` drops what fell out of every
    window at watermark ``wm``."""

    def __init__(self, batch: Any, expire: Any) -> None:
        self.batch = batch
        self.expire = expire


class _Source:
    """One generated function's lines and the names they refer to."""

    def __init__(self, eng: Engine) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {"eng": eng, "E": eng.events, "H": eng._holders, "heappush": heapq.heappush,
                                    "heappop": heapq.heappop}
        self.names: dict[int, str] = {}
        self.base = 0  # added to every line's indent (a body inside the batch loop)
        self.exit = "return"  # how a body ends early ("continue" inside the batch loop)
        self.bodies = 0  # inlined filter bodies so far (each names its constants apart)
        # the batch loop's own locals (``_batch``): the window queue whose oldest time is the local
        # ``_old`` (the inline expiry's, ``_expire_inline``), and whether the watermark and the
        # highest time are written through to the engine at every move (patterns with gap elements:
        # what a move calls reads them) or only when the loop hands over (``_handover``)
        self.old_local: int | None = None
        self.write_through = True
        # the batch loop's copy for an engine that owns its watermark (True) or not (False): the
        # loop is written once for each, so neither tests ``own_watermark`` per event (``_batch``)
        self.own = True
        self.inserts = False  # the batch loop's copy for a batch its caller says holds inserts only
        # the batch loop's copy over parsed JSON records (``Engine.push_records``): the record is
        # checked in the loop (the dict ``f``, ``typ``, ``ts``) and its Event made only when something reads it
        # (``_make_event``: ``has_e``, per type's body)
        self.fused = False
        self.has_e = True
        self.made: dict[Any, Any] = {}  # functions made for the lines, by what they are (made once)

    def name(self, prefix: str, obj: Any) -> str:
        """A global name for ``obj`` (one name per object)."""
        got = self.names.get(id(obj))
        if got is None:
            got = self.names[id(obj)] = f"{prefix}{len(self.names)}"
            self.env[got] = obj
        return got

    def add(self, indent: int, *lines: str) -> None:
        pad = "    " * (indent + self.base)
        self.lines += [pad + line for line in lines]

    def define(self, label: str, entry: str) -> Any:
        return codegen.define(label, "\n".join(self.lines) + "\n", entry, self.env)


def _leaf_shape(src: _Source, eng: Engine, ri: int, ai: int,
                ts: str = "e.ts") -> tuple[list[str], list[str], str | None]:
    """The lines setting ``t`` to atom ``ai``'s leaf tuple of event ``e`` (fields ``f``, serial
    ``s``, time ``ts``), the tuple's items, and the condition (on the values read, before the
    tuple is made) under which it is not inserted (a null join value)."""
    reads, items, null, env = eng.runtimes[ri].leaf_source(ai, ts)
    src.env.update(env)
    return [*reads, leaf_tuple_line("t", items)], items, null


def _make_event(src: _Source, indent: int = 1) -> None:
    """In the batch loop's copy over raw lines (``src.fused``), the lines that make the record's
    Event ``e`` (a ``LineEvent``: its position is the line number ``_i``) before the first line of
    the type's body that reads it (a filter call, ``E[s] = e``); nothing when it is made already.
    (``EV``: the class, the batch function's argument, ``LineEvent`` or a subclass of it.)
    Why: an event no atom keeps (card testing: an amount between 100 and 400) never needs one."""
    if src.fused and not src.has_e:
        src.add(indent, "e = EV()", "e.type = typ", "e.ts = ts", "e.fields = f", "e._n = _i", "e.op = '+'")
        src.has_e = True


def _mark(src: _Source, indent: int) -> None:
    """Lines before something that may append to ``outs`` in the batch loop: the first time an
    event does, ``_k0`` is where its outputs start (``_ke``: the event it was taken for), so an
    event that raises drops exactly what it emitted (``_batch``).  Why here and not per event:
    the length taken for every event was a fixed cost of each, for the few that emit."""
    if src.exit == "continue":
        src.add(indent, "if _ke != _i:", "    _ke = _i", "    _k0 = len(outs)")


def _handover(src: _Source, indent: int) -> None:
    """Lines that write the batch loop's watermark and highest time to the engine (before a call
    that may read them), when they are not written through at every move (the loop's stand-ins
    for None, ``_batch``, written back as None)."""
    if src.exit == "continue" and not src.write_through:
        src.add(indent, _WRITE_BACK)


# the batch loop's watermark and highest time written back to the engine: its stand-ins for
# None (``NOWM``, ``NOMX``: ``_batch``) as None
_WRITE_BACK = "eng.watermark, eng.max_ts = None if wm is NOWM else wm, None if mx is NOMX else mx"


class _NoWatermark:
    """The batch loop's watermark before there is one (``Engine.watermark`` None): no time is
    below it, so the late test is one comparison (``ts < wm``) rather than a test for None first.
    Compared only until the first event moves the watermark (a Python call each time)."""

    __slots__ = ()

    def __gt__(self, other: Any) -> bool:  # ``ts < NOWM``
        return False

    __ge__ = __gt__

    def __lt__(self, other: Any) -> bool:  # ``NOWM > ts``
        return False

    __le__ = __lt__


class _NoMax:
    """The batch loop's highest time before there is one (``Engine.max_ts`` None): every time is
    above it (``ts > mx`` holds), as ``mx is None or ts > mx`` did."""

    __slots__ = ()

    def __lt__(self, other: Any) -> bool:  # ``ts > NOMX``
        return True

    def __gt__(self, other: Any) -> bool:  # ``ts < NOMX``
        return False


NOWM = _NoWatermark()
NOMX = _NoMax()


def _watermark_move(src: _Source, eng: Engine, indent: int = 1) -> None:
    """The watermark move of ``e`` (time ``ts``; ``Engine.push``'s contract), with the decisions
    and the expiry it triggers.

    The batch loop holds the watermark, the highest time, the next serial and the counters in
    locals (``_batch``: read before the loop, written back after it and before the calls that read
    them); with gap elements (``src.write_through``) the watermark and the highest time are
    written through when they move, since what the move calls (decisions, ``_complete``) reads
    them from the engine."""
    wt = src.write_through
    src.add(indent, "if ts > mx:", "    mx = eng.max_ts = ts" if wt else "    mx = ts")
    if not src.own:  # the source owns the watermark: nothing else moves
        return
    # a lateness of (integer) 0: the watermark is the time itself (``ts - 0`` is ``ts``)
    lag = eng.lateness
    wm = "ts" if type(lag) is int and lag == 0 else "ts - _lateness"
    src.add(indent + 1, f"wm = eng.watermark = {wm}" if wt else f"wm = {wm}")
    if eng._decided:
        src.add(indent + 1, "if wm > eng._decide_at or (wm == eng._decide_at and not eng._decide_strict):")
        _mark(src, indent + 2)
        src.add(indent + 2, "outs += eng._decide()")
    if len(eng._windowed) == 1 and not eng._gap_expiry:
        _expire_inline(src, eng, indent + 1)
        return
    due = _due_test(src, eng)
    if due is not None:
        src.add(indent + 1, f"if {due}:", "    expire(wm)")


def _entry_layout(eng: Engine, qi: int) -> tuple[int, int, int] | None:
    """``(i, j, n)`` when window ``qi``'s in-order queue holds each event as its leaf tuple itself
    (``n`` items: the time at ``i``, the serial at ``j``) rather than an entry ``(ts, serial, leaf
    tuple)``; None when it holds entries.  The case: every event type of the window's pattern takes
    ``_plain_insert`` (a whole engine, no gap index, one leaf-tuple shape per type), and those shapes
    hold the time and the serial at the same places.  (The heap of out-of-order events keeps
    entries: it is ordered by time, then serial.)

    Why: an entry was one more tuple per kept event, made on insert and freed an hour of stream
    later (cold memory), and unpacked when it left; the leaf tuple already holds both."""
    if eng.share is not None:
        return None
    ri = eng._windowed[qi][1]
    layout = None
    for atom in eng.patterns[ri].atoms:
        etype = atom.type
        if etype in eng.gap_route:
            return None
        shapes = set()
        for r, ai, *_x in eng.route.get(etype, ()):
            reads, items, null, _env = eng.runtimes[r].leaf_source(ai, "ts")
            shapes.add((*reads, leaf_tuple_line("t", items), str(null)))
        if len(shapes) != 1:
            return None
        if items.count("ts") != 1 or items.count("s") != 1:
            return None
        got = (items.index("ts"), items.index("s"), len(items))
        if layout not in (None, got):
            return None
        layout = got
    return layout


def _unpack_entry(layout: tuple[int, int, int]) -> str:
    """The targets that unpack a leaf tuple of ``layout`` (``_entry_layout``) into ``_ts`` and ``s``."""
    return ", ".join(_entry_items(layout))


def _entry_items(layout: tuple[int, int, int]) -> list[str]:
    """The locals a leaf tuple of ``layout`` is unpacked into: ``_ts`` (its time), ``s`` (its serial),
    ``_u<k>`` (item ``k``, read by an expiry guard without a subscript, ``_guarded``)."""
    i, j, n = layout
    return ["_ts" if k == i else "s" if k == j else f"_u{k}" for k in range(n)]


def _expire_inline(src: _Source, eng: Engine, indent: int) -> None:
    """The expiry of one window (and no gap index) at watermark ``wm``, in the batch loop: when the
    only due entry is the head of the in-order queue (in-order input: the watermark moves with
    every event, and one event leaves per move), it leaves here; anything else (the entries due
    after it, an out-of-order one in the heap) is ``expire(wm)``'s.

    Why: the call of ``expire`` and its general walk (the due list, both queues scanned) were a
    fixed cost of nearly every event of an in-order stream.  The window's oldest time is the
    loop's local ``_old`` (``Engine._oldest`` is written before ``expire`` reads it and read back
    after).  The event's own variables (``e``, ``ts``) survive: the expired entry's event is read
    into ``e`` only when the entry carries no leaf tuple, and ``e`` is restored after."""
    (qi, ri, qmask), = eng._windowed
    w = eng._windows[qi]
    q, heap, oldest = src.name("Q", eng._in_order[qi]), src.name("HP", eng._expiry[qi]), src.name("OLDEST", eng._oldest)
    src.env["inf"] = math.inf
    call = [f"{oldest}[{qi}] = _old", "expire(wm)", f"_old = {oldest}[{qi}]"]
    src.add(indent, f"_lim = wm - {w!r}", "if _old < _lim:")
    src.add(indent + 1, f"if {heap} or not {q}:", *(f"    {x}" for x in call), "else:")
    # the head is due unless ``_old`` was below it (a lower bound): then it goes back untouched
    layout = _entry_layout(eng, qi)
    if layout is None:
        src.add(indent + 2, f"_ts, s, t = {q}.popleft()", f"_old = {q}[0][0] if {q} else inf",
                "if _ts >= _lim:", f"    {q}.appendleft((_ts, s, t))", "    _old = _ts", "else:")
    else:  # the queue holds leaf tuples (``_entry_layout``)
        src.add(indent + 2, f"t = {q}.popleft()", f"{_unpack_entry(layout)} = t",
                f"_old = {q}[0][{layout[0]}] if {q} else inf",
                "if _ts >= _lim:", f"    {q}.appendleft(t)", "    _old = _ts", "else:")
    # an expired event read from ``E`` goes into ``e`` and ``f``: the loop's own is kept and restored
    # (over raw lines the record's dict ``f``: its Event is made after the expiry, ``_make_event``)
    _expire_entry(src, eng, ri, qmask, indent + 3, keep="f" if src.fused else "e",
                  known=None if layout is None else _entry_items(layout))
    # more due (a burst at one time, a jump of the watermark): the rest as ``expire``'s batch
    src.add(indent + 3, "if _old < _lim:", *(f"    {x}" for x in call))


def _due_test(src: _Source, eng: Engine) -> str | None:
    """The condition under which ``expire(wm)`` has work at watermark ``wm``: some window queue's
    oldest time (``Engine._oldest``, a lower bound) is before ``wm - w``, or a gap-index entry is due
    (``Engine._gap_expire_at``); None when nothing ever expires.  Why: the watermark moves with
    nearly every event, and most moves expire nothing in some window; the test is the same
    comparison ``expire`` makes, so it calls ``expire`` exactly when that has something to do."""
    tests = [f"{src.name('OLDEST', eng._oldest)}[{qi}] < wm - {eng._windows[qi]!r}" for qi, _ri, _m in eng._windowed]
    if eng._gap_expiry:
        tests.append("wm > eng._gap_expire_at")
    return " or ".join(tests) or None


def _filters(src: _Source, entries: list[tuple[int, int, Any, int]], eng: Engine) -> list[str | None]:
    """Lines setting ``p0``, ``p1``... (one per route entry: its atom's filter holds); None for
    an atom without a filter.  Inlined with each attribute read once, or calls when a filter
    is too deep to inline."""
    atoms = [eng.patterns[ri].atoms[ai] for ri, ai, *_ in entries]
    exprs = [(j, a.filter_expr) for j, a in enumerate(atoms) if a.filter is not None]
    reads: dict[str, str] = {}

    def access(attr) -> str:
        if attr.name == TIME_ATTR:
            return "ts"
        if attr.name not in reads:
            reads[attr.name] = f"F{len(reads)}"
        return reads[attr.name]

    inlined = None
    out: list[str | None] = [None] * len(atoms)
    if exprs and all(x is not None for _j, x in exprs):
        # one constant prefix per inlined body: the types' bodies share the batch function's names
        src.bodies += 1
        block = inline_number_tests([x for _j, x in exprs], access, f"_c{src.bodies}_")
        if block is not None:
            floats = inline_number_tests([x for _j, x in exprs], access, f"_c{src.bodies}f_", floats=True)
            assert floats is not None  # (the same conditions, constants written as floats)
            return _number_block(src, block, floats, exprs, reads, len(atoms))
        inlined = inline_conditions([x for _j, x in exprs], access, f"_c{src.bodies}_")
    if inlined is None:
        _make_event(src)
        for j, _x in exprs:
            out[j] = f"p{j}"
            src.add(1, f"p{j} = {src.name('flt', atoms[j].filter)}(e)")
        return out
    conds, env = inlined
    src.env.update(env)
    src.add(1, *(f"{v} = f.get({a!r})" for a, v in reads.items()))
    first: dict[str, str] = {}  # condition source -> the variable holding it (s1 and s2: one test)
    conds = _hoist_number_tests(src, conds, list(reads.values()))
    for (j, _x), cond in zip(exprs, conds, strict=True):
        out[j] = first.setdefault(cond, f"p{j}")
        if out[j] == f"p{j}":
            src.add(1, "try:", f"    p{j} = {cond}", "except OverflowError:", f"    p{j} = False")
    return out


def _number_block(src: _Source, block: tuple[str, list[str], dict[str, Any]],
                  floats: tuple[str, list[str], dict[str, Any]], exprs: list[tuple[int, Any]],
                  reads: dict[str, str], entries: int) -> list[str | None]:
    """The filters of one attribute's comparisons with numbers (``cep.lang.expr.inline_number_tests``):
    the number tested once, as an ``if``, the conditions inside it, all false outside it (card testing:
    ~7 fewer bytecodes an event than the hoisted test ``N0`` stored and read by each condition).
    A float (``floats``: the same tests, their integer constants written as floats where a float
    holds them exactly, so each comparison is the same) and an int are tested apart, each test as a
    branch (``p0 = True if ... else False``): then CPython runs a comparison of two floats (or two
    small ints) in its specialized compare-and-jump instruction, where the value of a comparison
    (``p0 = (F0 < 100)``, a float against an int) took its general path (card testing: ~400
    fewer instructions a record of ``cep run``'s loop, 1.5 %).  A comparison of two floats cannot raise
    (``OverflowError`` is caught in the int branch only: the tests' contract).
    Returns ``_filters``' list: per route entry the variable holding its filter, or None."""
    v, tests, env = block
    fv, ftests, fenv = floats
    assert fv == v
    out: list[str | None] = [None] * entries
    src.env.update(env)
    src.env.update(fenv)
    src.add(1, *(f"{name} = f.get({a!r})" for a, name in reads.items()))
    first: dict[str, str] = {}  # test source -> the variable holding it (s1 and s2: one test)
    as_int: list[str] = []
    as_float: list[str] = []
    for (j, _x), test, ftest in zip(exprs, tests, ftests, strict=True):
        out[j] = first.setdefault(test, f"p{j}")
        if out[j] == f"p{j}":
            as_float.append(f"p{j} = True if {ftest} else False")
            as_int += ["try:", f"    p{j} = True if {test} else False", "except OverflowError:", f"    p{j} = False"]
    src.add(1, f"if type({v}) is float:", *(f"    {x}" for x in as_float), f"elif type({v}) is int:",
            *(f"    {x}" for x in as_int), "else:",
            f"    {' = '.join(dict.fromkeys(x for x in out if x is not None))} = False")
    return out


def _hoist_number_tests(src: _Source, conds: list[str], names: list[str]) -> list[str]:
    """``conds`` with the number test of an attribute read (``(type(F0) is int or type(F0) is
    float)``, ``cep.lang.expr``'s guard of a comparison) that several conditions repeat computed
    once before them, as ``N0``.  Why: card testing's two filters (``amount < 100``, ``amount >
    400``) spent two thirds of their bytecodes on the same two ``type`` calls; the test is tried
    float first (event attributes read from JSON are mostly floats), which gives the same truth."""
    out = list(conds)
    for v in names:
        guard = f"(type({v}) is int or type({v}) is float)"
        if sum(c.count(guard) for c in out) < 2:
            continue
        n = "N" + v[1:]
        src.add(1, f"{n} = type({v}) is float or type({v}) is int")
        out = [c.replace(guard, n) for c in out]
    return out


def _owners(src: _Source, eng: Engine, etype: str) -> dict[int, str]:
    """In a worker of ``cep run --workers`` (``Engine.share``): lines setting ``_o0``, ``_o1``...
    (whether this worker owns event ``e`` for a pattern: ``cep.plan.partition.ownership``, one test
    per distinct key), and per pattern of type ``etype`` the test: a variable, ``True`` or ``False``
    (a pattern run whole by one worker).  Empty for a whole engine (no test anywhere)."""
    if eng.share is None:
        return {}
    me, workers = eng.share
    patterns = {ri for ri, *_x in eng.route.get(etype, ())}
    patterns.update(_gap_pattern(eng, ix) for ix, *_x in eng.gap_route.get(etype, ()))
    tests: dict[int, str] = {}
    by_key: dict[tuple[str, ...], str] = {}
    for ri in sorted(patterns):
        rule = eng._ownership[ri]
        if isinstance(rule, int):
            tests[ri] = str(rule == me)
            continue
        attrs = rule[etype]
        got = by_key.get(attrs)
        if got is None:
            got = by_key[attrs] = f"_o{len(by_key)}"
            reads = ["ts" if a == TIME_ATTR else f"f.get({a!r})" for a in attrs]
            key = reads[0] if len(reads) == 1 else "(" + ", ".join(reads) + ",)"
            src.add(1, "try:", f"    {got} = hash({key}) % {workers} == {me}", "except TypeError:  # a list or an object: worker 0",
                    f"    {got} = {me == 0}")
        tests[ri] = got
    return tests


def _gap_pattern(eng: Engine, ix: Any) -> int:
    """The pattern whose gap index ``ix`` is."""
    return next(ri for ri, c in enumerate(eng.checks) if c is not None and any(x is ix for x in c.indexes))


def _guarded(src: _Source, eng: Engine, ri: int, ai: int, tv: str, items: list[str] | None = None) -> str | None:
    """The test under which atom ``ai``'s update path can change something for leaf tuple ``tv``
    (``PatternRuntime.entry_guard``: its sibling's index has the tuple's key), or None when it
    must always be called.  Why: card testing's s1 stores nothing itself, and on a sparse stream
    its join with s2's index is mostly empty: the test costs a lookup, the call a frame."""
    guard = eng.runtimes[ri].entry_guard(ai)
    if guard is None:
        return None
    groups, positions = guard
    # the tuple's items where the caller has them in locals (the insert: no subscript per event)
    at = [items[p] if items is not None else f"{tv}[{p}]" for p in positions]
    key = at[0] if len(at) == 1 else "(" + "".join(f"{x}, " for x in at) + ")"
    # (a group is never None: ``in`` is the same test, without a method call)
    return f"{key} in {src.name('GG', groups)}"


def _emit_new(src: _Source, eng: Engine, ri: int, ai: int, indent: int) -> None:
    """Lines that append the composite events the update path's deltas ``ch`` (not None) add:
    one call of the pattern's generated enumerate-and-build function for atom ``ai``
    (``cep.runtime.output.new_matches_fn``), or each match built alone where there is none."""
    _mark(src, indent)
    if eng.checks[ri] is not None:  # gap elements: decided now or pending (Engine._complete)
        src.add(indent, f"eng._complete({ri}, {ai}, s, ch, outs)")
        return
    cp, rt = eng.patterns[ri], eng.runtimes[ri]
    key = ("new", ri, ai)  # one function for both copies of the batch loop (``_batch``)
    out = src.made.get(key, src)
    if out is src:
        out = src.made[key] = new_matches_fn(cp, rt, eng.events, eng._emitted[ri], ai, lines=eng.lines)
    if out is not None:
        src.add(indent, f"{src.name('new', out)}(ch, e, outs)  # {cp.name}: {cp.atoms[ai].alias}")
    else:
        src.add(indent, f"for sl in {src.name('changes', rt.changes)}(ch):", f"    outs.append(eng._output({ri}, sl, '+'))")


def _insert_body(src: _Source, eng: Engine, etype: str, emit: bool) -> None:
    """Lines that index event ``e`` (time ``ts``, serial ``s``) in every atom and gap index of
    type ``etype`` it qualifies for, emit (``emit``) what that completes, and keep it (holders,
    expiry queues, counters) when something holds it."""
    entries = eng.route.get(etype, [])
    if not src.fused:  # (over raw lines ``f`` is the record's dict already)
        src.add(1, "f = e.fields")
    early = eng.share is not None and not eng._shadowed
    owns: dict[int, str] = {}
    if early:  # a worker without shadows: an event it owns for no pattern is not even filtered
        owns = _owners(src, eng, etype)
        tests = set(owns.values())
        if tests == {"False"}:
            return
        if len(tests) == 1 and tests != {"True"}:
            src.add(1, f"if not {tests.pop()}:", f"    {src.exit}")
            owns = dict.fromkeys(owns, "True")
    conds = _filters(src, entries, eng)
    passed = None  # the test every kept event passed already
    if etype in eng.gap_route:
        _make_event(src)
        src.add(1, "E[s] = e", "mask = 0")
        if not early:
            owns = _owners(src, eng, etype)
        _gap_insert(src, eng, etype, owns)
    else:
        if entries and all(c is not None for c in conds):  # an event no filter passes is not kept
            passed = " or ".join(dict.fromkeys(conds))  # type: ignore[arg-type]
            src.add(1, f"if not ({passed}):", f"    {src.exit}")
        if not early:
            owns = _owners(src, eng, etype)
    # each distinct leaf-tuple shape once, when one of its atoms passes its filter
    shapes: dict[tuple[str, ...], tuple[str, list[int]]] = {}
    null_of: dict[str, str | None] = {}
    items_of: dict[str, list[str]] = {}
    for j, (ri, ai, *_rest) in enumerate(entries):
        lines, items, null = _leaf_shape(src, eng, ri, ai, "ts")  # the body's local: the event's time
        got = shapes.setdefault((*lines, str(null)), (f"t{len(shapes)}", []))
        got[1].append(j)
        null_of[got[0]] = null
        items_of[got[0]] = items
    tuple_of: dict[int, str] = {}
    fp = "_fp" if src.exit == "continue" else "eng._fp_enabled"  # the batch loop holds it in a local
    if eng.share is None and etype not in eng.gap_route and len(shapes) == 1:
        _plain_insert(src, eng, entries, conds, shapes, null_of, items_of, emit, tuple_of)
    else:
        if etype not in eng.gap_route:
            _make_event(src)
            src.add(1, "E[s] = e", "mask = 0")
        _general_insert(src, eng, entries, conds, passed, shapes, null_of, emit, owns, tuple_of)
        src.add(1, "if not mask:", "    del E[s]", f"    {src.exit}", "H[s] = mask")
    src.add(1, f"if {fp}:", "    eng._index_fp(s, f)")
    shift = eng._shift
    type_bits = sum(bit for *_x, bit in entries)
    for qi, _ri, qmask in eng._windowed:
        if not qmask & type_bits:
            continue
        held = qmask | qmask << shift if eng._shadowed else qmask  # with the shadow bits
        q, heap = src.name("Q", eng._in_order[qi]), src.name("HP", eng._expiry[qi])
        oldest = "_old" if src.old_local == qi else f"{src.name('OLDEST', eng._oldest)}[{qi}]"
        # the entry carries the leaf tuple when this type's atoms of the window share one: the
        # expiry then deletes that very tuple (no recomputation from the event)
        shared = {tuple_of[j] for j, (*_x, bit) in enumerate(entries) if bit & qmask}
        tv = shared.pop() if len(shared) == 1 else None
        item = f"(ts, s, {tv})"
        layout = _entry_layout(eng, qi)
        assert layout is None or tv is not None  # (``_plain_insert``: one tuple for every atom of the type)
        # the in-order queue's times never decrease: in the batch loop an event at the highest
        # time seen (``mx``, moved for this event already) goes at its end; restoring
        # (``quiet_inserter``: events in serial order) compares with the queue's last entry
        # (``ts is mx``: the event moved it, no comparison of two times)
        tail = "ts is mx or ts >= mx" if src.exit == "continue" else f"not {q} or {q}[-1][{0 if layout is None else layout[0]}] <= ts"
        lines = [f"if {tail}:", f"    {q}.append({item if layout is None else tv})", "else:",
                 f"    heappush({heap}, {item})", f"if ts < {oldest}:", f"    {oldest} = ts"]
        if type_bits & ~qmask or etype in eng.gap_route:
            src.add(1, f"if mask & {held}:", *(f"    {line}" for line in lines))
        else:  # every bit a kept event of this type can have is this window's (and it has one)
            src.add(1, *lines)
    if src.exit == "continue":  # in the batch loop: the counters are locals (``_batch``)
        src.add(1, "_nins += 1", "n = len(E)", "if n > _peak:", "    _peak = n")
    else:
        src.add(1, "eng._n_inserted += 1", "n = len(E)", "if n > eng._peak_retained:", "    eng._peak_retained = n")


def _plain_insert(src: _Source, eng: Engine, entries: list, conds: list[str | None], shapes: dict,
                  null_of: dict[str, str | None], items_of: dict[str, list[str]], emit: bool,
                  tuple_of: dict[int, str]) -> None:
    """``_insert_body``'s lines for a whole engine (no worker share) and a type of no gap index whose
    atoms share one leaf-tuple shape (card testing's s1, s2 and big): the tuple is computed once
    the filters let the event in (``_insert_body``'s ``passed``), an event with a null join value
    leaves before it is stored, each group of atoms in a row under one test sets its bits of the
    holder mask at once, and ``H[s] = mask`` needs no test of the mask when some atom surely took
    the event (an atom without a filter, or tests that are all the filters ``passed`` tried).

    Why: on a sparse stream most of an event's cost is this fixed bookkeeping (the store and
    removal of an event no atom takes, a mask built bit by bit and tested), not the update paths."""
    ((*lines, _null), (tv, _users)), = shapes.items()
    null = null_of[tv]
    # the null test on the values read, before the tuple is made (an event with a null join value
    # makes none: no atom can take it, it only took a serial), then the tuple made as ``tv`` itself
    src.add(1, *lines[:-1])
    if null:
        src.add(1, f"if {null}:", f"    {src.exit}")
    src.add(1, leaf_tuple_line(tv, items_of[tv]))
    _make_event(src)
    src.add(1, "E[s] = e")
    groups: list[tuple[str | None, list[int]]] = []  # atoms in a row under one test share its ``if``
    for j in range(len(entries)):
        if groups and groups[-1][0] == conds[j]:
            groups[-1][1].append(j)
        else:
            groups.append((conds[j], [j]))
    for g, (cond, js) in enumerate(groups):
        ind = 1
        if cond is not None:
            src.add(1, f"if {cond}:")
            ind = 2
        bits = sum(entries[j][3] for j in js)
        src.add(ind, f"mask = {bits}" if g == 0 else f"mask |= {bits}")
        for j in js:
            ri, ai, _flt, _bit = entries[j]
            tuple_of[j] = tv
            src.add(ind, f"# {eng.patterns[ri].name}: {eng.patterns[ri].atoms[ai].alias}")
            # the leaf's insert form where it has one (``PatternRuntime.insert_path``: the tuple made
            # just above holds the new serial ``s``, so it is surely not stored yet)
            ins = eng.runtimes[ri].insert_path(ai)
            call = f"{src.name('prop', eng.runtimes[ri]._prop_of_atom[ai])}({tv}, 1)" if ins is None else \
                f"{src.name('ins', ins)}({tv})"
            at = ind
            # the leaf's own index update inline, the rest of the path called past its gate
            # (``PatternRuntime.insert_inline``: card testing's s2, no call for a card with no big purchase)
            inline = eng.runtimes[ri].insert_inline(ai, items_of[tv], tv, src.name) if ins is not None else None
            if inline is not None:
                lines, guard, rest = inline
                src.add(ind, *lines)
                call = f"{src.name('rest', rest)}({tv})"
            else:
                guard = _guarded(src, eng, ri, ai, tv, items_of[tv])
            if guard is not None:
                src.add(ind, f"if {guard}:")
                at = ind + 1
            src.add(at, f"ch = {call}")
            if emit:
                src.add(at, "if ch is not None:")
                _emit_new(src, eng, ri, ai, at + 1)
        if g == 0 and cond is not None:
            src.add(1, "else:", "    mask = 0")
    # ``mask`` is not 0: an atom without a filter took the event, or the event passed ``passed``,
    # the disjunction of exactly these groups' tests
    src.add(1, "H[s] = mask")


def _general_insert(src: _Source, eng: Engine, entries: list, conds: list[str | None], passed: str | None,
                    shapes: dict, null_of: dict[str, str | None], emit: bool, owns: dict[int, str],
                    tuple_of: dict[int, str]) -> None:
    """``_insert_body``'s lines for every other case (several leaf-tuple shapes, gap indexes, a
    worker's share): each shape computed when one of its atoms passes, each atom's update path
    under its test, the holder mask built bit by bit (``mask``, 0: nothing took the event)."""
    shift = eng._shift
    for (*lines, _null), (tv, users) in shapes.items():
        guard = list(dict.fromkeys(conds[j] for j in users))
        ind = 1
        if all(g is not None for g in guard) and " or ".join(guard) != passed:  # type: ignore[arg-type]
            src.add(1, f"if {' or '.join(guard)}:")  # type: ignore[arg-type]
            ind = 2
        src.add(ind, *lines)
        null = null_of[tv]
        src.add(ind, f"{tv} = None if {null} else t" if null else f"{tv} = t")
        for j in users:
            tuple_of[j] = tv
    last_test = None  # atoms in a row under the same test share one ``if``
    for j, (ri, ai, _flt, bit) in enumerate(entries):
        tv = tuple_of[j]
        test = " and ".join(c for c in (conds[j], f"{tv} is not None" if null_of[tv] else None) if c)
        ind = 1
        if test:
            if test != last_test:
                src.add(1, f"if {test}:")
            src.add(2, f"# {eng.patterns[ri].name}: {eng.patterns[ri].atoms[ai].alias}")
            ind = 2
        last_test = test
        own = owns.get(ri, "True")
        if own == "False":  # another worker runs this pattern: the event is only held for it
            src.add(ind, f"mask |= {bit << shift}" if eng._shadowed else "pass")
            continue
        if own != "True":
            src.add(ind, *([f"if not {own}:", f"    mask |= {bit << shift}", "else:"] if eng._shadowed else [f"if {own}:"]))
            ind += 1
        prop = src.name("prop", eng.runtimes[ri]._prop_of_atom[ai])
        src.add(ind, f"ch = {prop}({tv}, 1)", f"mask |= {bit}")
        if emit:
            src.add(ind, "if ch is not None:")
            _emit_new(src, eng, ri, ai, ind + 1)


def _gap_insert(src: _Source, eng: Engine, etype: str, owns: dict[int, str]) -> None:
    """Lines that add event ``e`` (time ``ts``, serial ``s``) to every gap index of its type whose
    filter it passes and whose key it has (``GapIndex.add``: in order, an append), and to the
    index's expiry order; its bit goes into ``mask`` (in a worker that does not own the pair
    (``owns``, ``_owners``): its shadow bit, and the index is not touched; without shadows
    (``Engine(shadow=False)``) nothing at all)."""
    for ix, flt, bit, order in eng.gap_route[etype]:
        own = owns.get(_gap_pattern(eng, ix), "True") if owns else "True"
        if own == "False" and not eng._shadowed:  # another worker's index, and nothing to hold
            continue
        ind = 1
        if own != "True" and not eng._shadowed:  # not this worker's pair: not even filtered
            src.add(1, f"if {own}:")
            ind = 2
        if flt is not None:
            src.add(ind, f"if {src.name('flt', flt)}(e):  # gap index g{ix.spec.id}")
            ind += 1
        src.add(ind, f"k = {src.name('key_of', ix.key_of)}(e)", "if k is not None:")
        add = [f"{src.name('add', ix.add)}(k, ts, s)", f"mask |= {bit}"]
        if own == "False":
            add = [f"mask |= {bit << eng._shift}"]  # held for another worker (a shadow bit)
        elif own != "True" and eng._shadowed:
            add = [f"if {own}:", *(f"    {x}" for x in add), "else:", f"    mask |= {bit << eng._shift}"]
        src.add(ind + 1, *add)
        if order is not None:
            queue, heap, horizon = order
            q, hp = src.name("GQ", queue), src.name("GH", heap)
            src.add(ind + 1, f"if not {q} or {q}[-1][0] <= ts:", f"    {q}.append((ts, s, k))", "else:",
                    f"    heappush({hp}, (ts, s, k))", f"if ts + {horizon!r} < eng._gap_expire_at:",
                    f"    eng._gap_expire_at = ts + {horizon!r}")


def _push_body(src: _Source, eng: Engine, etype: str | None) -> None:
    """The lines (at indent 1 past ``src.base``) that push event ``e`` of type ``etype`` (None: of a
    type no atom or gap uses), appending its composite events to ``outs``: the late check, then a
    retraction (refused before its time moves the watermark) or the insert, each after the
    watermark move.  ``_nc`` is the event refused (late or an unknown retraction): every other
    event is counted (``_batch`` counts them from the loop's index)."""
    # the late test: in the loop of an engine that owns its watermark, ``wm`` is never None
    # (``NOWM`` stands in for it); with a source's watermark it stays None until the source moves it
    late = "ts < wm" if src.own else "wm is not None and ts < wm"
    src.has_e = not src.fused  # over raw lines the Event is made where the body first reads it
    if not src.fused:
        src.add(1, "ts = e.ts")
    if src.fused and _late_after_move(eng):
        # over parsed records (their own copy, inserts only): a time above the highest is not late
        # (the watermark is at most the highest time: a non-negative lateness, and ``_batch``'s
        # check on entry), so the late test is the move's ``elif``: one comparison for an in-order
        # event, not two
        _watermark_move(src, eng, 1)
        src.add(1, f"elif {late}:", "    _nc = _i", "    eng._late(ts, wm)")
        src.add(1, "s = _serial", "_serial = s + 1")
        if etype is not None:
            _insert_body(src, eng, etype, emit=True)
        return
    src.add(1, f"if {late}:", "    _nc = _i", "    eng._late(ts, wm)")
    # the check may switch the fingerprint index on (its first retraction): the loop's copy of
    # the switch follows at once, since the expiry this move runs must take events out of it
    if not src.inserts:  # (the loop for a batch of inserts only tests no op: ``_batch``)
        src.add(1, "if e.op != '+':", "    _nc = _i", "    eng._check_retraction(e)", "    _nc = -1",
                "    _fp = eng._fp_enabled")
        _watermark_move(src, eng, 2)
        _handover(src, 2)
        _mark(src, 2)
        # a retraction may switch on the fingerprint index: the batch loop's copy of the switch follows
        src.add(2, "outs += eng._retract(e)", "_fp = eng._fp_enabled", "continue")
    _watermark_move(src, eng, 1)
    src.add(1, "s = _serial", "_serial = s + 1")
    if etype is not None:  # else kept by nothing: it only takes a serial (as every inserted event does)
        _insert_body(src, eng, etype, emit=True)


def _late_after_move(eng: Engine) -> bool:
    """Whether the batch loop's copy over parsed records tests an event late only when it does not
    move the highest time (``_push_body``): when the watermark can never pass the highest time, a
    lateness that is a number not below 0 (the watermark is then the highest time minus it)."""
    lag = eng.lateness
    return type(lag) in (int, float) and lag >= 0


def _batch(eng: Engine, expire: Any) -> Any:
    """``batch(events, outs)``: push events in order, appending their composite events to ``outs``;
    an event that raises leaves ``outs`` with the outputs of the events before it and raises
    ``BatchInterrupted(its index, outs)`` from its error (``Engine.push_batch``'s contract).

    Why one loop with the types' bodies inline rather than a function per type: a call and a
    dict lookup per event are a measurable part of the per-event cost (card testing: one type).
    For the same reason the loop keeps in locals what it would otherwise read and write on the
    engine per event: the watermark and the highest time (unless gap elements need them written
    through, ``_watermark_move``), the next serial, the counters (events from the loop's index,
    ``_push_body``), the fingerprint switch and the single window's oldest time; they are written
    back when it ends, when it raises, and before a call that reads them (``_handover``)."""
    src = _Source(eng)
    src.env.update(expire=expire, BatchInterrupted=BatchInterrupted, NOWM=NOWM, NOMX=NOMX, LE=LineEvent)
    src.write_through = bool(eng._decided)
    inline = len(eng._windowed) == 1 and not eng._gap_expiry
    src.old_local = eng._windowed[0][0] if inline else None
    state = {"_serial": "_serial", "_nins": "_n_inserted", "_peak": "_peak_retained"}
    # the watermark and the highest time before the first event: None on the engine, stand-ins in
    # the loop (``NOMX``: every time is above it; ``NOWM``, for an engine that owns its watermark:
    # no time is below it), so the per-event tests are one comparison each
    # ``first``: ``events`` are parsed JSON records, the first one line ``first`` (``Engine.push_records``);
    # the loop's index ``_i`` counts from it (0 for Events), and the loop returns how many it took
    src.add(0, "def batch(events, outs, inserts=False, first=0, TF='type', TSF='ts', EV=LE, OPF='op'):", "    _i = first - 1",
            "    _ke = _nc = -1", "    _k0 = _nexp = 0",
            "    wm, mx = eng.watermark, eng.max_ts", "    if mx is None:", "        mx = NOMX",
            "    _lateness = eng.lateness",
            "    _nev = eng._n_events", *(f"    {local} = eng.{attr}" for local, attr in state.items()),
            "    _fp = eng._fp_enabled")
    back = [f"eng.{attr} = {local}" for local, attr in state.items()]
    back.append("eng._n_expired += _nexp")
    if inline:
        oldest = f"{src.name('OLDEST', eng._oldest)}[{src.old_local}]"
        src.add(1, f"_old = {oldest}")
        back.append(f"{oldest} = _old")
    if not src.write_through:
        back.append(_WRITE_BACK)
    src.add(1, "try:")
    src.exit = "continue"
    types = sorted({*eng.route, *eng.gap_route})
    # the loop four times: for an engine that owns its watermark (the events move it) and for one
    # whose source moves it (``Engine.own_watermark``, read once per batch, not tested per event);
    # the first, again for a batch its caller says holds inserts only (``inserts``: no op tested
    # per event; ``Engine.push_batch``), and for parsed JSON records of inserts only (``first``: the
    # record's checks in the loop, ``_fused_head``; ``Engine.push_records``)
    for own, inserts, fused in ((True, True, True), (True, True, False), (True, False, False), (False, False, False)):
        src.own, src.inserts, src.fused = own, inserts, fused
        src.base = 0
        if fused:
            src.add(2, "if eng.own_watermark:", "    if wm is None:", "        wm = NOWM", "    if first:")
            if _late_after_move(eng):
                # the loop's late test only for a time not above the highest (``_push_body``): exact
                # while the watermark is not above the highest time; an engine whose state breaks
                # that (restored, or moved by its source before) takes no records here, and its
                # caller's decoder and ``push_batch`` take them (until an event moves both)
                src.add(4, "if wm is not NOWM and (mx is NOMX or wm > mx):", "    return 0")
        elif own and inserts:
            src.add(3, "elif inserts:")
        elif own:
            src.add(3, "else:")
        else:
            src.add(2, "else:")
        top = 4 if own else 3  # the loop's indent
        if fused:
            _fused_head(src, top)
        else:
            src.add(top, "for _i, e in enumerate(events):")
            if len(types) > 1:
                src.add(top + 1, "_typ = e.type")
        for j, etype in enumerate([*types, None]):
            src.base = top
            if types:
                test = "typ" if fused else "e.type" if len(types) == 1 else "_typ"
                src.add(1, "else:" if etype is None else f"elif {test} == {etype!r}:" if j else f"if {test} == {etype!r}:")
                src.base = top + 1
            src.add(1, f"# {etype if etype is not None else 'an event of another type'}")
            if fused:  # the record's own checks (``decode.lines``'), after the type's test
                number = "type(ts) is not int and type(ts) is not float"
                bad = number if etype is not None else f"type(typ) is not str or not typ or {number}"
                src.add(1, f"if {bad}:  # not for this loop: the caller decodes it", "    _i -= 1", "    break")
            _push_body(src, eng, etype)
    src.own, src.inserts, src.fused = True, False, False
    src.base = 0
    src.add(1, "except BaseException as x:  # what the failing event emitted is dropped, as with one push",
            "    if _ke == _i:", "        del outs[_k0:]", "    eng._n_events = _nev + _i - first + (_nc != _i)",
            *(f"    {line}" for line in back), "    raise BatchInterrupted(_i - first, outs) from x",
            "eng._n_events = _nev + _i - first + 1", *back, "return _i - first + 1")
    return src.define(f"engine: push a batch ({_names(eng)})", "batch")


def _fused_head(src: _Source, top: int) -> None:
    """The head of the batch loop's copy over parsed JSON records (``Engine.push_records``): each
    record (``f``) checked as ``decode.lines`` does (``cep.io.readers``), its type ``typ`` and time
    ``ts`` read; one that is not for this loop (not an object with a type and a numeric time: the
    type's body tests the rest; one with the op field ``OPF``, whatever its value) ends it before it
    changes anything (``_i`` is then the number of records taken, minus one, as after the last).
    The caller gives only records that need no more (``decode.plain``: no nested value, no big
    integer).  The op field is looked for in each parsed record (a dict lookup, ~35 ns) rather than
    in the batch's bytes (``"op"`` and ``\\u`` searched in the joined lines: ~160 ns a record on
    card testing's lines, 1,233 instructions): the parsed keys are what counts, escapes and all.

    Why: decoding into Events and then looping over them made an Event (and set its slots) for
    every record, also for the many no atom keeps (card testing's amounts between 100 and 400);
    here it is made where the body first reads it.  The parsing itself stays a pass of its own
    over the batch (``decode.plain``: one C loop): parsing each line inside this loop put orjson's
    code and the engine's in one iteration, and the instruction cache missed both (cachegrind,
    card testing: 341 -> 556 I1 misses per record)."""
    src.add(top, "for _i, f in enumerate(events, first):", "    try:",
            "        typ = f[TF]", "        ts = f[TSF]", "    except Exception:  # the caller's decoder says why",
            "        _i -= 1", "        break",
            "    if OPF in f:  # an op field (a retraction, or an explicit insert): the caller's decoder's",
            "        _i -= 1", "        break")


def quiet_inserter(eng: Engine, etype: str) -> Any:
    """``insert(e, s)``: index event ``e`` under serial ``s`` without emitting (``Engine.loads``)."""
    src = _Source(eng)
    src.add(0, "def insert(e, s):", "    ts = e.ts", "    if s >= eng._serial:", "        eng._serial = s + 1")
    _insert_body(src, eng, etype, emit=False)
    return src.define(f"engine: restore {etype} ({_names(eng)})", "insert")


def _expiry(eng: Engine) -> Any:
    """``expire(wm)``: per window, the events before ``wm - w`` leave their atoms; then the gap
    indexes' own expiry when one of their entries is due.  A window whose oldest time
    (``Engine._oldest``) is not before ``wm - w`` is skipped; after a window's due events are popped
    its oldest time is the (live) head of its queue or of its heap."""
    src = _Source(eng)
    src.env["inf"] = math.inf
    src.add(0, "def expire(wm):")
    for qi, ri, qmask in eng._windowed:
        q, heap = src.name("Q", eng._in_order[qi]), src.name("HP", eng._expiry[qi])
        oldest = src.name("OLDEST", eng._oldest)
        # the first due entry in ``one``, a list ``due`` only when there are more; an entry is
        # (ts, serial, its leaf tuple or None); one whose event was retracted meanwhile is skipped
        src.add(1, f"# {eng.patterns[ri].name}: WITHIN {eng._windows[qi]}", f"limit = wm - {eng._windows[qi]!r}",
                f"if {oldest}[{qi}] < limit:")
        src.add(2, "one = due = None")
        layout = _entry_layout(eng, qi)
        at = 0 if layout is None else layout[0]
        # a queue of leaf tuples (``_entry_layout``): each popped one made an entry here
        popq = f"{q}.popleft()" if layout is None else f"{q}.popleft()\n    x = (x[{layout[0]}], x[{layout[1]}], x)"
        for pop, has in ((popq, f"{q} and {q}[0][{at}] < limit"), (f"heappop({heap})", f"{heap} and {heap}[0][0] < limit")):
            src.add(2, f"while {has}:", *f"    x = {pop}".split("\n"), "    if one is None:", "        one = x",
                    "    elif due is None:", "        due = [one, x]", "    else:", "        due.append(x)")
        src.add(2, f"old = {q}[0][{at}] if {q} else inf", f"if {heap} and {heap}[0][0] < old:", f"    old = {heap}[0][0]",
                f"{oldest}[{qi}] = old",
                # each due entry through the per-entry lines (its atoms' expiry paths, ``_compile_drop``):
                # a batch of 3-5 through ``Engine._expire_serials`` (leaf tuples recomputed, a dict of
                # batches, the general batch path) cost ~4x as much per entry
                # (the one-entry case, the common one, written apart: no loop, no tuple)
                "if due is not None:", "    for _ts, s, t in due:")
        _expire_entry(src, eng, ri, qmask, 4)
        src.add(2, "elif one is not None:", "    _ts, s, t = one")
        _expire_entry(src, eng, ri, qmask, 3)
    if eng._gap_expiry:
        src.add(1, "if wm > eng._gap_expire_at:", "    eng._expire_gaps(wm)")
    if not eng._windowed and not eng._gap_expiry:
        src.add(1, "return")
    return src.define(f"engine: expiry ({_names(eng)})", "expire")


def _expire_entry(src: _Source, eng: Engine, ri: int, qmask: int, indent: int, keep: str | None = None,
                  known: list[str] | None = None) -> None:
    """Lines that expire the queue entry just popped (serial ``s``, leaf tuple ``t`` or None) of
    pattern ``ri``'s window (atoms ``qmask``): out of the atoms holding it (in a worker, only the
    pairs it owns are in its indexes), then its holder bits cleared and the event forgotten when
    nothing holds it any more.  One home for the generated expiry (``_expiry``) and the batch
    loop's inline one (``_expire_inline``); ``keep`` as ``_expire_one``'s."""
    held = qmask | qmask << eng._shift if eng._shadowed else qmask  # with the shadow bits
    loop = src.exit == "continue"  # in the batch loop: the switch and the counter are its locals
    # the event's holder bits leave with it (one dict operation, not a get and a del); bits of
    # other holders (another pattern's atoms, a gap index, another worker's shadows) go back
    every = (1 << eng._shift) - 1
    if eng._shadowed:
        every |= every << eng._shift
    # ``H`` holds no 0: when no other holder can share the event, a mask is 0 or all within ``held``
    src.add(indent, "m = H.pop(s, 0)", f"if m & {held}:" if every & ~held else "if m:")
    if held != qmask:  # a worker: only the pairs it owns are in its indexes
        src.add(indent + 1, f"if m & {qmask}:")
        _expire_one(src, eng, ri, qmask, indent + 2, keep, known)
    else:
        _expire_one(src, eng, ri, qmask, indent + 1, keep, known)
    forget = [f"if {'_fp' if loop else 'eng._fp_enabled'}:", "    eng._unindex_fp(s, E[s])", "del E[s]",
              "_nexp += 1" if loop else "eng._n_expired += 1"]
    if every & ~held:
        src.add(indent + 1, f"m &= {~held}", "if m:", "    H[s] = m", "else:", *(f"    {x}" for x in forget))
        src.add(indent, "elif m:", "    H[s] = m")
    else:  # nothing else can hold the event: it leaves
        src.add(indent + 1, *forget)


def _expire_one(src: _Source, eng: Engine, ri: int, qmask: int, indent: int, keep: str | None = None,
                known: list[str] | None = None) -> None:
    """Lines that take the event of serial ``s`` (holder mask ``m``, its queue entry's leaf tuple
    ``t`` or None) out of every atom of pattern ``ri`` holding it: the entry's tuple when it has
    one (the atoms holding the event share it), else each leaf-tuple shape computed (inline) once;
    each atom's expiry path (``PatternRuntime._drop_of_atom``).  ``keep``: a variable holding
    another event (the batch loop's ``e``), restored after the expired event is read into ``e``.
    ``known``: the entry is the leaf tuple ``t`` itself, its items unpacked into these locals
    (``_expire_inline``, ``_entry_items``)."""
    rt = eng.runtimes[ri]
    atoms = [(j, ai) for j, (r, ai) in enumerate(eng._slots) if r == ri and qmask >> j & 1]
    shapes: dict[tuple[str, ...], tuple[str, int, list[str]]] = {}
    for j, ai in atoms:
        lines, _items, null = _leaf_shape(src, eng, ri, ai)
        tv, bits, _lines = shapes.get((*lines, str(null)), (f"t{len(shapes)}", 0, lines))
        shapes[(*lines, str(null))] = (tv, bits | 1 << j, lines)
    tuple_of: dict[int, str] = {}
    if known is not None:  # every atom holding the event holds ``t`` itself
        for j, ai in reversed(atoms):
            # the leaf's own index removal inline, the rest of the path called past its gate
            # (``PatternRuntime.expire_inline``: card testing's s2, no call for a card with no big purchase)
            inline = rt.expire_inline(ai, known, "t", src.name)
            if inline is not None:
                lines, gate, rest = inline
                src.add(indent, f"if m & {1 << j}:", *(f"    {x}" for x in lines))
                if gate is not None:
                    src.add(indent + 1, f"if {gate}:", f"    {src.name('drop', rest)}(t)")
                else:
                    src.add(indent + 1, f"{src.name('drop', rest)}(t)")
                continue
            guard = _guarded(src, eng, ri, ai, "t", known)
            src.add(indent, f"if m & {1 << j}{'' if guard is None else ' and ' + guard}:",
                    f"    {src.name('drop', rt._drop_of_atom[ai])}(t)")
        return
    src.add(indent, "if t is None:", *([f"    _kept = {keep}"] if keep else []), "    e = E[s]", "    f = e.fields")
    for tv, bits, lines in shapes.values():
        if bits == qmask:  # every atom of the window has this shape: the event holds one of them
            src.add(indent + 1, *lines, f"{tv} = t")
        else:
            src.add(indent + 1, f"if m & {bits}:", *(f"    {line}" for line in lines), f"    {tv} = t")
        for j, _ai in atoms:
            if bits >> j & 1:
                tuple_of[j] = tv
    if keep:
        src.add(indent + 1, f"{keep} = _kept")
    src.add(indent, "else:", "    " + " = ".join(tv for tv, _b, _l in shapes.values()) + " = t")
    # the atoms in the reverse of the order an insert updates them (``_insert_body``), so the
    # deletions mirror the insert: with shared storage (card testing's s1 and s2), the atom that
    # owns it deletes the tuple first, and the others' probes no longer find the event itself
    for j, ai in reversed(atoms):
        guard = _guarded(src, eng, ri, ai, tuple_of[j])
        src.add(indent, f"if m & {1 << j}{'' if guard is None else ' and ' + guard}:",
                f"    {src.name('drop', rt._drop_of_atom[ai])}({tuple_of[j]})")


def _names(eng: Engine) -> str:
    return ", ".join(cp.name for cp in eng.patterns)


def build_handlers(eng: Engine) -> Handlers:
    """The generated functions of an engine whose routes, queues and counters are set up."""
    expire = _expiry(eng)
    return Handlers(_batch(eng, expire), expire)
