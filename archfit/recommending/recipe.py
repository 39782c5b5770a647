"""The recipe beside a recommended shape: the peak learning rate, the batch size in tokens, the
training tokens, the warmup and the decay, each with its range and its provenance (which law;
published, fitted, given or assumed). The published hyperparameter laws are
:mod:`archfit.train.hyperparameters`'s; a learning-rate law fitted to the user's own sweep (``archfit fit
SWEEP --law lr-batch``, passed with ``--fit``) sets the rate instead. Plain ``math`` on the
published path."""

from __future__ import annotations

import math
from typing import Any

from archfit.errors import RecommendError
from archfit.laws import Fit, HyperparameterLaw, load_fit
from archfit.interval import Interval
from archfit.laws.published import DEFAULT_COMPUTE_LAW, PUBLISHED
from archfit.laws.inference.trust import EXTRAPOLATION
from archfit.recommending.fits import Fits
from archfit.shapes import Shape
from archfit.train.config import MAX_LR, MIN_LR
from archfit.train.hyperparameters import RecipeError, recipe as published_recipe

# the published floors of the decay, as a fraction of the peak: a tenth (Hoffmann et al. 2022),
# or zero (Bergsma et al. 2025, "Straight to Zero: Why Linearly Decaying the Learning Rate to
# Zero Works Best for LLMs", arXiv 2502.15938). Two choices, not an interval
DECAY_EACH = {"hoffmann2022": 0.1, "bergsma2025": 0.0}


def recipe_for(shape: Shape, fits: Fits, tokens: float | None = None,
               compute: dict[str, Any] | None = None, asked: float | None = None
               ) -> dict[str, Any]:
    """The recipe at the size asked (``asked``, non-embedding; default the shape's), trained on
    ``tokens`` (given), on the compute law's D_opt (``compute``, a FLOP-budget target), or on
    the compute-optimal tokens for that size (the published Chinchilla-form laws: each value
    beside the pick); the shape's own size is recorded beside it (``shape_params``). A mixture
    of experts is read at its active size (the published laws were fitted on dense models: that
    they carry over at the active count is archfit's assumption, which a sparse recommendation's
    notes say)."""
    N_shape = float(shape.params_active_non_embedding)
    N = float(asked) if asked else N_shape
    if tokens is not None:
        if isinstance(tokens, bool) or not isinstance(tokens, (int, float)) or not (
                math.isfinite(tokens) and tokens > 0):
            raise RecommendError(f"--tokens must be a positive token count, got {tokens!r}")
        toks = {"value": float(tokens), "interval": None, "provenance": "given"}
    elif compute is not None and compute.get("plan"):
        plan = compute["plan"]
        toks = {"value": plan["D"], "interval": _with_width(plan.get("D_ci")),
                "law": compute["law"],
                "provenance": _kind(compute["law"]),
                "source": (f"D of {compute['law']}'s "
                           + ("inference-optimal split" if plan["kind"] == "inference" else
                              f"{plan['tokens_per_param']:g} tokens per parameter")
                           + f" at {compute['C']:.3g} FLOPs")}
    elif compute is not None:
        toks = {"value": compute["D_opt"], "interval": compute.get("D_opt_ci"),
                "law": compute["law"], "provenance": _kind(compute["law"]),
                "source": f"D_opt of {compute['law']} at {compute['C']:.3g} FLOPs"}
    else:  # the Chinchilla fits count every parameter: the asked size plus the embeddings
        toks = optimal_tokens(N + float(shape.params_active) - N_shape)
    try:
        r = published_recipe(N, toks["value"])
    except RecipeError as e:
        raise RecommendError(str(e)) from None
    r["decay"]["each"] = DECAY_EACH
    hp = fits.of(HyperparameterLaw)
    if hp is not None and hp.law_obj.predicts_loss:  # a surface: its basin's centre
        _surface(hp, N, toks["value"], r)
    elif hp is not None:
        r["lr"] = _fitted(hp, "lr", N, toks["value"], r["lr"])
        if hp.extra.get("batch_fitted"):
            r["batch_tokens"] = _fitted(hp, "batch_tokens", N, toks["value"],
                                        r["batch_tokens"])
    out = {"tokens": {**toks, "convention": "training tokens"}, **r, "shape_params": N_shape}
    reasons = unusable(out, shape.n_ctx)
    far, weak = beyond_reach(out)
    out["verdict"] = "uninformative" if reasons or far else "weak" if weak else "usable"
    out["reasons"] = reasons + far + weak
    return out


def beyond_reach(r: dict[str, Any]) -> tuple[list[str], list[str]]:
    """How far past the largest model its law was checked on (a published law's, or the largest
    cell of the sweep a fitted law was fitted on) each value of recipe ``r`` lies: (reasons past
    the verdict's uninformative extrapolation threshold, reasons past its weak one), with the
    thresholds a fit's verdict uses (:data:`EXTRAPOLATION`)."""
    far: list[str] = []
    weak: list[str] = []
    laws: dict[str, tuple[dict[str, Any], list[str]]] = {}  # each law: its reach, what it sets
    for what, e in (("peak rate", r["lr"]), ("batch", r["batch_tokens"])):
        reach = (e.get("reach") or {}).get(e["law"])
        if reach is not None:  # a published law's checked range, or your sweep's largest cell
            laws.setdefault(e["law"], (reach, []))[1].append(what)
    for law, (reach, whats) in laws.items():
        f, sets = reach["factor"], " and ".join(whats)
        if f is None:
            weak.append(f"{law} ({sets}) has no recorded range: how far it extrapolates "
                        "cannot be checked")
        elif f > EXTRAPOLATION[0]:
            (far if f > EXTRAPOLATION[1] else weak).append(
                f"{law} ({sets}) is used {f:.3g}x past the largest model it was checked on "
                f"({reach['params']:.3g} parameters on {reach['tokens']:.3g} tokens)")
    return far, weak


def unusable(r: dict[str, Any], n_ctx: int) -> list[str]:
    """Why no training run could use recipe ``r`` as given (empty: a run can): a peak rate past
    the trainer's plausible bound, a batch below one sequence of the shape's context, fewer
    tokens than one batch, or a warmup as long as the run."""
    lr, batch, tokens = r["lr"]["value"], r["batch_tokens"]["value"], r["tokens"]["value"]
    out = []
    if not lr <= MAX_LR:
        out.append(f"the peak learning rate {lr:.3g} is past the plausible bound {MAX_LR:g} "
                   f"({r['lr']['law']} far outside the sizes and tokens it was fitted on)")
    elif not lr >= MIN_LR:
        out.append(f"the peak learning rate {lr:.3g} is below the smallest that moves an fp32 "
                   f"weight, {MIN_LR:g} ({r['lr']['law']} far outside the sizes and tokens it "
                   "was fitted on)")
    if batch < n_ctx:
        out.append(f"the batch of {batch:.3g} tokens is below one sequence of {n_ctx:,} tokens")
    if tokens < max(batch, n_ctx):
        out.append(f"the {tokens:.3g} training tokens are fewer than one batch "
                   f"({max(batch, n_ctx):.3g} tokens)")
    elif r["warmup"]["steps"] >= tokens / max(batch, n_ctx):
        out.append(f"the warmup ({r['warmup']['steps']:,.0f} steps) is as long as the run")
    return out


def optimal_tokens(N_total: float) -> dict[str, Any]:
    """The compute-optimal training tokens for ``N_total`` parameters (total, as the Chinchilla
    fits count them): the default compute law's, with every published Chinchilla-form law's
    value beside it (no range: their point estimates are not an interval)."""
    each = {}
    for name, entry in PUBLISHED.items():
        if entry["law"] != "chinchilla":
            continue
        f = load_fit(name)
        each[name] = _tokens_at(f, N_total)
    value = each[DEFAULT_COMPUTE_LAW]
    return {"value": value, "interval": None, "provenance": "published", "law": DEFAULT_COMPUTE_LAW,
            "pick": f"the default compute law, {DEFAULT_COMPUTE_LAW}", "each": each,
            "source": f"the tokens at which {DEFAULT_COMPUTE_LAW}'s N_opt is this size (total "
                      "parameters)"}


def _tokens_at(fit: Fit, N: float) -> float:
    """D such that the compute law's N_opt(6 N D) = N, by bisection in log C."""
    law = fit.law_obj
    lo, hi = math.log(6 * N * 1e-2 * N), math.log(6 * N * 1e4 * N)  # 0.01 to 10^4 tokens/param
    for _ in range(200):
        mid = (lo + hi) / 2
        if law.compute_optimal(fit.params, math.exp(mid))[0] < N:
            lo = mid
        else:
            hi = mid
    return math.exp((lo + hi) / 2) / (6 * N)


def _fitted(fit: Fit, what: str, N: float, D: float, published: dict[str, Any]
            ) -> dict[str, Any]:
    """The peak rate (``what`` "lr") or the batch (``"batch_tokens"``) of an lr-batch fit at
    (N, D), its 95% interval over the fit's draws, the published laws' values beside it."""
    from archfit.laws.hyperparameters.lr_batch import LRBatch  # only when a learning-rate fit is given

    law = fit.law_obj
    if not isinstance(law, LRBatch):
        raise RecommendError(f"the learning-rate fit must be an lr-batch fit, got {fit.label}; "
                             "fit a learning-rate sweep with --law lr-batch")
    at = law.lr_at if what == "lr" else law.batch_at
    value = at(fit.params, N, D)
    draws = fit.draws().values(lambda d: at(d, N, D))
    interval = fit.draws().interval(draws, min_count=RECIPE_MIN_DRAWS)
    given = _kind(fit.name or "")
    span = (fit.diagnostics or {}).get("span") or {}
    top, most = span.get("params_max"), span.get("tokens_max")
    reach = ({fit.label: {"params": top, "tokens": most, "factor": max(N / top, D / most),
                          "source": "the largest cell of the sweep it was fitted on"}}
             if given == "fitted" and top and most else {})
    return {"value": value, "interval": interval,
            "law": fit.label, "provenance": given, "reach": reach,
            "each": published["each"], "convention": published["convention"],
            "note": (("fitted to your sweep" if given == "fitted" else
                      f"the published {fit.label} law, as asked")
                     + ("" if interval or given != "fitted" else
                        f" (no interval: {len(draws)} of the fit's bootstrap resamples "
                        "succeeded, fewer than 20)")
                     + f"; the published laws give {'rates' if what == 'lr' else 'batches'} "
                     + ", ".join(f"{k} {v:.3g}" for k, v in published["each"].items()))}


# a recipe's interval needs 20 draws with a value (its 2.5% tail then has at least half a draw)
RECIPE_MIN_DRAWS = 20
# the factors off the optimum whose loss penalty an lr-batch-surface recipe states
PENALTY_FACTORS = (("lr", 2.0), ("lr", 0.5), ("batch_tokens", 4.0), ("batch_tokens", 0.25))


def _surface(fit: Fit, N: float, D: float, r: dict[str, Any]) -> None:
    """The rate and batch of an lr-batch-surface fit at (N, D) (its basin's centre), the loss
    it predicts there, and the penalty of a rate 2x and 1/2x off and a batch 4x and 1/4x off at
    those tokens, each with its 95% interval over the fit's draws (none with fewer than 20)."""
    law: Any = fit.law_obj
    D0 = fit.extra.get("tokens") or D  # a fit at one token count answers at its tokens
    point = law.optimum_point(fit.params, N, D0)
    over = fit.draws()
    draws = [law.optimum_point(p, N, D0) for p in over]

    reach = {fit.label: {"params": (fit.diagnostics.get("span") or {}).get("params_max"),
                         "tokens": D0, "source": "the largest size of the grid it was fitted on"}}
    top = reach[fit.label]["params"]
    reach[fit.label]["factor"] = N / top if top else None
    for what in ("lr", "batch_tokens"):
        r[what] = {**r[what], "value": point[what], "law": fit.label, "provenance": "fitted",
                   "interval": over.interval([d[what] for d in draws],
                                             min_count=RECIPE_MIN_DRAWS),
                   "reach": reach,
                   "note": "the centre of the fitted basin in ln lr and ln batch"
                           + ("" if fit.extra.get("uses_tokens") else
                              f", at the grid's {D0:.3g} tokens")}
        for key in ("disagree", "pick"):
            r[what].pop(key, None)
    r["surface"] = {
        "loss": {"value": point["loss"],
                 "interval": over.interval([d["loss"] for d in draws],
                                           min_count=RECIPE_MIN_DRAWS),
                 "convention": "predicted loss at the recipe's rate and batch (nats/token)"},
        "penalties": [{"knob": k, "factor": f, "value": law.penalty(fit.params, k, f, D0),
                       "interval": over.interval(lambda p, k=k, f=f: law.penalty(p, k, f, D0),
                                                 min_count=RECIPE_MIN_DRAWS)}
                      for k, f in PENALTY_FACTORS],
        "law": fit.label, "provenance": "fitted"}


def _with_width(iv: Interval | None) -> Interval | None:
    """``iv``, or None where its ends coincide (the tokens of a fixed tokens-per-parameter plan:
    the budget and the ratio fix them, so there is nothing to be uncertain about)."""
    if iv is None or iv.low is None or iv.high is None:
        return iv
    return iv if iv.high > iv.low * (1 + 1e-9) else None


def _kind(law: str) -> str:
    """A law's value is ``published`` when the law is a shipped published fit, else
    ``fitted``."""
    return "published" if law in PUBLISHED else "fitted"


def recipe_lines(r: dict[str, Any]) -> list[str]:
    """The recipe in one block of text."""
    def rng(e: dict[str, Any], fmt: str) -> str:
        iv = e.get("interval")
        return f" {iv.text(fmt, named=False)}" if iv else ""

    lr, b, t, w, d = r["lr"], r["batch_tokens"], r["tokens"], r["warmup"], r["decay"]
    kinds: dict[str, list[str]] = {}  # each interval's name: whose intervals it names
    for what, e in (("rate", lr), ("batch", b), ("tokens", t)):
        if e.get("interval"):
            kinds.setdefault(e["interval"].name(), []).append(what)
    named = [f"the {' and '.join(whats)} interval{'s' if len(whats) > 1 else ''}: {name}"
             for name, whats in kinds.items()]
    shape = r.get("shape_params")
    lines = [f"recipe (N {r['params']:.3g} non-embedding, the size asked"
             + (f"; the shape's {shape:.3g}" if shape and abs(shape / r["params"] - 1) > 1e-3
                else "") + "; AdamW"
             + "".join(f"; {n}" for n in named) + "):",
             f"  peak lr     {lr['value']:.3g}{rng(lr, '.3g')} ({lr['law']}, {lr['provenance']})",
             f"  batch       {b['value']:.3g} tokens{rng(b, '.3g')} ({b['law']}, "
             f"{b['provenance']})",
             f"  tokens      {t['value']:.3g}{rng(t, '.3g')} ({t.get('law', t['provenance'])}"
             + (f", {t['provenance']}" if "law" in t else "") + ")",
             f"  warmup      {w['steps']:,.0f} steps ({w['source']}, {w['provenance']})",
             f"  decay       {d['schedule']} to {d['min_lr_ratio']:.0%} of the peak "
             f"({d['provenance']}; or to zero, Bergsma et al. 2025)"]
    lines += [f"  note: {e['disagree']}: " + ", ".join(f"{k} {v:.3g}" for k, v in
                                                       e["each"].items())
              for e in (lr, b) if e.get("disagree")]
    each = [f"{what} " + ", ".join(f"{k} {v:.3g}" for k, v in e["each"].items())
            for what, e in (("lr", lr), ("batch", b), ("tokens", t))
            if e.get("each") and not e.get("interval")]
    if each:
        lines.append("  each law (none states an interval, so none is shown): "
                     + "; ".join(each))
        picks = [f"{what} {e['pick']}" for what, e in (("lr and batch", b), ("tokens", t))
                 if e.get("pick")]
        lines.append(f"  the picks: {'; '.join(picks)}")
    lines += [f"  note: the {what}: {e['note']}" for what, e in (("rate", lr), ("batch", b))
              if e.get("note")]
    reach = (b.get("reach") or {}).get(b["law"])
    if reach and reach["factor"] is not None and r.get("verdict") == "usable":
        where = ("within" if reach["factor"] <= 1 else f"{reach['factor']:.3g}x past")
        lines.append(f"  reach: {b['law']} is used {where} the largest model it was checked on "
                     f"({reach['source']})")
    if r.get("surface"):
        sf = r["surface"]
        lines.append(f"  predicted loss {sf['loss']['value']:.4g}{rng(sf['loss'], '.4g')} at "
                     f"this rate and batch ({sf['law']}, fitted)")
        lines.append("  penalty off the optimum: " + ", ".join(
            f"{'rate' if p['knob'] == 'lr' else 'batch'} x{p['factor']:g} "
            f"+{p['value']:.3g}{rng(p, '.2g')}" for p in sf["penalties"]) + " nats/token")
    if r.get("verdict") == "uninformative":
        lines.append(f"  recipe verdict: uninformative ({'; '.join(r['reasons'])}): do not "
                     "train with it as given")
    elif r.get("verdict") == "weak":
        lines.append(f"  recipe verdict: weak ({'; '.join(r['reasons'])})")
    return lines
