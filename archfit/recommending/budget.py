"""The token budget a team writes down, beyond the compute-optimal split of a FLOP budget C:

- **Over-training** (``tokens_per_param``): the same C spent on a smaller model trained on R
  tokens per parameter (N = sqrt(C / 6R), D = R N), and the loss that costs against the
  compute-optimal model of the same C, read from the compute law (Gadre et al. 2024, "Language
  models scale reliably with over-training and on downstream tasks", measure this penalty; here
  it is the fitted or published law's own prediction).
- **Inference** (``inference_tokens``): the size and tokens that reach the loss of the
  compute-optimal model at C for the least training plus inference FLOPs, 6 N D + 2 N T for T
  tokens served (Sardana et al. 2024, "Beyond Chinchilla-Optimal: Accounting for Inference in
  Language Model Scaling Laws"): a smaller model trained on more tokens.

Both read any compute law that predicts the loss at (N, D), in that law's parameter convention
(total parameters for Hoffmann et al. and Epoch); inference FLOPs are 2 N per token, the forward
pass. Each quantity's 95% interval is the percentile interval over the fit's parameter draws,
and says where they come from."""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from scipy.optimize import brentq, minimize_scalar

from archfit.errors import RecommendError
from archfit.laws import ComputeLaw, Fit

INFERENCE_FLOPS = "2 N FLOPs per token served (the forward pass; N in the compute law's convention)"
MAX_DRAWS = 200  # parameter draws behind each interval (the first this many of the fit's)


def _law(fit: Fit) -> Any:
    law = fit.law_obj
    if not isinstance(law, ComputeLaw) or law.loss_at(fit.params, 1e9, 2e10) is None:
        raise RecommendError(f"{fit.label} ({law.name}) does not predict the loss at a size and "
                             "token count; over-training and inference budgets need a compute "
                             "law that does (chinchilla, farseer, data-constrained)")
    return law


def _check(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0):
        raise RecommendError(f"{name} must be a positive number, got {value!r}")
    return float(value)


def overtrained_at(law: Any, p: Mapping[str, float], C: float, R: float) -> dict[str, float]:
    """At one parameter set: the over-trained split of C at R tokens per parameter and its loss
    against the compute-optimal model's."""
    n0, d0 = law.compute_optimal(p, C)
    N = math.sqrt(C / (6.0 * R))
    loss, loss0 = law.loss_at(p, N, R * N), law.loss_at(p, n0, d0)
    return {"N": N, "D": R * N, "loss": loss, "loss_compute_optimal": loss0,
            "penalty": loss / loss0 - 1.0, "N_opt": n0, "D_opt": d0}


def inference_at(law: Any, p: Mapping[str, float], C: float, T: float) -> dict[str, float]:
    """At one parameter set: the (N, D) of least 6 N D + 2 N T whose loss is the compute-optimal
    model's at C (D found for each N by root-finding in ln D; N by a bounded search in ln N
    below N_opt, where a smaller model trained longer is what inference pays for)."""
    n0, d0 = law.compute_optimal(p, C)
    target = law.loss_at(p, n0, d0)

    def tokens_for(N: float) -> float:
        def gap(x: float) -> float:
            return law.loss_at(p, N, math.exp(x)) - target

        lo, hi = math.log(d0), math.log(d0) + 40.0
        if gap(hi) > 0:  # this size never reaches the loss: below the law's floor
            return math.inf
        if gap(lo) <= 0:
            return d0
        root: Any = brentq(gap, lo, hi, xtol=1e-10)
        return math.exp(root)

    def total(x: float) -> float:
        N = math.exp(x)
        D = tokens_for(N)
        return 6.0 * N * D + 2.0 * N * T if math.isfinite(D) else math.inf

    lo, hi = math.log(n0) - 12.0, math.log(n0)
    if not math.isfinite(tokens_for(math.exp(lo))):  # the smallest size that reaches the loss
        a, b = lo, hi
        for _ in range(60):
            mid = 0.5 * (a + b)
            a, b = (a, mid) if math.isfinite(tokens_for(math.exp(mid))) else (mid, b)
        lo = b
    res: Any = minimize_scalar(total, bounds=(lo, hi), method="bounded",
                               options={"xatol": 1e-6})
    N = math.exp(res.x)
    D = tokens_for(N)
    return {"N": N, "D": D, "loss": target, "train_flops": 6.0 * N * D,
            "inference_flops": 2.0 * N * T, "total_flops": 6.0 * N * D + 2.0 * N * T,
            "N_opt": n0, "D_opt": d0, "compute_optimal_train_flops": C,
            "compute_optimal_inference_flops": 2.0 * n0 * T,
            "compute_optimal_total_flops": C + 2.0 * n0 * T}


def _with_intervals(fit: Fit, point: dict[str, float],
                    at: Callable[[Mapping[str, float]], dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = dict(point)
    draws = fit.draws()
    rows = []
    for d in draws[:MAX_DRAWS]:
        try:
            rows.append(at(d))
        except (ValueError, OverflowError, ZeroDivisionError, RuntimeError):
            continue
    prov = draws.provenance
    if len(rows) >= 20 and prov:
        prov = {**prov, "method": f"{prov['method']} (the first {len(rows)} draws)"}
        for k in point:
            out[f"{k}_ci"] = draws.interval([r[k] for r in rows], min_count=20, provenance=prov)
    else:
        out["interval_note"] = ("no interval: the fit carries no parameter draws (fit your own "
                                "runs with --bootstrap to get one)")
    return out


def _planned(fit: Fit, C: float, name: str, value: float,
             at: Callable[[Any, Mapping[str, float], float, float], dict[str, float]]
             ) -> dict[str, Any]:
    """``at`` (one parameter set's plan) at the fit's parameters and over its draws, with the
    budget, the option given and the law's convention."""
    law = _law(fit)
    C, v = _check("compute", C), _check(name, value)
    out = _with_intervals(fit, at(law, fit.params, C, v), lambda p: at(law, p, C, v))
    return {**out, name: v, "C": C, "law": fit.label,
            "convention": fit.conventions.get("params", "as fitted")}


def overtraining(fit: Fit, C: float, tokens_per_param: float) -> dict[str, Any]:
    """Spend ``C`` FLOPs on ``tokens_per_param`` tokens per parameter: the size, tokens and the
    predicted loss against the compute-optimal model of the same C, with 95% intervals over the
    fit's draws."""
    return {**_planned(fit, C, "tokens_per_param", tokens_per_param, overtrained_at),
            "flops": "C = 6 N D (training)"}


def inference_optimal(fit: Fit, C: float, inference_tokens: float) -> dict[str, Any]:
    """The size and tokens that reach the compute-optimal loss at ``C`` for the least training
    plus inference FLOPs over ``inference_tokens`` tokens served (Sardana et al. 2024), with
    both budgets beside the compute-optimal model's and 95% intervals over the fit's draws."""
    return {**_planned(fit, C, "inference_tokens", inference_tokens, inference_at),
            "flops": f"training C = 6 N D; inference {INFERENCE_FLOPS}",
            "method": "Sardana et al. 2024: least training + inference FLOPs at the "
                      "compute-optimal model's loss"}
