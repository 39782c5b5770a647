"""The trade of a per-layer plan: each variant of a sweep against the uniform shape at the same
size, learning rate and seed (``archfit trade``, :func:`trade`).

For every variant it estimates, across seeds, with a 95% interval (Student's t over the paired
differences, one pair per seed):

- ``loss``: the final validation loss at equal tokens, variant minus baseline (nats/token);
- ``step_time``: the measured seconds per optimizer step (``train_s / steps``), as a ratio
  variant / baseline, and the ratio the step-time model predicts (``archfit.train.perf``, modelled on
  ``gpu`` at a GPU's batch of 2^19 tokens per step; no interval: it is a formula);
- ``steps_to_loss`` and ``time_to_loss``: optimizer steps and seconds until the validation
  loss first reaches ``target_loss`` (linear between logged points), as ratios. The default
  target is the highest final validation loss among the runs compared, so every run reaches it.
  These need the loss curves ``sweep collect`` writes beside the run table.

Ratios are averaged on the log scale (a geometric mean). The verdict reads the time to the loss
where curves exist, else the loss at equal tokens: its interval below 1 (or below 0) is
``faster to the loss`` (``lower loss``), above is ``slower`` (``higher loss``), across is
``within the noise``. With two seeds an interval is wide (t at 1 degree of freedom is 12.7):
more seeds, not a narrower formula, is what narrows it.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from archfit.errors import FitInputError

PAIR_KEYS = ("target_params", "lr", "seed")  # a variant run and its baseline share these
CONFIDENCE = 0.95


@dataclass
class Effect:
    """One quantity's effect: the estimate, its 95% interval and the pairs behind it."""

    estimate: float
    low: float | None
    high: float | None
    pairs: int

    def side(self, null: float) -> int:
        """-1 when the interval lies below ``null``, +1 above, 0 when it holds it (or has none)."""
        if self.low is None or self.high is None:
            return 0
        return -1 if self.high < null else (1 if self.low > null else 0)


@dataclass
class VariantTrade:
    variant: str
    plan: str
    pairs: int
    loss: Effect
    step_time: Effect | None = None
    step_time_modelled: float | None = None
    steps_to_loss: Effect | None = None
    time_to_loss: Effect | None = None
    verdict: str = ""
    reason: str = ""

    def line(self) -> str:
        """One verdict line with its numbers."""
        parts = [f"loss {_fmt_diff(self.loss)}"]
        if self.step_time is not None:
            parts.append(f"step time x{_fmt_ratio(self.step_time)}"
                         + (f" (modelled x{self.step_time_modelled:.3f})"
                            if self.step_time_modelled else ""))
        if self.steps_to_loss is not None:
            parts.append(f"steps to the loss x{_fmt_ratio(self.steps_to_loss)}")
        if self.time_to_loss is not None:
            parts.append(f"time to the loss x{_fmt_ratio(self.time_to_loss)}")
        return f"{self.variant} ({self.plan}): {self.verdict} - {'; '.join(parts)}"


@dataclass
class TradeReport:
    baseline: str
    by: str
    target_loss: float | None
    gpu: str
    variants: list[VariantTrade] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    target_given: str | None = None  # --target-loss as the user wrote it (None: archfit's)

    def summary(self) -> str:
        head = (f"each {self.by} against {self.baseline!r} at the same size, lr and seed; "
                f"{CONFIDENCE:.0%} intervals across seeds (Student's t over paired runs)")
        target = ("no loss curves: the verdict reads the loss at equal tokens"
                  if self.target_loss is None else
                  f"time to the loss: to validation loss {self.target_given} nats/token (yours, "
                  "--target-loss)" if self.target_given is not None else
                  f"time to the loss: to validation loss {self.target_loss:.4f} nats/token "
                  "(the highest final loss among the runs compared)")
        from archfit.recommending.objectives import DEFAULT_BATCH_TOKENS

        modelled = (f"modelled step time: archfit.train.perf on {self.gpu} at {DEFAULT_BATCH_TOKENS:,} "
                    "tokens per step (a formula, no interval)")
        lines = [head, target, modelled] + [v.line() for v in self.variants]
        return "\n".join(lines + [f"note: {n}" for n in self.notes])

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline, "by": self.by, "target_loss": self.target_loss,
                "gpu": self.gpu, "confidence": CONFIDENCE,
                "variants": [asdict(v) for v in self.variants], "notes": self.notes}

    def to_frame(self) -> Any:
        import polars as pl

        rows = []
        for v in self.variants:
            row: dict[str, Any] = {"variant": v.variant, "plan": v.plan, "pairs": v.pairs,
                                   "verdict": v.verdict,
                                   "step_time_modelled": v.step_time_modelled}
            for name in ("loss", "step_time", "steps_to_loss", "time_to_loss"):
                e = getattr(v, name)
                row.update({f"{name}": e.estimate if e else None,
                            f"{name}_low": e.low if e else None,
                            f"{name}_high": e.high if e else None})
            rows.append(row)
        return pl.DataFrame(rows)


def _fmt_diff(e: Effect) -> str:
    ci = f" [{e.low:+.4f}, {e.high:+.4f}]" if e.low is not None else " (one pair: no interval)"
    return f"{e.estimate:+.4f}{ci} nats"


def _fmt_ratio(e: Effect) -> str:
    ci = f" [{e.low:.3f}, {e.high:.3f}]" if e.low is not None else ""
    return f"{e.estimate:.3f}{ci}"


def _t_interval(values: list[float]) -> tuple[float, float | None, float | None]:
    from scipy import stats

    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None, None
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def _difference(values: list[float]) -> Effect:
    m, lo, hi = _t_interval(values)
    return Effect(m, lo, hi, len(values))


def _ratio(ratios: list[float]) -> Effect | None:
    ratios = [r for r in ratios if r is not None and r > 0 and math.isfinite(r)]
    if not ratios:
        return None
    m, lo, hi = _t_interval([math.log(r) for r in ratios])
    return Effect(math.exp(m), None if lo is None else math.exp(lo),
                  None if hi is None else math.exp(hi), len(ratios))


def steps_to_loss(curve: list[tuple[int, float]], target: float) -> float | None:
    """The (fractional) step at which a loss curve of (step, val_loss) points first reaches
    ``target``, linear between logged points; None if it never does."""
    prev = None
    for step, loss in curve:
        if loss <= target:
            if prev is None or prev[1] == loss:
                return float(step)
            (s0, l0) = prev
            return s0 + (step - s0) * (l0 - target) / (l0 - loss)
        prev = (step, loss)
    return None


def trade(table: Any, *, by: str = "variant", baseline: str = "uniform",
          curves: Any = None, target_loss: float | None = None, gpu: str = "h100"
          ) -> TradeReport:
    """Each value of column ``by`` against ``baseline`` (see the module doc). ``table``: a run
    table (path, polars or pandas frame) with ``final_val_loss`` (or ``loss``), ``seed`` and
    ``by``; ``curves``: its loss curves (path or frame; default the ``.curves.parquet`` beside a
    table path)."""
    import polars as pl

    from archfit.sweep.store import curves_path, runs_frame, to_polars

    path = os.fspath(table) if isinstance(table, (str, os.PathLike)) else None
    df = runs_frame(path) if path else to_polars(table)
    if curves is None and path and os.path.isfile(curves_path(path)):
        curves = curves_path(path)
    if isinstance(curves, (str, os.PathLike)) and not os.path.isfile(curves):
        raise FitInputError(f"--curves {os.fspath(curves)}: no such file (sweep collect writes "
                            "the curves beside the run table as *.curves.parquet)")
    cdf = (pl.read_parquet(os.fspath(curves)) if isinstance(curves, (str, os.PathLike))
           else to_polars(curves) if curves is not None else None)
    loss = "final_val_loss" if "final_val_loss" in df.columns else "loss"
    for col in (by, loss, "seed"):
        if col not in df.columns:
            raise FitInputError(f"the runs have no {col!r} column; a trade pairs runs by seed and "
                                f"compares them by {by!r} (e.g. a sweep with grid.variants)")
    from archfit.train.accelerators import device

    device(gpu)  # an unknown accelerator is refused, not modelled as nothing
    if "status" in df.columns:
        df = df.filter(pl.col("status") == "ok")
    n_runs = df.height
    df = df.filter(pl.col(loss).is_not_null() & pl.col(loss).is_finite())
    if n_runs and df.height == 0:
        raise FitInputError(f"every run's loss ({loss!r}) is missing: none of the {n_runs} "
                            "finished runs has one to compare; train them (archfit sweep run) "
                            "and collect again")
    values = [v for v in df[by].drop_nulls().unique().sort().to_list()]
    if baseline not in values:
        raise FitInputError(f"no finished run has {by} = {baseline!r} (it has "
                            f"{', '.join(map(str, values)) or 'none'}); name the baseline with "
                            "--baseline")
    keys = [k for k in PAIR_KEYS if k in df.columns]
    base = {tuple(r[k] for k in keys): r for r in df.filter(pl.col(by) == baseline).to_dicts()}
    curve_of = _curves(cdf)
    given = None if target_loss is None else f"{target_loss:g}"  # at the user's own precision
    if target_loss is None and curve_of:
        target_loss = float(df[loss].max())  # every compared run reaches it
    report = TradeReport(baseline=baseline, by=by, target_loss=target_loss, gpu=gpu,
                         target_given=given)
    for v in values:
        if v == baseline:
            continue
        pairs = [(r, base[k]) for r in df.filter(pl.col(by) == v).to_dicts()
                 if (k := tuple(r[c] for c in keys)) in base]
        if not pairs:
            report.notes.append(f"{v}: no run shares {', '.join(keys)} with a {baseline} run; "
                                "left out")
            continue
        _check_plans(pairs)
        one = _one(v, pairs, loss, curve_of=curve_of, target=target_loss, gpu=gpu)
        report.variants.append(one)
        if target_loss is not None and curve_of and one.steps_to_loss is None:
            report.notes.append(f"{v}: no pair of runs reaches the target loss "
                                f"{given or f'{target_loss:.4f}'} (its time to the loss is "
                                "unknown; the verdict reads the loss at equal tokens)")
    if not report.variants:
        raise FitInputError(f"no {by} has a run paired with a {baseline} run (same "
                            f"{', '.join(keys)}); a trade needs both at the same seeds")
    return report


def _check_plans(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    """Refuse a variant whose plan names a layer its runs do not have (``no-mlp:9`` on 3
    layers), read from the run's ``plan`` text and its ``n_layer``."""
    from archfit.errors import ShapeError
    from archfit.shapes import Shape
    from archfit.shapes.layer_plan import parse_plan

    for run, _ in pairs:
        plan = run.get("plan")
        if not plan or any(run.get(k) is None for k in ("n_layer", "d_model", "n_head")):
            continue
        n_layer = int(run["n_layer"])
        try:
            Shape.from_config({"n_layer": n_layer, "d_model": int(run["d_model"]),
                               "n_head": int(run["n_head"]), **parse_plan(str(plan), n_layer)})
        except ShapeError as e:
            raise FitInputError(f"variant plan {plan!r} on {n_layer}-layer runs: {e}") from None


def _curves(cdf: Any) -> dict[str, list[tuple[int, float]]]:
    if cdf is None or not {"run_id", "step", "val_loss"} <= set(cdf.columns):
        return {}
    out: dict[str, list[tuple[int, float]]] = {}
    for r in cdf.drop_nulls(["val_loss"]).sort("step").iter_rows(named=True):
        out.setdefault(str(r["run_id"]), []).append((r["step"], r["val_loss"]))
    return out


def _step_s(r: dict[str, Any]) -> float | None:
    t, n = r.get("train_s"), r.get("steps")
    return t / n if t and n else None


def _one(v: str, pairs: list[tuple[dict[str, Any], dict[str, Any]]], loss: str, *,
         curve_of: dict[str, list[tuple[int, float]]], target: float | None, gpu: str
         ) -> VariantTrade:
    plan = pairs[0][0].get("plan") or v
    out = VariantTrade(variant=v, plan=plan, pairs=len(pairs),
                       loss=_difference([a[loss] - b[loss] for a, b in pairs]))
    times = [(_step_s(a), _step_s(b)) for a, b in pairs]
    out.step_time = _ratio([a / b for a, b in times if a and b])
    out.step_time_modelled = _modelled_ratio(pairs[0], gpu)
    if target is not None and curve_of:
        steps, secs = [], []
        for (a, b), (ta, tb) in zip(pairs, times):
            sa = steps_to_loss(curve_of.get(str(a.get("run_id")), []), target)
            sb = steps_to_loss(curve_of.get(str(b.get("run_id")), []), target)
            if sa and sb:
                steps.append(sa / sb)
                if ta and tb:
                    secs.append(sa * ta / (sb * tb))
        out.steps_to_loss, out.time_to_loss = _ratio(steps), _ratio(secs)
    if out.time_to_loss is not None:
        side = out.time_to_loss.side(1.0)
        out.verdict = {-1: "faster to the loss", 1: "slower to the loss",
                       0: "within the noise"}[side]
        out.reason = "time to the loss"
    else:
        side = out.loss.side(0.0)
        out.verdict = {-1: "lower loss at equal tokens", 1: "higher loss at equal tokens",
                       0: "within the noise"}[side]
        out.reason = "loss at equal tokens"
    return out


def _modelled_ratio(pair: tuple[dict[str, Any], dict[str, Any]], gpu: str) -> float | None:
    """The step-time model's ratio variant / baseline at the runs' tokens per step."""
    from archfit.errors import ArchfitError
    from archfit.train.perf import modelled
    from archfit.shapes import Shape

    from archfit.errors import ShapeError

    try:
        a, b = (Shape.from_config({k: v for k, v in r.items() if v is not None}) for r in pair)
    except ShapeError as e:  # a plan the model cannot have (a layer it does not have)
        raise FitInputError(f"{pair[0].get('plan') or 'a variant'}: {e}") from None
    except (TypeError, ValueError):
        return None
    try:
        from archfit.recommending.objectives import DEFAULT_BATCH_TOKENS

        tokens = DEFAULT_BATCH_TOKENS  # a GPU's batch: at a CPU run's, launches dominate
        model = modelled(gpu)
        return model.step_time(a, tokens) / model.step_time(b, tokens)
    except (ArchfitError, TypeError, ValueError):
        return None
