"""Composite events and side records -> JSON lines, written and flushed per batch of input.

Why: docs/language.md section 4 says every match is emitted before the reader waits for
more input, and section 6 that output is flushed, never truncated, when the run stops on
an error.  A sink buffers the lines of one batch of input records and ``flush()`` writes
them with one system call; the run loop calls it only for batches that produced output
(and before any exit), so a batch without output costs nothing here.  orjson keeps
integers integers.

``FileSink.size`` is the number of bytes the file holds after the last flush;
a checkpoint records it, and a resumed run truncates the file back to it, so
the lines written after the last checkpoint are not duplicated.
"""

from __future__ import annotations

import math
import os
import sys
from typing import IO, Any

import orjson

from cep.event import Output
from cep.io.protocol import Sink
from cep.lang.gcq import CompiledPattern
from cep.values import SqlBool

_OPTS = orjson.OPT_APPEND_NEWLINE


def _default(v: Any) -> Any:
    if type(v) is SqlBool:
        return v.value
    if isinstance(v, (set, frozenset, tuple)):
        return list(v)
    raise TypeError(f"cannot write a {type(v).__name__} as JSON")


def _plain(v: Any) -> Any:
    """``v`` with what the stdlib writes differently from orjson made alike (for ``dumps_exact``)."""
    t = type(v)
    if t is dict:
        return {str(k) if type(k) is not str else k: _plain(x) for k, x in v.items()}
    if t is list or t is tuple or t is set or t is frozenset:
        return [_plain(x) for x in v]
    if t is float and not math.isfinite(v):
        return None  # as orjson writes it
    if t is SqlBool:
        return v.value
    return v


def dumps_exact(obj: Any, option: int = 0) -> bytes:
    """orjson, or -- for an integer beyond 64 bits, which orjson cannot write -- the stdlib, exactly.

    ``100000000000000000000001`` is written as that integer, never as ``1e+23`` (docs/language.md section 5).
    """
    try:
        return orjson.dumps(obj, default=_default, option=option)
    except TypeError as e:
        if "64-bit" not in str(e):
            raise
    import json  # only for such values: not imported at start-up

    text = json.dumps(_plain(obj), separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                      default=_default)
    return text.encode("utf-8") + (b"\n" if option & orjson.OPT_APPEND_NEWLINE else b"")


_dumps = orjson.dumps


def encode_output(o: Output) -> bytes:
    """One composite event as a JSON line: ``{"pattern", "op", "id", "match"}``.

    One orjson call over a four-key dict (this runs per composite event: one C call is
    cheaper than encoding the id and the match apart and joining them); an integer beyond
    64 bits takes ``dumps_exact``.
    """
    line = {"pattern": o[0], "op": o[1], "id": o[2], "match": o[3]}
    try:
        return _dumps(line, default=_default, option=_OPTS)
    except TypeError:
        return dumps_exact(line, _OPTS)


CHUNK = 1024  # lines per byte string of ``encode_outputs``


def encode_outputs(outs: list) -> list[bytes]:
    """``encode_output`` of each composite event, in order, joined into byte strings of up to
    ``CHUNK`` lines (the run loop's form: one list display per chunk, no Python call per
    composite event).  A composite event already encoded (a ``str`` line, from an
    ``Engine(lines=True)``) is written as it is: a chunk of only those is one join and one
    ``str.encode``.

    Why joined: orjson returns each line in a buffer it allocated larger and shrank, and a
    batch keeping tens of thousands of those until its flush fragments the heap (measured:
    +20 MB peak RSS on the output-heavy fraud stream); a chunk's lines are copied into one
    string at once and their buffers freed while the next chunk reuses them.
    """
    dumps, default, opts = _dumps, _default, _OPTS
    chunks = []
    for i in range(0, len(outs), CHUNK):
        part = outs[i:i + CHUNK]
        try:
            chunks.append("".join(part).encode())
            continue
        except TypeError:  # Output objects among them (a failed join stops at the first)
            pass
        try:  # unpacking takes only an Output (5 items): a line among them raises ValueError
            chunks.append(b"".join([dumps({"pattern": p, "op": op, "id": mid, "match": m}, default, opts)
                                    for p, op, mid, m, _ in part]))
        except (TypeError, ValueError):  # lines among them, or an integer beyond 64 bits: each on its own
            chunks.append(b"".join([o.encode() if type(o) is str else encode_output(o) for o in part]))
    return chunks


def encode_record(rec: Any) -> bytes:
    """A side record (late record, error report) as one JSON line."""
    return dumps_exact(rec, _OPTS | orjson.OPT_NON_STR_KEYS)


def raw_line(raw: Any) -> bytes:
    """An input record as a line: the bytes as read (newline ensured) or the parsed dict as JSON."""
    if type(raw) is bytes:
        return raw if raw.endswith(b"\n") else raw + b"\n"
    if isinstance(raw, (bytearray, memoryview)):
        b = bytes(raw)
        return b if b.endswith(b"\n") else b + b"\n"
    return encode_record(raw)


class StreamSink(Sink):
    """Buffered JSON lines on a binary stream (stdout or a file)."""

    def __init__(self, stream: IO[bytes], name: str = "-", close: bool = False, size: int = 0) -> None:
        self._stream = stream
        self.name = name
        self._close = close
        self._buf: list[bytes] = []
        self.size = size  # bytes in the destination after the last flush
        self.write_line = self._buf.append  # fast paths: the run loop appends encoded lines
        self.write_lines = self._buf.extend

    def write(self, line: bytes, key: bytes | None = None) -> None:
        self._buf.append(line)

    def flush(self) -> None:
        buf = self._buf
        if buf:
            data = b"".join(buf) if len(buf) > 1 else buf[0]
            buf.clear()
            try:
                self._stream.write(data)
                self._stream.flush()
            except BrokenPipeError:
                raise  # the reader went away (``| head``): the CLI stops quietly
            except OSError as e:  # a full disk, /dev/full: every write failure is an error
                raise SinkError(f"cannot write {self.name}: {e.strerror or e}") from None
            self.size += len(data)
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise SinkError(f"cannot write {self.name}: {e.strerror or e}") from None

    record_done = flush  # Sink's default, bound directly: no extra call per record on the hot path

    def sync(self) -> None:
        """Flush and fsync (before a checkpoint claims these bytes are written)."""
        self.flush()
        try:
            os.fsync(self._stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._close and not self._stream.closed:
                try:
                    self._stream.close()
                except OSError as e:
                    raise SinkError(f"cannot write {self.name}: {e.strerror or e}") from None


def open_sink(spec: str, truncate_to: int | None = None):
    """``-`` (stdout), a path, or ``kafka://...`` (cep.io.kafka, imported only then).

    ``truncate_to``: resume a checkpointed run, keeping the file's first
    ``truncate_to`` bytes (what the checkpoint saw written) and appending.
    """
    if spec.startswith("kafka://"):
        try:
            from cep.io import kafka  # type: ignore[import-not-found]
        except ImportError as e:
            raise SinkError(f"Kafka output needs the kafka extra (pip install 'cep[kafka]'): {e}") from None
        return kafka.open_sink(spec)
    if spec == "-":
        return StreamSink(sys.stdout.buffer, "-", close=False)
    return open_file_sink(spec, truncate_to)


def open_file_sink(path: str, truncate_to: int | None = None) -> StreamSink:
    """A file sink: created fresh, or (resume) cut back to ``truncate_to`` bytes and appended to."""
    try:
        if truncate_to is not None and os.path.exists(path):
            f = open(path, "r+b")
            size = os.fstat(f.fileno()).st_size
            if os.path.isfile(path) and size > truncate_to:
                f.truncate(truncate_to)
                size = truncate_to
            f.seek(0, os.SEEK_END)
            return StreamSink(f, path, close=True, size=size)
        return StreamSink(open(path, "wb"), path, close=True)
    except OSError as e:
        raise SinkError(f"cannot open output {path}: {e.strerror or e}") from None


class SinkError(Exception):
    """An output cannot be opened or written."""


# ---------------------------------------------------------------------------
# record keys for keyed sinks (Kafka): the partition key of the composite event


def kafka_key(values: list[Any]) -> bytes:
    """The key bytes of a partition key value: a string as is, else compact JSON (1.0 -> 1).

    The same rule as the Spark path (``cep.connectors.spark_spec.kafka_key``), so both
    paths key a composite event alike.
    """
    vals = [int(v) if type(v) is float and v.is_integer() else v for v in values]
    if len(vals) == 1:
        v = vals[0]
        if type(v) is str:
            return v.encode()
        return dumps_exact(v)
    return dumps_exact(vals)


def make_key_fn(cp: CompiledPattern):
    """``Output -> key bytes`` for a compiled pattern, or None when it has no partition key.

    The key is the pattern's partition key value (``Output.key``, filled by the
    engine from the match's events), whatever EMIT keeps.
    """
    if not cp.partition_vars:
        return None

    def key(o: Output) -> bytes | None:
        return None if o.key is None else kafka_key(list(o.key))

    return key
