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
(size, tokens) cell's best run for the centre, the floor's coefficients by projection on those
runs, the widths from a small bowl to a wide one; the three starts of least cost are solved, with
the exact Jacobian (:meth:`LRBatchSurface.derivatives`), in coordinates centred on the runs'
typical size and tokens (on Step Law's 2,702 runs: 0.6 s, against 24 s with differenced
Jacobians from nine starts in the raw coordinates, to the same optimum). The basin's widths do not move with N or D (widths that move, tried on the same CPU grid,
predicted its held-out size no better). The law answers the best rate and batch at a size and
the loss penalty of a rate or batch a factor off them: ``w_lr_hi (ln f)^2`` for a rate f > 1
times the optimum, ``w_lr_lo (ln f)^2`` below, and ``w_b (ln f)^2`` for a batch."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence
from archfit.errors import FitError, FitInputError

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
# of the grid of starts (3 exponents x 3 widths), those solved: the least costly where they
# start. On Step Law's dense grid and this project's CPU grid all nine reach one optimum
STARTS_SOLVED = 3
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

    def derivatives(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        """d(predicted loss)/d(parameter) per run, a column per name of :data:`ALL` (the
        Jacobian the fit's optimizer steps on: exact, where differences would cost a
        prediction per parameter per step)."""
        import numpy as np

        p = params
        N, D = np.asarray(data["params"], float), np.asarray(data["tokens"], float)
        lnN, lnD = np.log(N), np.log(D)
        x = np.log(np.asarray(data["lr"], float)) - (p["c_lr"] + p["n_lr"] * lnN
                                                     + p["d_lr"] * lnD)
        y = np.log(np.asarray(data["batch_tokens"], float)) - (p["c_b"] + p["n_b"] * lnN
                                                               + p["d_b"] * lnD)
        hi = x > 0
        dx = 2 * np.where(hi, p["w_lr_hi"], p["w_lr_lo"]) * x + p["w_x"] * y  # dL/dx
        dy = 2 * p["w_b"] * y + p["w_x"] * x
        nA, dB = N ** -p["alpha"], D ** -p["beta"]
        cols = {"E": np.ones_like(N), "A": nA, "alpha": -p["A"] * lnN * nA, "B": dB,
                "beta": -p["B"] * lnD * dB, "c_lr": -dx, "n_lr": -dx * lnN, "d_lr": -dx * lnD,
                "c_b": -dy, "n_b": -dy * lnN, "d_b": -dy * lnD,
                "w_lr_lo": np.where(hi, 0.0, x * x), "w_lr_hi": np.where(hi, x * x, 0.0),
                "w_b": y * y, "w_x": x * y}
        return np.stack([cols[n] for n in ALL], axis=1)

    def optimum_point(self, params: Mapping[str, float], N: float, D: float
                      ) -> dict[str, float]:
        """The best rate and batch at (N, D) and the loss there."""
        _positive_number("N (the size)", N)
        _positive_number("D (the tokens)", D)
        p = params
        try:
            lr = math.exp(p["c_lr"] + p["n_lr"] * math.log(N) + p["d_lr"] * math.log(D))
            b = math.exp(p["c_b"] + p["n_b"] * math.log(N) + p["d_b"] * math.log(D))
            loss = p["E"] + p["A"] * N ** -p["alpha"] + (p["B"] * D ** -p["beta"] if p["B"]
                                                         else 0)
        except OverflowError:
            raise FitError(f"{self.name}: at N = {N:.3g}, D = {D:.3g} the best rate or batch is "
                           "beyond a float: far outside the runs the surface was fitted on"
                           ) from None
        return {"lr": lr, "batch_tokens": b, "loss": loss}

    def penalty(self, params: Mapping[str, float], knob: str, factor: float) -> float:
        """The loss added by a rate (``knob`` "lr") or batch ("batch_tokens") ``factor`` off
        its optimum, the other at its own: the width on that side times (ln factor)^2."""
        if knob not in ("lr", "batch_tokens"):
            raise FitInputError(f"a surface's penalty is for 'lr' or 'batch_tokens', got {knob!r}")
        _positive_number(f"the {knob} factor", factor)
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
        best of its (size, tokens) cell, at a rate above that best run's, diverged, and no
        smooth surface predicts where; those are left out, counted in a note. Below the best
        rate a run only trains slower (Wortsman et al. 2023): however high its loss, it stays."""
        import polars as pl

        cell = [c for c in ("target_params", "params") if c in frame.columns][:1] + ["tokens"]
        best = pl.col("loss").min().over(cell)
        best_lr = pl.col("lr").sort_by("loss").first().over(cell)
        kept = frame.filter((pl.col("loss") <= DIVERGED_RATIO * best) | (pl.col("lr") <= best_lr))
        gone = frame.height - kept.height
        if not gone:
            return frame, []
        return kept, [f"left out {gone} of {frame.height} runs as diverged (loss above "
                      f"{DIVERGED_RATIO:g}x the best run of their size and tokens, at a higher "
                      "rate): the surface describes runs that trained, not where a rate or "
                      "batch diverges"]

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
        cols = [ALL.index(n) for n in free]
        logL = np.log(data["loss"])
        # the optimizer steps in centred coordinates (sizes and tokens over their geometric
        # means, the floor's constant at those means): the same law, without the ridge between
        # E, A and B that otherwise costs it hundreds of steps along one valley
        lnN0, lnD0 = float(np.mean(np.log(data["params"]))), float(np.mean(np.log(data["tokens"])))
        scaled = {**data, "params": np.asarray(data["params"], float) / math.exp(lnN0),
                  "tokens": np.asarray(data["tokens"], float) / math.exp(lnD0)}

        def inner(theta: np.ndarray) -> dict[str, float]:  # the law in the scaled units
            q = {**dict.fromkeys(ALL, 0.0), **dict(zip(free, theta))}
            return {**q, "E": q["E"] - q["A"] - q["B"]}

        def resid(theta: np.ndarray) -> np.ndarray:
            with np.errstate(all="ignore"):
                r = np.log(self.predict(inner(theta), scaled)) - logL
            return np.where(np.isfinite(r), r, 1e3)

        def jac(theta: np.ndarray) -> np.ndarray:
            q = inner(theta)
            with np.errstate(all="ignore"):
                J = self.derivatives(q, scaled) / self.predict(q, scaled)[:, None]
            J[:, 1] -= J[:, 0]  # A and B enter the floor's constant as well
            J[:, 3] -= J[:, 0]
            return np.where(np.isfinite(J), J, 0.0)[:, cols]

        public: list[dict[str, float]] = (
            [{n: float(v) for n, v in zip(ALL, np.asarray(start, float))}]
            if start is not None else self._starts(data, free))
        starts = [np.array([q[n] for n in free])
                  for q in (_centred(p, lnN0, lnD0) for p in public)]
        lo = [0.0 if n in ("A", "B", *WIDTHS) else 0.01 if n in ("alpha", "beta")
              else -math.inf for n in free]
        bounds = [(a, math.inf) for a in lo]
        theta = huber_lsq(resid, starts, Reparam([(n, False) for n in free]), HUBER_DELTA,
                          None, bounds=bounds, jac=jac, keep=STARTS_SOLVED)
        p = _uncentred({**dict.fromkeys(ALL, 0.0), **dict(zip(free, theta))}, lnN0, lnD0)
        notes = [] if uses_tokens else [
            "every run has one token count: the token terms (B, beta, d_lr, d_b) are held at 0, "
            "folded into E and the centres' coefficients; the law answers at those tokens"]
        if full and (problem := self.bowl_problem(p)):
            notes.append(problem)
        return Estimate(np.array([p[n] for n in ALL]),
                        extra={"objective": "Huber (delta 1e-3) on log loss",
                               "uses_tokens": uses_tokens, "notes": notes,
                               "tokens": None if uses_tokens else float(data["tokens"][0])})

    def _starts(self, data: Data, free: list[str]) -> list[dict[str, float]]:
        """The best run of each (size, tokens) cell for the centre's power laws (least squares
        in the logarithms) and, by projection on those runs' losses, for E, A and B at each
        exponent tried; the bowl's widths from small to wide."""
        import numpy as np
        from scipy.optimize import nnls

        N, D = np.asarray(data["params"], float), np.asarray(data["tokens"], float)
        L = np.asarray(data["loss"], float)
        _, cell = np.unique(np.stack([N, D], 1), axis=0, return_inverse=True)
        cell = cell.ravel()
        best = np.array([np.flatnonzero(cell == c)[np.argmin(L[cell == c])]
                         for c in np.unique(cell)])
        uses_tokens = "d_lr" in free
        X = np.stack([np.ones(len(best)), np.log(N[best])]
                     + ([np.log(D[best])] if uses_tokens else []), 1)
        (c_lr, n_lr, *d_lr), *_ = np.linalg.lstsq(X, np.log(data["lr"][best]), rcond=None)
        (c_b, n_b, *d_b), *_ = np.linalg.lstsq(X, np.log(data["batch_tokens"][best]),
                                               rcond=None)
        out = []
        for alpha, w in itertools.product((0.1, 0.3, 0.6), (0.005, 0.02, 0.08)):
            F = [np.ones(len(best)), N[best] ** -alpha] + ([D[best] ** -0.3] if uses_tokens
                                                           else [])
            (E, A, *B), _ = nnls(np.stack(F, 1), L[best])
            p = {**dict.fromkeys(ALL, 0.0), "E": E, "A": A, "alpha": alpha, "B": sum(B),
                 "beta": 0.3, "c_lr": c_lr, "n_lr": n_lr, "d_lr": sum(d_lr), "c_b": c_b,
                 "n_b": n_b, "d_b": sum(d_b), **dict.fromkeys(WIDTHS, w)}
            out.append(p)
        return out


def _centred(p: Mapping[str, float], lnN0: float, lnD0: float) -> dict[str, float]:
    """The law's parameters with sizes and tokens in units of e^lnN0 and e^lnD0, and E the
    floor's value there (E + A + B in those units): the optimizer's coordinates."""
    q = dict(p)
    q["A"] = p["A"] * math.exp(-p["alpha"] * lnN0)
    q["B"] = p["B"] * math.exp(-p["beta"] * lnD0)
    q["E"] = p["E"] + q["A"] + q["B"]
    for c, n, d in (("c_lr", "n_lr", "d_lr"), ("c_b", "n_b", "d_b")):
        q[c] = p[c] + p[n] * lnN0 + p[d] * lnD0
    return q


def _uncentred(q: Mapping[str, float], lnN0: float, lnD0: float) -> dict[str, float]:
    """:func:`_centred`'s inverse."""
    p = dict(q)
    p["E"] = q["E"] - q["A"] - q["B"]
    p["A"] = q["A"] * math.exp(q["alpha"] * lnN0)
    p["B"] = q["B"] * math.exp(q["beta"] * lnD0)
    for c, n, d in (("c_lr", "n_lr", "d_lr"), ("c_b", "n_b", "d_b")):
        p[c] = q[c] - q[n] * lnN0 - q[d] * lnD0
    return p


def _positive_number(what: str, v: Any) -> None:
    """A finite positive number, else :class:`FitInputError` naming ``what``."""
    try:
        ok = not isinstance(v, bool) and math.isfinite(v) and v > 0
    except (TypeError, OverflowError):
        ok = False
    if not ok:
        raise FitInputError(f"{what} must be a positive finite number, got {str(v)[:40]}")
