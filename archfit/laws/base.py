"""What a law is: the :class:`Law` base class, its roles, the typed records laws hand to the
layers above them, and the registry.

**A law is the model; a Fit is the inference.** A :class:`Law` owns everything law-specific
about the model: its functional form, parameters, bounds, starts, data preparation and the
point fit (:meth:`Law.fit_point`); for a shape law the optimum at N and a loss penalty for a
concrete shape; for a compute law N_opt(C); the figures it can draw (``own_figures``). It takes
parameters, never a fit. Inference (draws, intervals, predictions with bands, the optimum's
CI), the verdict (:mod:`archfit.laws.inference.trust`) and the figure list read a
:class:`~archfit.laws.Fit`. ``recommender``, ``plots`` and ``cli`` name no law: they ask the
law object and the fit. ``tests/test_contracts.py`` fails on a law method that takes a fit.

A new law is one registered class (``@register``) in one file, and one import line in
:mod:`archfit.laws`; a test file or a user may register one too.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, NamedTuple, Sequence, TypeVar

from archfit.errors import FitError
from archfit.numbers import fmt_sci

if TYPE_CHECKING:
    import numpy as np

    from archfit.shapes import Shape

Data = dict[str, Any]  # column name -> numpy array

# the verdict's limits on an answer's 95% high / low ratio (weak, uninformative), by kind
OPTIMUM_CI_RATIO = (2.0, 10.0)  # the optimal depth (shape laws)
COMPUTE_CI_RATIO = (3.0, 10.0)  # N_opt (compute laws)
AUTO = "auto"  # the law name that asks for every applicable law, compared on held-out runs
# the Huber loss's delta on log-loss residuals, for every robust fit (Hoffmann et al. 2022 use
# 1e-3; Besiroglu et al. 2024 keep it)
HUBER_DELTA = 1e-3
# figures that plots draws for any law of the right role (a law names them in ``figures``)
GENERIC_FIGURES = ("optimal_depth_vs_size", "residuals")


class Estimate(NamedTuple):
    """What one law fit returns: ``params`` (the parameter vector, an array), ``cov`` (its
    covariance or None) and ``extra`` (law-specific, read-only)."""

    params: np.ndarray
    cov: np.ndarray | None = None
    extra: Mapping[str, Any] = MappingProxyType({})


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


class MeasuredOptimum(NamedTuple):
    """An optimum measured directly in the data (one per size class), drawn beside the law:
    the size class's ``params``, the optimal depth (shape laws) or ff ratio (ff laws) as
    ``value``, and its ±1 SE band ``low`` to ``high`` in the same units."""

    params: float
    value: float
    low: float
    high: float


class Figure(NamedTuple):
    """A law-specific figure: its ``name`` and ``title``; ``draw(fit, ax, data)`` draws on a
    matplotlib axis (the law module never imports matplotlib), and plots titles, sizes and
    saves it. ``when(fit)``, if given, says whether this fit has what the figure needs."""

    name: str
    title: str
    draw: Callable[..., Any]
    when: Callable[[Any], bool] | None = None
    # draw(fit, ax, data, references=...) also takes other fits of the law's kind (plot
    # --reference): drawn beside this one
    references: bool = False


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
    role: ClassVar[str] = ""  # its base's: the role of its Kind (KINDS below)
    # fit_point takes constraints= (--fix / --prior, every law); ties (--tie a=b) only where
    # the fit holds its parameters in one affine map (optimize.Reparam)
    supports_ties: ClassVar[bool] = False
    default_targets: ClassVar[tuple[float, ...]] = ()
    own_figures: ClassVar[tuple[Figure, ...]] = ()  # law-specific figures (see figures())
    # predict() returns loss (nats/token), so the fit can give loss prediction intervals
    predicts_loss: ClassVar[bool] = False
    # what the target of a shape law counts (recommend sizes shapes in this convention)
    target_convention: ClassVar[str] = "non-embedding parameters (Kaplan's N)"
    # the table's column the law reads as its size N (the MoE laws: the active parameters,
    # params_active); prepare() puts it in data["params"], which every generic check reads
    params_column: ClassVar[str] = "params"
    # what a compute law's split also depends on, given as keywords of compute_optimal (the
    # data-constrained law: unique_tokens); a law that names none takes none
    conditions: ClassVar[tuple[str, ...]] = ()
    # what the law answers at a target (:meth:`answer`), by name; empty: it answers none. Each
    # base sets these, so that Fit.optimum, the verdict, compare, plot, the budget and the
    # designer ask the law instead of branching on its kind
    answer_names: ClassVar[tuple[str, ...]] = ()
    # the target it answers at: "params" (a size) or "compute" (a FLOP budget); None: neither
    target_kind: ClassVar[str | None] = None
    # the verdict's spread of the answer (:func:`archfit.laws.inference.trust.spread`): the quantity of
    # answer_names, what it is called, the span key of the fit-level reference point and that
    # point's unit; None: no spread to grade
    spread_of: ClassVar[tuple[str, str, str, str] | None] = None
    # the table's columns beyond size and tokens whose range the fit records as its reach
    reach_columns: ClassVar[tuple[str, ...]] = ()
    # columns whose values outside (low, high) no real run has, and what the column is: a fit
    # refuses them in one line (:meth:`implausible`) rather than call its answer informative
    plausible: ClassVar[dict[str, tuple[float, float, str]]] = {}
    # columns the law reads where the table has them, beyond :attr:`columns` (moe-experts'
    # tokens: a sweep at one token count may leave them out)
    optional_columns: ClassVar[tuple[str, ...]] = ()
    # figures of GENERIC_FIGURES that every law of its kind draws
    kind_figures: ClassVar[tuple[str, ...]] = ()
    # the space its residuals, bands and held-out checks work in: "log" (log loss: a loss is
    # positive) or "linear" (the loss itself: the vocabulary law's unigram-normalized loss,
    # negative for a good model)
    loss_space: ClassVar[str] = "log"
    # its rows are every logged point of every run's loss curve (``--law envelope``), read by
    # :func:`archfit.sweep.store.read_checkpoints`, not one row per run
    reads_curves: ClassVar[bool] = False
    approach: ClassVar[str] = ""  # compute laws: Hoffmann et al. 2022's approach it is
    # entries of param_names the fit sets rather than fits (isoflop's reference budget): not
    # counted as parameters (AIC, degrees of freedom)
    constants: ClassVar[tuple[str, ...]] = ()

    @property
    def n_fitted(self) -> int:
        """How many of its parameters the data fit (:attr:`param_names` less
        :attr:`constants`)."""
        return len(self.param_names) - len(self.constants)

    # ------------------------------------------------------------------ fitting (numpy)
    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Any = None) -> Estimate:
        raise NotImplementedError

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        """Loss laws: predicted loss; shape laws: the optimum at ``data["params"]``."""
        raise NotImplementedError

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        """Named quantities at ``targets`` (a shape law: the optimal depth and width at each
        size; a loss law: N_opt and D_opt at each budget); none by default."""
        return {}

    # ------------------------------------------------------------------ what it answers
    def answer(self, params: Mapping[str, float], at: float, **conditions: Any
               ) -> tuple[float, ...]:
        """The law's answer at ``at`` (its :attr:`target_kind`), one value per
        :attr:`answer_names`: a shape law's optimal depth and width at a size, a compute law's
        N_opt, D_opt and tokens per parameter for a budget."""
        raise FitError(f"{self.name} answers no optimum (a {self.role} law)")

    def spread_limits(self) -> tuple[float, float]:
        """The weak and uninformative limits of its answer's 95% high / low ratio."""
        return OPTIMUM_CI_RATIO

    def extrapolation(self, params: Mapping[str, float], span: Mapping[str, Any],
                      target: float, conditions: Mapping[str, Any] | None = None
                      ) -> tuple[float, str]:
        """(how many times past the largest run ``target`` lies, that said in words)."""
        top = span["params_max"]
        f = target / top
        return f, f"{target:.3g} is {f:.3g}x beyond the largest run ({top:.3g})"

    @property
    def signed_loss(self) -> bool:
        """Whether a loss at or below 0 is one of this law's (a table read for it keeps such
        rows; for every other law they are dropped with a note)."""
        return self.loss_space == "linear"

    def screen(self, frame: Any) -> tuple[Any, list[str]]:
        """The runs the law describes (a polars frame) and a note for each kind left out:
        every run by default; ``lr-batch-surface`` leaves out runs that diverged."""
        return frame, []

    def prepare(self, frame: Any) -> Data:
        from archfit.laws.columns import prepare

        return prepare(self, frame)

    def classes(self, data: Data, tol: float | None = None) -> np.ndarray:
        """Size-class labels: the ones the fit fixed (column ``size_class``), else by the
        planned size (``target_params``), else sizes within ``tol`` of a class's smallest."""
        from archfit.laws.columns import class_labels, size_classes

        if tol is None:
            return class_labels(data)
        return size_classes(data["params"], data.get("target_params"), tol)

    def groups(self, data: Data, by: Sequence[str] | None = None) -> tuple[np.ndarray, str]:
        """Bootstrap units (the training run; see :func:`archfit.laws.columns.run_groups`)."""
        from archfit.laws.columns import run_groups

        return run_groups(data, by)

    def residuals(self, params: Mapping[str, float], data: Data,
                  extra: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """(observed, fitted) in the law's residual space (:attr:`loss_space`)."""
        from archfit.laws.columns import to_space

        return (to_space(self.loss_space, data["loss"]),
                to_space(self.loss_space, self.predict(params, data)))

    def heldout(self, data: Data, constraints: Constraints | None = None) -> dict[str, Any] | None:
        """A law-specific held-out check, or None for the generic one (laws with a loss model:
        fit on all but the largest ~20% of sizes, predict those runs with 95% intervals)."""
        return None

    def span_extra(self, data: Data) -> dict[str, Any]:
        """What the fit's span records beyond sizes and tokens (isoflop: its budgets)."""
        return {}

    def reach_refusal(self, extra: Mapping[str, Any], columns: Mapping[str, Any]) -> str | None:
        """Why the fit (its estimate's ``extra``) refuses to predict the rows ``columns``, or
        None: every law predicts anywhere by default (isoflop: on its budgets only)."""
        return None

    def heldout_split(self, data: Data) -> tuple[np.ndarray, list[float], str]:
        """The held-out check's test rows (a mask), what they are at, and its axis: the
        largest ~20% of the size classes, at N, by default."""
        from archfit.laws.columns import heldout_split

        mask, sizes = heldout_split(data)
        return mask, sizes, "N"

    def applies(self, frame: Any) -> bool:
        """Whether ``--law auto`` should consider this law for a table that has its columns
        (a polars frame): every law by default; the MoE laws only where the table's sparsity
        varies (a dense sweep has the columns, all alike)."""
        return True

    # ------------------------------------------------------------------ roles (plain math)
    def optimum(self, params: Mapping[str, float], N: float) -> tuple[float, float]:
        """Shape laws: the real-valued optimal (n_layer, d_model) at N parameters."""
        raise NotImplementedError(f"{self.name} is not a shape law")

    def compute_optimal(self, params: Mapping[str, float], C: float, **conditions: Any
                        ) -> tuple[float, float]:
        """Compute laws: (N_opt, D_opt) for a budget of C FLOPs (and the law's
        :attr:`conditions`, e.g. ``unique_tokens``)."""
        raise NotImplementedError(f"{self.name} is not a compute law")

    def condition_report(self, params: Mapping[str, float], D: float, N: float | None = None,
                         **conditions: Any) -> dict[str, Any]:
        """Compute laws with :attr:`conditions`: what training ``N`` parameters on ``D`` tokens
        under them means, for the recommendation (the data-constrained law: epochs and what the
        last is worth). Empty for a law without conditions."""
        return {}

    def ff_ratio(self, params: Mapping[str, float], N: float) -> float:
        """ff laws: the best d_ff / d_model at N."""
        raise NotImplementedError(f"{self.name} is not an ff-ratio law")

    def loss_at(self, params: Mapping[str, float], N: float, D: float) -> float | None:
        """Laws with a size and a data term: the loss of a model of ``N`` parameters (in the
        law's own convention) trained on ``D`` tokens, shape terms excluded (plain math).
        None for laws without a data term."""
        return None

    def shape_loss(self, params: Mapping[str, float], extra: Mapping[str, Any], shape: Shape,
                   N: float) -> float | None:
        """Shape laws with a loss model: the predicted loss (nats/token, up to a constant that is
        the same for every shape of size N) of a model of ``shape``'s depth *sized to exactly N*
        parameters, so candidates a little off the target compare fairly (``extra``: what the
        fit's estimate recorded beside ``params``). None: no loss model (then recommend ranks by
        distance from the optimal depth)."""
        return None

    def depth_loss(self, params: Mapping[str, float], extra: Mapping[str, Any], N: float,
                   n_layer: float) -> float | None:
        """:meth:`shape_loss` at a real-valued depth: the loss (up to a constant shared by every
        depth at N) of a model ``n_layer`` deep sized to exactly N; what the near-optimal set
        scans. None: no loss model over depth."""
        return None

    def loss_level(self, params: Mapping[str, float], extra: Mapping[str, Any], N: float
                   ) -> float | None:
        """The loss the near-optimal set's tolerance is a fraction of: the law's predicted loss
        at N at its optimal depth, trained on 20 tokens per parameter where the law has a data
        term (Hoffmann et al.'s compute-optimal ratio). 1.0 for a law whose :meth:`depth_loss`
        is already a fraction of the loss. None: unknown."""
        return None

    def derived_notes(self, derived: Mapping[str, float],
                      extra: Mapping[str, Any] | None = None) -> list[str]:
        """What a reader must know of the derived values (an optimum on its search's bound, not
        inside it), read with the fit's ``extra`` (its reach); none by default."""
        return []

    def centre_unidentified(self, params: Mapping[str, float]) -> str | None:
        """Why the fit cannot locate the optimal depth (a parameter of its centre on a bound),
        or None when it can."""
        return None

    # ------------------------------------------------------------------ what it shows
    def measured_optima(self, extra: Mapping[str, Any]) -> list[MeasuredOptimum]:
        """Optima measured in the data (from what the fit's estimate recorded, ``extra``), for
        the optimal-shape figure (none by default)."""
        return []

    # ------------------------------------------------------------------ trust
    # bounds the fit can sit on (name -> (low, high), None for open), checked by bound_reasons
    bounds: ClassVar[dict[str, tuple[float | None, float | None]]] = {}
    # where each parameter means anything, for --fix and --prior means: name -> (low, high,
    # low excluded); high is included, None is open. A name not here takes any finite value.
    domains: ClassVar[dict[str, tuple[float | None, float | None, bool]]] = {}

    def implausible(self, df: Any) -> str | None:
        """Why the runs ``df`` (a polars frame) cannot be what they claim for this law: a
        column of :attr:`plausible` outside its range; None when they can be."""
        for col, (lo, hi, what) in self.plausible.items():
            if col not in df.columns or not df[col].dtype.is_numeric():
                continue
            v = df[col].drop_nulls()
            if len(v) and (v.min() < lo or v.max() > hi):  # type: ignore[operator]
                bad = v.min() if v.min() < lo else v.max()  # type: ignore[operator]
                return (f"column {col!r} holds {bad:.4g}, outside {lo:g} to {hi:g} "
                        f"({what}): check its unit and its column")
        return None

    def domain_error(self, name: str, value: float) -> str | None:
        """Why ``value`` is outside ``name``'s domain in this law, or None."""
        if not math.isfinite(value):
            return f"{name} must be a finite number, got {value}"
        lo, hi, lo_open = self.domains.get(name, (None, None, False))
        if lo is not None and (value <= lo if lo_open else value < lo):
            return f"{name} must be {'>' if lo_open else '>='} {lo:g} in {self.name}" + (
                f" (and <= {hi:g})" if hi is not None else "")
        if hi is not None and value > hi:
            return f"{name} must be <= {hi:g} in {self.name}"
        return None
    # parameters set to 0 (not fitted) when every run has one token count (the D term folds
    # into E); the fit's extra["uses_tokens"] says which happened
    folded_without_tokens: ClassVar[tuple[str, ...]] = ()
    # held-out relative error (on what the law predicts): weak above, uninformative above
    # (for laws with a loss model the error is first checked against its interval)
    heldout_limits: ClassVar[tuple[float, float]] = (0.05, 0.15)


class ShapeLaw(Law):
    """A law of the best shape at a size: what ``recommend --params`` builds from. A new one
    implements :meth:`fit_point`, :meth:`predict` (the optimum at ``data["params"]``) and
    :meth:`optimum`; one with a loss model over shapes sets ``predicts_loss`` and implements
    :meth:`shape_loss`, :meth:`depth_loss` and :meth:`loss_level` too."""

    role = "shape"
    answer_names = ("n_layer", "d_model")
    target_kind = "params"
    spread_of = ("n_layer", "optimal depth", "params_max", "")
    kind_figures = ("optimal_depth_vs_size",)

    def optimum(self, params: Mapping[str, float], N: float) -> tuple[float, float]:
        raise NotImplementedError

    def answer(self, params: Mapping[str, float], at: float, **conditions: Any
               ) -> tuple[float, ...]:
        """The optimal depth and width at ``at`` parameters."""
        return self.optimum(params, at)

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        """The optimal depth and width at each size of ``targets``."""
        out: dict[str, float] = {}
        for N in targets:
            try:
                L, d = self.optimum(params, N)
            except (OverflowError, ValueError, ZeroDivisionError):
                L = d = math.nan  # a resample far off: no optimum there
            out[derived_name("n_layer_opt", N)] = L
            out[derived_name("d_model_opt", N)] = d
        return out


# the compute-optimum search's reach: ln N within this of the size at 20 tokens per parameter
# (Hoffmann et al.'s ratio), a factor of e^12 (about 1.6e5) either way
SEARCH_HALF_WIDTH = 12.0


def least_loss_size(loss_of: Callable[[float], float | None], centre: float,
                    half_width: float = SEARCH_HALF_WIDTH, xatol: float = 1e-9
                    ) -> tuple[float, float]:
    """(N, its loss): the size of least ``loss_of(N)`` with ln N within ``half_width`` of
    ln ``centre`` (scipy's bounded scalar search over ln N, to ``xatol`` in ln N). A size where
    the loss cannot be computed (None, or an arithmetic error) counts as infinitely bad."""
    from scipy.optimize import minimize_scalar

    def f(x: float) -> float:
        try:
            loss = loss_of(math.exp(x))
        except (OverflowError, ZeroDivisionError, ValueError):
            return math.inf
        return math.inf if loss is None else loss

    mid = math.log(centre)
    res: Any = minimize_scalar(f, bounds=(mid - half_width, mid + half_width),
                               method="bounded", options={"xatol": xatol})
    return math.exp(res.x), float(res.fun)


class ComputeLaw(Law):
    """A law of the loss over size N and tokens D that splits a FLOP budget: what ``recommend
    --compute`` builds from. A new one implements :meth:`fit_point`, :meth:`predict` (loss) and
    :meth:`loss_at`; its compute-optimal split is the one bounded search below (a law with a
    closed form overrides :meth:`compute_optimal`), and its :meth:`derived` N_opt and D_opt at
    each budget plus :meth:`more_derived`. A law whose split also depends on
    :attr:`conditions` takes them as keywords of :meth:`loss_at`."""

    role = "compute"
    predicts_loss = True
    # which of Hoffmann et al. 2022's three readings of a compute sweep it is
    approach = "3: a parametric L(N, D)"
    answer_names = ("N_opt", "D_opt", "tokens_per_param")
    target_kind = "compute"
    spread_of = ("N_opt", "N_opt", "flops_max", " FLOPs")

    def answer(self, params: Mapping[str, float], at: float, **conditions: Any
               ) -> tuple[float, ...]:
        """N_opt, D_opt and tokens per parameter for a budget of ``at`` FLOPs."""
        n, d = self.compute_optimal(params, at, **conditions)
        return n, d, d / n

    def spread_limits(self) -> tuple[float, float]:
        return COMPUTE_CI_RATIO

    def extrapolation(self, params: Mapping[str, float], span: Mapping[str, Any],
                      target: float, conditions: Mapping[str, Any] | None = None
                      ) -> tuple[float, str]:
        """A FLOP budget against the largest run's compute (C = 6 N D); without a record of
        that, the budget's N_opt against the largest run's size."""
        if span.get("flops_max"):
            top = span["flops_max"]
            f = target / top
            return f, (f"{target:.3g} FLOPs is {f:.3g}x beyond the largest run's compute "
                       f"({top:.3g}, C = 6 N D)")
        top = span["params_max"]
        n_opt = self.compute_optimal(params, target, **(conditions or {}))[0]
        f = n_opt / top
        return f, (f"N_opt {n_opt:.3g} at {target:.3g} FLOPs is {f:.3g}x beyond the largest "
                   f"run ({top:.3g})")

    def loss_at(self, params: Mapping[str, float], N: float, D: float, **conditions: Any
                ) -> float | None:
        raise NotImplementedError

    def compute_optimal(self, params: Mapping[str, float], C: float, **conditions: Any
                        ) -> tuple[float, float]:
        """(N_opt, D_opt) for C = 6 N D FLOPs: the size of least loss on the budget
        (:func:`least_loss_size`, around the size at 20 tokens per parameter)."""
        c6 = float(C) / 6.0
        N, _ = least_loss_size(lambda n: self.loss_at(params, n, c6 / n, **conditions),
                               math.sqrt(c6 / 20.0))
        return N, c6 / N

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        """N_opt and D_opt at each budget of ``targets``, and :meth:`more_derived`."""
        out: dict[str, float] = {}
        for C in targets:
            n, d = self.compute_optimal(params, C)
            out[derived_name("N_opt", C)] = float(n)
            out[derived_name("D_opt", C)] = float(d)
        return {**out, **self.more_derived(params)}

    def more_derived(self, params: Mapping[str, float]) -> dict[str, float]:
        """A law's own named quantities beside the budgets' split (none by default)."""
        return {}


class LossCurveLaw(Law):
    """A law of the loss at a size (and tokens) with no optimum to answer: Kaplan et al.'s
    power laws. A new one implements :meth:`fit_point` and :meth:`predict` (loss)."""

    role = "loss"


class FFRatioLaw(Law):
    """A law of the best d_ff / d_model at a size: what ``recommend --ff-ratio auto`` reads."""

    role = "ff"


class HyperparameterLaw(Law):
    """A law of the best peak learning rate and batch at a size and token count: what the
    recipe's fitted rate and batch come from."""

    role = "hparam"

    def prepare(self, frame: Any) -> Data:
        """The table's columns, each rate and batch checked as a run's are
        (:func:`archfit.train.config.lr_problem`, :func:`~archfit.train.config.batch_problem`):
        a row no run could have trained is refused, naming it, never fitted."""
        from archfit.errors import FitInputError
        from archfit.train.config import batch_problem, lr_problem

        data = super().prepare(frame)
        for col, problem in (("lr", lr_problem), ("batch_tokens", batch_problem)):
            if col not in data:
                continue
            bad = [(i, v) for i, v in enumerate(data[col].tolist()) if problem(v)]
            if bad:
                i, v = bad[0]
                raise FitInputError(f"column {col!r} has {len(bad)} value(s) no run could have "
                                    f"trained with (the first in row {i}): {col} {problem(v)}; "
                                    "drop or fix those rows")
        return data

    def implausible(self, df: Any) -> str | None:
        """Also a step of more tokens than its run trains: a batch past the run."""
        if why := super().implausible(df):
            return why
        from archfit.train.config import batch_problem

        if {"batch_tokens", "tokens"} <= set(df.columns) and not any(
                batch_problem(v) for v in df["batch_tokens"].to_list()):  # those: prepare's
            over = df.filter(df["batch_tokens"] > df["tokens"])
            if over.height:
                return (f"column 'batch_tokens': {over.height} run(s) take a step of more "
                        f"tokens than they train ({over['batch_tokens'][0]:.4g} > tokens "
                        f"{over['tokens'][0]:.4g}): check its unit (tokens per step, not "
                        "sequences)")
        return None


class MoELaw(Law):
    """A law of a mixture of experts' loss over its active size, tokens and sparsity: what
    weighs the sparsity of ``recommend --active-params``."""

    role = "moe"
    reach_columns = ("granularity", "n_experts", "top_k")


class VocabularyLaw(Law):
    """A law of the loss over the non-vocabulary size, the vocabulary and the training data:
    what ``recommend --vocab auto --fit`` picks the vocabulary from. Its loss is
    unigram-normalized (comparable across vocabularies, negative for a good model), so its
    residuals, bands and checks work on the loss itself (:attr:`loss_space` "linear"). A new
    one implements :meth:`fit_point`, :meth:`predict` and :meth:`unigram_loss`."""

    role = "vocab"
    predicts_loss = True
    loss_space = "linear"
    reach_columns = ("vocab_size",)
    # the training data: tokens where the table has them, else characters (and a tokenizer fit)
    optional_columns = ("tokens", "characters")
    # one token predicts nothing; the largest vocabularies in use are about 2.6e5 (Gemma)
    plausible = {"vocab_size": (2, 1e7, "a tokenizer's vocabulary")}

    def applies(self, frame: Any) -> bool:
        """A vocabulary sweep: several vocabularies, and the training data as tokens or
        characters."""
        cols = set(frame.columns)
        return bool(cols & {"tokens", "characters"}) and frame["vocab_size"].n_unique() > 1

    def unigram_loss(self, params: Mapping[str, float], n_nv: float, vocab: float,
                     d_model: float, tokens: float) -> float:
        """The law's loss at ``n_nv`` non-vocabulary parameters, a vocabulary of ``vocab`` at
        width ``d_model``, trained on ``tokens`` tokens."""
        raise NotImplementedError


@dataclass(frozen=True)
class Kind:
    """A kind of law, in one record: the base its laws subclass, its role (the base's), what
    its laws answer, how a recommendation asks for a fit of it, and, for a kind the
    recommender has no stage of its own for, the ``stage`` that applies such a fit and the
    ``check`` the law contract runs on one. Everything that lists kinds (the registry's
    refusal, the recommender's read kinds, ``archfit laws``) reads :func:`kinds`; a new kind is
    a base and :func:`register_kind`, in any module (``tests/test_kinds.py`` adds one)."""

    base: type[Law]
    answers: str
    # how a request reads a fit of the kind, in the words of the refusal that lists them ("a
    # compute-law fit (chinchilla; --compute)"); empty: no recommendation reads one
    asked_by: str = ""
    # stage(context) -> a record kept as the recommendation's ``extras[role]``: a JSON-able
    # mapping whose "text" (where present) is the line the text answer prints; the context
    # has ``request``, ``fits``, ``fit`` (this kind's) and ``recommendation`` (so far)
    stage: Callable[[Any], Mapping[str, Any]] | None = None
    # check(fit): what a fitted law of the kind must answer (the law contract runs it)
    check: Callable[[Any], None] | None = None

    @property
    def role(self) -> str:
        return self.base.role


KINDS: dict[str, Kind] = {}  # role -> kind, in the order registered


def register_kind(kind: Kind) -> Kind:
    """Make a kind of law known: its laws can be registered, fitted, listed and, where it
    is asked for, read by a recommendation."""
    base = kind.base
    if not (isinstance(base, type) and issubclass(base, Law)) or base is Law:
        raise TypeError(f"a kind's base subclasses archfit.laws.Law, got {base!r}")
    if not base.role or not isinstance(base.role, str):
        raise TypeError(f"kind {base.__name__}: set its base's role (a short name)")
    taken = KINDS.get(base.role)
    if taken is not None and taken.base is not base:
        raise TypeError(f"kind {base.__name__}: the role {base.role!r} is "
                        f"{taken.base.__name__}'s")
    KINDS[base.role] = kind
    return kind


def kinds() -> tuple[Kind, ...]:
    """Every registered kind, in the order registered."""
    return tuple(KINDS.values())


def kind_of(law: Law | type[Law]) -> Kind:
    """The kind whose base ``law`` (a law or its class) subclasses."""
    cls = law if isinstance(law, type) else type(law)
    for k in KINDS.values():
        if issubclass(cls, k.base):
            return k
    raise TypeError(f"{cls.__name__} subclasses no registered kind of law")


for _kind in (
        Kind(ShapeLaw, "the optimal depth and width at a size (recommend --params)",
             "a shape-law fit (levine, depth-width)"),
        Kind(ComputeLaw, "the loss at a size and tokens, and the compute-optimal split of a "
             "FLOP budget (recommend --compute)", "a compute-law fit (chinchilla; --compute)"),
        Kind(LossCurveLaw, "the loss at a size, with no optimum"),
        Kind(FFRatioLaw, "the MLP's width over the model's at a size (--ff-ratio auto)",
             "an ff-ratio fit (--ff-ratio auto)"),
        Kind(HyperparameterLaw, "the best learning rate and batch at a size and tokens (the "
             "recipe)", "a learning-rate fit (lr-batch, for the recipe)"),
        Kind(MoELaw, "the loss over active size, tokens and sparsity (--active-params)",
             "a moe-granularity fit (with --active-params)"),
        Kind(VocabularyLaw, "the loss over vocabulary size (--vocab auto)",
             "a vocab fit (with --vocab auto)")):
    register_kind(_kind)


def derived_name(quantity: str, target: float) -> str:
    return f"{quantity}@{fmt_sci(target)}"


LAWS: dict[str, Law] = {}  # law name -> law: the shipped ones and any registered since
# the laws of users' formulas made or read in this process (archfit.laws.user.formula), by name
FORMULAS: dict[str, Law] = {}


@dataclass(frozen=True)
class FormulaSource:
    """Where laws written as text come from, so that the shared machinery reads them without
    importing their room: the columns some texts name, a law from a text over a table's
    columns, and a law from a fit file's record. :mod:`archfit.laws.user` registers its own
    (:func:`formula_source` returns it)."""

    names: Callable[[Any], list[str]]
    make: Callable[..., Law]
    read: Callable[[str, Any, str], Law]


_FORMULA_SOURCE: list[FormulaSource] = []


def register_formula_source(source: FormulaSource) -> None:
    _FORMULA_SOURCE[:] = [source]


def formula_source() -> FormulaSource:
    """The registered :class:`FormulaSource` (archfit.laws registers archfit.laws.user's when
    it is imported)."""
    if not _FORMULA_SOURCE:
        raise FitError("no formula source is registered: import archfit.laws")
    return _FORMULA_SOURCE[0]


L = TypeVar("L", bound=Law)


def register(cls: type[L]) -> type[L]:
    """Class decorator: make a law available to ``fit``, ``archfit fit --law`` and every layer
    above (recommend, plots, the CLI)."""
    bases = [k.base for k in KINDS.values() if issubclass(cls, k.base)]
    if len(bases) != 1:
        raise TypeError(f"law {cls.__name__}: subclass one of "
                        f"{', '.join(k.base.__name__ for k in KINDS.values())}, which says "
                        "what it answers")
    if cls.role != bases[0].role:
        raise TypeError(f"law {cls.__name__}: its role is its base's ({bases[0].role}); do not "
                        "set role")
    LAWS[cls.name] = cls()
    return cls


def get_law(name: str) -> Law:
    if isinstance(name, str) and name.startswith("formula: "):  # a law of the user's own
        if name in FORMULAS:
            return FORMULAS[name]
        raise FitError(f"{name!r} is a formula no fit in this session holds: fit it with "
                       "'archfit fit --formula', or read its fit file (load_fit)")
    try:
        return LAWS[name]
    except KeyError:
        raise FitError(f"unknown law {name!r}; choose one of {', '.join(sorted(LAWS))}") from None
