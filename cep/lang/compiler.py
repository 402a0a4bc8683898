"""Compile a checked pattern into a generalized conjunctive query (``cep.lang.gcq``).

What goes where (thesis section 4.1, issue 2):

* one atom per alias; a variable per attribute reference that takes part in a
  join; equalities between two aliases' plain attributes (and PARTITION BY)
  merge variables (union-find), so they become shared variables, not predicates;
* a WHERE conjunct over one alias is pushed down into that atom's filter;
* a conjunct over two aliases becomes a binary predicate, with its linear form
  when it has one (``b.price > a.price * 1.1``), so the planner can index it;
  conjuncts over three or more aliases are predicates the planner keeps residual;
* SEQ order: ``x.ts < y.ts`` for consecutive elements; WITHIN ``w``: the band
  ``y.ts - x.ts <= w`` on consecutive elements plus the span ``last - first <= w``
  (SEQ), or ``|x.ts - y.ts| <= w`` from each element to the last plus one span
  predicate ``max - min of (all times) <= w`` (AND of three or more; the pairwise
  bands it stands for would be k(k-1) predicates);
* EMIT items compiled once to functions of the match's events.

Expressions are compiled to Python functions once, here (``cep.lang.expr``),
except inside ``without_code()`` (``cep check``), where the same query is built
without them.  ``cep.lang.expr`` and ``cep.codegen`` are imported where code is
generated, so checking does not load them (start-up counts: issue 12).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NamedTuple

from cep.errors import Diagnostic
from cep.lang import ast
from cep.lang.checker import attr_refs, conjuncts
from cep.lang.gcq import (
    ID_ATTR,
    TIME_ATTR,
    Aggregate,
    Atom,
    CompiledPattern,
    EmitSpec,
    Gap,
    Linear,
    Predicate,
    Variable,
)
from cep.lang.printer import format_expr
from cep.records import replace
from cep.units import in_time_units


def duration_in_time_units(d: ast.Duration, time_unit: str = "s") -> int | float:
    """A duration in timestamp units (no unit: already in timestamp units)."""
    return in_time_units(d.value, d.unit, time_unit)


def _is_attr_equality(c: ast.Expr) -> bool:
    """``a.x = b.y``: a conjunct that becomes a join (one shared variable), not a predicate."""
    return (isinstance(c, ast.Compare) and c.op == "="
            and isinstance(c.left, ast.Attr) and isinstance(c.right, ast.Attr))


class _Shape:
    """The positive elements of a (possibly nested) structure and the order it denotes.

    Spec 7.6: ``SEQ(A a, AND(B b, C c), D d)`` means a before both b and c, both
    before d.  Each SEQ step gives ``x.ts < y.ts`` for x among the events that can
    be latest in the step before (``ends``) and y among those that can be earliest
    in the step after (``starts``).  Gap elements of the outermost SEQ are recorded
    with their positive neighbours (a nested neighbour counts with its latest event
    before the gap and its earliest after it).
    """

    def __init__(self, top: ast.Structure) -> None:
        self.elements: list[ast.Element] = []  # positive leaves, atom order
        self.edges: list[tuple[int, int]] = []  # (i, j): element i's ts < element j's ts
        self.gaps: list[tuple[ast.Element, tuple[int, ...], tuple[int, ...]]] = []
        self.nested = False
        self.starts: list[int] = []  # (nested only: the flat order and window are ``_flat_order``'s)
        self.ends: list[int] = []
        self._flat(top)
        if self.nested:
            self.elements, self.edges, self.gaps = [], [], []
            self.starts, self.ends = self._walk(top, top=True)

    def _flat(self, s: ast.Structure) -> None:
        """``_walk`` of a structure without nesting (most patterns), in one pass; on a nested
        element it sets ``nested`` and stops."""
        elements, gaps = self.elements, self.gaps
        pending: list[ast.Element] = []
        for el in s.elements:
            kind = el.kind
            if kind == "event":
                if pending:
                    i = len(elements)
                    gaps.extend((g, (i - 1,) if i else (), (i,)) for g in pending)
                    pending = []
                elements.append(el)
            elif kind == "nested":
                self.nested = True
                return
            else:  # not, kleene
                pending.append(el)
        k = len(elements)
        if pending:  # trailing
            gaps.extend((g, (k - 1,) if k else (), ()) for g in pending)
        if s.op == "SEQ":
            self.edges = [(i, i + 1) for i in range(k - 1)]

    def _walk(self, s: ast.Structure, top: bool) -> tuple[list[int], list[int]]:
        steps: list[tuple[list[int], list[int]]] = []
        pending_gaps: list[ast.Element] = []
        for el in s.elements:
            if el.kind in ("not", "kleene"):
                pending_gaps.append(el)
                continue
            if el.kind == "nested":
                assert el.nested is not None
                st = self._walk(el.nested, top=False)
            else:
                self.elements.append(el)
                i = len(self.elements) - 1
                st = ([i], [i])
            before = tuple(steps[-1][1]) if steps else ()
            for g in pending_gaps:
                self.gaps.append((g, before, tuple(st[0])))
            pending_gaps = []
            if s.op == "SEQ" and steps:
                self.edges.extend((x, y) for x in steps[-1][1] for y in st[0])
            steps.append(st)
        for g in pending_gaps:  # trailing
            self.gaps.append((g, tuple(steps[-1][1]) if steps else (), ()))
        if s.op == "SEQ":
            return steps[0][0], steps[-1][1]
        return [i for st in steps for i in st[0]], [i for st in steps for i in st[1]]


def _not_generated(*_args: Any, **_kwargs: Any) -> Any:
    raise RuntimeError("this pattern was compiled for checking only (no code was generated): "
                       "compile it outside without_code() to run it")


class _Code:
    """Where a compiled pattern's functions come from (``cep.lang.expr``).

    Why: generating and compiling Python source is most of the cost of compiling
    a pattern, and ``cep check`` only validates (issue 12).  With ``generate``
    False every function slot holds ``_not_generated``, which refuses to run, and
    predicates get no linear form (it serves only the planner's index choice);
    everything else in the ``CompiledPattern`` (atoms, variables, predicates and
    their text, gaps, emit items) is the same.
    """

    def __init__(self, generate: bool) -> None:
        self.generate = generate

    def condition(self, expr: ast.Expr, access: Callable[[ast.Attr], str], params: Sequence[str],
                  label: str = "condition") -> Callable[..., bool]:
        if not self.generate:
            return _not_generated
        from cep.lang.expr import compile_condition

        return compile_condition(expr, access, params, label)

    def predicate(self, c: ast.Expr, pvars: tuple[str, ...], var_of: dict[tuple[str, str], str], pattern: str,
                  pid: int) -> tuple[Callable[..., bool], Linear | None]:
        """A cross predicate's function of its variables ``pvars`` and its linear form, if any."""
        if not self.generate:
            return _not_generated, None
        from cep.lang.expr import linear_form

        pos = {v: j for j, v in enumerate(pvars)}

        def access(attr: ast.Attr) -> str:
            return f"v{pos[var_of[(attr.alias, attr.name)]]}"

        fn = self.condition(c, access, [f"v{j}" for j in range(len(pvars))], f"{pattern}: predicate #{pid}")
        lf = linear_form(c) if isinstance(c, ast.Compare) and len(pvars) == 2 else None
        if lf is None:
            return fn, None
        coefs, const, op = lf
        merged: dict[str, float] = {}
        for (al, at), coef in coefs.items():
            v = var_of[(al, at)]
            merged[v] = merged.get(v, 0) + coef
        if len(merged) == 2 and all(x != 0 for x in merged.values()):
            return fn, Linear(tuple(merged.items()), const, op)
        return fn, None

    def value(self, expr: ast.Expr, access: Callable[[ast.Attr], str], params: Sequence[str],
              label: str = "expression") -> Callable[..., Any]:
        if not self.generate:
            return _not_generated
        from cep.lang.expr import compile_expr

        return compile_expr(expr, access, params, label)


_GENERATE: ContextVar[bool] = ContextVar("cep_generate_code", default=True)
_CODE = {True: _Code(True), False: _Code(False)}


@contextmanager
def without_code() -> Iterator[None]:
    """Patterns compiled in this block get no generated code (``cep check``: see ``_Code``)."""
    token = _GENERATE.set(False)
    try:
        yield
    finally:
        _GENERATE.reset(token)


def compile_pattern(p: ast.Pattern, time_unit: str = "s") -> CompiledPattern:
    """Compile one checked pattern to its GCQ (positive atoms) and its gaps (anti-joins).

    Inside ``without_code()`` the query is the same but its functions are not
    generated (they refuse to run).
    """
    code = _CODE[_GENERATE.get()]
    generate = code.generate
    shape = _Shape(p.structure)
    elements = shape.elements
    aliases = tuple([el.alias for el in elements])
    alias_pos = {a: i for i, a in enumerate(aliases)}
    gap_aliases = {g.alias for g, _, _ in shape.gaps}

    # -- WHERE conjuncts: filters, equalities, cross predicates; a conjunct that
    # mentions a NOT alias belongs to that gap element (docs/language.md section 7, NOT elements)
    filters: dict[str, list[ast.Expr]] = {a: [] for a in aliases}
    joins: list[tuple[tuple[str, str], tuple[str, str]]] = []  # a.x = b.y: one shared variable
    where_cross: list[ast.Expr] = []  # over two aliases or more: predicates
    cross_refs: list[tuple[tuple[str, str], ...]] = []  # each one's references
    gap_conjuncts: dict[str, list[ast.Expr]] = {a: [] for a in gap_aliases}
    positive_conjuncts: list[ast.Expr] = []
    agg_conjuncts: list[ast.Expr] = []
    for c in conjuncts(p.where):
        refs = attr_refs(c)
        used = list(dict.fromkeys([r.alias for r in refs])) if len(refs) > 1 else [r.alias for r in refs]
        if gap_aliases:
            gap_used = [a for a in used if a in gap_aliases]
            if gap_used:
                if _has_call(c):
                    agg_conjuncts.append(c)  # a condition on the match (docs/language.md section 7, Repetition)
                else:
                    gap_conjuncts[gap_used[0]].append(c)  # (the checker allows one per conjunct)
                continue
        positive_conjuncts.append(c)
        if len(used) <= 1:
            filters[used[0] if used else aliases[0]].append(c)
        elif len(used) == 2 and _is_attr_equality(c):
            joins.append(((c.left.alias, c.left.name), (c.right.alias, c.right.name)))
        else:
            where_cross.append(c)
            cross_refs.append(tuple([(r.alias, r.name) for r in refs]))

    # -- variables (equalities and PARTITION BY merged), each atom's, the partition key
    q = _query_variables(aliases, tuple(joins), p.partition_by, tuple(cross_refs))
    var_of = q.var_of

    # -- SEQ order and WITHIN bands
    w = duration_in_time_units(p.within, time_unit) if p.within is not None else None
    k = len(aliases)
    spans: Sequence[tuple[Sequence[int], Sequence[int]]]  # WITHIN as one span predicate: (ends, starts)
    order_window: Sequence[_Cross]
    if shape.nested:
        order_window = []
        spans = _nested_order(shape, [ast.Attr(a, TIME_ATTR) for a in aliases], w, order_window)
    else:
        order_window, spans = _flat_order(p.structure.op, aliases, w, type(w))

    # -- atoms
    atoms: list[Atom] = []
    for i, el in enumerate(elements):
        a = el.alias
        vars_, attrs, same_class = q.atoms[i]
        fexprs = filters[a]
        if same_class:  # two attributes of one alias in one class: a.x = a.y is a filter
            fexprs.extend(same_class)
        fn = cond = None
        ftext = ""
        if fexprs:
            cond = fexprs[0]
            for e in fexprs[1:]:
                cond = ast.And(cond, e)
            fn = code.condition(cond, _event_access, ("e",), f"{p.name}: filter of {a}") if generate \
                else _not_generated
            ftext = format_expr(cond) if len(fexprs) == 1 else " AND ".join([format_expr(e) for e in fexprs])
        atoms.append(Atom(a, el.type, i, vars_, attrs, fn, ftext, cond))

    # -- predicates over variables: WHERE's, then the order's and the window's
    predicates: list[Predicate] = []
    for c, pvars in zip(where_cross, q.cross_vars, strict=True):
        pid = len(predicates)
        fn, lin = code.predicate(c, pvars, var_of, p.name, pid) if generate else (_not_generated, None)
        predicates.append(Predicate(pid, pvars, None, "where", fn, c, lin))
    for c, origin, (r0, r1) in order_window:  # (one time variable each side)
        v0, v1 = var_of[r0], var_of[r1]
        pvars = (v0,) if v0 == v1 else (v0, v1)
        pid = len(predicates)
        fn, lin = code.predicate(c, pvars, var_of, p.name, pid) if generate else (_not_generated, None)
        predicates.append(Predicate(pid, pvars, None, origin, fn, c, lin))
    for ends, starts in spans:
        predicates.append(_span_predicate(
            len(predicates),
            [var_of[(aliases[i], TIME_ATTR)] for i in ends],
            [var_of[(aliases[i], TIME_ATTR)] for i in starts],
            w,
            p.name,
            generate,
        ))

    strategy = p.using or "skip_till_any_match"
    order = tuple(shape.edges)
    gaps = [_not_gap(p, g, after, before, gap_conjuncts[g.alias], alias_pos, code)
            for g, after, before in shape.gaps]
    if strategy != "skip_till_any_match":
        gaps += _strategy_gaps(p, strategy, elements, positive_conjuncts, alias_pos, code)
    # aggregate slots first (every expression rewritten), then the functions of (events, slots)
    slots = _AggregateSlots(gaps)
    if p.emit is None:
        for g in gaps:
            if g.origin == "kleene":
                slots.slot(g.alias, "events", None, g.alias)
    cond = _and_all([slots.rewrite(c) for c in agg_conjuncts]) if agg_conjuncts else None
    emit = _compile_emit(p, aliases, alias_pos, slots, code)
    agg_condition, agg_text = None, ""
    if cond is not None:
        agg_condition = code.condition(cond, _match_access(alias_pos), _match_params(k, slots),
                                       f"{p.name}: condition on aggregates")
        agg_text = " AND ".join(format_expr(c) for c in agg_conjuncts)
    for gi, g in enumerate(gaps):
        if g.origin == "kleene":
            g.aggregates = tuple(j for j, a in enumerate(slots.aggregates) if a.gap == gi)
    return CompiledPattern(
        name=p.name,
        op=p.structure.op,
        atoms=atoms,
        variables=dict(q.variables),
        predicates=predicates,
        within=w,
        partition_vars=q.partition_vars,
        emit=emit,
        source=p,
        time_unit=time_unit,
        gaps=gaps,
        strategy=strategy,
        order=order,
        aggregates=slots.aggregates,
        agg_condition=agg_condition,
        agg_condition_text=agg_text,
        output_aliases=aliases if not shape.gaps and not shape.nested else tuple(_output_aliases(p.structure)),
    )


class _QueryVariables(NamedTuple):
    """What the references of a pattern make of its variables (``_query_variables``)."""

    variables: tuple[tuple[str, Variable], ...]  # name -> variable, classes first, then identities
    var_of: dict[tuple[str, str], str]  # (alias, attr) -> its variable's name (read only: shared)
    atoms: tuple[tuple[tuple[str, ...], tuple[str, ...], tuple[ast.Expr, ...]], ...]  # (vars, attrs, filters)
    partition_vars: tuple[str, ...]  # the variables every atom shares
    cross_vars: tuple[tuple[str, ...], ...]  # each WHERE cross predicate's variables


@functools.lru_cache(maxsize=256)
def _query_variables(aliases: tuple[str, ...], joins: tuple[tuple[tuple[str, str], tuple[str, str]], ...],
                     partition_by: tuple[str, ...], cross_refs: tuple[tuple[tuple[str, str], ...], ...]
                     ) -> _QueryVariables:
    """The variables of a query: union-find classes of the aliases' times, the references ``joins``
    equates (``a.x = b.y``), the PARTITION BY attributes (equal across all aliases) and the references
    of the WHERE cross predicates; the earliest reference names its class.  Each atom's variables
    and attributes (its identity ``alias.#`` last) and the filters ``a.x = a.y`` its class merges.

    Why cached: it depends on these names only, its parts are immutable (and the mapping is only
    read), and the patterns of one file repeat them: union-find and the per-atom variables were a
    quarter of compiling a pattern (issue 12).
    """
    # union-find over (alias, attr) references: each reference's class, a list of references
    # (in any order until the end); a class's earliest reference (dict order) names it
    cls: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for a in aliases:
        r = (a, TIME_ATTR)
        cls[r] = [r]

    def union(x: tuple[str, str], y: tuple[str, str]) -> None:
        cx = cls.get(x)
        if cx is None:
            cx = cls[x] = [x]
        cy = cls.get(y)
        if cy is None:
            cy = cls[y] = [y]
        if cx is not cy:
            if len(cx) < len(cy):
                cx, cy = cy, cx
            cx.extend(cy)
            for r in cy:
                cls[r] = cx

    for x, y in joins:
        union(x, y)
    for attr in partition_by:  # PARTITION BY a: a.attr = b.attr for every pair of aliases
        first = (aliases[0], attr)
        for a in aliases[1:]:
            union(first, (a, attr))
    for refs in cross_refs:  # every reference of a cross predicate is a variable
        for r in refs:
            if r not in cls:
                cls[r] = [r]
    variables: dict[str, Variable] = {}
    var_of: dict[tuple[str, str], str] = {}
    own_refs: dict[str, list[tuple[str, str]]] = {a: [] for a in aliases}  # per alias, in class order
    position: dict[tuple[str, str], int] | None = None
    for root, members in cls.items():  # (a class first met at its earliest reference: its root)
        if root in var_of:
            continue
        if len(members) > 1:
            if position is None:
                position = {r: i for i, r in enumerate(cls)}
            members = sorted(members, key=position.__getitem__)
        name = f"{root[0]}.{root[1]}"
        variables[name] = Variable(name, tuple(members))
        for r in members:
            var_of[r] = name
            mine = own_refs.get(r[0])
            if mine is not None:
                mine.append((r[1], name))
    atoms = []
    for a in aliases:
        vars_: list[str] = []
        attrs: list[str] = []
        same_class: list[ast.Expr] = []
        seen_attr: dict[str, str] = {}
        for attr, v in own_refs[a]:
            if v in seen_attr:
                same_class.append(ast.Compare("=", ast.Attr(a, seen_attr[v]), ast.Attr(a, attr)))
                continue
            seen_attr[v] = attr
            vars_.append(v)
            attrs.append(attr)
        id_var = _identity_variable(a)
        variables[id_var.name] = id_var
        vars_.append(id_var.name)
        attrs.append(ID_ATTR)
        atoms.append((tuple(vars_), tuple(attrs), tuple(same_class)))
    partition_vars: tuple[str, ...] = ()
    if len(atoms) > 1:
        common = set(atoms[0][0])
        for vs, _, _ in atoms[1:]:
            common &= set(vs)
        partition_vars = tuple(v for v in atoms[0][0] if v in common)
    cross_vars = tuple(tuple(dict.fromkeys([var_of[r] for r in refs])) for refs in cross_refs)
    return _QueryVariables(tuple(variables.items()), var_of, tuple(atoms), partition_vars, cross_vars)


def _has_call(e: ast.Expr) -> bool:
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Call):
            return True
        if isinstance(n, (ast.Neg, ast.Not)):
            stack.append(n.operand)
        elif isinstance(n, (ast.Arith, ast.Compare, ast.And, ast.Or)):
            stack.extend((n.left, n.right))
        elif isinstance(n, ast.InList):
            stack.append(n.operand)
            stack.extend(n.items)
    return False


def _output_aliases(s: ast.Structure) -> list[str]:
    """Positive and repeated aliases in source order: the keys of a match without EMIT."""
    out: list[str] = []
    for el in s.elements:
        if el.kind == "nested":
            assert el.nested is not None
            out.extend(_output_aliases(el.nested))
        elif el.kind in ("event", "kleene"):
            out.append(el.alias)
    return out


AGG_ALIAS = "\0agg"  # the pseudo alias of an aggregate slot in a rewritten expression


class _AggregateSlots:
    """Numbers the aggregates a pattern uses (``g0``, ``g1``, ...) and rewrites an
    expression's aggregate calls into reads of their slots, so expressions with
    aggregates compile like any other (``cep.lang.expr``), as functions of the
    match's positive events and its aggregate values."""

    def __init__(self, gaps: list[Gap]) -> None:
        self.gap_of = {g.alias: i for i, g in enumerate(gaps) if g.origin == "kleene"}
        self.aggregates: list[Aggregate] = []
        self.index: dict[tuple[str, str, str | None], int] = {}

    def slot(self, alias: str, fn: str, attr: str | None, text: str) -> int:
        key = (alias, fn, attr)
        j = self.index.get(key)
        if j is None:
            j = self.index[key] = len(self.aggregates)
            self.aggregates.append(Aggregate(self.gap_of[alias], fn, attr, text))
        return j

    def call_slot(self, c: ast.Call) -> int:
        arg = c.args[0]
        assert isinstance(arg, ast.Attr)
        return self.slot(arg.alias, c.name, arg.name or None, format_expr(c))

    def rewrite(self, e: ast.Expr) -> ast.Expr:
        if isinstance(e, ast.Call):
            return ast.Attr(AGG_ALIAS, str(self.call_slot(e)), e.loc)
        if isinstance(e, (ast.Neg, ast.Not)):
            return replace(e, operand=self.rewrite(e.operand))
        if isinstance(e, (ast.Arith, ast.Compare, ast.And, ast.Or)):
            return replace(e, left=self.rewrite(e.left), right=self.rewrite(e.right))
        if isinstance(e, ast.InList):
            return replace(e, operand=self.rewrite(e.operand), items=tuple(self.rewrite(x) for x in e.items))
        return e


def _match_params(k: int, slots: _AggregateSlots | None) -> tuple[str, ...]:
    """Parameters of a function of a match: its positive events, then its aggregate slots."""
    return _params(k, len(slots.aggregates) if slots is not None else 0)


@functools.lru_cache(maxsize=256)
def _params(k: int, n: int) -> tuple[str, ...]:
    """``e0 .. e(k-1), g0 .. g(n-1)`` (cached: every pattern's EMIT asks, issue 12)."""
    return tuple([f"e{i}" for i in range(k)] + [f"g{j}" for j in range(n)])


def _match_access(alias_pos: dict[str, int]) -> Callable[[ast.Attr], str]:
    def access(attr: ast.Attr) -> str:
        if attr.alias == AGG_ALIAS:
            return f"g{attr.name}"
        j = alias_pos[attr.alias]
        if attr.name == TIME_ATTR:
            return f"e{j}.ts"
        return f"e{j}.fields.get({attr.name!r})"

    return access


_Cross = tuple[ast.Expr, str, tuple[tuple[str, str], tuple[str, str]]]
"""An order or window predicate to be: its condition, its origin and its two ``(alias, "ts")`` references."""


@functools.lru_cache(maxsize=1024)
def _identity_variable(alias: str) -> Variable:
    """The identity variable ``alias.#`` (the event's serial) of an alias (immutable: one per name)."""
    return Variable(f"{alias}.{ID_ATTR}", ((alias, ID_ATTR),))


@functools.lru_cache(maxsize=256)
def _flat_order(op: str, aliases: tuple[str, ...], w: int | float | None, _w_type: type
                ) -> tuple[tuple[_Cross, ...], tuple[tuple[range, range], ...]]:
    """The order and window conditions of a structure without nesting, and its spans (``_nested_order``).

    SEQ: ``x.ts < y.ts`` for consecutive elements; with WITHIN the band ``y.ts - x.ts <= w`` on
    each of them and, from three elements on, the span ``last.ts - first.ts <= w``.  AND with
    WITHIN: ``|x.ts - y.ts| <= w`` for every pair is ``max(ts) - min(ts) <= w``: a band from each
    element to the last one (implied by the span, indexable: the planner keeps them in the tree)
    plus one span predicate over all elements, not k(k-1) pairwise bands.  A star, not a chain: a
    candidate the bands admit spans at most 2w (a chain admits (k-1)w), so enumeration rejects
    fewer candidates (bench/results/plan_size).

    Why cached: it depends on the alias names and the window only (``_w_type`` keeps ``3600``
    and ``3600.0`` apart, they print differently), the nodes are immutable, and the patterns of
    one file repeat them: building them was a fifth of compiling a pattern (issue 12).
    """
    ts = [ast.Attr(a, TIME_ATTR) for a in aliases]  # each alias's ``x.ts`` (one node, shared)
    k = len(aliases)
    cross: list[_Cross] = []
    spans: tuple[tuple[range, range], ...] = ()
    if op == "SEQ":
        for i in range(k - 1):
            cross.append(_before(ts[i], ts[i + 1]))
        if w is not None:
            wl = ast.Literal(w)
            for i in range(k - 1):
                cross.append(_at_most(ts[i + 1], ts[i], wl, "within"))
            if k >= 3:
                cross.append(_at_most(ts[-1], ts[0], wl, "span"))
    elif w is not None:
        _bands([(i, k - 1) for i in range(k - 1)], ts, w, cross)
        if k >= 3:
            spans = ((range(k), range(k)),)
    return tuple(cross), spans


def _before(tx: ast.Attr, ty: ast.Attr) -> _Cross:
    """``x.ts < y.ts`` (SEQ order), from the two aliases' ``ts`` references."""
    return ast.Compare("<", tx, ty), "seq", ((tx.alias, TIME_ATTR), (ty.alias, TIME_ATTR))


def _at_most(tl: ast.Attr, te: ast.Attr, wl: ast.Literal, origin: str) -> _Cross:
    """``later.ts - earlier.ts <= w`` (a WITHIN band or span), from the two ``ts`` references."""
    return ast.Compare("<=", ast.Arith("-", tl, te), wl), origin, ((tl.alias, TIME_ATTR), (te.alias, TIME_ATTR))


def _nested_order(shape: _Shape, ts: list[ast.Attr], w, cross: list[_Cross]) -> list[tuple[list[int], list[int]]]:
    """The temporal inequalities a nested structure denotes (docs/language.md section 7, Nesting), and WITHIN:
    a band on every order edge plus ``e - s <= w`` from each possible earliest event
    ``s`` to each possible latest ``e`` (so ``max ts - min ts <= w``).  ``ts`` holds each
    element's ``x.ts`` reference, in atom order.

    Returns the spans to compile as one predicate each, ``(ends, starts)``: when more than one
    ``e - s`` pair is needed, they are the single predicate ``max(ends) - min(starts) <= w``
    (pairwise they would be quadratic in the number of elements), and consecutive elements not
    joined by an order edge get their (implied) band, so the planner still has a band to index
    for every element."""

    for i, j in shape.edges:
        cross.append(_before(ts[i], ts[j]))
    if w is None:
        return []
    wl = ast.Literal(w)
    edges = set(shape.edges)
    for i, j in shape.edges:
        cross.append(_at_most(ts[j], ts[i], wl, "within"))
    pairs = [(s_, e) for s_ in shape.starts for e in shape.ends if s_ != e and (s_, e) not in edges]
    if len(pairs) <= 1:
        for s_, e in pairs:
            cross.append(_at_most(ts[e], ts[s_], wl, "span"))
        return []
    joined = edges | {(j, i) for i, j in edges}
    _bands([(i, i + 1) for i in range(len(ts) - 1) if (i, i + 1) not in joined], ts, w, cross)
    return [(list(shape.ends), list(shape.starts))]


def _bands(pairs: Iterable[tuple[int, int]], ts: list[ast.Attr], w, cross: list[_Cross]) -> None:
    """``|x.ts - y.ts| <= w`` (two linear predicates, origin ``within``) for each pair of positions."""
    wl = ast.Literal(w)
    for i, j in pairs:
        for x, y in ((i, j), (j, i)):
            cross.append(_at_most(ts[x], ts[y], wl, "within"))


def _span_predicate(pid: int, ends: Sequence[str], starts: Sequence[str], w, pattern: str,
                    generate: bool) -> Predicate:
    """``max(ends) - min(starts) <= w`` over time variables, as one k-ary predicate.

    Why one predicate: WITHIN over an AND of k elements is ``|x.ts - y.ts| <= w`` for every
    pair, and k(k-1) binary predicates made planning (a greedy search for the largest acyclic
    subset) slow and the residual check k(k-1) calls per match.  The value is the one the
    pairwise predicates give: false when a time is not a number (or NaN), or when the
    difference overflows, like each binary comparison (``cep.lang.expr``)."""
    vars_ = tuple(dict.fromkeys([*starts, *ends]))
    param = {v: f"v{i}" for i, v in enumerate(vars_)}
    params = ", ".join(param.values())
    hi = ", ".join(param[v] for v in ends)
    lo = ", ".join(param[v] for v in starts)
    src = (
        f"def span({params}):\n"
        f"    for v in ({params},):\n"
        "        if (type(v) is not int and type(v) is not float) or v != v:\n"
        "            return False\n"
        "    try:\n"
        f"        return max({hi}) - min({lo}) <= {w!r}\n"
        "    except OverflowError:\n"
        "        return False\n"
    )
    fn = _not_generated
    if generate:
        from cep import codegen

        fn = codegen.define(f"{pattern}: predicate #{pid}", src, "span")
    wt = format_expr(ast.Literal(w))
    if list(ends) == list(starts):
        text = f"max - min of ({', '.join(ends)}) <= {wt}"
    else:
        text = f"max({', '.join(ends)}) - min({', '.join(starts)}) <= {wt}"
    return Predicate(pid, vars_, text, "span", fn)


def _and_all(exprs: Sequence[ast.Expr]) -> ast.Expr:
    cond = exprs[0]
    for e in exprs[1:]:
        cond = ast.And(cond, e)
    return cond


def _gap_parts(
    gap_alias: str, conjuncts: Sequence[ast.Expr], alias_pos: dict[str, int], partition_by: Sequence[str],
    code: _Code,
) -> dict[str, Any]:
    """Split a gap element's conjuncts: over the gap alias only (its filter), plain
    equalities with a positive alias (the index key, with PARTITION BY), the rest (residual)."""
    own: list[ast.Expr] = []
    residual: list[ast.Expr] = []
    key_attrs: list[str] = []
    key_sources: list[tuple[int, str]] = []
    for attr in partition_by:
        key_attrs.append(attr)
        key_sources.append((0, attr))
    for c in conjuncts:
        used = {r.alias for r in attr_refs(c)}
        if used <= {gap_alias}:
            own.append(c)
        elif len(used) == 2 and _is_attr_equality(c):
            g, other = (c.left, c.right) if c.left.alias == gap_alias else (c.right, c.left)
            key_attrs.append(g.name)
            key_sources.append((alias_pos[other.alias], other.name))
        else:
            residual.append(c)
    out: dict[str, Any] = {"key_attrs": tuple(key_attrs), "key_sources": tuple(key_sources)}
    if own:
        out["filter"] = code.condition(_and_all(own), _event_access, ["e"])
        out["filter_text"] = " AND ".join(format_expr(e) for e in own)
    if residual:
        params = ["g"] + [f"e{i}" for i in range(len(alias_pos))]

        def access(attr: ast.Attr) -> str:
            v = "g" if attr.alias == gap_alias else f"e{alias_pos[attr.alias]}"
            return f"{v}.ts" if attr.name == TIME_ATTR else f"{v}.fields.get({attr.name!r})"

        out["residual"] = code.condition(_and_all(residual), access, params)
        out["residual_text"] = " AND ".join(format_expr(e) for e in residual)
    return out


def _not_gap(p: ast.Pattern, el: ast.Element, after, before, conjuncts, alias_pos, code: _Code) -> Gap:
    """``NOT Type x`` (docs/language.md section 7, NOT elements) or ``Type{n,m} x`` (Repetition) between its positive neighbours."""
    parts = _gap_parts(el.alias, conjuncts, alias_pos, p.partition_by, code)
    if el.kind == "kleene":
        from cep.lang.printer import format_quantifier

        return Gap(el.alias, (el.type,), "kleene", after, before,
                   text=f"{el.type}{format_quantifier(el)} {el.alias}", min_count=int(el.min_count),
                   max_count=None if el.max_count is None else int(el.max_count), **parts)
    return Gap(el.alias, (el.type,), "not", after, before, text=f"NOT {el.type} {el.alias}", **parts)


def _strategy_gaps(p: ast.Pattern, strategy: str, elements: Sequence[ast.Element],
                   conjuncts: Sequence[ast.Expr], alias_pos: dict[str, int], code: _Code) -> list[Gap]:
    """The implicit NOTs of a strategy (docs/language.md section 7, Strategies), one per positive element after the first.

    skip_till_next_match: no event that could have played x_i (its type, PARTITION BY,
    every conjunct mentioning only x_1..x_i with x_i := e) between x_(i-1) and x_i.
    strict_contiguity: no event of any type of the pattern (same PARTITION BY values).
    """
    gaps: list[Gap] = []
    if strategy == "skip_till_next_match":
        for i in range(1, len(elements)):
            el = elements[i]
            allowed = {e.alias for e in elements[: i + 1]}
            mine = [c for c in conjuncts
                    if el.alias in {r.alias for r in attr_refs(c)} and {r.alias for r in attr_refs(c)} <= allowed]
            parts = _gap_parts(el.alias, mine, alias_pos, p.partition_by, code)
            if "residual_text" in parts:
                parts["residual_text"] += f" (with {el.alias} := the candidate)"
            gaps.append(Gap(el.alias, (el.type,), "next_match", (i - 1,), (i,),
                            text=f"next match: no earlier {el.type} that could be {el.alias}", **parts))
    elif strategy == "strict_contiguity":
        types = tuple(sorted({el.type for el in elements}))
        for i in range(1, len(elements)):
            gaps.append(Gap(elements[i].alias, types, "contiguity", (i - 1,), (i,),
                            key_attrs=tuple(p.partition_by), key_sources=tuple((0, a) for a in p.partition_by),
                            text=f"contiguity: no {' or '.join(types)} between "
                                 f"{elements[i - 1].alias} and {elements[i].alias}"))
    return gaps


def _event_access(attr: ast.Attr) -> str:
    if attr.name == TIME_ATTR:
        return "e.ts"
    return f"e.fields.get({attr.name!r})"


def _compile_emit(p: ast.Pattern, aliases: Sequence[str], alias_pos: dict[str, int],
                  slots: _AggregateSlots, code: _Code) -> list[EmitSpec] | None:
    """EMIT items as functions of the match's positive events and aggregate slots; a bare
    aggregate item (``count(f)``, ``first(f.ts)``) is its slot, output as computed."""
    if p.emit is None:
        return None
    # (without repeated aliases there is no aggregate to rewrite: the checker allows none)
    exprs = [slots.rewrite(item.expr) if item.expr is not None else None for item in p.emit] if slots.gap_of \
        else None
    generate = code.generate
    if generate:
        params = _match_params(len(aliases), slots)
        access = _match_access(alias_pos)
    fn: Callable[..., Any] = _not_generated
    specs: list[EmitSpec] = []
    for i, item in enumerate(p.emit):
        if item.star is not None:
            specs.append(EmitSpec(item.text, None, alias_pos[item.star], item.text))
            continue
        expr = item.expr
        assert expr is not None
        e = exprs[i] if exprs is not None else expr
        name = item.name or item.text
        t = type(expr)
        if t is ast.Call:
            specs.append(EmitSpec(name, None, None, item.text, slot=int(e.name)))  # type: ignore[union-attr]
            continue
        if generate:
            fn = code.value(e, access, params, f"{p.name}: emit {name}")
        bare = None
        if t is ast.Attr and expr.alias in alias_pos:
            bare = (alias_pos[expr.alias], expr.name)
        specs.append(EmitSpec(name, fn, None, item.text, bare))
    return specs


def compile_text(text: str, filename: str = "<pattern>", time_unit: str = "s") -> list[CompiledPattern]:
    """Parse, check and compile every pattern of a pattern file's text."""
    from cep.lang.parser import parse_text

    return [compile_pattern(p, time_unit) for p in parse_text(text, filename)]


def compile_files(paths: Iterable[str], time_unit: str = "s") -> list[CompiledPattern]:
    """Compile several pattern files; pattern names must be unique across them (no warnings)."""
    return compile_files_with_warnings(paths, time_unit)[0]


def compile_files_with_warnings(
    paths: Iterable[str], time_unit: str = "s"
) -> tuple[list[CompiledPattern], list[Diagnostic]]:
    """Compile several pattern files: ``(patterns, warnings)``; errors raise ``PatternError``.

    Pattern names must be unique across the files.  The warnings (comparisons
    that can never be true, ...) are the ones ``cep check`` prints; ``cep run``
    prints them too.
    """
    from cep.errors import PatternError
    from cep.lang.parser import parse_text_with_warnings, read_pattern_file

    out: list[CompiledPattern] = []
    warnings: list[Diagnostic] = []
    seen: dict[str, str] = {}
    diags: list[Diagnostic] = []
    for path in paths:
        try:
            pats, file_warnings = parse_text_with_warnings(read_pattern_file(path), str(path))
        except PatternError as e:
            diags.extend(e.diagnostics)
            continue
        warnings.extend(file_warnings)
        for p in pats:
            if p.name in seen:
                diags.append(Diagnostic(p.file, p.loc, f"pattern {p.name!r} is also defined in {seen[p.name]}"))
                continue
            seen[p.name] = str(path)
            try:
                out.append(compile_pattern(p, time_unit))
            except PatternError as e:
                diags.extend(e.diagnostics)
    if diags:
        raise PatternError(warnings + diags)
    return out, warnings
