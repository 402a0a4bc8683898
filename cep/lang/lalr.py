"""Run Lark's LALR tables over a pattern text without building a parse tree.

Why: ``cep check`` on 10,000 patterns spent most of its time in Lark's parse
loop, which makes a ``Token`` object per token, a ``Tree`` per rule and then
hands the tree to a second pass (issue 12).  Lark still owns the language: the
grammar is ``grammar/pattern.lark``, Lark computes the LALR tables and the
lexer's regular expression from it, and Lark parses every text this module
rejects, so syntax errors are Lark's exceptions as before.  What runs here is
the loop: one ``re`` scan with Lark's own combined terminal regex, the
shift/reduce loop over Lark's own tables, and at each reduction a call to the
builder's action for that rule (``b_<rule name or alias>``), the way Lark's
tree builder would have shaped its children (anonymous tokens filtered out,
``?rule`` with one child passed through, ``_rule`` lists spliced into their
parent).

Values travel as *entries*, plain tuples ``(kind, value, line, col, end_line,
end_col, start_pos, end_pos, depth)``: for a token ``kind`` is its terminal and
``value`` its text; for a rule ``kind`` is the rule's alias (or name) and
``value`` what its action returned; ``depth`` is the node's depth in the tree
Lark would have built (tokens 0).  The positions are those Lark's
``propagate_positions`` gives; an action gets its node's as a ready
``cep.lang.ast.Loc`` (every AST node holds one, so the loop builds it once,
without a helper call per node).  A node whose children reach ``builder.max_depth``
is reported once through ``builder.too_deep(loc)``: the one Lark's tree walked
from the right meets first (the deepest-reaching node that starts last).
``walk_tree`` feeds the same actions from a
Lark tree: the fallback when this loop rejects a text Lark accepts (it should
not happen; the tests compare both on many texts).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from lark import Lark, Token, Tree
from lark.parsers.lalr_analysis import Shift

from cep.lang.ast import Loc

Entry = tuple  # (kind, value, line, col, end_line, end_col, start_pos, end_pos, depth)
Action = Callable[[list, Loc], Any]


class Rejected(Exception):
    """The text is not in the language (Lark's parse gives the located error)."""


def _token_regex(terminals: list, ignore: frozenset[str]) -> re.Pattern:
    """One match per token: the ignored terminals (blanks, comments) skipped in front of it.

    Lark's lexer tries its terminals in order at each position, one match per
    token or blank; here the ignored ones are skipped first, then the others
    are tried in Lark's order (``_END`` matches the end of the text).  That
    picks the same token as long as no terminal that is not ignored can match
    where an ignored one does, true of this grammar (blanks, ``--`` and ``#``
    start no token) and checked by the tests against Lark's lexer.
    """
    skip = "|".join(_uncaptured(t.pattern.to_regexp()) for t in terminals if t.name in ignore)
    tokens = "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in terminals if t.name not in ignore)
    return re.compile(f"(?:{skip})*+(?:{tokens}|(?P<_END>\\Z))")  # (*+: no backtracking into blanks)


def _uncaptured(regex: str) -> str:
    """``regex`` with its capturing groups made non-capturing.

    (Python 3.11's ``re`` misreports a group captured inside a possessive
    repeat, so the skipped terminals must have none.)
    """
    out: list[str] = []
    i, in_class = 0, False
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            out.append(regex[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if regex[i + 1 : i + 2] == "]":  # (a leading ] is a member)
                out.append("[]")
                i += 2
                continue
        elif c == "(" and regex[i + 1 : i + 2] != "?":
            c = "(?:"
        out.append(c)
        i += 1
    result = "".join(out)
    if re.compile(result).groups:
        raise ValueError(f"cannot make {regex!r} non-capturing")
    return result


class _Rule:
    __slots__ = ("size", "origin", "name", "include", "splice", "unit", "plain")

    def __init__(self, rule: Any) -> None:
        self.size = len(rule.expansion)
        self.origin = rule.origin.name
        self.name = rule.alias or rule.origin.name
        # which children Lark keeps, and which are `_rule` lists spliced into this node
        self.include = tuple(
            (i, (not s.is_term) and s.name.startswith("_"))
            for i, s in enumerate(rule.expansion)
            if rule.options.keep_all_tokens or not (s.is_term and s.filter_out)
        )
        self.splice = self.origin.startswith("_")
        # `?rule: other` (one kept child, no alias): the child stands for the rule
        self.unit = bool(rule.options.expand1) and not rule.alias
        if self.unit and (self.size != 1 or len(self.include) != 1):
            raise ValueError(f"rule {rule} is not a plain `?rule: other` step")
        # every child kept as it is: the children are the popped entries themselves
        self.plain = self.include == tuple((i, False) for i in range(self.size))


class TableParser:
    """Lark's LALR(1) tables and terminal regex, driven by a plain loop (see the module doc)."""

    def __init__(self, lark: Lark) -> None:
        frontend = lark.parser
        table = frontend.parser.parser.parse_table
        lexer = frontend.lexer
        scanner = lexer.scanner
        if len(scanner._mres) != 1 or lexer.callback:
            raise ValueError("the grammar's terminals do not fit one regex without callbacks")
        self._regex = _token_regex(scanner.terminals, lexer.ignore_types)
        self._newline_types = frozenset(lexer.newline_types) - lexer.ignore_types
        rules: dict[Any, int] = {}
        self._rules: list[_Rule] = []
        self._states: list[dict[str, int]] = [{} for _ in range(max(table.states) + 1)]
        for state, actions in table.states.items():
            row: dict[str, int] = {}
            for symbol, (action, arg) in actions.items():
                if action is Shift:
                    row[symbol] = arg
                else:
                    if arg not in rules:
                        rules[arg] = len(self._rules)
                        self._rules.append(_Rule(arg))
                    row[symbol] = -1 - rules[arg]
            self._states[state] = row
        self._units: dict[tuple[int, int, str], int] = {}
        self._start = dict(table.start_states)
        self._end = dict(table.end_states)

    def parse(self, text: str, start: str, builder: object) -> Any:
        """The value of ``start`` for ``text`` (actions ``builder.b_<rule>``), or ``Rejected``."""
        actions = [None if r.unit or r.splice else getattr(builder, "b_" + r.name) for r in self._rules]
        rules = self._rules
        states = self._states
        units = self._units
        newline_types = self._newline_types  # (the terminals a newline can be part of)
        count = text.count
        rfind = text.rfind
        ss = [self._start[start]]  # states
        vs: list[Entry] = []  # entries, one per state above the first
        end_state = self._end[start]
        max_depth = builder.max_depth  # type: ignore[attr-defined]
        deepest: list[tuple[int, Loc]] = []  # (start_pos, loc) of each node whose children reach max_depth
        line, line_start, pos = 1, 0, 0
        match = self._regex.scanner(text).match  # each match starts where the last one ended
        new_tuple = tuple.__new__  # (a Loc without the call of its __new__)
        while True:
            m = match()
            if m is None:
                raise Rejected
            kind = m.lastgroup
            i = m.lastindex
            start_pos, end_pos = m.span(i)
            if kind == "_END":
                kind = "$END"
                tok = None
            else:
                if start_pos != pos:  # blanks and comments skipped
                    n = count("\n", pos, start_pos)
                    if n:
                        line += n
                        line_start = rfind("\n", 0, start_pos) + 1
                col = start_pos - line_start + 1
                tok_line = line
                if kind in newline_types:
                    n = count("\n", start_pos, end_pos)
                    if n:
                        line += n
                        line_start = rfind("\n", 0, end_pos) + 1
                tok = (kind, m.group(i), tok_line, col, line, end_pos - line_start + 1, start_pos, end_pos, 0)
            pos = end_pos
            while True:
                top = ss[-1]
                act = states[top].get(kind)  # type: ignore[arg-type]
                if act is None:
                    raise Rejected
                if act >= 0:
                    if tok is None:
                        raise Rejected
                    ss.append(act)
                    vs.append(tok)
                    break
                rule = rules[-1 - act]
                if rule.unit:  # a chain of `?rule: other` steps: one look-up
                    key = (ss[-2], top, kind)
                    after = units.get(key)
                    if after is None:
                        after = units[key] = self._after_units(ss[-2], top, kind)  # type: ignore[arg-type]
                    ss[-1] = after
                    if tok is None and after == end_state:
                        _report_depth(builder, deepest)
                        return vs[-1][1]
                    continue
                size = rule.size
                raw = vs[-size:]
                del vs[-size:]
                del ss[-size:]
                if rule.plain:
                    kids = raw
                else:
                    kids = []
                    for j, spliced in rule.include:
                        if spliced:
                            if kids:
                                kids += raw[j][1]
                            else:  # (a left-recursive list grows in place: linear, not quadratic)
                                kids = raw[j][1]
                        else:
                            kids.append(raw[j])
                first, last = raw[0], raw[-1]
                depth = 0
                for k in raw:  # (a spliced list carries the depth of its items)
                    if k[8] > depth:
                        depth = k[8]
                if rule.splice:
                    entry = ("_", kids, first[2], first[3], last[4], last[5], first[6], last[7], depth)
                else:
                    loc = new_tuple(Loc, (first[2], first[3], last[4], last[5]))
                    if depth == max_depth:
                        deepest.append((first[6], loc))
                    entry = (rule.name, actions[-1 - act](kids, loc),  # type: ignore[misc]
                             first[2], first[3], last[4], last[5], first[6], last[7], depth + 1)
                goto = states[ss[-1]][rule.origin]
                if tok is None and goto == end_state:
                    _report_depth(builder, deepest)
                    return entry[1]
                ss.append(goto)
                vs.append(entry)

    def _after_units(self, below: int, top: int, kind: str) -> int:
        """The state after every `?rule: other` reduction ``kind`` triggers above ``below``."""
        while True:
            act = self._states[top].get(kind)
            if act is None or act >= 0 or not self._rules[-1 - act].unit:
                return top
            top = self._states[below][self._rules[-1 - act].origin]


def _report_depth(builder: object, deepest: list[tuple[int, Loc]]) -> None:
    if deepest:
        builder.too_deep(max(deepest, key=lambda d: d[0])[1])  # type: ignore[attr-defined]


def walk_tree(root: Tree, builder: object) -> Any:
    """The value of a Lark tree (``propagate_positions=True``) under the same actions.

    Bottom-up with an explicit stack (no recursion: 50,000 nested calls are a
    deep tree), children last to first, as the parser's builder always went.
    """
    done: dict[int, Entry] = {}
    deepest: list[tuple[int, Loc]] = []
    max_depth = builder.max_depth  # type: ignore[attr-defined]
    stack: list[Tree] = [root]
    while stack:
        node = stack[-1]
        pending = [c for c in node.children if type(c) is Tree and id(c) not in done]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        kids: list[Entry] = []
        depth = 0
        for c in node.children:
            if type(c) is Tree:
                e = done.pop(id(c))
                depth = max(depth, e[8])
            else:
                assert isinstance(c, Token)
                e = (c.type, str(c), c.line, c.column, c.end_line, c.end_column, c.start_pos, c.end_pos, 0)
            kids.append(e)
        m = node.meta
        loc = Loc(m.line, m.column, m.end_line, m.end_column)
        if depth == max_depth:
            deepest.append((m.start_pos, loc))
        value = getattr(builder, "b_" + node.data)(kids, loc)
        done[id(node)] = (str(node.data), value, m.line, m.column, m.end_line, m.end_column, m.start_pos,
                          m.end_pos, depth + 1)
    _report_depth(builder, deepest)
    return done[id(root)][1]
