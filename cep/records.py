"""``record``: ``dataclasses.dataclass`` for cep's own classes, made at a fraction of its cost.

Why (issue 15: start-up decides short streams): ``dataclass`` compiles every method of
every class when the module is imported, one ``exec`` each (``__init__``, ``__repr__``,
``__eq__``, ``__hash__``, a frozen class's ``__setattr__`` and ``__delattr__``), and the
syntax tree and the compiled query alone define some thirty classes: that was a sixth of a
13-record ``cep run``.  ``record`` writes the same methods with the same behaviour, as
functions of ``cep.codegen`` that are compiled at their first call: a run compiles the few
it uses (mostly ``__init__``), and a traceback still shows each method's source.

The classes are dataclasses to the rest of the world: ``dataclasses.fields``, ``replace``,
``asdict`` and ``is_dataclass`` work, through the same ``__dataclass_fields__``.  Only the
common form is made here: eq on, order off, fields that are all ``init`` and positional, no
``ClassVar``/``InitVar``, no metaclass, no inherited fields, no ``__setattr__`` of the class's
own when frozen.  Anything else is handed to ``dataclasses.dataclass`` unchanged.

``dataclasses`` itself is not imported until someone asks for it (issue 15: its import pulls in
``inspect``, ``ast``, ``dis`` and ``tokenize``, 28 M instructions, a tenth of a file run's
start-up): cep's own code declares fields with this module's ``field`` and reads them with its
``fields``, ``replace`` and ``is_dataclass``; ``__dataclass_fields__`` and
``__dataclass_params__`` are made (as ``dataclasses`` objects) at their first use.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from threading import get_ident
from typing import Any, TypeVar, overload

from cep import codegen

_T = TypeVar("_T")

_OBJECT_SETATTR = object.__setattr__


class _Missing:
    """No default (``dataclasses.MISSING``'s role, without importing ``dataclasses``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class RecordField:
    """A field of a ``record`` class: what ``dataclasses.Field`` says of it, for cep's own readers."""

    __slots__ = ("name", "type", "default", "default_factory", "init", "repr", "hash", "compare",
                 "metadata", "kw_only")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True,
                 repr: bool = True, hash: bool | None = None, compare: bool = True,  # noqa: A002
                 metadata: Any = None, kw_only: Any = MISSING) -> None:
        self.name: str = ""
        self.type: Any = None
        self.default, self.default_factory, self.init, self.repr = default, default_factory, init, repr
        self.hash, self.compare, self.metadata, self.kw_only = hash, compare, metadata, kw_only

    def __repr__(self) -> str:
        return f"RecordField(name={self.name!r}, default={self.default!r}, compare={self.compare!r})"


def field(*, default: Any = MISSING, default_factory: Any = MISSING, init: bool = True, repr: bool = True,  # noqa: A002
          hash: bool | None = None, compare: bool = True, metadata: Any = None,  # noqa: A002
          kw_only: Any = MISSING) -> Any:
    """``dataclasses.field`` for ``record`` classes."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return RecordField(default, default_factory, init, repr, hash, compare, metadata, kw_only)


def _dataclasses() -> Any:
    import dataclasses

    return dataclasses


def fields(x: Any) -> tuple[RecordField, ...]:
    """The fields of a record class or instance (``dataclasses.fields`` for any other dataclass)."""
    own = getattr(x, "__record_fields__", None)
    if own is not None:
        return own
    return _dataclasses().fields(x)


def is_dataclass(x: Any) -> bool:
    """``dataclasses.is_dataclass``; False without importing ``dataclasses`` when nothing made one."""
    if hasattr(x, "__record_fields__"):
        return True
    dc = sys.modules.get("dataclasses")
    return dc is not None and dc.is_dataclass(x)


def replace(obj: Any, /, **changes: Any) -> Any:
    """``dataclasses.replace``: a copy of ``obj`` with ``changes``."""
    own = getattr(type(obj), "__record_fields__", None)
    if own is None:
        return _dataclasses().replace(obj, **changes)
    for f in own:
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def _frozen_error(message: str) -> Exception:
    return _dataclasses().FrozenInstanceError(message)


class _MadeAtFirstUse:
    """A class attribute made by ``make(cls)`` at its first read, then stored on the class."""

    def __init__(self, attr: str, make: Callable[[type], Any]) -> None:
        self.attr, self.make = attr, make

    def __get__(self, instance: Any, owner: type) -> Any:
        value = self.make(owner)
        setattr(owner, self.attr, value)
        return value


def _dataclass_fields(cls: type) -> dict:
    """``__dataclass_fields__`` as ``dataclass`` makes it (real ``dataclasses.Field`` objects)."""
    dc = _dataclasses()
    out = {}
    for f in cls.__record_fields__:  # type: ignore[attr-defined]
        real = dc.field(default=dc.MISSING if f.default is MISSING else f.default,
                        default_factory=dc.MISSING if f.default_factory is MISSING else f.default_factory,
                        init=f.init, repr=f.repr, hash=f.hash, compare=f.compare, metadata=f.metadata)
        real.name, real.type, real.kw_only = f.name, f.type, False
        real._field_type = dc._FIELD  # type: ignore[attr-defined]
        out[f.name] = real
    return out


class _Factory:
    """The default of an ``__init__`` parameter whose field has a ``default_factory`` (as dataclasses does)."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _Factory()


@overload
def record(cls: type[_T], /) -> type[_T]: ...
@overload
def record(*, frozen: bool = False, slots: bool = False) -> Callable[[type[_T]], type[_T]]: ...
def record(cls: type[_T] | None = None, /, *, frozen: bool = False,
           slots: bool = False) -> type[_T] | Callable[[type[_T]], type[_T]]:
    """``@dataclass`` / ``@dataclass(frozen=..., slots=...)`` with methods compiled at first use.

    A frozen class with slots sets its fields in ``__init__`` through the slots' own setters
    (no ``object.__setattr__`` per field: building the nodes of 10,000 patterns, issue 12).
    """
    if cls is None:
        return lambda c: _make(c, frozen, slots)
    return _make(cls, frozen, slots)


def _as_record_field(f: Any) -> RecordField:
    """A ``dataclasses.field(...)`` in a class body (a user's class) as a ``RecordField``."""
    dc = _dataclasses()
    return RecordField(MISSING if f.default is dc.MISSING else f.default,
                       MISSING if f.default_factory is dc.MISSING else f.default_factory,
                       f.init, f.repr, f.hash, f.compare, f.metadata, f.kw_only)


def _fields_of(cls: type) -> list[RecordField] | None:
    """The class's fields, made as ``dataclass`` makes them; None: a form left to ``dataclass``."""
    if type(cls) is not type or any("__dataclass_fields__" in b.__dict__ for b in cls.__mro__[1:]):
        return None
    dc = sys.modules.get("dataclasses")
    out: list[RecordField] = []
    seen_default = False
    for name, typ in cls.__dict__.get("__annotations__", {}).items():
        if not isinstance(typ, str) or "ClassVar" in typ or "InitVar" in typ or "KW_ONLY" in typ:
            return None
        default = cls.__dict__.get(name, MISSING)
        if dc is not None and isinstance(default, dc.Field):
            default = _as_record_field(default)
        if isinstance(default, RecordField):
            f = default
            if not f.init or f.kw_only is True or (f.default is not MISSING and f.default_factory is not MISSING):
                return None
        else:
            f = RecordField(default=default)
        if f.default is not MISSING and type(f.default).__hash__ is None:
            return None  # (dataclass refuses a mutable default: let it say so)
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        if seen_default and not has_default:
            return None  # (dataclass's own error: non-default argument follows default argument)
        seen_default = seen_default or has_default
        f.name, f.type, f.kw_only = name, typ, False
        out.append(f)
    return out


def _make(cls: type[_T], frozen: bool, slots: bool) -> type[_T]:
    fields = _fields_of(cls)
    if fields is None or (frozen and ("__setattr__" in cls.__dict__ or "__delattr__" in cls.__dict__)) \
            or (slots and "__slots__" in cls.__dict__):
        return _fallback(cls, frozen, slots)
    names = [f.name for f in fields]
    body = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    for f in fields:  # as dataclass leaves them: the default as a class attribute, a factory's field none
        if slots or f.default is MISSING:
            body.pop(f.name, None)
        else:
            body[f.name] = f.default
    if slots:
        body["__slots__"] = tuple(names)
        if frozen:
            body["__getstate__"], body["__setstate__"] = _getstate, _setstate
    new = type(cls.__name__, cls.__bases__, body)
    new.__qualname__ = cls.__qualname__
    new.__record_fields__ = tuple(fields)  # type: ignore[attr-defined]
    new.__dataclass_fields__ = _MadeAtFirstUse("__dataclass_fields__", _dataclass_fields)  # type: ignore[attr-defined]
    qual = new.__qualname__
    env: dict[str, Any] = {"_cls": new, "_names": frozenset(names), "_frozen_error": _frozen_error,
                           "_HAS_FACTORY": _HAS_FACTORY, "_osa": _OBJECT_SETATTR, "_running": set(),
                           "_ident": get_ident}
    own = cls.__dict__

    def method(name: str, params: str, lines: list[str]) -> None:
        if name not in own:
            src = f"def {name}({params}):\n" + "".join(f"    {x}\n" for x in lines)
            setattr(new, name, codegen.define(f"record {qual}.{name}", src, name, env))

    # __init__
    params, stores = ["self"], []
    for f in fields:
        n = f.name
        if f.default_factory is not MISSING:
            env[f"_f_{n}"] = f.default_factory
            params.append(f"{n}=_HAS_FACTORY")
            value = f"_f_{n}() if {n} is _HAS_FACTORY else {n}"
        elif f.default is not MISSING:
            env[f"_d_{n}"] = f.default
            params.append(f"{n}=_d_{n}")
            value = n
        else:
            params.append(n)
            value = n
        if frozen and slots:
            env[f"_set_{n}"] = new.__dict__[n].__set__  # the slot's own setter: no __setattr__
            stores.append(f"_set_{n}(self, {value})")
        elif frozen:
            stores.append(f"_osa(self, {n!r}, {value})")
        else:
            stores.append(f"self.{n} = {value}")
    if "__post_init__" in own or hasattr(new, "__post_init__"):
        stores.append("self.__post_init__()")
    method("__init__", ", ".join(params), stores or ["pass"])
    if "__init__" not in own:  # the annotations dataclass gives it (the class's, as strings): its signature
        new.__init__.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    # __repr__ (dataclass's text, and its guard against a record that contains itself)
    shown = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fields if f.repr)
    method("__repr__", "self", ["key = id(self), _ident()", "if key in _running:", "    return '...'",
                                "_running.add(key)", "try:",
                                f"    return self.__class__.__qualname__ + f'({shown})'",
                                "finally:", "    _running.discard(key)"])
    compared = "".join(f"self.{f.name}," for f in fields if f.compare)
    method("__eq__", "self, other", ["if other.__class__ is self.__class__:",
                                     f"    return ({compared}) == ({compared.replace('self.', 'other.')})",
                                     "return NotImplemented"])
    explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
    if frozen and not explicit_hash:  # (set over a ``__hash__ = None`` that a class's own ``__eq__`` implies)
        hashed = "".join(f"self.{f.name}," for f in fields if (f.compare if f.hash is None else f.hash))
        new.__hash__ = codegen.define(f"record {qual}.__hash__",  # type: ignore[method-assign]
                                      f"def __hash__(self):\n    return hash(({hashed}))\n", "__hash__", env)
    elif not frozen and not explicit_hash:
        new.__hash__ = None  # type: ignore[assignment]
    if frozen:
        for name, params, verb, call in (("__setattr__", "self, name, value", "assign to", "name, value"),
                                          ("__delattr__", "self, name", "delete", "name")):
            method(name, params, ["if type(self) is _cls or name in _names:",
                                  f"    raise _frozen_error(f'cannot {verb} field {{name!r}}')",
                                  f"super(_cls, self).{name}({call})"])
    if "__match_args__" not in own:
        new.__match_args__ = tuple(names)  # type: ignore[attr-defined]
    new.__dataclass_params__ = _MadeAtFirstUse(  # type: ignore[attr-defined]
        "__dataclass_params__", lambda _c: _params(frozen, slots))
    if sys.version_info >= (3, 13) and "__replace__" not in own:  # (copy.replace, as dataclass gives it)
        new.__replace__ = replace  # type: ignore[attr-defined]
    if new.__doc__ is None:  # (dataclass's: the signature, made when first read: ``inspect`` is dear to import)
        new.__doc__ = _MadeAtFirstUse("__doc__", _signature_doc)
    return new  # type: ignore[return-value]


def _signature_doc(cls: type) -> str:
    import inspect

    codegen.code_of(cls.__init__)  # (compiled now: a stub's signature is not the class's)
    return cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")


def _fallback(cls: type[_T], frozen: bool, slots: bool) -> type[_T]:
    """A form ``record`` does not make: ``dataclasses.dataclass`` itself (this module's ``field``s
    in the class body become ``dataclasses.field``s first)."""
    dc = _dataclasses()
    for name, f in list(cls.__dict__.items()):
        if isinstance(f, RecordField):
            kw = {} if f.kw_only is MISSING else {"kw_only": f.kw_only}
            setattr(cls, name, dc.field(
                default=dc.MISSING if f.default is MISSING else f.default,
                default_factory=dc.MISSING if f.default_factory is MISSING else f.default_factory,
                init=f.init, repr=f.repr, hash=f.hash, compare=f.compare, metadata=f.metadata, **kw))
    return dc.dataclass(cls, frozen=frozen, slots=slots)  # type: ignore[no-any-return]


def _params(frozen: bool, slots: bool) -> Any:
    """The ``__dataclass_params__`` dataclass gives (its parameters differ between Python versions)."""
    try:
        cls = _dataclasses()._DataclassParams  # type: ignore[attr-defined]
        code = cls.__init__.__code__
        values = {"init": True, "repr": True, "eq": True, "order": False, "unsafe_hash": False, "frozen": frozen,
                  "match_args": True, "kw_only": False, "slots": slots, "weakref_slot": False}
        return cls(*(values[n] for n in code.co_varnames[1:code.co_argcount]))
    except (AttributeError, KeyError, TypeError):
        return None


def _getstate(self: Any) -> list:
    return [getattr(self, f.name) for f in self.__record_fields__]


def _setstate(self: Any, state: list) -> None:
    for f, value in zip(self.__record_fields__, state, strict=False):
        _OBJECT_SETATTR(self, f.name, value)
