"""Expressions compiled once to Python functions with SQL three-valued logic.

This is the engine's hot path: every atom filter, cross predicate and EMIT
item runs once per event or per candidate match.  So an expression is not a
tree walked per event: it is translated once into Python source, specialised
on what is known statically (literal types, which sub-expressions can only be
numbers or null), and compiled with ``compile``/``exec``.  ``x.amount < 100``
becomes::

    def _cond(e):
        t0 = e.fields.get('amount')
        return (type(t0) is int or type(t0) is float) and t0 < 100

Semantics (docs/language.md section 2; written down in ``docs/semantics.md``):

* Values are numbers (``int``/``float``), strings, booleans (``bool`` or the
  runtime's canonical ``cep.values.SqlBool``) and null (``None``).  A missing
  attribute reads as null.  Any other value (a list or an object) behaves like
  null.
* Arithmetic ``+ - * / %`` and unary ``-`` need numbers: a null, string or
  boolean operand gives null, and so does a division or modulo by zero.
  ``+ - * %`` of two integers is an integer.  ``/`` is true division, except
  that an exact quotient of two integers stays an integer (``6 / 3`` is ``2``,
  ``7 / 2`` is ``3.5``), so integers keep their JSON form.  ``%`` is the SQL
  (and Java/Esper) remainder: it takes the sign of the dividend
  (``-7 % 3`` is ``-1``).  Float overflow follows IEEE (``inf``); an integer too
  large to convert to a float for a mixed operation gives null for ``/`` and
  ``%`` and makes the whole expression null (a condition: not true).
* A comparison (``= != < <= > >=``) is unknown when either side is null or the
  two sides are of different kinds; numbers compare with numbers by value
  (``1 = 1.0``), strings with strings (code point order), booleans with
  booleans (``false < true``).  Booleans are not numbers: ``true = 1`` and
  ``true != 1`` are both unknown, as is ``'1' = 1``.
* ``x IN (a, b, ...)`` is ``x = a OR x = b OR ...`` in SQL three-valued logic:
  true if some item is equal, false if every item is comparable and different,
  unknown otherwise (so ``x IN (1, null)`` is never false).  ``NOT IN`` is its
  negation.
* ``AND``, ``OR`` and ``NOT`` follow SQL's three-valued logic (``false AND
  unknown`` is false, ``true OR unknown`` is true, ``NOT unknown`` is
  unknown).  A boolean value used as a condition (``WHERE a.flag``) is its own
  truth value; a non-boolean value used as a condition is unknown.

How: each node is generated in one of three modes.  *Truth* (``T``) is a
Python expression that is true iff the node is TRUE, *falsity* (``F``) true
iff it is FALSE; ``NOT`` swaps them, ``AND``/``OR`` combine them with Python's
``and``/``or``, so conditions need no three-valued intermediate values at all.
*Value* (``V``) gives the node's value with ``None`` for null/unknown.  Every
attribute is read once, at the top of the function; composite operands are
bound to local temporaries with ``:=`` so they are evaluated once.
"""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from cep import codegen
from cep.lang import ast
from cep.values import FALSE, TRUE, SqlBool

__all__ = [
    "compile_expr",
    "compile_condition",
    "source_of",
    "linear_form",
    "div",
    "mod",
]

AccessFn = Callable[[ast.Attr], str]

# kind of a generated value, known at compile time
_NUM = "num"  # a number literal (never null)
_STR = "str"
_BOOL = "bool"
_NULL = "null"
_NUMQ = "num?"  # a number or None (arithmetic results)
_BOOLQ = "bool?"  # a Python bool or None (boolean sub-expressions as values)
_ANY = "any"  # anything (attribute values)

_CLASS = {_NUM: _NUM, _NUMQ: _NUM, _STR: _STR, _BOOL: _BOOL, _BOOLQ: _BOOL}

# dynamic comparison class of a runtime value: 0 number, 1 string, 2 boolean
_K = {int: 0, float: 0, str: 1, bool: 2, SqlBool: 2}

_BOOL_NODES = (ast.Compare, ast.InList, ast.And, ast.Or, ast.Not)

# Deeper sub-expressions are compiled into functions of their own: Python's
# parser limits nesting (200 parentheses), and each level nests a few.
_MAX_INLINE_DEPTH = 24

_CMP_PY = {"=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


# ------------------------------------------------------------- arithmetic


def div(a, b):
    """``a / b`` for two numbers: null on zero, exact integer quotients stay integers."""
    if not b:
        return None
    if type(a) is int and type(b) is int:
        q, r = divmod(a, b)
        if not r:
            return q
    try:
        return a / b
    except OverflowError:
        return None


def mod(a, b):
    """``a % b`` for two numbers: the SQL remainder (sign of the dividend); null on zero."""
    if not b:
        return None
    if type(a) is int and type(b) is int:
        r = a % b
        if r and (r < 0) != (a < 0):
            r -= b
        return r
    try:
        return math.fmod(a, b)
    except (OverflowError, ValueError):
        return None


def _fold(op: str, a, b):
    """Constant folding with exactly the runtime semantics (both operands numbers)."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return div(a, b)
    return mod(a, b)


_EXACT = 2**53  # every integer up to this magnitude is a float exactly


def _is_num_literal(v: Any) -> bool:
    return type(v) is int or type(v) is float


# ---------------------------------------------------------------- codegen


class _Dyn(NamedTuple):
    """A comparison of two dynamic values: a numeric fast path, then a class dispatch."""

    num_guard: str
    num_cmp: str
    guard: str
    cmp: str


class _Gen:
    """Generates the source of one function."""

    def __init__(self, access: AccessFn, params: Sequence[str], cache: dict | None = None,
                 label: str = "expression", const_prefix: str = "_c",
                 numeric: Callable[[ast.Attr], bool] | None = None) -> None:
        self.access = access
        self.numeric = numeric
        self.const_prefix = const_prefix
        self.label = label
        self.cache: dict[int, Callable] = {} if cache is None else cache
        self.params = list(params)
        self.prologue: list[str] = []
        self.attr_names: dict[tuple[str, str], str] = {}
        self.consts: dict[str, Any] = {}
        self.n = 0
        self.depth = 0

    def hoist(self, e: ast.Expr) -> str:
        """Compile a deep sub-expression into a function of its own (once per node)."""
        key = id(e)
        fn = self.cache.get(key)
        if fn is None:
            fn = self.cache[key] = _compile(e, self.access, self.params, "value", self.cache,
                                            f"{self.label} (part)")
        return self.const(fn)

    def tmp(self) -> str:
        self.n += 1
        return f"_t{self.n}"

    def const(self, value: Any) -> str:
        name = f"{self.const_prefix}{len(self.consts)}"
        self.consts[name] = value
        return name

    # -- leaves

    def attr(self, a: ast.Attr) -> str:
        key = (a.alias, a.name)
        name = self.attr_names.get(key)
        if name is None:
            src = self.access(a)
            if src.isidentifier() and not keyword.iskeyword(src):
                name = src
            else:
                name = f"_a{len(self.attr_names)}"
                self.prologue.append(f"{name} = {src}")
            self.attr_names[key] = name
        return name

    def literal(self, v: Any) -> tuple[str, str]:
        if v is None:
            return "None", _NULL
        if v is True or v is False:
            return repr(v), _BOOL
        if type(v) is int:
            return repr(v), _NUM
        if type(v) is float:
            if math.isfinite(v):
                return repr(v), _NUM
            return self.const(v), _NUM
        if type(v) is str:
            return repr(v), _STR
        raise TypeError(f"unsupported literal {v!r}")

    # -- value mode: (source, kind)

    def value(self, e: ast.Expr) -> tuple[str, str]:
        if isinstance(e, (ast.Literal, ast.Attr)):
            return self._value(e)
        if self.depth >= _MAX_INLINE_DEPTH:
            fn = self.hoist(e)
            kind = _BOOLQ if isinstance(e, _BOOL_NODES) else _NUMQ
            return f"{fn}({', '.join(self.params)})", kind
        self.depth += 1
        try:
            return self._value(e)
        finally:
            self.depth -= 1

    def _value(self, e: ast.Expr) -> tuple[str, str]:
        if isinstance(e, ast.Literal):
            return self.literal(e.value)
        if isinstance(e, ast.Attr):
            return self.attr(e), (_NUM if self.numeric is not None and self.numeric(e) else _ANY)
        if isinstance(e, ast.Neg):
            return self.neg(e)
        if isinstance(e, ast.Arith):
            return self.arith(e)
        if isinstance(e, (ast.Compare, ast.InList, ast.And, ast.Or, ast.Not)):
            return self.bool_value(e), _BOOLQ
        if isinstance(e, ast.Call):
            raise NotImplementedError(f"function {e.name}() is not supported yet (phase 2 aggregates)")
        raise TypeError(f"not an expression: {e!r}")

    def constant(self, e: ast.Expr) -> tuple[bool, Any]:
        """(True, value) when ``e`` is a constant expression."""
        if isinstance(e, ast.Literal):
            return True, e.value
        if isinstance(e, ast.Neg):
            ok, v = self.constant(e.operand)
            if not ok:
                return False, None
            return True, (-v if _is_num_literal(v) else None)
        if isinstance(e, ast.Arith):
            ok1, a = self.constant(e.left)
            if not ok1:
                return False, None
            ok2, b = self.constant(e.right)
            if not ok2:
                return False, None
            if _is_num_literal(a) and _is_num_literal(b):
                try:
                    return True, _fold(e.op, a, b)
                except OverflowError:
                    return True, None
            return True, None
        return False, None

    def num_guard(self, src: str, kind: str) -> tuple[str, str]:
        """(guard, name): guard is true iff the value is a number; name reads it after the guard."""
        if kind == _NUM:
            return "", src
        if kind == _ANY:
            if src.isidentifier():
                return f"(type({src}) is int or type({src}) is float)", src
            t = self.tmp()
            return f"(type({t} := {src}) is int or type({t}) is float)", t
        if kind == _NUMQ:
            t = self.tmp()
            return f"({t} := {src}) is not None", t
        return "False", src  # str, bool, null: never a number

    def neg(self, e: ast.Neg) -> tuple[str, str]:
        ok, v = self.constant(e)
        if ok:
            return self.literal(v)
        src, kind = self.value(e.operand)
        g, name = self.num_guard(src, kind)
        if g == "False":
            return "None", _NULL
        if not g:  # a sure number (``numeric``): its negation is one
            return f"(-{name})", _NUM
        return f"(-{name} if {g} else None)", _NUMQ

    def arith(self, e: ast.Arith) -> tuple[str, str]:
        ok, v = self.constant(e)
        if ok:
            return self.literal(v)
        ls, lk = self.value(e.left)
        rs, rk = self.value(e.right)
        if lk in (_NULL, _STR, _BOOL, _BOOLQ) or rk in (_NULL, _STR, _BOOL, _BOOLQ):
            return "None", _NULL
        lg, ln = self.num_guard(ls, lk)
        rg, rn = self.num_guard(rs, rk)
        if e.op in ("+", "-", "*"):
            body = f"{ln} {e.op} {rn}"
        elif e.op == "/":
            body = f"_div({ln}, {rn})"
        elif e.op == "%":
            body = f"_mod({ln}, {rn})"
        else:
            raise ValueError(f"unknown arithmetic operator {e.op!r}")
        guards = [g for g in (lg, rg) if g]
        if not guards:
            # two sure numbers (``numeric`` attributes): + - * give one (/ and % give null for a zero)
            return f"({body})", (_NUM if e.op in ("+", "-", "*") and lk == rk == _NUM else _NUMQ)
        return f"({body} if {' and '.join(guards)} else None)", _NUMQ

    # -- comparisons: (guard, cmp) with T = guard and cmp, F = guard and not cmp

    def compare_parts(self, op: str, left: ast.Expr, right: ast.Expr) -> tuple[str, str] | _Dyn | None:
        """``None`` when the comparison is unknown whatever the values."""
        ls, lk = self.value(left)
        rs, rk = self.value(right)
        return self.compare_src(op, ls, lk, rs, rk)

    def bind(self, src: str, kind: str) -> tuple[str, str]:
        """(first use, later uses) for a value used more than once."""
        if src.isidentifier() or kind in (_NUM, _STR, _BOOL, _NULL):
            return src, src
        t = self.tmp()
        return f"({t} := {src})", t

    def compare_src(self, op: str, ls: str, lk: str, rs: str, rk: str) -> tuple[str, str] | _Dyn | None:
        pyop = _CMP_PY[op]
        if lk == _NULL or rk == _NULL:
            return None
        lc, rc = _CLASS.get(lk), _CLASS.get(rk)
        if lc is not None and rc is not None and lc != rc:
            return None
        if lc is None and rc is None:
            # both dynamic (attribute values, plain names): numbers first, then a
            # dispatch on the runtime classes
            ln, rn = ls, rs
            k = self.tmp()
            num = (f"(type({ln}) is int or type({ln}) is float) and "
                   f"(type({rn}) is int or type({rn}) is float)")
            guard = f"({k} := _K.get(type({ln}))) is not None and {k} == _K.get(type({rn}))"
            cmp = f"({ln} {pyop} {rn} if {k} != 2 else bool({ln}) {pyop} bool({rn}))"
            return _Dyn(num, f"({ln} {pyop} {rn})", guard, cmp)
        cls = lc if lc is not None else rc
        guards = []
        names = []
        for src, kind in ((ls, lk), (rs, rk)):
            if cls == _NUM:
                g, n = self.num_guard(src, kind)
            elif kind in (_STR, _BOOL):
                g, n = "", src
            elif kind == _BOOLQ:
                t = self.tmp()
                g, n = f"({t} := {src}) is not None", t
            else:  # _ANY against a string or boolean class
                first, n = self.bind(src, kind)
                if cls == _STR:
                    g = f"type({first}) is str"
                else:
                    g = f"({first} is True or {n} is False or type({n}) is _SqlBool)"
                    n = f"bool({n})"
            if g:
                guards.append(g)
            names.append(n)
        ln, rn = names
        if cls == _BOOL and lk == _BOOL and rk == _BOOL:
            return "", f"({ln} {pyop} {rn})"
        return " and ".join(guards), f"({ln} {pyop} {rn})"

    # -- truth / falsity

    def truth(self, e: ast.Expr, want: bool) -> str:
        """Source true iff ``e`` is TRUE (``want``) or FALSE (not ``want``)."""
        if self.depth >= _MAX_INLINE_DEPTH and not isinstance(e, (ast.Literal, ast.Attr)):
            fn = self.hoist(e)
            return f"({fn}({', '.join(self.params)}) is {want!r})"
        self.depth += 1
        try:
            return self._truth(e, want)
        finally:
            self.depth -= 1

    def _truth(self, e: ast.Expr, want: bool) -> str:
        if isinstance(e, (ast.And, ast.Or)):
            # flattened chains keep the generated source shallow (Python limits nesting)
            cls = type(e)
            parts = [self.truth(x, want) for x in _chain(e, cls)]
            joiner = " and " if (cls is ast.And) == want else " or "
            return "(" + joiner.join(parts) + ")"
        if isinstance(e, ast.Not):
            return self.truth(e.operand, not want)
        if isinstance(e, ast.Compare):
            parts = self.compare_parts(e.op, e.left, e.right)
            return self._tf(parts, want)
        if isinstance(e, ast.InList):
            return self.in_truth(e, want if not e.negated else not want)
        # a value used as a condition: only a boolean has a truth value
        src, kind = self.value(e)
        if kind == _BOOL:
            return repr(src == repr(want))
        if kind == _BOOLQ:
            return f"({src} is {want!r})"
        if kind == _ANY:
            f, n = self.bind(src, kind)
            sb = "_TRUE" if want else "_FALSE"
            return f"({f} is {want!r} or {n} is {sb})"
        return "False"

    @staticmethod
    def _tf(parts: tuple[str, str] | _Dyn | None, want: bool) -> str:
        if parts is None:
            return "False"
        if isinstance(parts, _Dyn):
            fast = parts.num_cmp if want else f"not {parts.num_cmp}"
            slow = f"{parts.cmp}" if want else f"not {parts.cmp}"
            return f"({fast} if {parts.num_guard} else ({parts.guard} and {slow}))"
        guard, cmp = parts
        body = cmp if want else f"not {cmp}"
        return f"({guard} and {body})" if guard else f"({body})"

    def in_truth(self, e: ast.InList, want: bool, operand: tuple[str, str] | None = None) -> str:
        src, kind = self.value(e.operand) if operand is None else operand
        if kind == _NULL:
            return "False"
        consts = [self.constant(i) for i in e.items]
        if all(ok for ok, _ in consts):
            return self.in_literals(src, kind, [v for _, v in consts], want)
        # general case: OR of equalities, the operand bound once up front
        f, n = self.bind(src, kind)
        prefix = f"({f} is None or True) and " if f != n else ""
        terms = []
        for item in e.items:
            is_, ik = self.value(item)
            parts = self.compare_src("=", n, kind, is_, ik)
            if parts is None:
                if not want:
                    return "False"  # an item that is never comparable: never all false
                continue
            terms.append(self._tf(parts, want))
        if not terms:
            return "False"
        return "(" + prefix + "(" + (" or " if want else " and ").join(terms) + "))"

    def in_literals(self, src: str, kind: str, values: list, want: bool) -> str:
        by_class: dict[str, list] = {_NUM: [], _STR: [], _BOOL: []}
        has_null = False
        for v in values:
            if v is None:
                has_null = True
            elif v is True or v is False:
                by_class[_BOOL].append(v)
            elif type(v) is str:
                by_class[_STR].append(v)
            else:
                by_class[_NUM].append(v)
        present = [c for c, vs in by_class.items() if vs]
        if not want and (has_null or len(present) != 1):
            return "False"  # some item is never comparable: the OR is never false
        opcls = _CLASS.get(kind)
        terms = []
        f, n = self.bind(src, kind)
        for c in present:
            if opcls is not None and opcls != c:
                continue
            vals = by_class[c]
            cname = self.const(frozenset(vals))
            if c == _NUM:
                g, nm = self.num_guard(f, kind)
            elif c == _STR:
                g, nm = ("", f) if kind == _STR else (f"type({f}) is str", n)
            else:
                if kind in (_BOOL,):
                    g, nm = "", f
                elif kind == _BOOLQ:
                    g, nm = f"{f} is not None", n
                else:
                    g, nm = f"({f} is True or {n} is False or type({n}) is _SqlBool)", f"bool({n})"
            test = f"{nm} in {cname}" if want else f"{nm} not in {cname}"
            terms.append(f"({g} and {test})" if g else f"({test})")
            f = n  # bound by the first term (or a plain name)
        if not terms:
            return "False"
        return "(" + " or ".join(terms) + ")"

    def bool_value(self, e: ast.Expr) -> str:
        """A boolean node as a value: Python True, False or None."""
        if isinstance(e, ast.Compare):
            parts = self.compare_parts(e.op, e.left, e.right)
            if parts is None:
                return "None"
            if isinstance(parts, _Dyn):
                return (f"({parts.num_cmp} if {parts.num_guard} else "
                        f"({parts.cmp} if {parts.guard} else None))")
            guard, cmp = parts
            return f"({cmp} if {guard} else None)" if guard else cmp
        if isinstance(e, ast.Not):
            s = self.bool_operand(e.operand)
            t = self.tmp()
            return f"(None if ({t} := {s}) is None else not {t})"
        if isinstance(e, (ast.And, ast.Or)):
            a = self.bool_operand(e.left)
            b = self.bool_operand(e.right)
            x, y = self.tmp(), self.tmp()
            dom, other = ("False", "True") if isinstance(e, ast.And) else ("True", "False")
            return (
                f"({dom} if ({x} := {a}) is {dom} or ({y} := {b}) is {dom} "
                f"else (None if {x} is None or {y} is None else {other}))"
            )
        # InList: via its truth and falsity over the operand, evaluated once
        assert isinstance(e, ast.InList)
        src, kind = self.value(e.operand)
        if kind == _NULL:
            return "None"
        f, n = self.bind(src, kind)
        prefix = f"({f} is None or True) and " if f != n else ""
        t = self.in_truth(e, not e.negated, (n, kind))
        fl = self.in_truth(e, e.negated, (n, kind))
        return f"(True if ({prefix}{t}) else (False if {fl} else None))"

    def bool_operand(self, e: ast.Expr) -> str:
        """Any node as a three-valued truth value (True/False/None)."""
        if isinstance(e, _BOOL_NODES):
            if self.depth >= _MAX_INLINE_DEPTH:
                fn = self.hoist(e)
                return f"{fn}({', '.join(self.params)})"
            self.depth += 1
            try:
                return self.bool_value(e)
            finally:
                self.depth -= 1
        src, kind = self.value(e)
        if kind == _BOOL:
            return src
        if kind == _BOOLQ:
            return src
        if kind == _ANY:
            f, n = self.bind(src, kind)
            return f"(True if ({f} is True or {n} is _TRUE) else (False if ({n} is False or {n} is _FALSE) else None))"
        return "None"


def _chain(e: ast.Expr, cls: type) -> list[ast.Expr]:
    """The operands of a chain of one associative connective, left to right."""
    out: list[ast.Expr] = []
    stack = [e]
    while stack:
        n = stack.pop()
        if type(n) is cls:
            stack.append(n.right)  # type: ignore[union-attr]
            stack.append(n.left)  # type: ignore[union-attr]
        else:
            out.append(n)
    return out


def _env(consts: dict[str, Any]) -> dict[str, Any]:
    env: dict[str, Any] = {
        "_K": _K,
        "_SqlBool": SqlBool,
        "_TRUE": TRUE,
        "_FALSE": FALSE,
        "_div": div,
        "_mod": mod,
        "__builtins__": {"type": type, "int": int, "float": float, "str": str, "bool": bool,
                         "OverflowError": OverflowError},
    }
    env.update(consts)
    return env


def _build(expr: ast.Expr, access: AccessFn, params: Sequence[str], mode: str,
           cache: dict | None = None, label: str = "expression") -> tuple[str, dict]:
    g = _Gen(access, params, cache, label)
    if mode == "condition":
        body = g.truth(expr, True)
        fail = "False"
        name = "_cond"
    else:
        src, kind = g.value(expr)
        if kind == _ANY:
            t = g.tmp()
            body = f"({t}.value if type({t} := {src}) is _SqlBool else {t})"
        else:
            body = src
        fail = "None"
        name = "_expr"
    lines = [f"def {name}({', '.join(params)}):", "    try:"]
    lines += [f"        {p}" for p in g.prologue]
    lines.append(f"        return {body}")
    lines.append("    except OverflowError:")
    lines.append(f"        return {fail}")
    return "\n".join(lines) + "\n", g.consts


def source_of(expr: ast.Expr, access: AccessFn, params: Sequence[str], condition: bool = True) -> str:
    """The generated Python source of a condition (or of a value with ``condition=False``)."""
    return _build(expr, access, params, "condition" if condition else "value")[0]


def inline_conditions(exprs: Sequence[ast.Expr], access: AccessFn,
                      const_prefix: str = "_c",
                      numeric: Callable[[ast.Attr], bool] | None = None) -> tuple[list[str], dict[str, Any]] | None:
    """Python expressions, one per condition, each true iff its condition is TRUE, to be
    inlined into a generated function of the caller's (the engine's per-type handler), and
    the names they need.  ``access`` must give a local name of the caller's for each
    attribute read (so several conditions read an attribute once).  The caller evaluates
    each inside ``try``/``except OverflowError`` (not true).  None when a condition is too
    deep to inline (it would need a helper function reading the event itself): call its
    compiled function instead.  ``const_prefix`` names the constants: a caller that inlines
    several calls' conditions into one function gives each call its own prefix, or the
    second call's ``_c0`` would replace the first's.  ``numeric``: true of an attribute whose
    value is surely a number (an event time, checked when the record was decoded): no type test
    of it (card testing's residual ``big.ts - s1.ts <= 3600`` per candidate match)."""
    g = _Gen(access, [], const_prefix=const_prefix, numeric=numeric)
    srcs = [g.truth(e, True) for e in exprs]
    if g.cache or g.prologue:
        return None
    env = _env(g.consts)
    del env["__builtins__"]
    return srcs, env


def inline_number_tests(exprs: Sequence[ast.Expr], access: AccessFn, const_prefix: str = "_c",
                        floats: bool = False) -> tuple[str, list[str], dict[str, Any]] | None:
    """``(v, tests, names)`` when every condition compares one and the same attribute with number
    constants only (through AND, OR and NOT): ``v`` is the caller's name for that attribute read and
    each test is its condition's truth where ``v`` holds a number (an int or a float, not a
    boolean).  Where ``v`` holds anything else every comparison is unknown, so no condition is
    TRUE: the caller tests the number once, as an ``if``, with the tests inside it and every
    condition false outside it (card testing's ``amount < 100`` and ``amount > 400``: one type
    test an event instead of one per comparison).  Each test may raise OverflowError (a huge int
    against a float), as ``inline_conditions``' sources may.  None for any other conditions.
    ``floats``: the tests for a ``v`` that is a float, each integer constant a float holds exactly
    (at most 2**53 in magnitude) written as that float: the same truth, and a comparison of two
    floats (``cep.runtime.handler._number_block``)."""
    g = _Gen(access, [], const_prefix=const_prefix)
    reads: set[str] = set()  # the caller's names of the attributes read (one event: s1, s2 and big's amount)

    def test(e: ast.Expr, depth: int) -> str | None:
        if depth > _MAX_INLINE_DEPTH:
            return None
        if isinstance(e, (ast.And, ast.Or)):
            parts = [test(x, depth + 1) for x in _chain(e, type(e))]
            if None in parts:
                return None
            return "(" + (" and " if isinstance(e, ast.And) else " or ").join(parts) + ")"
        if isinstance(e, ast.Not):
            inner = test(e.operand, depth + 1)
            return None if inner is None else f"(not {inner})"
        if not isinstance(e, ast.Compare) or isinstance(e.left, ast.Attr) == isinstance(e.right, ast.Attr):
            return None  # (two attributes: ``a.x = a.x`` holds for strings too)
        sides = []
        for side in (e.left, e.right):
            if isinstance(side, ast.Attr):
                reads.add(name := g.attr(side))
                sides.append((name, _NUM))  # a number inside the caller's test
                continue
            ok, v = g.constant(side)
            if not ok or not _is_num_literal(v):
                return None
            if floats and type(v) is int and -_EXACT <= v <= _EXACT:
                v = float(v)
            sides.append(g.literal(v))
        parts = g.compare_src(e.op, *sides[0], *sides[1])
        assert isinstance(parts, tuple) and not parts[0], parts  # two numbers: no guard
        return parts[1]

    tests = [t for t in (test(e, 0) for e in exprs) if t is not None]
    if not tests or len(tests) != len(exprs) or len(reads) != 1 or g.cache or g.prologue:
        return None
    env = _env(g.consts)
    del env["__builtins__"]
    return reads.pop(), tests, env


def _compile(expr: ast.Expr, access: AccessFn, params: Sequence[str], mode: str,
             cache: dict | None = None, label: str = "expression") -> Callable:
    src, consts = _build(expr, access, params, mode, cache, label)
    return codegen.define(label, src, "_cond" if mode == "condition" else "_expr", _env(consts))


def compile_condition(expr: ast.Expr, access: AccessFn, params: Sequence[str],
                      label: str = "condition") -> Callable[..., bool]:
    """A function of ``params`` that returns True iff the condition is TRUE (3VL).

    ``label`` names the generated function in tracebacks (``cep.codegen``)."""
    return _compile(expr, access, params, "condition", label=label)


def compile_expr(expr: ast.Expr, access: AccessFn, params: Sequence[str],
                 label: str = "expression") -> Callable[..., Any]:
    """A function of ``params`` that returns the expression's value (None: null/unknown)."""
    return _compile(expr, access, params, "value", label=label)


# ------------------------------------------------------------- linear form

Term = tuple[str, str]


def _linear(e: ast.Expr) -> tuple[dict[Term, Any], Any] | None:
    """``e`` as (coefficients, constant), or None when it is not linear."""
    if isinstance(e, ast.Literal):
        if _is_num_literal(e.value):
            return {}, e.value
        return None
    if isinstance(e, ast.Attr):
        return {(e.alias, e.name): 1}, 0
    if isinstance(e, ast.Neg):
        r = _linear(e.operand)
        if r is None:
            return None
        return {k: -c for k, c in r[0].items()}, -r[1]
    if isinstance(e, ast.Arith):
        a = _linear(e.left)
        if a is None:
            return None
        b = _linear(e.right)
        if b is None:
            return None
        if e.op in ("+", "-"):
            s = 1 if e.op == "+" else -1
            coefs = dict(a[0])
            for k, c in b[0].items():
                coefs[k] = coefs.get(k, 0) + s * c
            return coefs, a[1] + s * b[1]
        if e.op == "*":
            if not a[0]:
                a, b = b, a
            if b[0]:
                return None  # product of two attributes
            k = b[1]
            return {t: c * k for t, c in a[0].items()}, a[1] * k
        if e.op == "/":
            if b[0] or not b[1]:
                return None
            k = b[1]
            return {t: _exact_div(c, k) for t, c in a[0].items()}, _exact_div(a[1], k)
        return None
    return None


def _exact_div(a, b):
    q = div(a, b)
    return q


def linear_form(cmp: ast.Compare) -> tuple[dict[Term, Any], Any, str] | None:
    """``left op right`` as ``sum(coef * attr) + const op 0``, or None if not linear.

    Both sides must be linear in attribute references with numeric literal
    coefficients (``b.price > a.price * 1.1``, ``y.ts - x.ts <= 60``).  Terms of
    the same attribute are merged and zero coefficients dropped.  The form is
    exact over numbers; over non-numbers the comparison is unknown, which the
    user of the form must handle (e.g. by not indexing such values).
    """
    if not isinstance(cmp, ast.Compare):
        return None
    a = _linear(cmp.left)
    if a is None:
        return None
    b = _linear(cmp.right)
    if b is None:
        return None
    coefs = dict(a[0])
    for k, c in b[0].items():
        coefs[k] = coefs.get(k, 0) - c
    coefs = {k: c for k, c in coefs.items() if c != 0}
    return coefs, a[1] - b[1], cmp.op
