"""isoFLOP profiles (Hoffmann et al. 2022's approach 2): at each FLOP budget a parabola of loss
in ln N, its minimum that budget's N_opt, and power laws N_opt = N_ref c^a and D_opt = D_ref c^b
(c = C / C_ref, C_ref the power of 10 nearest the budgets' middle) through the minima; the least loss on the frontier of Chinchilla's form,
L_opt = E + L_ref c^-alpha_C.

The runs' budgets come from their ``flops`` column where the table has one (checked against
6 N D), else from C = 6 N D; runs within a tolerance of a budget's smallest are that budget. A
budget whose parabola has no minimum inside its runs is named and left out of the power laws.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from archfit.errors import FitError, FitInputError
from archfit.laws.base import (ComputeLaw, Constraints, Data, Estimate, Figure, derived_name,
                               register)

if TYPE_CHECKING:
    import numpy as np

    from archfit.laws.inference.artifact import Fit

# a run joins a budget when its C is within this fraction of the budget's smallest run: tight
# for a FLOP column (it names the budget a run was planned at), loose for 6 N D (at one budget
# 6 N D moves with the shape's embedding and attention share: 0.74-1.07 of Marin's own count)
TOLERANCE_FLOPS = 0.05
TOLERANCE_6ND = 0.5
# a FLOP column more than this factor from 6 N D on some run counts something else (a unit off)
FLOPS_AGREEMENT = 1.5
MIN_PROFILE_SIZES = 3  # a parabola in ln N needs three sizes
PROFILE_RESAMPLES = 200  # the per-budget bootstrap of a profile's minimum (runs within it)
PROFILE_SEED = 0


def reference_budget(C: Any, start: Any = None) -> float:
    """The budget C_ref the power laws are stated at (N_opt = N_ref (C / C_ref)^a, ...): the
    power of 10 nearest the runs' median budget, so that N_ref is a size within the data; a
    resample keeps its point fit's (``start``, whose last entry it is), so the draws share it."""
    import numpy as np

    if start is not None:
        return float(start[-1])
    return float(10.0 ** round(float(np.median(np.log10(np.asarray(C, float))))))


@dataclass(frozen=True)
class Profile:
    """One budget's isoFLOP profile: loss = c0 + c1 x + c2 x^2 with x = ln N - x_mid."""

    C: float
    n_runs: int
    n_sizes: int
    N_min: float
    N_max: float
    c0: float
    c1: float
    c2: float
    x_mid: float
    N_opt: float | None  # the parabola's minimum (None: it has none)
    D_opt: float | None
    L_min: float | None
    used: bool  # in the power laws
    reason: str = ""  # why not
    N_opt_ci: tuple[float, float] | None = None


def run_budgets(data: Mapping[str, Any]) -> tuple[np.ndarray, str, float]:
    """(each run's budget C, where C comes from, the grouping tolerance): the ``flops`` column
    where present, checked against 6 N D within :data:`FLOPS_AGREEMENT`; else 6 N D."""
    import numpy as np

    six = 6.0 * np.asarray(data["params"], float) * np.asarray(data["tokens"], float)
    if "flops" not in data:
        return six, "C = 6 N D", TOLERANCE_6ND
    C = np.asarray(data["flops"], float)
    if not np.all(np.isfinite(C) & (C > 0)):
        raise FitInputError("column 'flops' has missing or non-positive values; drop those "
                            "rows, or leave the column out to use C = 6 N D")
    ratio = C / six
    bad = np.abs(np.log(ratio)) > math.log(FLOPS_AGREEMENT)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise FitInputError(
            f"column 'flops' disagrees with 6 N D on {int(bad.sum())} run(s) by more than "
            f"{FLOPS_AGREEMENT:g}x (row {i}: {C[i]:.3g} against {six[i]:.3g}, x{ratio[i]:.3g}): "
            "check its unit (FLOPs, not GFLOPs: --map 'flops=COLUMN*1e9') or leave it out")
    return C, f"column flops (checked within {FLOPS_AGREEMENT:g}x of 6 N D)", TOLERANCE_FLOPS


def budget_labels(C: np.ndarray, tol: float) -> np.ndarray:
    """Budget labels (0 = smallest): a run joins the current budget when its C is within
    ``tol`` of the budget's smallest run, and opens a new one otherwise."""
    from archfit.laws.columns import size_classes

    return size_classes(C, None, tol)


def _distinct(lnN: np.ndarray) -> int:
    import numpy as np

    return int(len(np.unique(np.round(lnN / math.log(1.02)))))


def _parabola(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    import numpy as np

    X = np.stack([np.ones_like(x), x, x * x], axis=1)
    return np.linalg.lstsq(X, y, rcond=None)[0]


def _vertex(c: Any, lo: float, hi: float) -> float | None:
    """The parabola's minimum in x, or None when it has none inside [lo, hi]."""
    if c[2] <= 0:
        return None
    x = -c[1] / (2 * c[2])
    return x if lo < x < hi else None


def profiles(data: Mapping[str, Any], strict: bool = True) -> list[Profile]:
    """Each budget's profile. ``strict``: a budget with fewer than 3 sizes is an error (the
    user's table); otherwise (a bootstrap resample) it is left out."""
    import numpy as np

    C, _, tol = run_budgets(data)
    labels = budget_labels(C, tol)
    lnN = np.log(np.asarray(data["params"], float))
    lnD = np.log(np.asarray(data["tokens"], float))
    loss = np.asarray(data["loss"], float)
    rng = np.random.default_rng(PROFILE_SEED)
    out = []
    for k in np.unique(labels):
        m = labels == k
        n_sizes = _distinct(lnN[m])
        Ck = float(np.exp(np.mean(np.log(C[m]))))
        if n_sizes < MIN_PROFILE_SIZES:
            if strict:
                raise FitInputError(
                    f"the budget at {Ck:.3g} FLOPs has {int(m.sum())} run(s) at {n_sizes} "
                    f"size(s): a profile needs {MIN_PROFILE_SIZES} or more; add sizes there, "
                    "or leave its runs out (archfit fit --exclude COLUMN=PATTERN)")
            continue
        x_mid = float(np.mean(lnN[m]))
        x, y = lnN[m] - x_mid, loss[m]
        c = _parabola(x, y)
        xs = _vertex(c, float(x.min()), float(x.max()))
        slope = np.polyfit(x, lnD[m], 1)
        base: dict[str, Any] = dict(
            C=Ck, n_runs=int(m.sum()), n_sizes=n_sizes, N_min=float(np.exp(lnN[m].min())),
            N_max=float(np.exp(lnN[m].max())), c0=float(c[0]), c1=float(c[1]), c2=float(c[2]),
            x_mid=x_mid)
        if xs is None:
            where = ("curves down (no minimum)" if c[2] <= 0 else
                     "has its minimum at or past the end of its runs "
                     f"({math.exp(x_mid - c[1] / (2 * c[2])):.3g} against N "
                     f"{base['N_min']:.3g} to {base['N_max']:.3g})")
            out.append(Profile(**base, N_opt=None, D_opt=None, L_min=None, used=False,
                               reason=f"its profile {where}"))
            continue
        ci = _vertex_ci(x, y, x_mid, rng) if strict else None
        out.append(Profile(**base, N_opt=math.exp(x_mid + xs),
                           D_opt=float(np.exp(np.polyval(slope, xs))),
                           L_min=float(c[0] + c[1] * xs + c[2] * xs * xs), used=True,
                           N_opt_ci=ci))
    return out


def _vertex_ci(x: np.ndarray, y: np.ndarray, x_mid: float, rng: Any
               ) -> tuple[float, float] | None:
    """The 95% percentile interval of a profile's minimum N over resamples of its runs; None
    when fewer than 80% of them have a minimum inside the runs."""

    vals = []
    for _ in range(PROFILE_RESAMPLES):
        i = rng.integers(0, len(x), len(x))
        if _distinct(x[i]) < MIN_PROFILE_SIZES:
            continue
        v = _vertex(_parabola(x[i], y[i]), float(x.min()), float(x.max()))
        if v is not None:
            vals.append(v)
    from archfit.numbers import draw_ends

    ends = draw_ends(vals, 0.95, min_count=int(0.8 * PROFILE_RESAMPLES))
    if ends is None:
        return None
    return float(math.exp(x_mid + ends[0])), float(math.exp(x_mid + ends[1]))


def budgets_line(profs: Sequence[Profile], source: str, tol: float) -> str:
    """The budgets in one line: each one's C, runs and N_opt with its 95% interval."""
    def one(p: Profile) -> str:
        if not p.used:
            return f"{p.C:.3g} ({p.n_runs} runs): left out"
        ci = f" [{p.N_opt_ci[0]:.3g}, {p.N_opt_ci[1]:.3g}]" if p.N_opt_ci else ""
        return f"{p.C:.3g} ({p.n_runs} runs): N_opt {p.N_opt:.3g}{ci}"

    return (f"budgets ({source}; runs within {tol:.0%} of a budget's smallest are one), each "
            "with its profile's minimum (95% over its runs): " + "; ".join(map(one, profs)))


def frontier(lc: np.ndarray, loss: np.ndarray, start: float | None = None
             ) -> tuple[float, float, float]:
    """(E, L_ref, alpha_C) of the least loss L_opt = E + L_ref c^-alpha_C through the budgets'
    minima (c = C / C_ref): the compute-optimal frontier of Chinchilla's form, E + A C^-gamma
    with gamma = alpha beta / (alpha + beta) (Hoffmann et al. 2022's L(N, D) on C = 6 N D).
    E >= 0 and L_ref >= 0 by non-negative least squares at each exponent of a log grid on
    [1e-4, 1.5], the best refined by bounded least squares over all three; with two budgets, E
    is held at 0 (Kaplan et al. 2020's L(C) = (C_c / C)^alpha_C, eq. 1.3): two points cannot
    fix three parameters. ``start``: an exponent to refine from instead of the grid (a
    bootstrap resample, from its point fit's)."""
    import numpy as np
    from scipy.optimize import least_squares, nnls

    if len(lc) < 3:
        c = np.polyfit(lc, np.log(loss), 1)
        E, A, g = 0.0, float(math.exp(c[1])), float(-c[0])
    else:
        def solve(g: float) -> tuple[np.ndarray, float]:
            sol, r = nnls(np.stack([np.ones_like(lc), np.exp(-g * lc)], axis=1), loss)
            return sol, float(r)

        if start is not None and 1e-4 <= start <= 1.5:
            g0 = start
        else:
            grid = np.geomspace(1e-4, 1.5, 200)
            g0 = float(grid[int(np.argmin([solve(g)[1] for g in grid]))])
        (E0, A0) = solve(g0)[0]
        res = least_squares(lambda t: t[0] + t[1] * np.exp(-t[2] * lc) - loss,
                            [E0, max(A0, 1e-12), g0], bounds=([0, 0, 1e-4], [np.inf, np.inf, 1.5]),
                            xtol=1e-12, ftol=1e-12)
        E, A, g = (float(v) for v in res.x)
    if not (A > 0 and g > 0):
        raise FitError("the profiles' least loss does not fall with the budget: isoflop needs "
                       "a loss that falls with compute")
    return float(E), float(A), g


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(intercept, slope) of y on x, and their covariance (None without residual freedom)."""
    import numpy as np

    X = np.stack([np.ones_like(x), x], axis=1)
    coef = np.linalg.lstsq(X, y, rcond=None)[0]
    if len(x) <= 2:
        return coef, None
    r = y - X @ coef
    return coef, float(r @ r) / (len(x) - 2) * np.linalg.inv(X.T @ X)


@register
class IsoFLOP(ComputeLaw):
    name = "isoflop"
    formula = ("per budget C: L = c0 + c1 ln N + c2 (ln N)^2, minimum N_opt(C); with c = C/C_ref: "
               "N_opt = N_ref c^a, D_opt = D_ref c^b, L_opt = E + L_ref c^-alpha_C   "
               "[Hoffmann et al. 2022, approach 2 and eq. 4]")
    description = ("isoFLOP profiles: a parabola in ln N per FLOP budget, power laws through "
                   "their minima.")
    columns = ("loss", "params", "tokens")
    optional_columns = ("flops",)
    param_names = ("N_ref", "a", "D_ref", "b", "E", "L_ref", "alpha_C", "K_ref", "kappa",
                   "C_ref")
    domains = {"N_ref": (0.0, None, True), "D_ref": (0.0, None, True),
               "E": (0.0, None, False), "L_ref": (0.0, None, True), "K_ref": (0.0, None, True)}
    min_points = 6
    min_sizes = 3
    default_targets = (1e21, 1e24)
    constants = ("C_ref",)
    approach = "2: isoFLOP profiles"

    # ------------------------------------------------------------------ fitting
    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        if constraints:
            raise FitError("isoflop takes no --fix, --prior or --tie")
        profs = profiles(data, strict=full)
        used = [p for p in profs if p.used]
        if len(profs) < 2 and full:
            raise FitInputError("isoflop needs runs at 2 or more FLOP budgets, each at 3 or "
                                f"more sizes; these runs are one budget ({profs[0].C:.3g})"
                                if profs else "isoflop found no FLOP budget with 3 sizes")
        if len(used) < 2:
            raise FitError(f"isoflop needs 2 or more budgets whose profile has its minimum "
                           f"inside its runs; {len(used)} of {len(profs)} do"
                           + "".join(f"; {p.C:.3g}: {p.reason}" for p in profs if not p.used))
        c_ref = reference_budget(run_budgets(data)[0], start)
        lc = np.log([p.C / c_ref for p in used])
        (n0, a), (d0, b), (k0, ks) = (
            _ols(lc, np.log(np.asarray(v, float)))[0]
            for v in ([p.N_opt for p in used], [p.D_opt for p in used], [p.c2 for p in used]))
        E, A, gamma = frontier(lc, np.array([p.L_min for p in used]),
                               None if start is None else float(start[6]))
        params = np.array([math.exp(n0), a, math.exp(d0), b, E, A, gamma, math.exp(k0), -ks,
                           c_ref])
        cov = None  # the intervals are the bootstrap's (the regressions share their budgets)
        extra: dict[str, Any] = {}
        if full:
            _, source, tol = run_budgets(data)
            extra = {"budgets": [asdict(p) for p in profs], "budget_source": source,
                     "budgets_from_flops": "flops" in data,
                     "fixed": {"C_ref": c_ref},
                     "budget_tolerance": tol,
                     "budget_span": [min(p.C for p in profs), max(p.C for p in profs)],
                     "notes": [budgets_line(profs, source, tol)] + [
                         f"budget {p.C:.3g} FLOPs left out of the power laws: {p.reason}"
                         for p in profs if not p.used]}
        return Estimate(params, cov, extra)

    def applies(self, frame: Any) -> bool:
        """Runs on 2 or more budgets, each at 3 or more sizes: an isoFLOP sweep."""
        try:
            cols = {c: frame[c].to_numpy().astype(float)
                    for c in ("params", "tokens", "loss", "flops") if c in frame.columns}
            profs = profiles(cols, strict=True)
        except (FitError, FitInputError, KeyError, ValueError):
            return False
        return len(profs) >= 2

    # ------------------------------------------------------------------ the law
    def budget_of(self, data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        if "flops" in data:
            return np.asarray(data["flops"], float)
        return 6.0 * np.asarray(data["params"], float) * np.asarray(data["tokens"], float)

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        """The loss on the profiles' shared form: L_opt(C) + K(C) (ln N - ln N_opt(C))^2, with
        the curvature K = K_ref c^-kappa, at each row's budget C (c = C / C_ref)."""
        import numpy as np

        lnN = np.log(np.asarray(data["params"], float))
        lnc = np.log(self.budget_of(data) / params["C_ref"])
        l_opt = params["E"] + params["L_ref"] * np.exp(-params["alpha_C"] * lnc)
        n_opt = math.log(params["N_ref"]) + params["a"] * lnc
        K = params["K_ref"] * np.exp(-params["kappa"] * lnc)
        return l_opt + K * (lnN - n_opt) ** 2

    def loss_at(self, params: Mapping[str, float], N: float, D: float, **conditions: Any
                ) -> float | None:
        return float(self.predict(params, {"params": [N], "tokens": [D]})[0])

    def compute_optimal(self, params: Mapping[str, float], C: float, **conditions: Any
                        ) -> tuple[float, float]:
        """The power laws through the profiles' minima, at C FLOPs (the fit's FLOP count)."""
        c = float(C) / params["C_ref"]
        return params["N_ref"] * c ** params["a"], params["D_ref"] * c ** params["b"]

    def loss_opt(self, params: Mapping[str, float], C: float) -> float:
        """The least loss at C FLOPs: E + L_ref (C / C_ref)^-alpha_C."""
        return params["E"] + params["L_ref"] * (float(C) / params["C_ref"]) ** -params["alpha_C"]

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        out = super().derived(params, targets, extra)
        for C in targets:
            out[derived_name("L_opt", C)] = self.loss_opt(params, C)
        return out

    def extrapolation(self, params: Mapping[str, float], span: Mapping[str, Any],
                      target: float, conditions: Mapping[str, Any] | None = None
                      ) -> tuple[float, str]:
        top = span.get("budget_max") or span["flops_max"]
        f = target / top
        return f, f"{target:.3g} FLOPs is {f:.3g}x beyond the largest budget ({top:.3g})"

    def span_extra(self, data: Data) -> dict[str, Any]:
        C = self.budget_of(data)
        return {"budget_min": float(C.min()), "budget_max": float(C.max())}

    def reach_refusal(self, extra: Mapping[str, Any], columns: Mapping[str, Any]) -> str | None:
        """Rows whose budget lies outside the profiles' budgets (by the fit's tolerance), or a
        fit on a FLOP column asked without one: refused."""

        span = extra.get("budget_span")
        if not span:
            return None
        if extra.get("budgets_from_flops") and "flops" not in columns:
            return ("this isoflop fit's budgets are the runs' flops column: give the rows a "
                    "flops column (the same FLOP count)")
        C = self.budget_of(columns)
        tol = 1.0 + float(extra.get("budget_tolerance", 0.0))
        out = (C < span[0] / tol) | (C > span[1] * tol)
        if not out.any():
            return None
        return (f"{int(out.sum())} row(s) lie at budgets outside the profiles' "
                f"({span[0]:.3g} to {span[1]:.3g} FLOPs, e.g. {C[out][0]:.3g}): isoflop "
                "predicts loss on its profiles only; beyond them its answer is the power laws' "
                "N_opt, D_opt and L_opt (archfit recommend --compute C)")

    def heldout_split(self, data: Data) -> tuple[np.ndarray, list[float], str]:
        """The largest budget's runs (the costliest region), when 3 or more budgets leave 2 to
        fit."""
        import numpy as np

        C, _, tol = run_budgets(data)
        labels = budget_labels(C, tol)
        if len(np.unique(labels)) < 3:
            return np.zeros(len(C), bool), [], "C"
        mask = labels == labels.max()
        return mask, [float(np.exp(np.mean(np.log(C[mask]))))], "C"


def draw_profiles(fit: Fit, ax: Any, data: Any) -> None:
    """Loss against N at each budget, each profile's parabola and its minimum (95% interval
    over its runs)."""
    import numpy as np

    cmap = __import__("matplotlib").colormaps["viridis"]
    profs = fit.extra.get("budgets") or []
    for i, p in enumerate(profs):
        colour = cmap(i / max(1, len(profs) - 1))
        x = np.linspace(math.log(p["N_min"]), math.log(p["N_max"]), 60) - p["x_mid"]
        ax.plot(np.exp(x + p["x_mid"]), p["c0"] + p["c1"] * x + p["c2"] * x * x,
                color=colour, lw=1.2, ls="-" if p["used"] else ":",
                label=f"{p['C']:.2g} FLOPs" + ("" if p["used"] else " (left out)"))
        if p["N_opt"] is not None:
            lo, hi = p["N_opt_ci"] or (p["N_opt"], p["N_opt"])
            ax.errorbar([p["N_opt"]], [p["L_min"]], xerr=[[p["N_opt"] - lo], [hi - p["N_opt"]]],
                        fmt="D", color=colour, ms=5, capsize=2)
    if data is not None and {"params", "loss"} <= set(data.columns):
        ax.scatter(data["params"].to_numpy(), data["loss"].to_numpy(), s=8, c="k", alpha=0.4,
                   label="runs")
    ax.set_xscale("log")
    ax.set_xlabel(f"parameters N ({fit.conventions.get('params', 'parameters')}, log scale)")
    ax.set_ylabel("loss (nats/token)")
    ax.legend(fontsize=7, ncol=2)


def draw_optima(fit: Fit, ax: Any, data: Any, references: Sequence[Fit] = ()) -> None:
    """N_opt against C on log axes: each budget's minimum with its interval, the power law and
    its 95% band over the fit's draws, and the N_opt(C) of each other compute fit given (the
    other approaches: plot --reference)."""
    import numpy as np

    profs = [p for p in fit.extra.get("budgets") or [] if p["used"]]
    C = np.array([p["C"] for p in profs])
    N = np.array([p["N_opt"] for p in profs])
    lo = np.array([(p["N_opt_ci"] or (p["N_opt"], p["N_opt"]))[0] for p in profs])
    hi = np.array([(p["N_opt_ci"] or (p["N_opt"], p["N_opt"]))[1] for p in profs])
    ax.errorbar(C, N, yerr=[N - lo, hi - N], fmt="o", color="k", capsize=2,
                label="profile minima (95% over runs)")
    grid = np.logspace(math.log10(C.min()) - 0.3, math.log10(C.max()) + 1.0, 60)
    law = fit.law_obj
    ax.plot(grid, [law.compute_optimal(fit.params, c)[0] for c in grid], "C3-",
            label=f"N_opt = N_ref (C/C_ref)^a, a = {fit.params['a']:.3f}")
    draws = fit.draws()
    if len(draws) >= 10:
        vals = np.array([[law.compute_optimal(p, c)[0] for c in grid] for p in draws])
        from archfit.numbers import draw_percentiles

        ax.fill_between(grid, *draw_percentiles(vals, [2.5, 97.5], axis=0), color="C3",
                        alpha=0.2, label="95% (bootstrap over runs)")
    for i, ref in enumerate(references):
        rl = ref.law_obj
        try:
            line = [rl.compute_optimal(ref.params, c)[0] for c in grid]
        except (ArithmeticError, ValueError):
            continue
        ax.plot(grid, line, ls="--", color=f"C{i % 3}",
                label=f"{ref.label} (approach {rl.approach.split(':')[0] or '?'})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"budget C (FLOPs: {fit.extra.get('budget_source', 'C = 6 N D')})")
    ax.set_ylabel("N_opt (log scale)")
    ax.legend(fontsize=8)


IsoFLOP.own_figures = (
    Figure("isoflop_profiles", "isoFLOP profiles: loss against N at each budget", draw_profiles),
    Figure("isoflop_optima", "N_opt against the budget, with the power law", draw_optima,
           references=True))
