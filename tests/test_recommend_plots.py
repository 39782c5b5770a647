import json
import struct
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archfit import recommend
from archfit.errors import RecommendError
from archfit.laws.inference.fitting import fit


def test_acceptance_1e12_default_levine(cli):
    r = cli("recommend", "--params", "1e12", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert 90 <= d["n_layer"] <= 97  # Levine's optimum at 1e12: 94.7 layers
    assert 28_000 <= d["d_model"] <= 34_000  # 29,657 at 12 d^2 per layer; a SwiGLU-GQA block
    # holds about 10.3 d^2, so the same N is ~8% wider
    assert d["family"] == "llama" and d["mlp"] == "swiglu" and d["position"] == "rope"
    assert d["n_head"] % 8 == 0 and d["n_kv_head"] == 8 and not d["bias"]
    assert abs(d["params_non_embedding"] / 1e12 - 1) < 0.02
    for k in ("n_layer", "d_model", "n_head", "d_ff", "params_non_embedding", "params_total",
              "rel_error", "law", "alternatives"):
        assert k in d
    assert d["d_model"] == d["n_head"] * d["head_dim"]
    assert d["law"] == "levine2020"


def test_gpt3_is_too_deep(cli):
    d = json.loads(cli("recommend", "--params", "175e9", "--json").output)
    assert d["n_layer"] < 96 and 75 <= d["n_layer"] <= 85


def test_tp_and_head_constraints():
    r = recommend(params=7e9, tp=8, head_dim=128, multiple_of=128)
    s = r.shape
    assert s.n_head % 8 == 0 and s.d_model % 128 == 0 and s.head_dim == 128
    assert abs(r.rel_error) < 0.02


def test_compute_mode_and_law_choice():
    a = recommend(compute=1e24)
    b = recommend(compute=1e24, fit="hoffmann2022")
    assert a.compute["law"] == "epoch2024" and b.compute["law"] == "hoffmann2022"
    # total-parameter convention: the shape's params_total lands on N_opt
    assert abs(a.shape.params_total / a.compute["N_opt"] - 1) < 0.02
    assert a.compute["N_opt"] != b.compute["N_opt"]


def test_ci_and_penalty_from_own_fit(tmp_path, levine_synthetic):
    f = fit(levine_synthetic(), law="levine", bootstrap=100)
    r = recommend(params=1e12, fit=f, top=3)
    lo, hi = r.ci["n_layer"]
    assert lo < r.n_layer_opt < hi
    alts = r.alternatives
    assert alts.height == 4 and alts["recommended"][0]
    assert alts["loss_penalty"][0] == pytest.approx(alts["loss_penalty"].min(), abs=1e-3)
    assert alts.to_pandas().shape[0] == 4
    assert "depth" in repr(r)


@pytest.mark.parametrize("args,needle", [
    (["--params", "0"], "greater than zero"),
    (["--params", "-1e9"], "greater than zero"),
    (["--params", "1e9", "--fit", "/no/such.json"], "no such fit file"),
    (["--params", "1e9", "--law", "kaplan2020"], "says nothing about depth"),
    (["--params", "1e9", "--head-dim", "96"], "does not divide"),
    (["--params", "1e9", "--ff-ratio", "auto"], "ff-ratio fit"),
    (["--params", "1e4"], "no shape near the optimal depth"),
    ([], "--params"),
])
def test_recommend_bad_input(args, needle, tmp_path, cli):
    r = cli("recommend", *args)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]


def test_recommend_bad_fit_files(tmp_path, cli, chinchilla_synthetic):
    (tmp_path / "x.json").write_text("not json")
    r = cli("recommend", "--params", "1e9", "--fit", tmp_path / "x.json")
    assert r.exit_code == 2 and "not JSON" in r.output
    f = fit(chinchilla_synthetic()[0], law="chinchilla-varpro", bootstrap=0)
    f.to_json(tmp_path / "c.json")
    # a chinchilla fit alone is fine with --compute but carries no shape law: default levine
    r = cli("recommend", "--compute", "1e22", "--fit", tmp_path / "c.json", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["compute"]["law"] == "chinchilla-varpro"
    with pytest.raises(RecommendError):
        recommend(params=1e9, compute=1e20)


def test_cli_does_not_import_torch_or_matplotlib():
    code = ("import sys; from archfit.cli import main; "
            "main(['recommend','--params','1e12','--json'], standalone_mode=False); "
            "print('torch' in sys.modules, 'matplotlib' in sys.modules, 'polars' in sys.modules,"
            " file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stderr.strip().splitlines()[-1] == "False False False"


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_plots_render_png_of_expected_size(tmp_path, levine_synthetic, chinchilla_synthetic):
    from archfit.plots import DPI, FIGSIZE, draw_all

    lev = fit(levine_synthetic(), law="levine", bootstrap=50)
    chin = fit(chinchilla_synthetic()[0], law="chinchilla-varpro", bootstrap=0)
    paths = draw_all(lev, str(tmp_path), target=1e12, recommended=recommend(1e12, fit=lev))
    paths += draw_all(chin, str(tmp_path))
    names = {p.rsplit("/", 1)[-1] for p in paths}
    assert names == {"levine-loss_vs_depth.png", "levine-optimal_depth_vs_size.png",
                     "levine-residuals.png", "chinchilla-varpro-isoloss_contours.png",
                     "chinchilla-varpro-residuals.png"}
    for p in paths:
        assert png_size(p) == (int(FIGSIZE[0] * DPI), int(FIGSIZE[1] * DPI))
        assert (tmp_path / p.rsplit("/", 1)[-1]).stat().st_size > 10_000


def test_plot_cli_svg(tmp_path, cli, levine_synthetic):
    lev = fit(levine_synthetic(), law="levine", bootstrap=0)
    lev.to_json(tmp_path / "l.json")
    r = cli("plot", tmp_path / "l.json", "-o", tmp_path / "figs", "--format", "svg", "--json")
    assert r.exit_code == 0, r.output
    figs = json.loads(r.output)["figures"]
    assert figs and all(open(p).read(200).lstrip().startswith("<?xml") for p in figs)


def test_ff_ratio_auto_from_an_ff_fit():
    import math

    import polars as pl

    rows = []
    for N in (1e6, 1e7, 1e8):
        best = 4.0 * (N / 1e7) ** 0.1
        for r in (1, 2, 3, 4, 6, 8, 12):
            rows.append(dict(params=N, d_model=256, d_ff=r * 256,
                             loss=3 + 0.03 * math.log(r / best) ** 2))
    ff = fit(pl.DataFrame(rows), law="ff-ratio", bootstrap=0)
    rec = recommend(params=1e9, fit=["levine2020", ff], ff_ratio="auto")
    expected = 4.0 * (1e9 / 1e7) ** 0.1
    assert abs(rec.shape.ff_ratio / expected - 1) < 0.06
    assert any("ff-ratio fit" in n for n in rec.notes)


def test_recommend_takes_shapes_field_names_only():
    new = recommend(params=7e9, vocab_size=32000, n_ctx=4096, tied_embeddings=False,
                    position="rope")
    assert new.shape.vocab_size == 32000 and new.shape.n_ctx == 4096
    assert new.shape.position == "rope" and not new.shape.tied_embeddings
    for old in ("vocab", "ctx", "kv_heads", "tied", "rope", "colour"):  # no other spelling
        with pytest.raises(TypeError, match="unexpected keyword"):
            recommend(params=7e9, **{old: 1})


def test_plot_reuses_the_fits_column_map(tmp_path, cli, levine_synthetic):
    """A fit made with --map remembers it: 'archfit plot FIT DATA' reads DATA the same way."""
    data = tmp_path / "runs.jsonl"
    levine_synthetic().rename({"loss": "final_loss", "params": "N"}).write_ndjson(data)
    fit_path = tmp_path / "f.json"
    r = cli("fit", data, "--law", "levine", "--map", "loss=final_loss", "--map", "params=N",
            "--bootstrap", "0", "--out", fit_path)
    assert r.exit_code == 0, r.output
    assert json.loads(fit_path.read_text())["mapping"] == {"loss": "final_loss", "params": "N"}
    r = cli("plot", fit_path, data, "-o", tmp_path / "figs", "--json")
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.output)["figures"]) == 3
    # an explicit --map still wins (and a wrong one says which column is missing)
    r = cli("plot", fit_path, data, "-o", tmp_path / "figs", "--map", "loss=nope")
    assert r.exit_code == 2 and "no column 'nope'" in r.output


def test_recommend_dispatches_on_role_not_name(cli, tmp_path, chinchilla_synthetic):
    """A loss-only law answers --params with an error naming what works; a compute law alone
    is used for --compute with the default shape law."""
    r = cli("recommend", "--params", "1e9", "--law", "kaplan2020")
    assert r.exit_code == 2 and "says nothing about depth or width" in r.output
    f = fit(chinchilla_synthetic()[0], law="chinchilla", bootstrap=0)
    assert f.law_obj.role == "compute"
    rec = recommend(compute=1e22, fit=f)
    assert rec.compute["law"] == "chinchilla" and rec.law == "levine2020"


@given(A=st.floats(5, 500), alpha=st.floats(0.2, 1.2), B=st.floats(0.5, 20),
       beta=st.floats(0.2, 1.5), N=st.sampled_from([7e9, 3e10, 1e11, 1e12]))
@settings(max_examples=40, deadline=None)
def test_recommended_is_the_argmin_and_no_penalty_is_negative(A, alpha, B, beta, N):
    """Candidates are compared at the target size: the recommended shape has the lowest
    predicted loss and every listed alternative a penalty >= 0 (random depth-width fits)."""
    from archfit.laws import Fit

    f = Fit(law="depth-width", params=dict(E=1.5, A=A, alpha=alpha, B=B, beta=beta, C=0.0,
                                           gamma=0.0), name="random")
    try:
        # one width plan (no family head split, no finer fallback): the ranking is the point
        r = recommend(params=N, fit=f, top=50, family="gpt2", head_dim=128, multiple_of=128)
    except RecommendError:
        return  # the optimum is outside what can be built: nothing to rank
    pens = [row["loss_penalty"] for row in r.alternatives_records]
    assert r.alternatives_records[0]["recommended"] and pens[0] == 0
    assert min(pens) >= 0 and pens == sorted(pens)
    law = f.law_obj
    loss = {row["n_layer"]: law.shape_loss(f.params, f.extra,
                                           r.shape.with_(n_layer=row["n_layer"]), N)
            for row in r.alternatives_records}
    assert loss[r.shape.n_layer] == min(loss.values())


@pytest.mark.parametrize("N,kv", [(7e9, 8), (7e10, 8), (1e12, 1), (1e9, 4)])
def test_gqa_and_mqa_shapes_are_sized_with_their_kv_heads(N, kv):
    """The family sizes widths with the key/value heads the shape will have, so GQA and MQA
    land on the target like multi-head attention does."""
    r = recommend(params=N, n_kv_head=kv, mlp="swiglu", position="rope")
    s = r.shape
    assert s.n_kv_head == kv and s.n_head % kv == 0 and abs(r.rel_error) <= 0.02
    assert s.params_non_embedding == pytest.approx(N, rel=0.02)


def test_the_optimal_depth_figure_shows_the_runs_on_log_axes(levine_synthetic):
    """Read from the figure's own axes: both axes log, the runs drawn as points, every run
    inside the x range, and the extrapolation shaded only beyond the largest run."""
    import numpy as np
    from matplotlib.patches import Polygon, Rectangle

    from archfit.plots.fits import optimal_shape_vs_size

    frame = levine_synthetic()
    lev = fit(frame, law="levine", bootstrap=0)
    fig = optimal_shape_vs_size(lev, data=frame.to_dict(as_series=False))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    runs = [ln for ln in ax.get_lines() if ln.get_gid() == "run"]
    assert len(runs) == 1 and len(runs[0].get_xdata()) == frame.height
    lo, hi = ax.get_xlim()
    assert lo <= frame["params"].min() and frame["params"].max() <= hi
    top = lev.diagnostics["span"]["params_max"]
    shaded = [p for p in ax.patches if isinstance(p, (Polygon, Rectangle))
              and p.get_label() == "extrapolation"]
    left = [p.get_x() if isinstance(p, Rectangle) else float(np.min(p.get_xy()[:, 0]))
            for p in shaded]
    assert shaded and min(left) == pytest.approx(top)


def test_recommend_builds_at_the_vocabulary_and_context_of_the_fits_runs(levine_synthetic):
    """A fit records the vocabulary and context its runs shared; recommend builds at them
    unless told otherwise, and says so (it once built GPT-2's 50,257 at 2,048 silently)."""
    import polars as pl

    frame = levine_synthetic().with_columns(pl.lit(256).alias("vocab_size"),
                                            pl.lit(128).alias("n_ctx"))
    lev = fit(frame, law="levine", bootstrap=0)
    assert (lev.diagnostics["span"]["vocab_size"], lev.diagnostics["span"]["n_ctx"]) == (256, 128)
    r = recommend(1e9, fit=lev)
    assert (r.shape.vocab_size, r.shape.n_ctx) == (256, 128)
    assert any("vocab 256 and context 128 as in the runs" in n for n in r.notes)
    r = recommend(1e9, fit=lev, vocab_size=32000)
    assert (r.shape.vocab_size, r.shape.n_ctx) == (32000, 128)
    plain = recommend(1e9)  # a published fit records no runs: the family's (Llama 3's)
    assert (plain.shape.vocab_size, plain.shape.n_ctx) == (128256, 8192)
    assert (recommend(1e9, family="gpt2").shape.vocab_size, recommend(
        1e9, family="gpt2").shape.n_ctx) == (50257, 2048)
