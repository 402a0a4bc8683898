"""Duration units and timestamp units: the one table every part of cep reads.

Why one module: a duration is written in a pattern (``WITHIN 5 secs``), on the
command line (``--lateness 5 secs``) and to ``cep spark``; when each kept its
own table the same text was accepted in one place and rejected in another.
The parser, the compiler, ``cep run`` options, the readers and the Spark
connector all ask this module, so a spelling means the same everywhere
(docs/language.md, "Durations").
"""

from __future__ import annotations

from cep.lazyre import lazy

# every accepted spelling (case-insensitive) -> the canonical unit
DURATION_UNITS: dict[str, str] = {
    "ms": "ms", "millisecond": "ms", "milliseconds": "ms",
    "s": "s", "sec": "s", "secs": "s", "second": "s", "seconds": "s",
    "min": "min", "mins": "min", "minute": "min", "minutes": "min",
    "h": "h", "hour": "h", "hours": "h",
    "d": "d", "day": "d", "days": "d",
}  # fmt: skip

UNIT_SECONDS: dict[str, int | float] = {"ms": 0.001, "s": 1, "min": 60, "h": 3600, "d": 86400}
"""Seconds per canonical duration unit."""

TIME_UNITS: dict[str, int] = {"s": 1, "ms": 1000, "us": 1_000_000}
"""``--time-unit`` values: timestamp units per second."""

UNIT_HELP = "ms, s, min, h or d"
"""The short list a message names (every spelling in ``DURATION_UNITS`` is accepted)."""


def canonical_unit(word: str) -> str | None:
    """The canonical unit of a spelling (``Secs`` -> ``s``), or None when it is not a unit."""
    return DURATION_UNITS.get(word.lower())


def check_time_unit(time_unit: str) -> None:
    """Raise ``ValueError`` unless ``time_unit`` is a ``--time-unit`` value."""
    if time_unit not in TIME_UNITS:
        raise ValueError(f"unknown time unit {time_unit!r} (use s, ms or us)")


def in_time_units(value: int | float, unit: str | None, time_unit: str = "s") -> int | float:
    """A duration ``value unit`` in timestamp units (``unit`` None: already in timestamp units).

    ``unit`` is canonical (see ``canonical_unit``).  Whole results are ints, so
    ``1 hour`` in ``s`` is ``3600`` and compares and prints as the user expects.
    """
    check_time_unit(time_unit)
    if unit is None:
        return value
    result = value * UNIT_SECONDS[unit] * TIME_UNITS[time_unit]
    if isinstance(result, float) and result.is_integer():
        return int(result)
    return result


_DURATION_RE = lazy(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)\s*")  # ASCII digits only


def parse_duration(text: str, time_unit: str = "s") -> int | float:
    """Duration text from the command line (``5 s``, ``2min``, ``10``) in timestamp units.

    The units are those of ``WITHIN``; no unit means timestamp units.  Raises
    ``ValueError`` with a message for the user on anything else.
    """
    m = _DURATION_RE.fullmatch(text)
    unit = canonical_unit(m.group(2)) if m and m.group(2) else None
    if not m or (m.group(2) and unit is None):
        raise ValueError(
            f"bad duration {text!r}: expected a number and an optional unit "
            f"({UNIT_HELP}; no unit: timestamp units), e.g. '5 s'"
        )
    num = m.group(1)
    value: int | float = float(num) if "." in num else int(num)
    return in_time_units(value, unit, time_unit)
