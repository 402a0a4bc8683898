"""Make a GJT pair binary and sibling-closed (thesis Proposition 16), and tidy it.

IEDYN's update and enumeration algorithms assume every node has at most two
children and that N is sibling-closed (a node of N has all or none of its children
in N).  Algorithm 8 produces sibling-closed pairs, but merges can give nodes more
than two children; the general transforms are implemented anyway so that any pair
can be normalised:

* type-1 violator (a guard child in N): the children outside N move under a new
  node with the variables of a guard leaf below that child;
* type-2 violator (no guard child in N): the children outside N move under a new
  child with the parent's variables;
* a node with k > 2 children gets a chain of k - 2 copies of itself.

``tidy`` then removes redundant single-child nodes (same variables as their only
child, no predicate on the edge) and puts a guard first among every node's children.
"""

from __future__ import annotations

from cep.plan.gyo import TNode, Tree


def _is_guard(tree: Tree, parent: int, child: int) -> bool:
    return tree.nodes[parent].vars <= tree.nodes[child].vars


def _guard_leaf(tree: Tree, n: int) -> int:
    """A leaf below (or equal to) n whose variables include var(n)."""
    while tree.nodes[n].atom is None:
        n = next(c for c in tree.nodes[n].children if _is_guard(tree, n, c))
    return n


def _move(tree: Tree, child: int, new_parent: int) -> None:
    old = tree.nodes[child].parent
    if old is not None:
        tree.nodes[old].children.remove(child)
    tree.nodes[new_parent].children.append(child)
    tree.nodes[child].parent = new_parent


def sibling_close(tree: Tree) -> None:
    """Thesis Prop. 16, first step: make N sibling-closed (type-1/type-2 transforms)."""
    changed = True
    while changed:
        changed = False
        for n in tree.live():
            node = tree.nodes[n]
            if n not in tree.connex or not node.children:
                continue
            inside = [c for c in node.children if c in tree.connex]
            outside = [c for c in node.children if c not in tree.connex]
            if not inside or not outside:
                continue
            guards_in = [c for c in inside if _is_guard(tree, n, c)]
            if guards_in:
                # type 1: p with var(leaf) between a guard leaf l below g and its parent
                leaf = _guard_leaf(tree, guards_in[0])
                lp = tree.nodes[leaf].parent
                p = tree.add(TNode(tree.nodes[leaf].vars))
                tree.nodes[lp].children[tree.nodes[lp].children.index(leaf)] = p
                tree.nodes[p].parent = lp
                tree.nodes[p].preds = tree.nodes[leaf].preds
                tree.nodes[leaf].preds = []
                tree.nodes[p].children.append(leaf)
                tree.nodes[leaf].parent = p
                for c in outside:
                    _move(tree, c, p)
                if leaf in tree.connex:
                    tree.connex.discard(leaf)
                    tree.connex.add(p)
            else:
                # type 2: a copy of n under n takes every child outside N
                p = tree.add(TNode(node.vars))
                for c in outside:
                    _move(tree, c, p)
                node.children.insert(0, p)  # a guard of n (same variables)
                tree.nodes[p].parent = n
                tree.connex.add(p)
            changed = True
            break


def binarize(tree: Tree) -> None:
    """Thesis Prop. 16, second step: at most two children per node, N stays sibling-closed."""
    for n in tree.live():
        node = tree.nodes[n]
        while len(node.children) > 2:
            guard = next(c for c in node.children if _is_guard(tree, n, c))
            others = [c for c in node.children if c != guard]
            # m = copy of n takes the guard and all but the last other child
            m = tree.add(TNode(node.vars))
            frontier = n in tree.connex and not any(c in tree.connex for c in node.children)
            for c in [guard] + others[:-1]:
                _move(tree, c, m)
            node.children.insert(0, m)
            tree.nodes[m].parent = n
            if n in tree.connex and not frontier:
                tree.connex.add(m)
            node = tree.nodes[m]
            n = m


def tidy(tree: Tree) -> None:
    """Drop redundant single-child nodes; put a guard child first everywhere."""
    changed = True
    while changed:
        changed = False
        for n in tree.live():
            node = tree.nodes[n]
            if node.atom is not None or len(node.children) != 1:
                continue
            c = node.children[0]
            child = tree.nodes[c]
            if child.vars != node.vars or child.preds:
                continue
            # splice n out: c takes n's place and its edge predicates
            child.preds = node.preds
            child.parent = node.parent
            if node.parent is None:
                tree.root = c
            else:
                sib = tree.nodes[node.parent].children
                sib[sib.index(n)] = c
            if n in tree.connex:
                tree.connex.discard(n)
                tree.connex.add(c)
            node.children = []
            changed = True
            break
    for n in tree.live():
        node = tree.nodes[n]
        if node.children:
            gi = next(i for i, c in enumerate(node.children) if _is_guard(tree, n, c))
            node.children.insert(0, node.children.pop(gi))


def normalise(tree: Tree) -> None:
    """Sibling-closed, binary, tidy."""
    sibling_close(tree)
    binarize(tree)
    tidy(tree)
