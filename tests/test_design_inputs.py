"""What design and its replay take: the table 'sweep collect' writes, read as 'fit' reads it;
a target that is not one, duplicate rows, a compute target's pool; the runs design chose,
written where it can be found again."""

from __future__ import annotations

from collected import POOL, runs

import warnings
import numpy as np
import polars as pl
import pytest
import archfit
from archfit.designing.pool import Target
from archfit.designing import DesignError


def test_design_fits_a_collected_table_as_fit_does():
    res = runs()
    kw = dict(law="chinchilla", target=Target("compute", 1e22), budget_frac=0.5, bootstrap=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = archfit.design(POOL, results=res, **kw)
        same = archfit.design(POOL, results=res.rename({"final_val_loss": "loss"}), **kw)
    assert d.ci_now is not None and not any("no fit yet" in n for n in d.notes)
    assert d.ci_now == same.ci_now and d.chosen == same.chosen


def test_replay_reads_a_collected_table():
    res = runs(60)
    big = res.sort("params")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = archfit.designing.replay(big.head(54), big.tail(6), law="chinchilla", budget_frac=0.5,
                                  bootstrap=10, final_bootstrap=10)
    assert r["target"]["design"]["mean_abs_rel_error"] < 0.05


def test_design_writes_the_runs_it_chose_and_recognises_its_own_table(cli, tmp_path, repo):
    """-o next.toml keeps a chosen layer variant's plan (a uniform shape trains a different
    model) and refuses a batch a spec cannot hold (shapes x lrs x seeds); -o next.csv run
    twice replaces its own table and never a user's."""
    import tomllib

    spec = (repo / "sweeps" / "layer-variants.toml").read_text()
    one = tmp_path / "lv1.toml"
    one.write_text(spec.replace("seeds = [0, 1, 2]", "seeds = [0]"))
    args = ["design", "--law", "depth-joint", "--spec", one, "--params", "4e5",
            "--budget-frac", "0.9", "--batch", "3"]
    r = cli(*args, "-o", tmp_path / "next.toml")
    assert r.exit_code == 0, r.output
    shapes = tomllib.loads((tmp_path / "next.toml").read_text())["grid"]["shapes"]
    assert {tuple(s.get("no_mlp", ())) for s in shapes} >= {(0,)}, shapes  # the plan kept
    r = cli("sweep", "plan", tmp_path / "next.toml")
    assert r.exit_code == 0 and "no-mlp:0" in r.output, r.output
    three = tmp_path / "lv3.toml"
    three.write_text(spec)
    r = cli(*[three if a == one else a for a in args], "-o", tmp_path / "x.toml")
    assert r.exit_code == 2 and "write them as a table" in r.stderr, r.output
    for strategy in ("archfit", "random"):
        for _ in range(2):
            r = cli(*args, "--strategy", strategy, "-o", tmp_path / "next.csv")
            assert r.exit_code == 0, r.output
    (tmp_path / "mine.csv").write_text("a,b\n1,2\n")
    r = cli(*args, "-o", tmp_path / "mine.csv")
    assert r.exit_code == 2 and (tmp_path / "mine.csv").read_text() == "a,b\n1,2\n"


@pytest.mark.parametrize("target", [7.2e5, "7.2e5", None])
def test_design_names_a_target_that_is_not_a_target(target):
    with pytest.raises(DesignError, match="give a Target, e.g. Target\\('params', 7.2e5\\)"):
        archfit.design(POOL, law="chinchilla", target=target, budget_frac=0.5)


def test_a_replay_refuses_duplicate_rows_unless_deduped():
    rng = np.random.default_rng(0)
    N, D = 10 ** rng.uniform(7, 9, 40), 10 ** rng.uniform(8, 10, 40)
    df = pl.DataFrame({"params": N, "tokens": D,
                       "loss": 1.8 + 480 / N ** 0.35 + 2000 / D ** 0.37}).sort("params")
    done, target = pl.concat([df.head(34), df.head(34)]), df.tail(6)
    with pytest.raises(DesignError, match="34 of 68 rows of the replay table are exact"):
        archfit.designing.replay(done, target, law="chinchilla", budget_frac=0.3)
    r = archfit.designing.replay(done, target, law="chinchilla", budget_frac=0.3, dedupe=True,
                                 bootstrap=10, final_bootstrap=10)
    assert any("dropped 34 duplicate row(s)" in n for n in r["notes"])
    assert r["target"]["design"]["mean_abs_rel_error"] < 0.01  # the law, exactly


def test_design_auto_for_a_compute_target_takes_a_pool_of_sizes_and_tokens(cli, repo,
                                                                          tmp_path,
                                                                          monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("design", "--law", "auto", "--compute", 1e18, "--results",
            repo / "datasets" / "demo_sweep.parquet", "--sizes", "1e5,2e5", "--tokens",
            "3e5,6e5", "--spec", repo / "sweeps" / "demo.toml", "--budget-frac", 0.5,
            "--bootstrap", 20)
    assert r.exit_code == 0, r.output  # it said "unknown law 'auto'"
    assert "target: N_opt at C = 1e+18 FLOPs" in r.output
