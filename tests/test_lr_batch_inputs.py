"""What the lr x batch fit takes: a loss that falls with the rate in every cell, a rate that does
not matter, batches it must never average over, and cells too small for an interval."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
import json
import math


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
