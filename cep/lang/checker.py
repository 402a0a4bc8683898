"""Semantic checks of a parsed pattern (docs/language.md sections 2, 3 and 7).

The parser builds the syntax tree; this module finds what is wrong with it
that the grammar cannot see: unknown or duplicate aliases, AND with a repeated
type, duplicate EMIT names or PARTITION BY attributes, a non-positive WITHIN,
comparisons that can never be true (warnings), the misuses of NOT, Kleene
plus and its aggregates, USING and nesting (docs/language.md section 7).  It returns
``Issue`` values (no file, no source line); the
parser turns them into ``cep.errors.Diagnostic``.  Walks over expressions are
iterative, so a long ``a AND b AND ...`` chain cannot exhaust the stack.
"""

from __future__ import annotations

from cep.lang import ast
from cep.lang.suggest import hint
from cep.records import record

AGGREGATES = ("count", "sum", "avg", "min", "max", "first", "last")
"""Kleene-plus aggregate functions (docs/language.md section 7, Repetition); no other function exists."""

MAX_ELEMENTS = 32
"""Elements per SEQ/AND: the compiled query has a window predicate per pair of AND elements
(k(k-1) of them) and planning grows faster still; real patterns have a handful of elements."""

STRATEGIES = ("skip_till_any_match", "skip_till_next_match", "strict_contiguity")
"""Event-selection strategies of ``USING`` (docs/language.md section 7, Strategies)."""


@record(frozen=True)
class Issue:
    """One problem found in a pattern; ``phase2`` marks a not-supported-yet construct."""

    loc: ast.Loc
    message: str
    severity: str = "error"  # "error" | "warning"
    phase2: bool = False


def _where(loc: ast.Loc) -> str:
    return f"line {loc.line}, col {loc.col}"


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return "string"


class _Checker:
    def __init__(self, p: ast.Pattern, allow_phase2: bool) -> None:
        self.p = p
        self.allow_phase2 = allow_phase2
        self.issues: list[Issue] = []
        self.aliases: dict[str, ast.Loc] = {}
        self.gap_aliases: dict[str, ast.Loc] = {}  # NOT and Kleene aliases (docs/language.md section 7, NOT elements gap elements)
        self.not_aliases: set[str] = set()  # they bind no event at all
        self.kleene: dict[str, ast.Element] = {}  # repeated aliases (docs/language.md section 7, Repetition)
        self.nested = False

    def error(self, loc: ast.Loc, msg: str) -> None:
        self.issues.append(Issue(loc, msg))

    def warning(self, loc: ast.Loc, msg: str) -> None:
        self.issues.append(Issue(loc, msg, "warning"))

    def phase2(self, loc: ast.Loc, what: str) -> None:
        if not self.allow_phase2:
            self.issues.append(Issue(loc, f"{what} is not supported yet (phase 2)", phase2=True))

    # ------------------------------------------------------------ structure
    def structure(self, s: ast.Structure, top: bool) -> None:
        if len(s.elements) > MAX_ELEMENTS:
            self.error(s.elements[MAX_ELEMENTS].loc,
                       f"{s.op} has {len(s.elements)} elements: at most {MAX_ELEMENTS} are allowed "
                       "(split the pattern)")
            return
        if s.op == "AND":
            first_of: dict[str, ast.Loc] = {}
            for el in s.elements:
                if el.kind == "nested":
                    continue
                if el.type in first_of:
                    self.error(
                        el.loc,
                        f"type '{el.type}' appears twice in AND (first at {_where(first_of[el.type])}); "
                        "the types in one AND must be pairwise different",
                    )
                else:
                    first_of[el.type] = el.loc
        positive = [i for i, el in enumerate(s.elements) if el.kind in ("event", "nested")]
        for i, el in enumerate(s.elements):
            if el.kind == "nested":
                assert el.nested is not None
                self.nested = True
                self.structure(el.nested, False)
                continue
            if el.kind == "not":
                self.gap_aliases[el.alias] = el.loc
                self.not_aliases.add(el.alias)
                if s.op != "SEQ":
                    self.error(el.loc, "NOT is only allowed inside SEQ")
                elif not top:
                    self.error(el.loc, "NOT may only stand in the outermost SEQ "
                                       "(a nested structure holds positive elements only)")
                elif self.p.within is None and positive and (i < positive[0] or i > positive[-1]):
                    edge = "leading" if i < positive[0] else "trailing"
                    self.error(el.loc, f"a {edge} NOT needs WITHIN (its gap ends at the window's edge)")
            elif el.kind == "kleene":
                self.gap_aliases[el.alias] = el.loc
                self.kleene[el.alias] = el
                self.quantifier(el)
                if s.op != "SEQ":
                    self.error(el.loc, "a Kleene element (repetition) is only allowed inside SEQ in this version")
                elif not top:
                    self.error(el.loc, "a Kleene element may only stand in the outermost SEQ "
                                       "(a nested structure holds positive elements only)")
                elif self.p.within is None and positive and (i < positive[0] or i > positive[-1]):
                    edge = "leading" if i < positive[0] else "trailing"
                    self.error(el.loc, f"a {edge} Kleene element needs WITHIN "
                                       "(its gap ends at the window's edge)")
            if el.alias in self.aliases:
                self.error(
                    el.alias_loc,
                    f"alias '{el.alias}' is defined twice (first at {_where(self.aliases[el.alias])})",
                )
            else:
                self.aliases[el.alias] = el.alias_loc
        if s.elements and not positive:
            self.error(s.loc, f"{s.op} needs a positive element (one that is neither NOT nor repeated)")

    def quantifier(self, el: ast.Element) -> None:
        lo, hi = el.min_count, el.max_count
        for v in (lo, hi):
            if v is not None and (isinstance(v, float) or v < 0):
                self.error(el.loc, f"a repetition count must be a whole number, got {v}")
                return
        if lo < 1:
            self.error(el.loc, f"'{el.type}{{{lo}...}}' allows no event: a Kleene element needs at least "
                               f"one (write NOT {el.type} {el.alias} for none)")
        elif hi is not None and hi < lo:
            self.error(el.loc, f"'{el.type}{{{lo},{hi}}}': the upper bound is below the lower bound")

    # ----------------------------------------------------------- expressions
    def unknown_alias(self, loc: ast.Loc, alias: str) -> None:
        self.error(loc, f"unknown alias '{alias}'{hint(alias, self.aliases)}")

    def expr(self, root: ast.Expr) -> None:
        # (dispatch on the node's exact type, attributes of known aliases and comparisons
        # without a literal passed inline: every pattern's every expression, issue 12)
        aliases = self.aliases
        if type(root) is ast.Attr and root.name and root.alias in aliases:
            return  # (an EMIT item that is an attribute)
        stack: list[tuple[ast.Expr, bool]] = [(root, False)]
        while stack:
            e, call_arg = stack.pop()
            t = type(e)
            if t is ast.Attr:
                if not (e.name and e.alias in aliases):
                    self.attr(e, call_arg)
            elif t is ast.Literal:
                pass
            elif t is ast.Compare:
                left, right = e.left, e.right
                if type(left) is ast.Literal or type(right) is ast.Literal:
                    self.compare(e)
                stack.append((right, False))
                stack.append((left, False))
            elif t is ast.Arith or t is ast.And or t is ast.Or:
                stack.append((e.right, False))
                stack.append((e.left, False))
            elif t is ast.Neg or t is ast.Not:
                stack.append((e.operand, False))
            elif t is ast.InList:
                stack.extend((x, False) for x in reversed(e.items))
                stack.append((e.operand, False))
            elif t is ast.Call:
                if e.name not in AGGREGATES:  # its arguments are checked like any expression
                    stack.extend((x, True) for x in reversed(e.args))
                self.call(e)

    def attr(self, e: ast.Attr, call_arg: bool) -> None:
        if e.name:
            if e.alias not in self.aliases:
                self.unknown_alias(e.loc, e.alias)
        elif call_arg:
            if e.alias not in self.aliases:
                self.unknown_alias(e.loc, e.alias)
        elif e.alias in self.aliases:
            self.error(e.loc, f"alias '{e.alias}' needs an attribute here: write {e.alias}.<attribute>")
        else:
            self.error(e.loc, f"'{e.alias}' is not an attribute reference: write <alias>.{e.alias}")

    def compare(self, e: ast.Compare) -> None:
        left, right = e.left, e.right
        if (type(left) is ast.Literal and left.value is None) or (type(right) is ast.Literal and right.value is None):
            self.warning(e.loc, "comparison with null is never true")
            return
        if type(left) is ast.Literal and type(right) is ast.Literal:
            k1, k2 = _kind(e.left.value), _kind(e.right.value)
            if k1 != k2:
                self.warning(e.loc, f"comparison between a {k1} and a {k2} is never true")

    def call(self, e: ast.Call) -> None:
        """Spec 7.3: ``count(x)``, ``count(x.a)``, ``sum/avg/min/max/first/last(x.a)`` of a Kleene alias."""
        if e.name not in AGGREGATES:
            self.error(e.loc, f"unknown function '{e.name}'{hint(e.name, AGGREGATES)}")
            return
        if len(e.args) != 1:
            self.error(e.loc, f"{e.name}() takes one argument")
            return
        arg = e.args[0]
        form = "count(x) or count(x.attribute)" if e.name == "count" else f"{e.name}(x.attribute)"
        if not isinstance(arg, ast.Attr):
            self.error(arg.loc, f"the argument of {e.name}() is an attribute of a repeated alias: write {form}")
            return
        if arg.alias not in self.aliases:
            self.unknown_alias(arg.loc, arg.alias)
        elif arg.alias in self.not_aliases:
            self.error(arg.loc, f"'{arg.alias}' is a NOT alias: it binds no event, so it has no aggregate")
        elif arg.alias not in self.kleene:
            what = f"{arg.alias}.{arg.name}" if arg.name else f"{arg.alias}.<attribute>"
            self.error(e.loc, f"{e.name}() aggregates a repeated alias (Type+ x), but '{arg.alias}' binds "
                              f"one event: use {what} directly")
        elif not arg.name and e.name != "count":
            self.error(arg.loc, f"{e.name}() needs an attribute: write {e.name}({arg.alias}.<attribute>)")

    # -------------------------------------------------------------- clauses
    def clauses(self) -> None:
        p = self.p
        if p.where is not None:
            self.expr(p.where)
            self.gap_conjuncts(p.where)
        seen_attr: dict[str, ast.Loc] = {}
        locs = p.partition_locs or (ast.NOLOC,) * len(p.partition_by)
        for attr, loc in zip(p.partition_by, locs, strict=True):
            if attr in seen_attr:
                self.error(loc, f"attribute '{attr}' is listed twice in PARTITION BY")
            else:
                seen_attr[attr] = loc
        if p.within is not None and not p.within.value > 0:
            unit = f" {p.within.unit}" if p.within.unit else ""
            self.error(p.within.loc, f"WITHIN must be positive, got {p.within.value}{unit}")
        if p.emit is not None:
            names: dict[str, ast.Loc] = {}
            for item in p.emit:
                if item.star is not None:
                    if item.star not in self.aliases:
                        self.unknown_alias(item.loc, item.star)
                    elif item.star in self.not_aliases:
                        self.negated_in_emit(item.loc, item.star)
                    elif item.star in self.kleene:
                        self.error(item.loc, f"'{item.star}' is repeated: it binds a list of events, so "
                                             f"'{item.star}.*' has no single value; EMIT aggregates of it, "
                                             f"e.g. count({item.star}), last({item.star}.<attribute>)")
                elif item.expr is not None:
                    self.expr(item.expr)
                    if self.gap_aliases:  # (NOT and repeated aliases have no single value)
                        for a in attr_refs(item.expr, calls=False):
                            if a.alias in self.not_aliases:
                                self.negated_in_emit(a.loc, a.alias)
                            elif a.alias in self.kleene and a.name:
                                self.repeated_in_emit(a)
                name = item.name or item.text
                if name in names:
                    self.error(
                        item.loc,
                        f"two EMIT items are named '{name}' (the first at {_where(names[name])})",
                    )
                else:
                    names[name] = item.loc
        if p.using is not None and p.using != "skip_till_any_match":
            self.strategy(p.using)

    def strategy(self, using: str) -> None:
        """Spec 7.5: next-match and contiguity are for a flat SEQ; contiguity without gaps."""
        loc = self.p.using_loc
        if self.p.structure.op != "SEQ":
            self.error(loc, f"USING {using} applies to SEQ (an AND has no order to select by)")
        elif self.nested:
            self.error(loc, f"USING {using} applies to a flat SEQ; this pattern nests structures")
        if using == "strict_contiguity" and self.gap_aliases:
            first = min(self.gap_aliases.values(), key=lambda lc: (lc.line, lc.col))
            self.error(loc, f"USING strict_contiguity cannot be combined with a NOT or Kleene element "
                            f"(at {_where(first)}) in this version")

    def repeated_in_emit(self, a: ast.Attr) -> None:
        x, at = a.alias, a.name
        self.error(a.loc, f"'{x}' is repeated: '{x}.{at}' has one value per event; EMIT an aggregate "
                          f"instead: first({x}.{at}) or last({x}.{at}) (the value in the first or last "
                          f"event), count({x}.{at}), sum({x}.{at}), avg({x}.{at}), min({x}.{at}) or "
                          f"max({x}.{at})")

    def negated_in_emit(self, loc: ast.Loc, alias: str) -> None:
        self.error(loc, f"'{alias}' is a NOT alias: it binds no event, so EMIT cannot use it")

    def gap_conjuncts(self, where: ast.Expr) -> None:
        """Spec 7.1: a WHERE conjunct (top-level AND operand) mentions at most one gap alias."""
        if not self.gap_aliases:
            return
        for c in conjuncts(where):
            gaps = list(dict.fromkeys(a.alias for a in attr_refs(c) if a.alias in self.gap_aliases))
            if len(gaps) > 1:
                self.error(c.loc, f"a condition may mention at most one NOT or repeated alias, this one "
                                  f"mentions {_join_names(gaps)}; split it into conditions joined by AND")
                continue
            if gaps and gaps[0] in self.kleene:
                x = gaps[0]
                bare = [a for a in attr_refs(c, calls=False) if a.alias == x]
                if bare and len(attr_refs(c)) > len(attr_refs(c, calls=False)):
                    self.error(bare[0].loc, f"this condition both selects the events of '{x}' ({x}.{bare[0].name}) "
                                            f"and uses an aggregate of it; split it into conditions joined by "
                                            f"AND (one per event, one on the aggregate)")


def conjuncts(e: ast.Expr | None) -> list[ast.Expr]:
    """The top-level AND operands of a condition, in source order (iterative)."""
    if type(e) is not ast.And:
        return [] if e is None else [e]
    out: list[ast.Expr] = []
    stack = [e]
    while stack:
        n = stack.pop()
        if type(n) is ast.And:
            stack.append(n.right)
            stack.append(n.left)
        else:
            out.append(n)
    return out


_BINARY = frozenset((ast.Arith, ast.Compare, ast.And, ast.Or))
_UNARY = frozenset((ast.Neg, ast.Not))


def attr_refs(e: ast.Expr, calls: bool = True) -> list[ast.Attr]:
    """Attribute references of an expression, in source order (iterative); with
    ``calls`` False, those inside aggregate calls are left out.

    (Dispatch on the node's exact type: the compiler calls this for every WHERE
    conjunct of every pattern, issue 12.)"""
    t = type(e)
    if t is ast.Compare:  # most conjuncts: attributes and literals compared
        left, right = e.left, e.right
        tl, tr = type(left), type(right)
        if (tl is ast.Attr or tl is ast.Literal) and (tr is ast.Attr or tr is ast.Literal):
            if tl is ast.Attr:
                return [left, right] if tr is ast.Attr else [left]
            return [right] if tr is ast.Attr else []
    out: list[ast.Attr] = []
    stack = [e]
    while stack:
        n = stack.pop()
        t = type(n)
        if t is ast.Attr:
            out.append(n)
        elif t in _BINARY:
            stack.append(n.right)
            stack.append(n.left)
        elif t in _UNARY:
            stack.append(n.operand)
        elif t is ast.InList:
            stack.extend(reversed(n.items))
            stack.append(n.operand)
        elif t is ast.Call and calls:
            stack.extend(reversed(n.args))
    return out


def _join_names(names: list[str]) -> str:
    quoted = [f"'{n}'" for n in names]
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


def check_pattern(p: ast.Pattern, allow_phase2: bool = False) -> list[Issue]:
    """Every semantic problem of one pattern, in the order found.

    With ``allow_phase2`` the phase-2 constructs are checked but not rejected
    (the printer round-trip tests use it; the compiler still rejects them).
    """
    c = _Checker(p, allow_phase2)
    c.structure(p.structure, True)
    c.clauses()
    return c.issues
