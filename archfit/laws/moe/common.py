"""What the mixture-of-experts laws share: Krajewski et al. 2024's FLOP model, the
granularities weighed, the depth that sizes a router, and :class:`SparseLossLaw`, their loss
over the active size, tokens and one sparsity column (its checks, its compute-optimal search and
its optimizer). The laws are :mod:`~archfit.laws.moe.granularity` and
:mod:`~archfit.laws.moe.experts`.

Both are fitted by least squares on relative error, the linear coefficients solved exactly
for given exponents (variable projection, as ``chinchilla-varpro``), and read their sizes from
the run table's ``params_active_non_embedding`` (:attr:`Law.params_column`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from archfit.errors import FitError
from archfit.laws.base import (Data, MoELaw, derived_name, least_loss_size)

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
    from archfit.laws.shape.levine import optimal_depth
    from archfit.laws.published import PUBLISHED

    p = PUBLISHED["levine2020"]["params"]
    return optimal_depth(p["a"], p["b"], N)


# the compute-optimal active size is searched within SEARCH_FACTOR of SEARCH_CENTRE (1e6 to 1e14)
SEARCH_CENTRE, SEARCH_FACTOR = 1e10, 1e4


class SparseLossLaw(MoELaw):
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

    def derived_notes(self, derived: Mapping[str, float],
                      extra: Mapping[str, Any] | None = None) -> list[str]:
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
