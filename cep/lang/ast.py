"""The syntax tree of the pattern language (docs/language.md sections 2 and 7).

The parser builds these nodes; the checker and the compiler read them.  Nodes
are frozen dataclasses.  Source locations are carried in ``loc`` and excluded
from equality, so two patterns that print the same compare equal (the
round-trip property the tests rely on).

Nodes have ``__slots__`` and an ``__init__`` that stores each field through its
slot (``frozen_record``): the ``__init__`` that ``dataclass(frozen=True)`` generates calls
``object.__setattr__`` once per field, and building the nodes and locations of
10,000 patterns was a third of ``cep check``'s parse (issue 12).  Equality,
hashing and immutability are the frozen dataclass's own; the classes are made by
``cep.records.record``, which compiles their methods at first use (issue 15: making
them with ``dataclass`` was a tenth of a short ``cep run``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from cep.records import field, fields, record

_T = TypeVar("_T")


def frozen_record(cls: type[_T]) -> type[_T]:
    """``dataclass(frozen=True, slots=True)``, made by ``cep.records.record`` (its ``__init__`` sets the slots directly)."""
    return record(cls, frozen=True, slots=True)


def slot_setters(cls: type) -> list[tuple[str, Callable[[Any, Any], None]]]:
    """``(field, setter)`` of each field of a node class, in order.

    The parser's generated code makes a node as ``object.__new__(cls)`` and
    sets every field with these: no ``__init__`` frame, half the cost of
    calling the class (issue 12).
    """
    return [(f.name, cls.__dict__[f.name].__set__) for f in fields(cls)]


class Loc(NamedTuple):
    """A 1-based source position: where a node starts (and ends) in its file.

    A named tuple, not a node: the parser builds one per node and token it keeps
    (``tuple.__new__(Loc, (line, col, end_line, end_col))`` in ``cep.lang.lalr``),
    the cheapest immutable record there is.
    """

    line: int
    col: int
    end_line: int = 0
    end_col: int = 0


NOLOC = Loc(0, 0)


def _loc() -> Loc:
    return field(default=NOLOC, compare=False, repr=False)  # type: ignore[return-value]


# ----------------------------------------------------------------- expressions


@frozen_record
class Literal:
    """A number, string, boolean or null literal (``value`` None is null)."""

    value: int | float | str | bool | None
    loc: Loc = _loc()


@frozen_record
class Attr:
    """``alias.name``; ``alias.ts`` is always the event time (docs/language.md section 2)."""

    alias: str
    name: str
    loc: Loc = _loc()


@frozen_record
class Neg:
    """Unary minus."""

    operand: Expr
    loc: Loc = _loc()


@frozen_record
class Arith:
    """``left op right`` with op one of ``+ - * / %``."""

    op: str
    left: Expr
    right: Expr
    loc: Loc = _loc()


@frozen_record
class Compare:
    """``left op right``; op is normalized to one of ``= != < <= > >=``."""

    op: str
    left: Expr
    right: Expr
    loc: Loc = _loc()


@frozen_record
class InList:
    """``operand IN (item, ...)``; ``negated`` for ``NOT IN``."""

    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False
    loc: Loc = _loc()


@frozen_record
class And:
    """``left AND right``."""

    left: Expr
    right: Expr
    loc: Loc = _loc()


@frozen_record
class Or:
    """``left OR right``."""

    left: Expr
    right: Expr
    loc: Loc = _loc()


@frozen_record
class Not:
    """``NOT operand``."""

    operand: Expr
    loc: Loc = _loc()


@frozen_record
class Call:
    """``name(args)``: an aggregate of a Kleene alias (docs/language.md section 7, Repetition), e.g. ``count(f)``, ``sum(f.amount)``."""

    name: str
    args: tuple[Expr, ...]
    loc: Loc = _loc()


Expr = Literal | Attr | Neg | Arith | Compare | InList | And | Or | Not | Call


# ------------------------------------------------------------------- patterns


@frozen_record
class Element:
    """One element of a structure.

    ``kind`` is ``"event"`` (``Type alias``), or one of the phase-2 forms
    ``"not"`` (``NOT Type alias``), ``"kleene"`` (``Type+ alias``) and
    ``"nested"`` (a nested structure in ``nested``; type and alias empty).
    A Kleene element's quantifier is ``min_count`` .. ``max_count`` (None: no
    upper bound): ``Type+`` is 1.., ``Type{n}`` n..n, ``Type{n,}`` n.., ``Type{n,m}``.
    """

    type: str
    alias: str
    kind: str = "event"
    nested: Structure | None = None
    loc: Loc = _loc()
    alias_loc: Loc = _loc()
    min_count: int | float = 1
    max_count: int | float | None = None


@frozen_record
class Structure:
    """``SEQ(...)`` or ``AND(...)``; ``op`` is ``"SEQ"`` or ``"AND"``."""

    op: str
    elements: tuple[Element, ...]
    loc: Loc = _loc()


@frozen_record
class Duration:
    """``number [unit]``; ``unit`` is the canonical unit (ms s min h d) or None."""

    value: int | float
    unit: str | None
    loc: Loc = _loc()


@frozen_record
class EmitItem:
    """``expr [AS name]`` or ``alias.*`` (``star`` set, ``expr`` None).

    ``text`` is the item's source text without spaces: its default name.
    """

    expr: Expr | None
    name: str | None
    text: str
    star: str | None = None
    loc: Loc = _loc()


@frozen_record
class Pattern:
    """One ``PATTERN`` block.  ``clause_locs`` maps clause keyword to its location."""

    name: str
    structure: Structure
    where: Expr | None = None
    partition_by: tuple[str, ...] = ()
    within: Duration | None = None
    emit: tuple[EmitItem, ...] | None = None
    using: str | None = None
    loc: Loc = _loc()
    file: str = field(default="<pattern>", compare=False)
    partition_locs: tuple[Loc, ...] = field(default=(), compare=False, repr=False)
    using_loc: Loc = _loc()
