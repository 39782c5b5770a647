"""What a recommendation is asked for: the checked options (:class:`Options`), the fits by role
(a shape law, a compute law for a FLOP budget, an ff-ratio fit) and the size to build
(:class:`Target`: Kaplan's N for a shape law; for a FLOP budget, the compute law's N_opt in that
fit's own convention)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Callable, NamedTuple, Sequence

from archfit.errors import FitInputError, RecommendError
from archfit.interval import Interval
from archfit.laws import Fit, load_fit
from archfit.laws.base import AUTO
from archfit.laws.published import DEFAULT_COMPUTE_LAW, DEFAULT_DATA_LAW, DEFAULT_SHAPE_LAW
from archfit.shapes import ARCH_FIELDS


class Options(NamedTuple):
    """Validated options: the shape's fixed fields (``base``: Shape fields other than depth,
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


class Target(NamedTuple):
    """The size to build: its ``value`` and ``convention``; ``total``: size params_total (not
    the non-embedding count); ``compute``: the compute law's split, for a FLOP budget."""

    value: float
    convention: str
    total: bool
    compute: dict[str, Any] | None


def _lcm(a: int, b: int) -> int:
    return a * b // math.gcd(a, b)


def check_options(params: float | None, compute: float | None, kw: dict[str, Any]) -> Options:
    if (params is None) == (compute is None):
        raise RecommendError("give exactly one of params (a size) or compute (a FLOP budget)")
    for name, v in (("params", params), ("compute", compute)):
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise RecommendError(f"{name} must be a positive number, got {v!r}")
    for name in ("head_dim", "multiple_of", "vocab_size", "n_ctx", "top"):
        v = kw[name]
        if not (isinstance(v, int) and v > 0):
            raise RecommendError(f"{name} must be a positive whole number, got {v!r}")
    head_dim, multiple_of, tp = kw["head_dim"], kw["multiple_of"], kw["tp"]
    if multiple_of % head_dim and head_dim % multiple_of:
        raise RecommendError(f"head_dim {head_dim} does not divide the width multiple "
                             f"{multiple_of} (nor the reverse); e.g. use --multiple-of "
                             f"{_lcm(head_dim, multiple_of)} or --head-dim "
                             f"{math.gcd(head_dim, multiple_of)}")
    for name in ("tp", "n_kv_head"):
        if kw[name] is not None and kw[name] <= 0:
            raise RecommendError(f"{name} must be a positive whole number, got {kw[name]}")
    kv = kw["n_kv_head"]
    if tp and kv and kv % tp and tp % kv:
        raise RecommendError(
            f"{kv} KV heads cannot be split over tensor parallelism {tp}: each rank needs whole "
            f"KV heads (KV heads a multiple of tp) or a replicated share (tp a multiple of KV "
            f"heads); use --kv-heads {_lcm(kv, tp)} or a --tp that {kv} divides or divides")
    step = _lcm(multiple_of, head_dim)
    if tp:
        step = _lcm(step, head_dim * tp)
    base = {k: kw[k] for k in ARCH_FIELDS if k in kw}
    ff_multiple = kw["ff_multiple"] or multiple_of
    if not (isinstance(ff_multiple, int) and ff_multiple > 0):
        raise RecommendError(f"ff_multiple must be a positive whole number, got {ff_multiple!r}")
    return Options(base, head_dim, multiple_of, step, kw["n_kv_head"], tp, kw["top"],
                    ff_multiple)


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


def fits_by_role(fit: Fit | str | Sequence[Fit | str] | None) -> dict[str, Fit]:
    by_role: dict[str, Fit] = {}
    for f in map(load_fit, given_fits(fit)):
        role = f.law_obj.role
        if role not in ("shape", "compute", "ff", "hparam"):
            raise RecommendError(
                f"a {f.law!r} fit ({f.name or 'file'}) says nothing about depth or width; "
                "give a shape-law fit (levine, depth-width), a compute-law fit (chinchilla; "
                "--compute), an ff-ratio fit (--ff-ratio auto) or a learning-rate fit "
                "(lr-batch, for the recipe)")
        by_role[role] = f
    by_role.setdefault("shape", load_fit(DEFAULT_SHAPE_LAW))
    return by_role


def resolve_target(params: float | None, compute: float | None, fits: dict[str, Fit],
                   unique_tokens: float | None = None, inference_tokens: float | None = None,
                   tokens_per_param: float | None = None) -> Target:
    """The size to build: ``params`` (the shape law's convention), or the compute law's N_opt
    for ``compute`` FLOPs (on ``unique_tokens`` unique tokens, when given: the data-constrained
    law's split, by default Muennighoff et al. 2023's). With ``inference_tokens`` or
    ``tokens_per_param`` the budget is split otherwise (:mod:`archfit.recommending.budget`),
    and the compute-optimal split is kept beside it."""
    from archfit.numbers import check_params_domain

    planned = [n for n, v in (("--inference-tokens", inference_tokens),
                              ("--tokens-per-param", tokens_per_param)) if v is not None]
    if planned and (compute is None or unique_tokens is not None or len(planned) > 1):
        raise RecommendError(f"{' and '.join(planned)}: give one of them, with --compute C (a "
                             "FLOP budget) and without --unique-tokens")

    if unique_tokens is not None:
        if compute is None:
            raise RecommendError("--unique-tokens splits a FLOP budget between size and epochs: "
                                 "give --compute C with it")
        if not (isinstance(unique_tokens, (int, float)) and math.isfinite(unique_tokens)
                and unique_tokens > 0):
            raise RecommendError(f"unique_tokens must be a positive number, got {unique_tokens!r}")
    if compute is None:
        check_params_domain(float(params))  # type: ignore[arg-type]
        return Target(float(params), fits["shape"].law_obj.target_convention,  # type: ignore[arg-type]
                      False, None)
    cf = fits.setdefault("compute", load_fit(DEFAULT_DATA_LAW if unique_tokens is not None
                                             else DEFAULT_COMPUTE_LAW))
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
    info.update(cf.law_obj.condition_report(cf.params, float(d_opt), **cond))
    if planned:
        from archfit.recommending.budget import inference_optimal, overtraining

        plan = (inference_optimal(cf, compute, inference_tokens) if inference_tokens is not None
                else overtraining(cf, compute, tokens_per_param))  # type: ignore[arg-type]
        check_params_domain(float(plan["N"]), f"the planned size at {compute:.3g} FLOPs")
        info["plan"] = {**plan, "kind": "inference" if inference_tokens is not None
                        else "overtraining"}
        what = ("least training + inference FLOPs" if inference_tokens is not None
                else f"{tokens_per_param:g} tokens per parameter")
        return Target(float(plan["N"]), f"N for {what} ({info['law']}): {info['convention']}",
                      "total" in info["convention"], info)
    return Target(float(n_opt), f"N_opt of {info['law']}: {info['convention']}",
                  "total" in info["convention"], info)


def _ff(ff_ratio: float | str, fits: dict[str, Fit], N: float, notes: list[str]) -> float:
    if ff_ratio == "auto":
        if "ff" not in fits:
            raise RecommendError("--ff-ratio auto needs an ff-ratio fit: pass one with --fit "
                                 "(made by 'archfit fit ... --law ff-ratio')")
        ff = fits["ff"].law_obj.ff_ratio(fits["ff"].params, N)
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
             fits: dict[str, Fit], N: float, opts: Options, notes: list[str]
             ) -> tuple[float, Callable[[int], int] | None]:
    """The ff ratio and the d_ff rule: a framework's, Llama's exactly, or none."""
    if d_ff_rule is None and ff_ratio == "llama":  # Llama's d_ff rule (archfit.formats owns it)
        from archfit.formats import llama_ffn_hidden

        ff_multiple = opts.ff_multiple
        return 8 / 3, lambda d: llama_ffn_hidden(d, ff_multiple)
    return _ff(ff_ratio, fits, N, notes), d_ff_rule
