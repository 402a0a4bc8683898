"""Engines built once per process, copied after (issue 11: the cost of an engine per Spark key group).

Why: everything ``Engine.__init__`` does but creating the state depends only on the compiled
patterns, their plans and the engine's options: planning, writing the update paths, the batch
loop, the expiry and the restore inserters (``cep.runtime.iedyn``, ``cep.runtime.handler``).
On Spark's local[2] every key group's engine is rebuilt from its saved state every micro-batch
(64 per 10^5 events), and that work was ~10 ms of CPU per engine (card testing), most of it
producing the same sources again.

How: a *recipe* is taken from a pristine engine (built the usual way, nothing pushed yet): a
walk over the objects it reaches finds the ones that are its state (every dict, list, set and
deque, every object of a ``cep.runtime`` class) and everything that reaches them (the generated
functions whose namespaces hold its indexes, bound methods, tuples holding them...); the rest
is shared (code objects, the compiled patterns and plans, generated functions that reach no
state: filters, match builders).  The recipe is a program (``_Program``) that makes fresh copies of the first kind,
wired exactly as the pristine engine's are: each copy's generated functions get a namespace of their own holding
that copy's dicts and indexes, so no mutable object is ever shared between two engines, and
the hot loops are the very code objects a fresh build would run (the same instructions).
A generated function not yet compiled stays lazy in the copy (``cep.codegen``), and the copy
re-registers the generated sources (``codegen.again``): tracebacks and ``cep explain
--generated`` show them as for a fresh build.

What a recipe may copy is checked when it is taken: an object of a type the walk does not know
makes the key uncacheable (its engines are built the usual way), never shared by mistake.

Bound: ``MAX_RECIPES`` recipes per process (least recently used dropped first), each keyed by the
compiled pattern objects themselves (not their text: a pattern compiled without code prints the
same), the plans given, and the options.  A key's first engine is built the usual way; its
second is built the usual way too and leaves the recipe (a process that builds one engine, a
``cep run``, pays nothing for it); from the third on, engines are copies.
"""

from __future__ import annotations

import sys
from collections import OrderedDict, deque
from operator import attrgetter, itemgetter
from types import BuiltinFunctionType, CellType, CodeType, FunctionType, MethodType, ModuleType
from typing import Any

from cep import codegen

__all__ = ["MAX_RECIPES", "Recipe", "NotCopyable", "take", "recipes"]

MAX_RECIPES = 64

# key -> Recipe, or None: seen once (no recipe yet), or uncacheable (``NotCopyable``: False)
_recipes: OrderedDict[Any, Any] = OrderedDict()


class NotCopyable(Exception):
    """The engine reaches an object the recipe cannot tell state from shared data for."""


# immutable leaves: shared, never walked
_ATOMS = (int, float, complex, str, bytes, bool, type(None), CodeType, BuiltinFunctionType, type, ModuleType,
          frozenset, range, itemgetter, attrgetter, type(Ellipsis), type(NotImplemented))
# classes whose objects are plan-level data (already shared by every engine of the same patterns)
_SHARED_MODULES = ("cep.plan", "cep.lang", "cep.values", "cep.event", "cep.errors")
# classes whose objects are an engine's own (copied, with everything that reaches them)
_OWN_MODULES = ("cep.runtime", "cep.codegen")
# ids of objects shared regardless (tests: a mutant recipe that shares an index must be caught)
_shared_for_test: set[int] = set()


def recipes() -> OrderedDict:
    """The process's recipes (for tests)."""
    return _recipes


def lookup(key: Any) -> Recipe | None:
    r = _recipes.get(key)
    if r:
        _recipes.move_to_end(key)
        return r
    return None


def note(key: Any, eng: Any, since: int, prewarm: Any, keep: Any) -> None:
    """After a pristine engine was built the usual way under ``key`` (``since``: ``codegen.mark()``
    before it): remember the key the first time, take the recipe the second (``prewarm(eng)``
    first: what the engine would otherwise generate when first needed); ``keep``: the objects
    whose ids the key holds (kept alive with the recipe, so that no other object takes their ids)."""
    if key not in _recipes:
        _recipes[key] = None
        _trim()
        return
    if _recipes[key] is not None:  # uncacheable (False), or a recipe made meanwhile
        return
    try:
        prewarm(eng)
        recipe = take(eng, codegen.defined_since(since))
        recipe.keep = keep
        _recipes[key] = recipe
    except Exception:  # noqa: BLE001 - NotCopyable, or a prewarm that failed: built the usual way from now on
        _recipes[key] = False
    _trim()


def _trim() -> None:
    while len(_recipes) > MAX_RECIPES:
        _recipes.popitem(last=False)


class Recipe:
    """How to make a fresh copy of a pristine engine (``take``): ``make(new)`` fills ``new`` (an
    object of the engine's class, not initialised) with fresh state and freshly bound functions."""

    def __init__(self, fill: Any, sources: list[tuple[str, str]], keep: Any) -> None:
        self.fill = fill
        self.sources = sources
        self.keep = keep  # what the key's ids name (kept alive so that they stay unique)

    def make(self, new: Any) -> None:
        self.fill(new)
        codegen.again(self.sources)


def _module_objects() -> tuple[set[int], set[int]]:
    """The ids of every module's namespace, and of the values in cep's modules (singletons such as
    the batch loop's stand-ins ``NOWM``/``NOMX``, tables): shared, never copied."""
    dicts: set[int] = set()
    values: set[int] = set()
    for name, m in list(sys.modules.items()):
        d = getattr(m, "__dict__", None)
        if d is None:
            continue
        dicts.add(id(d))
        if name == "cep" or name.startswith("cep."):
            values.update(id(v) for v in d.values())
    return dicts, values


def _attrs(o: Any) -> list[tuple[str, Any]]:
    """(name, value) of an object's attributes: its ``__dict__``, then its slots."""
    out = list(vars(o).items()) if hasattr(o, "__dict__") else []
    for klass in type(o).__mro__:
        for s in klass.__dict__.get("__slots__", ()):
            if s in ("__dict__", "__weakref__"):
                continue
            try:
                out.append((s, getattr(o, s)))
            except AttributeError:
                pass
    return out


def take(root: Any, sources: list[tuple[str, str]]) -> Recipe:
    """The recipe of the pristine engine ``root`` (see the module doc); ``sources``: the generated
    sources its build defined (``codegen.defined_since``), re-registered by each copy."""
    module_dicts, module_values = _module_objects()
    kind: dict[int, str] = {}  # id -> "atom" (shared, not walked) or the object's kind
    objs: dict[int, Any] = {}
    refs: dict[int, list[Any]] = {}  # id -> the objects it refers to (walked kinds)
    namespaces: set[int] = set()  # function globals and keyword defaults: state only through their values
    stack = [root]
    while stack:
        o = stack.pop()
        i = id(o)
        if i in kind:
            continue
        objs[i] = o
        t = type(o)
        if t is BuiltinFunctionType and (type(o.__self__) in (dict, list, set, deque) or (
                (getattr(type(o.__self__), "__module__", "") or "").startswith(_OWN_MODULES))):
            # a method of a built-in type bound to a container (``d.get``): it follows its object
            # (bound to anything else, a module, a type, a hash's prefix state: shared as before)
            kind[i] = "bmethod"
            refs[i] = [o.__self__]
            stack.append(o.__self__)
            continue
        if o is not root and (isinstance(o, _ATOMS) or i in module_dicts or i in module_values
                              or i in _shared_for_test):
            kind[i] = "atom"
            continue
        if t is FunctionType and codegen.pending(o) is not None:
            # a generated function not compiled yet: made again from its namespace and its source
            # (``codegen.lazy_again``): its stub's defaults are the compilation, nothing else
            kind[i] = "lazy"
            r = [o.__globals__]
            namespaces.add(id(o.__globals__))
        elif t is FunctionType:
            kind[i] = "function"
            r: list[Any] = []
            if id(o.__globals__) not in module_dicts:
                r.append(o.__globals__)
                namespaces.add(id(o.__globals__))
            if o.__defaults__:
                r.append(o.__defaults__)
            if o.__kwdefaults__:
                r.append(o.__kwdefaults__)
                namespaces.add(id(o.__kwdefaults__))
            if o.__closure__:
                r.append(o.__closure__)
            if o.__dict__:
                raise NotCopyable(f"generated function {o.__qualname__} has attributes")
        elif t is MethodType:
            kind[i] = "method"
            r = [o.__func__, o.__self__]
        elif t is CellType:
            kind[i] = "cell"
            r = [o.cell_contents]
        elif t is tuple:
            kind[i] = "tuple"
            r = list(o)
        elif t is dict:
            kind[i] = "dict"
            r = [x for kv in o.items() for x in kv]
        elif t is list or t is set:
            kind[i] = t.__name__
            r = list(o)
        elif t is deque:
            kind[i] = "deque"
            r = list(o)
        else:
            mod = getattr(t, "__module__", "") or ""
            if mod.startswith(_SHARED_MODULES) and o is not root:
                kind[i] = "atom"
                continue
            if not (mod.startswith(_OWN_MODULES) or o is root):
                raise NotCopyable(f"an engine reaches an object of type {mod}.{t.__qualname__}")
            if hasattr(t, "__reduce_ex__") and t.__reduce_ex__ is not object.__reduce_ex__:
                raise NotCopyable(f"{t.__qualname__} copies itself")
            kind[i] = "object"
            r = [v for _n, v in _attrs(o)]
        refs[i] = r
        stack.extend(r)
    # what is an engine's own: its objects and containers, and whatever reaches them
    own: set[int] = set()
    back: dict[int, list[int]] = {}
    for i, r in refs.items():
        for x in r:
            back.setdefault(id(x), []).append(i)
    todo = [i for i, k in kind.items() if k == "object" or (k in ("dict", "list", "set", "deque") and i not in namespaces)]
    while todo:
        i = todo.pop()
        if i in own:
            continue
        own.add(i)
        todo.extend(j for j in back.get(i, ()) if j not in own)
    own.add(id(root))
    return Recipe(_fill_function(root, objs, kind, refs, own), sources, None)


class _Program:
    """A recipe's copy as data: every value a copy needs has a place in one list (the shared ones
    filled in already, ``base``; the copy's own made in order), and each step reads its values by
    place (``map(R.__getitem__, places)``: the loops over a dict's or an object's values run in C).
    Why data and not generated code: a program of ~300 objects compiled in ~20 ms, most of what
    a recipe cost; this one runs as fast (~0.2 ms for card testing) and needs no compiling."""

    __slots__ = ("base", "empties", "objects", "deques", "steps", "dicts", "seqs", "sets", "attrs", "slots",
                 "post")

    def run(self, root: Any) -> None:
        R = self.base.copy()
        R[0] = root
        get = R.__getitem__
        for i in self.empties[0]:
            R[i] = {}
        for i in self.empties[1]:
            R[i] = []
        for i in self.empties[2]:
            R[i] = set()
        new = object.__new__
        for i, cls in self.objects:
            R[i] = new(cls)
        for i, maxlen in self.deques:
            R[i] = deque((), maxlen)
        for op, i, a in self.steps:
            if op == 0:  # a tuple
                R[i] = tuple(map(get, a))
            elif op == 1:  # a generated function not compiled yet (``codegen.lazy_again``, inline)
                ns = R[a[0]]
                R[i] = fn = FunctionType(a[1], ns, a[2])
                fn.__kwdefaults__ = {"__cep_compile__": Pending(fn, a[3], a[4], a[2], ns)}
            elif op == 2:  # a function
                R[i] = FunctionType(R[a[0]], R[a[1]], a[2], R[a[3]], R[a[4]])
            elif op == 3:  # a bound method
                R[i] = MethodType(R[a[0]], R[a[1]])
            elif op == 4:  # a cell
                R[i] = CellType(R[a])
            else:  # a built-in method, bound to its object
                R[i] = getattr(R[a[0]], a[1])
        for i, keys, values in self.dicts:
            R[i].update(zip(map(get, keys), map(get, values), strict=True))
        for i, values in self.seqs:
            R[i].extend(map(get, values))
        for i, values in self.sets:
            R[i].update(map(get, values))
        for i, names, values in self.attrs:
            R[i].__dict__.update(zip(names, map(get, values), strict=True))
        for i, name, j in self.slots:
            setattr(R[i], name, R[j])
        for i, name, j in self.post:
            setattr(R[i], name, R[j])


Pending = codegen.Pending


def _fill_function(root: Any, objs: dict[int, Any], kind: dict[int, str], refs: dict[int, list[Any]],
                   own: set[int]) -> Any:
    """The ``_Program`` that makes every owned object anew (containers and objects empty first,
    then tuples, cells, functions and methods in the order they need each other, then the
    containers and objects filled), the shared ones in place."""
    place: dict[int, int] = {id(root): 0}
    base: list[Any] = [None]

    def at(x: Any) -> int:
        i = id(x)
        got = place.get(i)
        if got is None:
            got = place[i] = len(base)
            base.append(None if i in own else x)
        return got

    prog = _Program()
    dicts_, lists_, sets_ = [], [], []
    prog.objects, prog.deques = [], []
    for i in own:
        if i == id(root):
            continue
        o, k = objs[i], kind[i]
        if k == "dict":
            dicts_.append(at(o))
        elif k == "list":
            lists_.append(at(o))
        elif k == "set":
            sets_.append(at(o))
        elif k == "deque":
            prog.deques.append((at(o), o.maxlen))
        elif k == "object":
            prog.objects.append((at(o), type(o)))
    prog.empties = (dicts_, lists_, sets_)
    # tuples, cells, functions, methods: made once what they hold exists (depth first)
    steps: list[tuple[int, int, Any]] = []
    post: list[tuple[int, str, int]] = []
    made: set[int] = set()
    visiting: set[int] = set()

    def make(i: int) -> None:
        if i in made or kind[i] in ("dict", "list", "set", "deque", "object") or i == id(root):
            return
        if i in visiting:
            raise NotCopyable("a cycle through immutable objects")
        visiting.add(i)
        o, k = objs[i], kind[i]
        for x in refs[i]:
            if id(x) in own:
                make(id(x))
        n = at(o)
        if k == "tuple":
            steps.append((0, n, tuple(at(x) for x in o)))
        elif k == "lazy":
            p = codegen.pending(o)
            steps.append((1, n, (at(o.__globals__), o.__code__, p.entry, p.source, p.filename)))
        elif k == "function":
            steps.append((2, n, (at(o.__code__), at(o.__globals__), o.__name__, at(o.__defaults__),
                                 at(o.__closure__))))
            if o.__kwdefaults__ is not None:
                post.append((n, "__kwdefaults__", at(o.__kwdefaults__)))
            if o.__annotations__:  # (shared: names of types, as text)
                post.append((n, "__annotations__", at(o.__annotations__)))
            if o.__qualname__ != o.__name__:
                post.append((n, "__qualname__", at(o.__qualname__)))
        elif k == "method":
            steps.append((3, n, (at(o.__func__), at(o.__self__))))
        elif k == "cell":
            steps.append((4, n, at(o.cell_contents)))
        elif k == "bmethod":
            steps.append((5, n, (at(o.__self__), o.__name__)))
        visiting.discard(i)
        made.add(i)

    for i in own:
        make(i)
    prog.steps, prog.post = steps, post
    prog.dicts, prog.seqs, prog.sets, prog.attrs, prog.slots = [], [], [], [], []
    for i in own:
        o, k = objs[i], kind[i]
        n = at(o)
        if k == "dict" and o:
            prog.dicts.append((n, tuple(at(a) for a in o), tuple(at(b) for b in o.values())))
        elif k in ("list", "deque") and o:
            prog.seqs.append((n, tuple(at(x) for x in o)))
        elif k == "set" and o:
            prog.sets.append((n, tuple(at(x) for x in o)))
        elif k == "object":
            slots = {s for klass in type(o).__mro__ for s in klass.__dict__.get("__slots__", ())}
            plain = [(a, v) for a, v in _attrs(o) if a not in slots]
            if plain:
                prog.attrs.append((n, tuple(a for a, _v in plain), tuple(at(v) for _a, v in plain)))
            prog.slots += [(n, a, at(v)) for a, v in _attrs(o) if a in slots]
    prog.base = base
    return prog.run
