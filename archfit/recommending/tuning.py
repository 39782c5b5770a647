"""``archfit tune``: the short learning-rate x batch sweep at small proxy sizes that finds a
model's recipe, instead of taking a published law's rate on trust.

The published laws miss out of sample (by up to 5x on small models), and each has a range it
was checked on. What carries a rate to the target is a sweep at a few proxy sizes, fitted with
``archfit fit --law lr-batch`` (each proxy's best rate and batch, then their power laws in size
and tokens) and read by ``archfit recommend --fit``. :func:`plan` writes that sweep as an
ordinary sweep spec:

- the proxies: the sizes given, one depth for all (the default shape law's optimum at their
  middle size, at least 2: the width carries the size), the target's block, trained at the
  target's tokens per parameter;
- the rates: a grid a factor of sqrt(2) apart, reaching :data:`MARGIN` past the lowest and the
  highest value the published laws give at any proxy;
- the batches: sequences per step a factor of 2 apart, reaching :data:`MARGIN` past the
  published laws' batches the same way (at least :data:`MIN_BATCHES` of them, so a best batch
  can be placed between them).

The laws' own values go into the spec's header, so the sweep's result can be read against
them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from archfit.errors import ArchfitError

RATE_STEP = math.sqrt(2)  # the grid a learning-rate window reads best (bench_lr_window.py)
BATCH_STEP = 2.0
# how far past the published laws' extremes the grid reaches on each side: the laws miss by
# up to this much on small models, so the best rate lies inside
MARGIN = 2.0
MIN_SIZES = 3  # a law across sizes with one held out to check it
MIN_BATCHES = 4
DEFAULT_TOKENS_PER_PARAM = 20.0  # Hoffmann et al. 2022's compute-optimal ratio


class TuneError(ArchfitError):
    """A tuning sweep that cannot be planned as asked."""


@dataclass
class TunePlan:
    target: float
    sizes: list[float]
    tokens_per_param: float
    depth: int
    ctx: int
    rates: list[float]
    batches: list[int]  # sequences per step
    published: list[dict[str, Any]]  # each proxy's published rates and batches
    raw: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    @property
    def n_runs(self) -> int:
        return len(self.sizes) * len(self.rates) * len(self.batches)

    def toml(self) -> str:
        import tomli_w

        lines = [f"# archfit tune: the learning-rate x batch sweep for N = {self.target:.4g} "
                 "non-embedding parameters,",
                 f"# at {len(self.sizes)} proxy sizes ({self.tokens_per_param:g} tokens per "
                 f"parameter, depth {self.depth}): {self.n_runs} runs.",
                 "# Run it, fit it and carry it to the target:",
                 "#   archfit sweep run FILE && archfit sweep collect FILE -o tune.parquet",
                 "#   archfit fit tune.parquet --law lr-batch --out lr.json",
                 f"#   archfit recommend --params {self.target:.4g} --fit lr.json",
                 "# The published laws at each proxy (the grid reaches a factor "
                 f"{MARGIN:g} past them):"]
        for p in self.published:
            lines.append(f"#   N {p['params']:.3g}, D {p['tokens']:.3g}: lr "
                         + ", ".join(f"{k} {v:.3g}" for k, v in p["lr"].items()))
            lines.append("#     batch " + ", ".join(f"{k} {v:.3g}" for k, v in
                                                    p["batch"].items()) + " tokens")
        return "\n".join(lines) + "\n" + tomli_w.dumps(self.raw)

    def write(self, path: str) -> str:
        from archfit.io import atomic_path

        with atomic_path(path) as tmp, open(tmp, "w") as f:
            f.write(self.toml())
        return path

    def to_json(self) -> dict[str, Any]:
        return {"target_params": self.target, "sizes": self.sizes,
                "tokens_per_param": self.tokens_per_param, "depth": self.depth,
                "ctx": self.ctx, "rates": self.rates, "batch_sizes": self.batches,
                "batch_tokens": [b * self.ctx for b in self.batches], "runs": self.n_runs,
                "published": self.published, "spec": self.raw, "notes": self.notes}


def geometric_grid(low: float, high: float, step: float) -> list[float]:
    """Values ``step`` apart, centred in log on [low, high] and covering it."""
    n = math.ceil(math.log(high / low) / math.log(step) - 1e-9) + 1
    mid = math.sqrt(low * high)
    return [mid * step ** (i - (n - 1) / 2) for i in range(n)]


def plan(target: float, sizes: list[float], *, tokens_per_param: float | None = None,
         depth: int | None = None, ctx: int = 128, name: str | None = None,
         family: str = "llama", rates: list[float] | None = None,
         batch_sizes: list[int] | None = None) -> TunePlan:
    """The tuning sweep for ``target`` non-embedding parameters at the proxy ``sizes``; the
    rates and the batches (sequences per step) bracket the published laws unless given (a
    second pass, after a first found its best runs at an edge of the grid)."""
    from archfit.train.hyperparameters import HYPER_LAWS

    sizes = sorted(float(s) for s in sizes)
    if len(set(sizes)) < MIN_SIZES:
        raise TuneError(f"--sizes needs {MIN_SIZES} or more different proxy sizes (the law "
                        "across sizes is checked on the largest, fitted on the rest); got "
                        f"{len(set(sizes))}")
    if not all(math.isfinite(s) and s > 0 for s in sizes) or not (
            math.isfinite(target) and target > 0):
        raise TuneError("--sizes and --params must be positive, finite parameter counts")
    if sizes[-1] >= target:
        raise TuneError(f"the proxies must be smaller than the target ({target:.3g}); the "
                        f"largest given is {sizes[-1]:.3g}")
    tpp = tokens_per_param or DEFAULT_TOKENS_PER_PARAM
    published = [{"params": N, "tokens": tpp * N,
                  "lr": {k: h.lr_at(N, tpp * N) for k, h in HYPER_LAWS.items()},
                  "batch": {k: h.batch_at(N, tpp * N) for k, h in HYPER_LAWS.items()}}
                 for N in sizes]
    lrs = [v for p in published for v in p["lr"].values()]
    btoks = [v for p in published for v in p["batch"].values()]
    notes = []
    if rates:
        rates = sorted(float(r) for r in rates)
        notes.append("the rates as given")
    else:
        rates = [float(f"{r:.3g}") for r in geometric_grid(min(lrs) / MARGIN,
                                                           max(lrs) * MARGIN, RATE_STEP)]
    if batch_sizes:
        batches = sorted(int(b) for b in batch_sizes)
        notes.append("the batches as given")
    else:
        lo = max(0, math.floor(math.log2(min(btoks) / MARGIN / ctx)))
        hi = max(lo + MIN_BATCHES - 1, math.ceil(math.log2(max(btoks) * MARGIN / ctx)))
        batches = [2 ** i for i in range(lo, hi + 1)]
    if len(rates) < 5 or len(batches) < 3:
        raise TuneError(f"a tuning sweep needs 5 or more rates and 3 or more batches (the fit "
                        f"reads each cell's best from 5 rates around it and 3 batches); got "
                        f"{len(rates)} and {len(batches)}")
    if depth:
        notes.insert(0, f"depth {depth}, as given")
    else:
        depth = proxy_depth(sizes)
        notes.insert(0, f"the proxies' depth {depth}, the default shape law's optimum at their "
                     "middle size (at least 2)")
    raw = spec(target, sizes, tpp=tpp, depth=depth, ctx=ctx, rates=rates, batches=batches,
               name=name, family=family)
    _check_as_sweep_plan_would(raw)
    return TunePlan(target, sizes, tpp, depth, ctx, rates, batches, published, raw, notes)


def _check_as_sweep_plan_would(raw: dict[str, Any]) -> None:
    """The spec read as ``archfit sweep plan`` reads it (:func:`archfit.sweep.spec.spec_from_raw`):
    a sweep no run of which could train (a duplicate rate, a rate or batch past what a run
    takes, a depth the proxies cannot hold, a name that is not a plain name) is refused before
    anything is written, with every problem named."""
    from archfit.errors import SpecError
    from archfit.sweep.spec import spec_from_raw

    try:
        spec_from_raw(raw, "the tuning sweep")
    except SpecError as e:
        raise TuneError(f"{e} (archfit tune checks its sweep as 'sweep plan' would, before "
                        "writing it)") from None


def proxy_depth(sizes: list[float]) -> int:
    """The default shape law's optimal depth at the proxies' geometric middle, at least 2."""
    from archfit.laws import load_fit
    from archfit.laws.published import DEFAULT_SHAPE_LAW

    f = load_fit(DEFAULT_SHAPE_LAW)
    mid = math.exp(sum(math.log(s) for s in sizes) / len(sizes))
    return max(2, round(f.law_obj.optimum(f.params, mid)[0]))


def spec(target: float, sizes: list[float], *, tpp: float, depth: int, ctx: int,
         rates: list[float], batches: list[int], name: str | None, family: str
         ) -> dict[str, Any]:
    """The sweep spec (TOML-ready): the proxies in the target's block, every rate at every
    batch, one seed, run here by default."""
    block = ({"mlp": "swiglu", "position": "rope", "norm": "rmsnorm", "bias": False,
              "tied_embeddings": False} if family == "llama" else {})
    head_dim = 64 if sizes[0] >= 1e7 else 8  # the heads a proxy's width can hold
    return {"name": name or f"tune-{target:.3g}".replace("+", ""),
            "description": f"learning rate x batch at {len(sizes)} proxy sizes for "
                           f"N = {target:.3g} (archfit tune)",
            "seeds": [0], "lrs": rates, "batch_sizes": batches,
            "model": {**block, "head_dim": head_dim, "multiple": head_dim},
            "grid": {"params": sizes, "depths": [depth],
                     "ff_ratios": [8 / 3 if family == "llama" else 4.0], "tolerance": 0.2},
            "budget": {"tokens_per_param": tpp},
            "train": {"ctx": ctx, "warmup": 0.1, "eval_every": 100, "eval_windows": 128},
            "executor": {"kind": "local", "concurrency": 2, "threads_per_run": 1}}
