"""``archfit validate``: train the recommended shape and its rivals at the target, and see which
one wins.

Every answer a scaling law gives beyond its data is an extrapolation. The test that settles it
is to train the shape the law recommends beside shallower and deeper shapes of the same size,
with a few seeds each, and compare. :func:`plan` writes that experiment as an ordinary sweep
spec (``grid.shapes``: the recommendation and K rivals spread over depth, S seeds, the recipe
of the sweep the fit came from). :func:`run` trains it through the sweep engine (local, Slurm
or Ray; resumable; runs land in parquet), and :func:`judge` reads the verdict:

``held``          the recommended shape is the best, or within the seed noise of the best;
``missed``        a rival beats it by more than the seed noise (which one, and by how much);
``inconclusive``  the seed noise is larger than the differences between the shapes (or there
                  is one seed per shape, so no measure of the noise).

The noise is the pooled standard deviation s of final validation loss between seeds of one
shape, with dof = sum(seeds - 1). Two shapes differ beyond the noise when their means differ by
more than t(0.975, dof) * s * sqrt(1/n_a + 1/n_b): a two-sided 95% test of two means.
"""

from __future__ import annotations

import copy
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from archfit.errors import ArchfitError, FitError, UninformativeWarning
from archfit.shapes.families import iso_param_family
from archfit.shapes import Shape
from archfit.text import wrap
from archfit.laws import ShapeLaw

if TYPE_CHECKING:  # pragma: no cover
    from archfit.laws import Fit
    from archfit.recommending.result import Recommendation
    from archfit.sweep import Spec

VERDICTS = ("held", "missed", "inconclusive")
LEVEL = 0.95  # the prediction intervals and the noise test
SHAPE_KEYS = ("n_layer", "d_model", "n_head", "n_kv_head", "d_ff")


class ValidateError(ArchfitError):
    """A validation that cannot be planned or judged as asked."""


@dataclass
class Candidate:
    role: str  # recommended, shallower or deeper
    shape: Shape


@dataclass
class Plan:
    """The experiment: the target, the recommendation and its rivals, the sweep spec that
    trains them (``raw``, TOML-ready) and notes on what was left out."""

    target: float
    fit: Fit
    recommendation: Recommendation
    candidates: list[Candidate]
    raw: dict[str, Any]
    seeds: int
    notes: list[str] = field(default_factory=list)

    def toml(self) -> str:
        import tomli_w

        head = (f"# archfit validate: {self.fit.label} at N = {self.target:.4g} non-embedding "
                f"parameters.\n# The recommended shape (first) and {len(self.candidates) - 1} "
                f"rivals spread over depth, {self.seeds} seeds each.\n"
                "# Train it anywhere with 'archfit sweep run FILE --out DIR', then judge with\n"
                "# 'archfit validate FIT --params N --spec SPEC --out DIR' (finished runs are "
                "not trained again).\n")
        return head + tomli_w.dumps(self.raw)

    def write(self, path: str) -> str:
        from archfit.io import atomic_path

        with atomic_path(path) as tmp, open(tmp, "w") as f:
            f.write(self.toml())
        return path


def rival_depths(depth: int, k: int) -> list[int]:
    """``k`` depths spread geometrically around ``depth``: half shallower (/2, /4, ...), the
    rest deeper (x2, x4, ...); where shallower depths run out (depth 1 or 2), more deeper."""
    if k < 0:
        raise ValidateError(f"--alternatives must be 0 or more, got {k}")
    shallow = sorted({max(1, round(depth / 2 ** i)) for i in range(1, 12)} - {depth},
                     reverse=True)[: k // 2]
    deep = [depth * 2 ** i for i in range(1, k - len(shallow) + 1)]
    return sorted(shallow) + deep


def recipe(spec: Spec) -> dict[str, Any]:
    """The shape settings of a sweep's runs (base fields, head_dim, width multiple, ff ratio,
    tolerance): what a shape trained with its recipe must share with them."""
    model, grid = spec.raw.get("model", {}), spec.raw.get("grid", {})
    if "n_head" in model:
        raise ValidateError(f"{spec.path}: the spec fixes n_head; validate sizes heads by "
                            "head_dim (set model.head_dim instead)")
    from archfit.sweep.spec import DEFAULT_TOLERANCE, shape_base

    return {"base": shape_base(spec.raw), "head_dim": int(model.get("head_dim", 64)),
            "multiple": int(model.get("multiple", 64)),
            "ff_ratio": float((grid.get("ff_ratios") or [4])[0]),
            "tolerance": float(grid.get("tolerance", DEFAULT_TOLERANCE))}


def recipe_grid(spec: Spec) -> tuple[dict[str, Any], float]:
    """(:func:`archfit.designing.pool_from_grid`'s shape settings, tokens per optimizer step)
    of the runs a sweep spec trains: the shape base, head_dim, width multiple and size
    tolerance of :func:`recipe`, so that a designed run is the run the sweep engine trains."""
    from archfit.train.config import TrainConfig

    r = recipe(spec)
    train = spec.raw.get("train", {})  # unset: the trainer's own defaults
    tps = (float(train.get("batch_size", TrainConfig.batch_size))
           * float(train.get("grad_accum", TrainConfig.grad_accum)))
    return ({"base": r["base"], "head_dim": r["head_dim"], "multiple": r["multiple"],
             "tolerance": r["tolerance"]}, tps * r["base"]["n_ctx"])


def _recommend(fit: Fit, target: float, r: dict[str, Any]) -> Recommendation:
    from archfit.recommending.pipeline import recommend
    from archfit.recommending.request import Block, Grid, RecommendRequest, Target

    b = r["base"]
    kw = {k: b[k] for k in ("mlp", "tied_embeddings", "position", "bias", "norm") if k in b}
    req = RecommendRequest(  # the sweep's own block; what its spec leaves unset: Shape's
        Target(params=target),
        Block(family="gpt2", ff_ratio=r["ff_ratio"], ff_multiple=r["multiple"], **kw),
        Grid(vocab_size=b["vocab_size"], n_ctx=b["n_ctx"], head_dim=r["head_dim"],
             multiple_of=r["multiple"]), fits=(fit,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeWarning)  # judged by training, not here
        return recommend(req)


def rivals(target: float, depth: int, k: int, r: dict[str, Any], notes: list[str]
            ) -> list[Candidate]:
    """The rival shapes: each wanted depth, or the nearest depth on the same side (within a
    quarter of it) whose width lands within the sweep's tolerance of the target size."""
    out: list[Candidate] = []
    taken = {depth}
    for d in rival_depths(depth, k):
        near = sorted(range(max(1, d - d // 4), d + d // 4 + 1), key=lambda x: (abs(x - d), x))
        for x in (x for x in near if x not in taken and (x < depth) == (d < depth)):
            m = iso_param_family(target, [x], [r["ff_ratio"]], head_dim=r["head_dim"],
                                 multiple=r["multiple"], tolerance=r["tolerance"],
                                 **r["base"])[0]
            if m.shape is not None and m.within_tolerance:
                out.append(Candidate("shallower" if x < depth else "deeper", m.shape))
                taken.add(x)
                break
        else:
            notes.append(f"rival depth {d} left out: no depth near it fits {target:.3g} "
                         f"parameters within {r['tolerance']:.0%} with widths in steps of "
                         f"{r['multiple']}")
    return out


def _shape_entry(s: Shape) -> dict[str, Any]:
    e = {"n_layer": s.n_layer, "d_model": s.d_model, "n_head": s.n_head, "d_ff": s.d_ff}
    if s.n_kv_head not in (None, s.n_head):
        e["n_kv_head"] = s.n_kv_head
    return e


def _tag(target: float) -> str:
    return re.sub(r"[^A-Za-z0-9]", "", f"{target:.3g}".replace("e+", "e"))


def plan(fit: Fit | str, params: float, spec: Spec | str, *, alternatives: int = 4,
         seeds: int = 2, tokens: float | None = None, lr: float | None = None) -> Plan:
    """The validation experiment at ``params`` non-embedding parameters: the shape ``fit``
    recommends and ``alternatives`` rivals of the same size spread over depth, each trained
    ``seeds`` times with the recipe (data, context, vocab, head size, optimiser, budget) of
    ``spec``, the sweep the fit came from. ``tokens`` overrides the spec's budget; ``lr`` its
    learning rate (default: the spec's first)."""
    from archfit.laws import load_fit
    from archfit.sweep import load_spec

    fit = load_fit(fit)
    spec = load_spec(spec) if isinstance(spec, str) else spec
    if not 1 <= seeds <= 64:
        raise ValidateError(f"--seeds must be between 1 and 64, got {seeds:,}")
    if not 0 <= alternatives <= 16:
        raise ValidateError(f"--alternatives must be between 0 and 16 rivals, got "
                            f"{alternatives:,}")
    if not (params > 0 and math.isfinite(params)):
        raise ValidateError(f"--params must be a positive size, got {params}")
    from archfit.numbers import check_params_domain

    check_params_domain(params)
    if not isinstance(fit.law_obj, ShapeLaw):
        raise ValidateError(f"{fit.label} is a {fit.law_obj.role} law; validate needs a law "
                            "that recommends a shape (levine, depth-joint, depth-width)")
    r = recipe(spec)
    rec = _recommend(fit, params, r)
    notes: list[str] = []
    cands = [Candidate("recommended", rec.shape),
             *rivals(params, rec.shape.n_layer, alternatives, r, notes)]
    lrs = spec.raw.get("lrs") or [3e-3]
    if lr is None and len(lrs) > 1:
        notes.append(f"the spec has {len(lrs)} learning rates; validation trains at the first, "
                     f"{lrs[0]:g} (--lr to choose)")
    raw = {k: copy.deepcopy(spec.raw[k]) for k in ("data", "model", "train", "executor")
           if k in spec.raw}
    raw.update(name=f"{spec.name}-validate-{_tag(params)}",
               description=(f"archfit validate: {fit.label} at N={params:.3g}, the recommended "
                            f"shape and {len(cands) - 1} rivals x {seeds} seeds"),
               seeds=list(range(seeds)), lrs=[float(lr or lrs[0])],
               budget={"tokens": float(tokens)} if tokens else dict(spec.raw.get("budget", {})),
               grid={"shapes": [_shape_entry(c.shape) for c in cands]})
    return Plan(params, fit, rec, cands, raw, seeds, notes)


def run(p: Plan, out: str, executor: str = "local", *, concurrency: int | None = None,
        threads: int | None = None, slurm: dict[str, Any] | None = None,
        ray: dict[str, Any] | None = None, timeout: float | None = None,
        on_done: Callable[[str, str], None] | None = None) -> Validation:
    """Write the plan to ``out/validate.toml``, train its unfinished runs in ``out/runs`` on
    ``executor``, collect them into ``out/validate.parquet`` and judge them."""
    from archfit.sweep import store
    from archfit import sweep as sw

    os.makedirs(out, exist_ok=True)
    spec_path = p.write(os.path.join(out, "validate.toml"))
    spec = sw.load_spec(spec_path, check_data=True)
    runs = os.path.join(out, "runs")
    sw.check_executor(executor)
    dirs = sw.prepare_dirs(spec, runs)
    sw.heal(spec, runs)
    sw.execute(spec, runs, dirs, executor, concurrency=concurrency, threads=threads,
               slurm=slurm, ray=ray, timeout=timeout, on_done=on_done)
    path, _, _ = store.collect(spec, runs, os.path.join(out, "validate.parquet"))
    return judge(p, path)


# ------------------------------------------------------------------------------- judging
@dataclass
class Validation:
    """What training showed: one row per shape (predicted and measured loss, rank), the
    verdict with its reason, the noise it was judged against, and the interval coverage."""

    target: float
    fit: str
    law: str
    rows: list[dict[str, Any]]
    verdict: str
    reason: str
    noise: dict[str, Any]
    coverage: dict[str, Any] | None
    recommendation_verdict: str
    notes: list[str] = field(default_factory=list)
    table: str | None = None

    def to_dict(self) -> dict[str, Any]:
        from archfit.io import jsonable

        return jsonable({"target": self.target, "fit": self.fit, "law": self.law,
                         "verdict": self.verdict, "reason": self.reason, "noise": self.noise,
                         "coverage": self.coverage, "shapes": self.rows,
                         "recommendation_verdict": self.recommendation_verdict,
                         "notes": self.notes, "table": self.table,
                         "conventions": {"params": "non-embedding parameters (Kaplan's N)",
                                         "loss": "final validation loss, nats/token",
                                         "low, high": f"{LEVEL:.0%} prediction interval, "
                                                      "fitted: the fit's draws and the runs' "
                                                      "scatter about the law"}})

    def to_frame(self) -> Any:
        import polars as pl

        keys = ("role", *SHAPE_KEYS, "params", "predicted", "low", "high", "measured", "sd",
                "seeds", "rank")
        return pl.DataFrame([{k: r.get(k) for k in keys} for r in self.rows])

    def line(self) -> str:
        return f"validation at {self.target:.3g}: {self.verdict.upper()} - {self.reason}"

    def text(self) -> str:
        """A table of the shapes and the verdict, for a terminal."""
        lines = [f"validation of {self.fit} at {self.target:.3g} non-embedding parameters "
                 f"(the recommendation's own verdict: {self.recommendation_verdict})",
                 f"  {'':12}{'layers':>7}{'d_model':>9}{'params':>11}"
                 f"{'predicted [95% PI, fitted]':>28}{'measured ± sd':>20}{'rank':>6}"]
        for r in self.rows:
            pred = (f"{r['predicted']:.4f} [{r['low']:.3f}, {r['high']:.3f}]"
                    if r.get("low") is not None else
                    f"{r['predicted']:.4f}" if r.get("predicted") is not None else "-")
            meas = (f"{r['measured']:.4f} ± {r['sd']:.4f}" if r.get("sd") is not None else
                    f"{r['measured']:.4f}" if r.get("measured") is not None else "no runs")
            lines.append(f"  {r['role']:12}{r['n_layer']:>7}{r['d_model']:>9,}"
                         f"{r['params']:>11,}{pred:>28}{meas:>20}{r.get('rank') or '-':>6}")
        if self.coverage:
            c = self.coverage
            lines.append(f"  measured losses inside their {LEVEL:.0%} prediction intervals: "
                         f"{c['inside']} of {c['runs']} runs")
        lines += [f"  note: {n}" for n in self.notes]
        lines.append(self.line())
        return wrap("\n".join(lines))


def _measured(frame: Any, s: Shape) -> Any:
    import polars as pl

    return frame.filter((pl.col("n_layer") == s.n_layer) & (pl.col("d_model") == s.d_model))


def _predicted(fit: Fit, sub: Any) -> dict[str, Any]:
    """The law's loss for one shape's runs (they share N, depth and tokens): the point and the
    95% prediction interval, and how many of the runs fell inside it."""
    law = fit.law_obj
    if not law.predicts_loss or sub.height == 0:
        return {}
    cols = {c: sub[c].to_numpy().astype(float) for c in sub.columns if sub[c].dtype.is_numeric()}
    try:
        pred, lo, hi = fit.band(cols, LEVEL)
    except (FitError, ArchfitError):
        return {"predicted": float(law.predict(fit.params, cols)[0])}
    loss = cols["loss"]
    return {"predicted": float(pred[0]), "low": float(lo[0]), "high": float(hi[0]),
            "inside": int(((loss >= lo) & (loss <= hi)).sum())}


def _row(c: Candidate, sub: Any, fit: Fit) -> dict[str, Any]:
    losses = [float(x) for x in sub["loss"].to_list()] if sub.height else []
    n = len(losses)
    mean = sum(losses) / n if n else math.nan
    sd = (math.sqrt(sum((x - mean) ** 2 for x in losses) / (n - 1)) if n > 1 else None)
    mean = mean if n else None
    row = {"role": c.role, **{k: getattr(c.shape, k) for k in SHAPE_KEYS},
           "params": c.shape.params_non_embedding, "losses": losses, "seeds": n,
           "measured": mean, "sd": sd}
    row.update(_predicted(fit, sub))
    return row


def noise_threshold(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The pooled seed standard deviation, its dof and the t quantile for a 95% test."""
    dof = sum(r["seeds"] - 1 for r in rows if r["seeds"] > 1)
    if dof == 0:
        return {"pooled_sd": None, "dof": 0, "t": None}
    ss = sum(r["sd"] ** 2 * (r["seeds"] - 1) for r in rows if r["seeds"] > 1)
    from scipy.stats import t as student_t

    return {"pooled_sd": math.sqrt(ss / dof), "dof": dof,
            "t": float(student_t.ppf(0.5 + LEVEL / 2, dof))}


def _beyond(a: Mapping[str, Any], b: Mapping[str, Any], noise: Mapping[str, Any]) -> float:
    """The smallest difference of the two shapes' mean losses that is beyond the noise."""
    return noise["t"] * noise["pooled_sd"] * math.sqrt(1 / a["seeds"] + 1 / b["seeds"])


def verdict(rows: list[dict[str, Any]], noise: Mapping[str, Any]) -> tuple[str, str]:
    """held / missed / inconclusive, with the reason in numbers (rows: one per shape, the
    recommended one first, each with measured, seeds and sd)."""
    done = [r for r in rows if r["seeds"]]
    rec = rows[0]
    if not rec["seeds"]:
        return "inconclusive", "the recommended shape has no finished run"
    if len(done) < 2:
        return "inconclusive", "no rival has a finished run to compare with"
    if noise["pooled_sd"] is None:
        return "inconclusive", ("one seed per shape gives no measure of the seed noise; "
                                "use --seeds 2 or more")
    best = min(done, key=lambda r: r["measured"])
    worst = max(done, key=lambda r: r["measured"])
    sd = noise["pooled_sd"]
    if worst["measured"] - best["measured"] <= _beyond(best, worst, noise):
        return "inconclusive", (f"the shapes' mean losses span {worst['measured'] - best['measured']:.4f}, "
                                f"within the seed noise (sd {sd:.4f}, {noise['dof']} dof)")
    gap = rec["measured"] - best["measured"]
    if best is rec:
        return "held", (f"the recommended shape ({_layers(rec)}) has the lowest loss, "
                        f"{rec['measured']:.4f}; the next best is "
                        f"{sorted(r['measured'] for r in done)[1] - rec['measured']:.4f} higher "
                        f"(seed sd {sd:.4f})")
    if gap <= _beyond(rec, best, noise):
        return "held", (f"the recommended shape ({_layers(rec)}) is within the seed noise of "
                        f"the best ({_layers(best)}): {gap:.4f} higher, less "
                        f"than {_beyond(rec, best, noise):.4f} (seed sd {sd:.4f})")
    return "missed", (f"{best['role']} {best['n_layer']} x {best['d_model']:,} beats the "
                      f"recommended {rec['n_layer']} x {rec['d_model']:,} by {gap:.4f} nats "
                      f"({gap / rec['measured']:.1%}), beyond the seed noise "
                      f"({_beyond(rec, best, noise):.4f}; sd {sd:.4f}, {noise['dof']} dof)")


def _layers(row: dict[str, Any]) -> str:
    return f"{row['n_layer']} layer" + ("" if row["n_layer"] == 1 else "s")


def judge(p: Plan, table: str) -> Validation:
    """Read the trained runs of plan ``p`` from the run table at ``table`` and judge them."""
    from archfit.sweep.store import read_runs

    t = read_runs([table], require_loss=False)
    frame = t.frame
    if "loss" not in frame.columns:
        frame = frame.with_columns(loss=None)
    import polars as pl

    frame = frame.filter(pl.col("loss").is_not_null())
    rows = [_row(c, _measured(frame, c.shape), p.fit) for c in p.candidates]
    ranked = sorted((r for r in rows if r["seeds"]), key=lambda r: r["measured"])
    for i, r in enumerate(ranked):
        r["rank"] = i + 1
    noise = noise_threshold(rows)
    v, why = verdict(rows, noise)
    inside = [r["inside"] for r in rows if "inside" in r]
    cov = ({"inside": sum(inside), "runs": sum(r["seeds"] for r in rows if "inside" in r),
            "level": LEVEL} if inside else None)
    notes = list(p.notes)
    if not p.fit.law_obj.predicts_loss:
        notes.append(f"{p.fit.law} predicts the optimal shape, not loss: no predicted losses")
    missing = [r for r in rows if r["seeds"] < p.seeds]
    if missing:
        notes.append(f"{len(missing)} shape(s) have fewer finished runs than the {p.seeds} "
                     "seeds planned (failed or not yet run)")
    return Validation(p.target, p.fit.label, p.fit.law, rows, v, why, noise, cov,
                      p.recommendation.trust["verdict"], notes, table)
