"""Canonical pattern text from a syntax tree: the inverse of ``cep.lang.parser``.

Why: ``cep explain``, the compiler's predicate texts and the round-trip tests
need one printed form per tree.  Keywords are upper case, clauses come in a
fixed order (WHERE, PARTITION BY, WITHIN, EMIT, USING), operators are
normalized (``=``, ``!=``), and parentheses appear exactly where the tree's
shape needs them (binary operators associate to the left; comparisons do not
chain).

The property (tested with hypothesis): ``parse_text(format_pattern(p))[0] == p``
for every valid pattern ``p`` (phase-2 constructs with ``allow_phase2``).
EmitItem.text (an item's default output name) survives too: an item is
printed from its own text when that text, re-spaced, parses back to the same
expression (``x.a==1`` prints as ``x.a == 1``); otherwise it is printed in
canonical form, whose text is ``cep.lang.parser.item_text(format_expr(expr))``.
An item whose text is neither (a hand-built tree with an arbitrary text) keeps
its expression but not its text; give such items an ``AS`` name.
"""

from __future__ import annotations

from typing import Any

from cep.lang import ast
from cep.lazyre import lazy

_PREC_OR, _PREC_AND, _PREC_NOT, _PREC_CMP, _PREC_ADD, _PREC_MUL, _PREC_NEG, _PREC_ATOM = range(1, 9)


def format_literal(value: object) -> str:
    """A literal as pattern text (strings in single quotes, with backslash escapes)."""
    if value is None:
        return "NULL"
    if value is True:
        return "TRUE"
    if value is False:
        return "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    s = str(value)
    s = s.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f"'{s}'"


def _fmt(e: ast.Expr, min_prec: int) -> str:
    t = type(e)
    if t is ast.Attr:  # the leaves inline (cep check prints every filter: issue 12); a leaf
        return f"{e.alias}.{e.name}" if e.name else e.alias  # is never parenthesized
    if t is ast.Literal and type(e.value) is int:  # (bool is not int here)
        return str(e.value)
    if t is ast.Compare:  # (and the commonest inner nodes: one frame less per level of nesting)
        s = f"{_fmt(e.left, _PREC_ADD)} {e.op} {_fmt(e.right, _PREC_ADD)}"
        return f"({s})" if _PREC_CMP < min_prec else s
    if t is ast.And:
        s = f"{_fmt(e.left, _PREC_AND)} AND {_fmt(e.right, _PREC_NOT)}"
        return f"({s})" if _PREC_AND < min_prec else s
    if t is ast.Or:
        s = f"{_fmt(e.left, _PREC_OR)} OR {_fmt(e.right, _PREC_AND)}"
        return f"({s})" if _PREC_OR < min_prec else s
    f = _FORMAT.get(t)
    if f is None:
        raise TypeError(f"not an expression: {e!r}")
    s, prec = f(e)
    return f"({s})" if prec < min_prec else s


def _fmt_prec(e: ast.Expr) -> tuple[str, int]:
    f = _FORMAT.get(type(e))
    if f is None:
        raise TypeError(f"not an expression: {e!r}")
    return f(e)


def _literal(e: ast.Literal) -> tuple[str, int]:
    s = format_literal(e.value)
    return s, (_PREC_NEG if s.startswith("-") else _PREC_ATOM)


def _attr(e: ast.Attr) -> tuple[str, int]:
    return (f"{e.alias}.{e.name}" if e.name else e.alias), _PREC_ATOM


def _call(e: ast.Call) -> tuple[str, int]:
    return f"{e.name}({', '.join(_fmt(a, _PREC_OR) for a in e.args)})", _PREC_ATOM


def _neg(e: ast.Neg) -> tuple[str, int]:
    inner, prec = _fmt_prec(e.operand)
    number = isinstance(e.operand, ast.Literal) and isinstance(e.operand.value, (int, float))
    if prec < _PREC_NEG or inner.startswith("-") or number:
        # "-(5)" stays Neg(5) (a bare "-5" is the literal -5); "--" would start a comment
        inner = f"({inner})"
    return f"-{inner}", _PREC_NEG


def _arith(e: ast.Arith) -> tuple[str, int]:
    if e.op in "+-":
        return f"{_fmt(e.left, _PREC_ADD)} {e.op} {_fmt(e.right, _PREC_MUL)}", _PREC_ADD
    return f"{_fmt(e.left, _PREC_MUL)} {e.op} {_fmt(e.right, _PREC_NEG)}", _PREC_MUL


def _compare(e: ast.Compare) -> tuple[str, int]:
    return f"{_fmt(e.left, _PREC_ADD)} {e.op} {_fmt(e.right, _PREC_ADD)}", _PREC_CMP


def _in_list(e: ast.InList) -> tuple[str, int]:
    items = ", ".join(_fmt(i, _PREC_OR) for i in e.items)
    kw = "NOT IN" if e.negated else "IN"
    return f"{_fmt(e.operand, _PREC_ADD)} {kw} ({items})", _PREC_CMP


def _not(e: ast.Not) -> tuple[str, int]:
    return f"NOT {_fmt(e.operand, _PREC_NOT)}", _PREC_NOT


def _and(e: ast.And) -> tuple[str, int]:
    return f"{_fmt(e.left, _PREC_AND)} AND {_fmt(e.right, _PREC_NOT)}", _PREC_AND


def _or(e: ast.Or) -> tuple[str, int]:
    return f"{_fmt(e.left, _PREC_OR)} OR {_fmt(e.right, _PREC_AND)}", _PREC_OR


_FORMAT: dict[type, Any] = {
    ast.Literal: _literal, ast.Attr: _attr, ast.Call: _call, ast.Neg: _neg, ast.Arith: _arith,
    ast.Compare: _compare, ast.InList: _in_list, ast.Not: _not, ast.And: _and, ast.Or: _or,
}
"""The printer of each node type: one look-up per node (cep check prints every filter: issue 12)."""


def format_expr(e: ast.Expr) -> str:
    """Canonical text of an expression (parses back to an equal tree)."""
    if type(e) is ast.Compare:  # the commonest filter, ``a.x < 100``, without a frame per node
        left, right = e.left, e.right
        if type(left) is ast.Attr and left.name and type(right) is ast.Literal and type(right.value) is int:
            return f"{left.alias}.{left.name} {e.op} {right.value}"
    return _fmt(e, _PREC_OR)


def format_duration(d: ast.Duration) -> str:
    value = format_literal(d.value)
    return f"{value} {d.unit}" if d.unit else value


def format_quantifier(el: ast.Element) -> str:
    """``+``, ``{n}``, ``{n,}`` or ``{n,m}`` of a Kleene element."""
    lo, hi = format_literal(el.min_count), el.max_count
    if hi is None:
        return "+" if el.min_count == 1 else f"{{{lo},}}"
    return f"{{{lo}}}" if hi == el.min_count else f"{{{lo},{format_literal(hi)}}}"


def format_structure(s: ast.Structure) -> str:
    parts = []
    for el in s.elements:
        if el.kind == "nested":
            assert el.nested is not None
            parts.append(format_structure(el.nested))
        elif el.kind == "not":
            parts.append(f"NOT {el.type} {el.alias}")
        elif el.kind == "kleene":
            parts.append(f"{el.type}{format_quantifier(el)} {el.alias}")
        else:
            parts.append(f"{el.type} {el.alias}")
    return f"{s.op}({', '.join(parts)})"


_TOKEN_RE = lazy(
    r"""'(?:[^'\\\n]|\\.|'')*'|"(?:[^"\\\n]|\\.|"")*"|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\w+"""
    r"""|==|!=|<>|<=|>=|[-+*/%=<>(),.]|\S"""
)


def _respaced(text: str) -> str:
    """``text`` with a space between tokens (``x.a==1`` -> ``x.a == 1``)."""
    out = ""
    for tok in _TOKEN_RE.findall(text):
        if out and tok != "." and not out.endswith("."):
            out += " "
        out += tok
    return out


def _with_quotes_of(body: str, text: str) -> str:
    """``body`` with its string literals replaced, in order, by the literals written in ``text``."""
    written = iter(m.group() for m in _TOKEN_RE.finditer(text) if m.group()[0] in "'\"")
    return _TOKEN_RE.sub(lambda m: next(written, m.group()) if m.group()[0] in "'\"" else m.group(), body)


def format_item(item: ast.EmitItem) -> str:
    """One EMIT item, printed so that its text survives a round trip when it can."""
    if item.star is not None:
        return f"{item.star}.*"
    assert item.expr is not None
    from cep.errors import PatternError
    from cep.lang.parser import item_text, parse_expr

    body = format_expr(item.expr)
    if item_text(body) != item.text and item.text:
        # the user's own spelling, re-spaced; else the canonical form with the user's string
        # quotes (``a.s IN ("w")`` has the text ``a.sIN("w")``, which no re-spacing can split)
        for candidate in (_respaced(item.text), _with_quotes_of(body, item.text)):
            try:
                if item_text(candidate) == item.text and parse_expr(candidate) == item.expr:
                    body = candidate
                    break
            except PatternError:
                pass
    return f"{body} AS {item.name}" if item.name is not None else body


def format_pattern(p: ast.Pattern) -> str:
    """Canonical text of one pattern: ``PATTERN name``, the structure, one clause per line."""
    lines = [f"PATTERN {p.name}", f"  {format_structure(p.structure)}"]
    if p.where is not None:
        lines.append(f"  WHERE {format_expr(p.where)}")
    if p.partition_by:
        lines.append(f"  PARTITION BY {', '.join(p.partition_by)}")
    if p.within is not None:
        lines.append(f"  WITHIN {format_duration(p.within)}")
    if p.emit is not None:
        lines.append(f"  EMIT {', '.join(format_item(i) for i in p.emit)}")
    if p.using is not None:
        lines.append(f"  USING {p.using}")
    return "\n".join(lines) + "\n"


def format_patterns(patterns: list[ast.Pattern]) -> str:
    """Several patterns as one file's text, separated by blank lines."""
    return "\n".join(format_pattern(p) for p in patterns)
