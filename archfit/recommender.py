"""From a law to a buildable shape: ``recommend(params=1e12)`` or ``recommend(compute=1e24)``.

Conventions: the target is Kaplan's N (non-embedding parameters) for shape laws (Levine,
depth-width); with ``compute=C`` the compute-optimal N_opt(C) of a Chinchilla-type fit is in that
fit's own convention (total parameters for Hoffmann et al. and Epoch), and the shape is sized so
its ``params_total`` lands on N_opt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from archfit.errors import RecommendError, ShapeError
from archfit.laws import Fit, load_fit
from archfit.laws.published import DEFAULT_COMPUTE_LAW, DEFAULT_SHAPE_LAW
from archfit.shapes import Shape, iso_param_family

SHAPE_LAWS = ("levine", "depth-width")
COMPUTE_LAWS = ("chinchilla", "chinchilla-varpro")


@dataclass
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
            "tied_embeddings": s.tied_embeddings,
            "params_non_embedding": s.params_non_embedding, "params_total": s.params_total,
            "params_embedding": s.params_embedding,
            "target_params": self.target_params, "target_convention": self.target_convention,
            "rel_error": self.rel_error,
            "n_layer_opt": self.n_layer_opt, "d_model_opt": self.d_model_opt,
            "law": self.law, "law_formula": self.law_formula, "law_source": self.law_source,
            "flops_per_token": s.flops_per_token("kaplan_train"),
            "flops_per_token_convention": "kaplan_train: 6N + 6*n_layer*n_ctx*d_model",
            "alternatives": self.alternatives_records,
            "notes": self.notes,
        }
        if self.ci is not None:
            out["ci"] = self.ci
        if self.compute is not None:
            out["compute"] = self.compute
        return out

    def text(self) -> str:
        s = self.shape
        lines = []
        if self.compute:
            c = self.compute
            lines.append(f"compute {c['C']:.3g} FLOPs (C = 6 N D) -> N_opt {c['N_opt']:.4g}, "
                         f"D_opt {c['D_opt']:.4g} tokens  [{c['law']}]")
        lines.append(f"target: {self.target_params:.4g} parameters ({self.target_convention})")
        lines.append(f"law: {self.law}: {self.law_formula}")
        lines.append(f"     {self.law_source}")
        ci = self.ci or {}
        dci = f" [{ci['n_layer'][0]:.1f}, {ci['n_layer'][1]:.1f}]" if "n_layer" in ci else ""
        wci = f" [{ci['d_model'][0]:,.0f}, {ci['d_model'][1]:,.0f}]" if "d_model" in ci else ""
        lines.append(f"optimum (real-valued): depth {self.n_layer_opt:.1f}{dci}, "
                     f"width {self.d_model_opt:,.0f}{wci}" +
                     ("  (95% bootstrap CI)" if ci else ""))
        lines.append("")
        lines.append(f"recommended: n_layer {s.n_layer}, d_model {s.d_model:,}, n_head {s.n_head}"
                     f" (head_dim {s.head_dim}, kv heads {s.n_kv_head}), d_ff {s.d_ff:,} "
                     f"({s.ff_ratio:.3g}x {s.mlp}), vocab {s.vocab_size:,}, ctx {s.n_ctx:,}")
        total = self.compute is not None and "total" in self.target_convention
        ne_err = "" if total else f"; {self.rel_error:+.2%} from target"
        tot_err = f"; {self.rel_error:+.2%} from target" if total else ""
        lines.append(f"  params_non_embedding {s.params_non_embedding:,} (Kaplan's N{ne_err})")
        lines.append(f"  params_total         {s.params_total:,} (embeddings "
                     f"{'tied' if s.tied_embeddings else 'untied'}{tot_err})")
        lines.append(f"  training FLOPs/token {s.flops_per_token('kaplan_train'):.4g} "
                     "(Kaplan: 6N + 6*n_layer*n_ctx*d_model)")
        for n in self.notes:
            lines.append(f"note: {n}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()


def _lcm(a: int, b: int) -> int:
    return a * b // math.gcd(a, b)


def _classify(fits: Sequence[Fit]) -> tuple[Fit | None, Fit | None, Fit | None]:
    shape = compute = ff = None
    for f in fits:
        if f.law in SHAPE_LAWS:
            shape = f
        elif f.law in COMPUTE_LAWS:
            compute = f
        elif f.law == "ff-ratio":
            ff = f
        else:
            raise RecommendError(
                f"a {f.law!r} fit ({f.name or 'file'}) says nothing about depth or width; "
                "give a levine or depth-width fit (shape), a chinchilla fit (--compute) or an "
                "ff-ratio fit (--ff-ratio auto)")
    return shape, compute, ff


def _optimum(fit: Fit, N: float) -> tuple[float, float]:
    """(optimal depth, width) at N, in plain floats (no numpy on the CLI's cold path)."""
    p = fit.params
    if fit.law == "levine":
        # solve 0.5 ln(N / (12 L)) = a + b L (monotone in L) by Newton's method
        a, b, L = p["a"], p["b"], 10.0
        for _ in range(100):
            f = 0.5 * math.log(N / (12 * L)) - a - b * L
            step = f / (-0.5 / L - b)
            L = max(L - step, 1e-6)
            if abs(step) < 1e-10 * max(1.0, L):
                break
        return L, math.exp(a + b * L)
    A, al, B, be = p["A"], p["alpha"], p["B"], p["beta"]
    L = (2 * be * B / (al * A) * (N / 12.0) ** (al / 2)) ** (1.0 / (al / 2 + be))
    return L, math.sqrt(N / (12 * L))


def _optimum_ci(fit: Fit, N: float) -> dict[str, list[float]] | None:
    names = list(fit.law_obj.param_names)
    if not all(n in (fit.bootstrap.get("samples") or {}) for n in names):
        return None
    import numpy as np

    samples = fit.samples()
    k = len(samples[names[0]])
    Ls, ds = [], []
    for i in range(k):
        p = {n: float(samples[n][i]) for n in names}
        try:
            L, d = _optimum(Fit(law=fit.law, params=p), N)
        except (ValueError, OverflowError, ZeroDivisionError):
            continue
        if math.isfinite(L) and math.isfinite(d) and L > 0:
            Ls.append(L)
            ds.append(d)
    if len(Ls) < 10:
        return None
    return {"n_layer": np.percentile(Ls, [2.5, 97.5]).tolist(),
            "d_model": np.percentile(ds, [2.5, 97.5]).tolist()}


def _penalty(fit: Fit, shape: Shape, best: Shape, L_opt: float) -> float | None:
    """Predicted loss above the best shape (nats/token), where the fit has a loss model."""
    if fit.law == "depth-width":
        p = fit.params

        def loss(s: Shape) -> float:
            return p["A"] / s.d_model ** p["alpha"] + p["B"] / s.n_layer ** p["beta"]

        return loss(shape) - loss(best)
    c = fit.extra.get("curvature")
    if fit.law == "levine" and c:
        return float(c) * (math.log(shape.n_layer) - math.log(L_opt)) ** 2
    return None


def recommend(
    params: float | None = None,
    *,
    compute: float | None = None,
    fit: Fit | str | Sequence[Fit | str] | None = None,
    vocab: int = 50257,
    ctx: int = 2048,
    head_dim: int = 128,
    multiple_of: int = 128,
    ff_ratio: float | str = 4.0,
    mlp: str = "gelu",
    kv_heads: int | None = None,
    tp: int | None = None,
    top: int = 5,
    tied: bool = True,
    rope: bool = False,
) -> Recommendation:
    """Recommend a buildable shape for ``params`` non-embedding parameters (or for a compute
    budget ``compute`` in FLOPs, via a Chinchilla-type fit's N_opt).

    ``fit`` names published fits (``levine2020``, ``epoch2024``, ...) or fit files, one per role:
    a shape law (levine or depth-width; default levine2020), a compute law for ``compute``
    (default epoch2024) and an ff-ratio fit when ``ff_ratio="auto"``.
    """
    if (params is None) == (compute is None):
        raise RecommendError("give exactly one of params (a size) or compute (a FLOP budget)")
    for name, v in (("params", params), ("compute", compute)):
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise RecommendError(f"{name} must be a positive number, got {v!r}")
    for name, v in (("head_dim", head_dim), ("multiple_of", multiple_of), ("vocab", vocab),
                    ("ctx", ctx), ("top", top)):
        if not (isinstance(v, int) and v > 0):
            raise RecommendError(f"{name} must be a positive whole number, got {v!r}")
    if multiple_of % head_dim and head_dim % multiple_of:
        raise RecommendError(f"head_dim {head_dim} does not divide the width multiple "
                             f"{multiple_of} (nor the reverse); e.g. use --multiple-of "
                             f"{_lcm(head_dim, multiple_of)} or --head-dim {math.gcd(head_dim, multiple_of)}")
    if tp is not None and tp <= 0:
        raise RecommendError(f"tp must be a positive whole number, got {tp}")
    given = [] if fit is None else ([fit] if isinstance(fit, (str, Fit)) else list(fit))
    fits = [load_fit(f) for f in given]
    shape_fit, compute_fit, ff_fit = _classify(fits)
    notes: list[str] = []
    shape_fit = shape_fit or load_fit(DEFAULT_SHAPE_LAW)

    # the width step: multiple of head_dim (and of tp heads), so heads divide evenly
    step = _lcm(multiple_of, head_dim)
    if tp:
        step = _lcm(step, head_dim * tp)
    if kv_heads is not None and kv_heads <= 0:
        raise RecommendError(f"kv_heads must be positive, got {kv_heads}")

    compute_info = None
    target_convention = "non-embedding parameters (Kaplan's N)"
    if compute is not None:
        compute_fit = compute_fit or load_fit(DEFAULT_COMPUTE_LAW)
        from archfit.laws.loss_laws import compute_optimal

        n_opt, d_opt = compute_optimal(compute_fit.params, compute)
        compute_info = {"C": compute, "N_opt": float(n_opt), "D_opt": float(d_opt),
                        "law": compute_fit.name or compute_fit.law,
                        "convention": compute_fit.conventions.get("params", "as fitted")}
        target = float(n_opt)
        target_convention = (f"N_opt of {compute_info['law']}: "
                             f"{compute_info['convention']}")
    else:
        target = float(params)  # type: ignore[arg-type]

    if ff_ratio == "auto":
        if ff_fit is None:
            raise RecommendError("--ff-ratio auto needs an ff-ratio fit: pass one with --fit "
                                 "(made by 'archfit fit ... --law ff-ratio')")
        ff = float(ff_fit.predict(params=target)[0])
        notes.append(f"ff ratio {ff:.3g} from the ff-ratio fit at this size")
    else:
        try:
            ff = float(ff_ratio)
        except ValueError:
            raise RecommendError(f"ff_ratio must be a number or 'auto', got {ff_ratio!r}") from None
        if not ff > 0:
            raise RecommendError(f"ff_ratio must be positive, got {ff_ratio}")

    base = dict(vocab_size=vocab, n_ctx=ctx, mlp=mlp, tied_embeddings=tied,
                position="rope" if rope else "learned")
    # Hoffmann et al. / Epoch count total parameters: size the shape's params_total to N_opt
    total_target = compute_info is not None and "total" in compute_info["convention"]
    N_ne = target
    for _ in range(4 if total_target else 1):
        L_opt, d_opt_w = _optimum(shape_fit, N_ne)
        if not (math.isfinite(L_opt) and L_opt > 0):
            raise RecommendError(f"the {shape_fit.law} fit gives no finite optimal depth at "
                                 f"{N_ne:.3g} parameters")
        if total_target:
            emb = Shape(n_layer=1, d_model=max(step, int(round(d_opt_w / step)) * step),
                        n_head=max(step, int(round(d_opt_w / step)) * step) // head_dim,
                        **base).params_embedding
            N_ne = max(target - emb, target * 0.05)
    lo = max(1, int(math.floor(L_opt * 0.75)))
    hi = max(lo + 1, int(math.ceil(L_opt * 1.3)))
    depths = list(range(lo, hi + 1))
    try:
        members = iso_param_family(N_ne, depths, [ff], head_dim=head_dim, multiple=step,
                                   ff_multiple=multiple_of, ff_slack=0.05, tolerance=0.02,
                                   **base)
    except ShapeError as e:
        raise RecommendError(str(e)) from None
    cands = []
    for m in members:
        if m.shape is None:
            continue
        s = m.shape
        if kv_heads is not None:
            if s.n_head % kv_heads:
                continue
            s = s.with_(n_kv_head=kv_heads)
        if tp and s.n_head % tp:
            continue
        cands.append(s)
    if not cands:
        raise RecommendError("no buildable shape near the optimum: loosen --multiple-of, "
                             "--head-dim or --tp")

    def count(s: Shape) -> float:
        return s.params_total if total_target else s.params_non_embedding

    def err(s: Shape) -> float:
        return (count(s) - target) / target

    # the recommendation: the integer depth nearest the optimum among shapes within 2%
    within = [s for s in cands if abs(err(s)) <= 0.02]
    if not within:
        closest = min(cands, key=lambda s: abs(err(s)))
        raise RecommendError(
            f"no shape near the optimal depth lands within 2% of {target:.3g} parameters with "
            f"widths in steps of {step} (closest: {closest.n_layer} x {closest.d_model}, "
            f"{err(closest):+.0%}); lower --multiple-of / --head-dim (or --tp)")
    best = min(within, key=lambda s: (abs(math.log(s.n_layer / L_opt)), abs(err(s))))
    ci = _optimum_ci(shape_fit, N_ne)
    if ci is None:
        notes.append(f"{shape_fit.name or 'this fit'} carries no bootstrap samples: no CI on the "
                     "optimum (fit your own with --bootstrap to get one)")

    rows = []
    for s in within:
        pen = _penalty(shape_fit, s, best, L_opt)
        rows.append({"n_layer": s.n_layer, "d_model": s.d_model, "n_head": s.n_head,
                     "d_ff": s.d_ff, "params_non_embedding": s.params_non_embedding,
                     "params_total": s.params_total, "rel_error": err(s),
                     "loss_penalty": pen, "aspect_ratio": s.aspect_ratio,
                     "recommended": s == best})
    has_pen = any(r["loss_penalty"] is not None for r in rows)
    rows.sort(key=lambda r: (not r["recommended"],
                             r["loss_penalty"] if has_pen else
                             abs(math.log(r["n_layer"] / L_opt)), abs(r["rel_error"])))
    if not has_pen:
        notes.append("alternatives are ranked by distance from the optimal depth: this fit has "
                     "no loss model to predict their loss penalty")
    src = shape_fit.source or (", ".join(i.get("path", "") for i in shape_fit.inputs)
                               or "fitted by archfit")
    return Recommendation(
        shape=best, target_params=target, target_convention=target_convention,
        law=shape_fit.name or shape_fit.law, law_formula=shape_fit.law_obj.formula,
        law_source=src, n_layer_opt=L_opt, d_model_opt=d_opt_w,
        rel_error=err(best), ci=ci, alternatives_records=rows[: top + 1],
        compute=compute_info, notes=notes,
    )
