"""What a law is: the :class:`Law` base class, its roles, the typed records laws hand to the
layers above them, and the registry.

A law owns everything law-specific. It has a role and knows how to fit itself. For a shape law
it gives the optimum at N and a loss penalty for a concrete shape; for a compute law,
N_opt(C). It lists the figures it can draw and reports its own trust diagnostics.
``recommender``, ``plots`` and ``cli`` name no law: they ask the law object.

Import rule: nothing heavy at the top of a law module. The closed forms (``optimum``,
``compute_optimal``, ``shape_loss``) are plain ``math``, so ``archfit recommend`` never
loads numpy. The methods that fit import numpy and :mod:`archfit.laws.numeric` (numpy at its
top, nothing from the laws) where they run. A law is the model; the :class:`~archfit.laws.Fit`
answers questions about one fit of it (intervals, predictions with bands, verdicts).

A new law is one registered class (``@register``) in one file; a test file may define one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Sequence

from archfit.errors import FitError
import archfit.laws.trust as limits
from archfit.laws.trust import Trust
from archfit.numbers import fmt_sci

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from archfit.laws.artifact import Fit
    from archfit.shapes import Shape

Data = dict[str, Any]  # column name -> numpy array

ROLES = ("loss", "shape", "compute", "ff")
# the Huber loss's delta on log-loss residuals, for every robust fit (Hoffmann et al. 2022 use
# 1e-3; Besiroglu et al. 2024 keep it)
HUBER_DELTA = 1e-3
# a parameter on a bound in more than this share of the bootstrap resamples is named
BOUND_SHARE = 0.1
# figures that plots draws for any law of the right role (a law names them in ``figures``)
GENERIC_FIGURES = ("optimal_depth_vs_size", "residuals")


@dataclass
class Estimate:
    """What one law fit returns: parameter vector, optional covariance, law-specific extras."""

    params: np.ndarray
    cov: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Constraints:
    """Parameters held fixed, tied to another (``tied[a] = b``: a = b, e.g. alpha = beta, as
    published Chinchilla-style fits often assume) and Gaussian priors (mean, sd) on others, by
    public name. ``scale`` is the data's residual scale (log loss) from the data-only fit, so a
    prior weighs against the data as a likelihood would."""

    fixed: dict[str, float] = field(default_factory=dict)
    prior: dict[str, tuple[float, float]] = field(default_factory=dict)
    source: str = ""
    scale: float | None = None
    tied: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.fixed or self.prior or self.tied)


@dataclass(frozen=True)
class MeasuredOptimum:
    """An optimum measured directly in the data (one per size class), drawn beside the law."""

    params: float
    value: float  # the optimal depth (shape laws) or ff ratio (ff laws)
    low: float  # ±1 SE band, same units
    high: float


@dataclass(frozen=True)
class Figure:
    """A law-specific figure. ``draw(fit, ax, data)`` draws on a matplotlib axis (the law
    module never imports matplotlib); plots titles, sizes and saves it. ``when(fit)``, if
    given, says whether this fit has what the figure needs."""

    name: str
    title: str
    draw: Callable[[Fit, Any, Any], None]
    when: Callable[[Fit], bool] | None = None


class Law:
    """A scaling law. Subclasses set the class attributes and implement :meth:`fit_point` and
    the methods of their role. Register a new law with :func:`register`."""

    name: ClassVar[str]
    formula: ClassVar[str]
    description: ClassVar[str]
    columns: ClassVar[tuple[str, ...]]
    param_names: ClassVar[tuple[str, ...]]
    min_points: ClassVar[int]
    min_sizes: ClassVar[int] = 0  # distinct size classes the law needs (0: no check)
    role: ClassVar[str] = "loss"  # one of ROLES
    # fit_point takes constraints= (--fix / --prior, every law); ties (--tie a=b) only where
    # the fit holds its parameters in one affine map (optimize.Reparam)
    supports_ties: ClassVar[bool] = False
    default_targets: ClassVar[tuple[float, ...]] = ()
    own_figures: ClassVar[tuple[Figure, ...]] = ()  # law-specific figures (see figures())
    # predict() returns loss (nats/token), so the fit can give loss prediction intervals
    predicts_loss: ClassVar[bool] = False
    # what the target of a shape law counts (recommend sizes shapes in this convention)
    target_convention: ClassVar[str] = "non-embedding parameters (Kaplan's N)"

    # ------------------------------------------------------------------ fitting (numpy)
    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True) -> Estimate:
        raise NotImplementedError

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        """Loss laws: predicted loss; shape laws: the optimum at ``data["params"]``."""
        raise NotImplementedError

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        """Named quantities at ``targets`` (shape laws: the optimal depth and width)."""
        out: dict[str, float] = {}
        if self.role == "shape":
            for N in targets:
                try:
                    L, d = self.optimum(params, N)
                except (OverflowError, ValueError, ZeroDivisionError):
                    L = d = math.nan  # a resample far off: no optimum there
                out[derived_name("n_layer_opt", N)] = L
                out[derived_name("d_model_opt", N)] = d
        return out

    def prepare(self, frame: Any) -> Data:
        from archfit.laws.numeric import prepare

        return prepare(self, frame)

    def classes(self, data: Data, tol: float | None = None) -> np.ndarray:
        """Size-class labels: the ones the fit fixed (column ``size_class``), else by the
        planned size (``target_params``), else sizes within ``tol`` of a class's smallest."""
        from archfit.laws.numeric import class_labels, size_classes

        if tol is None:
            return class_labels(data)
        return size_classes(data["params"], data.get("target_params"), tol)

    def groups(self, data: Data, by: Sequence[str] | None = None) -> tuple[np.ndarray, str]:
        """Bootstrap units (the training run; see :func:`archfit.laws.numeric.run_groups`)."""
        from archfit.laws.numeric import run_groups

        return run_groups(data, by)

    def residuals(self, params: Mapping[str, float], data: Data,
                  extra: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """(observed, fitted) in the law's residual space (log loss by default)."""
        import numpy as np

        return np.log(data["loss"]), np.log(self.predict(params, data))

    def heldout(self, data: Data, constraints: Constraints | None = None) -> dict[str, Any] | None:
        """A law-specific held-out check, or None for the generic one (laws with a loss model:
        fit on all but the largest ~20% of sizes, predict those runs with 95% intervals)."""
        return None

    # ------------------------------------------------------------------ roles (plain math)
    def optimum(self, params: Mapping[str, float], N: float) -> tuple[float, float]:
        """Shape laws: the real-valued optimal (n_layer, d_model) at N parameters."""
        raise NotImplementedError(f"{self.name} is not a shape law")

    def compute_optimal(self, params: Mapping[str, float], C: float) -> tuple[float, float]:
        """Compute laws: (N_opt, D_opt) for a budget of C FLOPs."""
        raise NotImplementedError(f"{self.name} is not a compute law")

    def ff_ratio(self, params: Mapping[str, float], N: float) -> float:
        """ff laws: the best d_ff / d_model at N."""
        raise NotImplementedError(f"{self.name} is not an ff-ratio law")

    def loss_at(self, params: Mapping[str, float], N: float, D: float) -> float | None:
        """Laws with a size and a data term: the loss of a model of ``N`` parameters (in the
        law's own convention) trained on ``D`` tokens, shape terms excluded (plain math).
        None for laws without a data term."""
        return None

    def shape_loss(self, fit: Fit, shape: Shape, N: float) -> float | None:
        """Shape laws with a loss model: the predicted loss (nats/token, up to a constant that is
        the same for every shape of size N) of a model of ``shape``'s depth *sized to exactly N*
        parameters, so candidates a little off the target compare fairly. None: no loss model
        (then recommend ranks by distance from the optimal depth)."""
        return None

    def bootstrap_params(self, fit: Fit, limit: int | None = None) -> list[dict[str, float]]:
        """The fit's bootstrap resamples as parameter dicts (none when it carries no samples)."""
        samples = (fit.bootstrap or {}).get("samples") or {}
        if not all(n in samples for n in self.param_names):
            return []
        k = len(samples[self.param_names[0]])
        return [{n: float(samples[n][i]) for n in self.param_names}
                for i in range(k if limit is None else min(k, limit))]

    def optimum_ci(self, fit: Fit, N: float, alpha: float = 0.05
                   ) -> dict[str, list[float]] | None:
        """The (1 - ``alpha``) interval of the optimal depth and width at N: the one
        :meth:`Fit.optimum` computes (the verdict and the JSON quote the same)."""
        opt = fit.optimum(N, alpha)
        if opt.get("n_layer_ci") is None:
            return None
        return {"n_layer": list(opt["n_layer_ci"]), "d_model": list(opt["d_model_ci"])}

    # ------------------------------------------------------------------ what it shows
    def measured_optima(self, fit: Fit) -> list[MeasuredOptimum]:
        """Optima measured in the data, for the optimal-shape figure (none by default)."""
        return []

    def figures(self, fit: Fit) -> list[str | Figure]:
        """The figures this fit can draw: names from :data:`GENERIC_FIGURES` and the law's
        :attr:`own_figures` whose ``when`` holds for this fit."""
        out: list[str | Figure] = []
        if self.role == "shape":
            out.append("optimal_depth_vs_size")
        out += [f for f in self.own_figures if f.when is None or f.when(fit)]
        if fit.diagnostics.get("residuals"):
            out.append("residuals")
        return out

    # ------------------------------------------------------------------ trust
    # bounds the fit can sit on (name -> (low, high), None for open), checked by bound_reasons
    bounds: ClassVar[dict[str, tuple[float | None, float | None]]] = {}
    # parameters set to 0 (not fitted) when every run has one token count (the D term folds
    # into E); the fit's extra["uses_tokens"] says which happened
    folded_without_tokens: ClassVar[tuple[str, ...]] = ()
    # held-out relative error (on what the law predicts): weak above, uninformative above
    # (for laws with a loss model the error is first checked against its interval)
    heldout_limits: ClassVar[tuple[float, float]] = (0.05, 0.15)

    def bound_reasons(self, fit: Fit) -> list[str]:
        """One line per free parameter on (or within 1e-4 of) a bound of the fit, or whose
        bootstrap CI has zero width (every resample landed on one value: a bound the optimizer
        holds, not a measurement). Fixed and tied parameters are not free and are skipped."""
        held = set((fit.prior or {}).get("fixed") or {}) | set((fit.prior or {}).get("tied")
                                                                or {})
        if fit.extra.get("uses_tokens") is False:
            held |= set(self.folded_without_tokens)
        out = []
        for name, (lo, hi) in self.bounds.items():
            v = fit.params.get(name)
            if v is None or name in held:
                continue
            if lo is not None and v <= lo + 1e-4 * max(1.0, abs(lo)):
                out.append(f"{name} is at its lower bound {lo:g}")
            elif hi is not None and v >= hi - 1e-4 * max(1.0, abs(hi)):
                out.append(f"{name} is at its upper bound {hi:g}")
        samples = (fit.bootstrap or {}).get("samples") or {}
        for name, (lo, hi) in self.bounds.items():
            vals = samples.get(name) or []
            if name in held or len(vals) < 10 or any(r.split()[0] == name for r in out):
                continue
            on = sum(1 for x in vals if (lo is not None and x <= lo + 1e-4 * max(1.0, abs(lo)))
                     or (hi is not None and x >= hi - 1e-4 * max(1.0, abs(hi))))
            if on > BOUND_SHARE * len(vals):
                out.append(f"{name} sits on a bound in {on / len(vals):.0%} of the bootstrap "
                           "resamples: the data do not pin it, and intervals that depend on it "
                           "are wide")
        for name, ci in (fit.ci or {}).items():
            v = fit.params.get(name)
            if not ci or v is None or name in held or any(name in r.split()[0] for r in out):
                continue
            if abs(ci[1] - ci[0]) <= 1e-9 * max(1.0, abs(v)):
                out.append(f"{name}'s 95% CI has zero width ({ci[0]:.4g}): every resample "
                           "landed on one value, a bound rather than a measurement")
        return out

    def spread(self, fit: Fit, target: float | None) -> dict[str, Any] | None:
        """How wide the law's answer is: the optimal depth for shape laws, N_opt for compute
        laws, at ``target`` or, for the fit-level verdict, at a reference inside the data (the
        largest run's N, or its compute 6 N D), so the fit's verdict does not depend on the
        targets asked for. The interval is the one :meth:`Fit.optimum` gives (95% percentile
        over the parameter draws); ``ratio`` is its high / low. ``ratio_band`` is that ratio's
        Monte-Carlo range over the draws (:func:`archfit.numbers.quantile_band`): how far another
        bootstrap seed could move it, so a verdict is only as settled as that range allows."""
        from archfit.numbers import fmt_range, quantile_band

        span = (fit.diagnostics or {}).get("span") or {}
        if self.role == "shape":
            at, key, what = (target if target is not None else span.get("params_max"),
                             "n_layer", "optimal depth")
        elif self.role == "compute":
            at, key, what = (target if target is not None else span.get("flops_max"),
                             "N_opt", "N_opt")
        else:
            return None
        if at is None:
            return None
        opt = fit.optimum(at, values=True)
        ci, vals = opt.get(f"{key}_ci"), opt.get("_values", {}).get(key) or []
        if ci is None or not ci[0] > 0:
            return None
        band = quantile_band(vals, 2.5, 97.5)
        where = (f"at {fmt_sci(at)}" if target is not None else
                 f"at the largest run ({fmt_sci(at)}{' FLOPs' if self.role == 'compute' else ''})")
        return {"what": f"{what} {where}: 95% CI {fmt_range(*ci)}", "ratio": ci[1] / ci[0],
                "ratio_band": band, "ci": list(ci), "n_draws": len(vals)}

    def trust(self, fit: Fit, target: float | None = None) -> Trust:
        """A verdict on the fit (and, with ``target``, on answering at that size): the data's
        span, the extrapolation factor, parameters on bounds, the optimum's CI width, the
        held-out error and the bootstrap's failure rate, one line per reason (the reasons and
        their thresholds live together in :mod:`archfit.laws.trust`)."""
        return limits.verdict(self, fit, target)


def derived_name(quantity: str, target: float) -> str:
    return f"{quantity}@{fmt_sci(target)}"


LAWS: dict[str, Law] = {}


def register(cls: type[Law]) -> type[Law]:
    """Class decorator: make a law available to ``fit``, ``archfit fit --law`` and every layer
    above (recommend, plots, the CLI)."""
    if getattr(cls, "role", None) not in ROLES:
        raise TypeError(f"law {cls.__name__}: role must be one of {ROLES}")
    LAWS[cls.name] = cls()
    return cls


def get_law(name: str) -> Law:
    try:
        return LAWS[name]
    except KeyError:
        raise FitError(f"unknown law {name!r}; choose one of {', '.join(sorted(LAWS))}") from None
