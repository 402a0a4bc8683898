"""Stage 2 of cep's Spark query, the state step (``applyInPandasWithState``): per key group, the engines (kept in
the Python worker between micro-batches while the stored state's nonce matches, else loaded from the state
bytes), advanced to Spark's watermark, fed the micro-batch's records in event-time order; their composite events
out, their state saved.

Why a module of its own: it is where the engine core meets Spark's state store and watermark; the route step
and the query only hand it rows.
"""

from __future__ import annotations

import bisect
import math
import operator
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from cep.connectors.spark_pack import _lines_of, _unpack, plain_lines
from cep.connectors.spark_spec import (
    BAD_RECORD_MARK,
    BAD_ROW_GROUP,
    DECODE_CHUNK,
    LINES_OP,
    OUT_SCHEMA,
    PACKED_OUT_SCHEMA,
    SPARK_TIME_OFFSET_US,
    SPARK_TIME_RANGE_US,
    TIME_US,
    PatternSpec,
    SparkPathError,
    error_report,
    spark_time_us,
)

from cep.gc_policy import stream_gc


def _key_fns(spec: PatternSpec) -> list:
    """Per pattern, ``Output -> Kafka key bytes`` (the CLI's rule: the partition key read from the match)."""
    from cep.io.writers import make_key_fn

    fns = _KEY_FNS.get(spec.cache_id())
    if fns is None:
        fns = _KEY_FNS[spec.cache_id()] = [make_key_fn(cp) for cp in spec.compile()]
    return fns


_KEY_FNS: dict[tuple, list] = {}


def _lead_patterns(spec: PatternSpec) -> dict[str, int]:
    """Event type -> the first pattern that uses it: the group whose late row carries a late record's text.

    Why: a record routed to several patterns is late in each of them (one ``late`` row per pattern, counted per
    pattern), but a late-records output holds it once, as ``cep run --late-output`` does.
    """
    lead = _LEADS.get(spec.cache_id())
    if lead is None:
        lead = {}
        for g, cp in enumerate(spec.compile()):
            for t in [a.type for a in cp.atoms] + [t for gap in cp.gaps for t in gap.types]:
                lead.setdefault(t, g)
        _LEADS[spec.cache_id()] = lead
    return lead


_LEADS: dict[tuple, dict[str, int]] = {}


def _push_values(spec: PatternSpec, eng, g: int, values: list[str]) -> tuple[list[tuple], list]:
    """Push one bucket's records of a micro-batch (its packed row values) in event-time order; return the side rows
    (late records, bad records) and the composite events (``Output``s, for ``_out_rows``).

    A record below the engine's watermark (Spark's, see ``engine_watermark``) is late: it becomes a ``late`` row
    (counted per pattern; the record itself rides on its first pattern's row only, so a late-records output holds
    each record once, as ``cep run --late-output`` does).
    The records go to the engine in one ``push_batch`` (as ``cep run``'s batch loop): a late record or an unknown
    retraction interrupts it (``BatchInterrupted``: the outputs before it), and the batch goes on after it.
    """
    from cep.errors import BatchInterrupted, LateEventError, UnknownRetractionError
    from cep.io.readers import make_decoder

    decode = make_decoder(spec.type_field, spec.time_field, spec.time_unit, spec.op_field)
    poss, lines, plain = _lines_of(values)
    evs, ordered, inserts = _decode_group(spec, decode, lines, poss, plain or None)
    arrived = evs
    # packed rows of a group come from several tasks in no guaranteed order: event time, inserts before
    # retractions of equal time (a stable sort: one task's records keep their input order); records already in
    # time order and no retraction among them (one file's, as a rule) are that order
    if not inserts:
        evs = sorted(evs, key=_push_order)
    elif not ordered:
        evs = sorted(evs, key=_TS)
    name = spec.names[g]
    lead = _lead_patterns(spec)
    rows: list[tuple] = []
    outs: list = []
    text_of: dict[int, bytes] | None = None  # id(event) -> its text, built at the first side row
    push_batch = eng.push_batch
    n = len(evs)
    own = None if eng.own_watermark else _own_watermark_from(eng, evs, spec)
    try:
        for lo, hi in ((0, n),) if own is None else ((0, own), (own, n)):
            eng.own_watermark = own is not None and lo == own
            start = lo
            while start < hi:
                try:
                    outs += push_batch(evs[start:hi] if start or hi < n else evs, inserts)
                    break
                except BatchInterrupted as bi:
                    outs += bi.outputs
                    i = start + bi.index
                    start = i + 1
                    ev, cause = evs[i], bi.__cause__
                if text_of is None:
                    text_of = {id(e): t for e, t in zip(arrived, lines, strict=True)}
                raw = text_of[id(ev)]
                value = raw.decode()
                if isinstance(cause, LateEventError):
                    rows.append((name, "late", ev.pos, None, None, value if lead.get(ev.type) == g else None))
                elif isinstance(cause, UnknownRetractionError):
                    reason = ("retraction of an event that was never inserted (or was already retracted or "
                              "expired)")
                    if spec.on_error != "skip":
                        raise SparkPathError(f"{BAD_RECORD_MARK}input record {ev.pos}: {reason}") from None
                    if lead.get(ev.type) == g:
                        rows.append((None, "error", ev.pos, None, None, error_report(ev.pos, reason, raw)))
                else:
                    raise cause
    finally:
        if own is not None:
            eng.own_watermark = False
    return rows, outs


def _decode_group(spec: PatternSpec, decode, lines: list[bytes], poss: list[str],
                  plain: bool | None = None) -> tuple[list, bool, bool]:
    """A group's records decoded as ``cep run`` decodes a JSON lines file, each event at its position; whether
    their times never go down, and whether none is a retraction (``Engine.push_batch``'s ``inserts``).

    Lines that ``plain_lines`` passes are read as ``decode.lines`` reads them without its scan (their events are
    those ``decode`` makes: the tests), in one loop that also notes the order and the ops; a record off that path
    goes through ``decode``. Otherwise ``decode.lines`` in chunks, then the rest of a chunk one at a time.
    Why one loop: a second decode of every record (the route step read them first) was the state step's largest
    cost after the engine's (~0.2 of ~2.3 CPU s per 10^5 records), and the order and the ops were two passes more.
    ``plain``: True when the route step found the lines plain (their packed rows say so: ``_lines_of``), None
    to test them here.
    """
    import orjson

    from cep.io.readers import LineEvent

    evs: list = []
    if plain if plain is not None else plain_lines(lines):
        loads = orjson.loads
        type_field, time_field, op_field = spec.type_field, spec.time_field, spec.op_field
        append = evs.append
        new = LineEvent  # its ``pos`` is ``_n`` (a string here: the position itself)
        ordered, inserts = True, True
        top = -math.inf
        for raw, pos in zip(lines, poss, strict=True):
            try:
                rec = loads(raw)
                typ = rec[type_field]
                ts = rec[time_field]
            except Exception:  # noqa: BLE001 - decode gives the precise reason
                rec = None
            else:
                tt = type(ts)
                if type(typ) is not str or (tt is not int and tt is not float) or not typ:
                    rec = None
                elif op_field in rec:
                    op = rec.pop(op_field)
                    if op == "-":
                        inserts = False
                    elif op != "+":
                        rec = None
                else:
                    op = "+"
            if rec is None:  # off the fast path (an ISO time, say): as ``decode`` reads it
                ev = decode(pos, raw)
                ts = ev.ts
                if ev.op != "+":
                    inserts = False
            else:
                ev = new()
                ev.type = typ
                ev.ts = ts
                ev.fields = rec
                ev._n = pos
                ev.op = op
            append(ev)
            if ts < top:
                ordered = False
            else:
                top = ts
        return evs, ordered, inserts
    many = decode.lines
    end = len(lines)
    big = end > DECODE_CHUNK
    for lo in range(0, end, DECODE_CHUNK):
        got = many(lines[lo:lo + DECODE_CHUNK] if big else lines, lo)
        evs += got
        for k in range(lo + len(got), min(lo + DECODE_CHUNK, end)):
            evs.append(decode(poss[k], lines[k]))  # BadRecord: not expected here
    for ev, pos in zip(evs, poss, strict=True):
        ev.pos = pos
    return evs, False, not any(ev.op == "-" for ev in evs)


def _own_watermark_from(eng, evs: list, spec: PatternSpec) -> int | None:
    """Where in ``evs`` (a group's records of a micro-batch, in event-time order) the engine may move its
    watermark with the records, as ``cep run`` does (``own_watermark``), rather than hold Spark's until the
    end of the batch; None when it may not.

    Why: held, the engine keeps every record of the batch until the end (~100 per key at 10^5 events per
    micro-batch, against the ~4 a one-hour window holds on the bench stream), its indexes grow by that, and
    the batch's expiry runs at the end as one large drop (12 % of the state step in-process). Exact because:
    the records are pushed in time order, so a watermark moved by them never makes a later one of them late;
    it only starts to move at the first record whose own watermark (time - lateness) is not below the
    engine's (Spark's, so it never moves back); and it ends at the largest time - lateness, which must be the
    watermark the state step moves to at the end anyway (``spark_watermark_after``: the same value and type,
    checked here; not so for times finer than Spark's milliseconds or clamped to its range), and Spark's next
    watermark is at least that. Expiry, decisions and matches at a watermark depend only on the records below
    it, all pushed by then.
    """
    if not evs:
        return None
    lateness = eng.lateness
    mx = eng.max_ts
    top = evs[-1].ts
    if mx is not None and mx > top:
        top = mx
    want = top - lateness
    ahead = engine_watermark(spec, spark_watermark_after(spec, top))
    if type(ahead) is not type(want) or ahead != want:
        return None
    wm = eng.watermark
    if wm is None or (mx is not None and mx - lateness >= wm):
        return 0
    return bisect.bisect_left(evs, wm + lateness, key=_TS)


def _push_order(e) -> tuple:
    return e.ts, e.op == "-"


_TS = operator.attrgetter("ts")


def _rows(spec: PatternSpec, g: int, outs: list) -> list[tuple]:
    """Output rows of composite events (also those a watermark move decides: gap elements)."""
    from cep.io.writers import dumps_exact, encode_output

    if not outs:
        return []
    key_fn = _key_fns(spec)[g]
    rows: list[tuple] = []
    for o in outs:
        line = encode_output(o).decode().rstrip("\n")
        kb = key_fn(o) if key_fn is not None else None
        rows.append((o.pattern, o.op, o.id, dumps_exact(o.match).decode() if spec.match_column else None,
                     kb.decode() if kb is not None else None, line))
    return rows


def _out_rows(spec: PatternSpec, g: int, outs: list) -> list[tuple]:
    """The output rows of a group's composite events: one per event (``_rows``), or with ``spec.pack_output``
    one for all of them (``LINES_OP``: their lines as ``cep run`` writes them, joined by a newline, and the
    counts of ``+`` and ``-``).

    Why packed: every output row costs Spark per-row work (Arrow from Python, the observed metrics, the sink)
    on the JVM side, about 0.6 rows per input event; a text sink writes the joined value followed by a newline,
    which is byte for byte the lines one row each would give (an output line is JSON: it holds no newline).
    """
    if not spec.pack_output:
        return _rows(spec, g, outs)
    if not outs:
        return []
    from cep.io.writers import encode_outputs

    text = b"".join(encode_outputs(outs)).decode()[:-1]
    # an encoded line (the engine's lines mode: a new match of an insert) is a "+"
    n_minus = [o[1] for o in outs if type(o) is not str].count("-")
    return [(spec.names[g], LINES_OP, None, None, None, text, len(outs) - n_minus, n_minus)]


def _frame(spec: PatternSpec, rows: list[tuple]):
    """The handler's pandas output: ``OUT_COLS``, or with ``spec.pack_output`` ``PACKED_OUT_COLS`` (a row's
    pattern, op and value, and its counts: side rows, of six columns, count 0).

    Built from its columns, each an array of the dtype ``pd.DataFrame(rows)`` infers (object: strings and nulls;
    int64: the counts). Why: inferring the columns from a list of rows cost ~0.35 ms per group (a group's one
    packed row as a rule), from columns ~0.2 ms; a micro-batch makes one frame per group (64)."""
    import numpy as np
    import pandas as pd

    if spec.pack_output:
        names, texts = PACKED_OUT_COLS, 3
        rows = [(r[0], r[1], r[5], *(r[6:] or (0, 0))) for r in rows]
    else:
        names, texts = OUT_COLS, len(OUT_COLS)
    if not rows:
        return pd.DataFrame(rows, columns=names)
    data = {}
    for i, (name, col) in enumerate(zip(names, zip(*rows, strict=True), strict=True)):
        if i < texts:
            data[name] = arr = np.empty(len(col), dtype=object)
            arr[:] = col
        else:
            data[name] = np.array(col, dtype=np.int64)
    return pd.DataFrame(data)


def out_schema(spec: PatternSpec) -> str:
    return PACKED_OUT_SCHEMA if spec.pack_output else OUT_SCHEMA


OUT_COLS = ["pattern", "op", "id", "match", "key", "value"]
PACKED_OUT_COLS = ["pattern", "op", "value", "n_plus", "n_minus"]

# Engines kept in the Python worker between micro-batches, keyed by (spec, pattern, key group): the key group's
# engines by bucket, valid only while the state store holds the same nonce (a replayed or foreign state has
# another nonce and is loaded from its bytes). A step takes its entry out of the cache and puts it back when it
# saves, so a step that fails half way leaves no half-updated engines behind for a retry.
_ENGINES: OrderedDict = OrderedDict()
ENGINE_CACHE_SIZE = 512  # key groups


def _engines_for(spec: PatternSpec, g: int, kg: int, state) -> dict[int, Any]:
    """The key group's engines by bucket: from the worker cache when it matches the stored state, else from the
    state bytes (``_state_engines``); none for a new state.

    The engines do not derive a watermark from their own rows (``own_watermark=False``): a key group holds keys
    from every input partition, and one partition running ahead would make another's rows late. Spark's
    global watermark moves them instead (``engine_watermark``).
    """
    if not state.exists:
        return {}
    nonce, blob = state.get
    hit = _ENGINES.pop((spec.cache_id(), g, kg), None)
    if hit is not None and hit[0] == nonce:
        return hit[1]
    engines = _state_engines(spec, g, kg, nonce, bytes(blob), lines=spec.pack_output)
    for eng in engines.values():
        eng.own_watermark = False
    return engines


def _state_engines(spec: PatternSpec, g: int, kg: int, nonce: str, blob: bytes, *, lines: bool = False) -> dict:
    """The engines by bucket of a stored state (``_state_blob``), after checking its layout (the nonce's head)."""
    layout = nonce.split(":", 1)[0]
    if layout != spec.layout():
        raise SparkPathError(f"this checkpoint's state was written with --key-groups {layout.replace('x', ' and ')} "
                             f"engines each, not {spec.layout().replace('x', ' and ')}: the key-group layout is "
                             "fixed for the life of a checkpoint")
    if spec.group_engines == 1:
        return {kg: spec.load_engine(g, blob, lines=lines)}
    head, _, rest = blob.partition(b"\n")
    engines, at = {}, 0
    for part in head.split(b" "):
        eg, size = map(int, part.split(b":"))
        engines[eg] = spec.load_engine(g, rest[at:at + size], lines=lines)
        at += size
    return engines


def _state_blob(spec: PatternSpec, engines: dict[int, Any]) -> bytes:
    """The state bytes of a key group's engines: one engine's ``dumps`` (one engine per key group: the layout of
    checkpoints written before key groups held several), else a head line of ``<bucket>:<size>`` for each
    engine, then their ``dumps`` in that order."""
    if spec.group_engines == 1:
        (eng,) = engines.values()
        return eng.dumps()
    blobs = [eng.dumps() for eng in engines.values()]
    head = " ".join(f"{eg}:{len(b)}" for eg, b in zip(engines, blobs, strict=True)).encode()
    return b"\n".join([head, b"".join(blobs)])


def _save(spec: PatternSpec, g: int, kg: int, state, engines: dict[int, Any]) -> None:
    nonce = f"{spec.layout()}:{uuid.uuid4().hex}"
    state.update((nonce, _state_blob(spec, engines)))
    ck = (spec.cache_id(), g, kg)
    _ENGINES[ck] = (nonce, engines)
    while len(_ENGINES) > ENGINE_CACHE_SIZE:
        _ENGINES.popitem(last=False)


def spark_delay_ms(spec: PatternSpec) -> int:
    """The ``withWatermark`` delay: the lateness in whole milliseconds (Spark's watermark unit), rounded up."""
    return int(-(-spec.lateness * TIME_US[spec.time_unit] // 1000))


def engine_watermark(spec: PatternSpec, wm_ms: int) -> int | float | None:
    """The engine watermark (in time units) that Spark's global watermark ``wm_ms`` stands for; None before any.

    Spark's watermark is ``max over every partition of floor_ms(time + offset) - delay`` as of the end of the
    previous micro-batch, so this is ``max time - lateness`` (``cep run``'s watermark over the same records),
    lower by under 1 ms when times have sub-millisecond parts (the engine then accepts a little more).
    """
    if wm_ms <= 0:
        return None
    factor = TIME_US[spec.time_unit]
    lateness_us = int(round(spec.lateness * factor))
    return _from_us((wm_ms + spark_delay_ms(spec)) * 1000 - SPARK_TIME_OFFSET_US - lateness_us, factor)


def spark_watermark_after(spec: PatternSpec, max_ts: int | float) -> int:
    """The watermark (ms) Spark computes after a batch whose largest event time is ``max_ts``: the same offset,
    clamp, millisecond floor and delay as Spark, so the engine can move to it before Spark does."""
    return spark_time_us(int(round(max_ts * TIME_US[spec.time_unit]))) // 1000 - spark_delay_ms(spec)


def timer_ms(spec: PatternSpec, decision_time: int | float) -> int:
    """The event-time timeout (Spark ms) after which Spark's watermark decides a match due at ``decision_time``.

    Spark calls a timed-out group once its watermark is *above* the timeout; the engine decides a match once its
    watermark (``engine_watermark``) is at (or, for a strict gap end, above) the decision time. The smallest
    Spark watermark ``W`` with ``engine_watermark(W) > decision_time`` covers both cases, so the timeout is
    ``W - 1``, clamped to the time range Spark's column holds.
    """
    factor = TIME_US[spec.time_unit]
    lateness_us = int(round(spec.lateness * factor))
    if decision_time == math.inf:
        return SPARK_TIME_RANGE_US[1] // 1000
    need_us = decision_time * factor + SPARK_TIME_OFFSET_US + lateness_us  # (W + delay) * 1000 must pass this
    w = math.floor(need_us / 1000) + 1 - spark_delay_ms(spec)
    return max(1, min(w - 1, SPARK_TIME_RANGE_US[1] // 1000))


def _handler(spec: PatternSpec):
    """applyInPandasWithState: one key group's engines in the state store, under Spark's global watermark.

    Spark's late-row filter is off (see ``detect``), so every row reaches the engine, and a late one is counted
    and reported (a ``late`` row) rather than dropped unseen. A group with pending matches (gap elements) sets an
    event-time timeout at its next decision time, so Spark calls it when the watermark passes that time even if
    the group gets no more rows (the watermark is carried by other keys' rows; with ``availableNow`` the final
    no-data batch fires it too). Without pending matches the timeout is where the watermark will have expired
    every event the group retains (``Engine.empty_at``): an idle group's state is then removed, not kept until
    it next gets rows.
    """

    def fn(key, pdfs, state) -> Iterator[Any]:
        with stream_gc():
            g = int(key[0])
            rows = _group_step(spec, g, spec.kg_index(g, int(key[1])), pdfs, state)
        if rows:
            yield _frame(spec, rows)

    return fn


def _by_bucket(pdfs) -> dict[int, list[str]]:
    """A key group's packed row values by engine bucket (``eg``), in row order."""
    out: dict[int, list[str]] = {}
    for pdf in pdfs:
        if len(pdf):
            for eg, value in zip(pdf["eg"].tolist(), pdf["value"].tolist(), strict=True):
                out.setdefault(eg, []).append(value)  # (a packed row per bucket and route task: a few per group)
    return out


def _group_step(spec: PatternSpec, g: int, kg: int, pdfs, state) -> list[tuple]:
    """One key group's micro-batch (see ``_handler``): its output rows; its state saved, removed or timed.

    Every engine of the group moves to Spark's watermark (deciding pending matches, expiring events); the
    engines of the buckets with rows then push them (``_push_values``) and move ahead to the watermark their
    own rows imply.
    """
    if g == BAD_ROW_GROUP:
        return [(None, "error", pos, None, None, report) for pos, report in _unpack(pdfs)]
    engines = _engines_for(spec, g, kg, state)
    values = _by_bucket(pdfs)
    for eg in values:
        if eg not in engines:
            engines[eg] = spec.new_engine(g, own_watermark=False, lines=spec.pack_output)
    wm = engine_watermark(spec, state.getCurrentWatermarkMs())
    rows: list[tuple] = []
    outs: list = []
    wake = None
    for eg in sorted(engines):
        eng = engines[eg]
        if wm is not None:
            # moving the watermark decides pending matches (patterns with gap elements)
            outs += eng.advance_watermark(wm)
        mine = values.get(eg)
        if mine:
            side, pushed = _push_values(spec, eng, g, mine)
            rows += side
            outs += pushed
        if eng.max_ts is not None:
            # Spark's next watermark is at least this bucket's own (its rows are among all rows), so expiring and
            # deciding up to it now loses nothing and saves a state of window + lateness, not the whole batch
            ahead = engine_watermark(spec, spark_watermark_after(spec, eng.max_ts))
            if ahead is not None:
                outs += eng.advance_watermark(ahead)
        if eng.retained_events == 0:
            del engines[eg]  # a bucket's engine that holds nothing is made afresh when it gets rows again
            continue
        # wake up at the next pending decision, or once the watermark has expired every event: then the
        # engine holds nothing and is dropped, even if its bucket never gets rows again
        at = eng.next_decision_time()
        if at is None:
            at = eng.empty_at()
        if at is not None and at != math.inf and (wake is None or at < wake):
            wake = at
    rows += _out_rows(spec, g, outs)

    if not engines:
        if state.exists:
            state.remove()
    else:
        _save(spec, g, kg, state, engines)
        if wake is not None:
            state.setTimeoutTimestamp(max(timer_ms(spec, wake), state.getCurrentWatermarkMs(), 1))
    return rows


def _batch_handler(spec: PatternSpec):
    """applyInPandas for a static DataFrame: one fresh engine per engine bucket over all its rows."""

    def fn(key, pdf):
        g = int(key[0])
        if g == BAD_ROW_GROUP:
            rows = [(None, "error", pos, None, None, report) for pos, report in _unpack([pdf])]
        else:
            rows, outs = [], []
            for _eg, values in sorted(_by_bucket([pdf]).items()):
                eng = spec.new_engine(g, lines=spec.pack_output)
                side, pushed = _push_values(spec, eng, g, values)
                # a static DataFrame is a bounded input: its end decides every pending match
                rows += side
                outs += pushed + eng.advance_watermark(math.inf)
            rows += _out_rows(spec, g, outs)
        return _frame(spec, rows)

    return fn


def _from_us(us: int, factor: int) -> int | float:
    if factor == 1:
        return us
    q, r = divmod(us, factor)
    return q if r == 0 else us / factor
