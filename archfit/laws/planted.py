"""Sweeps generated from a known law, with the noise real sweeps have: every training run has
its own offset from the law (shared by all its checkpoints) and every row its own noise. What
the calibration tests and ``benchmarks/bench_calibration.py`` check intervals and verdicts
against; also useful to see what a sweep design can resolve before paying for it."""

from __future__ import annotations

import math
from typing import Any

# the planted truths (loss in nats/token; N = 12 L d² non-embedding parameters)
DEPTH_JOINT = {"E": 1.7, "A": 400.0, "alpha": 0.34, "B": 2000.0, "beta": 0.36, "kappa": 0.03,
               "p": -3.0, "q": 0.3}
DEPTH_WIDTH = {"E": 1.7, "A": 30.0, "alpha": 0.6, "B": 1.2, "beta": 0.7, "B_D": 2000.0,
               "beta_D": 0.36}


def correlated_sweep(law: str = "depth-joint", seed: int = 0, n_shapes: int = 24,
                     n_tokens: int = 20, run_sd: float = 0.01, row_sd: float = 0.003,
                     n_min: float = 2e6, n_max: float = 2e9) -> Any:
    """A polars frame of ``n_shapes`` runs (sizes log-uniform in [n_min, n_max], depths
    scattered up to 4x around the planted optimum, as in a sweep that brackets it), each logged
    at ``n_tokens`` token counts from 3e8 to 3e10. ``law`` plants depth-joint's form
    (:data:`DEPTH_JOINT`) or depth-width's (:data:`DEPTH_WIDTH`). Columns: run_id, n_layer,
    d_model, params, tokens, row, loss."""
    import numpy as np
    import polars as pl

    if law not in ("depth-joint", "depth-width"):
        raise ValueError(f"law must be depth-joint or depth-width, got {law!r}")
    j, w = DEPTH_JOINT, DEPTH_WIDTH
    rng = np.random.default_rng(seed)
    rows = []
    for i, n in enumerate(np.exp(rng.uniform(math.log(n_min), math.log(n_max), n_shapes))):
        L_opt = j["p"] + j["q"] * math.log(n)
        L = int(np.clip(round(math.exp(L_opt + rng.uniform(-1.4, 1.4))), 2, 128))
        d = int(max(32, round(math.sqrt(n / (12 * L)) / 8) * 8))
        n = 12 * L * d * d
        offset = rng.normal(0, run_sd)
        for D in np.logspace(8.5, 10.5, n_tokens):
            if law == "depth-joint":
                loss = (j["E"] + j["A"] / n ** j["alpha"] + j["B"] / D ** j["beta"]
                        + j["kappa"] * (math.log(L) - (j["p"] + j["q"] * math.log(n))) ** 2)
            else:
                loss = (w["E"] + w["A"] / d ** w["alpha"] + w["B"] / L ** w["beta"]
                        + w["B_D"] / D ** w["beta_D"])
            rows.append({"run_id": f"r{i}", "n_layer": L, "d_model": d, "params": float(n),
                         "tokens": float(D), "row": len(rows),
                         "loss": loss * math.exp(offset + rng.normal(0, row_sd))})
    return pl.DataFrame(rows)


# Chinchilla's form at a loss scale of about 0.5 (Epoch's refit constants, Besiroglu et al.
# 2024, with E, A and B scaled by 0.15): losses of a dense public grid are not nats of a 50k
# vocabulary, and a fit must not care
DENSE_CHINCHILLA = {"E": 1.8172 * 0.15, "A": 482.01 * 0.15, "B": 2085.43 * 0.15,
                    "alpha": 0.3478, "beta": 0.3658}


def dense_grid(seed: int = 0, n_sizes: int = 25, n_min: float = 1e8, step: float = 1.19,
               row_sd: float = 0.01, truth: dict[str, float] | None = None,
               sizes: Any = None) -> Any:
    """A dense (N, D) grid of separately trained models, as public sweeps publish them:
    ``n_sizes`` sizes ``step``× apart from ``n_min`` (25 sizes from 1e8 to about 6.4e9 by
    default), each trained to 11-17 token counts between 2 and 200 tokens per parameter, loss
    from Chinchilla's form (:data:`DENSE_CHINCHILLA` unless ``truth``) with multiplicative
    noise ``row_sd``. ``sizes`` replaces the size list (e.g. larger held-out sizes). Columns:
    params, tokens, loss."""
    import numpy as np
    import polars as pl

    p = dict(truth or DENSE_CHINCHILLA)
    rng = np.random.default_rng(seed)
    Ns = (np.asarray(sizes, float) if sizes is not None
          else n_min * step ** np.arange(n_sizes))
    rows = []
    for N in Ns:
        k = int(rng.integers(11, 18))
        for D in N * np.logspace(math.log10(2), math.log10(200), k):
            loss = p["E"] + p["A"] / N ** p["alpha"] + p["B"] / D ** p["beta"]
            rows.append({"params": float(N), "tokens": float(D),
                         "loss": float(loss * math.exp(rng.normal(0, row_sd)))})
    return pl.DataFrame(rows)


# the planted learning-rate law: Step Law's published constants (Li et al. 2025)
LR_LAW = {"a": math.log(1.79), "b": -0.713, "c": 0.307}
LR_CURVATURE = 0.02  # loss rise per (ln lr - ln lr*)^2, in nats (a factor e off costs 0.02)


def lr_sweep(seed: int = 0, sizes: tuple[float, ...] = (1e7, 3e7, 1e8, 3e8),
             tokens_per_param: tuple[float, ...] = (20.0, 80.0),
             rates: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0), seeds: int = 2,
             noise: float = 0.003) -> Any:
    """A learning-rate sweep with a known optimal-rate law (:data:`LR_LAW`): each (N, D) cell
    trained at ``rates`` times its optimal rate, ``seeds`` times, the loss a Chinchilla-form
    floor plus :data:`LR_CURVATURE` x (ln lr - ln lr*)^2 plus Gaussian noise (nats)."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    rows = []
    for N in sizes:
        for tpp in tokens_per_param:
            D = N * tpp
            best = math.exp(LR_LAW["a"] + LR_LAW["b"] * math.log(N) + LR_LAW["c"] * math.log(D))
            floor = 1.8 + 400 / N ** 0.34 + 2000 / D ** 0.36
            for m in rates:
                for s in range(seeds):
                    loss = floor + LR_CURVATURE * math.log(m) ** 2 + rng.normal(0, noise)
                    rows.append({"params": N, "tokens": D, "lr": best * m, "seed": s,
                                 "loss": loss, "lr_opt_true": best})
    return pl.DataFrame(rows)


BATCH_LAW = {"a_B": math.log(0.58), "b_B": 0.0, "c_B": 0.571}  # Step Law's batch, in tokens
LR_ASYMMETRY = 1.0  # the loss rises e^{k u} - 1 - k u (scaled to u^2 near 0) at u = ln(lr / lr*)
LR_PER_BATCH = 0.5  # the best rate moves as batch^0.5 (the square-root rule) away from B*
# loss rise per (ln lr - ln lr*)^2 and per (ln B - ln B*)^2 near the optimum, in nats: a factor 2
# off in either costs about 0.02 nats, the order of the bands in DeepSeek-AI 2024's Fig. 3
RATE_CURVATURE = 0.04
BATCH_CURVATURE = 0.04


def lr_batch_sweep(seed: int = 0, sizes: tuple[float, ...] = (1e7, 3e7, 1e8, 3e8),
                   tokens_per_param: tuple[float, ...] = (20.0, 80.0), n_rates: int = 9,
                   n_batches: int = 4, seeds: int = 1, noise: float = 0.003) -> Any:
    """A learning-rate x batch grid with known optima (lr* of :data:`LR_LAW`, B* of
    :data:`BATCH_LAW`), shaped as real curves are: steeper above the best rate than below
    (:data:`LR_ASYMMETRY`), and a best rate that moves with the batch (:data:`LR_PER_BATCH`).
    Rates a factor of sqrt(2) apart and batches a factor of 2 apart, each grid shifted by a
    random fraction of a step (so the best run falls anywhere between grid points), the batches
    more below B* than above; ``seeds`` noise draws per point, Gaussian with sd ``noise``
    (nats). The columns ``lr_opt_true`` and ``batch_opt_true`` hold each cell's optimum."""
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    k = LR_ASYMMETRY
    rows = []
    for N in sizes:
        for tpp in tokens_per_param:
            D = N * tpp
            ln_lr = LR_LAW["a"] + LR_LAW["b"] * math.log(N) + LR_LAW["c"] * math.log(D)
            ln_b = BATCH_LAW["a_B"] + BATCH_LAW["b_B"] * math.log(N) + BATCH_LAW["c_B"] * \
                math.log(D)
            floor = 1.8 + 400 / N ** 0.34 + 2000 / D ** 0.36
            shift_r, shift_b = rng.uniform(-0.5, 0.5, 2)
            for j in range(n_batches):  # one batch above B*, the rest below
                v = (j - (n_batches - 2) + shift_b) * math.log(2)
                for i in range(n_rates):
                    x = (i - n_rates // 2 + shift_r) * math.log(2) / 2  # ln(lr / lr*)
                    u = x - LR_PER_BATCH * v
                    rise = (math.exp(k * u) - 1 - k * u) / (k * k / 2)
                    for s in range(seeds):
                        loss = (floor + RATE_CURVATURE * rise + BATCH_CURVATURE * v * v
                                + rng.normal(0, noise))
                        rows.append({"params": N, "tokens": D,
                                     "lr": math.exp(ln_lr + x),
                                     "batch_tokens": math.exp(ln_b + v), "seed": s,
                                     "loss": loss, "lr_opt_true": math.exp(ln_lr),
                                     "batch_opt_true": math.exp(ln_b)})
    return pl.DataFrame(rows)


def lr_cell_recovery(noise: float, draws: int = 40, batch: bool = True
                     ) -> tuple[list[float], list[bool], int]:
    """Over ``draws`` noise draws of :func:`lr_batch_sweep` at ``noise``: each fitted cell's
    best rate over the planted one, whether its 95% interval holds the planted rate (for the
    cells with an interval), and the cells tried. ``batch`` False drops the batch column, so the
    losses at each rate are read as one curve averaged over the batches."""
    from archfit.laws.hyperparameters.lr_batch import cell_optima
    from archfit.laws.columns import columns

    ratios, covered, tried = [], [], 0
    for seed in range(draws):
        df = lr_batch_sweep(seed=seed, noise=noise)
        truth = {(n, t): lr for n, t, lr in
                 df.select("params", "tokens", "lr_opt_true").unique().iter_rows()}
        tried += len(truth)
        cells, _ = cell_optima(columns(df if batch else df.drop("batch_tokens")), seed=seed)
        for c in cells:
            true = truth[c["params"], c["tokens"]]
            ratios.append(c["opt"] / true)
            if c["opt_ci"]:
                covered.append(c["opt_ci"][0] <= true <= c["opt_ci"][1])
    return ratios, covered, tried
