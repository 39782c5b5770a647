"""The data-constrained law of Muennighoff et al. 2023, "Scaling Data-Constrained Language
Models" (NeurIPS 2023, arXiv 2305.16264): Chinchilla's L(N, D) with the tokens and the
parameters replaced by their effective values when data repeats.

With U_D unique tokens seen D / U_D times, the repeated epochs R_D = D / U_D - 1 are worth
D' = U_D + U_D R_D* (1 - e^(-R_D / R_D*)) fresh tokens: a repeated token's value decays with a
half-life of R_D* ln 2 repeats. Parameters beyond U_N, the compute-optimal size for U_D unique
tokens, decay alike: N' = U_N + U_N R_N* (1 - e^(-R_N / R_N*)), R_N = N / U_N - 1. Then
L = E + A / N'^alpha + B / D'^beta. With every token unique (U_D >= D) it is Chinchilla's law.

The compute-optimal split of a budget C = 6 N D given U_D unique tokens has no closed form: it
is found by a bounded scalar search over ln N."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError
from archfit.laws.base import HUBER_DELTA, Constraints, Data, Estimate, ComputeLaw, register

if TYPE_CHECKING:
    import numpy as np

# the decay constants' starts: Muennighoff et al.'s own grid (0 to 20 in four steps; 0 itself
# has no decay), from which their fit reached R_D* = 15.4, R_N* = 5.3. The objective is flat
# along a ridge of (R_D*, R_N*): on their runs a second minimum near (95, 1.7) sits 0.1% lower,
# which is why the bootstrap's intervals on the two are wide
RATE_STARTS = (20 / 3, 40 / 3, 20.0)
# past this many epochs a repeated token is worth under 0.1% of a fresh one by Muennighoff et
# al.'s fit (e^(-(epochs - 1) / R_D*) with R_D* = 15.4): runs that all repeat more than this
# carry no measurement of the decay
PUBLISHED_R_D = 15.4
MAX_MEASURED_EPOCHS = 1.0 + PUBLISHED_R_D * math.log(1000.0)
# the domains of Chinchilla's terms in the repeated-data laws (E may be 0: a floor the runs
# do not reach is no floor)
TERM_DOMAINS = {"E": (0.0, None, False), "A": (0.0, None, True), "B": (0.0, None, True),
                "alpha": (0.0, None, True), "beta": (0.0, None, True)}


def _g(p: Mapping[str, float]) -> float:
    """Chinchilla's G = (alpha A / (beta B))^(1 / (alpha + beta)): N_opt = G (C/6)^(beta /
    (alpha + beta)), D_opt = (C/6)^(alpha / (alpha + beta)) / G (Hoffmann et al. eq. 4)."""
    return (p["alpha"] * p["A"] / (p["beta"] * p["B"])) ** (1.0 / (p["alpha"] + p["beta"]))


def unique_params(p: Mapping[str, float], unique_tokens: Any) -> Any:
    """U_N: the compute-optimal size of a model whose optimal data is exactly ``unique_tokens``
    (the budget whose D_opt is U_D, and that budget's N_opt): G (G U_D)^(beta / alpha)."""
    G = _g(p)
    return G * (G * unique_tokens) ** (p["beta"] / p["alpha"])


def effective(p: Mapping[str, float], N: Any, D: Any, U: Any, exp: Any = math.exp
              ) -> tuple[Any, Any]:
    """(N', D'): the effective parameters and tokens (numbers, or numpy arrays with
    ``exp=np.exp``)."""
    R_D = D / U - 1.0
    R_D = R_D * (R_D > 0)
    D_eff = U + U * p["R_D"] * (1.0 - exp(-R_D / p["R_D"]))
    U_N = unique_params(p, U)
    U_N = U_N + (N - U_N) * (N < U_N)  # min(N, U_N)
    R_N = N / U_N - 1.0
    N_eff = U_N + U_N * p["R_N"] * (1.0 - exp(-R_N / p["R_N"]))
    return N_eff, D_eff


def loss(p: Mapping[str, float], N: float, D: float, U: float | None = None) -> float:
    """L(N, D) with ``U`` unique tokens (None: every token unique)."""
    U = D if U is None or U >= D else U
    N_eff, D_eff = effective(p, N, D, U)
    return p["E"] + p["A"] / N_eff ** p["alpha"] + p["B"] / D_eff ** p["beta"]


def compute_optimal(p: Mapping[str, float], C: float) -> tuple[float, float]:
    """(N_opt, D_opt) for C = 6 N D FLOPs with every token unique: Chinchilla's closed form."""
    G = _g(p)
    c6 = float(C) / 6.0
    n0 = G * c6 ** (p["beta"] / (p["alpha"] + p["beta"]))
    return n0, c6 / n0


def sizes_tokens_unique(name: str, data: Data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N, D, U) of a repeated-data sweep, U at most D; refused in one line unless the sizes
    and the token counts both vary."""
    import numpy as np

    from archfit.laws.columns import varies

    if not varies(data["params"]) or not varies(data["tokens"]):
        raise FitError(f"{name} needs runs of different sizes N and token counts D")
    N, D = data["params"], data["tokens"]
    return N, D, np.minimum(data["unique_tokens"], D)


def fresh_starts(N: np.ndarray, D: np.ndarray, U: np.ndarray, logL: np.ndarray,
                 k: int = 3) -> np.ndarray:
    """Chinchilla's ``k`` best starts (ln A, ln B, alpha, beta, ln E) on the runs that see
    every token once (on every run where fewer than 6 do, or they do not vary in N and D)."""
    import numpy as np

    from archfit.laws.columns import varies
    from archfit.laws.inference.optimize import HuberLSE

    fresh = U >= D
    keep = fresh if fresh.sum() >= 6 and varies(N[fresh]) and varies(D[fresh]) \
        else np.ones_like(fresh)
    h = HuberLSE(np.log(np.stack([N[keep], D[keep]], 1)), logL[keep], HUBER_DELTA)
    base = h.projected_starts(rp=None)
    return base[np.argsort(np.asarray(h.objective(base)))[:k]]


def epoch_value(p: Mapping[str, float], D: float, U: float) -> float:
    """What the last repeated token is worth against a fresh one: e^(-R_D / R_D*), R_D the
    repeats so far (1 for unique data)."""
    R_D = max(D / U - 1.0, 0.0)
    return math.exp(-R_D / p["R_D"])


@register
class DataConstrained(ComputeLaw):
    name = "data-constrained"
    formula = ("L(N, D, U) = E + A / N'^alpha + B / D'^beta,  D' = U + U R_D* (1 - e^(-R_D/R_D*)), "
               "R_D = D/U - 1 (likewise N' past the compute-optimal size for U)   "
               "[Muennighoff et al. 2023]")
    description = ("Chinchilla's law on effective parameters and tokens when U unique tokens "
                   "are repeated (Muennighoff et al. 2023): Huber (δ=1e-3) on log loss, "
                   "least squares from starts over the decay constants R_D*, R_N*.")
    columns = ("loss", "params", "tokens", "unique_tokens")
    param_names = ("E", "A", "B", "alpha", "beta", "R_D", "R_N")
    conditions = ("unique_tokens",)
    min_points = 10
    min_sizes = 3
    default_targets = (1e21, 1e24)
    bounds = {"E": (0.0, None)}
    domains = {**TERM_DOMAINS, "R_D": (0.0, None, True), "R_N": (0.0, None, True)}
    supports_ties = True
    # the internal vector: (ln A, ln B, alpha, beta, ln E, ln R_D*, ln R_N*)
    SPEC = (("A", True), ("B", True), ("alpha", False), ("beta", False), ("E", True),
            ("R_D", True), ("R_N", True))

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        N = np.asarray(data["params"], float)
        D = np.asarray(data["tokens"], float)
        U = np.minimum(np.asarray(data.get("unique_tokens", D), float), D)
        N_eff, D_eff = effective(params, N, D, U, exp=np.exp)
        return params["E"] + params["A"] / N_eff ** params["alpha"] + params["B"] / D_eff ** \
            params["beta"]

    def loss_at(self, params: Mapping[str, float], N: float, D: float,
                unique_tokens: float | None = None) -> float | None:
        """The loss on ``unique_tokens`` unique tokens (None: every token unique, Chinchilla's
        loss)."""
        return loss(params, N, D, unique_tokens)

    def compute_optimal(self, params: Mapping[str, float], C: float,
                        unique_tokens: float | None = None) -> tuple[float, float]:
        """Chinchilla's closed form with every token unique; with ``unique_tokens``, the size of
        least loss on the budget (the loss law's search)."""
        if unique_tokens is None:
            return compute_optimal(params, C)
        return super().compute_optimal(params, C, unique_tokens=unique_tokens)

    def condition_report(self, params: Mapping[str, float], D: float, N: float | None = None,
                         unique_tokens: float | None = None) -> dict[str, Any]:
        return self.repetition(params, D, unique_tokens) if unique_tokens else {}

    def repetition(self, params: Mapping[str, float], D: float, U: float) -> dict[str, Any]:
        """What training on ``D`` tokens of ``U`` unique ones means: the epochs, what the last
        epoch's tokens are worth against fresh ones, the epochs at which a repeated token is
        worth half a fresh one (the half-life, 1 + R_D* ln 2), and the loss against that of the
        same budget on unique data."""
        epochs = D / U
        half = 1.0 + params["R_D"] * math.log(2)
        value = epoch_value(params, D, U)
        return {"unique_tokens": U, "epochs": epochs, "last_epoch_value": value,
                "half_value_epochs": half,
                "epochs_pay": (f"each epoch so far is worth at least half of fresh data (up to "
                               f"{half:.3g} epochs)" if epochs <= half else
                               f"beyond {half:.3g} epochs a repeated token is worth less than "
                               f"half a fresh one; the last is worth {value:.0%}: more data, "
                               "not more epochs, pays from here")}

    def more_derived(self, params: Mapping[str, float]) -> dict[str, float]:
        return {"half-life of a repeated token (repeats)": params["R_D"] * math.log(2)}

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.inference.optimize import Reparam, huber_lsq, log_sum_exp

        N, D, U = sizes_tokens_unique(self.name, data)
        if not np.any(U < D):
            raise FitError(f"{self.name} needs runs that repeat data (unique_tokens below "
                           "tokens) to fit R_D* and R_N*; with every token unique use "
                           "chinchilla")
        epochs = D[U < D] / U[U < D]
        if not np.any(epochs <= MAX_MEASURED_EPOCHS):
            raise FitError(f"{self.name}: every repeated run repeats its data more than "
                           f"{MAX_MEASURED_EPOCHS:.0f} times (the fewest: {epochs.min():.3g}); "
                           "by Muennighoff et al.'s fit a token repeated that often is worth "
                           "under 0.1% of a fresh one, so the decay cannot be measured: add "
                           "runs with fewer repeats (or check the unique_tokens column)")
        logL = np.log(data["loss"])
        rp = Reparam(self.SPEC, constraints)

        def resid(th: np.ndarray) -> np.ndarray:
            p = {"A": np.exp(th[0]), "B": np.exp(th[1]), "alpha": th[2], "beta": th[3],
                 "E": np.exp(th[4]), "R_D": np.exp(th[5]), "R_N": np.exp(th[6])}
            with np.errstate(all="ignore"):
                N_eff, D_eff = effective(p, N, D, U, exp=np.exp)
                terms = np.stack([th[0] - th[2] * np.log(N_eff), th[1] - th[3] * np.log(D_eff),
                                  np.full_like(N_eff, th[4])])
                r = log_sum_exp(terms, axis=0) - logL
            return np.where(np.isfinite(r), r, 1e3)

        if start is not None:
            E, A, B, al, be, rd, rn = start
            starts = [np.array([np.log(A), np.log(B), al, be, np.log(max(E, 1e-12)),
                                np.log(rd), np.log(rn)])]
        else:  # Chinchilla's starts on the runs that do not repeat, times a grid of decays
            starts = [np.concatenate([b, np.log([rd, rn])]) for b in fresh_starts(N, D, U, logL)
                      for rd in RATE_STARTS for rn in RATE_STARTS]
        th = huber_lsq(resid, starts, rp, HUBER_DELTA, constraints.scale if constraints else None)
        p = rp.public(th)
        return Estimate(np.array([p[n] for n in self.param_names]),
                        extra={"objective": "huber(delta=1e-3) on log loss"})
