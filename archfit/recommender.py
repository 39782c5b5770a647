"""From a law to a buildable shape: ``recommend(params=1e12)`` or ``recommend(compute=1e24)``.

Conventions: the target is Kaplan's N (non-embedding parameters) for shape laws; with
``compute=C`` the compute-optimal N_opt(C) of a compute law is in that fit's own convention
(total parameters for Hoffmann et al. and Epoch), and the shape is sized so its
``params_total`` lands on N_opt.

This module names no law: it asks each fit's law object for its role and its optimum.
numpy-free (``archfit recommend`` is a cold path).

About 720 lines because the option checks, the candidate shapes, their ranking and the
record they produce are one pipeline read top to bottom; objectives beyond loss live apart
(:mod:`archfit.objectives`).
"""

from __future__ import annotations

import math
import os
import warnings
from collections import namedtuple

from archfit.errors import RecommendError, ShapeError, UninformativeWarning
from archfit.laws import Fit, load_fit
from archfit.laws.published import DEFAULT_COMPUTE_LAW, DEFAULT_SHAPE_LAW
from archfit.families import iso_param_family
from archfit.shapes import ARCH_FIELDS, TRAIN_FLOPS_CONVENTION, Shape, kaplan_width
from archfit.numbers import fmt_range
from archfit.record import field, record, replace

TYPE_CHECKING = False  # typing.TYPE_CHECKING would import typing on recommend's cold path
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence


@record(repr=False)  # __repr__ below
class Recommendation:
    """The recommended shape, its alternatives and how far to trust them."""

    shape: Shape
    target_params: float
    target_convention: str
    law: str
    law_formula: str
    law_source: str
    n_layer_opt: float
    d_model_opt: float
    rel_error: float
    ci: dict[str, list[float]] | None
    alternatives_records: list[dict[str, Any]]
    compute: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    trust: dict[str, Any] = field(default_factory=dict)
    # every buildable shape within 2% of the target and its shape-law loss penalty (None
    # without a loss model): what objectives other than loss choose from (archfit.objectives)
    candidates: list[tuple[Shape, float | None]] = field(default_factory=list, repr=False)
    shape_fit: Any = field(default=None, repr=False)
    fits: dict[str, Any] = field(default_factory=dict, repr=False)
    # under a weak or uninformative answer: what 'archfit design' would run first (one line),
    # and the design it came from (archfit.designing.Design, for its figure)
    next_runs: str | None = None
    next_design: Any = field(default=None, repr=False)
    # the depths within a tolerance of the optimum's loss, with CIs on the ends
    # (archfit.near_optimal), and what prices the alternatives
    near_optimal: dict[str, Any] | None = None
    loss_model: dict[str, Any] | None = None

    @property
    def alternatives(self) -> Any:
        """The top-k shapes around the optimum as a polars DataFrame (``.to_pandas()`` works)."""
        import polars as pl

        return pl.DataFrame(self.alternatives_records)

    def to_dict(self) -> dict[str, Any]:
        s = self.shape
        out: dict[str, Any] = {
            "n_layer": s.n_layer, "d_model": s.d_model, "n_head": s.n_head,
            "n_kv_head": s.n_kv_head, "head_dim": s.head_dim, "d_ff": s.d_ff,
            "ff_ratio": s.ff_ratio, "mlp": s.mlp, "vocab_size": s.vocab_size, "n_ctx": s.n_ctx,
            "tied_embeddings": s.tied_embeddings, "position": s.position, "norm": s.norm,
            "bias": s.bias,
            "params_non_embedding": s.params_non_embedding, "params_total": s.params_total,
            "params_embedding": s.params_embedding,
            "target_params": self.target_params, "target_convention": self.target_convention,
            "rel_error": self.rel_error,
            "n_layer_opt": self.n_layer_opt, "d_model_opt": self.d_model_opt,
            "law": self.law, "law_formula": self.law_formula, "law_source": self.law_source,
            "flops_per_token": s.flops_per_token("kaplan_train"),
            "flops_per_token_convention": TRAIN_FLOPS_CONVENTION,
            "alternatives": self.alternatives_records,
            "notes": self.notes,
        }
        if self.ci is not None:
            out["ci"] = self.ci
        if self.compute is not None:
            out["compute"] = self.compute
        out["trust"] = self.trust
        out["next_runs"] = self.next_runs
        out["near_optimal"] = self.near_optimal
        out["loss_model"] = self.loss_model
        return out

    def to_json(self, path: str | os.PathLike[str] | None = None, indent: int = 2) -> str:
        """The record as JSON (what ``recommend --json`` prints); written atomically to
        ``path`` when given."""
        import json

        from archfit.io import atomic_write, jsonable

        text = json.dumps(jsonable(self.to_dict()), indent=indent, allow_nan=False)
        if path is not None:
            atomic_write(path, text + "\n")
        return text

    def to_frame(self) -> Any:
        """The recommended shape and its alternatives, one row each, as a polars frame (the
        first row is the recommendation), with the verdict on every row."""
        import polars as pl

        return pl.DataFrame(self.alternatives_records).with_columns(
            pl.lit(self.trust.get("verdict")).alias("verdict"), pl.lit(self.law).alias("law"),
            pl.lit(self.target_params).alias("target_params"))

    def text(self) -> str:
        s, ci = self.shape, self.ci or {}
        lines = []
        if self.compute:
            c = self.compute
            lines.append(f"compute {c['C']:.3g} FLOPs (C = 6 N D), law {c['law']}:")
            for k, label in (("N_opt", "N_opt (parameters)"), ("D_opt", "D_opt (tokens)"),
                             ("tokens_per_param", "tokens per parameter")):
                kci = c.get(f"{k}_ci")
                lines.append(f"  {label:<22}{c[k]:.4g}" + (
                    f"  [{kci[0]:.4g}, {kci[1]:.4g}] (95% CI)" if kci else
                    "  (no CI: the fit has no parameter draws)"))
        lines += [f"target: {self.target_params:.4g} parameters ({self.target_convention})",
                  f"law: {self.law}: {self.law_formula}", f"     {self.law_source}"]
        dci = f" {fmt_range(*ci['n_layer'])}" if "n_layer" in ci else ""
        wci = f" [{ci['d_model'][0]:,.0f}, {ci['d_model'][1]:,.0f}]" if "d_model" in ci else ""
        moved = (self.near_optimal or {}).get("centre_from") not in (None, self.law)
        lines += [(f"optimum: not located by this fit (its 95% bootstrap CI{dci}); the answer "
                   f"is the near-optimal set, centred at depth {self.n_layer_opt:.1f}, width "
                   f"{self.d_model_opt:,.0f}") if moved else
                  (f"optimum (real-valued): depth {self.n_layer_opt:.1f}{dci}, "
                   f"width {self.d_model_opt:,.0f}{wci}" + ("  (95% bootstrap CI)" if ci else "")),
                  *_near_lines(self.near_optimal), "", _verdict_line(self.trust), "",
                  f"recommended: n_layer {s.n_layer}, d_model {s.d_model:,}, n_head {s.n_head}"
                  f" (head_dim {s.head_dim}, kv heads {s.n_kv_head}), d_ff {s.d_ff:,} "
                  f"({s.ff_ratio:.3g}x {s.mlp}), vocab {s.vocab_size:,}, ctx {s.n_ctx:,}"]
        total = self.compute is not None and "total" in self.target_convention
        err = f"; {self.rel_error:+.2%} from target"
        lines += [f"  params_non_embedding {s.params_non_embedding:,} (Kaplan's N"
                  f"{'' if total else err})",
                  f"  params_total         {s.params_total:,} (embeddings "
                  f"{'tied' if s.tied_embeddings else 'untied'}{err if total else ''})",
                  f"  training FLOPs/token {s.flops_per_token('kaplan_train'):.4g} "
                  f"({TRAIN_FLOPS_CONVENTION})"]
        lines += [f"note: {n}" for n in self.notes]
        if self.next_runs:
            lines.append(f"next: {self.next_runs}")
        return "\n".join(lines)

    def summary_line(self) -> str:
        """One line: the shape, its total parameters, the law and the verdict with its reasons
        (what an export prints beside the config it writes to stdout)."""
        s = self.shape
        return (f"recommended: {s.n_layer} x {s.d_model:,} (heads {s.n_head}, kv {s.n_kv_head}, "
                f"d_ff {s.d_ff:,}), params_total {s.params_total:,}; law {self.law}; verdict "
                f"{self.trust.get('verdict')}: " + "; ".join(self.trust.get("reasons", [])))

    def alternatives_text(self) -> str:
        """The recommended shape and its alternatives as an aligned text table (first row:
        the recommendation)."""
        cols = [("n_layer", "layers"), ("d_model", "d_model"), ("n_head", "heads"),
                ("d_ff", "d_ff"), ("params_non_embedding", "non-emb params"),
                ("rel_error", "vs target"), ("loss_penalty", "loss penalty")]

        rel = (self.loss_model or {}).get("unit") == "fraction of the loss"

        def cell(k: str, v: Any) -> str:
            if k == "rel_error":
                return f"{v:+.2%}"
            if k == "loss_penalty":
                return "-" if v is None else (f"{v:+.3%}" if rel else f"{v:.4f}")
            return f"{v:,}" if isinstance(v, int) else str(v)

        lines = ["alternatives (first row = recommended):",
                 "  ".join(f"{h:>15}" for _, h in cols)]
        lines += ["  ".join(f"{cell(k, row[k]):>15}" for k, _ in cols)
                  for row in self.alternatives_records]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()


def _near_lines(n: dict[str, Any] | None) -> list[str]:
    """The near-optimal set in words: its range, the ends' CIs, its basis and the pick's rule."""
    if not n:
        return []
    lo, hi = n["n_layer"]
    ci = n.get("ci") or {}

    def end(k: str) -> str:
        c = ci.get(k)
        if not c or len(c) != 2:
            return ""
        return " [" + ", ".join("unbounded" if v is None else f"{v:.3g}" for v in c) + "]"

    return [f"near-optimal (predicted loss within {n['tolerance']:.2%} of the optimum's): depth "
            f"{lo:.3g}{end('n_layer_low')} to {hi:.3g}{end('n_layer_high')}, width "
            f"{n['d_model'][1]:,.0f} to {n['d_model'][0]:,.0f}"
            + (f" (95% CI of each end: {ci['method']})" if ci.get("method") else
               " (no CI: the fit carries no parameter draws)"),
            f"  basis: {n['basis']}; the pick: {n['rule']} ({n['centre']:.1f})"]


# validated options: the shape's fixed fields (base: Shape fields other than depth, width,
# heads, d_ff) and the width constraints (step: the width step, a multiple of head_dim and of
# tp heads; ff_multiple: d_ff is a multiple of this). namedtuples: cheap to define on the cold
# path, with neither typing nor dataclasses
_Options = namedtuple("_Options", "base head_dim multiple_of step n_kv_head tp top ff_multiple")


# total: size params_total (not the non-embedding count) to the target
_Target = namedtuple("_Target", "value convention total compute")


def _verdict_line(t: dict[str, Any]) -> str:
    v = t.get("verdict", "?")
    head = {"informative": "verdict: informative",
            "weak": "verdict: WEAK - use with care",
            "uninformative": "verdict: UNINFORMATIVE - the evidence does not support this shape"
            }.get(v, f"verdict: {v}")
    return "\n".join([head] + [f"  - {r}" for r in t.get("reasons", [])])


def _lcm(a: int, b: int) -> int:
    return a * b // math.gcd(a, b)


def _validate(params: float | None, compute: float | None, kw: dict[str, Any]) -> _Options:
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
    return _Options(base, head_dim, multiple_of, step, kw["n_kv_head"], tp, kw["top"],
                    ff_multiple)


def _given(fit: Fit | str | Sequence[Fit | str] | None) -> list[Fit | str]:
    return [] if fit is None else ([fit] if isinstance(fit, (str, Fit)) else list(fit))


def _fits_by_role(fit: Fit | str | Sequence[Fit | str] | None) -> dict[str, Fit]:
    by_role: dict[str, Fit] = {}
    for f in map(load_fit, _given(fit)):
        role = f.law_obj.role
        if role not in ("shape", "compute", "ff"):
            raise RecommendError(
                f"a {f.law!r} fit ({f.name or 'file'}) says nothing about depth or width; "
                "give a shape-law fit (levine, depth-width), a compute-law fit (chinchilla; "
                "--compute) or an ff-ratio fit (--ff-ratio auto)")
        by_role[role] = f
    by_role.setdefault("shape", load_fit(DEFAULT_SHAPE_LAW))
    return by_role


def _target(params: float | None, compute: float | None, fits: dict[str, Fit]) -> _Target:
    from archfit.numbers import check_params_domain

    if compute is None:
        check_params_domain(float(params))  # type: ignore[arg-type]
        return _Target(float(params), fits["shape"].law_obj.target_convention,  # type: ignore[arg-type]
                       False, None)
    cf = fits.setdefault("compute", load_fit(DEFAULT_COMPUTE_LAW))
    n_opt, d_opt = cf.law_obj.compute_optimal(cf.params, compute)
    check_params_domain(float(n_opt), f"N_opt at {compute:.3g} FLOPs")
    info = {"C": compute, "N_opt": float(n_opt), "D_opt": float(d_opt), "law": cf.label,
            "convention": cf.conventions.get("params", "as fitted"),
            "tokens_per_param": float(d_opt) / float(n_opt)}
    opt = cf.optimum(compute)  # 95% intervals over the fit's parameter draws (None without)
    for k in ("N_opt", "D_opt", "tokens_per_param"):
        info[f"{k}_ci"] = opt[f"{k}_ci"]
    return _Target(float(n_opt), f"N_opt of {info['law']}: {info['convention']}",
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


def _ff_rule(ff_ratio: float | str, d_ff_rule: Callable[[int], int] | None,
             fits: dict[str, Fit], N: float, opts: _Options, notes: list[str]
             ) -> tuple[float, Callable[[int], int] | None]:
    """The ff ratio and the d_ff rule: a framework's, Llama's exactly, or none."""
    if d_ff_rule is None and ff_ratio == "llama":  # Llama's d_ff rule (archfit.formats owns it)
        from archfit.formats import llama_ffn_hidden

        ff_multiple = opts.ff_multiple
        return 8 / 3, lambda d: llama_ffn_hidden(d, ff_multiple)
    return _ff(ff_ratio, fits, N, notes), d_ff_rule


def _optimum(shape_fit: Fit, target: _Target, opts: _Options) -> tuple[float, float, float]:
    """(n_layer*, d_model*, the non-embedding size they are for). With a total-parameter target
    the embedding share is taken off by fixed-point iteration on the optimal width."""
    law, N_ne = shape_fit.law_obj, target.value
    L_opt = d_opt = math.nan
    for _ in range(4 if target.total else 1):
        L_opt, d_opt = law.optimum(shape_fit.params, N_ne)
        if not (math.isfinite(L_opt) and L_opt > 0):
            raise RecommendError(f"the {shape_fit.law} fit gives no finite optimal depth at "
                                 f"{N_ne:.3g} parameters")
        if target.total:
            w = max(opts.step, int(round(d_opt / opts.step)) * opts.step)
            emb = Shape(n_layer=1, d_model=w, n_head=w // opts.head_dim,
                        **opts.base).params_embedding
            N_ne = max(target.value - emb, target.value * 0.05)
    return L_opt, d_opt, N_ne


DEPTH_SPAN = (0.75, 1.3)  # candidate depths around the optimum (recommend --objective: wider)


def _candidates(N_ne: float, L_opt: float, ff: float, opts: _Options,
                span: tuple[float, float] = DEPTH_SPAN,
                d_ff_rule: Callable[[int], int] | None = None) -> list[Shape]:
    if kaplan_width(N_ne, L_opt) < opts.step / 2:
        raise RecommendError(
            f"the law's optimal depth at {N_ne:.3g} parameters is {L_opt:.3g} layers, which "
            f"leaves a width below one step of {opts.step}: no buildable shape is near it "
            "(check the fit's verdict; the data may not constrain the optimum)")
    lo = max(1, int(math.floor(L_opt * span[0])))
    hi = max(lo + 1, int(math.ceil(L_opt * span[1])))
    if hi - lo + 1 > 64:  # very deep optima: ~64 depths spread over the range, and its centre
        depths = {round(lo + i * (hi - lo) / 63) for i in range(64)}  # never the whole range
        depths |= {max(1, math.floor(L_opt)), math.ceil(L_opt)}
    else:
        depths = set(range(lo, hi + 1))
    try:
        members = iso_param_family(N_ne, sorted(depths), [ff], head_dim=opts.head_dim,
                                   multiple=opts.step, ff_multiple=opts.ff_multiple,
                                   ff_slack=0.05, tolerance=0.02, n_kv_head=opts.n_kv_head,
                                   d_ff_rule=d_ff_rule,
                                   **opts.base)
    except ShapeError as e:
        raise RecommendError(str(e)) from None
    cands = [m.shape for m in members
             if m.shape is not None and not (opts.tp and m.shape.n_head % opts.tp)]
    if not cands:
        raise RecommendError("no buildable shape near the optimum: loosen --multiple-of, "
                             "--head-dim or --tp")
    return cands


def _rank(cands: list[Shape], target: _Target, shape_fit: Fit, L_opt: float, N_ne: float,
          opts: _Options, notes: list[str],
          priced: Callable[[Shape], float | None] | None = None,
          ) -> tuple[Shape, list[dict[str, Any]], list[tuple[Shape, float | None]]]:
    """Candidates within 2% of the target, compared at the same size. With a loss model the
    recommendation is the argmin of the law's predicted loss at the target size and every
    penalty is measured from it (so none is negative); without one, it is the integer depth
    nearest the optimum and the alternatives are ranked by distance from it."""
    def err(s: Shape) -> float:
        return ((s.params_total if target.total else s.params_non_embedding)
                - target.value) / target.value

    within = [s for s in cands if abs(err(s)) <= 0.02]
    if not within:
        closest = min(cands, key=lambda s: abs(err(s)))
        raise RecommendError(
            f"no shape near the optimal depth lands within 2% of {target.value:.3g} parameters "
            f"with widths in steps of {opts.step} (closest: {closest.n_layer} x "
            f"{closest.d_model}, {err(closest):+.0%}); lower --multiple-of / --head-dim (or --tp)")
    law = shape_fit.law_obj
    loss = {s: (priced(s) if priced else law.shape_loss(shape_fit.params, shape_fit.extra, s,
                                                        N_ne)) for s in within}
    has_loss = all(v is not None and math.isfinite(v) for v in loss.values())
    if has_loss:
        best = min(within, key=lambda s: (loss[s], abs(err(s))))
    else:
        best = min(within, key=lambda s: (abs(math.log(s.n_layer / L_opt)), abs(err(s))))
        notes.append("alternatives are ranked by distance from the optimal depth: this fit has "
                     "no loss model to predict their loss penalty")
    rows = [{"n_layer": s.n_layer, "d_model": s.d_model, "n_head": s.n_head, "d_ff": s.d_ff,
             "params_non_embedding": s.params_non_embedding, "params_total": s.params_total,
             "rel_error": err(s),
             "loss_penalty": loss[s] - loss[best] if has_loss else None,  # type: ignore[operator]
             "aspect_ratio": s.aspect_ratio, "recommended": s == best} for s in within]
    rows.sort(key=lambda r: (not r["recommended"], r["loss_penalty"] if has_loss else
                             abs(math.log(r["n_layer"] / L_opt)), abs(r["rel_error"])))
    pen = [(s, loss[s] - loss[best] if has_loss else None) for s in within]  # type: ignore[operator]
    _price_constraints(best, L_opt, N_ne, shape_fit, opts, notes, priced)
    return best, rows[: opts.top + 1], pen


CONSTRAINT_NOTE = "the constraints"  # how the note on a depth moved by constraints begins


def _price_constraints(best: Shape, L_opt: float, N_ne: float, shape_fit: Fit, opts: _Options,
                       notes: list[str],
                       priced: Callable[[Shape], float | None] | None = None) -> None:
    """A note when the width step (head_dim, --tp, --kv-heads, --multiple-of) moves the depth
    more than 10% from the law's optimum, with the predicted loss cost where the law has one."""
    move = best.n_layer / L_opt - 1
    if abs(move) <= 0.10:
        return
    why = [f"widths in steps of {opts.step}"] + ([f"--tp {opts.tp}"] if opts.tp else []) + (
        [f"{opts.n_kv_head} kv heads"] if opts.n_kv_head else [])
    law = shape_fit.law_obj
    cost = ""
    price = priced or (lambda s: law.shape_loss(shape_fit.params, shape_fit.extra, s, N_ne))
    rel = False
    try:  # shape_loss sizes each depth to exactly N: the cost is the depth's alone
        at_opt = price(replace(best, n_layer=max(1, round(L_opt))))
        here = price(best)
        rel = law.loss_level(shape_fit.params, shape_fit.extra, N_ne) == 1.0
    except (ArithmeticError, ValueError, ShapeError):
        at_opt = here = None
    if at_opt is not None and here is not None and math.isfinite(here - at_opt):
        cost = (f"; predicted loss cost {here - at_opt:+.3%} of the loss against the optimum "
                "(Kaplan et al. 2020's curvature)" if rel and not priced else
                f"; predicted loss cost {here - at_opt:+.4f} nats/token against the optimum")
    elif here is None:
        cost = ("; this law has no loss model to price it (a depth-joint or depth-width fit "
                "has one: archfit fit --law depth-joint)")
    notes.append(f"{CONSTRAINT_NOTE} ({', '.join(why)}) put the depth at {best.n_layer}, "
                 f"{move:+.0%} from the law's optimum {L_opt:.1f}{cost}"
                 + _nearer(best, L_opt, N_ne))


NEARER_SIZE = 0.10  # how far from the target size a shape nearer the optimum may be offered


def _nearer(best: Shape, L_opt: float, N: float) -> str:
    """The shape of the same width, heads and d_ff whose depth is nearest the optimum while its
    size stays within 10% of the target (a different size: offered, never chosen)."""
    lo, hi = sorted((best.n_layer, max(1, round(L_opt))))
    fits = [replace(best, n_layer=L) for L in range(lo, hi + 1) if L != best.n_layer]
    fits = [s for s in fits if abs(s.params_non_embedding / N - 1) <= NEARER_SIZE]
    if not fits:
        return ""
    s = min(fits, key=lambda x: abs(math.log(x.n_layer / L_opt)))
    return (f"; nearer the optimum with the same constraints: {s.n_layer} x {s.d_model:,} "
            f"({s.n_layer / L_opt - 1:+.0%} from it) at {s.params_non_embedding:,} "
            f"non-embedding parameters ({s.params_non_embedding / N - 1:+.1%} from the target)")


def recommend(
    params: float | None = None,
    *,
    compute: float | None = None,
    fit: Fit | str | Sequence[Fit | str] | None = None,
    vocab_size: int = 50257,
    n_ctx: int = 2048,
    head_dim: int = 128,
    multiple_of: int = 128,
    ff_ratio: float | str = 4.0,
    mlp: str = "gelu",
    n_kv_head: int | None = None,
    tp: int | None = None,
    top: int = 5,
    tied_embeddings: bool = True,
    position: str = "learned",
    bias: bool = True,
    norm: str = "layernorm",
    ff_multiple: int | None = None,
    depth_span: tuple[float, float] = DEPTH_SPAN,
    strict: bool = False,
    d_ff_rule: Callable[[int], int] | None = None,
    tolerance: float = 0.005,
) -> Recommendation:
    """Recommend a buildable shape for ``params`` non-embedding parameters (or for a compute
    budget ``compute`` in FLOPs, via a compute law's N_opt).

    ``fit`` names published fits (``levine2020``, ``epoch2024``, ...) or fit files, one per role:
    a shape law (default levine2020), a compute law for ``compute`` (default epoch2024) and an
    ff-ratio fit when ``ff_ratio="auto"``. Shape fields use :class:`Shape`'s names.
    ``d_ff`` is a multiple of ``ff_multiple`` (default: ``multiple_of``). ``depth_span``:
    candidate depths as multiples of the optimal depth (wider for :mod:`archfit.objectives`).
    ``d_ff_rule``: d_ff as a function of d_model where a framework fixes it (nanoGPT's 4 d).
    ``tolerance``: the near-optimal set holds the depths whose predicted loss is within this
    fraction of the optimum's (:mod:`archfit.near_optimal`); the pick is its centre in log
    depth.

    When the verdict is ``uninformative`` this warns (:class:`UninformativeWarning`) or, with
    ``strict=True``, raises :class:`RecommendError`: the evidence does not support the shape.
    """
    kw = dict(vocab_size=vocab_size, n_ctx=n_ctx, head_dim=head_dim, multiple_of=multiple_of,
              mlp=mlp, n_kv_head=n_kv_head, tp=tp, top=top, tied_embeddings=tied_embeddings,
              position=position, bias=bias, norm=norm, ff_multiple=ff_multiple)
    opts = _validate(params, compute, kw)
    given = [load_fit(f) for f in _given(fit)]
    fits = _fits_by_role(given)
    if params is not None and "compute" in fits and not any(
            f.law_obj.role == "shape" for f in given):
        raise RecommendError(
            f"a {fits['compute'].law} fit answers --compute (a FLOP budget), not --params; for "
            "--params give a shape-law fit (levine, depth-joint, depth-width) or drop --fit to "
            f"use {DEFAULT_SHAPE_LAW}")
    target = _target(params, compute, fits)
    notes: list[str] = []
    ff, rule = _ff_rule(ff_ratio, d_ff_rule, fits, target.value, opts, notes)
    shape_fit = fits["shape"]
    L_opt, d_opt, N_ne = _optimum(shape_fit, target, opts)
    near, priced = _near(shape_fit, N_ne, tolerance, notes)
    if near is not None and near["centre_from"] != shape_fit.label:  # the set's centre
        L_opt, d_opt = near["centre"], kaplan_width(N_ne, near["centre"])
    cands = _candidates(N_ne, L_opt, ff, opts, depth_span, rule)
    law = shape_fit.law_obj
    ci = shape_fit.optimum_ci(N_ne)
    if ci is None:
        notes.append(f"{shape_fit.name or 'this fit'} carries no bootstrap samples: no CI on the "
                     "optimum (fit your own with --bootstrap to get one)")
    best, rows, pen = _rank(cands, target, shape_fit, L_opt, N_ne, opts, notes, priced)
    _penalty_cis(rows, near, shape_fit, N_ne, best)
    notes += [w] if (w := _below_data(shape_fit, N_ne)) else []
    verdict = _verdict(shape_fit, N_ne, fits if compute is not None else {}, compute, strict)
    src = shape_fit.source or (", ".join(i.get("path", "") for i in shape_fit.inputs)
                               or "fitted by archfit")
    return Recommendation(
        shape=best, target_params=target.value, target_convention=target.convention,
        law=shape_fit.label, law_formula=law.formula, law_source=src, n_layer_opt=L_opt,
        d_model_opt=d_opt, rel_error=rows[0]["rel_error"], ci=ci, alternatives_records=rows,
        compute=target.compute, notes=notes, trust=verdict.to_dict(), candidates=pen,
        shape_fit=shape_fit, fits=fits, **next_runs(shape_fit, N_ne, verdict.verdict),
        near_optimal=near, loss_model=(near or {}).get("loss_model"),
    )


def _near(fit: Fit, N: float, tol: float, notes: list[str]
          ) -> tuple[dict[str, Any] | None, Callable[[Shape], float | None] | None]:
    """The near-optimal set (archfit.near_optimal) and, when its centre or its prices are
    not the fit's own, what prices a shape instead: the pricing fit's penalty at the same
    distance in log depth from the set's centre as from that fit's optimum."""
    from archfit.near_optimal import near_optimal, pricing

    try:
        near = near_optimal(fit, N, tol)
    except ValueError as e:
        raise RecommendError(str(e)) from None
    if near is None:
        return None, None
    src = pricing(fit, near)
    if src is fit and near["centre_from"] == fit.label:
        return near, None
    law, L0, c = src.law_obj, src.law_obj.optimum(src.params, N)[0], near["centre"]
    notes.append(f"the near-optimal set's basis: {near['basis']}")

    def priced(s: Shape) -> float | None:
        return law.depth_loss(src.params, src.extra, N, L0 * s.n_layer / c)

    return near, priced


def _penalty_cis(rows: list[dict[str, Any]], near: dict[str, Any] | None, fit: Fit, N: float,
                 best: Shape) -> None:
    """Each alternative's ``loss_penalty_ci`` (95%, over the draws of what priced it)."""
    if near is None or any(r["loss_penalty"] is None for r in rows):
        return
    from archfit.near_optimal import penalty_ci, pricing

    src = pricing(fit, near)
    scale = src.law_obj.optimum(src.params, N)[0] / near["centre"]
    for r in rows:
        r["loss_penalty_ci"] = penalty_ci(src, N, r["n_layer"] * scale, best.n_layer * scale)


def _below_data(fit: Fit, N: float) -> str | None:
    """A note when N is more than 10x below the fit's smallest run (above its largest, the
    verdict grades the extrapolation)."""
    lo = (fit.diagnostics or {}).get("span", {}).get("params_min")
    return fit.outside_span(N) if lo and N * 10 < lo else None


def next_runs(fit: Fit, N: float, verdict: str) -> dict[str, Any]:
    """Under a weak or uninformative answer, the Recommendation's ``next_runs`` (one line: what
    'archfit design' would run first, its cost and the interval it predicts after) and
    ``next_design`` (the design it came from). numpy is loaded only then, and only for a fit
    with bootstrap draws: an informative answer stays on the cold path."""
    if verdict == "informative":
        return {}
    if not (fit.bootstrap or {}).get("samples"):
        return {"next_runs": "this fit carries no parameter draws, so no runs can be planned "
                             "from it: fit your own sweep ('archfit fit ... --law depth-joint') "
                             "and run 'archfit design'"}
    from archfit.designing import suggest

    d, why = suggest(fit, N)
    if d is None:
        return {"next_runs": f"no runs planned: {why}"}
    return {"next_runs": d.first_line(), "next_design": d}


def _verdict(shape_fit: Fit, N: float, fits: dict[str, Fit], compute: float | None,
             strict: bool) -> Any:
    """The shape law's verdict at N, merged with the compute law's at the budget; an
    uninformative one warns (or, ``strict``, raises)."""
    verdict = shape_fit.verdict(N)
    if compute is not None:
        cf = fits["compute"]
        verdict.merge(cf.verdict(compute), f"compute law {cf.label}")
    if verdict.verdict == "uninformative":
        why = f"the verdict is uninformative: {'; '.join(verdict.reasons)}"
        if strict:
            raise RecommendError(f"{why} (--strict)")
        warnings.warn(f"{why}; the evidence does not support this shape", UninformativeWarning,
                      stacklevel=3)
    return verdict


def compare(params: float | None = None, *, compute: float | None = None,
            fit: Fit | str | Sequence[Fit | str] | None = None, **options: Any
            ) -> list[dict[str, Any]]:
    """One row per applicable shape law (the given fits, then every bundled published one):
    its recommended depth and width at the target, the optimum's CI and the verdict, so that
    disagreement between laws is visible at a glance. A law that cannot answer gets a row with
    its reason."""
    from archfit.laws.published import PUBLISHED

    labelled = []
    for g in _given(fit):
        f = load_fit(g)
        src = g if isinstance(g, str) and g not in PUBLISHED else None
        labelled.append((f, f"{f.label} ({os.path.basename(src)})" if src else f.label))
    others = [f for f, _ in labelled if f.law_obj.role != "shape"]
    shape_fits = [(f, lab) for f, lab in labelled if f.law_obj.role == "shape"]
    names = {f.label for f, _ in shape_fits}
    published = [(load_fit(n), n) for n in PUBLISHED if n not in names]
    shape_fits += [(f, n) for f, n in published if f.law_obj.role == "shape"]
    rows = []
    if compute is not None:  # one row per compute law: its split of the budget
        rows += _compute_rows(compute, [(f, lab) for f, lab in labelled
                                        if f.law_obj.role == "compute"])
    for f, label in shape_fits:
        row: dict[str, Any] = {"law": label, "role": "shape", "formula": f.law_obj.formula}
        try:
            with warnings.catch_warnings():  # the row carries the verdict
                warnings.simplefilter("ignore", UninformativeWarning)
                r = recommend(params, compute=compute, fit=[f, *others], **options)
        except RecommendError as e:
            row.update(error=str(e), verdict="-")
        else:
            row.update(n_layer=r.shape.n_layer, d_model=r.shape.d_model,
                       n_layer_opt=r.n_layer_opt, ci=(r.ci or {}).get("n_layer"),
                       near_optimal=(r.near_optimal or {}).get("n_layer"),
                       verdict=r.trust["verdict"], reasons=r.trust["reasons"])
        rows.append(row)
    return rows


def _compute_rows(C: float, given: list[tuple[Fit, str]]) -> list[dict[str, Any]]:
    """Each compute law's N_opt, D_opt and tokens per parameter at ``C`` FLOPs with their CIs
    and its verdict there: the given fits, then every bundled published compute law."""
    from archfit.laws.published import PUBLISHED

    names = {f.label for f, _ in given}
    laws = given + [(f, n) for n in PUBLISHED if n not in names
                    for f in [load_fit(n)] if f.law_obj.role == "compute"]
    rows = []
    for f, label in laws:
        row: dict[str, Any] = {"law": label, "role": "compute", "formula": f.law_obj.formula,
                               "N_convention": f.conventions.get("params", "as fitted")}
        try:
            opt = f.optimum(C)
        except (ArithmeticError, ValueError) as e:
            row.update(error=f"no compute-optimal split at {C:.3g} FLOPs: {e}", verdict="-")
        else:
            row.update({k: opt[k] for k in ("N_opt", "D_opt", "tokens_per_param", "N_opt_ci",
                                           "D_opt_ci", "tokens_per_param_ci")})
            t = f.verdict(C)
            row.update(verdict=t.verdict, reasons=t.reasons)
        rows.append(row)
    return rows
