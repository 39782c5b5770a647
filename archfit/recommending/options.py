"""What a recommendation is built from, once its request is read: the options of one plan
(:class:`Options`: the shape's fixed fields and the width constraints), the fits by role (a
shape law, a compute law for a FLOP budget, an ff-ratio fit) and the size to build
(:class:`Size`: Kaplan's N for a shape law; for a FLOP budget, the compute law's N_opt in that
fit's own convention)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Callable, NamedTuple, Sequence

from archfit.errors import FitInputError, RecommendError
from archfit.interval import Interval
from archfit.laws import Fit, load_fit
from archfit.laws.base import AUTO, ComputeLaw, FFRatioLaw
from archfit.laws.published import DEFAULT_COMPUTE_LAW, DEFAULT_DATA_LAW
from archfit.recommending.fits import Fits
from archfit.shapes import ARCH_FIELDS


class Options(NamedTuple):
    """One plan's options: the shape's fixed fields (``base``: Shape fields other than depth,
    width, heads, d_ff) and the width constraints (``step``: the width step, a multiple of
    head_dim and of tp heads; ``ff_multiple``: d_ff is a multiple of this)."""

    base: dict[str, Any]
    head_dim: int
    multiple_of: int
    step: int
    n_kv_head: int | None
    tp: int | None
    top: int
    ff_multiple: int


class Size(NamedTuple):
    """The size to build: its ``value`` and ``convention``; ``total``: size params_total (not
    the non-embedding count); ``compute``: the compute law's split, for a FLOP budget."""

    value: float
    convention: str
    total: bool
    compute: dict[str, Any] | None


@dataclass(frozen=True)
class Plan:
    """One way to build the request, resolved: what every plan shares (the block's fields, the
    vocabulary and context: given, else the runs', else the family's; the candidates to keep;
    the d_ff multiple) and what plans try in turn (the head split and the width step)."""

    block: Mapping[str, Any]
    vocab_size: int
    n_ctx: int
    top: int
    ff_multiple: int | None = None
    head_dim: int = 128
    multiple_of: int = 128
    tp: int | None = None
    n_kv_head: int | None = None

    def heads(self, head_dim: int, multiple_of: int, tp: int | None, n_kv_head: int | None
              ) -> Plan:
        """This plan with another head split and width step."""
        return replace(self, head_dim=head_dim, multiple_of=multiple_of, tp=tp,
                       n_kv_head=n_kv_head)


def options_for(plan: Plan) -> Options:
    """The options of one plan; a value none of its sources makes sane (a vocabulary read
    from a fit, say) is refused in one line."""
    for name in ("head_dim", "multiple_of", "vocab_size", "n_ctx", "top"):
        v = getattr(plan, name)
        if not (isinstance(v, int) and v > 0):
            raise RecommendError(f"{name} must be a positive whole number, got {v!r}")
    head_dim, multiple_of, tp = plan.head_dim, plan.multiple_of, plan.tp
    if multiple_of % head_dim and head_dim % multiple_of:
        raise RecommendError(f"head_dim {head_dim} does not divide the width multiple "
                             f"{multiple_of} (nor the reverse); e.g. use --multiple-of "
                             f"{math.lcm(head_dim, multiple_of)} or --head-dim "
                             f"{math.gcd(head_dim, multiple_of)}")
    step = math.lcm(multiple_of, head_dim)
    if tp:
        step = math.lcm(step, head_dim * tp)
    fields = {**plan.block, "vocab_size": plan.vocab_size, "n_ctx": plan.n_ctx}
    base = {k: fields[k] for k in ARCH_FIELDS if k in fields}
    return Options(base, head_dim, multiple_of, step, plan.n_kv_head, tp, plan.top,
                   plan.ff_multiple or multiple_of)


def given_fits(fit: Any) -> list[Any]:
    """The fits given, one or several; ``"auto"`` stands for the published law of each role
    (recommend reads fits, not runs: ``archfit fit RUNS --law auto`` chooses among laws)."""
    if fit is None:
        return []
    if isinstance(fit, (str, os.PathLike, Fit, Mapping)):
        return [fit]
    if not isinstance(fit, Sequence):
        raise FitInputError(f"fit: a Fit, a published name, a fit file, a fit's mapping or a "
                            f"list of them, not {type(fit).__name__}")
    given = list(fit)
    return [f for f in given if not (isinstance(f, str) and f == AUTO)]


def resolve_target(t: Any, fits: Fits) -> Size:
    """The size to build for a request's :class:`~archfit.recommending.request.Target`: its
    ``params`` (the shape law's convention), or the compute law's N_opt for its ``compute``
    FLOPs (on ``unique_tokens`` unique tokens, when given: the data-constrained law's split, by
    default Muennighoff et al. 2023's). With ``inference_tokens`` or ``tokens_per_param`` the
    budget is split otherwise (:mod:`archfit.recommending.budget`), and the compute-optimal
    split is kept beside it."""
    from archfit.numbers import check_params_domain

    params, compute, unique_tokens = t.params, t.compute, t.unique_tokens
    inference_tokens, tokens_per_param = t.inference_tokens, t.tokens_per_param
    planned = inference_tokens is not None or tokens_per_param is not None
    if compute is None:
        check_params_domain(float(params))
        return Size(float(params), fits.shape.law_obj.target_convention, False, None)
    cf = fits.setdefault(ComputeLaw, lambda: load_fit(
        DEFAULT_DATA_LAW if unique_tokens is not None else DEFAULT_COMPUTE_LAW))
    cond = {"unique_tokens": unique_tokens} if unique_tokens is not None else {}
    if cond and "unique_tokens" not in cf.law_obj.conditions:
        raise RecommendError(f"{cf.label} ({cf.law}) has no term for repeated data, so it "
                             "cannot use --unique-tokens; give a data-constrained fit "
                             f"('archfit fit ... --law data-constrained', or {DEFAULT_DATA_LAW})")
    n_opt, d_opt = cf.law_obj.compute_optimal(cf.params, compute, **cond)
    check_params_domain(float(n_opt), f"N_opt at {compute:.3g} FLOPs")
    info: dict[str, Any] = {"C": compute, "N_opt": float(n_opt), "D_opt": float(d_opt),
                            "law": cf.label,
                            "convention": cf.conventions.get("params", "as fitted"),
                            "tokens_per_param": float(d_opt) / float(n_opt)}
    opt = cf.optimum(compute, conditions=cond)  # 95% intervals over the fit's draws
    prov = cf.interval_provenance()
    for k in ("N_opt", "D_opt", "tokens_per_param"):
        info[f"{k}_ci"] = Interval.of(opt[f"{k}_ci"], prov)
    info.update(cf.law_obj.condition_report(cf.params, float(d_opt), float(n_opt), **cond))
    if planned:
        from archfit.recommending.budget import inference_optimal, overtraining

        plan = (inference_optimal(cf, compute, inference_tokens) if inference_tokens is not None
                else overtraining(cf, compute, tokens_per_param))  # type: ignore[arg-type]
        check_params_domain(float(plan["N"]), f"the planned size at {compute:.3g} FLOPs")
        info["plan"] = {**plan, "kind": "inference" if inference_tokens is not None
                        else "overtraining"}
        what = ("least training + inference FLOPs" if inference_tokens is not None
                else f"{tokens_per_param:g} tokens per parameter")
        return Size(float(plan["N"]), f"N for {what} ({info['law']}): {info['convention']}",
                    "total" in info["convention"], info)
    return Size(float(n_opt), f"N_opt of {info['law']}: {info['convention']}",
                "total" in info["convention"], info)


def _ff(ff_ratio: float | str, fits: Fits, N: float, notes: list[str]) -> float:
    if ff_ratio == "auto":
        ff_fit = fits.require(FFRatioLaw, "--ff-ratio auto needs an ff-ratio fit: pass one "
                              "with --fit (made by 'archfit fit ... --law ff-ratio')")
        ff = ff_fit.law_obj.ff_ratio(ff_fit.params, N)
        notes.append(f"ff ratio {ff:.3g} from the ff-ratio fit at this size")
        return ff
    try:
        ff = float(ff_ratio)
    except ValueError:
        raise RecommendError(f"ff_ratio must be a number or 'auto', got {ff_ratio!r}") from None
    if not ff > 0:
        raise RecommendError(f"ff_ratio must be positive, got {ff_ratio}")
    return ff


def ff_rule(ff_ratio: float | str, d_ff_rule: Callable[[int], int] | None,
             fits: Fits, *, N: float, opts: Options, notes: list[str]
             ) -> tuple[float, Callable[[int], int] | None]:
    """The ff ratio and the d_ff rule: a framework's, Llama's exactly, or none."""
    if d_ff_rule is None and ff_ratio == "llama":  # Llama's d_ff rule (archfit.formats owns it)
        from archfit.formats import llama_ffn_hidden

        ff_multiple = opts.ff_multiple
        return 8 / 3, lambda d: llama_ffn_hidden(d, ff_multiple)
    return _ff(ff_ratio, fits, N, notes), d_ff_rule
