"""``cep.records.record`` behaves as ``dataclasses.dataclass`` on the forms cep uses (issue 15).

Each class form is made twice from the same body, once by each; every observable the
rest of cep (and its tests) relies on must agree: the ``__init__`` signature and defaults,
repr, equality and hashing (fields with ``compare=False``/``repr=False`` left out),
immutability and its error, ``fields``/``replace``/``asdict``, ``__match_args__``, pickling.
"""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cep import codegen
from cep.lang.ast import Attr, Element, Literal, Loc, Pattern, Structure
from cep.lang.gcq import Variable
from cep.records import record


def _forms():
    """(name, decorator arguments, body) of each form: a fresh class per call."""
    def plain():
        class P:
            """A mutable record."""

            a: int
            b: str = "x"
            c: list = field(default_factory=list)
            d: float = field(default=1.5, compare=False, repr=False)

            @property
            def twice(self) -> int:
                return 2 * self.a
        return P

    def frozen():
        class F:
            """A frozen record."""

            a: int
            b: tuple = ()
            loc: object = field(default=None, compare=False, repr=False)
            h: int = field(default=0, hash=False)
        return F

    def post_init():
        class Q:
            a: int
            b: int = 0

            def __post_init__(self) -> None:
                self.b = self.b or 2 * self.a
        return Q

    def own_eq():
        class E:
            """Its own equality: a frozen dataclass still adds a hash."""

            a: int

            def __eq__(self, other: object) -> bool:
                return True
        return E

    def inherits():
        @dataclasses.dataclass(frozen=True)
        class Base:
            """A dataclass base: a subclass's fields follow its own (``record`` leaves it to dataclass)."""

            a: int

        class S(Base):
            """Inherits a."""

            b: tuple = ()
        return S

    return [("plain", {}, plain), ("frozen", {"frozen": True}, frozen),
            ("frozen slots", {"frozen": True, "slots": True}, frozen), ("slots", {"slots": True}, plain),
            ("post_init", {}, post_init), ("own eq", {"frozen": True}, own_eq), ("inherits", {"frozen": True}, inherits)]


def _args(cls):
    return {"P": (3,), "F": (3, (1, 2)), "Q": (4,), "E": (5,), "S": (6, (7,))}[cls.__name__]


@pytest.mark.parametrize(("name", "kw", "make"), _forms(), ids=[f[0] for f in _forms()])
def test_record_agrees_with_dataclass(name, kw, make):
    d_cls, r_cls = dataclasses.dataclass(make(), **kw), record(make(), **kw)
    codegen.code_of(r_cls.__init__)  # (until its first call, a generated function has the stub's signature)
    assert str(inspect.signature(d_cls)) == str(inspect.signature(r_cls))
    assert d_cls.__doc__ == r_cls.__doc__ and d_cls.__match_args__ == r_cls.__match_args__
    assert [(f.name, f.type, f.default, f.compare, f.repr, f.hash) for f in dataclasses.fields(d_cls)] == \
        [(f.name, f.type, f.default, f.compare, f.repr, f.hash) for f in dataclasses.fields(r_cls)]
    assert dataclasses.is_dataclass(r_cls)
    assert repr(d_cls.__dataclass_params__) == repr(r_cls.__dataclass_params__)
    # (the same dunders; Python 3.10's slots=True also copies the old class's unusable __weakref__;
    # record's own addition: ``__record_fields__``, what cep reads without importing dataclasses)
    assert sorted(k for k in vars(d_cls) if k.startswith("__") and k != "__weakref__") == \
        sorted(k for k in vars(r_cls) if k.startswith("__") and k not in ("__weakref__", "__record_fields__"))
    assert ("__slots__" in d_cls.__dict__) == ("__slots__" in r_cls.__dict__)
    assert (d_cls.__hash__ is None) == (r_cls.__hash__ is None)
    for attr in ("a", "b", "c", "d", "h"):  # class attributes: the defaults, or the slots
        dv, rv = getattr(d_cls, attr, "absent"), getattr(r_cls, attr, "absent")
        assert (type(dv).__name__ == type(rv).__name__ == "member_descriptor") or dv == rv
    args = _args(d_cls)
    d, r = d_cls(*args), r_cls(*args)
    assert repr(d) == repr(r)
    assert dataclasses.asdict(d) == dataclasses.asdict(r)
    d2, r2 = dataclasses.replace(d, a=7), dataclasses.replace(r, a=7)
    assert repr(d2) == repr(r2) and (d == d2) == (r == r2) and (d == d) == (r == r)
    assert (d == 3) == (r == 3) and (r == d) is (name == "own eq")  # another class: NotImplemented
    if d_cls.__hash__ is not None:
        assert hash(d) == hash(d_cls(*args)) and hash(r) == hash(r_cls(*args))
        if hasattr(d, "loc"):  # compare=False fields are out of equality and hash, hash=False out of hash
            for x in (d, r):
                x3, x4 = dataclasses.replace(x, loc="elsewhere"), dataclasses.replace(x, h=9)
                assert x3 == x and hash(x3) == hash(x) and repr(x3) == repr(x)
                assert x4 != x and hash(x4) == hash(x) and repr(x4) == repr(x).replace("h=0", "h=9")
    for target in (d, r):
        if kw.get("frozen"):
            with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'a'"):
                target.a = 1
            with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'a'"):
                del target.a
        else:
            target.a = 11
    assert repr(d) == repr(r)


# module-level twins (pickle finds a class by its module and qualified name)
class _Twin:
    """A frozen node with slots, as cep.lang.ast's."""

    a: object
    b: object = None
    loc: object = field(default=None, compare=False, repr=False)


class _Mutable:
    """A mutable record, as cep.lang.gcq's."""

    a: object
    b: object = None
    c: list = field(default_factory=list)


def _twin(make, name: str, **kw):
    cls = make(type(name, (), {k: v for k, v in vars(_Twin if "Twin" in name else _Mutable).items()
                               if k not in ("__dict__", "__weakref__")}), **kw)
    cls.__qualname__ = cls.__name__ = name
    globals()[name] = cls
    return cls


D_TWIN = _twin(dataclasses.dataclass, "DTwin", frozen=True, slots=True)
R_TWIN = _twin(record, "RTwin", frozen=True, slots=True)
D_MUT = _twin(dataclasses.dataclass, "DMutable")
R_MUT = _twin(record, "RMutable")
_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5)
                       | st.floats(allow_nan=False), lambda v: st.tuples(v, v), max_leaves=5)


@settings(max_examples=200, deadline=None)
@given(_VALUES, _VALUES, _VALUES, _VALUES, st.integers())
def test_record_and_dataclass_agree_on_any_field_values(a, b, a2, b2, loc):
    for d_cls, r_cls in ((D_TWIN, R_TWIN), (D_MUT, R_MUT)):
        d, r, d2, r2 = d_cls(a, b), r_cls(a, b), d_cls(a2, b2), r_cls(a2, b2)
        assert repr(d).replace("DTwin", "X").replace("DMutable", "X") == \
            repr(r).replace("RTwin", "X").replace("RMutable", "X")
        assert (d == d2) == (r == r2) and (d != d2) == (r != r2) and (d == d_cls(a, b)) == (r == r_cls(a, b))
        assert dataclasses.astuple(d) == dataclasses.astuple(r)
        assert dataclasses.asdict(dataclasses.replace(d, b=a2)) == dataclasses.asdict(dataclasses.replace(r, b=a2))
        back = pickle.loads(pickle.dumps(r))
        assert type(back) is r_cls and repr(back) == repr(r)
        assert dataclasses.astuple(back) == dataclasses.astuple(r)
        if d_cls is D_TWIN:
            assert hash(d) == hash(D_TWIN(a, b, loc)) and hash(r) == hash(R_TWIN(a, b, loc))
            assert (hash(d) == hash(d2)) == (hash(r) == hash(r2)) or d != d2
            assert R_TWIN(a, b, loc) == r and (loc is None or repr(R_TWIN(a, b, loc)) == repr(r))
            with pytest.raises(dataclasses.FrozenInstanceError):
                r.b = 1
        else:
            assert d_cls.__hash__ is None and r_cls.__hash__ is None
            r.c.append(a)
            d.c.append(a)
            assert dataclasses.asdict(d) == dataclasses.asdict(r) and r_cls(a, b).c == []


def test_the_syntax_tree_pickles_and_compares_as_before():
    node = Pattern("p", Structure("SEQ", (Element("A", "a", loc=Loc(1, 2)),)), where=Attr("a", "x"), file="f")
    back = pickle.loads(pickle.dumps(node))
    assert back == node and repr(back) == repr(node) and hash(back) == hash(node)
    assert back.structure.elements[0].loc == Loc(1, 2)  # (not compared, but kept)
    assert Pattern("p", node.structure, where=Attr("a", "x"), file="g") == node  # file is not compared
    assert Attr("a", "x") != Attr("a", "y") and Attr("a", "x") != Literal("a")
    assert repr(Variable("v", (("a", "x"),))) == "Variable(name='v', refs=(('a', 'x'),))"


def test_record_hands_unusual_forms_to_dataclass():
    class K:
        a: int = 0
        b: int  # a non-default field after a default one: dataclass's own error

    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        record(K)

    class M:
        a: list = []  # noqa: RUF012 - the mutable default dataclass refuses

    with pytest.raises(ValueError, match="mutable default"):
        record(M)


def test_record_methods_are_compiled_at_first_use(monkeypatch):
    compiled: list[str] = []
    real_compile = codegen._compile_once.__wrapped__
    monkeypatch.setattr(codegen, "_compile_once", lambda src: compiled.append(src) or real_compile(src))

    @record(frozen=True, slots=True)
    class N:
        """A node."""

        a: int
        b: str = "z"

    assert compiled == []
    n = N(1)
    assert [s.split("(")[0] for s in compiled] == ["def __init__"]
    assert n == N(1, "z") and repr(n).endswith(".N(a=1, b='z')")
    assert sorted(s.split("(")[0] for s in compiled) == ["def __eq__", "def __init__", "def __repr__"]


_NO_DATACLASSES_PROBE = """
import pickle, sys
from cep.lang.compiler import compile_files
from cep.plan.planner import plan_pattern
from cep.records import fields, is_dataclass, replace
(p,) = compile_files([sys.argv[1]])
plan = plan_pattern(p)
node = p.source
again = replace(node, name="other")
assert again.name == "other" and again.structure == node.structure and is_dataclass(plan)
assert [f.name for f in fields(node)][:2] == ["name", "structure"]
assert pickle.loads(pickle.dumps(node)) == node
print(" ".join(m for m in ("dataclasses", "inspect") if m in sys.modules))
"""


def test_records_are_made_compared_replaced_and_pickled_without_importing_dataclasses():
    """issue 15: ``dataclasses`` imports ``inspect`` (28 M instructions, a tenth of a file run's start-up)."""
    import subprocess
    import sys

    from cephelp import PATTERNS, ROOT

    r = subprocess.run([sys.executable, "-c", _NO_DATACLASSES_PROBE, str(PATTERNS / "card_testing.pattern")],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == []


def test_the_dataclass_view_of_a_record_is_made_at_first_use():
    from cep import records

    @record(frozen=True)
    class Late:
        a: int
        b: list = records.field(default_factory=list, compare=False)
        c: str = records.field(default="z", repr=False)

    assert "__dataclass_fields__" not in {k for k, v in vars(Late).items() if isinstance(v, dict)}
    real = dataclasses.fields(Late)  # made now, as dataclass makes it
    assert [(f.name, f.compare, f.repr, f.default) for f in real] == \
        [("a", True, True, dataclasses.MISSING), ("b", False, True, dataclasses.MISSING), ("c", True, False, "z")]
    assert real[1].default_factory is list and isinstance(vars(Late)["__dataclass_fields__"], dict)
    x = Late(1)
    assert records.replace(x, a=2) == Late(2) and dataclasses.replace(x, a=2) == Late(2)
    assert dataclasses.asdict(x) == {"a": 1, "b": [], "c": "z"} and records.is_dataclass(x)
    assert Late.__doc__ == "Late(a: 'int', b: 'list' = <factory>, c: 'str' = 'z')"
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'a'"):
        x.a = 3
    with pytest.raises(TypeError):
        records.replace(x, nope=1)
    assert records.fields(Late) == records.fields(x) and [f.name for f in records.fields(x)] == ["a", "b", "c"]
