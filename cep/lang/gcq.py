"""The compiled query: a generalized conjunctive query (GCQ, thesis section 4.1).

One ``Atom`` per event alias, over variables named ``alias.attr``; equalities
between aliases are merged into shared variables; every other comparison
between aliases is a ``Predicate`` (a theta predicate over variables); the SEQ
order and WITHIN are predicates too.  Predicates on a single alias are pushed
down into that atom's ``filter``.  The planner (``cep.plan.planner``) turns a GCQ
into a generalized join tree; the runtime (``cep.runtime.iedyn``) evaluates it.

Every atom also has an identity variable ``alias.#`` (the event's serial), so
the query is full and each leaf tuple is one event: equal events stay two
events, and each match names its events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cep.lang import ast
from cep.lang.ast import frozen_record
from cep.lang.printer import format_expr
from cep.records import field, record

ID_ATTR = "#"
TIME_ATTR = "ts"

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "!=": "!="}


@frozen_record  # (a frozen dataclass built fast: eight or so per pattern, issue 12)
class Variable:
    """A query variable: one class of attribute references equated by the pattern."""

    name: str
    refs: tuple[tuple[str, str], ...]  # (alias, attr) pairs, source order

    @property
    def aliases(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a for a, _ in self.refs))


@record
class Atom:
    """The relation of one event alias: its type, its variables, its pushed-down filter."""

    alias: str
    type: str
    position: int  # 0-based position in the structure
    vars: tuple[str, ...]  # variable names; the last one is the identity ``alias.#``
    attrs: tuple[str, ...]  # the attribute each var reads from this alias's event
    filter: Callable[[Any], bool] | None = None  # event -> True iff the filter is true
    filter_text: str = ""
    # the filter's expression (``filter`` compiled): the engine's per-type handler inlines it
    # (``cep.runtime.handler``), reading each attribute once for all atoms of the type
    filter_expr: Any = field(default=None, compare=False, repr=False)

    @property
    def id_var(self) -> str:
        return self.vars[-1]


@record(frozen=True)
class Bound:
    """``sort_var op scale * other + offset``: a linear predicate solved for one variable."""

    sort_var: str
    op: str  # < <= > >= =
    other: str
    scale: float = 1
    offset: float = 0

    def limit(self, other_value):
        """The bound's value for a given value of ``other`` (None if not a number)."""
        if self.scale == 1 and self.offset == 0:
            return other_value
        t = type(other_value)
        if t is not int and t is not float:
            return None
        return self.scale * other_value + self.offset


@record(frozen=True)
class Linear:
    """``sum(coef * var) + const  op  0`` over exactly two variables."""

    coefs: tuple[tuple[str, float], ...]
    const: float
    op: str

    def solve_for(self, var: str) -> Bound | None:
        """This predicate as a bound on ``var`` in terms of the other variable."""
        (v1, a1), (v2, a2) = self.coefs
        if var == v1:
            a, other, b = a1, v2, a2
        elif var == v2:
            a, other, b = a2, v1, a1
        else:
            return None
        if a == 0 or self.op == "!=":
            return None
        # a*var + b*other + c op 0  =>  var op' (-b/a)*other - c/a
        op = self.op if a > 0 else _FLIP[self.op]
        scale = -b / a
        offset = -self.const / a
        scale = int(scale) if float(scale).is_integer() else scale
        offset = int(offset) if float(offset).is_integer() else offset
        return Bound(var, op, other, scale, offset)


@record
class Predicate:
    """A theta predicate over two or more variables (conditions are 3-valued: docs/language.md section 2)."""

    id: int
    vars: tuple[str, ...]  # the arguments of ``fn``, in this order
    given_text: str | None  # None: ``text`` is the canonical text of ``expr``, printed when first read
    origin: str  # "where" | "seq" | "within" | "span"
    fn: Callable[..., bool] = field(repr=False)  # values in ``vars`` order -> True iff true
    expr: ast.Expr | None = field(default=None, repr=False)
    linear: Linear | None = None

    @property
    def text(self) -> str:
        """How the predicate reads (``b.amount > a.amount``).

        Printed on demand: only ``cep explain``, summaries and messages read it,
        and printing every SEQ-order and WITHIN predicate of every pattern was
        a tenth of ``cep check`` (issue 12).
        """
        if self.given_text is None:
            assert self.expr is not None
            self.given_text = format_expr(self.expr)
        return self.given_text

    @property
    def aliases(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.split(".", 1)[0] for v in self.vars))


@record
class EmitSpec:
    """One output field: ``name`` and a function of the match's events in atom order.

    For ``alias.*`` items ``star`` is the alias's atom position and ``fn`` is None.
    For a bare attribute (``s.amount``, output as read; ``s.ts``, the event's time) ``attr``
    is (atom position, attribute name), so the match builder can read it inline.
    """

    name: str
    fn: Callable[..., Any] | None
    star: int | None = None
    text: str = ""
    attr: tuple[int, str] | None = None
    slot: int | None = None  # a bare aggregate item: the match's aggregate slot (docs/language.md section 7, Repetition)


@record(frozen=True)
class Aggregate:
    """One aggregate a pattern reads from a repeated alias (docs/language.md section 7, Repetition), a slot of the match.

    ``fn`` is one of count sum avg min max first last, or ``events`` (the list of
    the events' fields: a match without EMIT); ``attr`` None is ``count(x)``.
    ``gap`` is the position of the Kleene element's ``Gap`` in ``CompiledPattern.gaps``.
    """

    gap: int
    fn: str
    attr: str | None
    text: str


@record
class Gap:
    """A gap element (docs/language.md section 7): an anti-join (NOT) or a range aggregate
    (Kleene plus, origin ``kleene``: the qualifying events are x's list, the match
    needs ``min_count <= count <= max_count``, ``aggregates`` are the slots it fills)
    of the positive GCQ with the events between positive neighbours.

    The match holds only if no event *qualifies*: one of ``types``, passing
    ``filter``, with key values (``key_attrs`` of the gap event) equal to the
    values the match's positive events give (``key_sources``: atom index and
    attribute), inside the gap, and making ``residual`` true.  The gap opens
    after the latest ts of the atoms in ``after`` (empty: a leading gap, opening
    at ``max positive ts - within``, inclusive) and closes before the earliest ts
    of the atoms in ``before`` (empty: a trailing gap, closing at ``min positive
    ts + within``, inclusive).  ``origin`` is ``not`` (an explicit ``NOT Type x``),
    ``next_match`` (the implicit NOT of skip_till_next_match before a positive
    element) or ``contiguity`` (strict_contiguity: any type of the pattern).
    """

    alias: str
    types: tuple[str, ...]
    origin: str  # "not" | "next_match" | "contiguity" | "kleene"
    after: tuple[int, ...]
    before: tuple[int, ...]
    key_attrs: tuple[str, ...] = ()
    key_sources: tuple[tuple[int, str], ...] = ()
    filter: Callable[[Any], bool] | None = None
    filter_text: str = ""
    residual: Callable[..., bool] | None = None  # (gap event, *positive events) -> True iff true
    residual_text: str = ""
    text: str = ""  # how the user wrote it (``NOT Shipment s``), for explain
    min_count: int = 1
    max_count: int | None = None
    aggregates: tuple[int, ...] = ()  # slots in CompiledPattern.aggregates (kleene only)

    @property
    def kind(self) -> str:
        """``middle``, ``leading`` or ``trailing`` (docs/language.md section 7, NOT elements)."""
        if not self.after:
            return "leading"
        if not self.before:
            return "trailing"
        return "middle"


@record
class CompiledPattern:
    """A pattern compiled to a GCQ, ready for the planner."""

    name: str
    op: str  # "SEQ" | "AND"
    atoms: list[Atom]
    variables: dict[str, Variable]
    predicates: list[Predicate]
    within: int | float | None  # in timestamp units
    partition_vars: tuple[str, ...]  # variables shared by every atom
    emit: list[EmitSpec] | None  # None: each alias maps to its whole event
    source: ast.Pattern | None = field(default=None, repr=False)
    time_unit: str = "s"
    gaps: list[Gap] = field(default_factory=list)  # anti-joins: NOT elements and strategies (7.1-7.5)
    strategy: str = "skip_till_any_match"
    order: tuple[tuple[int, int], ...] = ()  # (i, j): atom i's ts < atom j's ts (SEQ order and nesting)
    aggregates: list[Aggregate] = field(default_factory=list)  # slots g0, g1, ... (docs/language.md section 7, Repetition)
    # WHERE conjuncts with an aggregate: a condition on the match, f(e0.., g0..) -> True iff true
    agg_condition: Callable[..., bool] | None = None
    agg_condition_text: str = ""
    output_aliases: tuple[str, ...] = ()  # positive and repeated aliases in source order (no EMIT)

    @property
    def decided(self) -> bool:
        """Whether matches wait until they are decided (docs/language.md section 7, Decided matches): a pattern with gaps."""
        return bool(self.gaps)

    def key_attrs(self, atom: Atom) -> tuple[str, ...]:
        """The attributes of ``atom``'s event that hold the partition key, in ``partition_vars`` order.

        The one rule for reading a partition key (the engine's key of a match,
        Kafka record keys, Spark's routing); read the values with ``read_key``.
        Empty when the pattern has no partition key.
        """
        return tuple(atom.attrs[atom.vars.index(v)] for v in self.partition_vars)


def read_key(event: Any, attrs: tuple[str, ...]) -> tuple:
    """The partition key value of an event, from ``CompiledPattern.key_attrs``.

    ``ts`` is the event time (as ``alias.ts`` is in expressions); a missing
    attribute reads as None.  The engine generates the same reading inline.
    """
    return tuple(event.ts if a == TIME_ATTR else event.fields.get(a) for a in attrs)
