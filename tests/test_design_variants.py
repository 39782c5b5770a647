"""scripts/design_variants.py: the harness that replays candidate design rules on tuning seeds.
Its lack-of-fit statistic is checked on frames whose answer is known by construction (a law
fitted where it is true, with independent noise; and where it is wrong, without noise), and it
refuses the benchmarks' report seeds."""

import importlib.util
import math
import os

import numpy as np
import polars as pl
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


@pytest.fixture(scope="module")
def dv():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "design_variants", os.path.join(ROOT, "scripts", "design_variants.py"))
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _grid() -> tuple[np.ndarray, np.ndarray]:
    N = np.repeat(np.logspace(7, 9.5, 8), 6)
    D = N * np.tile(np.logspace(math.log10(2), math.log10(200), 6), 8)
    return N, D


def test_report_seeds_are_refused_and_tuning_seeds_read(dv) -> None:  # type: ignore[no-untyped-def]
    assert dv.seeds("0-4") == [0, 1, 2, 3, 4]
    assert dv.seeds("7") == [7]
    with pytest.raises(SystemExit, match="report seeds"):
        dv.seeds("998-1001")


def test_smoothness_is_low_for_noise_about_a_true_law(dv) -> None:  # type: ignore[no-untyped-def]
    # Chinchilla's own form with Epoch's constants, fitted by the chinchilla law: the residuals
    # are the 1% noise alone, so neighbours agree no more than strangers
    N, D = _grid()
    stats = []
    for seed in range(6):
        loss = (1.82 + 482.0 / N ** 0.348 + 2085.0 / D ** 0.366) * np.exp(
            np.random.default_rng(seed).normal(0, 0.01, len(N)))
        s, n = dv.smoothness(pl.DataFrame({"params": N, "tokens": D, "loss": loss}),
                             "chinchilla")
        assert n == len(N)
        stats.append(s)
    assert np.mean(stats) < 0.2, stats  # about 0 expected; -0.45 to 0.26 seen


def test_smoothness_is_high_where_the_law_is_wrong(dv) -> None:  # type: ignore[no-untyped-def]
    # a data exponent that drifts with size (0.32 to 0.42 over the grid), no noise: the one-
    # exponent law misses smoothly, so a run's residual is its neighbour's
    N, D = _grid()
    beta = 0.366 + 0.02 * np.log(N / 1e8)
    loss = 1.82 + 482.0 / N ** 0.348 + 2085.0 / D ** beta
    s, _ = dv.smoothness(pl.DataFrame({"params": N, "tokens": D, "loss": loss}), "chinchilla")
    assert s > 0.4, s  # 0.60 here; 0.55-0.88 on bench_design's drift pools
