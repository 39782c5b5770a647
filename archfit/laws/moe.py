"""Laws of mixtures of experts: loss over active parameters, tokens and the sparsity of the
experts, and the compute-optimal sparse model.

``moe-granularity``
    Krajewski et al. 2024, 'Scaling Laws for Fine-Grained Mixture of Experts' (arXiv
    2402.07871), eq. 5: ``L(N, D, G) = c + (g / G^gamma + a) / N^alpha + b / D^beta``, N the
    active non-embedding parameters, D the training tokens, G the granularity (the dense MLP's
    width over one expert's). Their runs hold the expansion rate (every expert's parameters
    over one dense MLP's) at 64 and route each token to G experts, so the active parameters do
    not move with G; finer experts cost router FLOPs, ``c_r d_model E G`` per token and layer
    with ``c_r = 14``, against ``12 c_f d_model^2``, ``c_f = 6``, for the dense parts (their
    eq. 7). The published fit is ``krajewski2024``.
``moe-experts``
    A joint law in the number of experts E (the form Ludziejewski et al. 2025, 'Joint MoE
    Scaling Laws', arXiv 2502.05172, and Clark et al. 2022 use: exponents that move with
    ln E): ``L(N, D, E) = c + a E^delta / N^(alpha + gamma ln E) + b E^omega / D^(beta + zeta
    ln E)``, N the active non-embedding parameters, E the routed experts (a dense run is
    E = 1, where the law is Chinchilla's). Fitted from a user's sweep; archfit ships no
    published fit of it (see docs/concepts/moe.md for why).

Both are fitted by least squares on relative error, the linear coefficients solved exactly
for given exponents (variable projection, as ``chinchilla-varpro``), and read their sizes from
the run table's ``params_active_non_embedding`` (:attr:`Law.params_column`).
"""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from archfit.errors import FitError
from archfit.laws.base import (Constraints, Data, Estimate, MoELaw, derived_name, least_loss_size,
                              register)

if TYPE_CHECKING:
    import numpy as np

# Krajewski et al. 2024's FLOP model (eq. 7): dense parts c_f per parameter and token, the
# router c_r per d_model x experts; their expansion rate E (all experts over one dense MLP)
KRAJEWSKI_CF, KRAJEWSKI_CR, KRAJEWSKI_EXPANSION = 6.0, 14.0, 64
# the joint law's exponents, in the order its search holds them
EXPONENTS: tuple[str, ...] = ("delta", "alpha", "gamma", "omega", "beta", "zeta")
# granularities the compute-optimal search considers (their Table 3 spans 1 to 64)
GRANULARITIES = (1, 2, 4, 8, 16, 32, 64)


def levine_depth(N: float) -> float:
    """The depth of a model of N non-embedding parameters by the published Levine et al. 2020
    law (archfit's default shape law): what sizes the router's FLOPs in
    :meth:`Granularity.compute_optimal_sparse` (an assumption of archfit's, not Krajewski's)."""
    from archfit.laws.levine import optimal_depth
    from archfit.laws.published import PUBLISHED

    p = PUBLISHED["levine2020"]["params"]
    return optimal_depth(p["a"], p["b"], N)


# the compute-optimal active size is searched within SEARCH_FACTOR of SEARCH_CENTRE (1e6 to 1e14)
SEARCH_CENTRE, SEARCH_FACTOR = 1e10, 1e4


class _MoELaw(MoELaw):
    predicts_loss = True
    params_column = "params_active"
    target_convention = "active non-embedding parameters"
    min_sizes = 2
    default_targets = (1e22, 1e24)
    bounds = {"c": (0.0, None)}

    def loss_at(self, params: Mapping[str, float], N: float, D: float) -> float | None:
        return None  # the loss needs the sparsity too: see loss()

    def applies(self, frame: Any) -> bool:
        """Only a table whose sparsity column (the law's last) takes two values or more."""
        col = frame[self.columns[-1]].drop_nulls()
        return col.n_unique() >= 2

    @staticmethod
    def size(data: Mapping[str, Any]) -> np.ndarray:
        """N, the active non-embedding parameters: ``params_active`` (a table's or a caller's
        column), else ``params`` (prepare() copies it there)."""
        import numpy as np

        return np.asarray(data["params_active"] if "params_active" in data else data["params"],
                          float)

    def _arrays(self, data: Data, constraints: Any, sparsity: str, what: str
                ) -> tuple[np.ndarray, ...]:
        """(N, D, the sparsity column, L), once the table is checked: its sizes, tokens and
        sparsity each vary; no --fix, --prior or --tie (neither MoE law takes them)."""
        from archfit.laws.columns import varies

        if constraints:
            raise FitError(f"{self.name} takes no --fix, --prior or --tie")
        if not varies(data["params"]):
            raise FitError(f"{self.name} needs runs of different active sizes N")
        if not varies(data["tokens"]):
            raise FitError(f"{self.name} needs runs with different token counts D")
        if not varies(data[sparsity]):
            raise FitError(f"{self.name} needs runs of different {what}")
        return data["params"], data["tokens"], data[sparsity], data["loss"]

    # what derived() reports: the compute-optimal sparsity's name and its key in the optimum
    optimum_of: ClassVar[tuple[str, str]]

    def loss(self, params: Mapping[str, float], N: float, D: float, v: float) -> float:
        raise NotImplementedError

    def _domain(self, **values: float) -> None:
        """The law is defined for positive, finite sizes, tokens and sparsity only."""
        from numbers import Real

        bad = [f"{k} {v!r}" for k, v in values.items()
               if isinstance(v, bool) or not isinstance(v, Real)
               or not (math.isfinite(v) and v > 0)]
        if bad:
            raise FitError(f"{self.name}: the loss is defined for positive, finite N, D and "
                           f"{list(values)[-1]}; got {', '.join(bad)}")

    def compute_optimal_sparse(self, params: Mapping[str, float], C: float
                               ) -> dict[str, float]:
        raise NotImplementedError

    def _least_loss(self, params: Mapping[str, float], values: Sequence[float],
                    tokens_of: Any) -> tuple[float, float, float, float]:
        """(the sparsity value, N, D, loss) of least predicted loss over ``values``, each at
        its best N in 1e6 to 1e14 (the loss laws' search, :func:`least_loss_size`) on
        ``tokens_of(N, value)`` tokens."""
        best: tuple[float, float, float, float] | None = None
        for v in values:
            N, loss = least_loss_size(
                lambda n, v=v: self.loss(params, n, tokens_of(n, v), v), SEARCH_CENTRE,
                half_width=math.log(SEARCH_FACTOR), xatol=1e-6)
            if best is None or loss < best[3]:
                best = (float(v), N, tokens_of(N, v), loss)
        assert best is not None
        return best

    def derived_notes(self, derived: Mapping[str, float]) -> list[str]:
        """An active size on the search's bound (1e6 or 1e14) is that bound, not an optimum."""
        lo, hi = SEARCH_CENTRE / SEARCH_FACTOR, SEARCH_CENTRE * SEARCH_FACTOR
        return [f"{k} {v:.3g} is the search's {'upper' if v > SEARCH_CENTRE else 'lower'} "
                f"bound ({lo:.0e} to {hi:.0e} active parameters), not an optimum: at this budget "
                "the law's loss still falls toward that bound"
                for k, v in derived.items() if k.startswith("N_active_opt")
                and not lo * 1.01 < v < hi / 1.01]

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        out: dict[str, float] = {}
        name, key = self.optimum_of
        for C in targets:
            try:
                o = self.compute_optimal_sparse(params, C)
            except (OverflowError, ValueError, ZeroDivisionError):
                continue
            out[derived_name(name, C)] = o[key]
            out[derived_name("N_active_opt", C)] = o["N_active"]
        return out

    def _search(self, f: Any, grid: Sequence[np.ndarray], start: np.ndarray | None
                ) -> np.ndarray:
        import numpy as np
        from scipy.optimize import minimize

        if start is not None:
            starts = [np.asarray(start, float)]
        else:
            vals = [f(p) for p in grid]
            starts = [grid[i] for i in np.argsort(vals)[:3]]
        best = min((minimize(f, s0, method="Nelder-Mead",
                             options={"xatol": 1e-8, "fatol": 1e-15, "maxiter": 6000})
                    for s0 in starts), key=lambda r: r.fun)
        return best.x


@register
class Granularity(_MoELaw):
    name = "moe-granularity"
    formula = ("L(N, D, G) = c + (g / G^gamma + a) / N^alpha + b / D^beta   "
               "[Krajewski et al. 2024, eq. 5; N active non-embedding, G granularity]")
    description = ("Fine-grained experts: the loss over active parameters, tokens and "
                   "granularity; exponents searched (Nelder-Mead), coefficients solved "
                   "exactly (NNLS on relative error).")
    columns = ("loss", "params_active", "tokens", "granularity")
    optimum_of = ("G_opt", "granularity")
    param_names = ("a", "alpha", "b", "beta", "g", "gamma", "c")
    min_points = 8
    domains = {"a": (0.0, None, False), "alpha": (0.0, None, True), "b": (0.0, None, False),
               "beta": (0.0, None, True), "g": (0.0, None, False), "gamma": (0.0, None, True),
               "c": (0.0, None, False)}

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        N, D = self.size(data), np.asarray(data["tokens"], float)
        G = np.asarray(data["granularity"], float)
        p = params
        return p["c"] + (p["g"] / G ** p["gamma"] + p["a"]) / N ** p["alpha"] \
            + p["b"] / D ** p["beta"]

    def loss(self, params: Mapping[str, float], N: float, D: float, G: float) -> float:
        """The law at one (N, D, G) (plain math); N, D and G positive."""
        self._domain(N=N, D=D, G=G)
        p = params
        return p["c"] + (p["g"] / G ** p["gamma"] + p["a"]) / N ** p["alpha"] \
            + p["b"] / D ** p["beta"]

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.regression import nnls_relative

        N, D, G, L = self._arrays(data, constraints, "granularity", "granularities G")

        def cols(e: np.ndarray) -> np.ndarray:
            al, be, ga = e
            return np.stack([np.ones_like(N), N ** -al, D ** -be, G ** -ga * N ** -al], 1)

        def f(e: np.ndarray) -> float:
            if np.any(e <= 0.01) or np.any(e > 3):
                return 1e10
            return nnls_relative(cols(e), L)[0]

        grid = [np.array(p) for p in itertools.product((0.1, 0.3, 0.6), (0.1, 0.3, 0.6),
                                                       (0.2, 0.5, 1.0))]
        e = self._search(f, grid, None if start is None else start[[1, 3, 5]])
        _, (c, a, b, g) = nnls_relative(cols(e), L)
        if a <= 0 and g <= 0 or b <= 0:
            raise FitError(f"{self.name}: a coefficient collapsed to zero; the data do not "
                           "constrain the N, D and G terms")
        return Estimate(np.array([a, e[0], b, e[1], g, e[2], c]),
                        extra={"objective": "squared relative error on loss, NNLS inner solve"})

    def optimal_tokens(self, params: Mapping[str, float], N: float, G: float) -> float:
        """The tokens at which N active parameters are compute-optimal at granularity G, under
        C = 6 N D (routing FLOPs aside): where the loss's N and D terms trade equally,
        alpha (g / G^gamma + a) N^-alpha = beta b D^-beta."""
        p = params
        A = p["g"] / G ** p["gamma"] + p["a"]
        return (p["beta"] * p["b"] * N ** p["alpha"] / (p["alpha"] * A)) ** (1.0 / p["beta"])

    def tokens_to_reach(self, params: Mapping[str, float], N: float, G: float,
                        loss: float) -> float:
        """The tokens N active parameters at granularity G need to reach ``loss``: the law
        solved for D, b / D^beta = loss - c - (g / G^gamma + a) / N^alpha; infinite where the
        loss is at or below what N reaches on unlimited tokens."""
        p = params
        room = loss - p["c"] - (p["g"] / G ** p["gamma"] + p["a"]) / N ** p["alpha"]
        return (p["b"] / room) ** (1.0 / p["beta"]) if room > 0 else math.inf

    def flops_per_token(self, N: float, G: float, d_model: float, n_layer: float,
                        expansion: float = KRAJEWSKI_EXPANSION) -> float:
        """Training FLOPs per token in Krajewski et al.'s model (eq. 7): ``c_f`` per active
        parameter (12 d^2 per block) and the router's ``c_r d_model E G`` per block."""
        return KRAJEWSKI_CF * N + KRAJEWSKI_CR * d_model * expansion * G * n_layer

    def compute_optimal_sparse(self, params: Mapping[str, float], C: float,
                               depth_of: Any = None, expansion: float = KRAJEWSKI_EXPANSION
                               ) -> dict[str, float]:
        """The (N, D, G) of least loss for ``C`` FLOPs under :meth:`flops_per_token`, G among
        :data:`GRANULARITIES`; ``depth_of(N)`` gives the blocks of a model of N active
        non-embedding parameters (default :func:`levine_depth`; its width is then
        sqrt(N / (12 n_layer)))."""
        depth = depth_of or levine_depth

        def tokens(N: float, G: float) -> float:
            L = depth(N)
            return C / self.flops_per_token(N, G, math.sqrt(N / (12 * L)), L, expansion)

        G, N, D, loss = self._least_loss(params, GRANULARITIES, tokens)
        L = depth(N)
        return {"N_active": N, "tokens": D, "granularity": G, "n_experts": expansion * G,
                "top_k": G, "loss": loss, "n_layer": L, "d_model": math.sqrt(N / (12 * L))}


@register
class Experts(_MoELaw):
    name = "moe-experts"
    formula = ("L(N, D, E) = c + a E^delta / N^(alpha + gamma ln E) + b E^omega / "
               "D^(beta + zeta ln E)   [the joint form of Ludziejewski et al. 2025; "
               "N active non-embedding, E routed experts, a dense run E = 1]")
    description = ("Loss over active parameters, tokens and the expert count, with exponents "
                   "that move with ln E; exponents searched (Nelder-Mead), coefficients solved "
                   "exactly (NNLS on relative error).")
    columns = ("loss", "params_active", "tokens", "n_experts")
    optimum_of = ("E_opt", "n_experts")
    param_names = ("a", "delta", "alpha", "gamma", "b", "omega", "beta", "zeta", "c")
    min_points = 12
    domains = {"a": (0.0, None, False), "alpha": (0.0, None, True), "b": (0.0, None, False),
               "beta": (0.0, None, True), "c": (0.0, None, False)}

    def prepare(self, frame: Any) -> Data:
        """The table's columns, a dense run (``n_experts`` 0, as archfit records it) read as
        one expert: the dense baseline the law's E = 1 needs."""
        import polars as pl

        if "n_experts" in frame.columns:
            frame = frame.with_columns(pl.when(pl.col("n_experts") == 0).then(1.0)
                                       .otherwise(pl.col("n_experts")).alias("n_experts"))
        return super().prepare(frame)

    @staticmethod
    def _terms(p: Mapping[str, Any], N: Any, D: Any, E: Any) -> tuple[Any, Any]:
        import numpy as np

        lnE = np.log(E)
        return (E ** p["delta"] * N ** -(p["alpha"] + p["gamma"] * lnE),
                E ** p["omega"] * D ** -(p["beta"] + p["zeta"] * lnE))

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        N, D = self.size(data), np.asarray(data["tokens"], float)
        E = np.maximum(np.asarray(data["n_experts"], float), 1.0)
        tn, td = self._terms(params, N, D, E)
        return params["c"] + params["a"] * tn + params["b"] * td

    def loss(self, params: Mapping[str, float], N: float, D: float, E: float) -> float:
        """The law at one (N, D, E) (plain math); N, D and E positive."""
        self._domain(N=N, D=D, E=E)
        p, lnE = params, math.log(max(E, 1.0))
        return (p["c"] + p["a"] * E ** p["delta"] * N ** -(p["alpha"] + p["gamma"] * lnE)
                + p["b"] * E ** p["omega"] * D ** -(p["beta"] + p["zeta"] * lnE))

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.regression import nnls_relative

        N, D, E, L = self._arrays(data, constraints, "n_experts", "expert counts E")
        names = EXPONENTS

        def cols(e: np.ndarray) -> np.ndarray:
            tn, td = self._terms(dict(zip(names, e)), N, D, E)
            return np.stack([np.ones_like(N), tn, td], 1)

        def f(e: np.ndarray) -> float:
            ex = dict(zip(names, e))
            if not (0.01 < ex["alpha"] < 3 and 0.01 < ex["beta"] < 3) or np.any(np.abs(e) > 3):
                return 1e10
            lnE = np.log(E.max())  # the exponents stay positive over the data's experts
            if ex["alpha"] + ex["gamma"] * lnE <= 0 or ex["beta"] + ex["zeta"] * lnE <= 0:
                return 1e10
            return nnls_relative(cols(e), L)[0]

        if start is None:  # Chinchilla's exponents first, then the expert terms from zero
            base = self._search(lambda ab: f(np.array([0, ab[0], 0, 0, ab[1], 0])),
                                [np.array(p) for p in itertools.product((0.1, 0.3, 0.6),
                                                                        repeat=2)], None)
            e0 = np.array([0.0, base[0], 0.0, 0.0, base[1], 0.0])
        else:
            e0 = np.asarray(start, float)[[1, 2, 3, 5, 6, 7]]
        e = self._search(f, [], e0)
        _, (c, a, b) = nnls_relative(cols(e), L)
        if a <= 0 or b <= 0:
            raise FitError(f"{self.name}: a coefficient collapsed to zero; the data do not "
                           "constrain both the N and D terms")
        theta = self._polish(np.array([math.log(a), *e[:3], math.log(b), *e[3:], c]), N, D, E, L)
        a, b = math.exp(theta[0]), math.exp(theta[4])
        return Estimate(np.array([a, *theta[1:4], b, *theta[5:8], theta[8]]),
                        extra={"objective": "squared relative error on loss (NNLS inner solve, "
                                            "then all nine by least squares)"})

    def _polish(self, theta: np.ndarray, N: np.ndarray, D: np.ndarray, E: np.ndarray,
                L: np.ndarray) -> np.ndarray:
        """Least squares over all nine parameters from the projected search's answer (nine
        exponents and coefficients in one trust-region solve; the search alone can stop short
        in six dimensions). θ = (ln a, delta, alpha, gamma, ln b, omega, beta, zeta, c)."""
        import numpy as np
        from scipy.optimize import least_squares

        names = EXPONENTS

        def resid(th: np.ndarray) -> np.ndarray:
            p = dict(zip(names, (*th[1:4], *th[5:8])))
            tn, td = self._terms(p, N, D, E)
            return (th[8] + np.exp(th[0]) * tn + np.exp(th[4]) * td) / L - 1

        r = least_squares(resid, theta, method="trf", max_nfev=4000)
        better = np.all(np.isfinite(r.x)) and r.cost <= 0.5 * float(resid(theta) @ resid(theta))
        return r.x if better else theta

    def compute_optimal_sparse(self, params: Mapping[str, float], C: float,
                               experts: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
                               ) -> dict[str, float]:
        """The (N, D, E) of least loss for ``C = 6 N D`` FLOPs (routing not counted), E among
        ``experts``."""
        E, N, D, loss = self._least_loss(params, experts, lambda N, E: C / (6 * N))
        return {"N_active": N, "tokens": D, "n_experts": E, "loss": loss}
