"""``moe-granularity``: Krajewski et al. 2024, 'Scaling Laws for Fine-Grained Mixture of
Experts' (arXiv 2402.07871), eq. 5: ``L(N, D, G) = c + (g / G^gamma + a) / N^alpha + b /
D^beta``, N the active non-embedding parameters, D the training tokens, G the granularity (the
dense MLP's width over one expert's). Their runs hold the expansion rate (every expert's
parameters over one dense MLP's) at 64 and route each token to G experts, so the active
parameters do not move with G; finer experts cost router FLOPs, ``c_r d_model E G`` per token
and layer with ``c_r = 14``, against ``12 c_f d_model^2``, ``c_f = 6``, for the dense parts
(their eq. 7). The published fit is ``krajewski2024``."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError
from archfit.laws.base import Constraints, Data, Estimate, register
from archfit.laws.moe.common import (GRANULARITIES, KRAJEWSKI_CF, KRAJEWSKI_CR, KRAJEWSKI_EXPANSION,
                                     SparseLossLaw, levine_depth)

if TYPE_CHECKING:
    import numpy as np


@register
class Granularity(SparseLossLaw):
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

        from archfit.laws.inference.regression import nnls_relative

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
