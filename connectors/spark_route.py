"""Stage 1 of cep's Spark query, the route step (``mapInPandas``): every input record to the group(s) of every
pattern that uses its type, one packed row per (pattern, engine bucket) of the task's input.

Why: Spark moves rows, cep moves records; the route decodes each record exactly as ``cep run`` does
(``cep.io.readers.make_decoder``) to find its type, time and key (``_router``), and packs a group's records into
one row (``spark_pack``) because Spark's per-row work, not the bytes, was most of the JVMs' CPU.
"""

from __future__ import annotations

import gc
import math
import zlib
from collections.abc import Iterator
from typing import Any

from cep.connectors.spark_pack import _packed_frame, no_long_integer
from cep.connectors.spark_spec import (
    BAD_RECORD_MARK,
    BAD_ROW_GROUP,
    DECODE_CHUNK,
    PACK_RECORDS,
    TIME_US,
    PatternSpec,
    SparkPathError,
    _canon_key,
    error_report,
)

from cep.gc_policy import stream_gc
from cep.plan.partition import partition_attrs

KEY_CACHE_SIZE = 100_000  # string partition keys whose key group a route step remembers (then starts afresh)


def _router(spec: PatternSpec):
    """``route(lines, start, prefix, poss, packs) -> routed``: each record ``lines[i]`` (raw bytes, ``i >= start``) to
    its groups' packs (see ``_route_batches``), its position being ``prefix + str(i)`` (a whole file: ``i`` is
    the line number) or ``poss[i]``: ``packs[(g, bucket)] = [largest time in time units, segments]``, a segment
    being ``(prefix, position rests, texts)`` of one call; bad records (with ``on_error="skip"``) to
    ``(BAD_ROW_GROUP, 0)`` as their report, blank ones nowhere."""
    import orjson

    from cep.io.readers import BadRecord, make_decoder
    from cep.lang.gcq import TIME_ATTR, read_key

    cps = spec.compile()
    loads = orjson.loads
    type_field, time_field, op_field = spec.type_field, spec.time_field, spec.op_field
    decode = make_decoder(spec.type_field, spec.time_field, spec.time_unit, spec.op_field)
    factor = TIME_US[spec.time_unit]
    groups = spec.engine_buckets()  # a record's bucket; its key group is the bucket % key_groups (_packed_frame)
    skip = spec.on_error == "skip"
    crc32 = zlib.crc32
    tracked = gc.is_tracked
    # type -> [(g, attrs or None, the one attribute of a one-field key or None)]
    routes: dict[str, list[tuple[int, tuple[str, ...] | None, str | None]]] = {}
    for g, cp in enumerate(cps):
        attrs = partition_attrs(cp)
        types = [a.type for a in cp.atoms] + [t for gap in cp.gaps for t in gap.types]
        for t in dict.fromkeys(types):
            a = None if attrs is None else attrs[t]
            one = a[0] if a is not None and len(a) == 1 and a[0] != TIME_ATTR else None
            routes.setdefault(t, []).append((g, a, one))
    # key group of a one-field string key (the common case): crc32 of its canonical JSON, once per key
    kg_of: dict[str, int] = {}

    def group_of(ev, attrs, one) -> int:
        """The key group of ``ev`` for a pattern keyed by ``attrs`` (``one``: its one attribute, if so)."""
        if attrs is None:
            return 0
        if one is not None and type(v := ev.fields.get(one)) is str:
            kg = kg_of.get(v)
            if kg is None:
                if len(kg_of) >= KEY_CACHE_SIZE:
                    kg_of.clear()
                kg = kg_of[v] = crc32(_canon_key((v,)).encode()) % groups
            return kg
        return crc32(_canon_key(read_key(ev, attrs)).encode()) % groups

    def pack_of(cur: dict, key: tuple[int, int]) -> list:
        pack = cur.get(key)
        if pack is None:
            pack = cur[key] = [-math.inf, []]
        return pack

    def add(cur: dict, key: tuple[int, int], ts, item) -> None:
        """Add ``item`` (a record's index in a call, or a call's segment in ``packs``) to ``cur[key]``, a pack of
        ``[largest time, items]``."""
        pack = cur.get(key)
        if pack is None:
            cur[key] = [ts, [item]]
        else:
            if ts > pack[0]:
                pack[0] = ts
            pack[1].append(item)

    # the common case: a type read by one pattern with a one-field key (the loop below, without calls)
    single = {t: found[0] for t, found in routes.items() if len(found) == 1 and found[0][2] is not None}

    def route(lines: list[bytes], start: int, prefix: str, poss: list[str] | None, packs: dict,
              plain: bool | None = None) -> int:
        """Route ``lines[start:]`` into ``packs``; the routed (record, group) pairs.

        The records are decoded as ``cep run`` decodes a JSON lines file (``decode.lines``: a chunk's leading
        records on the fast path in one call, the record that ends the run one at a time, then on), and a
        group's records are gathered as indexes into ``lines`` (one list append per record), made a segment
        of texts and position rests once per group at the end. A pack's time is the largest event time of its
        records in time units (``_packed_frame`` converts it to us: the conversion is monotonic, so the largest
        converted time is the converted largest), -inf for the bad records' group.
        ``plain`` (``no_long_integer`` of the lines' bytes; computed when not given): the records on
        ``decode.lines``' fast path are read from their dicts without making its events (the route needs a
        record's type, time and key only): the same records take that path, with the same values (the events
        are made in the state step). Why: making 10^5 events per micro-batch that are dropped at once was a
        third of the route step. A record holding a dict or a list (a bad record) leaves that path where it is
        parsed (``gc.is_tracked``, as ``decode.plain`` finds it), so its bytes are not scanned for one.
        """
        cur: dict[tuple[int, int], list] = {}  # (g, bucket) -> [largest time, indexes into lines]
        # the type of the record before (none yet) and its ``single`` route: (sg, sattrs, sone), the pattern's
        # key cache ``scache``
        last_type, last_route = _NO_TYPE, None
        at_value: list[dict[str, list]] = [{} for _ in cps]  # per pattern: a string key value -> its pack in cur
        bad: list[tuple[str, bytes]] = []
        many = decode.lines
        end = len(lines)
        if plain is None:
            plain = no_long_integer(b"\n".join(lines[start:]))
        for lo in range(start, end, DECODE_CHUNK):
            hi = min(lo + DECODE_CHUNK, end)
            if plain:
                # decode.lines' fast path without its events: each record's type, time and key read from its
                # dict (see ``no_long_integer``); up to the first record off that path. A string key seen before in
                # this call finds its pack in one look-up (``at_value``)
                for i in range(lo, hi):  # noqa: B007 - i: where the run stopped
                    try:
                        rec = loads(lines[i])
                        typ = rec[type_field]
                        ts = rec[time_field]
                    except Exception:  # noqa: BLE001 - decode gives the precise reason
                        break
                    if typ != last_type:  # a type is checked, and its route found, once per run of it (most
                        # files hold one type, or few in runs): per record, a string compare
                        if type(typ) is not str or not typ:
                            break
                        last_type, last_route = typ, single.get(typ)
                        if last_route is not None:
                            sg, sattrs, sone = last_route
                            scache = at_value[sg]
                    tt = type(ts)
                    if (tt is not int and tt is not float) or tracked(rec):
                        break
                    if op_field in rec:  # most records have none
                        op = rec.pop(op_field)
                        if op != "+" and op != "-":
                            break
                    if last_route is not None:
                        try:
                            v = rec[sone]
                        except KeyError:
                            v = None
                        if type(v) is str:
                            pack = scache.get(v)
                            if pack is None:
                                pack = scache[v] = pack_of(cur, (sg, group_of(_plain_event(typ, ts, rec), sattrs, sone)))
                        else:
                            pack = pack_of(cur, (sg, group_of(_plain_event(typ, ts, rec), sattrs, sone)))
                        if ts > pack[0]:
                            pack[0] = ts
                        pack[1].append(i)
                        continue
                    found = routes.get(typ)
                    if found:
                        ev = _plain_event(typ, ts, rec)
                        for g, attrs, one in found:
                            add(cur, (g, group_of(ev, attrs, one)), ts, i)
                else:
                    i = hi
                slow = i
            else:
                evs = many(lines[lo:hi], lo)
                slow = lo + len(evs)
                for i, ev in enumerate(evs, lo):  # (records that are not plain: rare, so not inlined)
                    for g, attrs, one in routes.get(ev.type, ()):
                        add(cur, (g, group_of(ev, attrs, one)), ev.ts, i)
            # the record that ends the fast run and the rest of the chunk one at a time (as ``cep run``)
            for k in range(slow, hi):
                raw = lines[k]
                pos = prefix + (str(k) if poss is None else poss[k])
                try:
                    ev = decode(pos, raw)
                except BadRecord as e:
                    if not raw.strip():  # a blank record (as ``cep run`` skips a blank line)
                        continue
                    if not skip:
                        raise SparkPathError(f"{BAD_RECORD_MARK}input record {pos}: {e}") from None
                    bad.append((pos, error_report(pos, str(e), raw).encode()))
                    continue
                for g, attrs, one in routes.get(ev.type, ()):
                    add(cur, (g, group_of(ev, attrs, one)), ev.ts, k)
        at = lines.__getitem__
        for key, (ts, idx) in cur.items():
            # a whole file's position rests are its line numbers, kept as ints (``_pack_segments`` writes them)
            add(packs, key, ts, (prefix, idx if poss is None else list(map(poss.__getitem__, idx)),
                                 list(map(at, idx)), plain))
        if bad:
            pack = packs.setdefault((BAD_ROW_GROUP, 0), [-math.inf, []])
            pack[1].append(("", [p for p, _r in bad], [r for _p, r in bad], False))
        return sum(len(idx) for _ts, idx in cur.values()) + len(bad)

    route.factor = factor  # type: ignore[attr-defined]
    route.kg_labels = spec.kg_labels  # type: ignore[attr-defined]
    return route


_NO_TYPE = object()  # equal to no record's type (``_router``'s loop: the type of the record before)










def _plain_event(typ: str, ts: int | float, rec: dict):
    """The event ``decode`` makes of a record on its fast path (for its key: position and op unused)."""
    from cep.event import Event

    ev = Event.__new__(Event)
    ev.type, ev.ts, ev.fields, ev.pos, ev.op = typ, ts, rec, "", "+"
    return ev








def _route_batches(spec: PatternSpec, whole_files: bool = False):
    """mapInPandas: a task's records -> one packed row per group (see the module docstring, stage 1).

    ``whole_files``: each input row is a whole file (``pos`` = its path, ``value`` = its text), split into lines
    here, line ``i`` (from 1) being the record at ``<path>:<i>`` and blank lines no records, as ``cep run`` reads
    a file. Why here: splitting in Spark (``posexplode``, a filter, a position per line) is per-row JVM work on
    every record, and ``bytes.split`` is a fraction of it. The records go to the router as raw bytes (a whole
    file's ``split``; ``input_records`` gives bytes, a text value is encoded), as ``cep run`` reads them.
    """

    def fn(batches: Iterator[Any]) -> Iterator[Any]:
        route = _router(spec)
        packs: dict[tuple[int, int], list] = {}  # (g, kg) -> [largest time, segments]: see ``_router``
        held = 0
        for pdf in batches:
            with stream_gc():
                if whole_files:
                    for pos, value in zip(pdf["pos"].tolist(), pdf["value"].tolist(), strict=True):
                        if value is None:
                            continue
                        raw = value.encode() if isinstance(value, str) else bytes(value)
                        # line i at index i (a blank line is no record: ``route`` skips it, keeping its number)
                        held += route([b"", *raw.split(b"\n")], 1, f"{pos}:", None, packs, no_long_integer(raw))
                else:
                    poss, lines = [], []
                    for pos, value in zip(pdf["pos"].tolist(), pdf["value"].tolist(), strict=True):
                        if value is not None:
                            poss.append(pos)
                            lines.append(value.encode() if isinstance(value, str) else bytes(value))
                    held += route(lines, 0, "", poss, packs)
            if held >= PACK_RECORDS:  # checked per input batch (a whole file is one)
                yield _packed_frame(packs, route.factor, route.kg_labels)
                packs, held = {}, 0
        if packs:
            yield _packed_frame(packs, route.factor, route.kg_labels)

    return fn
