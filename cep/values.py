"""Value canonicalization for hash keys and sort keys.

docs/language.md section 2: numbers compare by value (``1 = 1.0``) and booleans are not
numbers.  Python's ``True == 1`` (and equal hashes) would merge a boolean and a
number in a hash group, so the runtime stores join values through ``canon``,
which maps booleans to the singletons ``TRUE``/``FALSE``.  Everything that reads
stored join values back (compiled predicates) treats ``SqlBool`` as boolean.
"""

from __future__ import annotations


class SqlBool:
    """A boolean that is not equal to any number."""

    __slots__ = ("value",)

    def __init__(self, value: bool) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "TRUE" if self.value else "FALSE"

    def __bool__(self) -> bool:
        return self.value

    def __lt__(self, other: object) -> bool:
        if type(other) is SqlBool:
            return self.value < other.value
        return NotImplemented

    def __reduce__(self):  # pickles back to the singleton
        return (canon, (self.value,))


TRUE = SqlBool(True)
FALSE = SqlBool(False)


def canon(v):
    """The hashable, type-faithful form of a scalar value."""
    if type(v) is bool:
        return TRUE if v else FALSE
    return v

