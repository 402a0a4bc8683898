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
  (SEQ), or ``|x.ts - y.ts| <= w`` for every pair (AND);
* EMIT items compiled once to functions of the match's events.

Expressions are compiled to Python functions once, here (``cep.lang.expr``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cep import codegen
from cep.errors import Diagnostic, NotSupportedYet
from cep.lang import ast
from cep.lang.expr import compile_condition, compile_expr, linear_form
from cep.lang.gcq import (
    ID_ATTR,
    TIME_ATTR,
    Atom,
    CompiledPattern,
    EmitSpec,
    Linear,
    Predicate,
    Variable,
)
from cep.units import in_time_units


def duration_in_time_units(d: ast.Duration, time_unit: str = "s") -> int | float:
    """A duration in timestamp units (no unit: already in timestamp units)."""
    return in_time_units(d.value, d.unit, time_unit)


def _conjuncts(e: ast.Expr | None) -> list[ast.Expr]:
    if e is None:
        return []
    if isinstance(e, ast.And):
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _attrs(e: ast.Expr) -> list[ast.Attr]:
    """Attribute references of an expression, in source order."""
    out: list[ast.Attr] = []
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Attr):
            out.append(n)
        elif isinstance(n, (ast.Neg, ast.Not)):
            stack.append(n.operand)
        elif isinstance(n, (ast.Arith, ast.Compare, ast.And, ast.Or)):
            stack.append(n.right)
            stack.append(n.left)
        elif isinstance(n, ast.InList):
            stack.extend(reversed(n.items))
            stack.append(n.operand)
        elif isinstance(n, ast.Call):
            stack.extend(reversed(n.args))
    return out


def _text(e: ast.Expr) -> str:
    try:
        from cep.lang.printer import format_expr

        return format_expr(e)
    except ImportError:  # pragma: no cover - printer is part of the package
        return repr(e)


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[tuple[str, str], tuple[str, str]] = {}
        self.order: dict[tuple[str, str], int] = {}

    def add(self, x: tuple[str, str]) -> None:
        if x not in self.parent:
            self.parent[x] = x
            self.order[x] = len(self.order)

    def find(self, x: tuple[str, str]) -> tuple[str, str]:
        self.add(x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: tuple[str, str], b: tuple[str, str]) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            # the earlier reference names the class
            if self.order[rb] < self.order[ra]:
                ra, rb = rb, ra
            self.parent[rb] = ra


def _reject_phase2(p: ast.Pattern) -> None:
    diags = []
    for el in p.structure.elements:
        if el.kind != "event":
            diags.append(Diagnostic(p.file, el.loc, f"{el.kind} elements are not supported yet (phase 2)"))
    if p.using is not None:
        diags.append(Diagnostic(p.file, p.using_loc, "USING is not supported yet (phase 2)"))
    if diags:
        raise NotSupportedYet(diags)


def compile_pattern(p: ast.Pattern, time_unit: str = "s") -> CompiledPattern:
    """Compile one checked pattern to its GCQ."""
    _reject_phase2(p)
    elements = p.structure.elements
    aliases = [el.alias for el in elements]
    alias_pos = {a: i for i, a in enumerate(aliases)}
    uf = _UnionFind()
    for a in aliases:
        uf.add((a, TIME_ATTR))

    # -- WHERE conjuncts: filters, equalities, cross predicates
    filters: dict[str, list[ast.Expr]] = {a: [] for a in aliases}
    cross: list[tuple[ast.Expr, str]] = []
    for c in _conjuncts(p.where):
        refs = _attrs(c)
        used = list(dict.fromkeys(r.alias for r in refs))
        if len(used) <= 1:
            filters[used[0] if used else aliases[0]].append(c)
        elif (
            len(used) == 2
            and isinstance(c, ast.Compare)
            and c.op == "="
            and isinstance(c.left, ast.Attr)
            and isinstance(c.right, ast.Attr)
        ):
            uf.union((c.left.alias, c.left.name), (c.right.alias, c.right.name))
        else:
            cross.append((c, "where"))

    # -- PARTITION BY a: a.attr = b.attr for every pair of aliases
    for attr in p.partition_by:
        for a in aliases[1:]:
            uf.union((aliases[0], attr), (a, attr))

    # -- SEQ order and WITHIN bands
    w = duration_in_time_units(p.within, time_unit) if p.within is not None else None

    def ts(a: str) -> ast.Attr:
        return ast.Attr(a, TIME_ATTR)

    k = len(aliases)
    if p.structure.op == "SEQ":
        for i in range(k - 1):
            cross.append((ast.Compare("<", ts(aliases[i]), ts(aliases[i + 1])), "seq"))
        if w is not None:
            wl = ast.Literal(w)
            for i in range(k - 1):
                diff = ast.Arith("-", ts(aliases[i + 1]), ts(aliases[i]))
                cross.append((ast.Compare("<=", diff, wl), "within"))
            if k >= 3:
                diff = ast.Arith("-", ts(aliases[-1]), ts(aliases[0]))
                cross.append((ast.Compare("<=", diff, wl), "span"))
    elif w is not None:
        wl = ast.Literal(w)
        for i in range(k):
            for j in range(i + 1, k):
                origin = "within" if j == i + 1 else "span"
                for x, y in ((i, j), (j, i)):
                    diff = ast.Arith("-", ts(aliases[x]), ts(aliases[y]))
                    cross.append((ast.Compare("<=", diff, wl), origin))

    # every reference of a cross predicate is a variable
    for c, _ in cross:
        for r in _attrs(c):
            uf.add((r.alias, r.name))

    # -- variables: union-find classes with a reference from at least one alias
    classes: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for ref in sorted(uf.parent, key=lambda r: uf.order[r]):
        classes.setdefault(uf.find(ref), []).append(ref)
    variables: dict[str, Variable] = {}
    var_of: dict[tuple[str, str], str] = {}
    for root, refs in classes.items():
        name = f"{root[0]}.{root[1]}"
        variables[name] = Variable(name, tuple(refs))
        for r in refs:
            var_of[r] = name

    # -- atoms
    atoms: list[Atom] = []
    for i, el in enumerate(elements):
        a = el.alias
        vars_: list[str] = []
        attrs: list[str] = []
        seen_attr: dict[str, str] = {}
        for ref, v in var_of.items():
            if ref[0] != a:
                continue
            if v in seen_attr:
                # two attributes of one alias in one class: a.x = a.y is a filter
                filters[a].append(ast.Compare("=", ast.Attr(a, seen_attr[v]), ast.Attr(a, ref[1])))
                continue
            seen_attr[v] = ref[1]
            vars_.append(v)
            attrs.append(ref[1])
        id_var = f"{a}.{ID_ATTR}"
        variables[id_var] = Variable(id_var, ((a, ID_ATTR),))
        vars_.append(id_var)
        attrs.append(ID_ATTR)
        fexprs = tuple(filters[a])
        fn = None
        ftext = ""
        if fexprs:
            cond = fexprs[0]
            for e in fexprs[1:]:
                cond = ast.And(cond, e)
            fn = compile_condition(cond, _event_access, ["e"], f"{p.name}: filter of {a}")
            ftext = " AND ".join(_text(e) for e in fexprs)
        atoms.append(Atom(a, el.type, i, tuple(vars_), tuple(attrs), fn, filter_text=ftext))

    # -- predicates over variables
    predicates: list[Predicate] = []
    for c, origin in cross:
        refs = _attrs(c)
        pvars = list(dict.fromkeys(var_of[(r.alias, r.name)] for r in refs))
        params = [f"v{j}" for j in range(len(pvars))]
        pos = {v: j for j, v in enumerate(pvars)}

        def access(attr: ast.Attr, pos=pos) -> str:
            return f"v{pos[var_of[(attr.alias, attr.name)]]}"

        fn = compile_condition(c, access, params, f"{p.name}: predicate #{len(predicates)}")
        lin = None
        if isinstance(c, ast.Compare) and len(pvars) == 2:
            lf = linear_form(c)
            if lf is not None:
                coefs, const, op = lf
                merged: dict[str, float] = {}
                for (al, at), coef in coefs.items():
                    v = var_of[(al, at)]
                    merged[v] = merged.get(v, 0) + coef
                if len(merged) == 2 and all(x != 0 for x in merged.values()):
                    lin = Linear(tuple(merged.items()), const, op)
        predicates.append(Predicate(len(predicates), tuple(pvars), _text(c), origin, fn, c, lin))

    # -- partition analysis: variables every atom shares
    if atoms:
        common = set(atoms[0].vars)
        for at in atoms[1:]:
            common &= set(at.vars)
        partition_vars = tuple(v for v in atoms[0].vars if v in common)
    else:
        partition_vars = ()
    if len(atoms) == 1:
        partition_vars = ()

    emit = _compile_emit(p, aliases, alias_pos)
    return CompiledPattern(
        name=p.name,
        op=p.structure.op,
        atoms=atoms,
        variables=variables,
        predicates=predicates,
        within=w,
        partition_vars=partition_vars,
        emit=emit,
        source=p,
        time_unit=time_unit,
    )


def _event_access(attr: ast.Attr) -> str:
    if attr.name == TIME_ATTR:
        return "e.ts"
    return f"e.fields.get({attr.name!r})"


def _compile_emit(p: ast.Pattern, aliases: Sequence[str], alias_pos: dict[str, int]) -> list[EmitSpec] | None:
    if p.emit is None:
        return None
    params = [f"e{i}" for i in range(len(aliases))]

    def access(attr: ast.Attr) -> str:
        j = alias_pos[attr.alias]
        if attr.name == TIME_ATTR:
            return f"e{j}.ts"
        return f"e{j}.fields.get({attr.name!r})"

    specs: list[EmitSpec] = []
    for item in p.emit:
        if item.star is not None:
            specs.append(EmitSpec(item.text, None, alias_pos[item.star], item.text))
        else:
            assert item.expr is not None
            fn = compile_expr(item.expr, access, params, f"{p.name}: emit {item.name or item.text}")
            bare = None
            if isinstance(item.expr, ast.Attr) and item.expr.name != TIME_ATTR:
                bare = (alias_pos[item.expr.alias], item.expr.name)
            specs.append(EmitSpec(item.name or item.text, fn, None, item.text, bare))
    return specs


def match_builder(cp: CompiledPattern) -> Callable[[Sequence[Any]], dict]:
    """One generated function: the events of a match (atom order) -> its ``match`` object (spec section 5).

    Why generated: it runs once per composite event, so the EMIT items become one dict
    display (bare attributes read inline, other items call their compiled expression)
    instead of a loop over item objects. Without EMIT, each alias maps to its event's fields.
    """
    env: dict[str, Any] = {}
    k = len(cp.atoms)
    items: list[str] = []
    if cp.emit is None:
        items = [f"{a.alias!r}: e{i}.fields" for i, a in enumerate(cp.atoms)]
    else:
        for j, spec in enumerate(cp.emit):
            if spec.star is not None:
                prefix = f"{cp.atoms[spec.star].alias}."
                items.append(f"**{{{prefix!r} + _k: _v for _k, _v in e{spec.star}.fields.items()}}")
            elif spec.attr is not None:
                items.append(f"{spec.name!r}: e{spec.attr[0]}.fields.get({spec.attr[1]!r})")
            else:
                env[f"_f{j}"] = spec.fn
                items.append(f"{spec.name!r}: _f{j}({', '.join(f'e{i}' for i in range(k))})")
    unpack = "".join(f"e{i}, " for i in range(k))
    src = f"def build(events):\n    {unpack}= events\n    return {{{', '.join(items)}}}\n"
    return codegen.define(f"{cp.name}: match builder", src, "build", env)


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
