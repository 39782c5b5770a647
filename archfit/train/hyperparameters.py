"""How to train a model of a given size on a given number of tokens, from published
hyperparameter laws: the peak learning rate and the batch size (in tokens), with the warmup and
the decay the recipe pairs them with. Plain ``math``: ``archfit recommend`` reads it on its
cold path, and ``archfit train --lr auto`` and a sweep spec's ``lrs = ["auto"]`` resolve
through it.

Each law is written in one form, ``value = coef * N**n * D**d`` with N the non-embedding
parameters and D the training tokens, and says how its authors counted:

- ``steplaw2025``: Li et al. 2025, "Predictable Scale: Part I" (Step Law), fitted on about
  3,700 dense runs: lr = 1.79 N^-0.713 D^0.307, batch = 0.58 D^0.571 tokens; N non-embedding
  (attention and MLP weights), AdamW, cosine decay.
- ``deepseek2024``: DeepSeek-AI 2024, "DeepSeek LLM": lr = 0.3118 C^-0.1250, batch = 0.2920
  C^0.3271 tokens, C = M D with M the non-embedding FLOPs per token; here M = 6 N (the
  attention's 6 n_layer n_ctx d_model per token left out), AdamW, multi-step decay.

Neither paper gives an interval on its constants, and two point estimates are not an interval:
a recipe gives each law's value and the one it picks, by a stated rule (:data:`PICK_RULE`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from archfit.errors import ArchfitError

if TYPE_CHECKING:
    from archfit.train.config import TrainConfig


class RecipeError(ArchfitError):
    """A recipe that cannot be given as asked (one line: what is wrong, how to mend it)."""


@dataclass(frozen=True)
class Reach:
    """The largest model a published law was checked on: its non-embedding parameters and
    training tokens, and where the paper says so."""

    params: float
    tokens: float
    source: str

    def factor(self, N: float, D: float) -> float:
        """How far past that model (N, D) lies: the larger of N / params and D / tokens (at
        most 1 inside it)."""
        return max(N / self.params, D / self.tokens)


@dataclass(frozen=True)
class HyperLaw:
    """A published law for the optimal peak learning rate and batch size (tokens), as
    ``coef * N**n * D**d`` (N non-embedding parameters, D training tokens)."""

    name: str
    citation: str
    link: str
    lr: tuple[float, float, float]  # (coef, n, d)
    batch: tuple[float, float, float]  # (coef, n, d), tokens
    conventions: dict[str, str] = field(default_factory=dict)
    reach: Reach | None = None  # None: the paper's range is not recorded here

    def lr_at(self, N: float, D: float) -> float:
        c, n, d = self.lr
        return c * N ** n * D ** d

    def batch_at(self, N: float, D: float) -> float:
        c, n, d = self.batch
        return c * N ** n * D ** d


HYPER_LAWS: dict[str, HyperLaw] = {
    "steplaw2025": HyperLaw(
        "steplaw2025", "Li et al. 2025, 'Predictable Scale: Part I - Optimal Hyperparameter "
        "Scaling Law in Large Language Model Pretraining' (Step Law)",
        "https://arxiv.org/abs/2503.04715", lr=(1.79, -0.713, 0.307), batch=(0.58, 0.0, 0.571),
        conventions={"params": "non-embedding parameters", "batch": "tokens",
                     "optimizer": "AdamW", "schedule": "cosine decay"},
        reach=Reach(1e9, 1e11, "the largest grid search the paper reports: 1B parameters on "
                               "100B tokens (Li et al. 2025, Fig. 1)")),
    "deepseek2024": HyperLaw(
        "deepseek2024", "DeepSeek-AI 2024, 'DeepSeek LLM: Scaling Open-Source Language Models "
        "with Longtermism'", "https://arxiv.org/abs/2401.02954",
        # eta = 0.3118 C^-0.1250 and B = 0.2920 C^0.3271 with C = 6 N D
        lr=(0.3118 * 6 ** -0.1250, -0.1250, -0.1250), batch=(0.2920 * 6 ** 0.3271, 0.3271, 0.3271),
        conventions={"params": "non-embedding parameters (M = 6 N FLOPs per token; the "
                               "attention's share left out)", "batch": "tokens",
                     "optimizer": "AdamW", "schedule": "multi-step decay"}),
    # DeepSeek-AI 2024's range of compute budgets is not recorded: archfit could not verify it
    # from the sources it can reach, and a range without its source is not given
}
DEFAULT_HYPER_LAW = "steplaw2025"
# which published law's value a recipe takes where they disagree, and why
PICK_RULE = ("steplaw2025, fitted on about 3,700 runs with size and tokens as separate variables "
             "(deepseek2024 reads both through compute alone)")

WARMUP_STEPS = 2000  # DeepSeek-AI 2024's warmup (published)
WARMUP_CAP = 0.05  # at most this share of the steps (assumed: the trainer's default warmup)
MIN_LR_RATIO = 0.1  # cosine decay to a tenth of the peak (Hoffmann et al. 2022, published)
# published laws "disagree" when their values differ by more than this factor (assumed: one
# step of the factor-of-two grid a learning-rate sweep usually takes)
DISAGREE = 2.0


def _check(N: float, D: float) -> None:
    for name, v in (("N (non-embedding parameters)", N), ("tokens", D)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
                math.isfinite(v) and v > 0):
            raise RecipeError(f"a recipe needs a positive, finite {name}; got {v!r}")


def reach(law: str, N: float, D: float) -> dict[str, Any]:
    """The largest model ``law`` was checked on and how far past it (N, D) lies
    (``factor``); ``None`` values where the paper's range is not recorded."""
    r = HYPER_LAWS[law].reach
    if r is None:
        return {"params": None, "tokens": None, "factor": None,
                "source": "not recorded: archfit could not verify this paper's range"}
    return {"params": r.params, "tokens": r.tokens, "factor": r.factor(N, D),
            "source": r.source}


def _spread(values: dict[str, float], chosen: str, what: str, N: float, D: float
            ) -> dict[str, Any]:
    """The chosen law's value, every published law's beside it, each law's reach (the largest
    model it was checked on, and how far past it this is), and a note where they differ by
    more than :data:`DISAGREE`; no range: the laws state no interval."""
    lo, hi = min(values.values()), max(values.values())
    out: dict[str, Any] = {"value": values[chosen], "interval": None, "law": chosen,
                           "provenance": "published", "each": dict(values),
                           "reach": {k: reach(k, N, D) for k in values},
                           "pick": PICK_RULE if chosen == DEFAULT_HYPER_LAW else "as asked"}
    if hi / lo > DISAGREE:
        out["disagree"] = (f"the published laws' {what} differ by {hi / lo:.2g}x, more than "
                           f"a factor of {DISAGREE:g}")
    return out


def recipe(N: float, D: float, law: str = DEFAULT_HYPER_LAW) -> dict[str, Any]:
    """The recipe for N non-embedding parameters trained on D tokens by the published law
    ``law``: ``lr`` (peak), ``batch_tokens``, ``warmup`` and ``decay``, each with its
    provenance, and every published law's value beside it (``each``; the laws state no
    interval, so ``interval`` is None)."""
    _check(N, D)
    if law not in HYPER_LAWS:
        raise RecipeError(f"unknown hyperparameter law {law!r}; choose one of "
                          f"{', '.join(HYPER_LAWS)}")
    h = HYPER_LAWS[law]
    lr = _spread({k: v.lr_at(N, D) for k, v in HYPER_LAWS.items()}, law, "peak learning rates",
                  N, D)
    batch = _spread({k: v.batch_at(N, D) for k, v in HYPER_LAWS.items()}, law, "batch sizes",
                    N, D)
    steps = max(1.0, D / batch["value"])
    warm = min(float(WARMUP_STEPS), WARMUP_CAP * steps)
    out = {"lr": {**lr, "convention": f"peak learning rate, {h.conventions['optimizer']}"},
           "batch_tokens": {**batch, "convention": "tokens per optimizer step"},
           "warmup": {"steps": warm, "tokens": warm * batch["value"],
                      "provenance": "published" if warm == WARMUP_STEPS else "assumed",
                      "source": ("as DeepSeek-AI 2024" if
                                 warm == WARMUP_STEPS else
                                 f"{WARMUP_CAP:.0%} of the {steps:,.0f} steps, since "
                                 f"DeepSeek-AI 2024's {WARMUP_STEPS:,} would be "
                                 f"{WARMUP_STEPS / steps:.0%} of this run")},
           "decay": {"schedule": "cosine", "min_lr_ratio": MIN_LR_RATIO,
                     "provenance": "published",
                     "source": "cosine to a tenth of the peak over the run, as Hoffmann et "
                               "al. 2022"},
           "params": N, "params_convention": "non-embedding parameters",
           "source": f"{h.citation} ({h.link})"}
    return out


def auto_lr(N: float, D: float, law: str = DEFAULT_HYPER_LAW) -> tuple[float, str]:
    """(the peak learning rate ``lr = "auto"`` resolves to, a line saying which)."""
    r = recipe(N, D, law)
    return float(r["lr"]["value"]), (f"lr auto: {r['lr']['value']:.3g} ({law}, at N "
                                     f"{N:.3g} non-embedding, {D:.3g} tokens)")


def resolve_lr(cfg: TrainConfig, law: str = DEFAULT_HYPER_LAW) -> tuple[TrainConfig, str]:
    """``cfg`` with its peak learning rate set by the published ``law`` at its shape's
    non-embedding parameters and its budget's tokens (what ``lr = "auto"`` means), and a line
    saying which."""
    tokens = float(cfg.steps() * cfg.tokens_per_step)  # steps() checks the config first
    lr, why = auto_lr(float(cfg.shape.params_non_embedding), tokens, law)
    return dataclasses.replace(cfg, lr=lr), why
