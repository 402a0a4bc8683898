"""GYO reduction for generalized conjunctive queries and its enactment as a join forest.

Thesis chapter 5 (Idris 2018): a GCQ is acyclic iff a two-stage reduction of its
hypergraph triplet (hyperedges, out, predicates) by the rules ISO (remove isolated
variables), CSE (conditional subset elimination) and FLT (filter elimination) ends
empty; it is free-connex iff, in addition, the variables left after the first stage
are exactly out(Q).  Algorithm 8 enacts every reduction step on a generalized join
forest; linking the final roots under an empty root gives a GJT T, and the roots
after stage 1 plus their ancestors give a sibling-closed connex set N.

Everything here works on plain sets (variable names, predicate ids with their
variable sets) so the thesis' examples can be run directly; ``cep.plan.planner`` maps a
compiled pattern onto it.  The reduction is confluent but the tree is not: the
``rank`` and ``keep_last`` hints choose among applicable steps so that SEQ patterns
get the tree shape the runtime wants (later elements guard earlier ones).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cep.records import field, record


class CyclicQuery(Exception):
    """The reduction got stuck: the GCQ has no generalized join tree."""

    def __init__(self, hyperedges: list[frozenset[str]], preds: list[int]) -> None:
        self.hyperedges = hyperedges
        self.preds = preds
        super().__init__(
            "query is cyclic: reduction stuck at hyperedges "
            + ", ".join("{" + ",".join(sorted(e)) + "}" for e in hyperedges)
            + (f" with predicates {sorted(preds)}" if preds else "")
        )


@record
class TNode:
    """A node of a (not yet binary) GJT: a leaf (``atom`` set) or a hyperedge."""

    vars: frozenset[str]
    atom: int | None = None
    children: list[int] = field(default_factory=list)
    preds: list[int] = field(default_factory=list)  # on the edge parent -> this node
    parent: int | None = None


@record
class Tree:
    """A GJT pair (T, N) over plain sets: ``nodes[root]`` is the root, ``connex`` is N."""

    nodes: list[TNode]
    root: int
    connex: set[int]
    steps: list[str] = field(default_factory=list)  # the reduction steps enacted, for explain

    def add(self, node: TNode) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def attach(self, parent: int, child: int, preds: Iterable[int] = ()) -> None:
        self.nodes[parent].children.append(child)
        c = self.nodes[child]
        c.parent = parent
        c.preds = list(preds)

    def live(self) -> list[int]:
        """Node ids reachable from the root, parents first."""
        out, stack = [], [self.root]
        while stack:
            n = stack.pop()
            out.append(n)
            stack.extend(reversed(self.nodes[n].children))
        return out


@record
class Reduction:
    """The outcome of the two-stage reduction (thesis Theorem 6)."""

    acyclic: bool
    free_connex: bool
    stage1_vars: frozenset[str]  # var(hyp(I)): the minimal var(N) of any connex set
    tree: Tree | None  # None when cyclic
    stuck: CyclicQuery | None = None


class _Forest:
    """A GJF triplet: forest roots, out, remaining predicates; enacts reduction steps."""

    def __init__(
        self,
        atoms: Sequence[Iterable[str]],
        preds: Mapping[int, Iterable[str]],
        out: Iterable[str],
        rank: Sequence[float] | None,
        keep_last: Iterable[str],
    ) -> None:
        self.tree = Tree([], -1, set())
        self.roots: list[int] = []
        self.rank: dict[int, float] = {}  # root -> max rank of its atoms
        for i, vs in enumerate(atoms):
            n = self.tree.add(TNode(frozenset(vs), atom=i))
            self.roots.append(n)
            self.rank[n] = rank[i] if rank is not None else i
        self.preds: dict[int, frozenset[str]] = {p: frozenset(vs) for p, vs in preds.items()}
        self.out = frozenset(out)
        self.keep_last = frozenset(keep_last)
        self._fmt_cache: dict[frozenset[str], str] = {}

    # -- the hypergraph triplet H(F)
    def hyp(self) -> list[frozenset[str]]:
        seen: dict[frozenset[str], None] = {}
        for r in self.roots:
            v = self.tree.nodes[r].vars
            if v:
                seen.setdefault(v, None)
        return list(seen)

    def _roots_of(self, e: frozenset[str]) -> list[int]:
        return [r for r in self.roots if self.tree.nodes[r].vars == e]

    def _merge(self, e: frozenset[str]) -> int:
        """Merge all roots labelled e into one tree (no new node if there is just one)."""
        rs = self._roots_of(e)
        if len(rs) == 1:
            return rs[0]
        n = self.tree.add(TNode(e))
        for r in rs:
            self.tree.attach(n, r)
            self.roots.remove(r)
        self.roots.append(n)
        self.rank[n] = max(self.rank[r] for r in rs)
        return n

    def _replace_root(self, old: list[int], new: int) -> None:
        for r in old:
            self.roots.remove(r)
        self.roots.append(new)
        self.rank[new] = max(self.rank[r] for r in old)

    # -- one reduction step; False when in normal form
    def step(self) -> bool:
        by_label: dict[frozenset[str], list[int]] = {}
        for r in self.roots:
            v = self.tree.nodes[r].vars
            if v:
                by_label.setdefault(v, []).append(r)
        rank = {e: max(self.rank[r] for r in rs) for e, rs in by_label.items()}
        hyp = sorted(by_label, key=lambda e: (rank[e], self._fmt(e)))
        count: dict[str, int] = {}
        # the hyperedges holding each variable, in hyp order: a search for an edge that covers a
        # set of variables only looks at the edges holding one of them (steps stay O(|hyp|),
        # not O(|hyp|^2), which matters for patterns of 32 elements)
        holding: dict[str, list[frozenset[str]]] = {}
        for e in hyp:
            for v in e:
                count[v] = count.get(v, 0) + 1
                holding.setdefault(v, []).append(e)

        def covering(vs: frozenset[str]) -> list[frozenset[str]]:
            """The hyperedges that may include ``vs`` (a superset of those that do), in hyp order."""
            if not vs:
                return hyp
            return min((holding.get(v, []) for v in vs), key=len)
        jv = {v for v, c in count.items() if c >= 2} | self.out
        pvars: set[str] = set()
        preds_of: dict[str, list[frozenset[str]]] = {}
        for vs in self.preds.values():
            pvars |= vs
            for v in vs:
                preds_of.setdefault(v, []).append(vs)
        isol = set(count) - jv - pvars

        # FLT: predicates covered by one hyperedge become filters on an edge
        for pid in sorted(self.preds):
            vs = self.preds[pid]
            for e in covering(vs):
                if vs <= e:
                    theta = sorted(p for p, ws in self.preds.items() if ws <= e)
                    rs = by_label[e]
                    n = self.tree.add(TNode(e))
                    for i, r in enumerate(rs):
                        self.tree.attach(n, r, theta if i == 0 else ())
                    self._replace_root(rs, n)
                    for p in theta:
                        del self.preds[p]
                    self.tree.steps.append(f"FLT {_fmt(theta)} on {_fmt(e)}")
                    return True

        # ISO of ordinary variables first, CSE next, ISO of keep-last variables last
        for e in hyp:
            x = (e & isol) - self.keep_last
            if x:
                self._iso(e, x)
                return True
        best = None
        for e in hyp:
            je = e & jv
            # the variables only e holds leave with it whatever f is, so f must hold the other
            # variables of their predicates too: a necessary condition that narrows the search
            private_ext: set[str] = set()
            for v in e - je:
                for vs in preds_of.get(v, ()):
                    private_ext |= vs
            for f in covering(je | (private_ext - e)):
                if e == f or not je <= f:
                    continue
                d = e - f
                ext: set[str] = set()
                for v in d:
                    for vs in preds_of.get(v, ()):
                        ext |= vs
                if not (ext - d) <= f:
                    continue
                key = (rank[e], -rank[f], -len(f & e), self._fmt(e), self._fmt(f))
                if best is None or key < best[0]:
                    best = (key, e, f)
        if best is not None:
            _, e, f = best
            removed = sorted(p for p, vs in self.preds.items() if vs & (e - f))
            n = self._merge(e)
            m = self._merge(f)
            p = self.tree.add(TNode(f))
            self.tree.attach(p, m)  # the guard first
            self.tree.attach(p, n, removed)
            self._replace_root([n, m], p)
            for q in removed:
                del self.preds[q]
            self.tree.steps.append(f"CSE {_fmt(e)} into {_fmt(f)}" + (f" with {_fmt(removed)}" if removed else ""))
            return True
        for e in hyp:
            x = e & isol
            if x:
                self._iso(e, x)
                return True
        return False

    def _iso(self, e: frozenset[str], x: set[str]) -> None:
        n = self._merge(e)
        p = self.tree.add(TNode(e - x))
        self.tree.attach(p, n)
        self._replace_root([n], p)
        self.tree.steps.append(f"ISO {_fmt(x)} from {_fmt(e)}")

    def run(self) -> None:
        while self.step():
            pass

    def _fmt(self, vs: frozenset[str]) -> str:
        """``_fmt`` of a hyperedge, cached: the step ordering compares these strings every step."""
        text = self._fmt_cache.get(vs)
        if text is None:
            text = self._fmt_cache[vs] = _fmt(vs)
        return text


def _fmt(vs: Iterable) -> str:
    return "{" + ",".join(str(v) for v in sorted(vs)) + "}"


def reduce_gcq(
    atoms: Sequence[Iterable[str]],
    preds: Mapping[int, Iterable[str]],
    out: Iterable[str] | None = None,
    rank: Sequence[float] | None = None,
    keep_last: Iterable[str] = (),
) -> Reduction:
    """Algorithm 8: the two-stage reduction, enacted on a join forest.

    ``atoms``: the variable set of each atom occurrence (leaf ``i`` is atom ``i``);
    ``preds``: predicate id -> its variables; ``out``: output variables (default: all,
    a full query); ``rank``: per atom, a preference: CSE eliminates low-rank trees into
    high-rank ones (for SEQ, the atom position, so later elements guard earlier ones);
    ``keep_last``: variables ISO removes only when nothing else applies (partition keys,
    so the tree keeps a node on them below the root).
    """
    atoms = [frozenset(a) for a in atoms]
    all_vars = frozenset().union(*atoms) if atoms else frozenset()
    out_set = all_vars if out is None else frozenset(out)
    if not out_set <= all_vars:
        raise ValueError(f"output variables {_fmt(out_set - all_vars)} are in no atom")
    for pid, vs in preds.items():
        if not frozenset(vs) <= all_vars:
            raise ValueError(f"predicate {pid} mentions variables in no atom")
        if not vs:
            raise ValueError(f"predicate {pid} is nullary")
    forest = _Forest(atoms, preds, out_set, rank, keep_last)
    forest.run()
    x = list(forest.roots)
    stage1_vars = frozenset().union(*(forest.tree.nodes[r].vars for r in x)) if x else frozenset()
    forest.tree.steps.append("-- stage 2 (out := {})")
    forest.out = frozenset()
    forest.run()
    hyp = forest.hyp()
    if hyp or forest.preds:
        stuck = CyclicQuery(hyp, sorted(forest.preds))
        return Reduction(False, False, stage1_vars, None, stuck)
    tree = forest.tree
    root = tree.add(TNode(frozenset()))
    for r in sorted(forest.roots, key=lambda r: -forest.rank[r]):
        tree.attach(root, r)
    tree.root = root
    connex: set[int] = set()
    for n in x:
        while n is not None and n not in connex:
            connex.add(n)
            n = tree.nodes[n].parent
    tree.connex = connex
    return Reduction(True, stage1_vars == out_set, stage1_vars, tree)

