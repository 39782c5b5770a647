"""archfit.record against the standard library's dataclasses: each class body below is made
once a dataclass and once a record, and every behaviour archfit's records use must agree with
the dataclass's (the oracle here is the standard library, not archfit)."""

from __future__ import annotations

import collections
import copy
import dataclasses
import inspect
import pickle

import pytest

from archfit import record as rec


def both(frozen: bool = False, repr: bool = True):  # noqa: A002  # dataclass's own keyword
    """A class with every kind of field archfit's records have, as a dataclass and a record."""
    out = []
    for deco, fld in ((dataclasses.dataclass, dataclasses.field), (rec.record, rec.field)):
        class Point:
            x: int
            y: float = 2.5
            tags: list = fld(default_factory=list)
            note: str = fld(default="n", compare=False, repr=False)
            hidden: tuple = fld(default=(), repr=False)

            def __post_init__(self) -> None:
                if self.x < 0:
                    raise ValueError("x must be >= 0")
                object.__setattr__(self, "y", float(self.y))

        out.append(deco(frozen=frozen, repr=repr)(Point))
    return out


def _same_outcome(f, g):
    """f() and g() return equal values or raise the same exception type."""
    try:
        a = f()
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)):
            g()
        return None
    b = g()
    assert a == b
    return a


@pytest.mark.parametrize("frozen", [False, True])
def test_construction_repr_eq_and_errors_match_a_dataclass(frozen):
    D, R = both(frozen)
    for args, kw in [((1,), {}), ((1, 3), {}), ((), {"x": 2, "tags": [1]}),
                     ((1, 2, [3], "m", (4,)), {}), ((1,), {"note": "other"}),
                     ((), {}), ((1, 2, [], "a", (), 9), {}), ((1,), {"x": 1}),
                     ((1,), {"nope": 1}), ((-1,), {})]:
        d = _same_outcome(lambda a=args, k=kw: vars(D(*a, **k)),
                          lambda a=args, k=kw: vars(R(*a, **k)))
        if d is None:
            continue
        dd, rr = D(*args, **kw), R(*args, **kw)
        assert repr(rr).replace("test_record.both.<locals>.", "") == \
            repr(dd).replace("test_record.both.<locals>.", "")
        assert list(vars(rr)) == list(vars(dd))  # fields in order
    # eq: the compared fields only, same class only; a default factory is fresh per object
    assert R(1, note="a") == R(1, note="b") and D(1, note="a") == D(1, note="b")
    assert R(1) != R(2) and R(1) != D(1) and R(1).tags is not R(1).tags
    assert type(R(1).y) is float and R(1, 3).y == 3.0
    assert R.__match_args__ == D.__match_args__
    assert str(inspect.signature(R)) == str(inspect.signature(D))  # help() and notebooks


def test_frozen_assignment_and_hash_match_a_dataclass():
    D, R = both(frozen=True)
    for obj in (D(1), R(1)):
        with pytest.raises(AttributeError):
            obj.x = 2
        with pytest.raises(AttributeError):
            del obj.y
    with pytest.raises(rec.FrozenInstanceError):
        R(1).x = 2
    for obj in (D(1), R(1)):  # not a field either: a frozen object takes no new attribute
        with pytest.raises(AttributeError):
            obj.other = 1
    assert hash(R(1, 2.0, (), "a")) == hash(D(1, 2.0, (), "a"))  # the compared fields' tuple
    assert hash(R(1, tags=(), note="a")) == hash(R(1, tags=(), note="b"))
    with pytest.raises(TypeError):
        hash(R(1, tags=[1]))  # a list field: unhashable, as a dataclass's
    M, N = both(frozen=False)
    assert M.__hash__ is None and N.__hash__ is None  # eq without frozen: unhashable
    N(1).x = 5  # not frozen: assignable


def test_fields_replace_and_asdict_match_a_dataclass():
    D, R = both(frozen=True)
    def described(flds, missing):
        return [(f.name, None if f.default is missing else f.default,
                 f.default_factory is not missing, f.repr, f.compare) for f in flds]

    assert described(rec.fields(R), rec.MISSING) == \
        described(dataclasses.fields(D), dataclasses.MISSING)
    assert described(rec.fields(R(1)), rec.MISSING) == described(rec.fields(R), rec.MISSING)
    assert rec.fields(D) == dataclasses.fields(D)  # a dataclass goes to the standard library
    for changes in ({"y": 7}, {"note": "z"}, {"x": -1}, {"bad": 1}):
        _same_outcome(lambda c=changes: vars(dataclasses.replace(D(1, tags=[2]), **c)),
                      lambda c=changes: vars(rec.replace(R(1, tags=[2]), **c)))
    assert hasattr(R, "tags") == hasattr(D, "tags") is False  # a factory field: no class value
    assert R.y == D.y == 2.5 and R.note == D.note == "n"  # a default: the class value
    Pair = collections.namedtuple("Pair", "a b")
    got, want = rec.asdict(R(1, tags=[Pair(1, {2})])), dataclasses.asdict(D(1, tags=[Pair(1, {2})]))
    assert got == want and type(got["tags"][0]) is Pair
    leaf = R(1, tags=[Pair(1, {2})])
    assert rec.asdict(leaf)["tags"][0].b is not leaf.tags[0].b  # a leaf is copied, not shared
    inner_d, inner_r = D(3, tags=[1]), R(3, tags=[1])
    assert rec.asdict(R(1, tags=[inner_r, {"k": (inner_r,)}])) == \
        dataclasses.asdict(D(1, tags=[inner_d, {"k": (inner_d,)}]))
    src = R(1, tags=[[1, 2]])
    out = rec.asdict(src)
    out["tags"][0].append(3)
    assert src.tags == [[1, 2]]  # values are copied, as dataclasses.asdict copies them
    assert rec.asdict(D(1)) == dataclasses.asdict(D(1))


@rec.record(frozen=True)
class Base:
    a: int
    b: int = 1

    def __repr__(self) -> str:  # a method the class defines is kept
        return f"<{self.a},{self.b}>"


@rec.record(frozen=True)
class Child(Base):
    c: str = "c"


@dataclasses.dataclass(frozen=True)
class DBase:
    a: int
    b: int = 1

    def __repr__(self) -> str:
        return f"<{self.a},{self.b}>"


@dataclasses.dataclass(frozen=True)
class DChild(DBase):
    c: str = "c"


def test_subclasses_pickling_copies_and_own_methods():
    assert [f.name for f in rec.fields(Child)] == [f.name for f in dataclasses.fields(DChild)]
    ch = Child(1, c="z")
    assert (ch.a, ch.b, ch.c) == (1, 1, "z") and repr(Base(2)) == repr(DBase(2)) == "<2,1>"
    assert repr(ch).replace("Child", "") == repr(DChild(1, c="z")).replace("DChild", "")
    assert pickle.loads(pickle.dumps(ch)) == ch and copy.deepcopy(ch) == ch
    assert copy.copy(ch) == ch and ch != Base(1)
    for cls in (Child, DChild):  # a required field left out, with no __post_init__ to trip
        with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
            cls()
    with pytest.raises(TypeError, match="non-default argument"):
        @rec.record
        class Bad:
            a: int = 0
            b: int  # type: ignore[misc]
    with pytest.raises(ValueError, match="default_factory"):
        @rec.record
        class Mutable:
            a: list = []  # noqa: RUF012
    with pytest.raises(ValueError):
        rec.field(default=1, default_factory=list)  # type: ignore[call-overload]  # pyright: ignore


def test_archfits_records_behave_as_they_did_as_dataclasses():
    """The five records on recommend's cold path, through the functions archfit calls."""
    from archfit.laws.base import Constraints
    from archfit.laws.trust import Trust
    from archfit.shapes import ARCH_FIELDS, Shape

    s = Shape(n_layer=12, d_model=768, n_head=12)
    assert repr(s).startswith("Shape(n_layer=12, d_model=768, n_head=12, d_ff=3072, ")
    assert "ff_ratio" not in repr(s)  # repr=False, as declared
    assert s == Shape(n_layer=12, d_model=768, n_head=12, d_ff=3072) and len({s, s.with_()}) == 1
    assert s.with_(n_layer=6).n_layer == 6 and s.with_(ff_ratio=2.0).d_ff == 1536
    assert ARCH_FIELDS[0] == "vocab_size" and "n_layer" not in ARCH_FIELDS
    assert Shape.from_config(s.config()) == s
    with pytest.raises(AttributeError):
        s.n_layer = 3  # type: ignore[misc]
    t = Trust()
    t.weak("w")
    assert (t.verdict, t.reasons, Trust().reasons) == ("weak", ["w"], [])
    assert Constraints() == Constraints() and not Constraints()
    assert rec.replace(Constraints(), scale=2.0).scale == 2.0
