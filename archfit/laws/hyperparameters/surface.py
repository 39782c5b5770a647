"""``lr-batch-surface``: the loss of any run of a learning-rate x batch grid, from its rate,
batch, size and tokens. A compute law's L*(N, D) plus a basin in ln lr and ln batch (the shape
Step Law, Li et al. 2025, and DeepSeek-AI 2024 describe: near its floor the loss is a bowl in the
logarithms of both), whose centre follows power laws in N and D::

    L = E + A / N^alpha [+ B / D^beta] + w_lr(x) x^2 + w_b y^2 + w_x x y
    x = ln lr - ln lr*(N, D),   lr* = exp(c_lr) N^n_lr [D^d_lr]
    y = ln B  - ln B*(N, D),    B*  = exp(c_b)  N^n_b  [D^d_b]
    w_lr(x) = w_lr_hi above the rate's centre (x > 0), w_lr_lo below

In the rate the bowl is steeper on the high side: a rate past the optimum nears the edge where
runs diverge, a rate below it only trains slower (Wortsman et al. 2023's learning-rate
sensitivity curves; Step Law's heat maps). A symmetric bowl fitted to such a basin puts its
centre low. Tried on this project's CPU grid and Step Law's public grid together, and kept for
what the CPU grid's held-out size says (fitted on its 4 smaller sizes, scored on the largest: R²
0.61 with one width per knob, 0.88 with the rate's two; two for the batch as well added nothing
there, and left the batch's far side unfitted where its best batch is the grid's largest); the
scores on both are in ``docs/benchmarks/``.

Runs that diverged are not on the surface: a run whose loss ends more than
:data:`DIVERGED_RATIO` times the best loss of its (size, tokens) cell is left out of the fit,
with a note naming how many (:meth:`LRBatchSurface.screen`).

The bracketed terms are fitted where the runs' token counts vary, and held at 0 (folded into the
constant and the centres' coefficients, said in a note) where every run has one token count.
Fitted as the loss laws are (Huber, δ = 1e-3, on log loss), from starts read off the grid: each
size's best run for the centre, the size term by variable projection, the widths at a small
bowl. The basin's widths do not move with N or D (widths that move, tried on the same CPU grid,
predicted its held-out size no better). The law answers the best rate and batch at a size and
the loss penalty of a rate or batch a factor off them: ``w_lr_hi (ln f)^2`` for a rate f > 1
times the optimum, ``w_lr_lo (ln f)^2`` below, and ``w_b (ln f)^2`` for a batch."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from archfit.laws.base import (HUBER_DELTA, Constraints, Data, Estimate, HyperparameterLaw,
                               derived_name, register)

if TYPE_CHECKING:
    import numpy as np

WIDTHS = ("w_lr_lo", "w_lr_hi", "w_b")
ALL = ("E", "A", "alpha", "B", "beta", "c_lr", "n_lr", "d_lr", "c_b", "n_b", "d_b",
       *WIDTHS, "w_x")
# a run ending above this many times its (size, tokens) cell's best loss diverged. Set after
# reading Step Law's dense grid, where no run ends between 1.2x and 1.7x its cell's best (the
# trained runs below, the diverged ones above: any ratio in that gap leaves out the same 181
# runs); in this project's CPU grid, whose diverged runs its status column drops, no run ends
# above 1.3x
DIVERGED_RATIO = 1.5
TOKEN_TERMS = ("B", "beta", "d_lr", "d_b")  # held at 0 when every run has one token count


@register
class LRBatchSurface(HyperparameterLaw):
    name = "lr-batch-surface"
    formula = ("L = E + A/N^alpha + B/D^beta + w_lr x^2 + w_b y^2 + w_x x y, x = ln(lr/lr*), "
               "y = ln(B/B*), lr* = e^c_lr N^n_lr D^d_lr, B* = e^c_b N^n_b D^d_b, w_lr = "
               "w_lr_hi above lr* and w_lr_lo below [a basin in ln lr and ln batch about "
               "power-law centres, its two sides in the rate of their own steepness]")
    description = ("The loss of any run of a learning-rate x batch grid: a size-and-tokens "
                   "floor plus a basin in ln lr (quadratic on each side) and ln batch about a "
                   "centre that follows power laws; diverged runs left out; Huber on log loss.")
    columns = ("loss", "params", "tokens", "lr", "batch_tokens")
    param_names = ALL
    min_points = 20
    min_sizes = 3
    predicts_loss = True
    folded_without_tokens = TOKEN_TERMS
    domains = {"A": (0.0, None, False), "alpha": (0.0, None, True), "B": (0.0, None, False),
               **{w: (0.0, None, False) for w in WIDTHS}}
    default_targets = (1e7, 1e9)

    @staticmethod
    def _basin(p: Mapping[str, float], N: Any, D: Any, lr: Any, b: Any) -> Any:
        import numpy as np

        lnN, lnD = np.log(N), np.log(D)
        x = np.log(lr) - (p["c_lr"] + p["n_lr"] * lnN + p["d_lr"] * lnD)
        y = np.log(b) - (p["c_b"] + p["n_b"] * lnN + p["d_b"] * lnD)
        w_lr = np.where(x > 0, p["w_lr_hi"], p["w_lr_lo"])
        return w_lr * x * x + p["w_b"] * y * y + p["w_x"] * x * y

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        N, D = np.asarray(data["params"], float), np.asarray(data["tokens"], float)
        p = params
        with np.errstate(all="ignore"):
            floor = p["E"] + p["A"] * N ** -p["alpha"] + (p["B"] * D ** -p["beta"]
                                                          if p["B"] else 0.0)
            return floor + self._basin(p, N, D, np.asarray(data["lr"], float),
                                       np.asarray(data["batch_tokens"], float))

    def optimum_point(self, params: Mapping[str, float], N: float, D: float
                      ) -> dict[str, float]:
        """The best rate and batch at (N, D) and the loss there."""
        p = params
        lr = math.exp(p["c_lr"] + p["n_lr"] * math.log(N) + p["d_lr"] * math.log(D))
        b = math.exp(p["c_b"] + p["n_b"] * math.log(N) + p["d_b"] * math.log(D))
        loss = p["E"] + p["A"] * N ** -p["alpha"] + (p["B"] * D ** -p["beta"] if p["B"] else 0)
        return {"lr": lr, "batch_tokens": b, "loss": loss}

    def penalty(self, params: Mapping[str, float], knob: str, factor: float) -> float:
        """The loss added by a rate (``knob`` "lr") or batch ("batch_tokens") ``factor`` off
        its optimum, the other at its own: the width on that side times (ln factor)^2."""
        width = (params["w_b"] if knob != "lr" else
                 params["w_lr_hi"] if factor > 1 else params["w_lr_lo"])
        return width * math.log(factor) ** 2

    def groups(self, data: Data, by: Sequence[str] | None = None) -> tuple[np.ndarray, str]:
        """Bootstrap units: the (size, tokens) cells, unless ``by`` names others. The centre's
        power laws are fitted across cells and a cell's runs share its quirks, so resampling
        runs makes intervals too narrow: on this project's CPU grid the held-out size's 95%
        prediction intervals covered 86% of its runs with runs resampled and 96% with cells
        (Step Law's grids: 91% and 99% dense, 72% and 90% mixture)."""
        import numpy as np

        from archfit.laws.inference.columns import run_groups

        if by:
            return run_groups(data, by)
        cells = np.stack([self.classes(data), np.asarray(data["tokens"], float)], axis=1)
        _, labels = np.unique(cells, axis=0, return_inverse=True)
        return labels.ravel(), "(size, tokens) cell: the runs of one size and token count"

    def screen(self, frame: Any) -> tuple[Any, list[str]]:
        """The runs on the surface: a run whose loss ends above :data:`DIVERGED_RATIO` times the
        best of its (size, tokens) cell diverged, and no smooth surface predicts where; those
        are left out, counted in a note."""
        import polars as pl

        cell = [c for c in ("target_params", "params") if c in frame.columns][:1] + ["tokens"]
        best = pl.col("loss").min().over(cell)
        kept = frame.filter(pl.col("loss") <= DIVERGED_RATIO * best)
        gone = frame.height - kept.height
        if not gone:
            return frame, []
        return kept, [f"left out {gone} of {frame.height} runs as diverged (loss above "
                      f"{DIVERGED_RATIO:g}x the best run of their size and tokens): the surface "
                      "describes runs that trained, not where a rate or batch diverges"]

    def bowl_problem(self, params: Mapping[str, float]) -> str | None:
        """Why the basin has no minimum at its centre, or None: each side's widths must
        outweigh the cross term (4 w_lr w_b > w_x^2 on both sides of the rate)."""
        for side, word in (("lo", "below"), ("hi", "above")):
            if 4 * params[f"w_lr_{side}"] * params["w_b"] <= params["w_x"] ** 2:
                return (f"the fitted basin is a saddle with the rate {word} its centre (4 w_lr "
                        "w_b <= w_x^2 there): its centre is not the best rate and batch; add "
                        "runs around the optimum")
        return None

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        """The best rate and batch at each size of ``targets``, on 20 tokens per parameter
        where the law reads tokens, else on the runs' tokens."""
        D0 = (extra or {}).get("tokens")
        out: dict[str, float] = {}
        for N in targets:
            o = self.optimum_point(params, N, D0 or 20.0 * N)
            out[derived_name("lr_opt", N)] = o["lr"]
            out[derived_name("batch_opt", N)] = o["batch_tokens"]
        return out

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.inference.columns import require_spread, varies
        from archfit.laws.inference.optimize import Reparam, huber_lsq

        require_spread(self, data, (("params", "sizes"), ("lr", "learning rates"),
                                    ("batch_tokens", "batches")), constraints)
        uses_tokens = bool(varies(data["tokens"]))
        free = [n for n in ALL if uses_tokens or n not in TOKEN_TERMS]
        logL = np.log(data["loss"])

        def full_params(theta: np.ndarray) -> dict[str, float]:
            return {**dict.fromkeys(ALL, 0.0), **dict(zip(free, theta))}

        def resid(theta: np.ndarray) -> np.ndarray:
            with np.errstate(all="ignore"):
                r = np.log(self.predict(full_params(theta), data)) - logL
            return np.where(np.isfinite(r), r, 1e3)

        starts = ([np.asarray(start, float)[[ALL.index(n) for n in free]]] if start is not None
                  else self._starts(data, free))
        lo = [0.0 if n in ("A", "B", *WIDTHS) else 0.01 if n in ("alpha", "beta")
              else -math.inf for n in free]
        bounds = [(a, math.inf) for a in lo]
        theta = huber_lsq(resid, starts, Reparam([(n, False) for n in free]), HUBER_DELTA,
                          None, bounds=bounds)
        p = full_params(theta)
        notes = [] if uses_tokens else [
            "every run has one token count: the token terms (B, beta, d_lr, d_b) are held at 0, "
            "folded into E and the centres' coefficients; the law answers at those tokens"]
        if full and (problem := self.bowl_problem(p)):
            notes.append(problem)
        return Estimate(np.array([p[n] for n in ALL]),
                        extra={"objective": "Huber (delta 1e-3) on log loss",
                               "uses_tokens": uses_tokens, "notes": notes,
                               "tokens": None if uses_tokens else float(data["tokens"][0])})

    def _starts(self, data: Data, free: list[str]) -> list[np.ndarray]:
        """Each size's best run for the centre's power laws; E, A and alpha by projection on
        those runs' losses; the bowl's widths from small to wide."""
        import numpy as np
        from scipy.optimize import nnls

        N, L = np.asarray(data["params"], float), np.asarray(data["loss"], float)
        sizes = np.unique(N)
        best = [int(np.flatnonzero(N == n)[np.argmin(L[N == n])]) for n in sizes]
        lnN = np.log(sizes)
        n_lr, c_lr = np.polyfit(lnN, np.log(data["lr"][best]), 1)
        n_b, c_b = np.polyfit(lnN, np.log(data["batch_tokens"][best]), 1)
        Lb = L[best]
        out = []
        for alpha, w in itertools.product((0.1, 0.3, 0.6), (0.005, 0.02, 0.08)):
            X = np.stack([np.ones_like(sizes), sizes ** -alpha], 1)
            (E, A), _ = nnls(X, Lb)
            p = {**dict.fromkeys(ALL, 0.0), "E": E, "A": A, "alpha": alpha, "c_lr": c_lr,
                 "n_lr": n_lr, "c_b": c_b, "n_b": n_b, "beta": 0.3, **dict.fromkeys(WIDTHS, w)}
            out.append(np.array([p[n] for n in free]))
        return out
