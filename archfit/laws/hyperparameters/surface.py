"""``lr-batch-surface``: the loss of any run of a learning-rate x batch grid, from its rate,
batch, size and tokens. A floor L*(N, D) plus a basin in ln lr and ln batch (the shape Step
Law, Li et al. 2025, and DeepSeek-AI 2024 describe: near its floor the loss is a bowl in the
logarithms of both), whose centre follows power laws in N and D and whose widths move with D::

    L = E + (A / N^alpha [+ B / D^beta])^gamma
          + s_lr w_lr(x) x^2 + s_b w_b y^2 + sqrt(s_lr s_b) w_x x y
    x = ln lr - ln lr*(N, D),   lr* = exp(c_lr) N^n_lr [D^d_lr]
    y = ln B  - ln B*(N, D),    B*  = exp(c_b)  N^n_b  [D^d_b]
    w_lr(x) = w_lr_hi above the rate's centre (x > 0), w_lr_lo below
    s_lr = (D / 1e10)^k_lr,  s_b = (D / 1e10)^k_b      [the widths at 1e10 tokens]

The floor nests Chinchilla's (Hoffmann et al. 2022: gamma = 1) and Kaplan et al. 2020's L(N, D)
(eq. 1.5: E = 0, the data's inner exponent 1): on Step Law's dense grid (ScaleBench's training
split, its largest size at its largest token count held out) Chinchilla's floor left every
held-out run 0.01-0.03 nats high (R² 0.48 with constant widths), Kaplan's form with both inner
exponents free reached 0.83, and E fits to 0 there. In the rate the bowl is steeper on the high
side: a rate past the optimum nears the edge where runs diverge, a rate below it only trains
slower (Wortsman et al. 2023's learning-rate sensitivity curves; Step Law's heat maps). A
symmetric bowl fitted to such a basin puts its centre low. The widths move with the tokens: on
the same held-out cell, widths that
shrink with D (k_lr about -0.1, k_b about -0.2: the basin flattens as training lengthens) took
R² from 0.83 to 0.91; widths moving with N as well predicted it worse (0.65 against 0.71 with a
Chinchilla floor), so they move with D alone. Tried and dropped: a basin multiplying the floor
(log L = log L* + basin), 0.71 against the additive basin's 0.71 with drifting widths. The
scores and what was tried are in ``docs/benchmarks/``.

Runs that diverged are not on the surface: a run whose loss ends more than
:data:`DIVERGED_RATIO` times the best loss of its (size, tokens) cell is left out of the fit,
with a note naming how many (:meth:`LRBatchSurface.screen`).

The bracketed terms are fitted where the runs' token counts vary, and held (B, beta, d_lr,
d_b, k_lr and k_b at 0, gamma at 1: the floor E + A / N^alpha) where every run has one token
count, folded into the constant and the centres' coefficients, said in a note. Fitted as the
loss laws are (Huber, δ = 1e-3, on log loss), from starts read off the grid: each (size, tokens)
cell's best run for the centre, the floor's coefficients by projection on those runs (of the
loss for gamma = 1, of its 1/gamma-th power for a Kaplan-like start), the widths from a small bowl
to a wide one; the starts of least cost are solved, with the exact Jacobian
(:meth:`LRBatchSurface.derivatives`), in coordinates centred on the runs' typical size and tokens.
The law answers the best rate and batch at a size and the loss penalty of a rate or batch a
factor off them at a token count: ``s_lr w_lr_hi (ln f)^2`` for a rate f > 1 times the optimum,
``s_lr w_lr_lo (ln f)^2`` below, and ``s_b w_b (ln f)^2`` for a batch."""

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
ALL = ("E", "A", "alpha", "B", "beta", "gamma", "c_lr", "n_lr", "d_lr", "c_b", "n_b", "d_b",
       *WIDTHS, "w_x", "k_lr", "k_b")
# the token count at which the widths are stated (s_lr = s_b = 1 there)
WIDTH_TOKENS = 1e10
# a run ending above this many times its (size, tokens) cell's best loss diverged. Set after
# reading Step Law's dense grid, where no run ends between 1.2x and 1.7x its cell's best (the
# trained runs below, the diverged ones above: any ratio in that gap leaves out the same 181
# runs); in this project's CPU grid, whose diverged runs its status column drops, no run ends
# above 1.3x
DIVERGED_RATIO = 1.5
# of the grid of starts (3 exponents x 3 widths), those solved: the least costly where they
# start. On Step Law's dense grid and this project's CPU grid all nine reach one optimum
STARTS_SOLVED = 4
# held when every run has one token count: at 0, and gamma at 1
TOKEN_TERMS = ("B", "beta", "d_lr", "d_b", "k_lr", "k_b", "gamma")
HELD_AT = {"gamma": 1.0}  # the folded value of a token term, where it is not 0
# the floor's bend and the widths' drifts need this many token counts (through two, a drift is
# a line through two points and the bend trades against E, B and beta: held at 1 and 0 below)
BEND_TOKENS = 3
BEND_TERMS = ("gamma", "k_lr", "k_b")


@register
class LRBatchSurface(HyperparameterLaw):
    name = "lr-batch-surface"
    formula = ("L = E + (A/N^alpha + B/D^beta)^gamma + s_lr w_lr x^2 + s_b w_b y^2 + "
               "sqrt(s_lr s_b) w_x x y, x = ln(lr/lr*), y = ln(B/B*), lr* = e^c_lr N^n_lr "
               "D^d_lr, B* = e^c_b N^n_b D^d_b, w_lr = w_lr_hi above lr* and w_lr_lo below, "
               "s = (D/1e10)^k [a basin in ln lr and ln batch about power-law centres, its "
               "widths moving with the tokens]")
    description = ("The loss of any run of a learning-rate x batch grid: a size-and-tokens "
                   "floor (Chinchilla's at gamma 1, Kaplan's at E 0) plus a basin in ln lr "
                   "(quadratic on each side) and ln batch about a centre that follows power "
                   "laws, its widths moving with the tokens; diverged runs left out; Huber on "
                   "log loss.")
    columns = ("loss", "params", "tokens", "lr", "batch_tokens")
    param_names = ALL
    min_points = 20
    min_sizes = 3
    predicts_loss = True
    folded_without_tokens = TOKEN_TERMS
    domains = {"E": (0.0, None, False), "A": (0.0, None, False),
               "alpha": (0.0, None, True), "B": (0.0, None, False),
               "gamma": (0.0, None, True), **{w: (0.0, None, False) for w in WIDTHS}}
    default_targets = (1e7, 1e9)

    @staticmethod
    def _terms(p: Mapping[str, float], data: Mapping[str, Any]) -> dict[str, Any]:
        """The pieces the prediction and its derivatives share, per run."""
        import numpy as np

        N, D = np.asarray(data["params"], float), np.asarray(data["tokens"], float)
        lnN, lnD = np.log(N), np.log(D)
        x = np.log(np.asarray(data["lr"], float)) - (p["c_lr"] + p["n_lr"] * lnN
                                                     + p["d_lr"] * lnD)
        y = np.log(np.asarray(data["batch_tokens"], float)) - (p["c_b"] + p["n_b"] * lnN
                                                               + p["d_b"] * lnD)
        lnr = np.log(D / WIDTH_TOKENS)
        s_lr, s_b = np.exp(p["k_lr"] * lnr), np.exp(p["k_b"] * lnr)
        s_x = np.sqrt(s_lr * s_b)
        nA = N ** -p["alpha"]
        dB = D ** -p["beta"] if p["B"] else np.zeros_like(D)
        S = p["A"] * nA + p["B"] * dB
        return {"lnN": lnN, "lnD": lnD, "x": x, "y": y, "lnr": lnr, "s_lr": s_lr, "s_b": s_b,
                "s_x": s_x, "nA": nA, "dB": dB, "S": S,
                "w_lr": np.where(x > 0, p["w_lr_hi"], p["w_lr_lo"])}

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        p = params
        with np.errstate(all="ignore"):
            t = self._terms(p, data)
            x, y = t["x"], t["y"]
            return (p["E"] + t["S"] ** p["gamma"] + t["s_lr"] * t["w_lr"] * x * x
                    + t["s_b"] * p["w_b"] * y * y + t["s_x"] * p["w_x"] * x * y)

    def derivatives(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        """d(predicted loss)/d(parameter) per run, a column per name of :data:`ALL` (the
        Jacobian the fit's optimizer steps on: exact, where differences would cost a
        prediction per parameter per step)."""
        import numpy as np

        p = params
        t = self._terms(p, data)
        x, y, lnN, lnD, S = t["x"], t["y"], t["lnN"], t["lnD"], t["S"]
        hi = x > 0
        dx = 2 * t["s_lr"] * t["w_lr"] * x + t["s_x"] * p["w_x"] * y  # dL/dx
        dy = 2 * t["s_b"] * p["w_b"] * y + t["s_x"] * p["w_x"] * x
        g = p["gamma"]
        dS = g * S ** (g - 1.0)  # d(S^gamma)/dS
        half = 0.5 * t["s_x"] * p["w_x"] * x * y * t["lnr"]
        cols = {"E": np.ones_like(S), "A": dS * t["nA"], "alpha": -dS * p["A"] * lnN * t["nA"],
                "B": dS * t["dB"], "beta": -dS * p["B"] * lnD * t["dB"],
                "gamma": S ** g * np.log(S), "c_lr": -dx, "n_lr": -dx * lnN,
                "d_lr": -dx * lnD, "c_b": -dy, "n_b": -dy * lnN, "d_b": -dy * lnD,
                "w_lr_lo": np.where(hi, 0.0, t["s_lr"] * x * x),
                "w_lr_hi": np.where(hi, t["s_lr"] * x * x, 0.0),
                "w_b": t["s_b"] * y * y, "w_x": t["s_x"] * x * y,
                "k_lr": t["lnr"] * t["s_lr"] * t["w_lr"] * x * x + half,
                "k_b": t["lnr"] * t["s_b"] * p["w_b"] * y * y + half}
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
            loss = p["E"] + (p["A"] * N ** -p["alpha"] + (p["B"] * D ** -p["beta"] if p["B"]
                                                          else 0)) ** p["gamma"]
        except OverflowError:
            raise FitError(f"{self.name}: at N = {N:.3g}, D = {D:.3g} the best rate or batch is "
                           "beyond a float: far outside the runs the surface was fitted on"
                           ) from None
        return {"lr": lr, "batch_tokens": b, "loss": loss}

    def penalty(self, params: Mapping[str, float], knob: str, factor: float,
                tokens: float = WIDTH_TOKENS) -> float:
        """The loss added by a rate (``knob`` "lr") or batch ("batch_tokens") ``factor`` off
        its optimum, the other at its own, at ``tokens``: the width on that side there times
        (ln factor)^2."""
        if knob not in ("lr", "batch_tokens"):
            raise FitInputError(f"a surface's penalty is for 'lr' or 'batch_tokens', got {knob!r}")
        _positive_number(f"the {knob} factor", factor)
        _positive_number("the tokens", tokens)
        width = (params["w_b"] if knob != "lr" else
                 params["w_lr_hi"] if factor > 1 else params["w_lr_lo"])
        k = params["k_b"] if knob != "lr" else params["k_lr"]
        return width * (tokens / WIDTH_TOKENS) ** k * math.log(factor) ** 2

    def groups(self, data: Data, by: Sequence[str] | None = None) -> tuple[np.ndarray, str]:
        """Bootstrap units: the (size, tokens) cells, unless ``by`` names others. The centre's
        power laws are fitted across cells and a cell's runs share its quirks, so resampling
        runs makes intervals too narrow: on this project's CPU grid the held-out size's 95%
        prediction intervals covered 86% of its runs with runs resampled and 96% with cells
        (Step Law's grids: 91% and 99% dense, 72% and 90% mixture)."""
        import numpy as np

        from archfit.laws.columns import run_groups

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

        from archfit.laws.columns import require_spread, varies
        from archfit.laws.inference.optimize import Reparam, huber_lsq

        require_spread(self, data, (("params", "sizes"), ("lr", "learning rates"),
                                    ("batch_tokens", "batches")), constraints)
        uses_tokens = bool(varies(data["tokens"]))
        bends = len(np.unique(data["tokens"])) >= BEND_TOKENS
        free = [n for n in ALL if (uses_tokens or n not in TOKEN_TERMS)
                and (bends or n not in BEND_TERMS)]
        cols = [ALL.index(n) for n in free]
        logL = np.log(data["loss"])
        # the optimizer steps in centred coordinates (sizes and tokens over their geometric
        # means, the floor's constant at those means): the same law, without the ridge between
        # E, A and B that otherwise costs it hundreds of steps along one valley
        lnN0, lnD0 = float(np.mean(np.log(data["params"]))), float(np.mean(np.log(data["tokens"])))
        scaled = {**data, "params": np.asarray(data["params"], float) / math.exp(lnN0),
                  "tokens": np.asarray(data["tokens"], float) / math.exp(lnD0)}

        def inner(theta: np.ndarray) -> dict[str, float]:  # the law in the scaled units
            return {**dict.fromkeys(ALL, 0.0), **HELD_AT, **dict(zip(free, theta))}

        def resid(theta: np.ndarray) -> np.ndarray:
            with np.errstate(all="ignore"):
                r = np.log(self.predict(inner(theta), scaled)) - logL
            return np.where(np.isfinite(r), r, 1e3)

        def jac(theta: np.ndarray) -> np.ndarray:
            q = inner(theta)
            with np.errstate(all="ignore"):
                J = self.derivatives(q, scaled) / self.predict(q, scaled)[:, None]
            return np.where(np.isfinite(J), J, 0.0)[:, cols]

        public: list[dict[str, float]] = (
            [{n: float(v) for n, v in zip(ALL, np.asarray(start, float))}]
            if start is not None else self._starts(data, free))
        starts = [np.array([q[n] for n in free])
                  for q in (_centred(p, lnN0, lnD0) for p in public)]
        lo = [0.0 if n in ("E", "A", "B", *WIDTHS) else 0.01 if n in ("alpha", "beta", "gamma")
              else -math.inf for n in free]
        bounds = [(a, 3.0 if n == "gamma" else math.inf) for a, n in zip(lo, free)]
        theta = huber_lsq(resid, starts, Reparam([(n, False) for n in free]), HUBER_DELTA,
                          None, bounds=bounds, jac=jac, keep=STARTS_SOLVED)
        p = _uncentred({**dict.fromkeys(ALL, 0.0), **HELD_AT, **dict(zip(free, theta))},
                       lnN0, lnD0)
        notes = [] if bends else [
            f"the runs have {len(np.unique(data['tokens']))} token count(s), under "
            f"{BEND_TOKENS}: the floor's bend gamma is held at 1 (Chinchilla's floor) and the "
            "widths' drifts k_lr, k_b at 0"] if uses_tokens else [
            "every run has one token count: the token terms (B, beta, d_lr, d_b, and the "
            "widths' k_lr, k_b) are held at 0 and gamma at 1, folded into E and the centres' "
            "coefficients; the law answers at those tokens"]
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
        for alpha, w, g in itertools.product((0.1, 0.3, 0.6), (0.005, 0.02, 0.08),
                                             (1.0, 0.3)):
            # gamma 1: Chinchilla's floor, E A B projected on the best runs' losses; gamma 0.3:
            # Kaplan's (E 0), A and B projected on the losses' 1/gamma-th power
            F = ([np.ones(len(best))] if g == 1.0 else []) + [N[best] ** -alpha] + (
                [D[best] ** -0.3] if uses_tokens else [])
            coef, _ = nnls(np.stack(F, 1), L[best] ** (1.0 / g))
            E, (A, *B) = (coef[0], coef[1:]) if g == 1.0 else (0.0, coef)
            p = {**dict.fromkeys(ALL, 0.0), "E": E, "A": A, "alpha": alpha, "B": sum(B),
                 "beta": 0.3, "gamma": g, "c_lr": c_lr, "n_lr": n_lr, "d_lr": sum(d_lr),
                 "c_b": c_b, "n_b": n_b, "d_b": sum(d_b), **dict.fromkeys(WIDTHS, w)}
            if g == 1.0 or "gamma" in free:  # gamma held at 1: no Kaplan-like start
                out.append(p)
        return out


def _centred(p: Mapping[str, float], lnN0: float, lnD0: float) -> dict[str, float]:
    """The law's parameters with sizes and tokens in units of e^lnN0 and e^lnD0 (the widths'
    token count in those units too): the optimizer's coordinates."""
    q = dict(p)
    q["A"] = p["A"] * math.exp(-p["alpha"] * lnN0)
    q["B"] = p["B"] * math.exp(-p["beta"] * lnD0)
    for c, n, d in (("c_lr", "n_lr", "d_lr"), ("c_b", "n_b", "d_b")):
        q[c] = p[c] + p[n] * lnN0 + p[d] * lnD0
    for w, k in (("w_lr_lo", p["k_lr"]), ("w_lr_hi", p["k_lr"]), ("w_b", p["k_b"]),
                 ("w_x", 0.5 * (p["k_lr"] + p["k_b"]))):
        q[w] = p[w] * math.exp(k * lnD0)
    return q


def _uncentred(q: Mapping[str, float], lnN0: float, lnD0: float) -> dict[str, float]:
    """:func:`_centred`'s inverse."""
    p = dict(q)
    p["A"] = q["A"] * math.exp(q["alpha"] * lnN0)
    p["B"] = q["B"] * math.exp(q["beta"] * lnD0)
    for c, n, d in (("c_lr", "n_lr", "d_lr"), ("c_b", "n_b", "d_b")):
        p[c] = q[c] - q[n] * lnN0 - q[d] * lnD0
    for w, k in (("w_lr_lo", q["k_lr"]), ("w_lr_hi", q["k_lr"]), ("w_b", q["k_b"]),
                 ("w_x", 0.5 * (q["k_lr"] + q["k_b"]))):
        p[w] = q[w] * math.exp(-k * lnD0)
    return p


def _positive_number(what: str, v: Any) -> None:
    """A finite positive number, else :class:`FitInputError` naming ``what``."""
    try:
        ok = not isinstance(v, bool) and math.isfinite(v) and v > 0
    except (TypeError, OverflowError):
        ok = False
    if not ok:
        raise FitInputError(f"{what} must be a positive finite number, got {str(v)[:40]}")
