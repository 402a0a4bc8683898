"""Parse ``.pattern`` text into checked syntax trees (``cep.lang.ast``).

Why this module exists: it is the only way pattern text enters the engine, so
it guarantees that whatever the input (any text, any bytes) the caller gets
either a list of checked ``ast.Pattern`` or a ``PatternError`` carrying every
problem of the file as located ``Diagnostic`` values, never a Lark exception
or a traceback.

Pipeline: Lark's LALR tables for ``grammar/pattern.lark`` (basic lexer, so a
keyword is always a keyword), run by ``cep.lang.lalr`` with the AST actions
of ``_Builder`` applied at each reduction (no parse tree: normalizes ``==`` to
``=``, ``<>`` to ``!=``, keyword case, duration units, folds ``-NUMBER`` into a
negative literal) -> ``cep.lang.checker`` semantic checks.  A text the table
loop rejects is parsed by Lark itself, whose exception locates the syntax error.

Error recovery: when the whole text does not parse, it is split before every
``PATTERN`` keyword (outside strings and comments) and each piece is parsed on
its own, so several broken patterns give several syntax errors and the good
patterns are still checked.

Warnings never raise.  ``parse_text_with_warnings`` returns them (``parse_text``
and ``parse_file`` are for callers that do not show warnings).  When errors are
raised, the warnings are in the same ``PatternError`` (severity ``"warning"``).
If every error is a section-7 construct the exception is a ``NotSupportedYet``.
The language is described for users in docs/language.md.

Limits: expressions and structures nest at most ``MAX_DEPTH`` levels (deeper
nesting is an error, so no later recursive pass can exhaust the stack).
"""

from __future__ import annotations

import math
import os
import re
from importlib import resources
from itertools import accumulate
from pathlib import Path
from typing import Any

from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from cep.errors import Diagnostic, NotSupportedYet, PatternError
from cep.lang import ast
from cep.lang.checker import STRATEGIES, Issue, check_pattern
from cep.lang.grammar_cache import lark_cache
from cep.lang.lalr import Rejected, TableParser, walk_tree
from cep.lang.suggest import hint
from cep.units import DURATION_UNITS, UNIT_HELP, canonical_unit


def grammar_text() -> str:
    """The grammar, read from the ``cep.grammar`` package data (works from a wheel)."""
    return resources.files("cep.grammar").joinpath("pattern.lark").read_text(encoding="utf-8")


MAX_DEPTH = 200

KEYWORDS = frozenset(
    "PATTERN SEQ AND OR NOT IN WHERE PARTITION BY WITHIN EMIT AS USING TRUE FALSE NULL".split()
)

CLAUSE_NAMES = {
    "where": "WHERE",
    "partition": "PARTITION BY",
    "within": "WITHIN",
    "emit": "EMIT",
    "using": "USING",
}

_LARK: Lark | None = None


def _lark() -> Lark:
    global _LARK
    if _LARK is None:
        _LARK = Lark(
            grammar_text(),
            parser="lalr",
            lexer="basic",
            start=["start", "expr_only"],
            propagate_positions=True,
            maybe_placeholders=False,
            cache=lark_cache(),  # LALR tables in a private per-user dir: CLI start-up ~5x faster
        )
    return _LARK


# ----------------------------------------------------------------- text helpers

_TEXT_RE = re.compile(r"""'(?:[^'\\\n]|\\.|'')*'|"(?:[^"\\\n]|\\.|"")*"|(?:--|\#)[^\n]*|\s+|[^'"\s\#-]+|.""")


def item_text(source: str) -> str:
    """An EMIT item's text (its default output name): the source without whitespace.

    Whitespace inside string literals is kept (it is data), comments are
    dropped and keywords are upper-cased (``x.a in (1)`` -> ``x.aIN(1)``, but
    ``x.in`` stays: a word after ``.`` is an attribute); everything else is
    kept as written (``x.a==1`` stays ``x.a==1``).
    """
    out: list[str] = []
    for m in _TEXT_RE.finditer(source):
        t = m.group()
        if t.isspace() or t.startswith(("--", "#")):
            continue
        if t[0] not in "'\"" and not (out and out[-1].endswith(".")):
            t = _WORD_RE.sub(_upper_keyword, t)
        out.append(t)
    return "".join(out)


_WORD_RE = re.compile(r"(?<![.\w])\w+")
_PLAIN_ATTR_RE = re.compile(r"\w+\.\w+")  # an attribute item without blanks: item_text leaves it as it is


def _upper_keyword(m: re.Match) -> str:
    w = m.group()
    return w.upper() if w.upper() in KEYWORDS else w


_SPLIT_RE = re.compile(
    r"""(?:--|\#)[^\n]*|'(?:[^'\\\n]|\\.|'')*'?|"(?:[^"\\\n]|\\.|"")*"?|\.\s*\w*"""
    r"""|(?P<kw>(?<!\w)pattern(?!\w))|\w+|[^\w'"\#.-]+|.""",
    re.IGNORECASE,
)
_TRIVIA_RE = re.compile(r"(?:\s+|(?:--|#)[^\n]*)*")


def _pattern_starts(text: str) -> list[int]:
    return [m.start() for m in _SPLIT_RE.finditer(text) if m.group("kw")]


def _printable(s: str, limit: int = 40) -> str:
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)
    return s if len(s) <= limit else s[: limit - 3] + "..."


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}
_ESC_RE = {q: re.compile(r"\\(.)|" + q + q, re.DOTALL) for q in "'\""}


def _unescape(token: str) -> str:
    """A string token's value: backslash escapes, and a doubled quote as in SQL (``'it''s'``)."""
    q = token[0]
    return _ESC_RE[q].sub(
        lambda m: q if m.group(1) is None else _ESCAPES.get(m.group(1), "\\" + m.group(1)), token[1:-1]
    )


# --------------------------------------------------------------- syntax errors

_EXPR_START = {"NAME", "NUMBER", "STRING", "TRUE", "FALSE", "NULL", "LPAR", "MINUS", "NOT"}
_OPERATORS = {"PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "COMPOP", "IN", "NOT", "AND", "OR"}
_CLAUSES = ["WHERE", "PARTITION", "WITHIN", "EMIT", "USING"]
_NAME_LIKE_KEYWORDS = KEYWORDS - {"PATTERN", *_CLAUSES}  # (a clause keyword there is more likely a typo)
_TERMINAL_TEXT = {
    "NAME": "a name",
    "NUMBER": "a number",
    "STRING": "a string",
    "COMPOP": "a comparison operator",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "DOT": "'.'",
    "STAR": "'*'",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "$END": "end of input",
}
_ORDER = [
    "NAME", "NUMBER", "STRING", "LPAR", "COMMA", "RPAR", "DOT", "STAR", "PLUS", "MINUS", "SLASH",
    "PERCENT", "COMPOP", *sorted(KEYWORDS), "$END",
]  # fmt: skip


def _join(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def describe_expected(expected: set[str]) -> str:
    """Human text for a set of Lark terminal names (``an expression``, ``')'``, ...)."""
    exp = set(expected)
    parts: list[str] = []
    if {"NUMBER", "STRING"} <= exp:
        parts.append("an expression")
        exp -= _EXPR_START
    if len(exp & _OPERATORS) >= 3:
        parts.append("an operator")
        exp -= _OPERATORS
    clauses = [c for c in _CLAUSES if c in exp]
    if len(clauses) >= 2:
        parts.append("a clause (" + ", ".join(CLAUSE_NAMES[c.lower()] for c in clauses) + ")")
        exp -= set(clauses)
    rest = sorted(exp, key=lambda t: (_ORDER.index(t) if t in _ORDER else len(_ORDER), t))
    parts.extend(_TERMINAL_TEXT.get(t, t) for t in rest)
    # end of input reads best last
    if "end of input" in parts:
        parts.remove("end of input")
        parts.append("end of input")
    return _join(parts) or "nothing more"


def _syntax_issue(e: UnexpectedInput, text: str) -> Issue:
    if isinstance(e, UnexpectedToken):
        tok = e.token
        try:
            expected = set(e.interactive_parser.accepts())
        except Exception:  # pragma: no cover - accepts() is best effort
            expected = set(e.expected)
        if tok.type == "$END":
            line = tok.end_line or tok.line or 1
            col = tok.end_column or tok.column or 1
            return Issue(ast.Loc(line, col), f"expected {describe_expected(expected)}, found end of input")
        found = f"'{_printable(str(tok))}'"
        msg = f"expected {describe_expected(expected)}, found {found}"
        if tok.type == "NAME":
            keywords = [t for t in expected if t in KEYWORDS]
            msg += hint(str(tok), keywords, cutoff=0.7)
        elif tok.type in _NAME_LIKE_KEYWORDS and "NAME" in expected and "NUMBER" not in expected:
            msg += " (a keyword cannot be used as a name)"
        return Issue(ast.Loc(tok.line or 1, tok.column or 1, tok.end_line or 0, tok.end_column or 0), msg)
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if 0 <= e.pos_in_stream < len(text) else ""
        loc = ast.Loc(e.line or 1, e.column or 1)
        if ch in ("'", '"'):
            return Issue(loc, "unterminated string")
        if ch.isdigit():
            return Issue(loc, f"unexpected character '{_printable(ch)}' (numbers are written with the "
                              "ASCII digits 0-9)")
        return Issue(loc, f"unexpected character '{_printable(ch)}'")
    line = getattr(e, "line", 1) or 1
    col = getattr(e, "column", 1) or 1
    return Issue(ast.Loc(line, col), "syntax error")  # pragma: no cover - no other kinds


# ----------------------------------------------------------------- AST builder

_COMPOPS = {"==": "=", "<>": "!=", "=": "=", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


class _Builder:
    """The actions that turn each rule's children into AST values (``cep.lang.lalr`` calls them).

    ``kids`` are the rule's children as Lark's tree would hold them: a token
    is its index in the token lists ``tokens`` gives (text ``T``, kind ``K``,
    line ``L``, column ``C``, end line ``EL``, end column ``E``), a node an entry ``(value, kind, first token,
    last token, depth)``; ``loc`` is the node's own location.
    """

    max_depth = MAX_DEPTH

    def __init__(self, text: str, filename: str) -> None:
        self.text = text
        self.file = filename
        self.issues: list[Issue] = []
        self.name_locs: dict[int, ast.Loc] = {}
        self._line_starts: list[int] | None = None

    def tokens(self, T: list, K: list, L: list, C: list, EL: list, E: list) -> None:
        """The token lists the children's indices point into (``cep.lang.lalr`` fills them)."""
        self.T, self.K, self.L, self.C, self.EL, self.E = T, K, L, C, EL, E

    def source(self, first: int, last: int) -> str:
        """The text from token ``first``'s start to token ``last``'s end."""
        if self._line_starts is None:
            self._line_starts = [0, *accumulate(map((1).__add__, map(len, self.text.split("\n"))))]
        starts = self._line_starts
        return self.text[starts[self.L[first] - 1] + self.C[first] - 1 : starts[self.EL[last] - 1] + self.E[last] - 1]

    def tok_loc(self, k: int) -> ast.Loc:
        """Token ``k``'s location."""
        return tuple.__new__(ast.Loc, (self.L[k], self.C[k], self.EL[k], self.E[k]))

    def error(self, loc: ast.Loc, msg: str) -> None:
        self.issues.append(Issue(loc, msg))

    def too_deep(self, loc: ast.Loc) -> None:
        self.error(loc, f"nested too deeply (more than {MAX_DEPTH} levels)")

    # --------------------------------------------------------------- patterns
    def b_start(self, kids: list, loc: ast.Loc) -> list[ast.Pattern]:
        return [k[0] for k in kids]

    def b_expr_only(self, kids: list, loc: ast.Loc) -> ast.Expr:
        return kids[0][0]

    def b_pattern(self, kids: list, loc: ast.Loc) -> ast.Pattern:
        _kw, name, structure, *clauses = kids
        got: dict[str, object] = {}
        first: dict[str, ast.Loc] = {}
        for clause in clauses:
            kind, kw, value = clause[0]
            kw_loc = self.tok_loc(kw)
            if kind in first:
                f = first[kind]
                self.error(
                    kw_loc,
                    f"{CLAUSE_NAMES[kind]} clause is given twice (first at line {f.line}, col {f.col})",
                )
                continue
            first[kind] = kw_loc
            got[kind] = value
        partition = got.get("partition", ((), ()))
        p = ast.Pattern(
            name=self.T[name],
            structure=structure[0],
            where=got.get("where"),  # type: ignore[arg-type]
            partition_by=partition[0],  # type: ignore[index]
            within=got.get("within"),  # type: ignore[arg-type]
            emit=got.get("emit"),  # type: ignore[arg-type]
            using=got.get("using"),  # type: ignore[arg-type]
            loc=loc,
            file=self.file,
            partition_locs=partition[1],  # type: ignore[index]
            using_loc=first.get("using", ast.NOLOC),
        )
        self.name_locs[id(p)] = self.tok_loc(name)
        return p

    def b_structure(self, kids: list, loc: ast.Loc) -> ast.Structure:
        op, *elements = kids
        return ast.Structure(self.T[op].upper(), tuple(e[0] for e in elements), loc)

    def b_el_event(self, kids: list, loc: ast.Loc) -> ast.Element:
        t, a = kids
        T = self.T
        return ast.Element(T[t], T[a], "event", None, loc, tuple.__new__(ast.Loc, (self.L[a], self.C[a], self.EL[a],
                                                                                   self.E[a])))

    def b_el_not(self, kids: list, loc: ast.Loc) -> ast.Element:
        return ast.Element(self.T[kids[1]], self.T[kids[2]], "not", None, loc, self.tok_loc(kids[2]))

    def b_el_kleene(self, kids: list, loc: ast.Loc) -> ast.Element:
        return ast.Element(self.T[kids[0]], self.T[kids[2]], "kleene", None, loc, self.tok_loc(kids[2]))

    def _quantified(self, kids: list, loc: ast.Loc, lo: int, hi: int | None, bounded: bool) -> ast.Element:
        alias = kids[-1]
        low = self.number(lo)
        high = (self.number(hi) if hi is not None else low) if bounded else None
        return ast.Element(self.T[kids[0]], self.T[alias], "kleene", None, loc, self.tok_loc(alias), low, high)

    def b_el_exactly(self, kids: list, loc: ast.Loc) -> ast.Element:
        return self._quantified(kids, loc, kids[1], None, True)

    def b_el_at_least(self, kids: list, loc: ast.Loc) -> ast.Element:
        return self._quantified(kids, loc, kids[1], None, False)

    def b_el_between(self, kids: list, loc: ast.Loc) -> ast.Element:
        return self._quantified(kids, loc, kids[1], kids[2], True)

    def b_el_nested(self, kids: list, loc: ast.Loc) -> ast.Element:
        s = kids[0][0]
        return ast.Element("", "", "nested", s, s.loc, ast.NOLOC)

    # ---------------------------------------------------------------- clauses
    def b_where_clause(self, kids: list, loc: ast.Loc):
        return ("where", kids[0], kids[1][0])

    def b_partition_clause(self, kids: list, loc: ast.Loc):
        names = kids[2:]
        return ("partition", kids[0], (tuple(self.T[n] for n in names), tuple(self.tok_loc(n) for n in names)))

    def b_within_clause(self, kids: list, loc: ast.Loc):
        return ("within", kids[0], kids[1][0])

    def b_emit_clause(self, kids: list, loc: ast.Loc):
        return ("emit", kids[0], tuple(k[0] for k in kids[1:]))

    def b_using_clause(self, kids: list, loc: ast.Loc):
        name = self.T[kids[1]]
        if name.lower() not in STRATEGIES:
            self.error(
                self.tok_loc(kids[1]),
                f"unknown strategy '{name}'{hint(name, STRATEGIES)}; use " + _join(list(STRATEGIES)),
            )
        return ("using", kids[0], name.lower())

    def b_duration(self, kids: list, loc: ast.Loc) -> ast.Duration:
        negative = self.K[kids[0]] == "MINUS"
        toks = kids[1:] if negative else kids
        value = self.number(toks[0])
        if negative:
            value = -value
        unit = None
        if len(toks) > 1:
            u = self.T[toks[1]]
            unit = canonical_unit(u)
            if unit is None:
                self.error(
                    self.tok_loc(toks[1]),
                    f"unknown duration unit '{u}'{hint(u, DURATION_UNITS)}; use {UNIT_HELP}",
                )
        return ast.Duration(value, unit, loc)

    def b_item_expr(self, kids: list, loc: ast.Loc) -> ast.EmitItem:
        src = kids[0]
        text = self.source(src[2], src[3])
        if src[1] != "attr" or _PLAIN_ATTR_RE.fullmatch(text) is None:  # (`a.b` as written is its own text)
            text = item_text(text)
        name = self.T[kids[2]] if len(kids) == 3 else None
        return ast.EmitItem(src[0], name, text, None, loc)

    def b_item_star(self, kids: list, loc: ast.Loc) -> ast.EmitItem:
        alias = self.T[kids[0]]
        return ast.EmitItem(None, None, f"{alias}.*", alias, loc)

    # ------------------------------------------------------------ expressions
    def number(self, tok: int) -> int | float:
        s = self.T[tok]
        try:
            v: int | float = int(s) if s.isdigit() else float(s)
        except ValueError:
            v = math.inf
        if isinstance(v, float) and not math.isfinite(v):
            self.error(self.tok_loc(tok), f"number out of range: {_printable(s)}")
            return 0
        return v

    def b_number(self, kids: list, loc: ast.Loc) -> ast.Literal:
        return ast.Literal(self.number(kids[0]), loc)

    def b_string(self, kids: list, loc: ast.Loc) -> ast.Literal:
        return ast.Literal(_unescape(self.T[kids[0]]), loc)

    def b_true(self, kids: list, loc: ast.Loc) -> ast.Literal:
        return ast.Literal(True, loc)

    def b_false(self, kids: list, loc: ast.Loc) -> ast.Literal:
        return ast.Literal(False, loc)

    def b_null(self, kids: list, loc: ast.Loc) -> ast.Literal:
        return ast.Literal(None, loc)

    def b_attr(self, kids: list, loc: ast.Loc) -> ast.Attr:
        return ast.Attr(self.T[kids[0]], kids[1][0], loc)

    def b_attr_name(self, kids: list, loc: ast.Loc) -> str:
        return self.T[kids[0]]

    def b_bare(self, kids: list, loc: ast.Loc) -> ast.Attr:
        return ast.Attr(self.T[kids[0]], "", loc)

    def b_call(self, kids: list, loc: ast.Loc) -> ast.Call:
        return ast.Call(self.T[kids[0]].lower(), tuple(k[0] for k in kids[1:]), loc)

    def b_paren(self, kids: list, loc: ast.Loc) -> ast.Expr:
        return kids[0][0]

    def b_neg(self, kids: list, loc: ast.Loc) -> ast.Expr:
        operand, kind = kids[1][0], kids[1][1]
        if kind == "number" and isinstance(operand, ast.Literal):
            return ast.Literal(-operand.value, loc)  # type: ignore[operator]
        return ast.Neg(operand, loc)

    def b_arith(self, kids: list, loc: ast.Loc) -> ast.Arith:
        return ast.Arith(self.T[kids[1]], kids[0][0], kids[2][0], loc)

    def b_compare(self, kids: list, loc: ast.Loc) -> ast.Compare:
        return ast.Compare(_COMPOPS[self.T[kids[1]]], kids[0][0], kids[2][0], loc)

    def b_in_list(self, kids: list, loc: ast.Loc) -> ast.InList:
        return ast.InList(kids[0][0], tuple(k[0] for k in kids[2:]), False, loc)

    def b_not_in_list(self, kids: list, loc: ast.Loc) -> ast.InList:
        return ast.InList(kids[0][0], tuple(k[0] for k in kids[3:]), True, loc)

    def b_not_(self, kids: list, loc: ast.Loc) -> ast.Not:
        return ast.Not(kids[1][0], loc)

    def b_and_(self, kids: list, loc: ast.Loc) -> ast.And:
        return ast.And(kids[0][0], kids[2][0], loc)

    def b_or_(self, kids: list, loc: ast.Loc) -> ast.Or:
        return ast.Or(kids[0][0], kids[2][0], loc)


# ------------------------------------------------------------------ the driver


def _padded(text: str, start: int) -> str:
    """``text[start:]`` preceded by blanks so Lark reports the original line and column."""
    line0 = text.rfind("\n", 0, start) + 1
    return "\n" * text.count("\n", 0, start) + " " * (start - line0) + text[start:]


_TABLES: TableParser | None = None


def _tables() -> TableParser:
    global _TABLES
    if _TABLES is None:
        _TABLES = TableParser(_lark(), segments=frozenset(["PATTERN", *_CLAUSES]))
    return _TABLES


def _parse(text: str, start: str, filename: str) -> tuple[Any, _Builder]:
    """``(value, builder)`` of ``text`` from rule ``start``; raises Lark's ``UnexpectedInput``.

    The table loop (``cep.lang.lalr``) parses; a text it rejects is parsed by
    Lark itself, which raises the located error (or, should the two ever
    disagree, builds the tree the same actions then walk).
    """
    b = _Builder(text, filename)
    try:
        return _tables().parse(text, start, b), b
    except Rejected:
        pass
    tree = _lark().parse(text, start=start)
    b = _Builder(text, filename)
    return walk_tree(tree, b), b


def _parse_patterns(text: str, filename: str) -> tuple[list[ast.Pattern], list[Issue], dict[int, ast.Loc]]:
    try:
        patterns, b = _parse(text, "start", filename)
    except UnexpectedInput as first_error:
        return _recover(text, filename, first_error)
    return patterns, b.issues, b.name_locs


MAX_SYNTAX_ERRORS_PER_PATTERN = 5

_CLAUSE_SPLIT_RE = re.compile(
    r"""(?:--|\#)[^\n]*|'(?:[^'\\\n]|\\.|'')*'?|"(?:[^"\\\n]|\\.|"")*"?|\.\s*\w*"""
    r"""|(?P<kw>(?<!\w)(?:where|partition|within|emit|using)(?!\w))|\w+|[^\w'"\#.-]+|.""",
    re.IGNORECASE,
)


def _failing_clause(piece: str, err: UnexpectedInput) -> tuple[int, int, int] | None:
    """``(start, end, error position)`` of the clause that holds a syntax error, or None.

    The rest of the pattern can be parsed and checked without it, so each
    broken clause gives its own error.  An error before the first clause (in
    the structure) cannot be skipped.
    """
    if isinstance(err, UnexpectedToken):
        pos = len(piece) if err.token.type == "$END" else (err.token.start_pos or 0)
    elif isinstance(err, UnexpectedCharacters):
        pos = err.pos_in_stream
    else:  # pragma: no cover
        return None
    starts = [m.start() for m in _CLAUSE_SPLIT_RE.finditer(piece) if m.group("kw")]
    before = [st for st in starts if st < pos]
    if not before:
        return None
    start = before[-1]
    end = next((st for st in starts if st >= pos and st > start), len(piece))
    return start, end, pos


def _blank(piece: str, start: int, end: int) -> str:
    """Spaces over ``piece[start:end]``, newlines kept (so positions do not move)."""
    return piece[:start] + re.sub(r"[^\n]", " ", piece[start:end]) + piece[end:]


def _recover(text: str, filename: str, first_error: UnexpectedInput):
    """Parse each ``PATTERN`` piece on its own so every broken pattern is reported."""
    starts = _pattern_starts(text)
    pieces: list[tuple[int, int]] = []
    if not starts:
        pieces.append((0, len(text)))
    else:
        if _TRIVIA_RE.fullmatch(text, 0, starts[0]) is None:
            pieces.append((0, starts[0]))
        pieces.extend(zip(starts, starts[1:] + [len(text)], strict=True))
    patterns: list[ast.Pattern] = []
    issues: list[Issue] = []
    name_locs: dict[int, ast.Loc] = {}
    syntax_errors = 0
    for s, e in pieces:
        b = None
        piece = _padded(text[:e], s)
        follow_on = -1  # a clause keyword that stood where an error was: maybe no clause at all
        for _attempt in range(MAX_SYNTAX_ERRORS_PER_PATTERN):
            try:
                found, b = _parse(piece, "start", filename)
                break
            except UnexpectedInput as err:
                clause = _failing_clause(piece, err)
                if clause is None or clause[0] != follow_on:  # (`AS within`: one error, not two)
                    issues.append(_syntax_issue(err, piece))
                    syntax_errors += 1
                if clause is None:
                    break
                start, end, follow_on = clause
                piece = _blank(piece, start, end)
        if b is None:
            continue
        patterns.extend(found)
        issues.extend(b.issues)
        name_locs.update(b.name_locs)
    if syntax_errors == 0:  # splitting hid the error: report the whole-text one
        issues.append(_syntax_issue(first_error, text))
    return patterns, issues, name_locs


def _diagnostics(
    text: str, filename: str, issues: list[Issue]
) -> tuple[list[Diagnostic], list[Diagnostic], bool]:
    lines = text.split("\n")
    diags: list[tuple[Diagnostic, bool]] = []
    for i in sorted(issues, key=lambda i: (i.loc.line, i.loc.col)):
        src = lines[i.loc.line - 1].rstrip("\r") if 1 <= i.loc.line <= len(lines) else ""
        diags.append((Diagnostic(filename, ast.Loc(i.loc.line, i.loc.col), i.message, i.severity, src), i.phase2))
    errors = [d for d, _ in diags if d.severity == "error"]
    only_phase2 = bool(errors) and all(p for d, p in diags if d.severity == "error")
    return [d for d, _ in diags], errors, only_phase2


def decode(data: bytes, filename: str = "<pattern>") -> str:
    """UTF-8 (a BOM is allowed) to text; undecodable bytes are a ``PatternError``."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise PatternError(
            [Diagnostic(filename, ast.Loc(line, col), f"not valid UTF-8 (byte 0x{data[e.start]:02x})")]
        ) from None


def parse_text_with_warnings(
    text: str | bytes, filename: str = "<pattern>", *, allow_phase2: bool = False
) -> tuple[list[ast.Pattern], list[Diagnostic]]:
    """Parse and check a pattern file's text: ``(patterns, warnings)``.

    Raises ``PatternError`` (or ``NotSupportedYet`` when every error is a
    phase-2 construct) carrying every diagnostic of the text, warnings
    included.  ``allow_phase2`` accepts the phase-2 constructs (for the
    printer and its tests; the compiler rejects them).
    """
    if isinstance(text, (bytes, bytearray)):
        text = decode(bytes(text), filename)
    try:
        patterns, issues, name_locs = _parse_patterns(text, filename)
        first_name: dict[str, ast.Loc] = {}
        for p in sorted(patterns, key=lambda p: (p.loc.line, p.loc.col)):
            loc = name_locs.get(id(p), p.loc)
            if p.name in first_name:
                f = first_name[p.name]
                issues.append(Issue(loc, f"pattern '{p.name}' is defined twice (first at line {f.line})"))
            else:
                first_name[p.name] = loc
            issues.extend(check_pattern(p, allow_phase2))
    except RecursionError:
        raise PatternError(
            [Diagnostic(filename, ast.Loc(1, 1), f"nested too deeply (more than {MAX_DEPTH} levels)")]
        ) from None
    diags, errors, only_phase2 = _diagnostics(text, filename, issues)
    if errors:
        raise (NotSupportedYet if only_phase2 else PatternError)(diags)
    return patterns, diags


def parse_text(text: str | bytes, filename: str = "<pattern>", *, allow_phase2: bool = False) -> list[ast.Pattern]:
    """Parse and check a pattern file's text, without its warnings (``parse_text_with_warnings``)."""
    return parse_text_with_warnings(text, filename, allow_phase2=allow_phase2)[0]


def read_pattern_file(path: str | os.PathLike) -> str:
    """A pattern file's text; unreadable or undecodable files are a ``PatternError``."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise PatternError([Diagnostic(str(path), ast.Loc(1, 1), f"cannot read file: {e.strerror or e}")]) from None
    return decode(data, str(path))


def parse_file(path: str | os.PathLike, *, allow_phase2: bool = False) -> list[ast.Pattern]:
    """Parse and check one ``.pattern`` file (``parse_text`` with the path as file name)."""
    return parse_text(read_pattern_file(path), str(path), allow_phase2=allow_phase2)


def parse_expr(text: str) -> ast.Expr:
    """Parse one expression (no semantic checks); syntax errors are a ``PatternError``."""
    try:
        e, b = _parse(text, "expr_only", "<expr>")
    except UnexpectedInput as err:
        i = _syntax_issue(err, text)
        raise PatternError([Diagnostic("<expr>", i.loc, i.message)]) from None
    if b.issues:
        raise PatternError([Diagnostic("<expr>", i.loc, i.message) for i in b.issues])
    return e
