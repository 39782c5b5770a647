"""The learning-rate schedule: linear warmup, then cosine, warmup-stable-decay or constant."""

from __future__ import annotations

import math

from archfit.train.config import TrainConfig


def lr_at(step: int, total: int, cfg: TrainConfig) -> float:
    warm = int(cfg.warmup if cfg.warmup >= 1 else round(cfg.warmup * total))
    if warm and step < warm:
        return cfg.lr * (step + 1) / warm
    lo = cfg.lr * cfg.min_lr_ratio
    if cfg.schedule == "constant":
        return cfg.lr
    if cfg.schedule == "wsd":
        start = int(total * (1 - cfg.decay_fraction))
        if step < start:
            return cfg.lr
        frac = (step - start) / max(1, total - start)
        return cfg.lr + (lo - cfg.lr) * frac
    frac = (step - warm) / max(1, total - warm)
    return lo + 0.5 * (cfg.lr - lo) * (1 + math.cos(math.pi * min(1.0, frac)))
