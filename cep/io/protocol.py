"""What the ``cep run`` loop asks of every source and every sink.

Why base classes: the loop calls each of these on any input or output (file, stdin,
CSV, Kafka), so each one exists on every source and sink, with the neutral behaviour
written once here; a source or sink overrides only what it does differently.  No
``getattr`` guards in the loop, so a misspelt attribute fails loudly.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any


class Source:
    """Records in input order, with a position a checkpoint can resume from."""

    size: int | None = None  # bytes of a bounded input (the progress bar's total); None: unknown
    offset: int = 0  # bytes consumed so far (the progress bar's position)
    seekable: bool = False  # a regular file: reading never waits for more input
    _taking: Iterator[tuple[str, Any]] | None = None  # ``take``'s iterator over ``records()``

    def records(self) -> Iterator[tuple[str, Any]]:
        """``(pos, raw)`` per record: ``pos`` names it in messages, ``raw`` goes to the decoder."""
        raise NotImplementedError

    def take(self, limit: int) -> list[tuple[str, Any]]:
        """The next records that are ready, at most ``limit``: waits only when none is; [] at the end.

        Why: the run loop applies what the input has as one batch and writes (and flushes) the
        batch's output before it takes more, so every composite event is out before the reader
        waits for input.  This default takes up to ``limit`` records from a file (reading a file
        never waits) and one at a time from anything else (it cannot tell what is ready); a source
        that can tell (``JsonlSource``: what one read returned) overrides it.  Positions count the
        records taken, so after ``take`` the position is that of the next record.
        """
        if self._taking is None:
            self._taking = self.records()
        return list(islice(self._taking, limit if self.seekable else 1))

    def partitioned_batches(self) -> Iterator[tuple[int, list[tuple[str, Any]] | None]]:
        """``(partition, [(pos, raw), ...])``: records of one partition in order; ``None`` for the batch: the
        partition went idle (a source that owns the watermark)."""
        raise NotImplementedError(f"{type(self).__name__} is not partitioned")

    def line_of(self, pos: str) -> int | None:
        """The input line of record ``pos``; None where records have no lines."""
        return None

    def position(self) -> dict:
        """Where the next record starts, as a checkpoint stores it."""
        raise NotImplementedError

    def seek(self, position: dict) -> None:
        """Resume at a ``position()`` taken earlier."""
        raise NotImplementedError

    def commit(self) -> None:
        """A checkpoint was saved: tell the input (Kafka commits its group's offsets). Files: nothing."""

    def close(self) -> None:
        """Release the input."""


class Sink:
    """Encoded lines out, each with an optional partition key."""

    def write(self, line: bytes, key: bytes | None = None) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        """Hand everything written so far to the destination."""
        raise NotImplementedError

    def record_done(self) -> None:
        """The run loop wrote one input record's composite events: by default, flush.

        A sink with an acknowledgement round trip (Kafka) waits for one only now and then."""
        self.flush()

    def close(self) -> None:
        """Flush and release the destination."""
        self.flush()
