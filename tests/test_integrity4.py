"""Integrity, round four (issue 56): the Python API meets the CLI. The design and its replay
read the table 'sweep collect' writes as 'fit' does, and a bad frame raises the typed
FitInputError in one line."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

import archfit
from archfit.designing.pool import Target
from archfit.errors import FitInputError


def runs(n: int = 40, seed: int = 0) -> pl.DataFrame:
    """Finished runs under the names 'sweep collect' writes (final_val_loss, not loss)."""
    rng = np.random.default_rng(seed)
    N, D = 10 ** rng.uniform(7, 9, n), 10 ** rng.uniform(8, 10, n)
    loss = 1.8 + 480 / N ** 0.35 + 2000 / D ** 0.37
    return pl.DataFrame({"params": N, "tokens": D, "final_val_loss": loss * np.exp(
        rng.normal(0, 0.005, n))})


POOL = pl.DataFrame({"params": [2e9, 4e9, 2e9, 4e9], "tokens": [4e10, 4e10, 8e10, 8e10]})


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


@pytest.mark.parametrize("bad", [
    pl.DataFrame({"params": [1e9, 2e9], "final_val_loss": ["a", "b"]}),
    pl.DataFrame({"params": ["x", "y"], "tokens": [1e9, 2e9], "loss": [2.0, 2.1]}),
    {"params": [1e9, 2e9], "loss": [2.0, 2.1], "tokens": [1e9, -1.0]},
])
def test_a_bad_frame_raises_the_typed_error_in_one_line(bad):
    for call in (lambda: archfit.design(POOL, law="chinchilla", results=bad,
                                        target=Target("compute", 1e22), budget_frac=0.5),
                 lambda: archfit.designing.replay(bad, runs(5), law="chinchilla",
                                               budget_frac=0.5)):
        with pytest.raises(FitInputError) as e:
            call()
        assert "\n" not in str(e.value) and str(e.value)


def test_predict_predicts_every_row_and_leaves_a_missing_loss_empty(tmp_path, cli):
    import json

    from archfit.laws.fitting import fit

    res = runs().rename({"final_val_loss": "loss"})
    fit(res, "chinchilla", bootstrap=10).to_json(tmp_path / "f.json")
    rows = runs(6, seed=1).rename({"final_val_loss": "loss"})
    losses = rows["loss"].to_list()
    part = rows.with_columns(pl.Series("loss", [None, None] + losses[2:]))
    part.write_csv(tmp_path / "part.csv")
    r = cli("predict", tmp_path / "f.json", tmp_path / "part.csv", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert len(d["rows"]) == 6 and [x["actual"] for x in d["rows"]][:2] == [None, None]
    assert [x["actual"] for x in d["rows"]][2:] == pytest.approx(losses[2:])
    assert d["n_with_loss"] == 4
    inside = [x["interval"]["low"] <= x["actual"] <= x["interval"]["high"]
              for x in d["rows"][2:]]
    assert {x["interval"]["kind"] for x in d["rows"]} == {"fitted"}
    assert d["coverage"] == pytest.approx(sum(inside) / 4)
    rows.with_columns(pl.lit(None, dtype=pl.Float64).alias("loss")).write_csv(tmp_path / "no.csv")
    r = cli("predict", tmp_path / "f.json", tmp_path / "no.csv", "--json")  # none trained yet
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert len(d["rows"]) == 6 and all(x["actual"] is None for x in d["rows"])
    assert "coverage" not in d
    rows.with_columns(pl.Series("params", [-1.0] + rows["params"].to_list()[1:])).write_csv(
        tmp_path / "neg.csv")
    r = cli("predict", tmp_path / "f.json", tmp_path / "neg.csv")  # what fit refuses
    assert r.exit_code == 2 and "'params' has 1 missing, non-finite or non-positive" in r.stderr


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


def test_fit_notes_a_fractional_depth(tmp_path):
    from archfit.sweep.store import read_runs

    df = pl.DataFrame({"params": [1e6, 2e6, 4e6], "loss": [3.0, 2.9, 2.8],
                       "n_layer": [2.0, 3.5, 4.0]})
    notes = read_runs([], frame=df).notes
    assert any("'n_layer'" in n and "1 fractional value(s), e.g. 3.5" in n for n in notes), notes
    whole = read_runs([], frame=df.with_columns(pl.Series("n_layer", [2.0, 3.0, 4.0]))).notes
    assert not any("fractional" in n for n in whole)


def _limited(args: list[str], timeout: float = 60.0):  # type: ignore[no-untyped-def]
    """archfit ``args`` in a subprocess under 4 GB of address space (round three's rule)."""
    import resource
    import subprocess
    import sys

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4_000_000 * 1024, 4_000_000 * 1024))

    return subprocess.run([sys.executable, "-m", "archfit", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, preexec_fn=limit)


@pytest.mark.slow
def test_a_million_row_table_is_answered_in_bounded_time_and_memory(tmp_path):
    """fit, design --results and predict on 1,000,000 rows of 17 configurations repeated:
    each finishes (or refuses in one line) within 60 s under 4 GB of address space; the
    prediction band computes each distinct configuration once."""
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from conftest import _joint

    small, _ = _joint(n_shapes=17, n_tokens=1, seed=3)
    big = pl.concat([small] * (1_000_000 // small.height + 1)).head(1_000_000)
    path = tmp_path / "big.parquet"
    big.write_parquet(path)
    r = _limited(["fit", path, "--law", "depth-joint", "--bootstrap", "20"])
    assert r.returncode == 2 and "exact duplicates" in r.stderr and "--dedupe" in r.stderr
    r = _limited(["fit", path, "--law", "depth-joint", "--bootstrap", "20", "--dedupe", "--out",
                  tmp_path / "f.json"])
    assert r.returncode == 0, r.stderr[-800:]
    r = _limited(["predict", tmp_path / "f.json", path, "--json"])
    assert r.returncode == 0, r.stderr[-800:]
    import json

    rows = json.loads(r.stdout)["rows"]
    assert len(rows) == 1_000_000 and rows[0]["predicted"] == rows[small.height]["predicted"]
    r = _limited(["design", "--law", "depth-joint", "--results", path, "--dedupe", "--params",
                  "2e9", "--sizes", "1e9", "--depths", "8,16,32", "--tokens", "1e10",
                  "--budget-frac", "0.9", "--bootstrap", "20"])
    assert r.returncode in (0, 2), r.stderr[-800:]
    assert "Traceback" not in r.stderr and (r.returncode == 0 or len(r.stderr.splitlines()) == 1)


def test_a_thousand_cuts_fit_each_distinct_split_once(cli, tmp_path):
    """backtest --cuts with 1,000 values: cuts between the same two sizes split the runs
    alike, so each split is fitted once, with progress, and every cut gets its result."""
    import json
    import sys

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from conftest import _joint

    df, _ = _joint(n_shapes=14, n_tokens=2, seed=4)
    path = tmp_path / "s.parquet"
    df.write_parquet(path)
    sizes = np.sort(df["params"].unique().to_numpy())
    cuts = np.linspace(sizes[9], sizes[-2], 1000)
    r = cli("backtest", path, "--law", "depth-joint", "--bootstrap", "5", "--cuts",
            ",".join(f"{c:.9g}" for c in cuts), "--json")
    assert r.exit_code == 0, r.output[-800:]
    out = json.loads(r.stdout)["backtests"]
    assert len(out) == 1000
    splits = {int(np.searchsorted(sizes, c, side="right")) for c in cuts}
    assert len({b["split_of_cut"] for b in out}) == len(splits) <= 5
    assert r.stderr.count("backtest: split") == len(splits)
    same = [b for b in out if b["split_of_cut"] == out[-1]["split_of_cut"]]
    assert len({json.dumps(b.get("coverage")) for b in same}) == 1  # one fit, one answer


def test_an_optimizer_that_stops_early_leaves_a_note():
    from archfit.laws.optimize import multistart

    def wrong(x: np.ndarray) -> tuple[float, np.ndarray]:
        return float(x @ x), -2 * x  # a gradient pointing uphill: the line search fails

    notes: list[str] = []
    x = multistart(wrong, [np.array([1.0, -2.0])], what="a test fit", notes=notes)
    assert np.all(np.isfinite(x))
    assert len(notes) == 1 and "a test fit: the optimizer stopped before converging" in notes[0]
    quiet: list[str] = []  # a sound gradient converges, and says nothing
    multistart(lambda x: (float(x @ x), 2 * x), [np.array([1.0, -2.0])], notes=quiet)
    assert quiet == []
    # a start already at its optimum on a bound (the gradient points out of the box): no step
    # is taken, and rightly none is flagged
    x = multistart(lambda x: (float(x.sum()), np.ones_like(x)), [np.array([0.0, 1.0])],
                   bounds=[(0.0, None), (1.0, 2.0)], notes=quiet)
    assert quiet == [] and np.array_equal(x, [0.0, 1.0])


def test_non_finite_derivatives_are_zeroed_with_a_note():
    from archfit.designing.ensemble import finite
    from archfit.designing.strategies import Step

    step = Step(None, None, {}, np.ones(2), np.ones(2, bool), None, np.random.default_rng(0))
    a = np.array([[1.0, np.nan], [np.inf, 2.0]])
    out = finite(step, a)
    assert out.tolist() == [[1.0, 0.0], [0.0, 2.0]]
    finite(step, a)  # the same note once
    assert len(step.notes) == 1 and "2 of 4 derivatives of the prediction were not finite" in step.notes[0]
    finite(step, np.ones(3))
    assert len(step.notes) == 1


def test_a_band_over_repeated_rows_is_each_rows_band():
    """Fit.band computes each distinct configuration once: the band of a table with repeats
    equals the band of each row alone; a single value beside a list is every row's."""
    from archfit.laws.fitting import fit

    f = fit(runs().rename({"final_val_loss": "loss"}), "chinchilla", bootstrap=20)
    N, D = np.array([1e9, 2e9, 1e9, 4e9, 2e9]), np.array([2e10, 4e10, 2e10, 8e10, 4e10])
    pred, lo, hi = f.band({"params": N, "tokens": D})
    for i in range(len(N)):
        one = f.band({"params": N[i:i + 1], "tokens": D[i:i + 1]})
        assert (pred[i], lo[i], hi[i]) == pytest.approx(tuple(x[0] for x in one), rel=1e-12)
    frame = f.predict(params=[1e9, 2e9], tokens=2e10, interval=0.95)
    assert frame["tokens"].to_list() == [2e10, 2e10] and frame.height == 2
    with pytest.raises(FitInputError, match="different lengths"):
        f.predict(params=[1e9, 2e9, 3e9], tokens=[2e10, 1e10], interval=0.95)
