"""The envelope of training curves (Hoffmann et al. 2022's approach 1): at each FLOP count, the
least loss any run's curve reached and the size N of that run; N_opt = N_ref (C / C_ref)^a
through those points (C_ref a power of 10 within them). It reads every logged point of every run (``read_checkpoints``), FLOPs
as C = 6 N D at each point."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError
from archfit.laws.base import ComputeLaw, Constraints, Data, Estimate, register
from archfit.laws.compute.isoflop import reference_budget

if TYPE_CHECKING:
    import numpy as np

BINS_PER_DECADE = 10  # the FLOP grid the envelope is read on (log-spaced)
MIN_POINTS = 3  # envelope points, strictly inside the sizes, the power law needs


def envelope_points(data: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    """(C, N) of the least-loss point in each FLOP bin, less the bins won by the smallest or
    largest size (the envelope there is only the end of the sizes tried), and how many of
    those were left out."""
    import numpy as np

    N = np.asarray(data["params"], float)
    C = 6.0 * N * np.asarray(data["tokens"], float)
    loss = np.asarray(data["loss"], float)
    lc = np.log10(C)
    edges = np.arange(math.floor(lc.min() * BINS_PER_DECADE),
                      math.ceil(lc.max() * BINS_PER_DECADE) + 1) / BINS_PER_DECADE
    which = np.clip(np.searchsorted(edges, lc, side="right") - 1, 0, len(edges) - 2)
    lo, hi = N.min() * 1.02, N.max() / 1.02
    pts, edge = [], 0
    for b in np.unique(which):
        idx = np.flatnonzero(which == b)
        i = idx[np.argmin(loss[idx])]
        if N[i] < lo or N[i] > hi:
            edge += 1
            continue
        pts.append((C[i], N[i]))
    arr = np.array(pts).reshape(-1, 2)
    return arr[:, 0], arr[:, 1], edge


@register
class Envelope(ComputeLaw):
    name = "envelope"
    formula = ("N_opt(C) = N_ref (C / C_ref)^a through the least-loss run at each FLOP count "
               "(C = 6 N D) over every run's curve   [Hoffmann et al. 2022, approach 1]")
    description = "The training curves' lower envelope: which size is best at each FLOP count."
    columns = ("loss", "params", "tokens")
    param_names = ("N_ref", "a", "C_ref")
    domains = {"N_ref": (0.0, None, True)}
    min_points = 10
    min_sizes = 3
    predicts_loss = False  # it locates N_opt; it models no run's loss
    reads_curves = True
    default_targets = (1e21, 1e24)
    constants = ("C_ref",)
    approach = "1: the curves' envelope"

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        if constraints:
            raise FitError("envelope takes no --fix, --prior or --tie")
        C, N, edge = envelope_points(data)
        if len(C) < MIN_POINTS or len(np.unique(N)) < 2:
            raise FitError(
                f"the curves' envelope has {len(C)} point(s) won by a size strictly between "
                f"the smallest and largest run ({edge} FLOP bins go to an end size): approach 1 "
                "needs sizes whose curves cross; train sizes about the optimum, or fit "
                "--law isoflop or chinchilla on the run table")
        c_ref = reference_budget(C, start)
        X = np.stack([np.ones_like(C), np.log(C / c_ref)], axis=1)
        coef = np.linalg.lstsq(X, np.log(N), rcond=None)[0]
        extra: dict[str, Any] = {}
        if full:
            extra = {"fixed": {"C_ref": c_ref}, "envelope": [[float(c), float(n)] for c, n in zip(C, N)],
                     "residual_space": "ln N of the envelope points",
                     "notes": [f"envelope: {len(C)} FLOP bins ({BINS_PER_DECADE} a decade) "
                               f"won by an inner size, {edge} by the smallest or largest "
                               "(left out)"]}
        return Estimate(np.array([math.exp(coef[0]), coef[1], c_ref]), None, extra)

    def residuals(self, params: Mapping[str, float], data: Data,
                  extra: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        if extra.get("envelope"):
            C, N = np.asarray(extra["envelope"], float).T
        else:
            C, N, _ = envelope_points(data)
        return np.log(N), np.log(params["N_ref"]) + params["a"] * np.log(C / params["C_ref"])

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        raise FitError("envelope locates N_opt; it predicts no run's loss (fit chinchilla or "
                       "isoflop for that)")

    def compute_optimal(self, params: Mapping[str, float], C: float, **conditions: Any
                        ) -> tuple[float, float]:
        n = params["N_ref"] * (float(C) / params["C_ref"]) ** params["a"]
        return n, float(C) / (6.0 * n)

    def loss_at(self, params: Mapping[str, float], N: float, D: float, **conditions: Any
                ) -> float | None:
        return None
