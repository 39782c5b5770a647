"""Record classes for the cold path: :func:`record`, :func:`field`, :func:`fields`,
:func:`replace` and :func:`asdict`, which behave as the standard library's dataclasses do for
what archfit's records use.

Why not ``dataclasses``: ``archfit recommend`` must start in at most 3x python's own start
(issue 57), and its path defines five record classes (the shape, the constraints, the trust, the
fit and the recommendation). Importing ``dataclasses`` imports ``inspect`` (with ``ast``, ``dis``
and ``tokenize``), 8 ms here, and each frozen dataclass of 16 fields costs 0.8 ms to define, since
it writes and compiles its methods: 12 ms of a 44 ms start. A record's methods are written once,
here, and bound to each class's field list.

What a record has, as a dataclass has it: fields in annotation order after its bases' (a
subclass decorated with :func:`record` adds fields), defaults and default factories
(:func:`field`), ``compare=False`` and ``repr=False`` fields, ``__post_init__``, ``__eq__``
over the compared fields for two objects of the same class, ``frozen`` (assignment raises
:class:`FrozenInstanceError`) with the hash of the compared fields' tuple, the dataclass
``repr``, ``__match_args__``, the constructor's signature (for ``help`` and notebooks), and a
method the class defines itself is kept. Records pickle
and copy as plain objects. Not supported: ``init=False`` fields, ``InitVar``, ``KW_ONLY``,
``slots``, ``order``. :func:`fields`, :func:`replace` and :func:`asdict` take records and real
dataclasses alike (for the latter they call the standard library).

Type checkers read this module as ``dataclasses`` itself (the ``TYPE_CHECKING`` branch), so a
record's constructor is checked as a dataclass's is."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant would import typing (3 ms) on the cold path
if TYPE_CHECKING:
    from dataclasses import MISSING, FrozenInstanceError, asdict, field, fields, replace
    from dataclasses import dataclass as record
else:
    class FrozenInstanceError(AttributeError):
        """Assignment to a field of a frozen record."""

    class _Missing:
        __slots__ = ()

        def __repr__(self):
            return "MISSING"

    MISSING = _Missing()
    _SCALARS = (int, float, str, bool, type(None))

    class Field:
        """One field of a record: its name, annotation (text), default or default factory,
        and whether it is in the repr and in comparisons."""

        __slots__ = ("name", "type", "default", "default_factory", "repr", "compare")

        def __init__(self, default=MISSING, default_factory=MISSING, repr=True, compare=True):
            if default is not MISSING and default_factory is not MISSING:
                raise ValueError("cannot specify both default and default_factory")
            self.name, self.type = "", ""
            self.default, self.default_factory = default, default_factory
            self.repr, self.compare = repr, compare

        def __repr__(self):
            return (f"Field(name={self.name!r}, type={self.type!r}, default={self.default!r}, "
                    f"default_factory={self.default_factory!r}, repr={self.repr}, "
                    f"compare={self.compare})")

    def field(*, default=MISSING, default_factory=MISSING, repr=True, compare=True):
        """A field with a default or a default factory, or left out of the repr or of
        comparisons (as ``dataclasses.field``)."""
        return Field(default, default_factory, repr, compare)

    def record(cls=None, /, *, frozen=False, eq=True, repr=True):
        """Make ``cls`` a record (as ``dataclasses.dataclass`` with the same arguments)."""
        def wrap(c):
            return _process(c, frozen, eq, repr)

        return wrap if cls is None else wrap(cls)

    def _own_fields(cls):
        out = []
        for name, ann in cls.__dict__.get("__annotations__", {}).items():
            if isinstance(ann, str) and ann.replace("typing.", "").startswith("ClassVar"):
                continue
            value = cls.__dict__.get(name, MISSING)
            f = value if isinstance(value, Field) else Field(default=value)
            f.name, f.type = name, ann
            if isinstance(f.default, (list, dict, set)):
                raise ValueError(f"mutable default {type(f.default).__name__} for field {name} "
                                 "is not allowed: use default_factory")
            if isinstance(value, Field):  # the class attribute is the default, as a dataclass's
                if f.default is MISSING:
                    delattr(cls, name)
                else:
                    setattr(cls, name, f.default)
            out.append(f)
        return out

    def _process(cls, frozen, eq, want_repr):
        by_name = {}
        for base in reversed(cls.__mro__[1:]):
            for f in base.__dict__.get("__record_fields__", ()):
                by_name[f.name] = f
        for f in _own_fields(cls):
            by_name[f.name] = f
        flds = tuple(by_name.values())
        seen_default = False
        for f in flds:
            has = f.default is not MISSING or f.default_factory is not MISSING
            if seen_default and not has:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
            seen_default = seen_default or has
        cls.__record_fields__ = flds
        cls.__match_args__ = tuple(f.name for f in flds)
        cls.__signature__ = _Signature()  # help(), notebooks: the fields, as a dataclass's
        own = cls.__dict__
        methods = {"__init__": _make_init(cls, flds)}
        if want_repr:
            methods["__repr__"] = _make_repr(tuple(f.name for f in flds if f.repr))
        if eq:
            compared = tuple(f.name for f in flds if f.compare)
            methods["__eq__"] = _make_eq(compared)
            if "__hash__" not in own:  # a class's own __hash__ (or __eq__, which sets it) wins
                methods["__hash__"] = _make_hash(compared) if frozen else None
        if frozen:
            if "__setattr__" in own or "__delattr__" in own:
                raise TypeError(f"cannot overwrite __setattr__ or __delattr__ in frozen {cls.__name__}")
            methods.update(_frozen_methods(cls, frozenset(f.name for f in flds)))
        for name, fn in methods.items():
            if name not in own:  # a method the class defines is kept
                if fn is not None:
                    fn.__qualname__ = f"{cls.__qualname__}.{name}"
                setattr(cls, name, fn)
        return cls

    class _Factory:
        __slots__ = ()

        def __repr__(self):
            return "<factory>"

    class _Signature:
        """The constructor's signature, made on first use (``inspect`` is not imported
        before): what ``inspect.signature`` reads from a class's ``__signature__``."""

        def __get__(self, obj, owner):
            import inspect

            kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
            return inspect.Signature(
                [inspect.Parameter(f.name, kind, annotation=f.type, default=(
                    f.default if f.default is not MISSING else _Factory()
                    if f.default_factory is not MISSING else inspect.Parameter.empty))
                 for f in owner.__record_fields__], return_annotation=None)

    def _make_init(cls, flds):
        names = tuple(f.name for f in flds)
        known = frozenset(names)
        required = frozenset(f.name for f in flds
                             if f.default is MISSING and f.default_factory is MISSING)
        # every field in order, at its default (a placeholder where a value must come): one
        # dict update fills the instance, a second puts the given values in their places
        template = {f.name: None if f.default is MISSING else f.default for f in flds}
        factories = tuple((f.name, f.default_factory) for f in flds
                          if f.default_factory is not MISSING)
        n, qual = len(names), cls.__qualname__
        post = hasattr(cls, "__post_init__")  # as a dataclass: the decorated class's

        def __init__(self, *args, **kw):
            if args:
                if len(args) > n:
                    raise TypeError(f"{qual}.__init__() takes {n + 1} positional arguments but "
                                    f"{len(args) + 1} were given")
                for name, value in zip(names, args):
                    if name in kw:
                        raise TypeError(f"{qual}.__init__() got multiple values for argument "
                                        f"'{name}'")
                    kw[name] = value
            if not known.issuperset(kw):
                bad = next(k for k in kw if k not in known)
                raise TypeError(f"{qual}.__init__() got an unexpected keyword argument '{bad}'")
            if not required.issubset(kw):
                lost = [k for k in names if k in required and k not in kw]
                raise TypeError(f"{qual}.__init__() missing {len(lost)} required positional "
                                "argument" + "s" * (len(lost) > 1) + ": "
                                + ", ".join(repr(k) for k in lost))
            d = self.__dict__
            d.update(template)
            d.update(kw)
            for name, factory in factories:
                if name not in kw:
                    d[name] = factory()
            if post:
                self.__post_init__()

        return __init__

    def _make_repr(names):
        def __repr__(self):
            return (f"{type(self).__qualname__}("
                    + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")")

        return __repr__

    def _make_eq(names):
        def __eq__(self, other):
            if other.__class__ is not self.__class__:
                return NotImplemented
            return (tuple([getattr(self, n) for n in names])
                    == tuple([getattr(other, n) for n in names]))

        return __eq__

    def _make_hash(names):
        def __hash__(self):
            return hash(tuple([getattr(self, n) for n in names]))

        return __hash__

    def _frozen_methods(cls, names):
        def __setattr__(self, name, value):
            if type(self) is cls or name in names:
                raise FrozenInstanceError(f"cannot assign to field {name!r}")
            super(cls, self).__setattr__(name, value)

        def __delattr__(self, name):
            if type(self) is cls or name in names:
                raise FrozenInstanceError(f"cannot delete field {name!r}")
            super(cls, self).__delattr__(name)

        return {"__setattr__": __setattr__, "__delattr__": __delattr__}

    def _record_fields(obj):
        return getattr(obj if isinstance(obj, type) else type(obj), "__record_fields__", None)

    def fields(class_or_instance):
        """The fields of a record or a dataclass (class or instance), in order."""
        flds = _record_fields(class_or_instance)
        if flds is None:
            import dataclasses

            return dataclasses.fields(class_or_instance)
        return flds

    def replace(obj, /, **changes):
        """A copy of a record (or a dataclass) with some fields changed."""
        flds = _record_fields(obj)
        if flds is None or isinstance(obj, type):
            import dataclasses

            return dataclasses.replace(obj, **changes)
        for f in flds:
            if f.name not in changes:
                changes[f.name] = getattr(obj, f.name)
        return type(obj)(**changes)

    def asdict(obj):
        """A record (or a dataclass) as a dict, recursively, its values copied."""
        if _record_fields(obj) is None or isinstance(obj, type):
            import dataclasses

            return dataclasses.asdict(obj)
        return _asdict(obj)

    def _asdict(v):
        if type(v) in _SCALARS:
            return v
        flds = getattr(type(v), "__record_fields__", None)
        if flds is not None:
            return {f.name: _asdict(getattr(v, f.name)) for f in flds}
        if hasattr(type(v), "__dataclass_fields__"):
            import dataclasses

            return dataclasses.asdict(v)
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return type(v)(*[_asdict(x) for x in v])
        if isinstance(v, (list, tuple)):
            return type(v)(_asdict(x) for x in v)
        if isinstance(v, dict):
            return type(v)((_asdict(k), _asdict(x)) for k, x in v.items())
        import copy

        return copy.deepcopy(v)
