"""``lazy(pattern, flags)``: a regular expression compiled when it is first used.

Why (issue 15: start-up decides short streams): ``re.compile`` parses and compiles a pattern
in Python, and cep's modules compiled some twenty at import, most of which only error
messages, recovery after a syntax error, CSV input or the printer read: measured on a
`cep run` of the card-testing pattern over an empty file, 28 M of its ~210 M instructions of
start-up were regular expressions compiled.  A module-level ``_X_RE = lazy(...)`` keeps the
pattern next to its users and costs nothing until one of them runs.

The object stands in for the compiled ``re.Pattern``: any attribute (``match``,
``fullmatch``, ``finditer``, ``sub``, ``split``, ``findall``, ``pattern``...) is the compiled
pattern's.  A user on a hot path takes the bound method once (``m = _X_RE.fullmatch``).
A base utility with no import from the rest of cep.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["LazyPattern", "lazy"]


class LazyPattern:
    """``re.compile(pattern, flags)``, made at the first attribute asked for."""

    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern | None = None

    def compiled(self) -> re.Pattern:
        p = self._compiled
        if p is None:
            p = self._compiled = re.compile(*self._args)
        return p

    def __getattr__(self, name: str) -> Any:  # (only for names that are not slots)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"lazy({self._args[0]!r}, {self._args[1]!r})"


def lazy(pattern: str | bytes, flags: int = 0) -> LazyPattern:
    """A regular expression compiled at its first use (see the module doc)."""
    return LazyPattern(pattern, flags)
