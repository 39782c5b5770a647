"""Objectives beyond loss: the shape that trains to the lowest loss in a GPU-hour budget (or
reaches a target loss soonest), or the best under a decode-latency bound. Plain math: the
candidates are a :class:`~archfit.recommending.Recommendation`'s (every buildable shape within
2% of the target), their speed comes from :mod:`archfit.train.perf`, their loss from the laws.

The predicted loss of a candidate trained on D tokens is

    L(shape, D) = loss_at(N, D) + shape penalty

where ``loss_at`` is the size-and-data part of a law that has one (the shape fit itself, e.g.
depth-joint, else the compute fit given, else the published ``epoch2024``) and the shape penalty
is the shape law's predicted excess loss of this depth over the best candidate.

- ``time``: with ``gpu_hours``, each candidate trains ``tokens/s x GPU-hours x 3600`` tokens and
  the lowest predicted loss wins; with ``tokens``, the target is the loss the loss-optimal shape
  reaches on those tokens, and the candidate that reaches it in the fewest GPU-hours wins.
- ``cost``: as ``time`` (GPU-hours), priced at ``usd_per_gpu_hour`` when given.
- ``latency``: the lowest predicted loss among the candidates whose decode latency at batch 1
  is within ``max_latency_ms``.
- ``loss``: the shape law's pick (what ``recommend`` does without an objective).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from archfit.errors import RecommendError
from archfit.recommending.request import OBJECTIVES, Objective, RecommendRequest
from archfit.train.perf import StepModel, decode_latency, device, modelled

DEFAULT_GPU = "h100"
DEFAULT_BATCH_TOKENS = 1 << 19  # tokens per GPU and optimizer step (e.g. 256 x 2048)
DEFAULT_DATA_LAW = "epoch2024"


@dataclass
class Choice:
    """One objective's pick among a recommendation's candidates, with every candidate's
    numbers (``rows``) and the trade-off against the loss-optimal shape in one line."""

    objective: str
    rows: list[dict[str, Any]]
    chosen: dict[str, Any]
    loss_optimal: dict[str, Any]
    tradeoff: str
    perf: str
    data_law: str
    recommendation: Any = None  # the loss recommendation the candidates came from

    # the candidates' columns, in the order a table shows them (key, header): a mark first
    # (MARKS), then the shape law's penalty for depth (added to the predicted loss)
    COLUMNS = (("mark", ""), ("n_layer", "layers"), ("d_model", "d_model"),
               ("shape_penalty", "penalty"), ("predicted_loss", "pred. loss"),
               ("tokens_per_s", "tokens/s/GPU"), ("tokens", "tokens"), ("gpu_hours", "GPU-hours"),
               ("latency_ms", "ms/token"), ("usd", "USD"))
    MARKS = "> the pick, = the loss-optimal shape"

    def to_dict(self) -> dict[str, Any]:
        out = {"objective": self.objective, "chosen": self.chosen,
               "loss_optimal": self.loss_optimal, "tradeoff": self.tradeoff,
               "perf": self.perf, "data_law": self.data_law, "candidates": self.rows}
        r = self.recommendation
        if r is not None:
            out.update(trust=r.trust, law=r.law, target_params=r.target_params,
                       target_convention=r.target_convention, near_optimal=r.near_optimal,
                       loss_model=r.loss_model,
                       pick_rule=f"the {self.objective} objective (hardware: {self.perf})")
        return out

    def header(self) -> str:
        """The target, the law and its verdict, the objective and the loss model, as text."""
        lines = []
        r = self.recommendation
        if r is not None:
            t = r.trust
            lines.append(f"target: {r.target_params:.4g} parameters ({r.target_convention}); "
                         f"shape law {r.law}, verdict {t['verdict'].upper()}"
                         + (f": {'; '.join(t['reasons'])}" if t.get("reasons") else ""))
        lines += [f"objective: {self.objective}; {self.perf}",
                  f"loss: {self.data_law}, plus the shape law's penalty for depth"]
        return "\n".join(lines)

    def table(self) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
        """The candidates marked (the pick, the loss-optimal one) and the columns that hold a
        value for at least one of them."""
        rows = [{**x, "mark": (">" if x["chosen"] else "") + ("=" if x["loss_optimal"] else "")}
                for x in self.rows]
        return rows, [c for c in self.COLUMNS if any(x.get(c[0]) is not None for x in rows)]

    def to_frame(self) -> Any:
        import polars as pl

        return pl.DataFrame(self.rows)


OBJECTIVE_SPAN = (0.4, 2.0)  # candidate depths as multiples of the optimum: a wide trade-off


def recommend_for(req: RecommendRequest) -> Choice:
    """``archfit recommend --objective``: the loss recommendation's candidates over a wide
    depth span (:data:`OBJECTIVE_SPAN`), each with its predicted loss, speed, GPU-hours and
    latency, and the pick for the request's objective (:func:`choose`), on its GPU's modelled
    step time or the calibrated step model it names."""
    from archfit.recommending.pipeline import recommend
    from archfit.train.perf import load_step_model

    o = req.objective
    gpu = o.gpu or DEFAULT_GPU
    device(gpu)
    model = load_step_model(o.step_model) if o.step_model else None
    r = recommend(req.with_(grid=replace(req.grid, depth_span=OBJECTIVE_SPAN),
                            target=replace(req.target, tokens=None), objective=Objective()))
    c = choose(r, o.kind or "loss", gpu=gpu, step_model=model, gpu_hours=o.gpu_hours,
               tokens=req.target.tokens, max_latency_ms=o.max_latency_ms,
               batch_tokens=o.batch_tokens or DEFAULT_BATCH_TOKENS,
               usd_per_gpu_hour=o.usd_per_gpu_hour)
    c.recommendation = r
    return c


MAX_GPU_HOURS = 1e9  # a trillion GPU-seconds: beyond it a budget is a typo


def _data_term(rec: Any, objective: str) -> tuple[Any, Any, str]:
    """The fit whose ``loss_at`` gives the size-and-data part of the loss, and which count
    of N it takes."""
    from archfit.laws import ComputeLaw, load_fit

    fit = rec.shape_fit
    if fit.law_obj.loss_at(fit.params, 1e9, 1e10) is None:
        fit = (rec.fits.of(ComputeLaw) if rec.fits else None) or load_fit(DEFAULT_DATA_LAW)
    elif fit.extra.get("uses_tokens") is False and objective in ("time", "cost"):
        # B = beta = 0: the fit saw one token count, so tokens (or hours) change nothing
        raise RecommendError(f"{fit.label} folded its data term away (all its runs share one "
                             "token count), so it cannot say what more or fewer tokens give; "
                             "fit runs at several token counts, or use --objective loss")
    conv = " ".join(str(v) for v in (fit.conventions or {}).values())
    count = "params_non_embedding" if (fit is rec.shape_fit or "non-embedding" in conv) \
        else "params_total"
    return fit, count, f"{fit.label}: {fit.law_obj.formula} (N = {count})"


def _tokens_to_reach(law: Any, params: Any, N: float, penalty: float, loss: float) -> float:
    """Tokens at which ``loss_at(N, D) + penalty`` falls to ``loss`` (inf if never)."""
    lo, hi = 1e3, 1e18
    if law.loss_at(params, N, hi) + penalty > loss:
        return math.inf
    for _ in range(200):  # bisection in log D: the loss falls with D
        mid = math.sqrt(lo * hi)
        if law.loss_at(params, N, mid) + penalty > loss:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-9:
            break
    return hi


def choose(rec: Any, objective: str, *, gpu: str = DEFAULT_GPU, step_model: StepModel | None = None,
           gpu_hours: float | None = None, tokens: float | None = None,
           max_latency_ms: float | None = None, batch_tokens: float = DEFAULT_BATCH_TOKENS,
           usd_per_gpu_hour: float | None = None) -> Choice:
    """The candidate of ``rec`` that ``objective`` picks (see the module doc)."""
    if objective not in OBJECTIVES:
        raise RecommendError(f"unknown objective {objective!r}; choose one of "
                             f"{', '.join(OBJECTIVES)}")
    if gpu_hours is not None and tokens is not None:
        raise RecommendError("give --gpu-hours (a budget) or --tokens (a run length), not both")
    if objective in ("time", "cost") and gpu_hours is None and tokens is None:
        raise RecommendError(f"--objective {objective} needs --gpu-hours H (the lowest loss in "
                             "that budget) or --tokens T (the loss T tokens give, soonest)")
    if objective == "cost" and usd_per_gpu_hour is None:
        raise RecommendError("--objective cost needs a price: --usd-per-gpu-hour P (without "
                             "one, cost is time: use --objective time)")
    for name, v, top in (("--gpu-hours", gpu_hours, MAX_GPU_HOURS), ("--tokens", tokens, 1e16)):
        if v is not None and not (0 < v <= top):
            raise RecommendError(f"{name} {v:.3g} is outside (0, {top:.0e}], the range archfit "
                                 "plans for; check the number")
    if objective == "latency" and max_latency_ms is None:
        raise RecommendError("--objective latency needs --max-latency-ms X")
    if any(p is None for _, p in rec.candidates) and objective != "loss":
        raise RecommendError(f"{rec.law} has no loss model for shapes of one size (no shape "
                             "penalty), so it cannot trade loss for speed; fit a shape law to "
                             "your sweep (levine or depth-joint) and pass it with --fit")
    model = step_model or modelled(gpu)  # training speed: calibrated if given
    device(gpu)  # decode latency: modelled for this GPU
    data_fit, count, data_law = _data_term(rec, objective)
    law, params = data_fit.law_obj, data_fit.params
    scale = 1.0  # a penalty stated as a fraction of the loss, in nats at the target
    if (rec.loss_model or {}).get("unit") == "fraction of the loss":
        n0 = getattr(rec.shape, count)
        scale = law.loss_at(params, n0, 20.0 * n0)
        data_law += f"; shape penalty {rec.loss_model['curvature']:.3g} of the loss per " \
                    f"squared ln depth ({rec.law}), at the loss of 20 tokens per parameter"
    rows = []
    for s, pen in ((s, None if p is None else p * scale) for s, p in rec.candidates):
        tps = model.tokens_per_s(s, batch_tokens)
        lat = decode_latency(s, gpu)["ms_per_token"]
        rows.append({"n_layer": s.n_layer, "d_model": s.d_model, "n_head": s.n_head,
                     "d_ff": s.d_ff, "params_non_embedding": s.params_non_embedding,
                     "params_total": s.params_total, "shape_penalty": pen,
                     "tokens_per_s": tps, "latency_ms": lat})
    best_loss = min(rows, key=lambda r: (r["shape_penalty"] or 0.0, r["n_layer"]))
    if gpu_hours is not None:
        for r in rows:
            r["tokens"] = r["tokens_per_s"] * gpu_hours * 3600
            r["gpu_hours"] = gpu_hours
    elif tokens is not None:
        ref = law.loss_at(params, best_loss[count], tokens) + (best_loss["shape_penalty"] or 0)
        for r in rows:
            if objective in ("time", "cost"):  # the reference loss, as soon as possible
                r["tokens"] = _tokens_to_reach(law, params, r[count], r["shape_penalty"] or 0,
                                               ref)
            else:
                r["tokens"] = tokens
            r["gpu_hours"] = r["tokens"] / r["tokens_per_s"] / 3600
    for r in rows:
        if "tokens" in r and math.isfinite(r["tokens"]):
            r["predicted_loss"] = law.loss_at(params, r[count], r["tokens"]) + (
                r["shape_penalty"] or 0.0)
        else:
            r["predicted_loss"] = None
        if usd_per_gpu_hour is not None and r.get("gpu_hours") is not None:
            r["usd"] = r["gpu_hours"] * usd_per_gpu_hour
    chosen = _pick(rows, objective, gpu_hours, tokens, max_latency_ms)
    for r in rows:
        r["chosen"] = r is chosen
        r["loss_optimal"] = r is best_loss
    return Choice(objective=objective, rows=sorted(rows, key=lambda r: r["n_layer"]),
                  chosen=chosen, loss_optimal=best_loss,
                  tradeoff=_tradeoff(objective, chosen, best_loss),
                  perf=f"step time {model.label()}; decode latency modelled for {gpu} "
                       "(batch 1, the shape's context)",
                  data_law=data_law)


def _pick(rows: list[dict[str, Any]], objective: str, gpu_hours: float | None,
          tokens: float | None, max_latency_ms: float | None) -> dict[str, Any]:
    def loss_key(r: dict[str, Any]) -> float:
        if r.get("predicted_loss") is not None:
            return r["predicted_loss"]
        return r["shape_penalty"] or 0.0

    if objective == "loss":
        return min(rows, key=loss_key)
    if objective in ("time", "cost"):
        if gpu_hours is not None:
            return min(rows, key=loss_key)
        reach = [r for r in rows if math.isfinite(r["tokens"])]
        if not reach:
            raise RecommendError("no candidate reaches the loss-optimal shape's loss")
        return min(reach, key=lambda r: r["gpu_hours"])
    ok = [r for r in rows if r["latency_ms"] <= max_latency_ms]  # type: ignore[operator]
    if not ok:
        fast = min(rows, key=lambda r: r["latency_ms"])
        raise RecommendError(f"no candidate decodes a token within {max_latency_ms} ms at batch "
                             f"1 (fastest: {fast['n_layer']} x {fast['d_model']:,} at "
                             f"{fast['latency_ms']:.3g} ms); raise --max-latency-ms or lower "
                             "--params")
    return min(ok, key=loss_key)


def _tradeoff(objective: str, c: dict[str, Any], ref: dict[str, Any]) -> str:
    if c is ref:
        return (f"the loss-optimal shape ({c['n_layer']} x {c['d_model']:,}) is also the "
                f"{objective} objective's pick")
    dl = ((c["predicted_loss"] / ref["predicted_loss"] - 1)
          if c.get("predicted_loss") and ref.get("predicted_loss") else None)
    loss_txt = ("the same predicted loss" if dl is not None and abs(dl) < 5e-5 else
                f"{dl:+.2%} predicted loss" if dl is not None else
                f"+{(c['shape_penalty'] or 0) - (ref['shape_penalty'] or 0):.4f} nats of shape "
                "penalty")
    if objective == "latency":
        speed = ref["latency_ms"] / c["latency_ms"]
        what = "faster to serve"
    elif c.get("gpu_hours") and ref.get("gpu_hours") and c["gpu_hours"] != ref["gpu_hours"]:
        speed = ref["gpu_hours"] / c["gpu_hours"]
        what = "faster to the same loss"
    else:
        speed = c["tokens_per_s"] / ref["tokens_per_s"]
        what = "faster to train"
    return (f"{c['n_layer']} x {c['d_model']:,} is {speed:.2f}x {what} than the loss-optimal "
            f"{ref['n_layer']} x {ref['d_model']:,}, for {loss_txt}")
