"""Errors users see, in the formats of docs/language.md (section 6).

Pattern problems are ``Diagnostic`` values (file, position, message, severity)
collected into one ``PatternError``, so every problem in a file is reported,
not only the first.  ``format()`` renders ``FILE:LINE:COL: message``, the
offending source line and a caret under the column.  (A bad input record is
``cep.io.readers.BadRecord``; the run loop names its line.)
"""

from __future__ import annotations

from collections.abc import Iterable

from cep.lang.ast import Loc
from cep.records import field, record

MAX_REPORTED = 50  # diagnostics printed per command; the rest are counted, not shown
LINE_WINDOW = 120  # characters of a long source line quoted around the column


@record(frozen=True)
class Diagnostic:
    """One problem in a pattern file: where, what, how bad (``format`` renders it for the user)."""

    file: str
    loc: Loc
    message: str
    severity: str = "error"  # "error" | "warning"
    source_line: str = ""

    def format(self) -> str:
        """``FILE:LINE:COL: [warning: ]message`` then the source line and a caret."""
        prefix = "" if self.severity == "error" else "warning: "
        head = f"{self.file}:{self.loc.line}:{self.loc.col}: {prefix}{self.message}"
        if not self.source_line:
            return head
        line, col = _window(self.source_line, max(self.loc.col - 1, 0))
        return f"{head}\n    {line}\n    {' ' * col}^"


def _window(line: str, col: int) -> tuple[str, int]:
    """At most ``LINE_WINDOW`` characters of ``line`` around ``col`` (0-based), and the caret's column.

    Why: a machine-written pattern may put megabytes on one line; quoting it whole under each
    of many errors printed gigabytes.
    """
    if len(line) <= LINE_WINDOW:
        return line, col
    start = max(0, min(col - LINE_WINDOW // 2, len(line) - LINE_WINDOW))
    end = start + LINE_WINDOW
    head = "..." if start > 0 else ""
    tail = "..." if end < len(line) else ""
    return head + line[start:end] + tail, col - start + len(head)


def format_diagnostics(diagnostics: Iterable[Diagnostic], limit: int = MAX_REPORTED) -> str:
    """The diagnostics, one block each, the first ``limit`` of them; then how many were left out."""
    out: list[str] = []
    left = 0
    for d in diagnostics:
        if len(out) < limit:
            out.append(d.format())
        else:
            left += 1
    if left:
        out.append(f"... and {left} more diagnostic(s) not shown")
    return "\n".join(out)


@record
class PatternError(Exception):
    """One or more pattern diagnostics; raised by the parser, checker and compiler."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __str__(self) -> str:
        return format_diagnostics(self.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]


class NotSupportedYet(PatternError):
    """A phase-2 construct (docs/language.md section 7) that this version rejects."""


class LateEventError(Exception):
    """Raised by the engine for an event whose time is below the watermark."""


class UnknownRetractionError(Exception):
    """A retraction that finds no equal inserted event still retained."""


class BatchInterrupted(Exception):
    """``Engine.push_batch`` stopped at ``events[index]``, which raised (the cause, ``__cause__``).

    The events before it are applied and ``outputs`` are their composite events, in order, so the
    caller writes them and decides what the failing event means (late, bad, Ctrl-C) as it would for
    ``push``; the events after it are not applied.
    """

    def __init__(self, index: int, outputs: list) -> None:
        super().__init__(f"event {index} of the batch raised")
        self.index = index
        self.outputs = outputs
