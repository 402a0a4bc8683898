"""Run Lark's LALR tables over a pattern text without building a parse tree.

Why: ``cep check`` on 10,000 patterns spent most of its time in Lark's parse
loop, which makes a ``Token`` object per token, a ``Tree`` per rule and then
hands the tree to a second pass (issue 12).  Lark still owns the language: the
grammar is ``grammar/pattern.lark``, Lark computes the LALR tables and the
terminals' regular expressions from it (shipped as plain data,
``cep.lang.grammar_tables``, by ``cep.lang.tablegen``: no Lark import at
start-up), and Lark parses every text this module rejects, so syntax errors
are Lark's exceptions as before.  What runs here:

- the lexer, line by line (no token holds a newline), one ``re.split`` per
  distinct line with a regex made of Lark's own terminals (the ignored ones,
  blanks and comments, skipped in front of each token), each token's kind from
  its text (each distinct text classified once by Lark's terminals in Lark's
  order), its columns from the parts' lengths.  Tokens are indices into
  parallel lists (text, kind, line, column, end line, end column) the builder
  reads;
- the shift/reduce loop over Lark's own tables, a chain of ``?rule: other``
  reductions resolved by one cached look-up, and at each other reduction a
  generated reducer for that rule (``cep.codegen``: ``<cep parser: reducer N (rule)>``
  in tracebacks) that takes its children off the stack, shapes them the way
  Lark's tree builder would have (anonymous tokens filtered out, ``_rule``
  lists spliced into their parent) and calls the builder's action for the rule
  (``b_<rule name or alias>``) with them and the node's ``cep.lang.ast.Loc``;
- for a pattern or clause whose shape (its tokens' kinds, the state it starts
  from and the kind after it) was met before, straight-line code generated from the
  loop's own steps over those kinds (``<cep parser: pattern shape>``): the same
  reductions, actions and entries, without the table look-ups and the stack.
  A file of patterns repeats a few shapes; a shape met rarely costs nothing.

A child is a token index (``int``) or an *entry* ``(value, kind, first, last,
depth)``: ``kind`` is the rule's alias (or name), ``value`` what its action
returned, ``first``/``last`` the indices of its first and last token (the
rules have no empty expansion, so a node ends right before the look-ahead),
``depth`` its depth in the tree Lark would have built.  The positions are those
Lark's ``propagate_positions`` gives.  A node whose children reach
``builder.max_depth`` is reported once through ``builder.too_deep(loc)``: the
one Lark's tree walked from the right meets first (the deepest-reaching node
that starts last).  ``walk_tree`` feeds the same actions from a Lark tree: the
fallback when this loop rejects a text Lark accepts (it should not happen; the
tests compare both on many texts).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import accumulate, compress, repeat
from types import ModuleType
from typing import Any

from cep import codegen
from cep.lang.ast import Loc, slot_setters
from cep.lazyre import lazy

Entry = tuple  # (value, kind, first token, last token, depth)
END = "$END"

_KEYWORD_RE = lazy(r"\(\?i:(\w+)\\b\)")  # Lark's form of a `/word\b/i` terminal
_WORD = r"(?!\d)\w+"  # the name terminal a keyword's match is always also a match of


class Rejected(Exception):
    """The text is not in the language (Lark's parse gives the located error)."""


def token_regex(terminals: list[tuple[str, str]], ignore: frozenset[str]) -> str:
    """One match per token, in Lark's order: the ignored terminals (blanks, comments) skipped in front.

    (Made by ``cep.lang.tablegen``, shipped in ``cep.lang.grammar_tables``: building it compiles
    a regex per terminal, milliseconds of every start-up.)

    Lark's lexer tries its terminals in order at each position, one match per
    token or blank; here the ignored ones are skipped first, then the others
    are tried in Lark's order (``_END`` matches the end of the text).  That
    picks the same token as long as no terminal that is not ignored can match
    where an ignored one does, true of this grammar (blanks, ``--`` and ``#``
    start no token) and checked by the tests against Lark's lexer.  The lexer
    classifies each distinct token text with it.
    """
    skip = "|".join(_uncaptured(regex) for name, regex in terminals if name in ignore)
    tokens = "|".join(f"(?P<{name}>{regex})" for name, regex in terminals if name not in ignore)
    return f"(?:{skip})*+(?:{tokens}|(?P<_END>\\Z))"  # (*+: no backtracking into blanks)


def split_regex(terminals: list[tuple[str, str]], ignore: frozenset[str]) -> str:
    """``(blanks)(token)`` for ``re.split``: Lark's terminals in Lark's order, keywords left to the word.

    A keyword terminal (``/and\\b/i``) matches exactly where the word terminal
    (``(?!\\d)\\w+``) that comes after it matches the same text (the ``\\b``
    ends both at the end of the word), and no terminal between the two can
    match at a letter; so the split leaves keywords out (a third of the regex
    time) and the kind of a word is found from its text, with the keywords
    first as Lark tries them.  Raises ``ValueError`` if the grammar's
    terminals stop having that shape.  (Shipped like ``token_regex``.)
    """
    names = [name for name, _ in terminals if name not in ignore]
    regexps = dict(terminals)
    words = [n for n in names if _KEYWORD_RE.fullmatch(regexps[n])]
    word_at = next((i for i, n in enumerate(names) if regexps[n] == _WORD), None)
    if words and word_at is None:
        raise ValueError("keyword terminals without a word terminal: the lexer needs adapting")
    for kw in words:
        text = _KEYWORD_RE.fullmatch(regexps[kw]).group(1)  # type: ignore[union-attr]
        if names.index(kw) > word_at or not re.fullmatch(_WORD, text):  # type: ignore[operator]
            raise ValueError(f"terminal {kw} does not fit the lexer's keyword rule")
        between = names[names.index(kw) + 1 : word_at]
        if any(re.match(regexps[n], text, re.I) for n in between if n not in words):
            raise ValueError(f"terminal {kw} is shadowed by another terminal: the lexer needs adapting")
    skip = "|".join(_uncaptured(regexps[n]) for n in regexps if n in ignore)
    tokens = "|".join(_uncaptured(regexps[n]) for n in names if n not in words)
    return f"((?:{skip})*+)({tokens}|\\Z)"  # (the blanks at the end match, with an empty token)


def _uncaptured(regex: str) -> str:
    """``regex`` with its capturing groups made non-capturing.

    (Python 3.11's ``re`` misreports a group captured inside a possessive
    repeat, so the skipped terminals must have none; ``re.split`` returns
    every group, so the tokens must have none either.)
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
    __slots__ = ("size", "origin", "name", "include", "splice", "unit", "terms")

    def __init__(self, rule: tuple) -> None:
        """``rule`` as ``cep.lang.grammar_tables.RULES`` holds it (``cep.lang.tablegen``)."""
        origin, alias, expansion, keep_all_tokens, expand1 = rule
        self.size = len(expansion)
        if not self.size:
            raise ValueError(f"rule {rule} is empty: the loop assumes every node ends before the look-ahead")
        self.origin = origin
        self.name = alias or origin
        self.terms = tuple(is_term for _, is_term, _ in expansion)
        # which children Lark keeps, and which are `_rule` lists spliced into this node
        self.include = tuple(
            (i, (not is_term) and symbol.startswith("_"))
            for i, (symbol, is_term, filtered) in enumerate(expansion)
            if keep_all_tokens or not filtered
        )
        self.splice = origin.startswith("_")
        # `?rule: other` (one kept child, no alias): the child stands for the rule
        self.unit = expand1 and not alias
        if self.unit and (self.size != 1 or len(self.include) != 1 or self.terms[0]):
            raise ValueError(f"rule {rule} is not a plain `?rule: other` step")


_CHILD_RE = lazy(r"\bk(\d+)\b")


def _inline_value(template: tuple, children: list[str], target: str, indent: str) -> list[str]:
    """Lines that set ``target`` to an inline action's value (see ``TableParser``), ``kN`` being ``children[N]``.

    A node is made as ``object.__new__`` and its slots set in field order
    (``cep.lang.ast.slot_setters``): the fields' expressions run in the order
    a call of the class would run them.
    """
    cls, *exprs = template

    def code(e: str) -> str:
        return _CHILD_RE.sub(lambda m: children[int(m.group(1))], e)

    if cls is None:
        return [f"{indent}{target} = {code(exprs[0])}"]
    lines = [f"{indent}{target} = obj_new({cls.__name__})"]
    for (name, _), e in zip(slot_setters(cls), exprs, strict=True):
        lines.append(f"{indent}set_{cls.__name__}_{name}({target}, {code(e)})")
    return lines


def inline_env(inline: dict[str, tuple]) -> dict[str, Any]:
    """The names the generated code of ``inline``'s templates uses (node classes and their slots' setters)."""
    env: dict[str, Any] = {"new": tuple.__new__, "obj_new": object.__new__, "Loc": Loc}
    for cls, *_ in inline.values():
        if cls is not None:
            env[cls.__name__] = cls
            env.update((f"set_{cls.__name__}_{name}", setter) for name, setter in slot_setters(cls))
    return env


def inline_method(name: str, template: tuple, env: dict[str, Any]) -> Callable:
    """An inline action as a builder method ``(builder, kids, loc) -> value`` (for ``walk_tree``)."""
    lines = [f"def b_{name}(B, kids, loc):", "    T, L, C, EL, E = B.T, B.L, B.C, B.EL, B.E"]
    arity = max((int(k) + 1 for e in template[1:] for k in _CHILD_RE.findall(e)), default=0)
    lines += _inline_value(template, [f"kids[{j}]" for j in range(arity)], "v", "    ")
    lines.append("    return v")
    return codegen.define("parser: inline actions", "\n".join(lines) + "\n", f"b_{name}", env)


def _reducer_source(r: int, rule: _Rule, template: tuple | None) -> str:
    """The reducer of one rule: pops its children, shapes them as Lark's tree would, returns the entry.

    With an inline ``template`` (see ``TableParser``) it builds the rule's value itself; otherwise
    it calls the builder's action with the children and the node's location.
    """
    n = rule.size
    c = [f"c{j}" for j in range(n)]
    lines = [f"    def r{r}(vs, i):"]
    if n == 1:
        lines.append("        c0 = vs.pop()")
    else:
        lines.append(f"        {', '.join(c)} = vs[-{n}:]")
        lines.append(f"        del vs[-{n}:]")
    lines.append(f"        f = {'c0' if rule.terms[0] else 'c0[2]'}")
    nodes = [c[j] for j in range(n) if not rule.terms[j]]
    if not nodes:
        lines.append("        d = 0")
    else:
        lines.append(f"        d = {nodes[0]}[4]")
        for x in nodes[1:]:
            lines.append(f"        if {x}[4] > d: d = {x}[4]")
    if template is not None:
        lines += [
            "        l = i - 1",
            "        loc = new(Loc, (L[f], C[f], EL[l], E[l]))",
            "        if d == MAXD:",
            "            deepest.append((f, loc))",
        ]
        lines += _inline_value(template, [c[j] for j, _ in rule.include], "v", "        ")
        lines.append(f"        return (v, {rule.name!r}, f, l, d + 1)")
        return "\n".join(lines) + "\n"
    # the children Lark keeps, spliced lists flattened (a left-recursive list grows in place)
    started = False
    for j, spliced in rule.include:
        if spliced:
            if not started:
                lines.append(f"        kids = {c[j]}[0]")
            else:
                lines.append(f"        kids += {c[j]}[0]")
        elif not started:
            lines.append(f"        kids = [{c[j]}]")
        else:
            lines.append(f"        kids.append({c[j]})")
        started = True
    if not started:
        lines.append("        kids = []")
    if rule.splice:
        lines.append("        return (kids, '_', f, i - 1, d)")
    else:
        lines += [
            "        l = i - 1",
            "        loc = new(Loc, (L[f], C[f], EL[l], E[l]))",
            "        if d == MAXD:",
            "            deepest.append((f, loc))",
            f"        return (a{r}(kids, loc), {rule.name!r}, f, l, d + 1)",
        ]
    return "\n".join(lines) + "\n"


_MAX_SHAPES = 256  # generated pattern shapes kept per parser
_MAX_SEEN = 4096  # shapes met fewer times, counted
# Generating a shape (compiling its code) costs about 60 loop passes over its tokens (callgrind,
# bench.pattern_size varied(1000)): generated the 64th time it is met, a shape costs at most about
# twice what the loop alone would have, and a file whose shapes rarely repeat generates few.
_GENERATE_AT = 64
_MAX_SHAPE_TOKENS = 2000  # (a longer pattern runs through the loop: its code would cost more than it saves)
# A parse generates shapes of at most this many tokens, or a 50th of its own.
_SHAPE_BUDGET = 2000


class TableParser:
    """Lark's LALR(1) tables and terminals, driven by a plain loop (see the module doc).

    ``segments`` are the terminals that start a part the texts repeat (a pattern,
    a clause): there the loop may run the code generated for the shape that
    follows, up to the next one.
    """

    def __init__(self, tables: ModuleType, segments: frozenset[str] = frozenset(),
                 inline: dict[str, tuple] | None = None, env: dict[str, Any] | None = None) -> None:
        """``tables``: ``cep.lang.grammar_tables`` (or a module like it, ``cep.lang.tablegen``).

        ``inline``: rule (alias) -> the template of an action that is one value made of the
        rule's children, written into the generated code instead of a call of the builder's
        action: ``(node class, one expression per field)`` or ``(None, expression)``.  The
        expressions see the rule's kept children ``k0``, ``k1``, ... (token index or entry),
        the token lists ``T`` (texts), ``L``, ``C``, ``EL``, ``E`` (positions), ``loc``, the
        builder ``B`` and the names in ``env``.  A rule whose children hold a spliced list
        cannot have one.
        """
        self._segments = segments
        self._shapes: dict[tuple, tuple[Callable, list] | None] = {}
        self._seen: dict[tuple, int] = {}
        self._budget = _SHAPE_BUDGET  # (tokens of shapes the current parse may still generate)
        self._classify = re.compile(tables.TOKEN_REGEX).match
        self._split = re.compile(tables.SPLIT_REGEX).split
        self._rules: list[_Rule] = [_Rule(r) for r in tables.RULES]
        # one dict per state: terminal -> shift target (>= 0) or reduction (-1 - rule); nonterminal -> goto
        self._acts: list[dict[str, int]] = tables.ACTIONS
        inline = inline or {}
        self._inline: list[tuple | None] = [inline.get(r.name) for r in self._rules]
        for rule, template in zip(self._rules, self._inline, strict=True):
            if template is not None and (rule.splice or rule.unit or any(sp for _, sp in rule.include)):
                raise ValueError(f"rule {rule.name}: an inline action needs a node of fixed children")
        self._env = {**inline_env(inline), **(env or {})}
        self._sizes = [r.size for r in self._rules]
        self._origins = [r.origin for r in self._rules]
        # (state below, unit rule) -> {look-ahead: state after the whole `?rule: other` chain}
        self._chains: list[dict[str, int] | None] = [None] * (len(self._acts) * len(self._rules))
        self._start: dict[str, int] = tables.START
        self._end: dict[str, int] = tables.END
        # one factory per rule that is not a unit: (its action, the parse's lists) -> its reducer; each is
        # compiled at its first call (cep.codegen), so a process compiles the reducers of the rules its
        # texts use (issue 15: compiling all of them was 13% of a 13-record `cep run`)
        self._factories: list[Callable[..., Callable] | None] = [
            None if rule.unit else codegen.define(
                f"parser: reducer {r} ({rule.name})",
                f"def make(a{r}, B, T, L, C, EL, E, deepest, MAXD):\n"
                + _reducer_source(r, rule, self._inline[r]) + f"    return r{r}\n",
                "make", self._env)
            for r, rule in enumerate(self._rules)
        ]

    def _reducers(self, actions: list, *lists: Any) -> list[Callable | None]:
        """The parse's reducers by rule (None: a unit rule), each made at its rule's first reduction.

        ``lists``: the builder, its token lists, ``deepest`` and the deepest depth, which
        every reducer of the parse shares (the factories' parameters after the action).
        """
        red: list[Callable | None] = [None] * len(self._factories)

        def later(r: int, make: Callable[..., Callable]) -> Callable:
            def first(vs: list, i: int) -> Any:
                fn = red[r] = make(actions[r], *lists)
                return fn(vs, i)
            return first

        for r, make in enumerate(self._factories):
            if make is not None:
                red[r] = later(r, make)
        return red

    def lex(self, text: str, builder: Any) -> list[str]:
        """The kinds of ``text``'s tokens then ``$END``; the builder gets the tokens' lists (``Rejected``: not all tokens).

        Line by line: no token holds a newline and a comment ends at one, so
        each line lexes on its own as within the text; and a file of patterns
        repeats its lines, each distinct line is lexed once.
        """
        kind_of: dict[str, str] = {}
        lexed: dict[str, tuple[list, list, list, list]] = {}
        lex_line = self._lex_line
        K: list[str] = []
        T: list[str] = []
        L: list[int] = []
        C: list[int] = []
        E: list[int] = []
        for no, line in enumerate(text.split("\n"), 1):
            got = lexed.get(line)
            if got is None:
                got = lexed[line] = lex_line(line, kind_of)
            k, t, c, e = got
            if k:
                K += k
                T += t
                C += c
                E += e
                L += repeat(no, len(k))
        K.append(END)
        builder.tokens(T, K, L, C, L, E)
        return K

    def _lex_line(self, line: str, kind_of: dict[str, str]) -> tuple[list, list, list, list]:
        """(kinds, texts, columns, end columns) of one line's tokens."""
        parts = self._split(line)  # [gap, blanks, token] * n, then the end's (blanks, "") match(es) and gap
        toks = parts[2::3]
        n = len(toks) - toks.count("")  # (only the end matches an empty token)
        del toks[n:]
        # between tokens only blanks and comments (a character no terminal matches is left between)
        if parts[0::3].count("") != len(parts[0::3]):
            raise Rejected
        for t in set(toks).difference(kind_of):  # (each distinct text classified once)
            m = self._classify(t)
            if m is None or m.end() != len(t) or m.lastgroup == "_END" or m.start(m.lastindex) != 0:
                raise Rejected
            kind_of[t] = m.lastgroup  # type: ignore[assignment]
        columns = list(accumulate(map(len, parts), initial=1))  # (1-based: where each part starts)
        return list(map(kind_of.__getitem__, toks)), toks, columns[2 : 3 * n : 3], columns[3 : 3 * n + 1 : 3]

    def parse(self, text: str, start: str, builder: Any) -> Any:
        """The value of ``start`` for ``text`` (actions ``builder.b_<rule>``), or ``Rejected``."""
        kinds = self.lex(text, builder)
        self._budget = max(_SHAPE_BUDGET, len(kinds) // 50)
        rules = self._rules
        deepest: list[tuple[int, Loc]] = []
        actions = [None if r.unit or r.splice or t is not None else getattr(builder, "b_" + r.name)
                   for r, t in zip(rules, self._inline, strict=True)]
        L, C, EL, E = builder.L, builder.C, builder.EL, builder.E
        max_depth = builder.max_depth
        T = builder.T
        red = self._reducers(actions, builder, T, L, C, EL, E, deepest, max_depth)
        acts = self._acts
        sizes = self._sizes
        origins = self._origins
        chains = self._chains
        nrules = len(rules)
        state = self._start[start]
        end_state = self._end[start]
        ss = [state]  # states
        vs: list = []  # token indices and entries, one per state above the first
        push_s = ss.append
        push_v = vs.append
        row = acts[state]
        last = len(kinds) - 1
        starts = list(compress(range(last), map(self._segments.__contains__, kinds)))  # where a shape may start
        starts.append(last)
        s = 0
        next_segment = starts[0]
        i = 0
        kind = kinds[0]
        while True:
            act = row.get(kind)
            if act is None:
                raise Rejected
            if act >= 0:
                if i == next_segment:  # a pattern or clause starts here: its shape's generated code, if any
                    s += 1
                    j = next_segment = starts[s]
                    shape = self._shape(state, kinds, i, j, max_depth)
                    if shape is not None:
                        fn, states = shape
                        vs += fn(i, actions, builder, T, L, C, EL, E, deepest)
                        ss += states
                        state = states[-1]
                        row = acts[state]
                        i = j
                        kind = kinds[j]
                        continue
                if i == last:  # ($END is never shifted)
                    raise Rejected
                push_s(act)
                push_v(i)
                state = act
                row = acts[act]
                i += 1
                kind = kinds[i]
                continue
            r = -1 - act
            fn = red[r]
            if fn is None:  # a chain of `?rule: other` steps: one look-up
                below = ss[-2]
                chain = chains[below * nrules + r]
                if chain is None:
                    chain = chains[below * nrules + r] = {}
                state = chain.get(kind)  # type: ignore[assignment]
                if state is None:
                    state = chain[kind] = self._after_units(below, r, kind)
                ss[-1] = state
                if state == end_state and kind == END:
                    _report_depth(builder, deepest)
                    return vs[-1][0]
                row = acts[state]
                continue
            entry = fn(vs, i)
            del ss[-sizes[r]:]
            state = acts[ss[-1]][origins[r]]
            if state == end_state and kind == END:
                _report_depth(builder, deepest)
                return entry[0]
            push_s(state)
            push_v(entry)
            row = acts[state]

    def _shape(self, state: int, kinds: list[str], i: int, j: int, max_depth: int) -> tuple[Callable, list] | None:
        """``(generated code, states it pushes)`` of tokens ``i:j`` parsed from ``state``, or None.

        The parse of a pattern or clause depends only on the state it starts
        from, its tokens' kinds and the kind after it; a file repeats a few.  The
        ``_GENERATE_AT``-th time a shape is met, the loop's steps over it are run once on
        the kinds alone and written out as straight-line code that builds the
        same entries, returned as the list the stack holds above ``state`` at
        the kind after it (``_shape_source``); a shape the tables reject (or
        past the caps on shapes) has none.
        """
        if j - i > _MAX_SHAPE_TOKENS:
            return None
        key = (state, tuple(kinds[i : j + 1]), max_depth)
        got = self._shapes.get(key, False)
        if got is not False:
            return got  # type: ignore[return-value]
        seen = self._seen.get(key, 0) + 1
        if seen < _GENERATE_AT:
            if len(self._seen) > _MAX_SEEN:
                self._seen.clear()
            self._seen[key] = seen
            return None
        if len(self._shapes) >= _MAX_SHAPES or j - i > self._budget:
            return None
        self._budget -= j - i
        made = self._shape_source(state, key[1], max_depth)
        if made is not None:
            source, after = made
            made = codegen.define("parser: pattern shape", source, "shape", self._env), after
        self._shapes[key] = made
        return made

    def _shape_source(self, state: int, kinds: tuple[str, ...], max_depth: int) -> tuple[str, list] | None:
        """The straight-line code of one shape (see ``_shape``): the loop's steps with the stack known."""
        acts, rules = self._acts, self._rules
        ss = [state]
        # what the stack holds above `state`: ("t", offset) a token, ("n", var, first, last, depth) a node,
        # ("s", items, first, last, depth) a `_rule` list
        vs: list[tuple] = []
        out: list[str] = []
        used: set[int] = set()
        count = 0

        def tok(k: int) -> str:
            return f"i + {k}" if k else "i"

        def expr(x: tuple) -> str:
            return tok(x[1]) if x[0] == "t" else x[1]

        def first(x: tuple) -> int:
            return x[1] if x[0] == "t" else x[2]

        def depth(x: tuple) -> int:
            return 0 if x[0] == "t" else x[4]

        last = len(kinds) - 1
        k = 0
        while True:
            kind = kinds[k]
            act = acts[ss[-1]].get(kind)
            if act is None:
                return None
            if act >= 0:
                if k == last:
                    break
                ss.append(act)
                vs.append(("t", k))
                k += 1
                continue
            rule = rules[-1 - act]
            n = rule.size
            if n > len(vs):  # it reduces below where the shape started: the shape ends here
                break
            raw = vs[len(vs) - n :]
            del vs[len(vs) - n :]
            del ss[len(ss) - n :]
            goto = acts[ss[-1]][rule.origin]
            if goto in self._end.values() and kind == END:
                return None
            ss.append(goto)
            if rule.unit:
                vs.append(raw[0])
                continue
            kids: list[tuple] = []
            for j, spliced in rule.include:
                if spliced:
                    kids += raw[j][1]
                else:
                    kids.append(raw[j])
            f, lt, d = first(raw[0]), k - 1, max(depth(x) for x in raw)
            if rule.splice:
                vs.append(("s", kids, f, lt, d))
                continue
            count += 1
            r = -1 - act
            out.append(f"    loc = new(Loc, (L[{tok(f)}], C[{tok(f)}], EL[{tok(lt)}], E[{tok(lt)}]))")
            if d == max_depth:
                out.append(f"    deepest.append(({tok(f)}, loc))")
            template = self._inline[r]
            if template is not None:
                out += _inline_value(template, [expr(x) for x in kids], "n", "    ")
                value = "n"
            else:
                used.add(r)
                value = f"a{r}([{', '.join(expr(x) for x in kids)}], loc)"
            out.append(f"    v{count} = ({value}, {rule.name!r}, {tok(f)}, {tok(lt)}, {d + 1})")
            vs.append(("n", f"v{count}", f, lt, d + 1))
        if k != last or not vs:
            return None

        def entry(x: tuple) -> str:
            if x[0] == "s":
                return f"([{', '.join(expr(y) for y in x[1])}], '_', {tok(x[2])}, {tok(x[3])}, {x[4]})"
            return expr(x)

        head = ["def shape(i, actions, B, T, L, C, EL, E, deepest):"]
        head += [f"    a{r} = actions[{r}]" for r in sorted(used)]
        return "\n".join(head + out + [f"    return [{', '.join(entry(x) for x in vs)}]"]) + "\n", ss[1:]

    def _after_units(self, below: int, r: int, kind: str) -> int:
        """The state after unit rule ``r`` and every `?rule: other` reduction ``kind`` then triggers above ``below``."""
        top = self._acts[below][self._rules[r].origin]
        while True:
            act = self._acts[top].get(kind)
            if act is None or act >= 0 or not self._rules[-1 - act].unit:
                return top
            top = self._acts[below][self._rules[-1 - act].origin]


def _report_depth(builder: Any, deepest: list[tuple[int, Loc]]) -> None:
    if deepest:
        builder.too_deep(max(deepest, key=lambda d: d[0])[1])


def walk_tree(root: Any, builder: Any) -> Any:
    """The value of a Lark tree (``propagate_positions=True``) under the same actions.

    Bottom-up with an explicit stack (no recursion: 50,000 nested calls are a
    deep tree), children last to first, as the parser's builder always went.
    Tokens are appended to the builder's token lists; each node gets one more
    entry there holding its start and end (its ``first`` and ``last``).
    """
    from lark import Token, Tree  # (only when Lark parsed: the table loop rejected the text)

    T: list[str] = []
    K: list[str] = []
    L: list[int] = []
    C: list[int] = []
    EL: list[int] = []
    E: list[int] = []
    builder.tokens(T, K, L, C, EL, E)

    def add(text: str, kind: str, line: int, col: int, end_line: int, end_col: int) -> int:
        T.append(text)
        K.append(kind)
        L.append(line)
        C.append(col)
        EL.append(end_line)
        E.append(end_col)
        return len(T) - 1

    done: dict[int, Entry] = {}
    deepest: list[tuple[int, Loc]] = []
    max_depth = builder.max_depth
    stack: list[Tree] = [root]
    while stack:
        node = stack[-1]
        pending = [c for c in node.children if type(c) is Tree and id(c) not in done]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        kids: list = []
        depth = 0
        for c in node.children:
            if type(c) is Tree:
                e = done.pop(id(c))
                depth = max(depth, e[4])
                kids.append(e)
            else:
                assert isinstance(c, Token)
                kids.append(add(str(c), c.type, c.line, c.column, c.end_line, c.end_column))  # type: ignore[arg-type]
        m = node.meta
        loc = Loc(m.line, m.column, m.end_line, m.end_column)
        if depth == max_depth:
            deepest.append((m.start_pos, loc))
        value = getattr(builder, "b_" + node.data)(kids, loc)
        here = add("", "", m.line, m.column, m.end_line, m.end_column)
        done[id(node)] = (value, str(node.data), here, here, depth + 1)
    _report_depth(builder, deepest)
    return done[id(root)][0]
