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
are checked once a match is complete.  Expiry runs the same update with
negative deltas and enumerates nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from cep import codegen
from cep.lang.gcq import ID_ATTR, TIME_ATTR, Bound, CompiledPattern
from cep.plan.physical import IndexUse, PhysicalPlan
from cep.runtime.sumlist import SumSortedMap
from cep.values import SqlBool, canon

_LOWER = {">": False, ">=": True, "=": True}
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


def _numeric_range(bounds: list[tuple[Bound, int]], label: str) -> Callable | None:
    """A generated range function for a numeric sort variable with at most one
    lower and one upper bound (the SEQ order plus a WITHIN band): no loop, no calls."""
    lower = [(b, p) for b, p in bounds if b.op in _LOWER]
    upper = [(b, p) for b, p in bounds if b.op in _UPPER]
    if len(lower) > 1 or len(upper) > 1:
        return None
    lines = ["def rng(u):"]
    seen: dict[int, str] = {}
    for _b, pos in bounds:
        if pos not in seen:
            name = f"v{len(seen)}"
            seen[pos] = name
            lines.append(f"    {name} = u[{pos}]")
            lines.append(f"    if type({name}) is not int and type({name}) is not float:")
            lines.append("        return None")

    def expr(b: Bound, pos: int) -> str:
        v = seen[pos]
        if b.scale == 1 and b.offset == 0:
            return v
        return f"({b.scale!r} * {v} + {b.offset!r})"

    lo = f"{expr(*lower[0])}, {_LOWER[lower[0][0].op]}" if lower else "None, True"
    hi = f"{expr(*upper[0])}, {_UPPER[upper[0][0].op]}" if upper else "None, True"
    lines.append(f"    return ({lo}, {hi})")
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
                 preds: list, label: str, storage: NodeIndex | None = None) -> None:
        spec = use.spec
        self.spec = spec
        self.key_of_own = codegen.key_getter([own_pos[v] for v in spec.key_vars])
        self.key_of_probe = codegen.key_getter([probe_pos[v] for v in spec.key_vars])
        self.sorted = spec.sort_var is not None
        if storage is None:
            self.groups: dict[Any, Any] = {}
            self.totals: dict[Any, int] = {}
        else:
            self.groups = storage.groups
            self.totals = storage.totals
        if self.sorted:
            self.sort_pos = own_pos[spec.sort_var]
            self.numeric = use.numeric
            self.bounds = [(b, probe_pos[b.other]) for b in spec.bounds]
            if self.numeric:
                fast = _numeric_range(self.bounds, f"{label} range")
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

    # ------------------------------------------------------------ maintenance

    def update(self, t: tuple, delta: int) -> None:
        key = self.key_of_own(t)
        if self.sorted:
            if self.numeric:
                sk = t[self.sort_pos]
            else:
                sk = rank_key(t[self.sort_pos])
                if sk is None:
                    return
            groups = self.groups
            g = groups.get(key)
            if g is None:
                # a group of one entry is a plain (key, tuple, multiplicity) triple: most
                # groups of a partitioned stream hold one event, and a structure costs more
                if delta <= 0:  # pragma: no cover - deletions of absent tuples are refused upstream
                    raise KeyError(t)
                groups[key] = (sk, t, delta)
            elif type(g) is tuple:
                if g[1] == t and g[0] == sk:
                    m = g[2] + delta
                    if m:
                        groups[key] = (sk, t, m)
                    else:
                        del groups[key]
                else:
                    big = SumSortedMap()
                    big.incr(g[0], g[1], g[2])
                    big.incr(sk, t, delta)
                    groups[key] = big
            else:
                g.incr(sk, t, delta)
                n = len(g)
                if n <= 1:
                    if n:
                        groups[key] = next(g.entries())
                    else:
                        del groups[key]
        else:
            # an unsorted group of one entry is a plain (tuple, multiplicity) pair (most
            # keys of a P index on a node's whole tuple hold one); two or more entries are
            # a dict {tuple: multiplicity} with its total in ``totals``
            groups = self.groups
            g = groups.get(key)
            if g is None:
                if delta <= 0:  # pragma: no cover - deletions of absent tuples are refused upstream
                    raise KeyError(t)
                groups[key] = (t, delta)
            elif type(g) is tuple:
                if g[0] == t:
                    m = g[1] + delta
                    if m:
                        groups[key] = (t, m)
                    else:
                        del groups[key]
                else:
                    groups[key] = {g[0]: g[1], t: delta}
                    self.totals[key] = g[1] + delta
            else:
                m = g.get(t, 0) + delta
                if m:
                    g[t] = m
                    self.totals[key] += delta
                else:
                    del g[t]
                    if len(g) == 1:
                        groups[key] = next(iter(g.items()))
                        del self.totals[key]
                    else:
                        self.totals[key] += delta

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
        "P", "S", "stores", "proj", "edge_check", "delta_key", "delta_probe_key", "delta_check",
    )


class Delta:
    """What one insert or delete changed: its leaf tuple and the deltas along its path.

    ``matches()`` enumerates the matches the change added (an insert) or removed (a
    delete).  Enumeration reads the runtime's current indexes, so it must run before
    the next update of the same runtime.
    """

    __slots__ = ("runtime", "tuple", "chain")

    def __init__(self, runtime: PatternRuntime, t: tuple, chain: list | None) -> None:
        self.runtime = runtime
        self.tuple = t
        self.chain = chain  # None: the change did not reach the root (no match changed)

    def matches(self) -> Iterator[list]:
        """The matches added or removed (lists of leaf tuples, one per atom)."""
        if not self.chain:
            return iter(())
        return self.runtime._enumerate(self.path())

    def path(self) -> dict[int, dict[tuple, int]]:
        """The deltas of the updated path as ``{node: {tuple: multiplicity}}``."""
        path: dict[int, dict[tuple, int]] = {}
        for item in self.chain or ():
            if type(item) is dict:
                path.update(item)
            else:
                path[item[0]] = {item[1]: item[2]}
        return path


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
        for pn, n in zip(plan.nodes, nodes, strict=True):
            n.P = n.S = None
            n.stores = ()
            n.proj = n.edge_check = n.delta_key = n.delta_probe_key = n.delta_check = None
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
                owner = None if use.storage == "own" else (n.P if use.storage == "P" else n.S)
                probe_pos = p.pos if which == "P" else sib_pos
                idx = NodeIndex(use, n.pos, probe_pos, preds, f"{label} {which}", owner)
                if which == "P":
                    n.P = idx
                else:
                    n.S = idx
            n.stores = tuple(n.P if which == "P" else n.S for which in pn.stores)
            edge_preds = [preds[i] for i in pn.preds]
            # delta enumeration: group deltas like the logical P, check every edge predicate
            key_vars = pn.enumeration.key_vars
            n.delta_key = codegen.key_getter([n.pos[v] for v in key_vars])
            n.delta_probe_key = codegen.key_getter([p.pos[v] for v in key_vars])
            n.delta_check = _checker(edge_preds, [("u", p.pos), ("t", n.pos)], f"{label} edge")
            if n.sibling is None:
                # single child (always a guard): delta_p = proj(sigma_edge(delta_n))
                n.proj = codegen.tuple_getter([n.pos[v] for v in p.vars])
                n.edge_check = _checker(edge_preds, [("t", n.pos)], f"{label} edge filter")
            elif n.is_guard:
                n.proj = codegen.tuple_getter([n.pos[v] for v in p.vars])
            else:
                n.proj = codegen.tuple_getter([sib_pos[v] for v in p.vars])
        # leaves: where each atom's tuples enter the tree
        slot_serial: list[int] = [0] * len(self.pattern.atoms)
        leaf_of_atom: dict[int, int] = {}
        for pn in plan.nodes:
            if pn.atom is not None:
                leaf_of_atom[pn.atom] = pn.id
                slot_serial[pn.atom] = pn.vars.index(self.pattern.atoms[pn.atom].id_var)
        # residual predicates, checked on complete matches (slots = leaf tuples by atom)
        self.residual_check = None
        if plan.residual:
            leaf_pos = {}
            for pn in plan.nodes:
                if pn.atom is not None:
                    for i, v in enumerate(pn.vars):
                        leaf_pos.setdefault(v, (pn.atom, i))
            env: dict[str, Any] = {}
            parts = []
            for j, pid in enumerate(plan.residual):
                pr = preds[pid]
                env[f"f{j}"] = pr.fn
                args = ", ".join(f"s[{leaf_pos[v][0]}][{leaf_pos[v][1]}]" for v in pr.vars)
                parts.append(f"f{j}({args})  # {pr.text}")
            src = "def residual(s):\n    return (\n        " + "\n        and ".join(parts) + "\n    )\n"
            self.residual_check = codegen.define(f"{name}: residual filter", src, "residual", env)
        self.k = len(self.pattern.atoms)
        items = "".join(f"E[s[{i}][{slot_serial[i]}]], " for i in range(self.k))
        self.events_of = codegen.define(f"{name}: events of a match", f"def events_of(s, E):\n    return [{items}]\n",
                                        "events_of")
        serials = "".join(f"s[{i}][{slot_serial[i]}], " for i in range(self.k))
        # the serials of a match's events (pending matches of patterns with gaps are keyed by them)
        self.serials_of = codegen.define(f"{name}: serials of a match", f"def serials_of(s):\n    return ({serials})\n",
                                         "serials_of")
        self._enum_nested = self._compile_enumeration()
        # the generated update path of each leaf, by leaf node and by atom
        self._prop = {leaf: self._compile_propagation(leaf) for leaf in leaf_of_atom.values()}
        self._prop_of_atom = {a: self._prop[leaf] for a, leaf in leaf_of_atom.items()}
        self._leaf_of_atom = leaf_of_atom
        # how an event becomes a leaf tuple, and its insert, per atom
        self.extract: dict[int, Callable] = {}
        self.inserter: dict[int, Callable] = {}
        for a, leaf in leaf_of_atom.items():
            self.extract[a], self.inserter[a] = self._compile_leaf(a, leaf, var_atoms)

    # ------------------------------------------------------------------ leaves

    @staticmethod
    def _leaf_tuple(atom, leaf_vars: tuple[str, ...], var_atoms: dict[str, int]) -> tuple[str, str | None]:
        """Source of the leaf tuple of event ``e`` (fields ``f``) with serial ``s``, and the
        condition under which it is not inserted (a join value is null), if any."""
        items = []
        joins = []
        for i, v in enumerate(leaf_vars):
            attr = atom.attrs[atom.vars.index(v)]
            if attr == ID_ATTR:
                items.append("s")
            elif attr == TIME_ATTR:
                items.append("e.ts")
            else:
                items.append(f"canon(f.get({attr!r}))")
                if var_atoms.get(v, 0) > 1:
                    joins.append(i)
        body = "(" + "".join(f"{x}, " for x in items) + ")"
        return body, (" or ".join(f"t[{i}] is None" for i in joins) or None)

    def _compile_leaf(self, atom: int, leaf: int, var_atoms: dict[str, int]) -> tuple[Callable, Callable]:
        """The atom's extractor (event, serial -> leaf tuple or None) and its insert
        (event, serial, same -> Delta or None: extraction and update path in one call)."""
        a = self.pattern.atoms[atom]
        pn = self.plan.nodes[leaf]
        body, null = self._leaf_tuple(a, pn.vars, var_atoms)
        name = self.pattern.name
        env: dict[str, Any] = {"canon": _canon_scalar}
        if null:
            src = f"def ex(e, s):\n    f = e.fields\n    t = {body}\n    return None if {null} else t\n"
        else:
            src = f"def ex(e, s):\n    f = e.fields\n    return {body}\n"
        extract = codegen.define(f"{name}: leaf tuple of {a.alias}", src, "ex", env)
        lines = ["def insert(e, s, same):", "    f = e.fields", f"    t = {body}"]
        if null:
            lines += [f"    if {null}:", "        return None"]
        lines += ["    if t == same:", "        t = same", "    return Delta(rt, t, prop(t, 1))"]
        env = {"canon": _canon_scalar, "Delta": Delta, "rt": self, "prop": self._prop[leaf]}
        insert = codegen.define(f"{name}: insert into {a.alias}", "\n".join(lines), "insert", env)
        return extract, insert

    # ----------------------------------------------------------------- updates

    def _apply(self, n: _Node, t: tuple, delta: int) -> None:
        """rho_n += delta on one tuple, in the node's indexes (and its GMR where kept)."""
        rho = self.rho[n.id]
        if rho is not None:
            m = rho.get(t, 0) + delta
            if m > 0:
                rho[t] = m
            elif m == 0:
                del rho[t]
            else:  # pragma: no cover - deletions of absent tuples are refused upstream
                raise AssertionError("negative multiplicity in the T-reduct")
        for idx in n.stores:
            idx.update(t, delta)

    def _compile_propagation(self, leaf: int) -> Callable[[tuple, int], list | None]:
        """The update path of one leaf as one generated function (straight-line code).

        Why: it runs for every insert, retraction and expiry, and the leaf-to-root
        path is fixed by the plan, so each level becomes a few lines (its index
        updates, then a projection, a guard-side range sum, or a fan-out) instead
        of a loop that looks the path up again.  The common case stays one tuple all
        the way up (each step a projection or a guard-side range sum); a non-guard
        step that fans out continues as a batch (``_propagate_batch``).
        """
        nodes = self.nodes
        env: dict[str, Any] = {"batch": self._propagate_batch}
        lines = ["def prop(t, c):", "    path = []"]
        n = nodes[leaf]
        while True:
            nid = n.id
            lines.append(f"    path.append(({nid}, t, c))")
            rho = self.rho[nid]
            if rho is not None:
                env[f"rho{nid}"] = rho
                lines += [f"    m = rho{nid}.get(t, 0) + c", "    if m > 0:", f"        rho{nid}[t] = m",
                          "    elif m == 0:", f"        del rho{nid}[t]", "    else:",
                          "        raise AssertionError('negative multiplicity in the T-reduct')"]
            for j, idx in enumerate(n.stores):
                env[f"u{nid}_{j}"] = idx.update
                lines.append(f"    u{nid}_{j}(t, c)")
            p = n.parent
            if p is None:
                lines.append("    return path")
                break
            env[f"proj{nid}"] = n.proj
            if n.sibling is None:
                if n.edge_check is not None:
                    env[f"chk{nid}"] = n.edge_check
                    lines += [f"    if not chk{nid}(t):", "        return None"]
                lines.append(f"    t = proj{nid}(t)")
            elif n.is_guard:
                S = nodes[n.sibling].S
                if S.summable:
                    env[f"sum{nid}"] = S.probe_sum
                    lines.append(f"    s = sum{nid}(t)")
                else:
                    env[f"all{nid}"] = S.probe_all
                    lines.append(f"    s = sum([mu for _u, mu in all{nid}(t)])")
                lines += ["    if not s:", "        return None", f"    t = proj{nid}(t)", "    c *= s"]
            else:
                env[f"all{nid}"] = nodes[n.sibling].S.probe_all
                lines += ["    dp = {}", f"    for u, mu in all{nid}(t):", f"        k = proj{nid}(u)",
                          "        dp[k] = dp.get(k, 0) + c * mu", "    d = {k: v for k, v in dp.items() if v}",
                          "    if not d:", "        return None", f"    rest = batch({p}, d)",
                          "    if rest is None:", "        return None", "    path.append(rest)", "    return path"]
                break
            n = nodes[p]
        return codegen.define(f"{self.pattern.name}: propagate leaf {leaf}", "\n".join(lines), "prop", env)

    def _propagate_batch(self, start: int, d: dict[tuple, int],
                         apply: bool = True) -> dict[int, dict[tuple, int]] | None:
        """Algorithm 7 for a batch of changes entering at node ``start`` (one leaf's path).

        Each node's delta is applied before its contribution to the parent is
        computed against the sibling (only one leaf changes, so the sibling's
        relation is current); the sibling probe is a range seek per delta tuple
        (plus a range sum when the delta side is the guard), which is the
        running-sum sort-merge of Theorem 5 done through the index.  With
        ``apply`` False nothing is changed: the path is what the change would be
        (each step reads only the sibling, which is off the path).
        """
        nodes = self.nodes
        n = nodes[start]
        path: dict[int, dict[tuple, int]] = {start: d}
        while True:
            if apply:
                for tt, c in d.items():
                    self._apply(n, tt, c)
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

    def apply(self, leaf: int, t: tuple, delta: int) -> Delta:
        """Algorithm 7: add ``delta`` (any multiplicity) to tuple ``t`` of leaf node ``leaf``."""
        return Delta(self, t, self._prop[leaf](t, delta))

    def insert(self, atom: int, event, serial: int, same: tuple | None = None) -> Delta | None:
        """Insert an event into an atom; returns the change (None: a join value is null,
        nothing is inserted).

        ``same`` is the event's tuple in another atom: an equal tuple is shared, not copied.
        """
        return self.inserter[atom](event, serial, same)

    def delete(self, atom: int, t: tuple) -> Delta:
        """Delete a leaf tuple (a retraction); the delta's ``matches()`` are the matches it undoes."""
        return Delta(self, t, self._prop_of_atom[atom](t, -1))

    def expire(self, atom: int, tuples: list[tuple]) -> None:
        """Delete a batch of leaf tuples of one atom (window expiry): nothing is enumerated."""
        if len(tuples) == 1:
            self._prop_of_atom[atom](tuples[0], -1)
        else:
            self._propagate_batch(self._leaf_of_atom[atom], dict.fromkeys(tuples, -1))

    def matches_with(self, atom: int, t: tuple) -> Iterator[list]:
        """The current matches whose ``atom`` is the (stored) leaf tuple ``t``: the delta
        enumeration of its insert, computed without changing any index (the decision of
        pending matches, docs/language.md section 7, Decided matches)."""
        path = self._propagate_batch(self._leaf_of_atom[atom], {t: 1}, apply=False)
        return iter(()) if path is None else self._enumerate(path)

    # ------------------------------------------------------------- enumeration

    def all_matches(self) -> Iterator[list]:
        return self._enumerate(None)

    def _enumerate(self, path: dict[int, dict[tuple, int]] | None) -> Iterator[list]:
        """Matches from the root's delta (``path``) or, with None, from the whole root GMR.

        The delta of each node on the updated path is grouped like its P index,
        as (tuple, multiplicity) pairs, so it is probed like P.
        """
        nodes = self.nodes
        root = self.plan.root
        dindex: dict[int, dict[Any, list[tuple]]] = {}
        if path is not None:
            for nid, d in path.items():
                n = nodes[nid]
                if n.parent is None:
                    continue
                groups: dict[Any, list[tuple]] = {}
                key = n.delta_key
                for t, m in d.items():
                    groups.setdefault(key(t), []).append((t, m))
                dindex[nid] = groups
            roots = list(path.get(root, {}))
        else:
            roots = list(self.rho[root])
        if self._enum_nested is not None:
            return self._enum_nested(roots, dindex)
        return self._enum_recursive(roots, dindex)

    def _compile_enumeration(self) -> Callable | None:
        """The tree's enumeration as one generated function of nested loops.

        Why: enumeration runs per composite event; the tree's shape is fixed by the
        plan, so each node becomes one ``for`` loop over its candidates (its P index
        probed with the parent's tuple, or its delta when it is on the updated path)
        instead of a recursive generator per level.  The loops nest in the order of
        ``_enum_recursive`` (a node's first child's subtree, then its second child's,
        both probed with the node's tuple).  Python allows 20 nested blocks; deeper
        trees keep the recursive form.
        """
        nodes = self.nodes
        # blocks: a loop per non-root node, the loop over the roots, the residual ``if``
        if len(nodes) + 1 > 20:
            return None
        env: dict[str, Any] = {"R": self.residual_check}
        lines = ["def enum(roots, D):"]
        for n in nodes:
            if n.parent is None:
                continue
            c = n.id
            env[f"P{c}"] = n.P.probe_all
            lines.append(f"    d{c} = D.get({c})")
            key, check = n.delta_probe_key, n.delta_check
            if check is None:
                env[f"DC{c}"] = lambda d, u, key=key: d.get(key(u), ())
            else:
                env[f"DC{c}"] = lambda d, u, key=key, check=check: [
                    p for p in d.get(key(u), ()) if check(u, p[0])
                ]
        names = iter(range(1, 1 << 30))

        def emit(nid: int, tv: str, ind: int, cont: Callable[[int], None]) -> None:
            n = nodes[nid]
            if n.atom is not None:
                lines.append(" " * ind + f"s{n.atom} = {tv}")
                cont(ind)
                return
            assert 1 <= len(n.children) <= 2

            def loop(cid: int, ind: int, then: Callable[[int], None]) -> None:
                v = f"t{next(names)}"
                lines.append(" " * ind + f"for {v}, _ in (P{cid}({tv}) if d{cid} is None else DC{cid}(d{cid}, {tv})):")
                emit(cid, v, ind + 4, then)

            if len(n.children) == 1:
                loop(n.children[0], ind, cont)
            else:
                c1, c2 = n.children
                loop(c1, ind, lambda i: loop(c2, i, cont))

        slots = "[" + ", ".join(f"s{i}" for i in range(self.k)) + "]"

        def final(ind: int) -> None:
            if self.residual_check is None:
                lines.append(" " * ind + f"yield {slots}")
            else:
                lines.append(" " * ind + f"m = {slots}")
                lines.append(" " * ind + "if R(m):")
                lines.append(" " * ind + "    yield m")

        lines.append("    for t0 in roots:")
        emit(self.plan.root, "t0", 8, final)
        return codegen.define(f"{self.pattern.name}: enumerate", "\n".join(lines), "enum", env)

    def _enum_recursive(self, roots: list, dindex: dict[int, dict[Any, list[tuple]]]) -> Iterator[list]:
        """Enumeration by recursive generators (trees too deep for ``_compile_enumeration``)."""
        nodes = self.nodes
        slots: list = [None] * self.k
        residual = self.residual_check

        def candidates(c: _Node, u: tuple):
            if c.id in dindex:
                check = c.delta_check
                for t, _m in dindex[c.id].get(c.delta_probe_key(u), ()):
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


def _canon_scalar(v):
    t = type(v)
    if t is bool:
        return canon(v)
    if t is list or t is dict:
        return None
    return v


__all__ = ["Delta", "PatternRuntime", "NodeIndex", "rank_key"]
