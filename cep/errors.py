"""Errors users see, in the formats of docs/language.md (section 6).

Pattern problems are ``Diagnostic`` values (file, position, message, severity)
collected into one ``PatternError``, so every problem in a file is reported,
not only the first.  ``format()`` renders ``FILE:LINE:COL: message``, the
offending source line and a caret under the column.  (A bad input record is
``cep.io.readers.BadRecord``; the run loop names its line.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cep.lang.ast import Loc


@dataclass(frozen=True)
class Diagnostic:
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
        caret = " " * max(self.loc.col - 1, 0) + "^"
        return f"{head}\n    {self.source_line}\n    {caret}"


@dataclass
class PatternError(Exception):
    """One or more pattern diagnostics; raised by the parser, checker and compiler."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(d.format() for d in self.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]


class NotSupportedYet(PatternError):
    """A phase-2 construct (docs/language.md section 7) that this version rejects."""


class LateEventError(Exception):
    """Raised by the engine for an event whose time is below the watermark."""


class UnknownRetractionError(Exception):
    """A retraction that finds no equal inserted event still retained."""
