"""The engine: several patterns over one stream, with event time (docs/language.md section 4).

``Engine.push(event)`` is the whole contract of the core: it raises
``LateEventError`` for an event below the watermark, advances the watermark
(``max ts seen - lateness``), drops events that fell out of every window
(``ts < watermark - w``: a batch of deletions that emits nothing), then
inserts or retracts the event in every atom whose type and filter it passes
and returns the composite events that this completes (``+``) or undoes (``-``).

Routing is by event type, so an event reaches only the atoms that can use it;
an event no atom keeps is not stored at all.  Expiry uses one heap per pattern
(events arrive mostly in time order, so pops come from the front of each
sorted group).  When every event of a partition key has expired, nothing of
that key remains: empty groups are removed from every index.

State is plain data: ``dumps()`` writes the retained events, the watermark and
the counters (versioned JSON that cannot run code: ``cep.runtime.state``); ``loads()`` rebuilds the T-reducts by
re-inserting the events without emitting, so the format does not depend on
the index layout.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from cep import codegen
from cep.errors import BatchInterrupted, LateEventError, UnknownRetractionError
from cep.event import Event, LineEvent, Output, match_id_fn
from cep.lang.gcq import CompiledPattern
from cep.runtime import skeleton
from cep.runtime.gaps import GapChecks, GapIndex, KleeneIndex
from cep.runtime.handler import build_handlers, quiet_inserter
from cep.runtime.iedyn import PatternRuntime
from cep.runtime.output import match_builder, match_key_source
from cep.runtime.pending import PendingDecisions, is_decided
from cep.runtime.state import StateError, decode_state, encode_state
from cep.values import canon

if TYPE_CHECKING:
    from cep.plan.physical import PhysicalPlan

__all__ = ["Engine", "StateError"]


# id(pattern) -> (pattern, signature): printing a pattern costs ~0.75 ms (card testing), and
# ``Engine.loads`` checks every pattern's (a Spark key group's engine is loaded every micro-batch)
_signatures: dict[int, tuple[CompiledPattern, str]] = {}
_MAX_SIGNATURES = 1024


def pattern_signature(cp: CompiledPattern) -> str:
    """What must not change between a saved state and the patterns it is loaded with (once per
    compiled pattern and process: at most ``_MAX_SIGNATURES`` kept)."""
    got = _signatures.get(id(cp))
    if got is not None and got[0] is cp:
        return got[1]
    sig = _signature(cp)
    if len(_signatures) >= _MAX_SIGNATURES:
        _signatures.clear()
    _signatures[id(cp)] = (cp, sig)
    return sig


def _signature(cp: CompiledPattern) -> str:
    try:
        from cep.lang.printer import format_pattern

        text = format_pattern(cp.source) if cp.source is not None else cp.name
    except ImportError:  # pragma: no cover
        text = repr(cp.source)
    return f"{cp.time_unit}|{text}"


def _fingerprint(fields: dict) -> Any:
    """A hashable form of a record: equal records (docs/language.md section 1: every field but op) are equal."""
    try:
        fp = tuple((k, canon(v)) for k, v in sorted(fields.items()))
        hash(fp)
        return fp
    except TypeError:
        import orjson

        return orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)


_new_output = tuple.__new__


def _no_key(_first: Event) -> None:
    """The key of a match of a pattern without a partition key."""
    return None


# id(pattern) -> (pattern, its physical plan), for engines built without plans (planning was ~30 %
# of building an engine); at most ``_MAX_PLANS`` kept
_plans: dict[int, tuple[CompiledPattern, Any]] = {}
_MAX_PLANS = 256


def _plan_of(cp: CompiledPattern) -> PhysicalPlan:
    """``physical_plan(plan_pattern(cp))``, once per compiled pattern (and process)."""
    got = _plans.get(id(cp))
    if got is not None and got[0] is cp:
        return got[1]
    from cep.plan.physical import physical_plan
    from cep.plan.planner import plan_pattern

    pp = physical_plan(plan_pattern(cp))
    if len(_plans) >= _MAX_PLANS:
        _plans.clear()
    _plans[id(cp)] = (cp, pp)
    return pp


def _recipe_key(patterns: Sequence[CompiledPattern], lateness: Any, own_watermark: bool,
                plans: Sequence[PhysicalPlan] | None, share: Any, shadow: bool, lines: bool, cls: type | None = None) -> Any:
    """What an engine's construction depends on (``cep.runtime.skeleton``): the compiled pattern
    objects and the plans given (by identity: the recipe keeps them alive), and the options;
    None when they do not make a key."""
    try:
        key = (tuple(map(id, patterns)), None if plans is None else tuple(map(id, plans)), type(lateness), lateness,
               bool(own_watermark), share, bool(shadow), bool(lines), cls)
        hash(key)
    except TypeError:
        return None
    return key


def _prewarm(eng: Engine) -> None:
    """What a pristine engine generates only when first needed, generated now (before its recipe is
    taken, so that its copies do not generate it each): the restore inserters (``Engine.loads``).
    (Several due entries expire through the generated per-entry lines, ``handler._expiry``: the
    batched deletion ``PatternRuntime.expire`` is no longer on an engine's path.)"""
    for etype in sorted({*eng.route, *eng.gap_route}):
        eng._quiet[etype] = quiet_inserter(eng, etype)


class Engine:
    """Runs compiled patterns over one stream of events (the core API)."""

    def __init__(self, patterns: Sequence[CompiledPattern], lateness: int | float = 0,
                 *, own_watermark: bool = True, plans: Sequence[PhysicalPlan] | None = None,
                 share: tuple[int, int] | None = None, shadow: bool = True, lines: bool = False) -> None:
        """``own_watermark``: derive the watermark from the events pushed (``max ts seen -
        lateness``, one ordered source); False when the source owns it (the minimum over
        Kafka partitions, Spark's global watermark) and moves it with ``advance_watermark``.
        ``plans``: the patterns' physical plans (``physical_plan(plan_pattern(cp))``), when the caller
        keeps them (Spark workers build an engine per key group: planning is most of that).
        ``share``: ``(worker, workers)``, one of the processes of ``cep run --workers``
        (``cep.commands.parallel``): this engine indexes, matches and emits only the (pattern,
        event) pairs it owns (``owner_of``); it still keeps every event some pattern would keep,
        under a shadow holder bit for the pairs other workers own, so the watermark, expiry,
        the retained events and what a retraction finds are exactly one whole engine's.
        ``shadow=False`` (with ``share``): the caller promises an insert-only stream (no event with
        op ``-``: ``cep.commands.parallel`` scans the input for the op field first), so nothing
        needs the events other workers own: they only move the watermark and take a serial (not
        kept, not filtered, no leaf tuple, no expiry), and a retraction raises ``RuntimeError``.
        What is emitted, late or refused is unchanged; ``stats["peak_retained"]`` is then this
        share's own peak (what this process holds), no longer the whole engine's.
        ``lines``: the composite events of the fused insert paths (``cep.runtime.output``) come back
        from ``push``/``push_batch`` as their encoded JSON lines (``str``, newline ended: what
        ``cep.io.writers.encode_output`` gives, decoded), the others as ``Output``; for callers that
        only write them (``cep run`` to a file or stdout): ``encode_outputs`` takes both.

        Building an engine is cheap after the first two of the same patterns, plans and options in
        a process: the third on are copies of a pristine one (``cep.runtime.skeleton``), with
        their own state and the same generated code.
        """
        patterns = list(patterns)  # (any iterable, read once)
        if plans is not None:
            plans = list(plans)
        key = _recipe_key(patterns, lateness, own_watermark, plans, share, shadow, lines, type(self))
        if key is not None:
            recipe = skeleton.lookup(key)
            if recipe is not None:
                recipe.make(self)
                return
            since = codegen.mark()
        self._build(patterns, lateness, own_watermark, plans, share, shadow, lines)
        if key is not None:
            skeleton.note(key, self, since, _prewarm, (list(patterns), plans))

    def _build(self, patterns: Sequence[CompiledPattern], lateness: int | float, own_watermark: bool,
               plans: Sequence[PhysicalPlan] | None, share: tuple[int, int] | None, shadow: bool,
               lines: bool) -> None:
        """``__init__``'s work, done: the plans (once per compiled pattern and process,
        ``_plan_of``), the runtimes and the generated functions bound to this engine's state."""
        self.lines = lines
        self.patterns = list(patterns)
        self._builders = [match_builder(cp) for cp in self.patterns]
        self._ids = [match_id_fn(cp.name, len(cp.atoms)) for cp in self.patterns]
        self.lateness = lateness
        self.own_watermark = own_watermark
        self.events: dict[int, Event] = {}
        # serial -> which (pattern, atom) slots hold the event (a bit mask, never 0): the
        # engine's bookkeeping, kept beside the events rather than on the user's records
        self._holders: dict[int, int] = {}
        if plans is None:
            plans = [_plan_of(cp) for cp in self.patterns]
        self.runtimes = [PatternRuntime(pp) for pp in plans]
        self._by_name = {cp.name: i for i, cp in enumerate(self.patterns)}
        # every (pattern, atom) is a bit; an event's holders are a bit mask (a small int),
        # and its leaf tuples are recomputed from the event when it leaves
        # event type -> (pattern, atom, filter, bit) per atom of that type (the generated handlers'
        # routes, cep.runtime.handler)
        self.route: dict[str, list[tuple[int, int, Any, int]]] = {}
        self._slots: list[tuple[int, int]] = []
        self._pattern_mask = [0] * len(self.patterns)
        for ri, cp in enumerate(self.patterns):
            for ai, atom in enumerate(cp.atoms):
                bit = 1 << len(self._slots)
                self._slots.append((ri, ai))
                self._pattern_mask[ri] |= bit
                self.route.setdefault(atom.type, []).append((ri, ai, atom.filter, bit))
        self._atom_bits = (1 << len(self._slots)) - 1
        # gap elements (docs/language.md section 7): per pattern, sorted indexes of the gap types' events
        # (each index one more bit of an event's holders), the checks, and the undecided matches.
        # A windowed pattern's gap index expires its own entries (``_expire_gaps``): per index, its
        # (ts, serial, key) in arrival order (a deque while times do not decrease, a heap for the
        # rest), so an event only a gap keeps costs no leaf tuple, batch or key recomputation.
        # The horizon is w, or 2w with a leading gap: a retained match's leading gap reaches back
        # to its last event's time - w (section 7, NOT elements), so its emitted matches can still
        # be re-checked.
        # event type -> (index, its filter, bit, its expiry order (queue, heap, horizon) or None)
        self.gap_route: dict[str, list[tuple[GapIndex, Any, int, Any]]] = {}
        self._gap_of_bit: dict[int, GapIndex] = {}
        self._gap_expiry: list[tuple[GapIndex, int, deque, list, Any]] = []
        self.checks: list[GapChecks | None] = []
        self.pending: list[PendingDecisions | None] = []
        for ri, cp in enumerate(self.patterns):
            if not cp.decided:
                self.checks.append(None)
                self.pending.append(None)
                continue
            pp = self.runtimes[ri].plan
            specs, plans = list(pp.gap_indexes), list(pp.gaps)
            indexes = [KleeneIndex(spec, cp.name, self.events) if spec.kleene else GapIndex(spec, cp.name)
                       for spec in specs]
            horizon = None if cp.within is None else (
                2 * cp.within if any(g.kind == "leading" for g in cp.gaps) else cp.within)
            for ix in indexes:
                flt = next(pl.gap.filter for pl in plans if pl.index == ix.spec.id)
                bit = 1 << (len(self._slots) + len(self._gap_of_bit))
                self._gap_of_bit[bit] = ix
                self._pattern_mask[ri] |= bit
                order = None
                if horizon is not None:
                    order = (deque(), [], horizon)
                    self._gap_expiry.append((ix, bit, *order))
                for t in ix.spec.types:
                    self.gap_route.setdefault(t, []).append((ix, flt, bit, order))
            checks = GapChecks(cp, plans, indexes, self.events)
            self.checks.append(checks)
            self.pending.append(PendingDecisions(checks.trailing))
        self._decided = [ri for ri, c in enumerate(self.checks) if c is not None]
        self.share = share
        # a pair another worker owns is held under a shadow bit (for retractions), unless the
        # stream is insert-only (``shadow=False``): then this engine keeps only what it owns
        self._shadowed = share is not None and shadow
        self._ownership: list[Any] = []  # per pattern: key attributes per type, or the one worker running it
        if share is not None:
            from cep.plan.partition import ownership

            self._ownership = ownership(self.patterns, share[1])
        # a pair another worker owns holds its event under its bit shifted past every real one
        self._shift = len(self._slots) + len(self._gap_of_bit)
        # the earliest pending decision: due once the watermark passes it (reaches it, if not strict)
        self._decide_at: Any = math.inf
        self._decide_strict = True
        # no gap-index entry expires before this watermark (the same kind of bound)
        self._gap_expire_at: Any = math.inf
        # the partition key of a match, read from its first event (a generated function: per output)
        self._key_fns: list[Any] = []
        for cp in self.patterns:
            items = match_key_source(cp, "e")
            if items is not None:
                self._key_fns.append(codegen.define(f"{cp.name}: partition key of a match",
                                                    f"def key(e):\n    return {items}\n", "key"))
            else:
                self._key_fns.append(_no_key)
        # expiry queues: (queue, pattern, the pattern's atom bits it expires), each with its
        # horizon: an event is kept while ts >= watermark - w (gap indexes expire their own)
        self._windowed: list[tuple[int, int, int]] = []
        self._windows: list[Any] = []
        for ri, cp in enumerate(self.patterns):
            if cp.within is None:
                continue
            self._windowed.append((len(self._windows), ri, self._pattern_mask[ri] & self._atom_bits))
            self._windows.append(cp.within)
        # record -> serials, built on the first retraction (insert-only streams never pay for it)
        self._by_fp: dict[Any, list[int]] = {}
        self._fp_enabled = False
        # expiry order per pattern: entries (ts, serial, leaf tuple or None) in arrival order while
        # times do not decrease (a deque, the common case), a heap of them for the rest; the leaf
        # tuple is there when the atoms of the window that hold the event share it (the expiry
        # deletes it without recomputing it from the event); where every type of the window's
        # pattern has one leaf tuple holding the time and the serial, the in-order deque holds that
        # tuple itself (``cep.runtime.handler._entry_layout``: no entry tuple per event)
        self._expiry: list[list[tuple[Any, int, tuple | None]]] = [[] for _ in self._windows]
        self._in_order: list[deque[tuple[Any, int, tuple | None]]] = [deque() for _ in self._windows]
        # per queue, a lower bound of the times of its events (inf: none): the generated handlers
        # call the expiry only when one is before ``watermark - w`` (``cep.runtime.handler``)
        self._oldest: list[Any] = [math.inf] * len(self._windows)
        self.max_ts: int | float | None = None
        self.watermark: int | float | None = None
        self._serial = 0
        # the counters (``stats``): plain ints, the generated handlers add to them
        self._n_events = self._n_late = self._n_inserted = self._n_retracted = self._n_expired = 0
        self._peak_retained = self._peak_pending = 0
        # per pattern, [composite events emitted with +, with -] (``matches_emitted``)
        self._emitted: list[list[int]] = [[0, 0] for _ in self.patterns]
        # the generated batch function and expiry (``cep.runtime.handler``); the restore
        # path's inserters (``loads``) are generated when first needed
        self._handlers = build_handlers(self)
        self._quiet: dict[str, Any] = {}

    # --------------------------------------------------------------- counters

    @property
    def stats(self) -> dict[str, int]:
        """The engine's counters (a snapshot): events pushed, late ones refused, inserted,
        retracted, expired, and the peaks of retained events and pending matches."""
        return {"events": self._n_events, "late": self._n_late, "inserted": self._n_inserted,
                "retracted": self._n_retracted, "expired": self._n_expired,
                "peak_retained": self._peak_retained, "peak_pending": self._peak_pending}

    @stats.setter
    def stats(self, counts: dict[str, int]) -> None:
        self._n_events, self._n_late = counts["events"], counts["late"]
        self._n_inserted, self._n_retracted, self._n_expired = counts["inserted"], counts["retracted"], counts["expired"]
        self._peak_retained, self._peak_pending = counts["peak_retained"], counts["peak_pending"]

    @property
    def matches_emitted(self) -> dict[str, dict[str, int]]:
        """Composite events emitted per pattern name and op (a snapshot)."""
        out: dict[str, dict[str, int]] = {cp.name: {"+": 0, "-": 0} for cp in self.patterns}
        for cp, (plus, minus) in zip(self.patterns, self._emitted, strict=True):
            out[cp.name]["+"] += plus
            out[cp.name]["-"] += minus
        return out

    @matches_emitted.setter
    def matches_emitted(self, counts: dict[str, dict[str, int]]) -> None:
        seen: set[str] = set()
        for cp, row in zip(self.patterns, self._emitted, strict=True):
            first = cp.name not in seen  # a name twice: its counts are kept once
            seen.add(cp.name)
            row[0] = counts[cp.name]["+"] if first else 0
            row[1] = counts[cp.name]["-"] if first else 0

    # --------------------------------------------------------------- the stream

    @property
    def retained_events(self) -> int:
        return len(self.events)

    def push(self, event: Event) -> list[Output]:
        """Process one event; return the composite events it completes or undoes.

        The work is the engine's generated batch function (``cep.runtime.handler``): per event,
        the late check, the watermark move (decisions, expiry), then the retraction or the insert."""
        outs: list[Output] = []
        try:
            self._handlers.batch((event,), outs)
        except BatchInterrupted as bi:
            cause = bi.__cause__
        else:
            return outs
        raise cause  # outside the handler: the event's own error, as it was raised

    def push_batch(self, events: Sequence[Event], inserts: bool = False) -> list[Output]:
        """Process events in order, as many ``push`` calls would; return their composite events.

        The entry point for what a source had ready at once (``cep run``): the outputs are exactly
        those of pushing the events one by one, in the same order.  When an event raises (a late
        event, an unknown retraction, Ctrl-C), ``BatchInterrupted`` carries its index and the
        outputs of the events before it (applied; the ones after it are not), its cause the error.
        ``inserts``: the caller promises that every event's op is ``+`` (``cep run``'s reader saw no
        op field in the batch's bytes, ``cep.io.readers.InsertBatch``): the loop tests no op.
        """
        outs: list[Output] = []
        self._handlers.batch(events, outs, inserts)
        return outs

    def push_records(self, records: Sequence[Any], first: int, type_field: str = "type",
                     time_field: str = "ts", event: type | None = None,
                     op_field: str = "op") -> tuple[int, list[Output]]:
        """``push_batch`` over parsed JSON records (``orjson.loads`` of lines), line ``first + i``
        being ``records[i]``: each is checked in the engine's loop (``cep.runtime.handler._fused_head``),
        its Event made (a ``LineEvent``, position its line number) only when the engine keeps or emits
        it.  Returns how many records it took and their composite events: it stops, before the record
        changes anything, at the first that is not an object with a non-empty string type and a
        numeric time, or that has the field ``op_field`` (the caller's decoder takes it from there).
        The caller promises what ``cep.io.readers``' ``decode.plain`` checks: no record has a nested
        value or an integer beyond 64 bits.  An event that raises: ``BatchInterrupted`` as ``push_batch``'s, its
        index counted from ``records[0]``.
        ``event``: the class of the Events made, ``cep.event.LineEvent`` (None) or a subclass of it
        with no more slots (made without arguments, its slots ``type``, ``ts``, ``fields``, ``_n``
        and ``op`` set): a position other than the line number's string is its ``pos``'s business.
        Only for an engine that owns its watermark (``cep run`` over a file or stdin)."""
        if not self.own_watermark:
            raise RuntimeError("push_records needs an engine that owns its watermark")
        outs: list[Output] = []
        if not records:
            return 0, outs
        return self._handlers.batch(records, outs, True, first, type_field, time_field,
                                    LineEvent if event is None else event, op_field), outs

    def _late(self, ts: Any, wm: Any) -> None:
        """Refuse an event below the watermark (counted)."""
        self._n_late += 1
        raise LateEventError(f"event time {ts} is below the watermark {wm}")

    def advance_watermark(self, watermark: int | float) -> list[Output]:
        """Move the watermark forward (a source-owned watermark, an idle source, the end of a
        bounded input with ``math.inf``); returns the composite events this decides (docs/language.md section 7, Decided matches:
        matches of patterns with gap elements whose gaps the watermark has now passed)."""
        outs: list[Output] = []
        if self.watermark is None or watermark > self.watermark:
            self.watermark = watermark
            if self.own_watermark and (self.max_ts is None or watermark + self.lateness > self.max_ts):
                self.max_ts = watermark + self.lateness
            if watermark > self._decide_at or (watermark == self._decide_at and not self._decide_strict):
                outs = self._decide()
            self._expire()
        return outs

    # ------------------------------------------------------- decided matches

    def _decide(self) -> list[Output]:
        """Emit the matches the current watermark decides whose gaps hold: for each deciding
        event it has passed (``cep.runtime.pending``), the matches that event decides.

        Runs before expiry, so every event a pending gap may contain is still indexed, and so
        is every event of those matches (each is at most ``w`` older than the decision time).
        """
        outs: list[Output] = []
        wm = self.watermark
        for ri in self._decided:
            pending = self.pending[ri]
            checks = self.checks[ri]
            for atom, serial in pending.pop_decided(wm):  # type: ignore[union-attr]
                for events in self._decided_by(ri, atom, serial):
                    aggs = checks.evaluate(events)  # type: ignore[union-attr]
                    if aggs is not None:
                        outs.append(self._output_events(ri, events, "+", aggs))
        self._next_decision()
        return outs

    def _next_decision(self) -> None:
        """Recompute the earliest pending decision (``_decide_at``, ``_decide_strict``)."""
        self._decide_at = math.inf
        self._decide_strict = True
        for ri in self._decided:
            pending = self.pending[ri]
            t = pending.next_time()  # type: ignore[union-attr]
            if t is not None:
                self._note_decision(t, pending.strict)  # type: ignore[union-attr]

    def _note_decision(self, time: Any, strict: bool) -> None:
        if time < self._decide_at:
            self._decide_at = time
            self._decide_strict = strict
        elif time == self._decide_at and not strict:
            self._decide_strict = False

    def _decided_by(self, ri: int, atom: int, serial: int) -> list[list[Event]]:
        """The current matches of pattern ``ri`` whose deciding event is ``serial`` as ``atom``."""
        rt = self.runtimes[ri]
        event = self.events[serial]
        if rt.k == 1:  # the event is the match (it reached the root when it was inserted)
            check = rt.residual_check
            return [[event]] if check is None or check([rt.extract[atom](event, serial)]) else []
        t = rt.extract[atom](event, serial)
        decider = self.checks[ri].decider  # type: ignore[union-attr]
        out = []
        for slots in rt.matches_with(atom, t):
            events = rt.events_of(slots, self.events)
            if decider(events) == atom:
                out.append(events)
        return out

    def _complete(self, ri: int, ai: int, serial: int, chain: list, outs: list[Output]) -> None:
        """The new positive matches of a pattern with gaps (those the update path ``chain`` adds
        with the event ``serial`` as atom ``ai``): emit the decided ones whose gaps hold; the
        others wait for the watermark, as one pending entry for their deciding event."""
        checks = self.checks[ri]
        pending = self.pending[ri]
        wm = self.watermark
        if checks.deciders == (ai,):  # type: ignore[union-attr]  # the new event decides every new match
            time = self.events[serial].ts + checks.offset  # type: ignore[union-attr]
            if wm is None or (wm <= time if checks.trailing else wm < time):  # type: ignore[union-attr]
                self._wait(pending, ai, serial, time)  # type: ignore[arg-type]
                return
        rt = self.runtimes[ri]
        for slots in list(rt.changes(chain)):
            events = rt.events_of(slots, self.events)
            d = checks.decider(events)  # type: ignore[union-attr]
            time = events[d].ts + checks.offset  # type: ignore[union-attr]
            if is_decided(time, checks.trailing, wm):  # type: ignore[union-attr]
                aggs = checks.evaluate(events)  # type: ignore[union-attr]
                if aggs is not None:
                    outs.append(self._output_events(ri, events, "+", aggs))
            else:
                self._wait(pending, d, rt.serials_of(slots)[d], time)  # type: ignore[arg-type]

    def _wait(self, pending: PendingDecisions, atom: int, serial: int, time: Any) -> None:
        pending.add(atom, serial, time)
        if time <= self._decide_at:
            self._note_decision(time, pending.strict)
        n = len(pending.live)
        if n > self._peak_pending:
            self._peak_pending = n

    def _undo(self, ri: int, slots: list, outs: list[Output]) -> None:
        """A positive match lost an event.  Undecided, it was never emitted (its deciding
        event's entry finds it gone when the watermark comes); decided, its gaps are frozen
        (inserts and retractions there are late), so re-checking them tells whether its
        ``+`` was emitted and needs a ``-``."""
        events = self.runtimes[ri].events_of(slots, self.events)
        aggs = self._decided_aggregates(self.checks[ri], events)  # type: ignore[arg-type]
        if aggs is not None:
            outs.append(self._output_events(ri, events, "-", aggs))

    def _expire_gaps(self, wm: Any) -> None:
        """Drop the gap-index entries that fell out of their horizon (before ``wm - horizon``);
        an event no index or atom holds any more is forgotten."""
        holders = self._holders
        soonest: Any = math.inf
        for ix, bit, queue, heap, horizon in self._gap_expiry:
            limit = wm - horizon
            due = []
            while queue and queue[0][0] < limit:
                due.append(queue.popleft())
            while heap and heap[0][0] < limit:
                due.append(heapq.heappop(heap))
            shadow = bit << self._shift if self._shadowed else 0  # held for another worker
            for ts, serial, key in due:
                mask = holders.get(serial, 0)
                if mask & bit:
                    ix.remove(key, ts, serial)
                    mask ^= bit
                elif mask & shadow:
                    mask ^= shadow
                else:
                    continue  # retracted meanwhile
                if mask:
                    holders[serial] = mask
                else:
                    self._forget(serial)
            if queue and queue[0][0] + horizon < soonest:
                soonest = queue[0][0] + horizon
            if heap and heap[0][0] + horizon < soonest:
                soonest = heap[0][0] + horizon
        self._gap_expire_at = soonest

    def _gap_remove(self, event: Event, serial: int, mask: int) -> None:
        for bit, ix in self._gap_of_bit.items():
            if mask & bit:
                ix.remove(ix.key_of(event), event.ts, serial)

    def _restore(self, event: Event, serial: int) -> None:
        """Index a saved event under its serial without emitting (``loads``): the generated
        insert of its type (``cep.runtime.handler.quiet_inserter``)."""
        insert = self._quiet.get(event.type)
        if insert is None:
            if event.type not in self.route and event.type not in self.gap_route:
                return  # kept by nothing (a state saved with other patterns is refused before)
            insert = self._quiet[event.type] = quiet_inserter(self, event.type)
        insert(event, serial)

    def _index_fp(self, serial: int, fields: dict) -> None:
        """Index a kept event by its record (only once a retraction has been seen)."""
        self._by_fp.setdefault(_fingerprint(fields), []).append(serial)

    def _atom_bit(self, ri: int, ai: int) -> int:
        """The holder bit of atom ``ai`` of pattern ``ri``."""
        return 1 << self._slots.index((ri, ai))

    def _leaf_tuples(self, serial: int, mask: int):
        """(pattern, atom, leaf tuple) of each atom holding an event, in insertion order."""
        event = self.events[serial]
        mask &= self._atom_bits
        j = 0
        while mask:
            if mask & 1:
                ri, ai = self._slots[j]
                yield ri, ai, self.runtimes[ri].extract[ai](event, serial)
            mask >>= 1
            j += 1

    def _would_keep(self, event: Event) -> bool:
        for ix, flt, *_ in self.gap_route.get(event.type, ()):
            if (flt is None or flt(event)) and ix.key_of(event) is not None:
                return True
        for ri, ai, flt, _bit in self.route.get(event.type, ()):
            if flt is None or flt(event):
                if self.runtimes[ri].extract[ai](event, -1) is not None:
                    return True
        return False

    def _retracted_serials(self, event: Event) -> tuple[Any, list[int] | None]:
        """The fingerprint of a retraction and the serials of its equal retained events; raises
        ``UnknownRetractionError`` when there are none and a pattern could have kept the event."""
        if self.share is not None and not self._shadowed:
            raise RuntimeError("a retraction reached a share of a split built for an insert-only stream "
                               "(Engine(shadow=False)): it cannot tell what the retraction finds")
        if not self._fp_enabled:
            self._fp_enabled = True
            for s in sorted(self.events):
                self._by_fp.setdefault(_fingerprint(self.events[s].fields), []).append(s)
        fp = _fingerprint(event.fields)
        serials = self._by_fp.get(fp)
        if not serials and self._would_keep(event):
            raise UnknownRetractionError("retraction of an event that was never inserted (or is already retracted)")
        return fp, serials

    def _check_retraction(self, event: Event) -> None:
        """Refuse an unknown retraction before its time moves the watermark: a refused record
        changes nothing, so what a move would decide is decided (and emitted) by a later record.
        (Its equal event has the same time, so that move never expires it.)"""
        self._retracted_serials(event)

    def _retract(self, event: Event) -> list[Output]:
        fp, serials = self._retracted_serials(event)
        if not serials:  # no pattern could use the event: retracting it changes nothing
            return []
        serial = serials.pop(0)
        if not serials:
            del self._by_fp[fp]
        outs: list[Output] = []
        mask = self._holders[serial]
        if mask & ~self._atom_bits:
            self._gap_remove(self.events[serial], serial, mask)
        for ri, ai, t in list(self._leaf_tuples(serial, mask)):
            delta = self.runtimes[ri].delete(ai, t)
            if self.checks[ri] is None:
                for slots in delta.matches():
                    outs.append(self._output(ri, slots, "-"))
            else:
                self.pending[ri].discard(ai, serial)  # type: ignore[union-attr]
                for slots in list(delta.matches()):
                    self._undo(ri, slots, outs)
        del self.events[serial]
        del self._holders[serial]
        self._n_retracted += 1
        return outs

    def _expire(self) -> None:
        """Drop the events that fell out of each window at the current watermark (the generated
        expiry, ``cep.runtime.handler``)."""
        self._handlers.expire(self.watermark)

    def _forget(self, serial: int) -> None:
        event = self.events.pop(serial)
        del self._holders[serial]
        self._n_expired += 1
        if self._fp_enabled:
            self._unindex_fp(serial, event)

    def _unindex_fp(self, serial: int, event: Event) -> None:
        """Drop a forgotten event from the record index (only once a retraction has been seen)."""
        fp = _fingerprint(event.fields)
        serials = self._by_fp.get(fp)
        if serials is not None:
            serials.remove(serial)
            if not serials:
                del self._by_fp[fp]

    # ------------------------------------------------------------------ output

    def _output(self, ri: int, slots: list, op: str) -> Output:
        return self._output_events(ri, self.runtimes[ri].events_of(slots, self.events), op)

    def _output_events(self, ri: int, events: list[Event], op: str, aggs: list | tuple = ()) -> Output:
        """A composite event; ``aggs`` are its aggregate slots (docs/language.md section 7, Repetition). Its id is derived
        from its positive events only."""
        name = self.patterns[ri].name
        self._emitted[ri][op != "+"] += 1
        # tuple.__new__: the NamedTuple's own constructor is a Python function (this runs per output)
        return _new_output(Output, (name, op, self._ids[ri](events), self._builders[ri](events, aggs),
                                    self._key_fns[ri](events[0])))

    # --------------------------------------------------------- whole-state API

    def matches(self, pattern: str) -> Iterator[Output]:
        """Every current match of a pattern (full enumeration, constant delay)."""
        ri = self._by_name[pattern]
        rt = self.runtimes[ri]
        cp = self.patterns[ri]
        build = self._builders[ri]
        checks = self.checks[ri]
        for slots in rt.all_matches():
            events = rt.events_of(slots, self.events)
            aggs: list | None = []
            if checks is not None:
                aggs = self._decided_aggregates(checks, events)
                if aggs is None:
                    continue
            mid = self._ids[ri](events)
            yield Output(cp.name, "+", mid, build(events, aggs), self._key_fns[ri](events[0]))

    def match_count(self, pattern: str) -> int:
        """The number of current matches, from the multiplicities when the plan allows."""
        ri = self._by_name[pattern]
        if self.checks[ri] is not None:
            return sum(1 for _ in self.matches(pattern))
        return self.runtimes[ri].count()

    def _decided_aggregates(self, checks: GapChecks, events: list[Event]) -> list | None:
        """The aggregate slots of a decided match that holds; None otherwise."""
        time, strict = checks.decision_time(events)
        return checks.evaluate(events) if is_decided(time, strict, self.watermark) else None

    def next_decision_time(self) -> int | float | None:
        """The earliest time at which the watermark decides a pending match (None: none pending);
        a source that owns the watermark (Spark) wakes the engine up then."""
        times = [p.next_time() for p in self.pending if p is not None and len(p)]
        return min(times) if times else None

    def empty_at(self) -> int | float | None:
        """The watermark above which this engine holds no event (None: it holds none now; inf: a
        pattern without WITHIN keeps one): each retained event leaves once the watermark passes its
        time plus the longest window or gap horizon of the atoms and gap indexes holding it.

        A pure function of the state, for a source that owns the watermark: Spark sets an idle key
        group's event-time timeout there, and drops the group's state once it is empty.
        """
        if not self.events:
            return None
        horizon = {1 << j: math.inf if self.patterns[ri].within is None else self.patterns[ri].within
                   for j, (ri, _ai) in enumerate(self._slots)}
        horizon.update(dict.fromkeys(self._gap_of_bit, math.inf))  # gap indexes of unwindowed patterns
        horizon.update({entry[1]: entry[4] for entry in self._gap_expiry})  # (index, bit, ..., horizon, groups)
        by_mask: dict[int, Any] = {}
        latest: Any = -math.inf
        for serial, event in self.events.items():
            mask = self._holders[serial]
            h = by_mask.get(mask)
            if h is None:
                h = by_mask[mask] = max(hz for bit, hz in horizon.items() if mask & bit)
            if event.ts + h > latest:
                latest = event.ts + h
        return latest

    def pending_count(self) -> int:
        """Matches waiting for the watermark to decide them (docs/language.md section 7, Decided matches)."""
        return sum(len(p) for p in self.pending if p is not None)

    def state_size(self) -> int:
        """Tuples stored over every node of every pattern (plus the retained events)."""
        gaps = sum(ix.size() for ix in self._gap_of_bit.values())
        return len(self.events) + sum(rt.size() for rt in self.runtimes) + gaps + self.pending_count()

    # ------------------------------------------------------------ persistence

    def dumps(self) -> bytes:
        """The engine state as bytes (versioned); the patterns are not included."""
        return encode_state({
            "patterns": [pattern_signature(cp) for cp in self.patterns],
            "lateness": self.lateness,
            "max_ts": self.max_ts,
            "watermark": self.watermark,
            "serial": self._serial,
            "events": [(s, self.events[s]) for s in sorted(self.events)],
            "stats": self.stats,
            "matches_emitted": self.matches_emitted,
            "pending": [p.to_data() if p is not None else None for p in self.pending],
        })

    @classmethod
    def loads(cls, data: bytes, patterns: Sequence[CompiledPattern],
              plans: Sequence[PhysicalPlan] | None = None, *, lines: bool = False) -> Engine:
        """Rebuild an engine from ``dumps()`` output and the same compiled patterns (and their
        physical plans, if the caller keeps them: see ``__init__``; ``lines`` as there)."""
        state = decode_state(data)  # StateError: not a state, unreadable, or not plain data
        eng = cls(patterns, lateness=state["lateness"], plans=plans, lines=lines)
        if state["patterns"] != [pattern_signature(cp) for cp in eng.patterns]:
            raise StateError("the engine state was saved with different patterns or time unit")
        if set(state["stats"]) != set(eng.stats) or any(
                set(state["matches_emitted"].get(name, ())) != {"+", "-"} for name in eng.matches_emitted) \
                or set(state["matches_emitted"]) != set(eng.matches_emitted):
            raise StateError("corrupted engine state: its counters do not fit these patterns")
        serials = [s for s, _e in state["events"]]
        if len(set(serials)) != len(serials) or any(s >= state["serial"] for s in serials):
            raise StateError("corrupted engine state: event serials repeat or pass the next serial")
        eng.max_ts = state["max_ts"]
        eng.watermark = state["watermark"]
        try:
            for serial, event in state["events"]:
                eng._restore(event, serial)
            # an event retained for one pattern may have left another's window: expiry depends
            # only on the watermark and the event's time, so running it now restores exactly that
            if eng.watermark is not None:
                eng._expire()
        except (TypeError, ValueError, ArithmeticError) as e:  # a crafted state with values no run made
            raise StateError(f"corrupted engine state: {type(e).__name__}: {e}") from None
        eng._serial = state["serial"]
        pending = state["pending"]
        if len(pending) != len(eng.pending) or any(
                (d is None) != (p is None) for d, p in zip(pending, eng.pending, strict=True)):
            raise StateError("corrupted engine state: its pending matches do not fit these patterns")
        for ri, data in enumerate(pending):
            store = eng.pending[ri]
            if data is None or store is None:
                continue
            offset = eng.checks[ri].offset  # type: ignore[union-attr]
            for atom, serial in data:
                if atom >= len(eng.patterns[ri].atoms) or not eng._holders.get(serial, 0) & eng._atom_bit(ri, atom):
                    raise StateError("corrupted engine state: a pending match names an event it does not hold")
                store.add(atom, serial, eng.events[serial].ts + offset)
        eng._next_decision()
        eng.stats = state["stats"]
        eng.matches_emitted = state["matches_emitted"]
        return eng
