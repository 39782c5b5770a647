"""The :class:`Recommendation` a call to :func:`archfit.recommend` returns: the shape, its
alternatives, the near-optimal set, the verdict, and their text and JSON forms."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from archfit.shapes import TRAIN_FLOPS_CONVENTION, Shape
from archfit.shapes.architectures import DEFAULT_ARCHITECTURE
from archfit.text import WIDTH, wrap


@dataclass(repr=False)  # __repr__ below
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
    ci: dict[str, Any] | None
    alternatives_records: list[dict[str, Any]]
    compute: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    trust: dict[str, Any] = field(default_factory=dict)
    # every buildable shape within 2% of the target and its shape-law loss penalty (None
    # without a loss model): what objectives other than loss choose from (archfit.recommending.objectives)
    candidates: list[tuple[Shape, float | None]] = field(default_factory=list, repr=False)
    shape_fit: Any = field(default=None, repr=False)
    fits: Any = field(default=None, repr=False)  # archfit.recommending.fits.Fits
    # under a weak or uninformative answer: what 'archfit design' would run first (one line),
    # and the design it came from (archfit.designing.Design, for its figure)
    next_runs: str | None = None
    next_design: Any = field(default=None, repr=False)
    # the depths within a tolerance of the optimum's loss, with CIs on the ends
    # (archfit.recommending.near_optimal), and what prices the alternatives
    near_optimal: dict[str, Any] | None = None
    loss_model: dict[str, Any] | None = None
    # how to train it: peak lr, batch (tokens), tokens, warmup, decay (archfit.recommending.recipe)
    recipe: dict[str, Any] | None = None
    family: str = DEFAULT_ARCHITECTURE  # the block (archfit.shapes.architectures) it is built in
    family_text: str = ""  # the family and its block in words
    # with --vocab auto: the vocabulary law's pick, its predicted gain and where it comes from
    # (archfit.recommending.vocabulary)
    vocabulary: dict[str, Any] | None = None
    # what the stages of kinds registered beyond the built-in ones answered, by role
    # (archfit.laws.base.Kind.stage): each a JSON-able record, its "text" a line of the answer
    extras: dict[str, dict[str, Any]] = field(default_factory=dict)

    def _with_vocabulary_note(self) -> Recommendation:
        """This answer, with a note where the vocabulary law's pick lies more than 2x from the
        vocabulary it trains with (archfit.recommending.vocabulary.far_from_pick)."""
        from archfit.recommending.vocabulary import far_from_pick, law_of

        tokens = (self.recipe or {}).get("tokens", {}).get("value")
        from archfit.laws import VocabularyLaw

        law = law_of(self.fits.of(VocabularyLaw) if self.fits else None)
        note = far_from_pick(self.shape, tokens, law=law) if tokens else None
        if note:
            self.notes.append(note)
        return self

    @property
    def alternatives(self) -> Any:
        """The top-k shapes around the optimum as a polars DataFrame (``.to_pandas()`` works)."""
        import polars as pl

        return pl.DataFrame(self.alternatives_records)

    def to_dict(self) -> dict[str, Any]:
        s = self.shape
        out: dict[str, Any] = {
            "family": self.family, "family_text": self.family_text,
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
        out["recipe"] = self.recipe
        if self.vocabulary is not None:
            out["vocabulary"] = self.vocabulary
        if self.extras:
            out["extras"] = self.extras
        from archfit.io import jsonable

        return jsonable(out)  # every Interval in its one JSON shape

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

    def answer_line(self) -> str:
        """The answer in one line of at most 100 columns: the shape, the near-optimal depths,
        the recipe's rate, batch and tokens, and the verdict; the evidence follows it."""
        s, n = self.shape, self.near_optimal or {}
        parts = [f"answer: {s.n_layer} x {s.d_model:,}, {s.n_head} heads"]
        lo, hi = (n.get("n_layer") or [None, None])
        if lo is not None:
            parts.append(f"depths {lo:.0f}-{'any' if hi is None else f'{hi:.0f}'}")
        r = self.recipe
        if r:
            parts.append(f"lr {r['lr']['value']:.2g}, batch {r['batch_tokens']['value']:.2g}, "
                         f"{r['tokens']['value']:.2g} tokens")
        if r and r.get("verdict") == "uninformative":
            parts[-1] += " (recipe unusable)"
        line = "; ".join(parts) + f"; {self.trust.get('verdict', '?')}"
        short = parts[:2] + (["recipe unusable"] if r and r.get("verdict") == "uninformative"
                             else [])
        return line if len(line) <= WIDTH else "; ".join(short) + \
            f"; {self.trust.get('verdict', '?')}"

    def text(self) -> str:
        return wrap(self._text())

    def _text(self) -> str:
        s, ci = self.shape, self.ci or {}
        lines = [self.answer_line(), ""]
        if self.compute:
            c = self.compute
            lines.append(f"compute {c['C']:.3g} FLOPs (C = 6 N D), law {c['law']}:")
            for k, label in (("N_opt", "N_opt (parameters)"), ("D_opt", "D_opt (tokens)"),
                             ("tokens_per_param", "tokens per parameter")):
                kci = c.get(f"{k}_ci")
                lines.append(f"  {label:<22}{c[k]:.4g}" + (
                    f"  {kci.text('.4g', named=False)}" if kci else
                    "  (no interval: the fit has no parameter draws)"))
            if c.get("N_opt_ci"):
                lines.append(f"  (each interval: {c['N_opt_ci'].name()})")
            if c.get("plan"):
                lines += _plan_lines(c["plan"])
            if c.get("unique_tokens"):
                worth = (f"; the last epoch's tokens are worth {c['last_epoch_value']:.0%} of "
                         "fresh ones" if "last_epoch_value" in c else "")
                lines += [f"  {'unique tokens':<22}{c['unique_tokens']:.4g}: {c['epochs']:.3g} "
                          f"epochs{worth}", f"  epochs: {c['epochs_pay']}"]
        lines += [f"target: {self.target_params:.4g} parameters ({self.target_convention})",
                  f"law: {self.law}: {self.law_formula}", f"     {self.law_source}"]
        dci = f" {ci['n_layer'].text(named=False)}" if ci.get("n_layer") else ""
        wci = f" {ci['d_model'].text(',.0f', named=False)}" if ci.get("d_model") else ""
        moved = (self.near_optimal or {}).get("centre_from") not in (None, self.law)
        how = f" ({ci['n_layer'].name()})" if dci else ""
        lines += [(f"optimum: not located by this fit (its interval{dci}{how}); the answer "
                   f"is the near-optimal set, centred at depth {self.n_layer_opt:.1f}, width "
                   f"{self.d_model_opt:,.0f}") if moved else
                  (f"optimum (real-valued): depth {self.n_layer_opt:.1f}{dci}, "
                   f"width {self.d_model_opt:,.0f}{wci}{how}"),
                  *_near_lines(self.near_optimal), "", _verdict_line(self.trust), "",
                  f"recommended: n_layer {s.n_layer}, d_model {s.d_model:,}, n_head {s.n_head}"
                  f" (head_dim {s.head_dim}, kv heads {s.n_kv_head}), d_ff {s.d_ff:,} "
                  f"({s.ff_ratio:.3g}x {s.mlp}), vocab {s.vocab_size:,}, ctx {s.n_ctx:,}",
                  f"  family {self.family_text}; vocabulary and context "
                  "as noted, else the family's (--vocab, --ctx to change)"]
        total = self.compute is not None and "total" in self.target_convention
        err = f"; {self.rel_error:+.2%} from target"
        lines += [f"  params_non_embedding {s.params_non_embedding:,} (Kaplan's N"
                  f"{'' if total else err})",
                  f"  params_total         {s.params_total:,} (embeddings "
                  f"{'tied' if s.tied_embeddings else 'untied'}{err if total else ''})",
                  f"  training FLOPs/token {s.flops_per_token('kaplan_train'):.4g} "
                  f"({TRAIN_FLOPS_CONVENTION})"]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"{role}: {r['text']}" for role, r in self.extras.items() if r.get("text")]
        if self.recipe:
            from archfit.recommending.recipe import recipe_lines

            lines += ["", *recipe_lines(self.recipe)]
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

        rows = [[cell(k, row[k]) for k, _ in cols] for row in self.alternatives_records]
        widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, (_, h) in enumerate(cols)]
        lines = ["alternatives (first row = recommended):",
                 "  ".join(h.rjust(w) for (_, h), w in zip(cols, widths))]
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows]
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
        return f" {ci[k].text(named=False)}" if ci.get(k) else ""

    named = ci.get("n_layer_low") or ci.get("n_layer_high")

    top = "unbounded" if hi is None else f"{hi:.3g}"
    narrow = "any" if n["d_model"][1] is None else f"{n['d_model'][1]:,.0f}"
    return [f"near-optimal (predicted loss within {n['tolerance']:.2%} of the optimum's): depth "
            f"{lo:.3g}{end('n_layer_low')} to {top}{end('n_layer_high')}, width "
            f"{narrow} to {n['d_model'][0]:,.0f}"
            + (f" (each end: {named.name()})" if named else
               " (no interval on the ends: the fit carries no parameter draws)"),
            f"  basis: {n['basis']}; the pick: {n['rule']} ({n['centre']:.1f})"]


def _plan_lines(p: dict[str, Any]) -> list[str]:
    """The budget split otherwise than compute-optimally: inference or over-training."""
    def ci(k: str, fmt: str = ".4g") -> str:
        c = p.get(f"{k}_ci")
        return f" {c.text(fmt, named=False)}" if c else ""

    named = p.get("N_ci") or p.get("penalty_ci")

    if p["kind"] == "inference":
        saved = 1 - p["total_flops"] / p["compute_optimal_total_flops"]
        out = [f"  serving {p['inference_tokens']:.3g} tokens (Sardana et al. 2024): build N "
               f"{p['N']:.4g}{ci('N')}, train on {p['D']:.4g}{ci('D')} tokens, for the "
               "compute-optimal model's loss",
               f"  FLOPs: training {p['train_flops']:.3g} + inference "
               f"{p['inference_flops']:.3g} = {p['total_flops']:.3g}, against "
               f"{p['compute_optimal_train_flops']:.3g} + "
               f"{p['compute_optimal_inference_flops']:.3g} = "
               f"{p['compute_optimal_total_flops']:.3g} compute-optimal ({saved:.0%} less; "
               "inference 2 N FLOPs per token)"]
    else:
        out = [f"  over-trained at {p['tokens_per_param']:g} tokens per parameter: N "
               f"{p['N']:.4g}, {p['D']:.4g} tokens; predicted loss {p['loss']:.4g} against "
               f"{p['loss_compute_optimal']:.4g} compute-optimal: {p['penalty']:+.2%}"
               f"{ci('penalty', '+.2%')}"]
    out.append(f"  (each interval: {named.name()})" if named else
               f"  ({p.get('interval_note', 'no interval')})")
    return out


def _verdict_line(t: dict[str, Any]) -> str:
    v = t.get("verdict", "?")
    head = {"informative": "verdict: informative",
            "weak": "verdict: WEAK - use with care",
            "uninformative": "verdict: UNINFORMATIVE - the evidence does not support this shape"
            }.get(v, f"verdict: {v}")
    return "\n".join([head] + [f"  - {r}" for r in t.get("reasons", [])])
