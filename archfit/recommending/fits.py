"""The fits a recommendation reads: at most one per kind of law (its base: a shape law, a
compute law, ...), the shape law always (the default's where none is given). Stages ask it for
a kind (``fits.of(ComputeLaw)``, ``fits.require(ComputeLaw, why=...)``), never for a name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from archfit.errors import RecommendError
from archfit.laws import Fit, load_fit
from archfit.laws.base import Law, ShapeLaw, kind_of, kinds


def base_of(fit: Fit) -> type[Law]:
    """The base of the kind a fit's law is of (what :meth:`Fits.of` is asked for)."""
    return kind_of(fit.law_obj).base


@dataclass
class Fits:
    """The request's fits, one per kind, in the order given (a stage may add a kind's default:
    :meth:`setdefault`)."""

    items: list[Fit] = field(default_factory=list)

    @classmethod
    def given(cls, fits: Sequence[Fit | str | Any], default_shape: str) -> Fits:
        """The fits given (loaded), one per kind, refusing a second of a kind and a law no
        recommendation reads, with the shape law ``default_shape`` where none is given."""
        out: dict[type[Law], Fit] = {}
        for f in map(load_fit, fits):
            kind = base_of(f)
            if not kind_of(f.law_obj).asked_by:  # a kind no recommendation reads (loss curves)
                read = [k.asked_by for k in kinds() if k.asked_by]
                raise RecommendError(
                    f"a {f.law!r} fit ({f.name or 'file'}) says nothing about depth or width; "
                    f"give {', '.join(read[:-1])} or {read[-1]}")
            if kind in out:
                raise RecommendError(f"two {kind.role} fits given ({out[kind].label}, "
                                     f"{f.label}); give one {kind.role} law")
            out[kind] = f
        if ShapeLaw not in out:
            out[ShapeLaw] = load_fit(default_shape)
        return cls(list(out.values()))

    def of(self, kind: type[Law]) -> Fit | None:
        """The fit of ``kind`` (a law base), or None."""
        return next((f for f in self.items if isinstance(f.law_obj, kind)), None)

    def setdefault(self, kind: type[Law], default: Callable[[], Fit]) -> Fit:
        """The fit of ``kind``, else ``default()``, kept for the later stages."""
        f = self.of(kind)
        if f is None:
            f = default()
            self.items.append(f)
        return f

    def with_fit(self, fit: Fit) -> Fits:
        """A copy with ``fit`` in place of its kind's."""
        kind = base_of(fit)
        return Fits([f for f in self.items if not isinstance(f.law_obj, kind)] + [fit])

    def require(self, kind: type[Law], why: str) -> Fit:
        """The fit of ``kind``, else :class:`RecommendError` saying ``why`` it is needed."""
        f = self.of(kind)
        if f is None:
            raise RecommendError(why)
        return f

    @property
    def shape(self) -> Fit:
        """The shape law's fit (always present: the default's where none was given)."""
        return self.require(ShapeLaw, "no shape law among the fits")

    def __contains__(self, kind: object) -> bool:
        return isinstance(kind, type) and self.of(kind) is not None

    def __iter__(self) -> Iterator[Fit]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)
