"""What the lr x batch fit takes: a loss that falls with the rate in every cell, a rate that does
not matter, batches it must never average over, cells too small for an interval, rates and
batches no run could use, and resamples whose intervals overflow."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import polars as pl
import pytest


def test_lr_batch_on_a_loss_that_falls_with_the_rate_in_every_cell_is_refused(cli, tmp_path):
    """A parabola whose vertex is astronomically far above the rates tried: one line, exit 2
    (its note once overflowed writing the rate)."""


    rows = [dict(params=N, tokens=20 * N, lr=lr, loss=3.0 - 0.1 * math.log(lr)
                 + 1e-9 * math.log(lr) ** 2)
            for N in (1e6, 4e6, 1.6e7) for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)]
    path = tmp_path / "falls.csv"
    pl.DataFrame(rows).write_csv(path)
    r = cli("fit", path, "--law", "lr-batch", "--bootstrap", 0)
    assert r.exit_code == 2, r.output
    assert "the best rate lies above the rates tried" in r.output and "Traceback" not in r.output


def test_lr_batch_where_the_rate_does_not_matter_gives_no_best_rate(cli, tmp_path):
    """Seeds repeat every rate, and the loss differs across rates no more than across seeds:
    no cell has a best rate (one-way analysis of variance), so there is no law to give."""

    rng = np.random.default_rng(3)
    rows = [dict(params=N, tokens=20 * N, lr=lr, seed=s, loss=3.0 + 0.01 * rng.normal())
            for N in (1e6, 4e6, 1.6e7, 6.4e7) for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
            for s in range(2)]
    path = tmp_path / "flat.csv"
    pl.DataFrame(rows).write_csv(path)
    r = cli("fit", path, "--law", "lr-batch", "--bootstrap", 0)
    assert r.exit_code == 2, r.output
    assert "the loss does not measurably depend on the rate" in r.output


def test_lr_batch_never_averages_over_batch_sizes(cli, tmp_path):
    """A learning-rate grid at two batch sizes per cell is refused whole (a best batch cannot be
    placed between two), naming --by; fitted one batch at a time it recovers each batch's
    planted optimum, ln lr* = -7 - 0.3 ln(b/2^16) (a loss quadratic in ln lr about it). A grid of
    four batches is fitted with the batch as a variable: the batch law's constants come back."""
    import math


    rows = [dict(params=N, tokens=20 * N, lr=lr, batch_tokens=b,
                 loss=3.0 + 0.05 * (math.log(lr) + 7 + 0.3 * math.log(b / 2 ** 16)) ** 2)
            for N in (1e6, 4e6, 1.6e7) for b in (2 ** 16, 2 ** 18)
            for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)]
    path = tmp_path / "grid.csv"
    pl.DataFrame(rows).write_csv(path)
    r = cli("fit", path, "--law", "lr-batch", "--bootstrap", 0)
    assert r.exit_code == 2 and "2 batch sizes: the best batch cannot be placed" in r.output
    assert "--by batch_tokens" in r.output
    r = cli("fit", path, "--law", "lr-batch", "--bootstrap", 0, "--by", "batch_tokens", "--json")
    assert r.exit_code == 0, r.output
    got = {float(k): v["params"]["a"] for k, v in json.loads(r.output)["fits"].items()}
    assert got[2.0 ** 16] == pytest.approx(-7.0, abs=1e-6)
    assert got[2.0 ** 18] == pytest.approx(-7.0 - 0.3 * math.log(4), abs=1e-6)
    from archfit.laws.planted import lr_batch_sweep

    grid = tmp_path / "rate-x-batch.csv"
    lr_batch_sweep(seed=0).drop("lr_opt_true", "batch_opt_true").write_csv(grid)
    r = cli("fit", grid, "--law", "lr-batch", "--bootstrap", 0, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["extra"]["batch_fitted"] and set(out["params"]) >= {"a_B", "b_B", "c_B"}
    assert all(c["batch_opt"] > 0 for c in out["extra"]["cells"])


def test_an_lr_cell_of_three_rates_says_it_has_no_interval(cli, tmp_path):


    rows = [dict(params=N, tokens=20 * N, lr=lr, loss=3.0 + 0.05 * (math.log(lr) + 7) ** 2)
            for N in (1e6, 4e6, 1.6e7) for lr in (3e-4, 1e-3, 3e-3)]
    path = tmp_path / "three.csv"
    pl.DataFrame(rows).write_csv(path)
    r = cli("fit", path, "--law", "lr-batch", "--bootstrap", 0)
    assert r.exit_code == 0, r.output
    assert "this cell's best rate has no interval" in " ".join(r.output.split())


def _flat_cell_table(seed: int = 0):  # type: ignore[no-untyped-def]
    """8 sizes x 10 token counts x 3 rates (half, at and twice each cell's best), one cell
    flat (the rate does not change its loss): the public sweep's layout, planted."""
    rng = np.random.default_rng(seed)
    tokens = np.geomspace(2e9, 2e11, 10)
    rows = []
    for i, N in enumerate(np.geomspace(2e7, 2e9, 8)):
        best = 2e-2 * (N / 1e8) ** -0.4
        for D in tokens:
            flat = i == 2 and D == tokens[4]
            for f in (0.5, 1.0, 2.0):
                loss = 1.8 + 400 / N ** 0.34 + 400 / D ** 0.28 + (0 if flat else 0.05) \
                    * math.log(f) ** 2
                rows.append({"params": N, "tokens": D, "lr": best * f,
                             "loss": loss * math.exp(rng.normal(0, 0.002))})
    return pl.DataFrame(rows)


@pytest.mark.slow
def test_a_resample_whose_interval_overflows_is_a_failed_resample_not_a_crash(monkeypatch):
    """A public sweep's layout (8 sizes x 3 rates x 10 token counts) with a flat cell, fitted
    with --bootstrap auto, where every fifth cell optimum of the resamples has an interval end
    past exp(709) (an OverflowError where it is read): the fit finishes, the resamples that
    overflowed counted as failed, or it refuses in one typed line."""
    import itertools
    from dataclasses import replace

    import archfit
    from archfit.laws.hyperparameters import lr_window

    real, calls = lr_window.summary, itertools.count()

    def overflowing(w, o):  # type: ignore[no-untyped-def]
        if next(calls) % 5 == 4:  # this cell's interval reaches past exp(709)
            o = replace(o, x_ci=(o.x, 800.0))
        return real(w, o)

    monkeypatch.setattr(lr_window, "summary", overflowing)
    try:
        f = archfit.fit(_flat_cell_table(), law="lr-batch", bootstrap="auto")
    except archfit.ArchfitError as e:
        assert "\n" not in str(e) and "Overflow" not in str(e)
    else:
        assert f.n_bootstrap() >= 200 and f.bootstrap["n_ok"] > 0


@pytest.mark.slow
def test_the_flat_cell_sweep_fits_through_the_cli_with_bootstrap_auto(cli, tmp_path):
    path = tmp_path / "lr.csv"
    _flat_cell_table().write_csv(path)
    r = cli("fit", path, "--law", "lr-batch")
    assert r.exit_code in (0, 2), r.output
    assert "unexpected" not in r.output and "Traceback" not in r.output
    if r.exit_code == 2:
        assert len(r.output.strip().splitlines()) == 1


def _set(df, col, value):  # type: ignore[no-untyped-def]
    """``df`` with row 3 of ``col`` set to ``value`` (the column's type widened to hold it)."""
    values = df[col].to_list()
    values[3] = value
    if isinstance(value, str):
        values = [str(v) for v in values]
    elif isinstance(value, float):
        values = [float(v) for v in values]
    return df.with_columns(pl.Series(col, values))


@pytest.mark.parametrize("col, value, match", [
    ("batch_size", "", r"column 'batch_size' is not numeric \(row 3"),
    ("batch_size", "eight", r"column 'batch_size' is not numeric \(row 3: 'eight'\)"),
    ("n_ctx", 0, "column 'batch_tokens'.*must be from 1"),
    ("batch_size", -4, "column 'batch_tokens'"),
    ("batch_size", 10 ** 12, "column 'batch_tokens'"),
    ("batch_size", math.inf, "column 'batch_tokens'"),
    ("lr", 1e-303, "column 'lr'.*at least 1e-08"),
])
def test_a_rate_or_batch_no_run_could_use_is_refused_naming_its_column(cli, repo, tmp_path, col,
                                                                       value, match):
    """A blank or a word where a batch size belongs, a context of 0, batches of 0, negative,
    infinite or 1e12 sequences, a rate of 1e-303: refused in one line by the checks a run's
    config applies (archfit.train.config), never fitted."""
    bad = _set(pl.read_parquet(repo / "datasets" / "lr_batch_sweep_cpu.parquet"), col, value)
    path = tmp_path / "t.csv"
    bad.write_csv(path)
    r = cli("fit", path, "--law", "lr-batch", "--bootstrap", "0")
    assert r.exit_code == 2, r.output
    assert re.search(match, r.output) and "unexpected" not in r.output
