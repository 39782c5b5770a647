"""A mixture of experts' granularity, chosen within its law's reach and priced in GPU time.

Each candidate granularity G (:data:`archfit.laws.moe.common.GRANULARITIES`, those the MoE law was
fitted on unless one is given) splits the backbone's MLP into experts d_ff / G wide, top-G, as
many as bring the total to its target. Each is priced three ways:

- **loss**: the MoE law's prediction at its active size on its tokens;
- **tokens**: given (``--tokens``), ``--tokens-per-param`` times the active size, or the MoE
  law's own N-D trade-off: the tokens at which the active size is compute-optimal at G
  (:meth:`archfit.laws.moe.granularity.Granularity.optimal_tokens`);
- **GPU time**: the modelled step time on the GPU (:func:`archfit.train.perf.modelled`: its
  matmuls, memory traffic, per-layer and per-step costs) plus the expert all-to-all over the
  layout its training state needs (:func:`archfit.train.perf.training_layout`: whole nodes,
  experts spread over every GPU, the share off the node crossing the network), which grows
  with top-k.

The pick: ``loss`` (the law's own FLOPs-only choice), or ``time`` (the default): every
candidate given the GPU time the loss pick needs for its tokens, training as many tokens as
its own speed allows in it, and the lowest predicted loss wins: the loss per GPU-hour.

The reach of a fit is the span of the runs it was fitted on (``diagnostics.span``: the
granularities, expert counts and top-k it saw, and the expansion rate, total routed experts'
width over the dense MLP's); a choice past it is named in the verdict's reasons and graded as a
size extrapolation is (:data:`archfit.laws.inference.trust.EXTRAPOLATION`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from archfit.errors import RecommendError
from archfit.laws import Fit
from archfit.shapes import Shape

# expert widths are multiples of this (kernels and tensor parallelism like round widths)
EXPERT_MULTIPLE = 64
DEFAULT_GPU = "h100"
DEFAULT_BATCH_TOKENS = 1 << 19  # tokens per GPU and optimizer step (as the dense objectives)


@dataclass
class Priced:
    """One candidate: its granularity and shape, its tokens (and their rule), the law's loss
    there, and its modelled speed, GPU-hours and layout."""

    granularity: float
    shape: Shape
    tokens: float
    loss: float
    tokens_per_s: float
    gpu_hours: float
    all_to_all_share: float
    layout: dict[str, Any]

    def row(self) -> dict[str, Any]:
        s = self.shape
        return {"granularity": self.granularity, "n_experts": s.n_experts, "top_k": s.top_k,
                "d_expert": s.d_expert, "params_active_non_embedding":
                    s.params_active_non_embedding, "tokens": self.tokens, "loss": self.loss,
                "tokens_per_s_per_gpu": self.tokens_per_s, "gpu_hours": self.gpu_hours,
                "all_to_all_share": self.all_to_all_share, "gpus": self.layout["gpus"],
                "expert_parallel": self.layout["expert_parallel"]}


def reach(fit: Fit) -> dict[str, Any]:
    """The ranges of granularity, expert count and top-k (and the expansion rate) a MoE fit's
    runs covered: its span (a user's fit records it; a published one carries what its paper
    states)."""
    span = (fit.diagnostics or {}).get("span") or {}
    out = {k: (span[f"{k}_min"], span[f"{k}_max"]) for k in ("granularity", "n_experts",
                                                             "top_k")
           if span.get(f"{k}_min") is not None and span.get(f"{k}_max") is not None}
    if span.get("expansion"):
        out["expansion"] = (span["expansion"], span["expansion"])
    return out


def expansion(shape: Shape) -> float:
    """The routed experts' total width over the dense MLP's (Krajewski et al.'s expansion
    rate: 64 for them)."""
    return shape.n_experts * (shape.d_expert or 0) / (shape.d_ff or 1)


def past_reach(fit: Fit, shape: Shape) -> list[tuple[float, str]]:
    """(how many times past, why) for each of the shape's granularity, expert count, top-k and
    expansion that lies outside the fit's reach; empty within it."""
    r = reach(fit)
    values = {"granularity": shape.granularity or 1.0, "n_experts": shape.n_experts,
              "top_k": shape.top_k, "expansion": expansion(shape)}
    out = []
    for key, (lo, hi) in r.items():
        v = float(values[key])
        f = v / hi if v > hi else (lo / v if v < lo else 1.0)
        if f > 1.0 + 1e-9:
            span = f"{lo:g}" if lo == hi else f"{lo:g} to {hi:g}"
            out.append((f, f"{key.replace('_', '-')} {v:.3g} is {f:.3g}x past {fit.label}'s "
                           f"reach ({span}, what its runs covered)"))
    return out


def candidate_granularities(fit: Fit, base: Shape, given: float | None, top_k: int | None
                            ) -> list[float]:
    """The granularities to weigh: the one given (``--granularity``, or ``--top-k``: top-k
    experts of d_ff / top-k), else every one the law considers that its fit's runs covered and
    whose experts stay at least :data:`EXPERT_MULTIPLE` wide."""
    from archfit.laws.moe.common import GRANULARITIES

    if given is not None:
        finest = int(base.d_ff or 0) // EXPERT_MULTIPLE
        if given > finest:
            raise RecommendError(f"--granularity {given:g} would make experts under "
                                 f"{EXPERT_MULTIPLE} wide (the backbone's d_ff {base.d_ff:,} "
                                 f"over it); give at most {finest}")
        return [float(given)]
    if top_k is not None:
        return [float(top_k)]
    lo, hi = reach(fit).get("granularity", (min(GRANULARITIES), max(GRANULARITIES)))
    out = [float(g) for g in GRANULARITIES
           if lo <= g <= hi and (base.d_ff or 0) / g >= EXPERT_MULTIPLE]
    return out or [1.0]


def tokens_for(fit: Fit, shape: Shape, given: float | None, per_param: float | None
               ) -> tuple[float, str]:
    """The tokens a candidate trains on, and the rule: given, per active parameter, or the MoE
    law's own N-D trade-off at the candidate's active size and granularity."""
    N = float(shape.params_active_non_embedding)
    if given is not None:
        return float(given), "as given (--tokens)"
    if per_param is not None:
        return per_param * N, (f"--tokens-per-param {per_param:g} times the active "
                               "non-embedding parameters")
    G = shape.granularity or 1.0
    law: Any = fit.law_obj
    return (law.optimal_tokens(fit.params, N, G),
            f"{fit.label}'s own N-D trade-off: the tokens at which the active size is "
            "compute-optimal at its granularity (C = 6 N D)")


def tokens_reach(fit: Fit, law_tokens: float, N: float) -> str | None:
    """Why the MoE law's own N-D trade-off (``law_tokens`` at ``N`` active parameters) is
    outside its reach, or None inside it: its tokens per active parameter must lie within the
    D / N its runs covered (a fit records that range; a law that records none has no reach in
    D / N to stand on)."""
    span = (fit.diagnostics or {}).get("span") or {}
    lo, hi = span.get("tokens_per_param_min"), span.get("tokens_per_param_max")
    ratio = law_tokens / N
    if lo is None or hi is None:
        return (f"{fit.label} records no range of tokens per parameter its runs covered, so "
                "its own trade-off cannot be checked against its evidence")
    if not lo * (1 - 1e-9) <= ratio <= hi * (1 + 1e-9):
        return (f"{fit.label}'s own trade-off gives {ratio:.3g} tokens per active parameter, "
                f"outside the {lo:.3g} to {hi:.3g} its runs covered")
    return None


def speed(shape: Shape, gpu: str, batch_tokens: float) -> tuple[float, float, dict[str, Any]]:
    """(tokens/s per GPU, the all-to-all's share of a step, the layout) of training ``shape``
    on ``gpu`` at ``batch_tokens`` per GPU and step (modelled)."""
    from archfit.train.perf import expert_all_to_all, modelled, training_layout

    layout = training_layout(shape, gpu)
    step = modelled(gpu).step_time(shape, batch_tokens)
    a2a = expert_all_to_all(shape, batch_tokens, gpu, layout["expert_parallel"] or 1)
    comm = (a2a or {}).get("s_per_step") or 0.0
    return batch_tokens / (step + comm), comm / (step + comm), layout


def price(fit: Fit, shapes: dict[float, Shape], tokens: dict[float, float], gpu: str,
          batch_tokens: float) -> list[Priced]:
    """Each candidate's loss on its tokens, speed and GPU-hours (tokens / tokens per second per
    GPU, over every GPU of its layout)."""
    law: Any = fit.law_obj
    out = []
    for G, s in shapes.items():
        tps, share, layout = speed(s, gpu, batch_tokens)
        D = tokens[G]
        out.append(Priced(G, s, D, law.loss(fit.params, s.params_active_non_embedding, D, G),
                          tps, D / tps / 3600.0, share, layout))
    return out


def choose(fit: Fit, priced: list[Priced], objective: str, fixed_tokens: bool = False
           ) -> tuple[Priced, Priced, str]:
    """The pick, the law's FLOPs pick (the lowest predicted loss on each candidate's tokens,
    FLOPs alone) and the rule. ``loss``: the FLOPs pick. ``time``: every candidate given the
    GPU time the FLOPs pick needs, training what its own speed allows in it; the lowest
    predicted loss then wins. With ``fixed_tokens`` (a token budget given), as a dense
    ``--objective time`` with ``--tokens`` does: the target is the loss the FLOPs pick reaches
    on those tokens, each candidate trains the tokens it needs to reach it, and the fewest
    GPU-hours win."""
    law: Any = fit.law_obj
    by_loss = min(priced, key=lambda p: p.loss)
    if objective == "loss" or len(priced) == 1:
        return by_loss, by_loss, ("the MoE law's lowest predicted loss on each candidate's "
                                  "tokens (FLOPs alone, router FLOPs aside)")
    if fixed_tokens:
        target = by_loss.loss
        for p in priced:
            p.tokens = law.tokens_to_reach(fit.params, p.shape.params_active_non_embedding,
                                           p.granularity, target)
            p.loss, p.gpu_hours = target, p.tokens / p.tokens_per_s / 3600.0
        best = min(priced, key=lambda p: p.gpu_hours)
        return best, by_loss, (f"the fewest GPU-hours to the loss granularity "
                               f"{by_loss.granularity:g}, the law's FLOPs pick, reaches on the "
                               f"tokens given ({target:.4g})")
    budget_s = by_loss.tokens / by_loss.tokens_per_s  # GPU-seconds the loss pick needs
    for p in priced:
        p.tokens = budget_s * p.tokens_per_s
        p.loss = law.loss(fit.params, p.shape.params_active_non_embedding, p.tokens,
                          p.granularity)
        p.gpu_hours = budget_s / 3600.0
    best = min(priced, key=lambda p: p.loss)
    return best, by_loss, (f"the lowest predicted loss in the same GPU time ({by_loss.gpu_hours:.3g} "
                  f"GPU-hours, what granularity {by_loss.granularity:g}, the law's FLOPs pick, "
                  "needs for its tokens): loss per GPU-hour")


def pick_intervals(fit: Fit, pick: Priced, flops_pick: Priced, law_tokens: bool,
                   level: float = 0.95) -> dict[str, Any]:
    """``level`` intervals for the pick from the fit's parameter draws: ``loss`` (a new run's
    prediction interval, the runs' scatter included: :meth:`Fit.band`) and, when its tokens
    come from the law's N-D trade-off (``law_tokens``), ``tokens``: the FLOPs pick's optimal
    tokens over the draws, scaled as the pick's tokens are (by its speed over the FLOPs
    pick's). Each is None for a fit without draws (a published law that states none)."""
    import numpy as np

    from archfit.interval import Interval

    out: dict[str, Any] = {"loss": None, "tokens": None}
    draws, law = fit.draws(), fit.law_obj
    if draws or (fit.diagnostics or {}).get("scatter"):
        cols = {"params_active": np.array([float(pick.shape.params_active_non_embedding)]),
                "tokens": np.array([pick.tokens]), "granularity": np.array([pick.granularity])}
        _, lo, hi = fit.band(cols, level)
        out["loss"] = Interval.of((lo[0], hi[0]), fit.band_provenance(), level,
                                  "prediction interval")
    if law_tokens and draws:
        N = float(flops_pick.shape.params_active_non_embedding)
        ds = [d for d in (law.optimal_tokens(p, N, flops_pick.granularity)  # type: ignore[attr-defined]
                          for p in draws) if np.isfinite(d) and d > 0]
        if (ends := draws.ends(ds, level)) is not None:
            scale = pick.tokens / flops_pick.tokens
            out["tokens"] = Interval.of((ends[0] * scale, ends[1] * scale), draws.provenance,
                                        level)
    return out


def edge_note(fit: Fit, pick: Priced, searched: list[float]) -> str | None:
    """Where the pick sits at the edge of the granularities weighed, what lies past it."""
    if len(searched) < 2 or pick.granularity not in (searched[0], searched[-1]):
        return None
    side = "finest" if pick.granularity == searched[-1] else "coarsest"
    return (f"the pick is the {side} granularity weighed ({pick.granularity:g}; the range "
            f"{searched[0]:g} to {searched[-1]:g} is what {fit.label}'s runs covered): past it "
            "the law extrapolates")


def reach_trust(fit: Fit, shape: Shape) -> tuple[str, list[str]]:
    """The verdict a choice past the reach earns (graded as a size extrapolation) and its
    reasons."""
    from archfit.laws.inference.trust import EXTRAPOLATION

    worst, reasons = "informative", []
    for f, why in past_reach(fit, shape):
        reasons.append(why)
        level = ("uninformative" if f > EXTRAPOLATION[1] else
                 "weak" if f > EXTRAPOLATION[0] else "informative")
        worst = max(worst, level, key=("informative", "weak", "uninformative").index)
    return worst, reasons
