"""IEDYN over one pattern's plan: the T-reduct, its indexes, updates, enumeration.

Thesis sections 4.3-4.5.  For every node ``n`` of the (binary) join tree the
runtime keeps ``rho[n]``, a GMR (tuple -> positive multiplicity) that equals the
projection onto ``var(n)`` of the join of the atoms below ``n`` under the
predicates below ``n`` (the T-reduct, Definition 22).  Leaves hold one tuple per
event (the identity variable makes each event a distinct tuple, so equal
events are two events).  Each node keeps the indexes ``cep.plan.model`` derives for
it: P_n (enumeration from its parent) and S_n (probes from its sibling); both
group on the shared variables and sort each group on an inequality variable in
a ``SumSortedMap``, whose range sums make the guard-side update O(log n).

Update (Algorithm 7): a delta at a leaf moves up the leaf-to-root path.  At a
node with a sibling, ``delta_p += proj_p(rho_sibling |x|_pred delta_n)``: when
``n`` is the guard the matching sibling tuples all project to one parent tuple
and only their multiplicity sum is needed (a range sum); otherwise each
matching sibling tuple gives a parent tuple (the inherent fan-out of a
non-simple tree).  ``rho_n`` is updated before its contribution is computed.

Delta enumeration (section 4.5.1, push mode): the matches an update adds (or
removes) are enumerated top-down from the root's delta, reading the delta of
each node on the updated path and ``rho`` elsewhere; each candidate found
through an index extends to at least one match (the reduct property), so the
delay is constant after the range seek, except for residual predicates, which
are checked once a match is complete.  Expiry makes the same index changes with
negative deltas through a path of its own (``_compile_drop``) and enumerates nothing.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from typing import Any

from cep import codegen
from cep.lang.gcq import ID_ATTR, TIME_ATTR, Bound, CompiledPattern
from cep.plan.physical import IndexUse, PhysicalPlan, time_variables
from cep.runtime.sumlist import (
    FLAT_MAX,
    SOURCE_NAMES,
    SumSortedMap,
    bisect_source,
    end_test,
    flat_map,
    grown_pair,
    incr_source,
    pair_source,
    seek_entry,
)
from cep.values import SqlBool, canon

_LOWER = {">": False, ">=": True, "=": True}
# a batch's non-guard step sort-merges a delta of at least this many changes (``_merge_source``);
# a smaller one probes the sibling per change
MERGE_MIN = 8
_UPPER = {"<": False, "<=": True, "=": True}


def rank_key(v):
    """Sort key of a scalar for a variable that may hold mixed types (None: not indexable)."""
    t = type(v)
    if t is int or t is float:
        return (0, v)
    if t is str:
        return (1, v)
    if t is SqlBool:
        return (2, v.value)
    return None


def _in_range(k, r) -> bool:
    """Whether sort key ``k`` lies in the range ``(lo, lo_incl, hi, hi_incl)``."""
    lo, lo_incl, hi, hi_incl = r
    if lo is not None and (k < lo or (k == lo and not lo_incl)):
        return False
    if hi is not None and (k > hi or (k == hi and not hi_incl)):
        return False
    return True


def _numeric_bounds(bounds: list[tuple[Bound, int]], u: str):
    """Source parts of a numeric range over probe tuple ``u`` with at most one lower and one
    upper bound (the SEQ order plus a WITHIN band): the probe positions read (each must hold
    a number), then (lo, lo_incl, hi, hi_incl) as expressions (None: an open end, or more
    bounds than this form takes)."""
    lower = [(b, p) for b, p in bounds if b.op in _LOWER]
    upper = [(b, p) for b, p in bounds if b.op in _UPPER]
    if len(lower) > 1 or len(upper) > 1:
        return None
    reads: dict[int, str] = {}
    for _b, pos in bounds:
        reads.setdefault(pos, f"{u}v{len(reads)}")

    def expr(b: Bound, pos: int) -> str:
        v = reads[pos]
        if b.scale == 1 and b.offset == 0:
            return v
        if type(b.scale) is int and b.scale == 1:
            return f"({v} + {b.offset!r})"
        return f"({b.scale!r} * {v} + {b.offset!r})"

    lo = (expr(*lower[0]), _LOWER[lower[0][0].op]) if lower else (None, True)
    hi = (expr(*upper[0]), _UPPER[upper[0][0].op]) if upper else (None, True)
    return reads, lo, hi


def _numeric_range(bounds: list[tuple[Bound, int]], typed: frozenset[int], label: str) -> Callable | None:
    """A generated range function for a numeric sort variable (``_numeric_bounds``): no loop, no
    calls; ``typed``: the probe positions that hold event times (numbers: no type test)."""
    parts = _numeric_bounds(bounds, "u")
    if parts is None:
        return None
    reads, (lo, lo_incl), (hi, hi_incl) = parts
    lines = ["def rng(u):"]
    for pos, name in reads.items():
        lines.append(f"    {name} = u[{pos}]")
        if pos not in typed:
            lines += [f"    if type({name}) is not int and type({name}) is not float:", "        return None"]
    lines.append(f"    return ({lo}, {lo_incl}, {hi}, {hi_incl})")
    return codegen.define(label, "\n".join(lines), "rng")


def _checker(preds: list, sources: list[tuple[str, dict[str, int]]], label: str) -> Callable[..., bool] | None:
    """Compile a conjunction of predicates into one function of the source tuples.

    ``sources`` names the arguments (e.g. ``("u", pos_u), ("t", pos_t)``) and where
    each variable sits in them; a variable is read from the first source holding it.
    """
    if not preds:
        return None
    env: dict[str, Any] = {}
    parts = []
    for i, p in enumerate(preds):
        env[f"f{i}"] = p.fn
        args = []
        for v in p.vars:
            for name, pos in sources:
                if v in pos:
                    args.append(f"{name}[{pos[v]}]")
                    break
            else:  # pragma: no cover - the plan validator rules this out
                raise AssertionError(f"variable {v} of predicate {p.text} not bound")
        parts.append(f"f{i}({', '.join(args)})  # {p.text}")
    params = ", ".join(name for name, _ in sources)
    src = f"def check({params}):\n    return (\n        " + "\n        and ".join(parts) + "\n    )\n"
    return codegen.define(label, src, "check", env)


def _equal_checker(pairs: list[tuple[int, int]], label: str) -> Callable[[tuple, tuple], bool]:
    """``u[i] == t[j]`` for every (i, j): the rest of a hash key, compared like dict keys
    (identity first, so a NaN matches itself as it does as a key)."""
    body = " and ".join(f"(u[{i}] is t[{j}] or u[{i}] == t[{j}])" for i, j in pairs)
    return codegen.define(label, f"def equal(u, t):\n    return {body}\n", "equal")


def _key_expr(t: str, positions: list[int]) -> str:
    """Source of ``codegen.key_getter(positions)(t)``: the bare value for one position."""
    if len(positions) == 1:
        return f"{t}[{positions[0]}]"
    return "(" + "".join(f"{t}[{p}], " for p in positions) + ")"


def _times(c: str, x: str) -> str:
    """Source of ``c * x``: ``-x`` when ``c`` is the literal -1 (an expiry path's own change,
    ``PatternRuntime._compile_drop``): one operation less per tuple walked."""
    return f"-{x}" if c == "-1" else f"{c} * {x}"


def _add(acc: str, c: str, x: str) -> str:
    """Source of ``acc + c * x`` (``_times``)."""
    return f"{acc} - {x}" if c == "-1" else f"{acc} + {c} * {x}"


def _tuple_expr(t: str, positions: list[int]) -> str:
    """Source of ``codegen.tuple_getter(positions)(t)``: always a tuple, even of one."""
    return "(" + "".join(f"{t}[{p}], " for p in positions) + ")"


def _shrink(groups: dict, key, g: SumSortedMap) -> None:
    """A sorted group down to one entry becomes a plain triple again (or goes, when empty)."""
    only = g.only()
    if only is None:
        del groups[key]
    else:
        groups[key] = only


class NodeIndex:
    """Hash groups of one node's tuples, each group sorted on ``spec.sort_var``.

    A sorted group is a ``SumSortedMap`` from sort key to ``{tuple: multiplicity}``
    weighted by the multiplicities; an unsorted group is ``{tuple: multiplicity}``
    with its total kept beside it.  Tuples whose sort value is null (or of a type
    no bound can reach) are left out: no comparison with them can be true.

    ``storage``: another index whose groups this one reads (the physical plan's
    shared storage); only the index owning a storage is updated.
    """

    def __init__(self, use: IndexUse, own_pos: dict[str, int], probe_pos: dict[str, int],
                 preds: list, label: str, storage: NodeIndex | None = None,
                 times: frozenset[str] = frozenset(), keep_one: bool = False) -> None:
        """``times``: the pattern's variables that hold event times (numbers, checked at decode),
        so a bound read from them needs no type test.

        ``keep_one``: a sorted group that was a flat map stays one down to one entry; only an
        empty group goes (else it becomes a plain triple again).  For a leaf's storage (one
        entry per event, ``PatternRuntime``): a busy key's group moves between one and two
        entries with every insert and expiry (card testing's s2, about one event in five), and
        each round trip made a map and dropped it (~5,000 instructions).  Not for an inner node's
        groups, nor a gating leaf's (whose group the expiry walk reads as one tuple,
        ``_one_sibling_walk``): there the reads of a map of one cost more than the round trips
        (card testing's dense stream, loop instructions).  An index reading another's storage
        takes its owner's choice."""
        spec = use.spec
        self.keep_one = keep_one if storage is None else storage.keep_one
        self.typed_pos = frozenset(probe_pos[v] for v in times if v in probe_pos)
        self.spec = spec
        self.own_key_pos = [own_pos[v] for v in spec.key_vars]
        self.probe_key_pos = [probe_pos[v] for v in spec.key_vars]
        self.key_of_own = codegen.key_getter(self.own_key_pos)
        self.key_of_probe = codegen.key_getter(self.probe_key_pos)
        self.sorted = spec.sort_var is not None
        if storage is None:
            self.groups: dict[Any, Any] = {}
            self.totals: dict[Any, int] = {}
        else:
            self.groups = storage.groups
            self.totals = storage.totals
        self.numeric = False
        self.fast_bounds = None
        if self.sorted:
            self.sort_pos = own_pos[spec.sort_var]
            self.numeric = use.numeric
            self.bounds = [(b, probe_pos[b.other]) for b in spec.bounds]
            if self.numeric:
                self.fast_bounds = _numeric_bounds(self.bounds, "u")
                fast = _numeric_range(self.bounds, self.typed_pos, f"{label} range")
                if fast is not None:
                    self._range = fast  # type: ignore[method-assign]
        probe_only = [preds[i] for i in spec.filter_preds if set(preds[i].vars) <= set(probe_pos)]
        cand = [preds[i] for i in spec.filter_preds if not set(preds[i].vars) <= set(probe_pos)]
        self.check_probe = _checker(probe_only, [("u", probe_pos)], f"{label} probe filter")
        self.check_pair = _checker(cand, [("u", probe_pos), ("t", own_pos)], f"{label} filter")
        self.summable = not cand
        if use.equal_rest:
            assert self.check_pair is None, "an index served from another's storage has no filter"
            self.check_pair = _equal_checker([(probe_pos[v], own_pos[v]) for v in use.equal_rest],
                                             f"{label} rest of key")
            self.summable = False
        env: dict[str, Any] = {}
        body = self.update_source("x", "t", "c", env)
        self.update = codegen.define(f"{label} update", "def update(t, c):\n" + "".join(
            f"    {line}\n" for line in body), "update", env)

    # ------------------------------------------------------------ maintenance

    def fresh_source(self, G: str, pair: str, shrink: str, t: str, key: str, sk: str) -> list[str]:
        """Source lines (unindented) of ``update_source``'s ``fresh`` form with ``c = 1``, for code
        generated elsewhere (the batch loop, ``PatternRuntime.insert_inline``): ``G``, ``pair`` and
        ``shrink`` name this index's groups, ``grown_pair`` and ``_shrink`` there, ``key`` and
        ``sk`` are the group key and the sort key of tuple ``t`` (the caller's locals: no
        subscripts); the lines' own locals are ``_g`` and ``_ks``.  Sorted numeric indexes only."""
        assert self.sorted and self.numeric
        return [
            f"_g = {G}.get({key})",
            "if _g is None:",
            f"    {G}[{key}] = ({sk}, {t}, 1)",
            "elif type(_g) is tuple:",
            f"    if {sk} < _g[0]:",
            f"        {G}[{key}] = {pair}({sk}, {t}, 1, _g[0], _g[1], _g[2])",
            "    else:",
            f"        {G}[{key}] = {pair}(_g[0], _g[1], _g[2], {sk}, {t}, 1)",
            "else:",
            "    _ks = _g._keys",
            f"    if _ks and {sk} >= _ks[-1] and len(_ks) < {FLAT_MAX}:",
            f"        _ks.append({sk})",
            f"        _g._items.append({t})",
            "        _g._weights.append(1)",
            f"    elif _g.incr({sk}, {t}, 1) <= 1:",
            f"        {shrink}({G}, {key}, _g)",
        ]

    def expire_source(self, G: str, upd: str, t: str, key: str) -> list[str]:
        """Source lines (unindented) that take tuple ``t`` (the very tuple stored, of weight 1: a
        queue entry's leaf tuple) out of this index, for the batch loop's expiry
        (``PatternRuntime.expire_inline``): ``G`` names its groups, ``upd`` its ``update`` (every
        other case: a weight above 1, an entry further in, a blocked map), ``key`` is ``t``'s group
        key (the caller's local); the lines' own locals are ``_g`` and ``_ks``.  Sorted only."""
        assert self.sorted
        if self.keep_one:
            # the last entry goes with its group (no deletions from lists about to be freed)
            drop = ["if len(_ks) == 1:", f"    del {G}[{key}]", "else:", "    del _ks[0]",
                    "    del _g._items[0]", "    del _g._weights[0]"]
        else:
            drop = ["del _ks[0]", "del _g._items[0]", "del _g._weights[0]", "if len(_ks) == 1:",
                    f"    {G}[{key}] = (_ks[0], _g._items[0], _g._weights[0])"]
        return [
            f"_g = {G}.get({key})",
            "if type(_g) is tuple:",
            f"    if _g[1] is {t} and _g[2] == 1:",
            f"        del {G}[{key}]",
            "    else:",
            f"        {upd}({t}, -1)",
            "elif _g is not None:",
            "    _ks = _g._keys",
            f"    if _ks and _g._items[0] is {t} and _g._weights[0] == 1:",
            *[f"        {x}" for x in drop],
            "    else:",
            f"        {upd}({t}, -1)",
            "else:",
            f"    {upd}({t}, -1)",
        ]

    def update_source(self, name: str, t: str, c: str, env: dict[str, Any], neg: bool = False,
                      fresh: bool = False) -> list[str]:
        """Source lines (unindented) that add ``c`` to tuple ``t``'s multiplicity in this index.

        Why source: the update runs for every insert, retraction and expiry at every node
        of the path, so the generated update path inlines it (no call, no attribute reads);
        ``update`` is defined from the same lines.  ``name`` prefixes the names the lines
        read from ``env``.  A group of one entry is a plain triple (sorted) or pair
        (unsorted): most groups of a partitioned stream hold one event, and a structure
        costs more.  Sorted: a ``SumSortedMap`` from sort key to (tuple, multiplicity);
        unsorted: a dict {tuple: multiplicity} with its total in ``totals``.

        ``neg``: ``c`` is surely negative (an expiry path, ``_compile_drop``): the tuple must be
        there, so a missing group raises at once, the one-entry group holding this very tuple
        (what expiry passes: the stored tuple itself) is tested first, the sort key is read only
        where it is compared, and a flat map has no append branch (``incr_source``'s ``grow``).
        Why: the expiry of s2's leaf tuple runs for half of card testing's events.

        ``fresh``: ``t`` is surely not in the index and ``c`` is surely positive (a new event's
        leaf tuple, which holds its serial, entering its leaf: ``PatternRuntime.insert_path``):
        no presence test in a one-entry group, no sign tests, and a flat map appends an entry
        whose key equals the last one too (where ``incr`` would put it: after its equals).
        Why: the insert of s2's leaf tuple runs for two events in three of card testing's.
        """
        G, T = f"G{name}", f"T{name}"
        env[G] = self.groups
        env["pair"] = grown_pair
        env["shrink"] = _shrink
        env.update(SOURCE_NAMES)
        key = _key_expr(t, self.own_key_pos)
        if self.sorted and self.numeric and neg:
            return [
                f"k = {key}",
                f"g = {G}.get(k)",
                "if type(g) is tuple:",
                f"    if g[1] is {t}:",
                f"        m = g[2] + {c}",
                "        if m:",
                f"            {G}[k] = (g[0], {t}, m)",
                "        else:",
                f"            del {G}[k]",
                f"    elif g[0] == {t}[{self.sort_pos}] and g[1] == {t}:",
                f"        m = g[2] + {c}",
                "        if m:",
                f"            {G}[k] = (g[0], g[1], m)",
                "        else:",
                f"            del {G}[k]",
                "    else:",
                f"        raise KeyError({t})",
                "elif g is None:",
                f"    raise KeyError({t})",
                "else:",
                *[f"    {line}" for line in incr_source(G, "k", "g", f"{t}[{self.sort_pos}]", t, c, grow=False,
                                                    keep_one=self.keep_one)],
            ]
        if self.sorted and self.numeric and fresh:
            return [
                f"k = {key}",
                f"sk = {t}[{self.sort_pos}]",
                f"g = {G}.get(k)",
                "if g is None:",
                f"    {G}[k] = (sk, {t}, {c})",
                "elif type(g) is tuple:",
                *[f"    {line}" for line in pair_source(G, "k", "g", "sk", t, c)],
                "else:",
                "    ks = g._keys",
                f"    if ks and sk >= ks[-1] and len(ks) < {FLAT_MAX}:",
                "        ks.append(sk)",
                f"        g._items.append({t})",
                f"        g._weights.append({c})",
                f"    elif g.incr(sk, {t}, {c}) <= 1:",
                f"        shrink({G}, k, g)",
            ]
        if self.sorted:
            lines = [f"k = {key}"]
            if self.numeric:
                lines.append(f"sk = {t}[{self.sort_pos}]")
                ind = ""
            else:
                # a sort value of a type no bound can reach is not indexed: no comparison with it is true
                env["rank_key"] = rank_key
                lines += [f"sk = rank_key({t}[{self.sort_pos}])", "if sk is not None:"]
                ind = "    "
            lines += [ind + line for line in (
                f"g = {G}.get(k)",
                "if g is None:",
                f"    if {c} <= 0:",
                f"        raise KeyError({t})",
                f"    {G}[k] = (sk, {t}, {c})",
                "elif type(g) is tuple:",
                f"    if g[1] is {t} or g[0] == sk and g[1] == {t}:",
                f"        m = g[2] + {c}",
                "        if m:",
                f"            {G}[k] = (sk, {t}, m)",
                "        else:",
                f"            del {G}[k]",
                f"    elif {c} <= 0:",
                f"        raise KeyError({t})",
                "    else:",
                *[f"        {line}" for line in pair_source(G, "k", "g", "sk", t, c)],
                "else:",
                *[f"    {line}" for line in incr_source(G, "k", "g", "sk", t, c, keep_one=self.keep_one)],
            )]
            return lines
        env[T] = self.totals
        return [
            f"k = {key}",
            f"g = {G}.get(k)",
            "if g is None:",
            f"    if {c} <= 0:",
            f"        raise KeyError({t})",
            f"    {G}[k] = ({t}, {c})",
            "elif type(g) is tuple:",
            f"    if g[0] == {t}:",
            f"        m = g[1] + {c}",
            "        if m:",
            f"            {G}[k] = ({t}, m)",
            "        else:",
            f"            del {G}[k]",
            "    else:",
            f"        {G}[k] = {{g[0]: g[1], {t}: {c}}}",
            f"        {T}[k] = g[1] + {c}",
            "else:",
            f"    m = g.get({t}, 0) + {c}",
            "    if m:",
            f"        g[{t}] = m",
            f"        {T}[k] += {c}",
            "    else:",
            f"        del g[{t}]",
            "        if len(g) == 1:",
            f"            {G}[k] = next(iter(g.items()))",
            f"            del {T}[k]",
            "        else:",
            f"            {T}[k] += {c}",
        ]

    def range_source(self, name: str, u: str, env: dict[str, Any],
                     miss: str = "return None") -> tuple[list[str], str] | None:
        """Source lines that look up probe tuple ``u``'s group as ``g`` and its range, and run
        ``miss`` when the range is empty for sure, with the test of a one-entry group's
        sort key (``g[0]``) against the range; None when this index needs the call (a filter,
        or a range the numeric form does not take)."""
        if not self.sorted or self.fast_bounds is None or self.check_probe is not None:
            return None
        G = f"G{name}"
        env[G] = self.groups
        reads, (lo, lo_incl), (hi, hi_incl) = self.fast_bounds
        lines = [f"g = {G}.get({_key_expr(u, self.probe_key_pos)})", "if g is None:", f"    {miss}"]
        for pos, var in reads.items():
            lines.append(f"{var} = {u}[{pos}]")
            if pos not in self.typed_pos:
                lines += [f"if type({var}) is not int and type({var}) is not float:", f"    {miss}"]
        test = []
        if lo is not None:
            test.append(f"g[0] {'>=' if lo_incl else '>'} {lo}")
        if hi is not None:
            test.append(f"g[0] {'<=' if hi_incl else '<'} {hi}")
        return lines, " and ".join(test) or "True"

    def sum_source(self, name: str, u: str, env: dict[str, Any], miss: str = "return None",
                   past: bool = False) -> list[str] | None:
        """Source lines of ``probe_sum(u)`` into ``s`` that run ``miss`` when it is 0 (the
        guard-side step of the update path), or None when this index needs the call.
        ``past``: the range is likely to lie before a flat map's first key (an expiry: on a
        stream in time order, what came before the expired tuple has expired), so that is
        tested before the bisects (``end_test``)."""
        if not self.summable or self.check_probe is not None:
            return None
        if not self.sorted:
            G = f"G{name}"
            env[G] = self.groups
            key = _key_expr(u, self.probe_key_pos)
            env[f"T{name}"] = self.totals
            return [f"k = {key}", f"g = {G}.get(k)", "if g is None:", f"    {miss}",
                    f"s = g[1] if type(g) is tuple else T{name}[k]", "if not s:", f"    {miss}"]
        found = self.range_source(name, u, env, miss)
        if found is None:
            return None
        lines, test = found
        _reads, (lo, lo_incl), (hi, hi_incl) = self.fast_bounds
        env.update(SOURCE_NAMES)
        # a flat map's range sum inline: two bisects and the weights of the slice (all positive)
        return lines + ["if type(g) is tuple:",
                        f"    if not ({test}):",
                        f"        {miss}",
                        "    s = g[2]",
                        "elif g._blocks is None:",
                        "    ks = g._keys",
                        *[f"    {line}" for line in end_test("ks", None, lo_incl, hi if past else None, hi_incl, miss)],
                        *[f"    {line}" for line in bisect_source("ks", lo, lo_incl, hi, hi_incl)],
                        "    if i >= j:",
                        f"        {miss}",
                        "    s = g._weights[i] if j == i + 1 else sum(g._weights[i:j])",
                        "else:",
                        f"    s = g.range_sum({lo}, {lo_incl}, {hi}, {hi_incl})",
                        "    if not s:",
                        f"        {miss}"]

    def compile_tuples(self, label: str) -> Callable[[tuple], Any]:
        """A generated ``probe`` for enumeration: the joining tuples only (enumeration never reads
        multiplicities), a slice of a flat map's items or a one-entry group's tuple, no pairs
        built; the generic probe for a filter or a range the numeric form does not take."""
        env: dict[str, Any] = {"chk": self.check_pair}
        keep = "" if self.check_pair is None else " if chk(u, t)"
        found = self.range_source("", "u", env, miss="return ()")
        if found is not None:
            ranged, test = found
            _reads, (lo, lo_incl), (hi, hi_incl) = self.fast_bounds
            env.update(SOURCE_NAMES)
            lines = [*ranged, "if type(g) is tuple:",
                     f"    return (g[1],) if {test}{'' if not keep else ' and chk(u, g[1])'} else ()",
                     "if g._blocks is None:", "    ks = g._keys",
                     *[f"    {x}" for x in bisect_source("ks", lo, lo_incl, hi, hi_incl)],
                     f"    return {'g._items[i:j]' if not keep else '[t for t in g._items[i:j] if chk(u, t)]'}",
                     f"return [t for t, _m in g.range_items({lo}, {lo_incl}, {hi}, {hi_incl}){keep}]"]
        elif not self.sorted and self.check_probe is None:
            env["G"] = self.groups
            lines = [f"g = G.get({_key_expr('u', self.probe_key_pos)})", "if g is None:", "    return ()",
                     "if type(g) is tuple:",
                     f"    return (g[0],){'' if not keep else ' if chk(u, g[0]) else ()'}",
                     f"return {'g' if not keep else '[t for t in g if chk(u, t)]'}"]
        else:
            return self.probe_tuples
        return codegen.define(label, "def tuples(u):\n" + "".join(f"    {x}\n" for x in lines), "tuples", env)

    def size(self) -> int:
        """Tuples held (a memory measure); a group of one entry is a plain tuple."""
        return sum(1 if type(g) is tuple else len(g) for g in self.groups.values())

    # ------------------------------------------------------------------ probes

    def _range(self, u: tuple):
        """(lo, lo_incl, hi, hi_incl) for probe tuple ``u``, or None if empty."""
        lo = hi = None
        lo_incl = hi_incl = True
        rank = None
        for b, pos in self.bounds:
            lim = b.limit(u[pos])
            if lim is None:
                return None
            if self.numeric:
                t = type(lim)
                if t is not int and t is not float:
                    return None
                k = lim
            else:
                k = rank_key(lim)
                if k is None:
                    return None
                if rank is None:
                    rank = k[0]
                elif rank != k[0]:
                    return None
            if b.op in _LOWER:
                inc = _LOWER[b.op]
                if lo is None or k > lo or (k == lo and not inc):
                    lo, lo_incl = k, inc
            if b.op in _UPPER:
                inc = _UPPER[b.op]
                if hi is None or k < hi or (k == hi and not inc):
                    hi, hi_incl = k, inc
        if rank is not None:
            # confine a ranked range to values of the bound's type
            if lo is None:
                lo, lo_incl = (rank,), True
            if hi is None:
                hi, hi_incl = (rank + 1,), False
        return lo, lo_incl, hi, hi_incl

    def probe(self, u: tuple) -> Iterator[tuple[tuple, int]]:
        """(tuple, multiplicity) of every indexed tuple joining probe tuple ``u``."""
        if self.check_probe is not None and not self.check_probe(u):
            return
        g = self.groups.get(self.key_of_probe(u))
        if g is None:
            return
        check = self.check_pair
        if self.sorted:
            r = self._range(u)
            if r is None:
                return
            if type(g) is tuple:
                if _in_range(g[0], r) and (check is None or check(u, g[1])):
                    yield g[1], g[2]
                return
            if check is None:
                yield from g.iter_range(*r)
            else:
                for t, m in g.iter_range(*r):
                    if check(u, t):
                        yield t, m
        elif type(g) is tuple:
            if check is None or check(u, g[0]):
                yield g
        else:
            for t, m in g.items():
                if check is None or check(u, t):
                    yield t, m

    def probe_all(self, u: tuple) -> list[tuple[tuple, int]]:
        """``probe`` as a list: update propagation consumes every match at once."""
        if self.check_probe is not None and not self.check_probe(u):
            return []
        g = self.groups.get(self.key_of_probe(u))
        if g is None:
            return []
        check = self.check_pair
        out = []
        if self.sorted:
            r = self._range(u)
            if r is None:
                return out
            if type(g) is tuple:
                if _in_range(g[0], r) and (check is None or check(u, g[1])):
                    out.append((g[1], g[2]))
                return out
            if check is None:
                return g.range_items(*r)
            for t, m in g.range_items(*r):
                if check(u, t):
                    out.append((t, m))
        elif type(g) is tuple:
            if check is None or check(u, g[0]):
                out.append(g)
        else:
            for t, m in g.items():
                if check is None or check(u, t):
                    out.append((t, m))
        return out

    def probe_tuples(self, u: tuple):
        """``probe`` for enumeration: the joining tuples only (a list, a tuple, or a hash group's
        dict, iterated for its keys); ``compile_tuples`` generates it inline where it can."""
        if self.check_probe is not None and not self.check_probe(u):
            return ()
        g = self.groups.get(self.key_of_probe(u))
        if g is None:
            return ()
        check = self.check_pair
        if self.sorted:
            r = self._range(u)
            if r is None:
                return ()
            if type(g) is tuple:
                return (g[1],) if _in_range(g[0], r) and (check is None or check(u, g[1])) else ()
            ts = g.range_tuples(*r)
        elif type(g) is tuple:
            return (g[0],) if check is None or check(u, g[0]) else ()
        else:
            ts = g
        return ts if check is None else [t for t in ts if check(u, t)]

    def probe_sum(self, u: tuple) -> int:
        """Total multiplicity of the tuples joining ``u`` (only when ``summable``)."""
        if self.check_probe is not None and not self.check_probe(u):
            return 0
        key = self.key_of_probe(u)
        if self.sorted:
            g = self.groups.get(key)
            if g is None:
                return 0
            r = self._range(u)
            if r is None:
                return 0
            if type(g) is tuple:
                return g[2] if _in_range(g[0], r) else 0
            return g.range_sum(*r)
        g = self.groups.get(key)
        if g is None:
            return 0
        return g[1] if type(g) is tuple else self.totals[key]


class _Node:
    """A physical node with its built indexes and generated helpers (no state of its own:
    the state is in the indexes and, where kept, in ``PatternRuntime.rho``)."""

    __slots__ = (
        "id", "vars", "pos", "parent", "sibling", "children", "is_guard", "atom",
        "P", "S", "stores", "proj", "proj_pos", "edge_check", "delta_key", "delta_probe_key",
        "delta_probe_key_pos", "delta_check",
    )


class Delta:
    """What one insert or delete changed: its leaf tuple and the deltas along its path.

    ``matches()`` enumerates the matches the change added (an insert) or removed (a
    delete).  Enumeration reads the runtime's current indexes, so it must run before
    the next update of the same runtime.
    """

    __slots__ = ("runtime", "tuple", "chain", "done")

    def __init__(self, runtime: PatternRuntime, t: tuple, chain: list | None, done: list | None = None) -> None:
        self.runtime = runtime
        self.tuple = t
        self.chain = chain  # None: the change did not reach the root (no match changed)
        self.done = done  # the matches, enumerated already (``PatternRuntime._delta``)

    def matches(self) -> Iterator[list]:
        """The matches added or removed (lists of leaf tuples, one per atom)."""
        if self.done is not None:
            return iter(self.done)
        if not self.chain:
            return iter(())
        return self.runtime.changes(self.chain)

    def path(self) -> dict[int, dict[tuple, int]]:
        """The deltas of the updated path as ``{node: {tuple: multiplicity}}``."""
        return _chain_path(self.chain or ())


def _chain_path(chain: list) -> dict[int, dict[tuple, int]]:
    """An update path's deltas (``(node, tuple, multiplicity)`` items, then maybe a batch's
    ``{node: {tuple: multiplicity}}``) as ``{node: {tuple: multiplicity}}``."""
    path: dict[int, dict[tuple, int]] = {}
    for item in chain:
        if type(item) is dict:
            path.update(item)
        else:
            path[item[0]] = {item[1]: item[2]}
    return path


def _group_delta(n: _Node, d: dict[tuple, int]) -> dict[Any, list[tuple]]:
    """A node's delta grouped like its logical P index, as tuples (enumeration probes it like P)."""
    groups: dict[Any, list[tuple]] = {}
    key = n.delta_key
    for t in d:
        k = key(t)
        g = groups.get(k)
        if g is None:
            groups[k] = [t]
        else:
            g.append(t)
    return groups


def leaf_tuple_line(target: str, items: Sequence[str]) -> str:
    """The line that makes a leaf tuple of ``items`` (``PatternRuntime.leaf_source``) as ``target``."""
    return f"{target} = (" + "".join(f"{x}, " for x in items) + ")"

class PatternRuntime:
    """Executes one pattern's physical plan: its (T, N)-representation and operations."""

    def __init__(self, plan: PhysicalPlan) -> None:
        self.plan = plan
        self.pattern: CompiledPattern = plan.pattern
        name = self.pattern.name
        preds = self.pattern.predicates
        var_atoms: dict[str, int] = {}
        for a in self.pattern.atoms:
            for v in a.vars:
                var_atoms[v] = var_atoms.get(v, 0) + 1
        # the GMR of a node is kept where the plan says (the root: enumeration starts
        # there, counts come from it); every other node's tuples live in its indexes
        self.rho: list[dict[tuple, int] | None] = [{} if pn.keeps_gmr else None for pn in plan.nodes]
        times = time_variables(self.pattern)
        nodes: list[_Node] = []
        for pn in plan.nodes:
            n = _Node()
            n.id = pn.id
            n.vars = pn.vars
            n.pos = {v: i for i, v in enumerate(pn.vars)}
            n.parent = pn.parent
            n.sibling = pn.sibling
            n.children = pn.children
            n.atom = pn.atom
            n.is_guard = pn.is_guard
            nodes.append(n)
        self.nodes = nodes
        # the leaves whose storage keeps a flat map of one (``NodeIndex.keep_one``): not a gating one
        gating = {pn.gated_by for pn in plan.nodes}
        # a leaf whose storage is another leaf's (``share_leaf_storage``) is built after that one
        for pn, n in sorted(zip(plan.nodes, nodes, strict=True),
                            key=lambda x: any(u is not None and u.shares for u in (x[0].P, x[0].S))):
            n.P = n.S = None
            n.stores = ()
            n.proj = n.proj_pos = n.edge_check = n.delta_key = n.delta_probe_key = n.delta_probe_key_pos = n.delta_check = None
            if n.parent is None:
                continue
            p = nodes[n.parent]
            label = f"{name}: n{n.id}"
            assert pn.P is not None and pn.enumeration is not None
            sib_pos = {v: i for i, v in enumerate(nodes[n.sibling].vars)} if n.sibling is not None else {}
            # an index reading another's storage is built after it
            order = ("S", "P") if pn.P.storage == "S" else ("P", "S")
            for which in order:
                use = pn.P if which == "P" else pn.S
                if use is None:
                    continue
                if use.shares is not None:
                    sharer = nodes[use.shares[0]]
                    owner = sharer.P if use.shares[1] == "P" else sharer.S
                else:
                    owner = None if use.storage == "own" else (n.P if use.storage == "P" else n.S)
                probe_pos = p.pos if which == "P" else sib_pos
                idx = NodeIndex(use, n.pos, probe_pos, preds, f"{label} {which}", owner, times,
                                keep_one=n.atom is not None and n.id not in gating)
                if which == "P":
                    n.P = idx
                else:
                    n.S = idx
            n.stores = tuple(n.P if which == "P" else n.S for which in pn.stores)
            edge_preds = [preds[i] for i in pn.preds]
            # delta enumeration: group deltas like the logical P, check every edge predicate
            key_vars = pn.enumeration.key_vars
            n.delta_key = codegen.key_getter([n.pos[v] for v in key_vars])
            n.delta_probe_key_pos = [p.pos[v] for v in key_vars]
            n.delta_probe_key = codegen.key_getter(n.delta_probe_key_pos)
            n.delta_check = _checker(edge_preds, [("u", p.pos), ("t", n.pos)], f"{label} edge")
            if n.sibling is None:
                # single child (always a guard): delta_p = proj(sigma_edge(delta_n))
                n.proj_pos = [n.pos[v] for v in p.vars]
                n.edge_check = _checker(edge_preds, [("t", n.pos)], f"{label} edge filter")
            elif n.is_guard:
                n.proj_pos = [n.pos[v] for v in p.vars]
            else:
                n.proj_pos = [sib_pos[v] for v in p.vars]
            n.proj = codegen.tuple_getter(n.proj_pos)
        # leaves: where each atom's tuples enter the tree
        slot_serial: list[int] = [0] * len(self.pattern.atoms)
        leaf_of_atom: dict[int, int] = {}
        for pn in plan.nodes:
            if pn.atom is not None:
                leaf_of_atom[pn.atom] = pn.id
                slot_serial[pn.atom] = pn.vars.index(self.pattern.atoms[pn.atom].id_var)
        # residual predicates, checked on complete matches (slots = leaf tuples by atom)
        self.residual_check = None
        # (the predicates' functions by name, their calls over slot ``i`` named by a function of i)
        self._residual: tuple[dict[str, Any], Callable[[Callable[[int], str]], list[str]]] | None = None
        # the same filters as one inlined condition over the slot variables (``loop_source``), if they inline
        self._residual_inline: tuple[list[str], str, dict[str, Any]] | None = None
        if plan.residual:
            leaf_pos = {}
            for pn in plan.nodes:
                if pn.atom is not None:
                    for i, v in enumerate(pn.vars):
                        leaf_pos.setdefault(v, (pn.atom, i))
            env: dict[str, Any] = {f"f{j}": preds[pid].fn for j, pid in enumerate(plan.residual)}

            def calls(slot: Callable[[int], str]) -> list[str]:
                return [f"f{j}(" + ", ".join(f"{slot(leaf_pos[v][0])}[{leaf_pos[v][1]}]" for v in preds[pid].vars)
                        + f")  # {preds[pid].text}" for j, pid in enumerate(plan.residual)]

            src = "def residual(s):\n    return (\n        " + "\n        and ".join(
                calls(lambda i: f"s[{i}]")) + "\n    )\n"
            self.residual_check = codegen.define(f"{name}: residual filter", src, "residual", env)
            self._residual = (env, calls)
            self._residual_inline = _inline_residual([preds[pid].expr for pid in plan.residual],
                                                     self.pattern.variables, leaf_pos, times)
        self.k = len(self.pattern.atoms)
        # per atom, the position of its event's serial in its leaf tuple
        self.slot_serial = slot_serial
        items = "".join(f"E[s[{i}][{slot_serial[i]}]], " for i in range(self.k))
        self.events_of = codegen.define(f"{name}: events of a match", f"def events_of(s, E):\n    return [{items}]\n",
                                        "events_of")
        serials = "".join(f"s[{i}][{slot_serial[i]}], " for i in range(self.k))
        # the serials of a match's events (pending matches of patterns with gaps are keyed by them)
        self.serials_of = codegen.define(f"{name}: serials of a match", f"def serials_of(s):\n    return ({serials})\n",
                                         "serials_of")
        self._enum_nested = self._compile_enumeration()
        # gated nodes (``cep.plan.physical.gate_on_sibling``): node -> the sibling leaf whose S
        # groups gate its groups, and that leaf -> the node
        self._gated: dict[int, int] = {pn.id: pn.gated_by for pn in plan.nodes if pn.gated_by is not None}
        self._gating: dict[int, int] = {m: g for g, m in self._gated.items()}
        self._builds: dict[int, Callable] = {}  # gated node -> its group build (``_compile_build``)
        # keys whose gating group a deletion emptied: their gated groups go after its enumeration
        self._gate_pending: list = []
        self._deletes: dict[int, Callable] = {}  # gating leaf -> its deletion form (``_gate_wrap``)
        # the generated update path of each leaf, by leaf node and by atom
        self._props: dict[int, Callable] = {}
        self._inserts: dict[int, Callable] = {}  # the insert forms of leaves (``insert_path``)
        self._rests: dict[int, Callable] = {}  # their paths above the leaf (``insert_inline``)
        self._drop_rests: dict[int, Callable] = {}  # the expiry paths above the leaf (``expire_inline``)
        self._batches: dict[tuple[int, bool], Callable] = {}
        self._prop = {leaf: self._prop_from(leaf) for leaf in leaf_of_atom.values()}
        # batches enter at a leaf (expiry of several events) or continue a fan-out at the parent
        # of a non-guard node; compiled now so that ``cep explain --generated`` lists them
        for start in sorted({*leaf_of_atom.values(), *(n.parent for n in nodes
                                                        if n.sibling is not None and not n.is_guard)}):
            self._batch_from(start)
        self._prop_of_atom = {a: self._prop[leaf] for a, leaf in leaf_of_atom.items()}
        # ``split_chain``'s plan facts, read per new match set: the root, and the guard nodes whose one
        # delta tuple the enumeration checks against its parent's edge (fixed by the plan)
        self._split_nodes = (plan.root, frozenset(n.id for n in nodes if n.is_guard and n.sibling is not None
                                                  and n.delta_check))
        # the expiry path of each leaf (``_compile_drop``), by atom: ``drop(t)`` deletes one tuple
        drops = {leaf: self._gate_wrap(leaf, self._compile_drop(leaf), "drop") for leaf in leaf_of_atom.values()}
        self._drop_of_atom = {a: drops[leaf] for a, leaf in leaf_of_atom.items()}
        self._leaf_of_atom = leaf_of_atom
        # how an event becomes a leaf tuple, and its insert, per atom
        self.extract: dict[int, Callable] = {}
        self.inserter: dict[int, Callable] = {}
        for a, leaf in leaf_of_atom.items():
            self.extract[a], self.inserter[a] = self._compile_leaf(a, leaf, var_atoms)

    # ------------------------------------------------------------------ leaves

    @staticmethod
    def _leaf_tuple(atom, leaf_vars: tuple[str, ...], var_atoms: dict[str, int],
                    ts: str = "e.ts") -> tuple[list[str], list[str], str | None]:
        """The leaf tuple of event ``e`` (fields ``f``) with serial ``s``, as source: the lines that
        read its values into locals, its items (expressions over them, ``s`` and ``ts``: the tuple
        is ``(items...)``, ``leaf_tuple_line``), and the condition under which it is not inserted
        (a join value is null), if any, on those locals.  A field value is read once and
        canonicalized only when it is of a type that needs it (``_canon_scalar``: booleans, lists,
        dicts)."""
        lines = []
        items = []
        joins = []
        for i, v in enumerate(leaf_vars):
            attr = atom.attrs[atom.vars.index(v)]
            if attr == ID_ATTR:
                items.append("s")
            elif attr == TIME_ATTR:
                items.append(ts)
            else:
                x = f"a{i}"
                lines += [f"{x} = f.get({attr!r})", f"if type({x}) in ODD:", f"    {x} = canon({x})"]
                items.append(x)
                if var_atoms.get(v, 0) > 1:
                    joins.append(i)
        # the join values' own variables (not ``t[i]``: no subscript per event)
        return lines, items, (" or ".join(f"{items[i]} is None" for i in joins) or None)

    def _compile_leaf(self, atom: int, leaf: int, var_atoms: dict[str, int]) -> tuple[Callable, Callable]:
        """The atom's extractor (event, serial -> leaf tuple or None) and its insert
        (event, serial, same -> (leaf tuple, the update path's deltas) or None: extraction
        and update path in one call)."""
        a = self.pattern.atoms[atom]
        pn = self.plan.nodes[leaf]
        reads, items, null = self._leaf_tuple(a, pn.vars, var_atoms)
        body = [*reads, leaf_tuple_line("t", items)]
        name = self.pattern.name
        head = ["    f = e.fields"] + [f"    {line}" for line in body]
        env: dict[str, Any] = {"canon": _canon_scalar, "ODD": _ODD}
        tail = [f"    return None if {null} else t"] if null else ["    return t"]
        extract = codegen.define(f"{name}: leaf tuple of {a.alias}", "\n".join(["def ex(e, s):", *head, *tail]),
                                 "ex", env)
        lines = ["def insert(e, s, same):", *head]
        if null:
            lines += [f"    if {null}:", "        return None"]
        lines += ["    if t == same:", "        t = same", "    return t, prop(t, 1)"]
        env = {"canon": _canon_scalar, "ODD": _ODD, "prop": self._prop[leaf]}
        insert = codegen.define(f"{name}: insert into {a.alias}", "\n".join(lines), "insert", env)
        return extract, insert

    def insert_path(self, atom: int) -> Callable[[tuple], list | None] | None:
        """The update path of a new event's leaf tuple entering atom ``atom``'s leaf, ``ins(t)``: the
        same as ``_prop_of_atom[atom](t, 1)``, with the leaf's index updates in their ``fresh`` form
        (``NodeIndex.update_source``).  For code generated elsewhere (``cep.runtime.handler``'s batch
        loop, whose leaf tuples are made there with a new serial).  None where that form gains
        nothing or would not be exact: the leaf stores nothing of its own (card testing's s1), gates
        a node (its wrapper builds the gated group), or its tuple holds no serial (two events could
        give equal tuples, the second an increment)."""
        leaf = self._leaf_of_atom[atom]
        n = self.nodes[leaf]
        a = self.pattern.atoms[atom]
        if (not n.stores or leaf in self._gating
                or not any(a.attrs[a.vars.index(v)] == ID_ATTR for v in self.plan.nodes[leaf].vars)):
            return None
        f = self._inserts.get(leaf)
        if f is None:
            f = self._inserts[leaf] = self._compile_propagation(leaf, fresh=True)
        return f

    def _inline_leaf(self, atom: int, items: Sequence[str], name: Callable[[str, Any], str], *,
                     numeric: bool) -> tuple[int, Any, Callable[[list[int]], str], str | None] | None:
        """What ``insert_inline`` and ``expire_inline`` share: atom ``atom``'s leaf, its one sorted
        index (``numeric``: and a numeric one), the key expression of tuple positions over the loop's
        locals ``items``, and the test of the parent's gate (None: not gated); None when the leaf
        does not take the inline form (no insert path, several indexes, a T-reduct, the root, a
        gated leaf)."""
        if self.insert_path(atom) is None:
            return None
        leaf = self._leaf_of_atom[atom]
        n = self.nodes[leaf]
        if len(n.stores) != 1 or self.rho[leaf] is not None or n.parent is None or leaf in self._gated:
            return None
        idx = n.stores[0]
        if not idx.sorted or (numeric and not idx.numeric):
            return None

        def key(positions: list[int]) -> str:
            return items[positions[0]] if len(positions) == 1 else "(" + "".join(f"{items[p]}, " for p in positions) + ")"

        gate = None
        if n.parent in self._gated:
            m = self.nodes[self._gated[n.parent]]
            assert m.S is not None
            gate = f"{key([n.pos[v] for v in m.S.spec.key_vars])} in {name('Gg', m.S.groups)}"
        return leaf, idx, key, gate

    def insert_inline(self, atom: int, items: Sequence[str], t: str,
                      name: Callable[[str, Any], str]) -> tuple[list[str], str | None, Callable] | None:
        """``insert_path`` split for the batch loop, which makes leaf tuple ``t`` of its locals
        ``items``: the lines of the leaf's own index update (``NodeIndex.fresh_source``, on those
        locals), the test of its parent's gate (None: not gated) and the rest of the path
        (``rest(t)``, called only when the gate passes; its result is ``insert_path``'s).  ``name``
        gives the batch function's global name of an object.  None unless the leaf stores one sorted
        numeric index and no T-reduct.  Why: card testing's s2 insert (2 events in 3) is then a
        dict lookup and appends in the loop, and a call only for a card with a big purchase."""
        found = self._inline_leaf(atom, items, name, numeric=True)
        if found is None:
            return None
        leaf, idx, key, gate = found
        lines = idx.fresh_source(name("G", idx.groups), name("pair", grown_pair), name("shrink", _shrink), t,
                                 key(idx.own_key_pos), items[idx.sort_pos])
        rest = self._rests.get(leaf)
        if rest is None:
            rest = self._rests[leaf] = self._compile_propagation(leaf, fresh=True, after=True)
        return lines, gate, rest

    def expire_inline(self, atom: int, items: Sequence[str], t: str,
                      name: Callable[[str, Any], str]) -> tuple[list[str], str | None, Callable | None] | None:
        """The expiry path of atom ``atom`` split for the batch loop, whose queue entry is the leaf
        tuple ``t`` itself, unpacked into its locals ``items``: the lines that take it out of the
        leaf's one sorted index (``NodeIndex.expire_source``), the test of the parent's gate (None:
        not gated) and the rest of the path (``rest(t)``, called only when the gate passes; None:
        the leaf is the root).  None unless the leaf stores one sorted index and no T-reduct, gates
        nothing and its tuple holds its serial (one entry per event, weight 1 but for ``update``'s
        general case).  Why: card testing's s2 expiry (one event in two) is then a dict lookup and
        three deletions in the loop, and a call only for a card with a big purchase."""
        found = self._inline_leaf(atom, items, name, numeric=False)
        if found is None:
            return None
        leaf, idx, key, gate = found
        lines = idx.expire_source(name("G", idx.groups), name("upd", idx.update), t, key(idx.own_key_pos))
        rest = self._drop_rests.get(leaf)
        if rest is None:
            rest = self._drop_rests[leaf] = self._compile_drop(leaf, after=True)
        return lines, gate, rest

    def entry_guard(self, atom: int) -> tuple[dict, list[int]] | None:
        """``(groups, positions)`` when atom ``atom``'s update and expiry paths change nothing while
        ``groups`` has no entry for the key at ``positions`` of its leaf tuple (one position: the
        value; several: their tuple): its leaf stores nothing of its own (no multiplicities, no
        index: its tuples live in another node's storage, card testing's s1 in s2's) and its first
        step joins with its sibling's index, whose groups are those; an empty join stops the
        change there.  Where its parent is gated, the groups are the gating leaf's: the paths
        test that gate before anything else.  None otherwise.  For code generated elsewhere (``cep.runtime.handler``
        skips the call of such a path: on a sparse stream most such joins are empty)."""
        nid = self._leaf_of_atom[atom]
        n = self.nodes[nid]
        if self.rho[nid] is not None or n.stores or n.parent is None or n.sibling is None:
            return None
        if n.parent in self._gated:
            # its parent is gated (``cep.plan.physical.gate_on_sibling``): both paths test the gate
            # first (``_gate_source``), and the gating leaf's groups are fewer than the sibling's
            # (card testing: the cards with a big purchase in the window, ~16% of those with a small one)
            m = self.nodes[self._gated[n.parent]]
            assert m.S is not None
            return m.S.groups, [n.pos[v] for v in m.S.spec.key_vars]
        S = self.nodes[n.sibling].S
        if S is None:
            return None
        return S.groups, list(S.probe_key_pos)

    def leaf_source(self, atom: int, ts: str = "e.ts") -> tuple[list[str], list[str], str | None, dict[str, Any]]:
        """Atom ``atom``'s leaf tuple as source, for code generated elsewhere (the engine's
        per-type handlers, ``cep.runtime.handler``), from event ``e`` (fields ``f``, time ``ts``:
        an expression, a local where the caller has one) and serial ``s``: unindented lines that
        read its values into locals, its items (``leaf_tuple_line`` makes the tuple of them, under
        the caller's name), the condition on those locals under which the tuple is not inserted
        (None: always inserted), and the names the lines use.  Items rather than a finished line:
        the caller places the time and the serial by them (``handler._entry_layout``)."""
        var_atoms: dict[str, int] = {}
        for a in self.pattern.atoms:
            for v in a.vars:
                var_atoms[v] = var_atoms.get(v, 0) + 1
        reads, items, null = self._leaf_tuple(self.pattern.atoms[atom], self.plan.nodes[self._leaf_of_atom[atom]].vars,
                                              var_atoms, ts)
        return reads, items, null, {"canon": _canon_scalar, "ODD": _ODD}

    # ----------------------------------------------------------------- updates

    def _compile_propagation(self, start: int, fresh: bool = False, after: bool = False) -> Callable:
        """The update path from node ``start`` (a leaf, or where a fan-out continues) as one
        generated function of straight-line code.

        Why: it runs for every insert, retraction and expiry, and the path to the root is
        fixed by the plan, so each level becomes a few lines: its index updates inlined
        (``NodeIndex.update_source``), then a projection, a guard-side range sum (inlined
        where ``NodeIndex.sum_source`` can), or a fan-out.  A fan-out that reaches one
        sibling tuple (the common case on partitioned streams) continues as one tuple in
        the parent's own generated path; two or more continue as a batch
        (``_compile_batch``).  Returns the path's deltas, or None when the change does
        not reach the root (no match changed).

        ``fresh``: the insert form of leaf ``start`` (``insert_path``): ``prop(t)`` with ``c = 1``,
        and the leaf's own index updates know the tuple is new.  ``after`` (with ``fresh``): the
        path above those updates and the parent's gate, which the caller did (``insert_inline``).
        """
        nodes = self.nodes
        env: dict[str, Any] = {}
        lines = [f"def prop(t{start}):", f"    c{start} = 1"] if fresh else [f"def prop(t{start}, c{start}):"]
        done: list[str] = []  # the path's items so far, built only when the change reaches the root

        def path(*more: str) -> str:
            return "[" + "".join(f"{x}, " for x in done + list(more)) + "]"

        n = nodes[start]
        gated = False  # the gate of a gated node on the path was tested (``_gate_source``)
        while True:
            nid = n.id
            t, c = f"t{nid}", f"c{nid}"
            done.append(f"({nid}, {t}, {c})")
            if nid in self._gated and not gated:
                lines += [f"    {line}" for line in self._gate_source(nid, n, t, "return None", env)]
            first = nid == start
            if not (after and first):
                lines += [f"    {line}" for line in self._node_update_source(n, t, c, env, fresh=fresh and first)]
            p = n.parent
            if p is None:
                lines.append(f"    return {path()}")
                break
            if after and first and p in self._gated:
                gated = True
            elif p in self._gated:
                # tested before the step up (a range sum or a fan-out) that would only feed it
                lines += [f"    {line}" for line in self._gate_source(p, n, t, "return None", env, True)]
                gated = True
            if n.sibling is None or n.is_guard:
                lines += [f"    {line}" for line in self._single_step_source(n, t, c, env)]
            else:
                S = nodes[n.sibling].S
                env[f"up{p}"] = self._prop_from(p)
                env[f"pb{p}"] = self._batch_from(p)
                found = S.range_source(f"s{nid}", t, env)
                # one sibling tuple (the common case on partitioned streams) continues in the
                # parent's own generated path; more continue as one batch (equal parent tuples
                # merged); every c * mu has the sign of c, so no parent delta sums to zero
                one = [f"    rest = up{p}({{}}, {c} * {{}})", "    if rest is None:", "        return None",
                       f"    return {path('*rest')}"]
                if found is not None and S.check_pair is None:
                    ranged, test = found
                    _reads, (lo, lo_incl), (hi, hi_incl) = S.fast_bounds
                    env.update(SOURCE_NAMES)
                    lines += [f"    {line}" for line in ranged]
                    lines += ["    if type(g) is tuple:", f"        if not ({test}):", "            return None",
                              f"    {one[0].format(_tuple_expr('g[1]', n.proj_pos), 'g[2]')}",
                              *[f"    {x}" for x in one[1:]],
                              "    if g._blocks is None:", "        ks = g._keys",
                              # an insert in time order: a range from its own time on is likely past the last key
                              *[f"        {line}" for line in end_test("ks", lo, lo_incl, None, hi_incl, "return None")],
                              *[f"        {line}" for line in bisect_source("ks", lo, lo_incl, hi, hi_incl)],
                              "        if i >= j:", "            return None",
                              "        if j == i + 1:", "            u = g._items[i]",
                              f"        {one[0].format(_tuple_expr('u', n.proj_pos), 'g._weights[i]')}",
                              *[f"        {x}" for x in one[1:]],
                              "        us = zip(g._items[i:j], g._weights[i:j])", "    else:",
                              f"        us = g.range_items({lo}, {lo_incl}, {hi}, {hi_incl})"]
                else:
                    env[f"all{nid}"] = S.probe_all
                    lines += [f"    us = all{nid}({t})", "    if not us:", "        return None",
                              "    if len(us) == 1:", "        u, mu = us[0]",
                              f"    {one[0].format(_tuple_expr('u', n.proj_pos), 'mu')}",
                              *[f"    {x}" for x in one[1:]]]
                lines += ["    dp = {}", "    for u, mu in us:", f"        k = {_tuple_expr('u', n.proj_pos)}",
                          f"        dp[k] = dp.get(k, 0) + {c} * mu", "    if not dp:", "        return None",
                          f"    rest = pb{p}(dp)", "    if rest is None:", "        return None",
                          f"    return {path('rest')}"]
                break
            n = nodes[p]
        what = f"leaf {start}" if nodes[start].atom is not None else f"from n{start}"
        verb = "insert into" if fresh else "propagate"
        tail = " after its insert" if after else ""
        return codegen.define(f"{self.pattern.name}: {verb} {what}{tail}", "\n".join(lines), "prop", env)

    def _node_update_source(self, n: _Node, t: str, c: str, env: dict[str, Any], neg: bool = False,
                            fresh: bool = False) -> list[str]:
        """Generated lines (unindented) that add ``c`` to tuple ``t`` of node ``n``: its T-reduct
        multiplicity and every index it stores; shared by the one-tuple and the batch update paths
        (``neg``: ``c`` is surely negative, ``fresh``: ``t`` a new leaf tuple, ``NodeIndex.update_source``)."""
        nid = n.id
        lines: list[str] = []
        rho = self.rho[nid]
        if rho is not None:
            env[f"rho{nid}"] = rho
            lines += [f"m = rho{nid}.get({t}, 0) + {c}", "if m > 0:", f"    rho{nid}[{t}] = m",
                      "elif m == 0:", f"    del rho{nid}[{t}]", "else:",
                      "    raise AssertionError('negative multiplicity in the T-reduct')"]
        for j, idx in enumerate(n.stores):
            lines += idx.update_source(f"{nid}_{j}", t, c, env, neg, fresh)
        return lines

    def _prop_from(self, start: int) -> Callable[[tuple, int], list | None]:
        """The generated update path from node ``start``, compiled once."""
        f = self._props.get(start)
        if f is None:
            f = self._props[start] = self._gate_wrap(start, self._compile_propagation(start), "prop")
        return f

    def _batch_from(self, start: int, keep: bool = True) -> Callable[[dict[tuple, int]], dict | None]:
        """The generated batch update path from node ``start`` (``_compile_batch``), compiled once;
        ``keep=False``: the expiry form, which builds no path and returns None."""
        f = self._batches.get((start, keep))
        if f is None:
            f = self._batches[(start, keep)] = self._gate_wrap(start, self._compile_batch(start, keep), "batch")
        return f

    # ----------------------------------------------------------- gated groups

    def _gate_source(self, gated: int, n: _Node, t: str, miss: str, env: dict[str, Any],
                     after_update: bool = False) -> list[str]:
        """Generated lines (unindented) that run ``miss`` when the leaf gating node ``gated``
        (``cep.plan.physical.gate_on_sibling``) has no group of the key of tuple ``t`` of node ``n``
        (the gated node or one of its children): then the gated node keeps no group of that key
        and nothing above it changes.  ``after_update``: the lines follow ``n``'s update
        (``_node_update_source``), whose last index update left its group key in ``k``: when
        that is the gate's key, it is read from there."""
        m = self.nodes[self._gated[gated]]
        assert m.S is not None
        env[f"Gg{gated}"] = m.S.groups
        key = _key_expr(t, [n.pos[v] for v in m.S.spec.key_vars])
        if after_update and n.stores and _key_expr(t, n.stores[-1].own_key_pos) == key:
            key = "k"
        return [f"if {key} not in Gg{gated}:", f"    {miss}"]

    def _gate_wrap(self, start: int, fn: Callable, kind: str) -> Callable:
        """``fn`` (an update path from node ``start``: ``"prop"``, ``"drop"`` or ``"batch"``) as it
        runs: where ``start`` is the leaf gating a node, wrapped so that a change that gives the
        leaf a group of a new key builds the gated node's group of that key first
        (``_build_gated``), and a change that leaves it with none drops the gated node's group
        after the path (which may still read it: the expiry of the last big purchase of a card
        lowers the parent tuple by its range sum over the gated group)."""
        gated = self._gating.get(start)
        if gated is None:
            return fn
        m = self.nodes[start]
        assert m.S is not None
        key = _key_expr("t", m.S.own_key_pos)
        build = self._builds.get(gated)
        if build is None:
            build = self._builds[gated] = self._compile_build(gated)
        env = {"inner": fn, "Gm": m.S.groups, "build": build}
        drop = self._drop_group_source(gated, "k", env)
        if kind == "prop":
            lines = ["def prop(t, c):", f"    k = {key}", "    if c > 0 and k not in Gm:", "        build(k)",
                     "    r = inner(t, c)", "    if k not in Gm:", *[f"        {x}" for x in drop], "    return r"]
            # the form a deletion that enumerates runs (a retraction: ``delete``, ``apply``): the matches
            # it undoes are enumerated after the path, through the gated group, which goes only then
            # (``_settle_gates``)
            env["PG"] = self._gate_pending
            self._deletes[start] = codegen.define(
                f"{self.pattern.name}: delete from leaf {start}, gating n{gated}",
                "\n".join(["def delete(t, c):", "    r = inner(t, c)", f"    k = {key}", "    if k not in Gm:",
                           "        PG.append(k)", "    return r"]), "delete", env)
        elif kind == "drop":
            lines = ["def drop(t):", "    inner(t)", f"    k = {key}", "    if k not in Gm:", *[f"        {x}" for x in drop]]
        else:
            lines = ["def pb(d):", "    for t, c in d.items():", "        if c > 0:", f"            k = {key}",
                     "            if k not in Gm:", "                build(k)", "    r = inner(d)", "    for t in d:",
                     f"        k = {key}", "        if k not in Gm:", *[f"            {x}" for x in drop], "    return r"]
        what = {"prop": "propagate", "drop": "drop", "batch": "batch"}[kind]
        return codegen.define(f"{self.pattern.name}: {what} leaf {start}, gating n{gated}", "\n".join(lines),
                              lines[0][4:lines[0].index("(")], env)

    def _compile_build(self, gated: int) -> Callable[[Any], None]:
        """The generated build of node ``gated``'s group of a key from its children's storages: per
        tuple of its guard child under the key, its projection with the multiplicity times the other
        child's range sum (the update path's step from the guard child, ``_single_step_source``),
        equal projections merged, then applied to the node's stores (``_node_update_source``).
        Runs once per key and appearance of the gating leaf's group: O(group), not per event."""
        n = self.nodes[gated]
        g, h = self.nodes[n.children[0]], self.nodes[n.children[1]]
        key_vars = self.nodes[self._gated[gated]].S.spec.key_vars  # type: ignore[union-attr]
        src = next(u for u in (g.P, g.S) if u is not None and u.spec.key_vars == key_vars
                   and (u.numeric or not u.sorted))
        S = h.S
        assert S is not None and g.proj_pos is not None
        env: dict[str, Any] = {"SRC": src.groups}
        lines = ["def build(gk):", *[f"    {x}" for x in self._drop_group_source(gated, "gk", env)],
                 "    grp = SRC.get(gk)", "    if grp is None:", "        return"]
        if src.sorted:
            lines += ["    if type(grp) is tuple:", "        us = ((grp[1], grp[2]),)",
                      "    elif grp._blocks is None:", *[f"        {x}" for x in self._one_pass_build(n, g, src, S, env)],
                      "        us = zip(grp._items, grp._weights)",
                      "    else:", "        us = [(x, w) for _k, x, w in grp.entries()]"]
        else:
            lines += ["    us = (grp,) if type(grp) is tuple else grp.items()"]
        step = S.sum_source("b", "u", env, miss="continue")
        if step is None:
            if S.summable:
                env["bsum"] = S.probe_sum
                step = ["s = bsum(u)"]
            else:
                env["ball"] = S.probe_all
                step = ["s = sum([w for _x, w in ball(u)])"]
            step += ["if not s:", "    continue"]
        lines += ["    acc = {}", "    for u, mu in us:", *[f"        {x}" for x in step],
                  f"        t = {_tuple_expr('u', g.proj_pos)}", "        acc[t] = acc.get(t, 0) + mu * s",
                  "    for t, c in acc.items():",
                  *[f"        {x}" for x in self._node_update_source(n, "t", "c", env)]]
        return codegen.define(f"{self.pattern.name}: build a group of n{gated}", "\n".join(lines), "build", env)

    def _one_pass_build(self, n: _Node, g: _Node, src: NodeIndex, S: NodeIndex, env: dict[str, Any]) -> list[str]:
        """Lines (unindented; ``grp``: the guard child's flat group of key ``gk``) that build node
        ``n``'s group in one pass over ``grp`` and return, or no lines where that does not apply.

        It applies to twins (card testing: ``s2`` and ``s1`` read one storage, so each ``s2``'s
        range sum is over the very group walked): the sums come from one running sum of its
        weights (two bisects and a difference per entry, no group lookup, no slice), and the
        node's tuples (fixed by the group key and the sort key) come out in sort order, equal ones
        next to each other, so its group is made as the generic updates would leave it (a triple,
        or a flat map that takes the lists) instead of entry by entry."""
        if self.rho[n.id] is not None or len(n.stores) != 1 or S.groups is not src.groups or not src.numeric:
            return []
        idx = n.stores[0]
        if not (idx.sorted and idx.numeric) or S.check_probe is not None or S.fast_bounds is None \
                or not S.summable or list(S.probe_key_pos) != list(src.own_key_pos):
            return []
        if [g.proj_pos[q] for q in idx.own_key_pos] != src.own_key_pos or g.proj_pos[idx.sort_pos] != src.sort_pos \
                or not set(g.proj_pos) <= {*src.own_key_pos, src.sort_pos}:
            return []
        reads, (lo, lo_incl), (hi, hi_incl) = S.fast_bounds
        env.update(SOURCE_NAMES)
        env.update({"accumulate": accumulate, "flat_map": flat_map, "GN": idx.groups})
        per = []
        for pos, var in reads.items():
            per.append(f"{var} = u[{pos}]")
            if pos not in S.typed_pos:
                per += [f"if type({var}) is not int and type({var}) is not float:", "    continue"]
        return [
            "ks, its, ws = grp._keys, grp._items, grp._weights",
            "pre = [0, *accumulate(ws)]",
            *self._whole_window_build(g, src, S, env),
            "nk, ni, nw = [], [], []",
            "for x in range(len(ks)):",
            "    u = its[x]",
            *[f"    {x}" for x in per],
            *[f"    {x}" for x in bisect_source("ks", lo, lo_incl, hi, hi_incl)],
            "    if i >= j:",
            "        continue",
            "    c = ws[x] * (pre[j] - pre[i])",
            f"    sk = u[{src.sort_pos}]",
            "    if nk and nk[-1] == sk:",
            "        nw[-1] += c",
            "    else:",
            "        nk.append(sk)",
            f"        ni.append({_tuple_expr('u', g.proj_pos)})",
            "        nw.append(c)",
            "if len(nk) == 1:",
            "    GN[gk] = (nk[0], ni[0], nw[0])",
            "    return",
            f"if 1 < len(nk) <= {FLAT_MAX}:",
            "    GN[gk] = flat_map(nk, ni, nw)",
            "    return",
            "if not nk:",
            "    return"]

    def _whole_window_build(self, g: _Node, src: NodeIndex, S: NodeIndex, env: dict[str, Any]) -> list[str]:
        """Lines (in ``_one_pass_build``, after ``pre``) that build the group with no loop when each
        entry's range is every earlier entry, or no lines where the bounds do not allow that.

        It applies when the range ends just before the entry's own sort key (``s1.ts < s2.ts``)
        and starts at most at a bound that grows with it (``s1.ts >= s2.ts - 3600``): then, keys
        distinct and the first one inside the last entry's range (the group spans less than the
        window: a stream in time order), entry ``x`` has the sum ``pre[x]``, the first has none,
        and the node's tuples are the projections of the others, in order (C calls: ``map``,
        slices).  Why: a card's first big purchase builds its group (1 in 23 records of card
        testing's dense stream), and the loop cost ~57 opcodes an entry."""
        reads, (lo, lo_incl), (hi, hi_incl) = S.fast_bounds
        lower = [b for b, _p in S.bounds if b.op in _LOWER]
        upper = [b for b, _p in S.bounds if b.op in _UPPER]
        if (list(reads) != [src.sort_pos] or src.sort_pos not in S.typed_pos or len(g.proj_pos) < 2
                or len(upper) != 1 or hi != reads[src.sort_pos] or hi_incl or any(b.scale != 1 for b in lower)):
            return []
        env.update({"mul": operator.mul, "proj": operator.itemgetter(*g.proj_pos)})
        var = reads[src.sort_pos]
        test = f"len(ks) <= {FLAT_MAX + 1} and len(set(ks)) == len(ks)"
        if lo is not None:
            test = f"ks[0] {'>=' if lo_incl else '>'} {lo} and {test}"
        return [
            f"{var} = ks[-1]",
            f"if {test}:",
            "    if len(ks) > 2:",
            "        GN[gk] = flat_map(ks[1:], list(map(proj, its[1:])), list(map(mul, ws[1:], pre[1:-1])))",
            "    elif len(ks) == 2:",
            "        GN[gk] = (ks[1], proj(its[1]), ws[1] * ws[0])",
            "    return"]

    def _drop_group_source(self, gated: int, k: str, env: dict[str, Any]) -> list[str]:
        """Generated lines (unindented): node ``gated``'s group of key ``k`` goes from every store."""
        lines = []
        for j, idx in enumerate(self.nodes[gated].stores):
            env[f"GD{j}"], env[f"TD{j}"] = idx.groups, idx.totals
            lines += [f"GD{j}.pop({k}, None)", f"TD{j}.pop({k}, None)"]
        return lines

    def _compile_drop(self, start: int, after: bool = False) -> Callable[[tuple], None]:
        """The expiry path of leaf ``start``: the same updates as ``_prop_from(start)(t, -1)``,
        as one generated function that returns nothing.

        Why its own form: window expiry deletes every retained tuple once and enumerates
        nothing, so it builds no path (no lists, no dicts of deltas), and the first fan-out
        on the way up (a leaf's sibling range: on a keyed stream in time order, the expiry
        of the oldest tuple lowers the parent tuple of every later sibling tuple in the
        window) is applied in the same loop that walks the range, without a delta dict and
        a call per level.  Each parent change has the sign of the deletion, so applying them
        one by one instead of merged keeps every multiplicity non-negative; a fan-out of at
        least ``MERGE_MIN`` tuples continues as a batch (its sort-merge).

        ``after``: the path above the leaf's own index updates and its parent's gate, which the
        caller did (``expire_inline``).
        """
        nodes = self.nodes
        env: dict[str, Any] = {}
        lines = [f"def drop(t{start}):", f"    c{start} = -1"]
        n = nodes[start]
        gated = False
        while True:
            nid = n.id
            t, c = f"t{nid}", f"c{nid}"
            first = after and nid == start
            if nid in self._gated and not gated:
                lines += [f"    {line}" for line in self._gate_source(nid, n, t, "return None", env)]
            if not first:
                lines += [f"    {line}" for line in self._node_update_source(n, t, c, env, neg=True)]
            p = n.parent
            if p is None:
                break
            if first and p in self._gated:
                gated = True
            elif p in self._gated:
                lines += [f"    {line}" for line in self._gate_source(p, n, t, "return None", env, True)]
                gated = True
            if n.sibling is None or n.is_guard:
                lines += [f"    {line}" for line in self._single_step_source(n, t, c, env, past=True)]
                n = nodes[p]
                continue
            # the leaf's own change is -1: the walk's products are negations
            lines += [f"    {line}" for line in self._fanout_drop_source(n, t, "-1" if nid == start else c, env)]
            break
        what = f"leaf {start}" if nodes[start].atom is not None else f"from n{start}"
        tail = " after its removal" if after else ""
        if not any(re.search(rf"\bc{start}\b", x) for x in lines[2:]):
            del lines[1]  # the change is read nowhere (a fan-out from the leaf negates: ``_times``)
        return codegen.define(f"{self.pattern.name}: drop {what}{tail}", "\n".join(lines), "drop", env)

    def _single_step_source(self, n: _Node, t: str, c: str, env: dict[str, Any], past: bool = False) -> list[str]:
        """Generated lines (unindented) of an update path's step from node ``n`` to its parent
        that gives one parent tuple ``t<p>``, ``c<p>`` (a single child, or the guard side's
        range sum), or returns None when the change stops there."""
        nid, p = n.id, n.parent
        proj = _tuple_expr(t, n.proj_pos)
        lines: list[str] = []
        if n.sibling is None:
            if n.edge_check is not None:
                env[f"chk{nid}"] = n.edge_check
                lines += [f"if not chk{nid}({t}):", "    return None"]
            return lines + [f"t{p} = {proj}", f"c{p} = {c}"]
        S = self.nodes[n.sibling].S
        inline = S.sum_source(f"s{nid}", t, env, past=past)
        if inline is not None:
            lines += inline
        else:
            if S.summable:
                env[f"sum{nid}"] = S.probe_sum
                lines.append(f"s = sum{nid}({t})")
            else:
                env[f"all{nid}"] = S.probe_all
                lines.append(f"s = sum([mu for _u, mu in all{nid}({t})])")
            lines += ["if not s:", "    return None"]
        return lines + [f"t{p} = {proj}", f"c{p} = {c} * s"]

    def _fanout_drop_source(self, n: _Node, t: str, c: str, env: dict[str, Any]) -> list[str]:
        """Generated lines (unindented) of the expiry path's fan-out from non-guard node ``n``:
        the sibling tuples in range as ``us``, then per tuple the parent's change applied and
        its own contribution collected for the grandparent's batch (``_compile_drop``)."""
        nid, p = n.id, n.parent
        P = self.nodes[p]
        S = self.nodes[n.sibling].S
        found = S.range_source(f"s{nid}", t, env)
        big = f"db{p}"
        env[big] = self._batch_from(p, keep=False)
        merge = P.parent is not None and P.sibling is not None and not P.is_guard
        bulk = ["dp = {}", "for u, mu in us:", f"    k = {_tuple_expr('u', n.proj_pos)}",
                f"    dp[k] = {_add('dp.get(k, 0)', c, 'mu')}", f"{big}(dp)", "return None"]
        if found is not None and S.check_pair is None:
            ranged, test = found
            _reads, (lo, lo_incl), (hi, hi_incl) = S.fast_bounds
            env.update(SOURCE_NAMES)
            lines = [*ranged, "if type(g) is tuple:", f"    if not ({test}):", "        return None",
                     "    us = ((g[1], g[2]),)",
                     "elif g._blocks is None:", "    ks = g._keys",
                     *[f"    {x}" for x in bisect_source("ks", lo, lo_incl, hi, hi_incl)],
                     "    if i >= j:", "        return None"]
            if merge:
                lines += [f"    if j - i >= {MERGE_MIN}:", "        us = zip(g._items[i:j], g._weights[i:j])",
                          *[f"        {x}" for x in bulk]]
            lines += ["    us = zip(g._items[i:j], g._weights[i:j])", "else:",
                      f"    us = g.range_items({lo}, {lo_incl}, {hi}, {hi_incl})"]
            if merge:
                lines += [f"    if len(us) >= {MERGE_MIN}:", *[f"        {x}" for x in bulk]]
        else:
            env[f"all{nid}"] = S.probe_all
            lines = [f"us = all{nid}({t})", "if not us:", "    return None"]
            if merge:
                lines += [f"if len(us) >= {MERGE_MIN}:", *[f"    {x}" for x in bulk]]
        step = [f"t = {_tuple_expr('u', n.proj_pos)}", f"c = {_times(c, 'mu')}",
                *self._node_update_source(P, "t", "c", env, neg=True)]
        more = [] if P.parent is None else self._contribution_source(P, env)
        walk = self._flat_walk_source(n, t, c, more, env) if found is not None and S.check_pair is None else None
        loop = ["for u, mu in us:", *[f"    {x}" for x in step + more]]
        if walk is not None:
            loop = [*walk, "else:", *[f"    {x}" for x in loop]]
        if P.parent is None:
            return lines + loop
        env[f"db{P.parent}"] = self._batch_from(P.parent, keep=False)
        return lines + ["dp = {}", *loop, "if dp:", f"    db{P.parent}(dp)"]

    def _flat_walk_source(self, n: _Node, t: str, c: str, more: list[str], env: dict[str, Any]) -> list[str] | None:
        """The expiry fan-out's parent updates as one walk of the parent's group (``_fanout_drop_source``),
        or None where it does not apply.

        Why: on a keyed stream in time order the expiry of the oldest tuple of a non-guard leaf
        (card testing's ``s1``) lowers the parent tuple of every later sibling tuple in the
        window (1.5-2.4 per expiry), and each was a whole generic update (group lookup, type
        tests, a bisect from the start, the entry compared).  When the parent has one sorted
        store whose group key and sort key are the sibling group's own (every parent tuple of the
        range is in one parent group, in the range's order), the lines fetch that group once and,
        when it is a flat map, find each parent tuple by a bisect from the previous one's place,
        lower its weight in place and delete the entries that reach zero at the end (positions
        stay valid meanwhile; nothing else reads the group during the walk), shrinking the group
        as the generic update would.  Opens an ``if`` whose ``else`` the caller fills."""
        P = self.nodes[n.parent]
        S = self.nodes[n.sibling].S
        if self.rho[P.id] is not None or len(P.stores) != 1:
            return None
        idx = P.stores[0]
        if not (idx.sorted and idx.numeric and S.sorted and S.numeric):
            return None
        if [n.proj_pos[q] for q in idx.own_key_pos] != S.own_key_pos or n.proj_pos[idx.sort_pos] != S.sort_pos:
            return None
        if P.sibling is not None and self.nodes[P.sibling].S.groups is idx.groups:
            return None
        G = f"Gw{P.id}"
        env[G] = idx.groups
        env["seek"] = seek_entry
        env.update(SOURCE_NAMES)
        # the parent tuples' key, and (when it reads only those positions) the key of the
        # grandparent step's sibling group, from the expired tuple ``t``: with no such group
        # (card testing: no big purchase of the card) the walk has no grandparent step
        key_src = {q: f"{t}[{S.probe_key_pos[S.own_key_pos.index(n.proj_pos[q])]}]" for q in idx.own_key_pos}
        lean = None
        if more and P.sibling is not None:
            S2 = self.nodes[P.sibling].S
            if S2.probe_key_pos and set(S2.probe_key_pos) <= set(key_src):
                env[f"Gh{P.id}"] = S2.groups
                parts = [key_src[q] for q in S2.probe_key_pos]
                look = f"Gh{P.id}.get({parts[0] if len(parts) == 1 else '(' + ''.join(x + ', ' for x in parts) + ')'})"
                lean = f"{look} is None"
        # the range's parent tuples are consecutive entries of the group (each has a positive
        # weight: this tuple joined it): the next entry first, a bisect (two-argument: the
        # fast call) when it is not; ``dead``: the first position that reached zero, a list of
        # them when there are more
        body = [
                "    for u, mu in us:",
                f"        t = {_tuple_expr('u', n.proj_pos)}",
                f"        c = {_times(c, 'mu')}",
                "        i += 1",
                "        if i >= npk or pit[i] != t:",
                f"            i = bisect_left(pks, t[{idx.sort_pos}])",
                "            if i == npk or pit[i] != t:",
                "                i = seek(pks, pit, t, i)",
                "        w = pw[i] + c",
                "        pw[i] = w",
                "        if not w:",
                "            if dead is None:",
                "                dead = i",
                "            elif type(dead) is int:",
                "                dead = [dead, i]",
                "            else:",
                "                dead.append(i)"]
        walk = [*body, *[f"        {x}" for x in more]]
        sv_pos, one_body = None, body
        if set(n.proj_pos) <= {*S.own_key_pos, S.sort_pos}:
            # every parent tuple is fixed by its group key and sort key (card testing's n3 tuple
            # (card, ts) of an ``s2`` (ts, card, serial)): within the group its sort key finds it,
            # so where no grandparent step needs the tuple it is neither built nor compared
            def keyed(sk: str, *read: str) -> list[str]:
                return ["    for u, mu in us:", *read, "        i += 1",
                        f"        if i >= npk or pks[i] != {sk}:",
                        f"            i = bisect_left(pks, {sk})",
                        f"            if i == npk or pks[i] != {sk}:",
                        "                raise KeyError(u)",
                        f"        w = {_add('pw[i]', c, 'mu')}",
                        *body[9:]]
            # the one-sibling walk's range test reads the sort key too: read once, as ``sv``
            sv_pos, one_body = S.sort_pos, keyed("sv", f"        sv = u[{S.sort_pos}]")
            body = keyed(f"u[{S.sort_pos}]")
        one = self._one_sibling_walk(n, P, c, one_body, sv_pos, env) if lean is not None else None
        if one is not None:
            walk = [f"    gh = {look}", "    if gh is None:", *[f"    {x}" for x in body], "    elif type(gh) is tuple:",
                        *[f"    {x}" for x in one], "    else:", *[f"    {x}" for x in walk]]
        elif lean is not None:
            walk = [f"    if {lean}:", *[f"    {x}" for x in body], "    else:", *[f"    {x}" for x in walk]]
        elif not more:
            walk = body
        return [f"gp = {G}.get({_key_expr(t, S.probe_key_pos)})",
                "if gp is not None and type(gp) is not tuple and gp._blocks is None:",
                "    pks, pit, pw = gp._keys, gp._items, gp._weights",
                "    i = -1",
                "    npk = len(pks)",
                "    dead = None",
                *walk,
                "    if dead is not None:",
                "        if type(dead) is int:",
                "            del pks[dead]",
                "            del pit[dead]",
                "            del pw[dead]",
                "        else:",
                "            for i in sorted(dead, reverse=True):",
                "                del pks[i]",
                "                del pit[i]",
                "                del pw[i]",
                "        if len(pks) == 1:",
                f"            {G}[{_key_expr(t, S.probe_key_pos)}] = (pks[0], pit[0], pw[0])",
                "        elif not pks:",
                f"            del {G}[{_key_expr(t, S.probe_key_pos)}]"]

    def _one_sibling_walk(self, n: _Node, P: _Node, c: str, body: list[str], sv_pos: int | None,
                          env: dict[str, Any]) -> list[str] | None:
        """The expiry walk (``_flat_walk_source``) for a grandparent step whose sibling group is one
        tuple (card testing: the one big purchase of the card in the window), or None where it does
        not apply.  The caller looks that group up once as ``gh`` (its key is the walked group's: the
        same for every parent tuple of the walk); the lines are the walk (``body``, the parent updates
        without the grandparent step) that adds, per parent tuple, its
        change to one sum ``a`` when the sibling tuple is in its range; the grandparent's delta is
        then that sum times the sibling tuple's weight, one entry.  The general walk's step per
        parent tuple is a group lookup, a tuple built and a delta entry updated.  ``sv_pos``: the
        walked tuple's position that ``body`` reads as ``sv`` (None: none); the range test reads it
        there, and the sibling tuple's key once, as ``gv``."""
        S2 = self.nodes[P.sibling].S
        if P.is_guard or S2.check_pair is not None:
            return None
        found = S2.range_source(f"s{P.id}", "t", env, miss="continue")
        if found is None:
            return None
        _lines, test = found
        reads, _lo, _hi = S2.fast_bounds
        per = []
        for pos, var in reads.items():
            if n.proj_pos[pos] == sv_pos:
                test = re.sub(rf"\b{var}\b", "sv", test)
                var = "sv"
            else:
                per.append(f"{var} = u[{n.proj_pos[pos]}]")
            if pos not in S2.typed_pos:
                per += [f"if type({var}) is not int and type({var}) is not float:", "    continue"]
        per += [f"if {test.replace('g[0]', 'gv')}:", f"    a = {_add('a', c, 'mu')}"]
        rest = ["    a = 0", "    gv = gh[0]", *body, *[f"        {x}" for x in per], "    if a:",
                f"        k = {_tuple_expr('gh[1]', P.proj_pos)}", "        dp[k] = dp.get(k, 0) + a * gh[2]"]
        return rest

    def _compile_batch(self, start: int, keep: bool = True) -> Callable[[dict[tuple, int]], dict | None]:
        """Algorithm 7 for a batch of changes entering at node ``start`` (one leaf's path),
        as one generated function: per node one loop over its delta that applies each change
        to the node's indexes (inlined) and adds its contribution to the parent's delta.

        Each change is applied before its contribution is computed against the sibling
        (only one leaf changes, so the sibling's relation is current and is all a
        contribution reads; where the sibling reads this node's storage, twin leaves of
        ``share_leaf_storage``, the whole batch is applied first); the sibling probe is a range seek per delta tuple (plus a
        range sum when the delta side is the guard), or, for a large delta on the
        non-guard side, one sort-merge per group (``_merge_source``).  Equal parent tuples
        merge, so a fan-out reaching one parent tuple from many updates it once.  A batch
        holds changes of one sign (the expiry of several events, or the fan-out of one
        change; the multiplicities and sums it is multiplied by are positive), so no parent
        delta sums to zero.  Returns the deltas by node, or None when the change does not
        reach the root.  ``keep=False``: the expiry form, which keeps no path and returns None.
        """
        nodes = self.nodes
        env: dict[str, Any] = {}
        lines = ["def pb(d):", f"    path = {{{start}: d}}"] if keep else ["def db(d):"]
        n = nodes[start]
        while True:
            p = n.parent
            update = self._node_update_source(n, "t", "c", env)
            if n.id in self._gated:
                update = self._gate_source(n.id, n, "t", "continue", env) + update
            if p is None:
                lines += ["    for t, c in d.items():", *[f"        {x}" for x in update],
                          f"    return {'path' if keep else 'None'}"]
                break
            if not keep and n.sibling is None and n.edge_check is None and not n.proj_pos:
                # every change reaches the one parent tuple (): a running sum, no delta dict
                lines += ["    tot = 0", "    for t, c in d.items():", *[f"        {x}" for x in update],
                          "        tot += c", "    if not tot:", "        return None"]
                n = nodes[p]
                if n.parent is None and n.id not in self._gated:
                    # the root: its one change applied as it is (one of the batch's sign: not zero)
                    lines += ["    t, c = (), tot", *[f"    {x}" for x in self._node_update_source(n, "t", "c", env)],
                              "    return None"]
                    break
                lines.append("    d = {(): tot}")
                continue
            lines.append("    dp = {}")
            merge = self._merge_source(n, env) if n.sibling is not None and not n.is_guard else None
            if merge is not None:
                collect, per_run = merge
                lines += [f"    if len(d) >= {MERGE_MIN}:", "        runs = {}", "        for t, c in d.items():",
                          *[f"            {x}" for x in update + collect], "        for k, r in runs.items():",
                          *[f"            {x}" for x in per_run], "    else:"]
            ind = "        " if merge is not None else "    "
            contribution = self._contribution_source(n, env)
            if n.sibling is not None and any(idx.groups is nodes[n.sibling].S.groups for idx in n.stores):
                # the sibling reads this node's storage (twin leaves, ``share_leaf_storage``): as
                # with two storages, it is read after the whole batch changed it
                lines += [f"{ind}for t, c in d.items():", *[f"{ind}    {x}" for x in update],
                          f"{ind}for t, c in d.items():", *[f"{ind}    {x}" for x in contribution]]
            else:
                lines += [f"{ind}for t, c in d.items():", *[f"{ind}    {x}" for x in update + contribution]]
            lines += ["    if not dp:", "        return None", f"    path[{p}] = d = dp" if keep else "    d = dp"]
            n = nodes[p]
        what = "propagate" if keep else "drop"
        return codegen.define(f"{self.pattern.name}: {what} a batch from n{start}", "\n".join(lines),
                              "pb" if keep else "db", env)

    def _contribution_source(self, n: _Node, env: dict[str, Any]) -> list[str]:
        """Generated lines (unindented, in a loop over delta items ``t, c``) that add the change's
        contribution to the parent's delta ``dp``: its projection (one child), times the sibling's
        range sum (a guard), or the projections of the sibling's tuples in range (a fan-out)."""
        nid = n.id
        if n.sibling is None:
            lines = []
            if n.edge_check is not None:
                env[f"chk{nid}"] = n.edge_check
                lines += [f"if not chk{nid}(t):", "    continue"]
            return lines + [f"k = {_tuple_expr('t', n.proj_pos)}", "dp[k] = dp.get(k, 0) + c"]
        S = self.nodes[n.sibling].S
        if n.is_guard:
            lines = S.sum_source(f"s{nid}", "t", env, miss="continue")
            if lines is None:
                if S.summable:
                    env[f"sum{nid}"] = S.probe_sum
                    lines = [f"s = sum{nid}(t)"]
                else:
                    env[f"all{nid}"] = S.probe_all
                    lines = [f"s = sum([mu for _u, mu in all{nid}(t)])"]
                lines += ["if not s:", "    continue"]
            return lines + [f"k = {_tuple_expr('t', n.proj_pos)}", "dp[k] = dp.get(k, 0) + c * s"]
        found = S.range_source(f"s{nid}", "t", env, miss="continue")
        if found is not None and S.check_pair is None:
            lines, test = found
            _reads, (lo, lo_incl), (hi, hi_incl) = S.fast_bounds
            env.update(SOURCE_NAMES)
            lines += ["if type(g) is tuple:", f"    if {test}:", f"        k = {_tuple_expr('g[1]', n.proj_pos)}",
                      "        dp[k] = dp.get(k, 0) + c * g[2]", "    continue",
                      "if g._blocks is None:", "    ks = g._keys",
                      *[f"    {x}" for x in bisect_source("ks", lo, lo_incl, hi, hi_incl)],
                      "    us = zip(g._items[i:j], g._weights[i:j])", "else:",
                      f"    us = g.range_items({lo}, {lo_incl}, {hi}, {hi_incl})"]
        else:
            env[f"all{nid}"] = S.probe_all
            lines = [f"us = all{nid}(t)"]
        return lines + ["for u, mu in us:", f"    k = {_tuple_expr('u', n.proj_pos)}", "    dp[k] = dp.get(k, 0) + c * mu"]

    def _merge_source(self, n: _Node, env: dict[str, Any]) -> tuple[list[str], list[str]] | None:
        """The sort-merge of thesis Theorem 5 for a large delta of non-guard node ``n``, as
        generated lines: ``collect`` (in the loop over the delta, after its update) files each
        change under its group key in ``runs`` as (sort key, c); ``per_run`` (in a loop over
        ``k, r in runs.items()``) sorts a run, takes its running sums, and walks the sibling's
        tuples in the union of the run's ranges once, each adding its projection times the
        run's sum over the changes it joins (two bisects in the run, through ``n``'s own S
        index, the one the sibling probes).  Cost per group: O(|run| log |run| + |sibling
        range| log |run|) instead of one range seek per change and one dict update per
        joining pair.  None when the indexes do not take it: both sorted on numbers with
        the numeric range form and no filter, the same group key, and the sibling's range
        monotone in this node's sort key (its bounds read only that key, with a positive
        scale), so the union of the run's ranges is the range of its first key to that of
        its last."""
        S = self.nodes[n.sibling].S
        own = n.S
        if own is None or S.check_pair is not None or own.check_pair is not None or not own.summable:
            return None
        if own.fast_bounds is None or own.check_probe is not None or S.range_source("", "t", {}) is None:
            return None
        if own.own_key_pos != S.probe_key_pos:
            return None
        reads, (lo, lo_incl), (hi, hi_incl) = S.fast_bounds
        if set(reads) != {own.sort_pos} or any(not b.scale > 0 for b, _pos in S.bounds):
            return None
        G = f"Gm{n.id}"
        env[G] = S.groups
        env.update(SOURCE_NAMES)
        x = reads[own.sort_pos]
        collect = [f"k = {_key_expr('t', own.own_key_pos)}", "r = runs.get(k)", "if r is None:",
                   f"    runs[k] = [(t[{own.sort_pos}], c)]", "else:", f"    r.append((t[{own.sort_pos}], c))"]
        ureads, (ulo, ulo_incl), (uhi, uhi_incl) = own.fast_bounds
        per_run = [f"g = {G}.get(k)", "if g is None:", "    continue", "r.sort()", "xs = [x for x, _c in r]",
                   "ps = [0]", "for _x, c in r:", "    ps.append(ps[-1] + c)",
                   f"{x} = xs[0]", f"lo = {lo if lo is not None else 'None'}",
                   f"{x} = xs[-1]", f"hi = {hi if hi is not None else 'None'}",
                   "if type(g) is tuple:", "    us = ((g[1], g[2]),)",
                   "elif g._blocks is None:", "    ks = g._keys",
                   *[f"    {line}" for line in bisect_source("ks", lo and "lo", lo_incl, hi and "hi", hi_incl)],
                   "    us = zip(g._items[i:j], g._weights[i:j])", "else:",
                   f"    us = g.range_items({lo and 'lo'}, {lo_incl}, {hi and 'hi'}, {hi_incl})",
                   "for u, mu in us:"]
        for pos, name in ureads.items():
            per_run.append(f"    {name} = u[{pos}]")
            if pos not in own.typed_pos:
                per_run += [f"    if type({name}) is not int and type({name}) is not float:", "        continue"]
        per_run += [*[f"    {line}" for line in bisect_source("xs", ulo, ulo_incl, uhi, uhi_incl)],
                    "    if i < j:", f"        k = {_tuple_expr('u', n.proj_pos)}",
                    "        dp[k] = dp.get(k, 0) + (ps[j] - ps[i]) * mu"]
        return collect, per_run

    def apply(self, leaf: int, t: tuple, delta: int) -> Delta:
        """Algorithm 7: add ``delta`` (any multiplicity) to tuple ``t`` of leaf node ``leaf``."""
        return self._delta(t, (self._prop[leaf] if delta > 0 else self._deletes.get(leaf, self._prop[leaf]))(t, delta))

    def _delta(self, t: tuple, chain: list | None) -> Delta:
        """The change of an update path; where a deletion emptied a gating leaf's group, its
        matches are enumerated now, while the gated group is still there, and then the gated
        group goes (``_settle_gates``)."""
        if not self._gate_pending:
            return Delta(self, t, chain)
        done = list(self.changes(chain)) if chain else []
        self._settle_gates()
        return Delta(self, t, chain, done)

    def _settle_gates(self) -> None:
        """Drop the gated groups of the keys a deletion left the gating leaf without (unless a
        later change gave it that key again)."""
        pending = self._gate_pending
        for gated, m in self._gated.items():
            holder = self.nodes[m].S.groups  # type: ignore[union-attr]
            for k in pending:
                if k not in holder:
                    for idx in self.nodes[gated].stores:
                        idx.groups.pop(k, None)
                        idx.totals.pop(k, None)
        pending.clear()

    def insert(self, atom: int, event, serial: int, same: tuple | None = None) -> Delta | None:
        """Insert an event into an atom; returns the change (None: a join value is null,
        nothing is inserted).

        ``same`` is the event's tuple in another atom: an equal tuple is shared, not copied.
        Twin atoms whose leaves share a storage (``share_leaf_storage``, ``IndexUse.shares``)
        take every change of an event together, the earlier atom first (the engine does:
        its atoms in order), and only the later one's update changes the storage.
        """
        r = self.inserter[atom](event, serial, same)
        return None if r is None else Delta(self, r[0], r[1])

    def changes(self, chain: list) -> Iterator[list]:
        """The matches an update path's deltas (``chain``, not None) added or removed."""
        return self._enumerate_deltas(*self.split_chain(chain))

    def split_chain(self, chain: list) -> tuple[list, dict[int, Any]]:
        """An update path's deltas (``chain``, not None) as enumeration reads them: the root's
        delta tuples, and per other node on the path its delta (``_enumerate_deltas``)."""
        nodes = self.nodes
        root, checked = self._split_nodes
        deltas: dict[int, Any] = {}
        roots: list = []
        for item in chain:
            if type(item) is dict:
                for nid, d in item.items():
                    if nid == root:
                        roots = list(d)
                    else:
                        deltas[nid] = _group_delta(nodes[nid], d)
            elif item[0] == root:
                roots = [item[1]]
            elif item[0] in checked:
                deltas[item[0]] = _group_delta(nodes[item[0]], {item[1]: item[2]})
            else:
                # one changed tuple: every delta tuple above it derives from it and joins it (a
                # fan-out's sibling probe or a single child's edge filter checked the edge), so
                # the enumeration takes it as it is, no key lookup, no edge check
                deltas[item[0]] = (item[1],)
        return roots, deltas

    def delete(self, atom: int, t: tuple) -> Delta:
        """Delete a leaf tuple (a retraction); the delta's ``matches()`` are the matches it undoes."""
        leaf = self._leaf_of_atom[atom]
        return self._delta(t, self._deletes.get(leaf, self._prop[leaf])(t, -1))

    def expire(self, atom: int, tuples: list[tuple]) -> None:
        """Delete a batch of leaf tuples of one atom (window expiry): nothing is enumerated."""
        if len(tuples) == 1:
            self._drop_of_atom[atom](tuples[0])
        else:
            self._batch_from(self._leaf_of_atom[atom], keep=False)(dict.fromkeys(tuples, -1))

    def _path_of(self, start: int, d: dict[tuple, int]) -> dict[int, dict[tuple, int]] | None:
        """The deltas by node that the changes ``d`` entering at node ``start`` would make, changing
        nothing: Algorithm 7's path without its index updates (``_compile_batch`` applies them).

        Why a loop of its own: a decided match is found from its deciding event (``matches_with``)
        while that event is in the indexes, so the path is read, never applied; each step reads
        only the sibling, which is off the path.  Runs once per decision, not per event.
        """
        nodes = self.nodes
        n = nodes[start]
        path: dict[int, dict[tuple, int]] = {start: d}
        while True:
            if n.parent is None:
                return path
            dp: dict[tuple, int] = {}
            if n.sibling is None:
                check = n.edge_check
                proj = n.proj
                for tt, c in d.items():
                    if check is None or check(tt):
                        k = proj(tt)
                        dp[k] = dp.get(k, 0) + c
            else:
                S = nodes[n.sibling].S
                proj = n.proj
                if n.is_guard and S.summable:
                    for tt, c in d.items():
                        s = S.probe_sum(tt)
                        if s:
                            k = proj(tt)
                            dp[k] = dp.get(k, 0) + c * s
                elif n.is_guard:
                    for tt, c in d.items():
                        s = 0
                        for _u, mu in S.probe_all(tt):
                            s += mu
                        if s:
                            k = proj(tt)
                            dp[k] = dp.get(k, 0) + c * s
                else:
                    for tt, c in d.items():
                        for u, mu in S.probe_all(tt):
                            k = proj(u)
                            dp[k] = dp.get(k, 0) + c * mu
            d = {k: v for k, v in dp.items() if v}
            if not d:
                return None
            n = nodes[n.parent]
            path[n.id] = d

    def matches_with(self, atom: int, t: tuple) -> Iterator[list]:
        """The current matches whose ``atom`` is the (stored) leaf tuple ``t``: the delta
        enumeration of its insert, computed without changing any index (the decision of
        pending matches, docs/language.md section 7, Decided matches)."""
        path = self._path_of(self._leaf_of_atom[atom], {t: 1})
        return iter(()) if path is None else self._enumerate(path)

    # ------------------------------------------------------------- enumeration

    def all_matches(self) -> Iterator[list]:
        return self._enumerate(None)

    def _enumerate(self, path: dict[int, dict[tuple, int]] | None) -> Iterator[list]:
        """Matches from the root's delta (``path``) or, with None, from the whole root GMR.

        The delta of each node on the updated path is grouped like its P index (its
        tuples: enumeration reads no multiplicity), so it is probed like P.
        """
        nodes = self.nodes
        root = self.plan.root
        dindex: dict[int, Any] = {}
        if path is not None:
            for nid, d in path.items():
                if nid != root:
                    dindex[nid] = _group_delta(nodes[nid], d)
            roots = list(path.get(root, {}))
        else:
            roots = list(self.rho[root])
        return self._enumerate_deltas(roots, dindex)

    def _enumerate_deltas(self, roots: list, dindex: dict[int, Any]) -> Iterator[list]:
        """Matches from these root tuples, reading each updated node's delta (``_group_delta``
        groups, or a tuple of one changed tuple that joins every delta tuple above it)."""
        if self._enum_nested is not None:
            return self._enum_nested(roots, dindex)
        return self._enum_recursive(roots, dindex)

    def _compile_enumeration(self) -> Callable | None:
        """The tree's enumeration as one generated generator of nested loops (``loop_source``),
        yielding each match's leaf tuples by atom."""
        env: dict[str, Any] = {}
        slots = "[" + ", ".join(f"s{i}" for i in range(self.k)) + "]"
        loops = self.loop_source(lambda _atom, _tv: [], [f"yield {slots}"], env)
        if loops is None:
            return None
        return codegen.define(f"{self.pattern.name}: enumerate", "\n".join(["def enum(roots, D):", *loops]),
                              "enum", env)

    def loop_source(self, bind: Callable[[int, str], list[str]], match: list[str],
                    env: dict[str, Any], inserted: int | None = None) -> list[str] | None:
        """The tree's enumeration as nested loops: lines (indented for the body of a function with
        the parameters ``roots`` and ``D``: the root tuples and the deltas by node, as
        ``split_chain`` gives them), with the names they use put into ``env``.

        Why: enumeration runs per composite event; the tree's shape is fixed by the plan, so
        each node becomes one ``for`` loop over its candidates (its P index probed with the
        parent's tuple, or its delta when it is on the updated path: a tuple of the one changed
        tuple as it is, or groups looked up inline) instead of a recursive generator per
        level.  The loops nest in the order of ``_enum_recursive`` (a node's first child's
        subtree, then its second child's, both probed with the node's tuple).  Where the loop
        of leaf ``a`` binds atom ``a``'s leaf tuple (``s<a>``, also named by ``tv``), the lines
        ``bind(a, tv)`` follow (the output builder reads that event's fields there, once for
        every match below); ``match`` runs per match, after the residual filters.  Python
        allows 20 nested blocks: None for deeper trees (they keep the recursive form).

        ``inserted``: the deltas are an insert's into atom ``inserted`` (``D`` from the chain its
        update path returned), so that atom's leaf delta is its one tuple, joining every
        delta tuple above it: it is bound without a loop (unless the leaf is a guard with an
        edge predicate, which ``split_chain`` leaves for the enumeration to check).
        """
        nodes = self.nodes
        # blocks: a loop per non-root node, the loop over the roots, the residual ``if``, the caller's
        if len(nodes) + 2 > 20:
            return None
        lines: list[str] = []
        for n in nodes:
            if n.parent is None:
                continue
            c = n.id
            env[f"P{c}"] = n.P.compile_tuples(f"{self.pattern.name}: n{c} P tuples")
            lines.append(f"    d{c} = D.get({c})")
            if n.delta_check is not None:
                env[f"DC{c}"] = n.delta_check
        names = iter(range(1, 1 << 30))
        one = None if inserted is None else self._leaf_of_atom[inserted]
        if one is not None and nodes[one].is_guard and nodes[one].sibling is not None and nodes[one].delta_check:
            one = None

        def emit(nid: int, tv: str, ind: int, cont: Callable[[int], None]) -> None:
            n = nodes[nid]
            if n.atom is not None:
                lines.append(" " * ind + f"s{n.atom} = {tv}")
                lines.extend(" " * ind + line for line in bind(n.atom, tv))
                cont(ind)
                return
            assert 1 <= len(n.children) <= 2

            def loop(cid: int, ind: int, then: Callable[[int], None]) -> None:
                v = f"t{next(names)}"
                c = nodes[cid]
                if cid == one:
                    lines.append(" " * ind + f"{v} = d{cid}[0]")
                    emit(cid, v, ind, then)
                    return
                group = f"d{cid}.get({_key_expr(tv, c.delta_probe_key_pos)}, ())"
                if c.delta_check is not None:
                    group = f"[x for x in {group} if DC{cid}({tv}, x)]"
                lines.append(" " * ind + f"for {v} in (P{cid}({tv}) if d{cid} is None else d{cid} if type(d{cid}) "
                             f"is tuple else {group}):")
                emit(cid, v, ind + 4, then)

            if len(n.children) == 1:
                loop(n.children[0], ind, cont)
            else:
                c1, c2 = n.children
                loop(c1, ind, lambda i: loop(c2, i, cont))

        def final(ind: int) -> None:
            pad = " " * ind
            if self._residual_inline is not None:
                # the residual filters' expressions inline on the slot variables (``cep.lang.expr``'s
                # 3-valued code): no call per candidate match, no list for a miss
                reads, cond, renv = self._residual_inline
                env.update(renv)
                lines.extend([pad + "try:", *[f"{pad}    {line}" for line in reads], pad + f"    ok = {cond}",
                              pad + "except OverflowError:",
                              pad + "    ok = False", pad + "if ok:"])
                ind += 4
            elif self._residual is not None:
                # the residual filters' functions called on the slot variables: no list for a miss
                renv, calls = self._residual
                env.update(renv)
                lines.append(pad + f"if {' and '.join(c.split('  #')[0] for c in calls(lambda i: f's{i}'))}:")
                ind += 4
            lines.extend(" " * ind + line for line in match)

        lines.append("    for t0 in roots:")
        emit(self.plan.root, "t0", 8, final)
        return lines

    def _enum_recursive(self, roots: list, dindex: dict[int, dict[Any, list[tuple]]]) -> Iterator[list]:
        """Enumeration by recursive generators (trees too deep for ``_compile_enumeration``)."""
        nodes = self.nodes
        slots: list = [None] * self.k
        residual = self.residual_check

        def candidates(c: _Node, u: tuple):
            dc = dindex.get(c.id)
            if type(dc) is tuple:
                yield from dc
            elif dc is not None:
                check = c.delta_check
                for t in dc.get(c.delta_probe_key(u), ()):
                    if check is None or check(u, t):
                        yield t
            else:
                for t, _m in c.P.probe(u):
                    yield t

        def enum(n: _Node, t: tuple):
            if n.atom is not None:
                slots[n.atom] = t
                yield None
                return
            ch = n.children
            c1 = nodes[ch[0]]
            if len(ch) == 1:
                for s in candidates(c1, t):
                    yield from enum(c1, s)
                return
            c2 = nodes[ch[1]]
            for s1 in candidates(c1, t):
                for _ in enum(c1, s1):
                    for s2 in candidates(c2, t):
                        yield from enum(c2, s2)

        rootn = nodes[self.plan.root]
        for t in roots:
            for _ in enum(rootn, t):
                if residual is None or residual(slots):
                    yield list(slots)

    def count(self) -> int:
        """The number of current matches: from multiplicities when nothing is residual."""
        if self.residual_check is None:
            return sum(self.rho[self.plan.root].values())
        return sum(1 for _ in self.all_matches())

    def size(self) -> int:
        """Tuples stored over all nodes (a memory measure)."""
        total = 0
        for n in self.nodes:
            for idx in n.stores:
                total += idx.size()
        return total


def _inline_residual(exprs: list, variables: dict, leaf_pos: dict[str, tuple[int, int]],
                     times: frozenset[str] = frozenset()) -> tuple[list[str], str, dict[str, Any]] | None:
    """The residual filters ``exprs`` (each true iff TRUE, 3-valued) as one Python condition over the
    enumeration's slot variables (``s<atom>``, the atoms' leaf tuples): the lines reading the
    values it needs into locals, the condition, and the names it needs.  The caller evaluates the
    condition inside ``try``/``except OverflowError`` (not true).  None when a filter has no
    expression or is too deep to inline (the caller calls the filters' functions instead).
    ``times``: the variables holding only event times, numbers (``time_variables``): read with no
    type test (card testing's ``big.ts - s1.ts <= 3600``, per candidate match)."""
    if not exprs or any(x is None for x in exprs):
        return None
    from cep.lang.expr import inline_conditions

    var_of = {ref: v.name for v in variables.values() for ref in v.refs}
    reads: dict[str, str] = {}  # slot value -> the local holding it

    def access(attr: Any) -> str:
        atom, i = leaf_pos[var_of[(attr.alias, attr.name)]]
        return reads.setdefault(f"s{atom}[{i}]", f"r{len(reads)}")

    got = inline_conditions(exprs, access, "_rc", lambda attr: var_of[(attr.alias, attr.name)] in times)
    if got is None:
        return None
    conds, env = got
    return [f"{v} = {x}" for x, v in reads.items()], " and ".join(f"({c})" for c in conds), env


_ODD = frozenset((bool, list, dict))


def _canon_scalar(v):
    t = type(v)
    if t is bool:
        return canon(v)
    if t is list or t is dict:
        return None
    return v


__all__ = ["Delta", "PatternRuntime", "NodeIndex", "rank_key"]
