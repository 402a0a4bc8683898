"""Every function cep generates at run time is made here.

Why one place: the hot paths (update paths, enumeration, match builders, key
functions, compiled expressions, range functions) are Python source generated
from the plan and the pattern, so the code that runs is not the code in the
repository.  Made here, each generated function gets

- a name that says what it is, as the file name of its code object
  (``<cep card_testing: propagate leaf 2>``), which a traceback shows;
- its source registered in ``linecache`` under that name, so a traceback (and
  ``pdb``) prints the generated line that failed;
- an entry in the listing ``cep explain --generated`` prints (``defined_since``).

A source that is one top-level ``def`` (nearly all of them) is compiled when its
function is first called, not when it is defined (issue 15: ``compile`` was half
of a short run's set-up, and most update paths, drop paths and output functions
of a pattern never run on a short stream).  The function handed out is the one
that runs: its first call compiles the source and gives the function object the
real code (``__code__``), so every reference to it, kept anywhere, runs the
compiled code from then on with no indirection.  Until then its ``__code__`` is a
stub's (``code_of`` gives the real one).

The registry is bounded (``_MAX_KEPT`` sources, oldest dropped first): the
property tests build thousands of patterns in one process.  This module is a
base utility with no import from the rest of cep, so every layer may use it.

A process may keep the compiled code across runs (``use_code_cache``: ``cep run`` does): each
distinct source's code object is marshalled into a private per-user directory under a hash
of the source, and a later process loads it instead of compiling.  Why: a `cep run` of the
card-testing pattern compiles some 60 generated sources (update paths, drop paths, the batch
loop, the parser's reducers), 117 M instructions, more than half of its start-up and a
seventh of a 5,000-event run.  Loading is a file read and ``marshal.loads``; anything wrong
with an entry (missing, unreadable, not a code object) means compiling as before, and the
directory is the one ``cep.cachedir`` trusts (the current user's, writable by nobody else).
"""

from __future__ import annotations

import functools
import linecache
import marshal
import os
import re
import sys
from collections import OrderedDict
from collections.abc import Callable, Sequence
from itertools import count
from operator import itemgetter
from types import CodeType, FunctionType
from typing import Any

_MAX_KEPT = 4096

# file name -> (definition number, label, source), oldest first
_registry: OrderedDict[str, tuple[int, str, str]] = OrderedDict()
_label_uses: dict[str, int] = {}
_numbers = count()


def define(label: str, source: str, entry: str, env: dict[str, Any] | None = None,
           listed: bool = True) -> Callable:
    """Execute generated ``source`` (defining function ``entry``) and return that function.

    ``label`` says what the function is (``"card_testing: propagate leaf 2"``); a
    second, different source under the same label gets ``#2``, ``#3``... appended.
    ``env`` holds the names the source refers to (it becomes the function's globals).
    ``listed=False``: not in ``defined_since``'s listing (tracebacks still show its lines):
    machinery rather than a function of the plan (``cep.runtime.skeleton``'s copy of an engine).
    """
    if not source.endswith("\n"):
        source += "\n"
    filename = f"<cep {label}>"
    if filename in _registry and _registry[filename][2] != source:
        n = _label_uses.get(label, 1)
        while True:
            n += 1
            filename = f"<cep {label} #{n}>"
            if filename not in _registry or _registry[filename][2] == source:
                break
        _label_uses[label] = n
    namespace: dict[str, Any] = {} if env is None else env
    if listed:
        _remember(filename, label, source)
    else:
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    if source.startswith(f"def {entry}(") and _OTHER_TOP_LEVEL.search(source) is None:
        return _lazy(source, filename, entry, namespace)
    exec(_compiled(source, filename), namespace)  # noqa: S102 - the one place generated code is run
    return namespace[entry]


# a line that starts a top-level statement: a source without one after its first line is one ``def``
_OTHER_TOP_LEVEL = re.compile(r"\n[^ \t\n]")


def _stub(*args: Any, __cep_compile__: Callable[[tuple, dict], Any], **kwargs: Any) -> Any:
    return __cep_compile__(args, kwargs)


# the stub's code, its ``return`` on line 1: a traceback through a first call shows the ``def`` line
_STUB_CODE = _stub.__code__.replace(co_firstlineno=0)
_HAS_QUALNAME = hasattr(_STUB_CODE, "co_qualname")  # (Python 3.11)
# (file name, entry) -> the stub's code under that name: an engine per Spark key group defines the same functions again
_stub_codes: dict[tuple[str, str], CodeType] = {}


def _lazy(source: str, filename: str, entry: str, namespace: dict[str, Any]) -> Callable:
    """The function ``entry`` of ``source`` (one ``def``), compiled at its first call.

    Until then it runs a stub that takes any arguments; the stub's one keyword-only
    default, hidden from callers by its name, is the ``_Pending`` step that compiles
    the source, executes it in ``namespace`` (default values are evaluated then) and
    moves the real code and defaults onto this same function object.
    """
    stub = _stub_codes.get((filename, entry))
    if stub is None:
        if len(_stub_codes) >= _MAX_KEPT:
            _stub_codes.clear()
        names = {"co_name": entry, "co_qualname": entry} if _HAS_QUALNAME else {"co_name": entry}
        stub = _stub_codes[filename, entry] = _STUB_CODE.replace(co_filename=filename, **names)
    fn = FunctionType(stub, namespace, entry)
    fn.__kwdefaults__ = {"__cep_compile__": _Pending(fn, source, filename, entry, namespace)}
    namespace[entry] = fn
    return fn


class _Pending:
    """A generated function's compilation, until its first call (``_lazy``)."""

    __slots__ = ("fn", "source", "filename", "entry", "namespace")

    def __init__(self, fn: FunctionType, source: str, filename: str, entry: str, namespace: dict[str, Any]) -> None:
        self.fn, self.source, self.filename, self.entry, self.namespace = fn, source, filename, entry, namespace

    def __call__(self, args: tuple, kwargs: dict) -> Any:
        self.materialize()
        return self.fn(*args, **kwargs)

    def materialize(self) -> None:
        fn = self.fn
        if _pending(fn) is not self:
            return  # done already (by another thread, or by ``code_of``)
        namespace, entry = self.namespace, self.entry
        exec(_compiled(self.source, self.filename), namespace)  # noqa: S102 - the one place generated code is run
        real = namespace[entry]
        fn.__code__ = real.__code__
        fn.__defaults__ = real.__defaults__
        fn.__kwdefaults__ = real.__kwdefaults__
        if real.__annotations__:  # (else the stub's: set by the maker of the function, cep.records)
            fn.__annotations__ = real.__annotations__
        namespace[entry] = fn  # (the name a recursive or a sibling function looks up: this same object)


# a copy of an engine (``cep.runtime.skeleton``) binds the generated functions not compiled yet
# to its own state as ``_lazy`` does: the stub's code, its own namespace and a ``Pending`` of its own
Pending = _Pending


def pending(fn: Callable) -> Any:
    """The compilation a generated function waits for (None: compiled, or not generated)."""
    return _pending(fn)


def _pending(fn: Callable) -> _Pending | None:
    defaults = getattr(fn, "__kwdefaults__", None)
    p = defaults.get("__cep_compile__") if defaults else None
    return p if isinstance(p, _Pending) else None


def code_of(fn: Callable) -> CodeType:
    """The code ``fn`` runs (``fn.__code__``), compiling it now if ``fn`` is a generated function not called yet."""
    p = _pending(fn)
    if p is not None:
        p.materialize()
    return fn.__code__  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=_MAX_KEPT)
def _compile_once(source: str) -> CodeType:
    if _store is not None:
        return _stored(source, _store)
    return compile(source, "<cep>", "exec")


_store: str | None = None  # the directory of compiled code kept across processes (``use_code_cache``)
_MAX_STORED = 4096  # entries the directory keeps (the oldest written are removed beyond it)
_PRUNE_EVERY = 256  # entries a process writes between two looks at the directory's size
_written = [0]
_TAG = f"code-{sys.implementation.cache_tag}"  # (marshal's format of code objects is per version)


def use_code_cache(directory: str | None) -> str | None:
    """Keep compiled code in ``directory`` (None: stop) and load it from there (see the module doc);
    returns the directory used until now (to restore).

    ``directory`` must be private to the user (``cep.cachedir.private_dir``): what it holds is run."""
    global _store
    was, _store = _store, directory
    return was


def code_cache_dir() -> str | None:
    """The directory ``use_code_cache`` is given by ``cep run``: ``cep.cachedir``'s private
    ``code-<interpreter tag>``, or None where there is none or ``CEP_CODE_CACHE=0`` is set."""
    if os.environ.get("CEP_CODE_CACHE", "1") == "0":
        return None
    from cep.cachedir import private_dir  # (a base module too: no cycle)

    return private_dir(_TAG)


def _stored(source: str, directory: str) -> CodeType:
    """``compile(source)``, loaded from ``directory`` when an earlier process stored it there."""
    from _blake2 import blake2b

    path = os.path.join(directory, blake2b(source.encode(), digest_size=20).hexdigest())
    try:
        with open(path, "rb") as f:
            code = marshal.loads(f.read())
        if type(code) is CodeType:
            return code
    except (OSError, ValueError, EOFError, TypeError):  # missing, unreadable or damaged: compile
        pass
    code = compile(source, "<cep>", "exec")
    try:
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(marshal.dumps(code))
        os.replace(tmp, path)  # (atomic: a concurrent reader sees the whole entry or none)
        _written[0] += 1
        if _written[0] % _PRUNE_EVERY == 1:  # (the first write of a process, then every _PRUNE_EVERY)
            _prune(directory)
    except OSError:  # a read-only or full disk: no cache, nothing else changes
        pass
    return code


def _prune(directory: str) -> None:
    """Remove the oldest entries beyond ``_MAX_STORED`` (down to three quarters of it); runs only
    after a compile, which costs more."""
    with os.scandir(directory) as it:
        entries = [e for e in it if e.is_file(follow_symlinks=False)]
    if len(entries) <= _MAX_STORED:
        return
    entries.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime)
    for e in entries[: len(entries) - _MAX_STORED * 3 // 4]:
        try:
            os.unlink(e.path)
        except OSError:
            pass


def _named(code: CodeType, filename: str) -> CodeType:
    consts = tuple(_named(c, filename) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _compiled(source: str, filename: str) -> CodeType:
    """``compile(source, filename)``, compiling each distinct source once (issue 12).

    ``compile`` is the most expensive step of checking a pattern, and patterns repeat
    shapes: an AND window's k(k-1) pair predicates are one source, files of similar
    patterns share their filters.  The cached code object gets ``filename`` (its
    nested functions too), so tracebacks still name the function.  Not cached per name: each
    function gets a code object of its own (copies of an engine, ``cep.runtime.skeleton``, too),
    since a code object keeps the specializations of its instructions (Python 3.11: a global's
    place in its function's namespace) and two engines' functions sharing one would undo each
    other's (+0.7 % instructions per event of the batch loop that shared the warm-up's).
    """
    return _named(_compile_once(source), filename)


def _remember(filename: str, label: str, source: str) -> None:
    if filename in _registry:
        _registry.move_to_end(filename)
        if _registry[filename][2] == source and filename in linecache.cache:
            # the same source again (an engine per Spark key group, a resumed run): only its number moves
            _registry[filename] = (next(_numbers), label, source)
            return
    _registry[filename] = (next(_numbers), label, source)
    # mtime None: linecache.checkcache keeps the entry (there is no file to compare with)
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    while len(_registry) > _MAX_KEPT:
        old, _entry = _registry.popitem(last=False)
        linecache.cache.pop(old, None)


def again(entries: Sequence[tuple[str, str]]) -> None:
    """The sources ``entries`` (``defined_since``'s (file name, source) pairs) defined again, in
    order: what a fresh build would do for them (the listing and ``linecache``), for a copy of an
    engine made without defining anything (``cep.runtime.skeleton``)."""
    registry, cache = _registry, linecache.cache
    for filename, source in entries:
        got = registry.get(filename)
        if got is not None and got[2] is source and filename in cache:
            registry.move_to_end(filename)
            registry[filename] = (next(_numbers), got[1], source)
        else:
            _remember(filename, filename[5:-1], source)


def mark() -> int:
    """A point in the listing: ``defined_since(mark())`` lists what is defined after it."""
    return next(_numbers)


def defined_since(point: int) -> list[tuple[str, str]]:
    """(file name, source) of every function defined (or defined again) after ``point``, in order."""
    items = sorted((num, filename, src) for filename, (num, _label, src) in _registry.items() if num > point)
    return [(filename, src) for _num, filename, src in items]


def tuple_getter(positions: Sequence[int]) -> Callable[[tuple], tuple]:
    """t -> the tuple of ``t``'s values at ``positions`` (always a tuple, even of one)."""
    if not positions:
        return _empty
    if len(positions) == 1:
        p = positions[0]
        return define(f"tuple of position {p}", f"def get(t):\n    return (t[{p}],)\n", "get")
    return itemgetter(*positions)


def key_getter(positions: Sequence[int]) -> Callable[[tuple], Any]:
    """A hash key of ``t``'s values at ``positions``: the bare value for one position."""
    if len(positions) == 1:
        return itemgetter(positions[0])
    return tuple_getter(positions)


def _empty(_t: tuple) -> tuple:
    return ()
