"""Contracts every law and every export format must pass (scikit-learn's
``parametrize_with_checks`` in spirit): :func:`check_law` and :func:`check_export`.
``tests/test_contracts.py`` runs them over everything registered; a new law or format is
checked by adding it, and a law without example data fails until it has some here."""

from __future__ import annotations

import ast
import json
import math
import subprocess
from pathlib import Path
from typing import Callable

import numpy as np
import polars as pl

from conftest import _chinchilla, _joint, _levine

# ------------------------------------------------------------------ example data per law
# Each draws a table from the law with known parameters and small noise (seeded).


def _kaplan_n(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    N = 10 ** rng.uniform(6, 9, 40)
    return pl.DataFrame({"params": N, "loss": (8.8e13 / N) ** 0.076
                         * np.exp(rng.normal(0, 0.005, 40))})


def _kaplan_nd(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    N, D = 10 ** rng.uniform(6, 9, 80), 10 ** rng.uniform(8, 10.5, 80)
    L = ((6.4e13 / N) ** (0.076 / 0.103) + 1.8e13 / D) ** 0.103
    return pl.DataFrame({"params": N, "tokens": D, "loss": L * np.exp(rng.normal(0, 0.003, 80))})


def _depth_width(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for N in (5e6, 2e7, 8e7):
        for L in (2, 3, 4, 6, 8, 12, 16):
            w = math.sqrt(N / (12 * L))
            loss = 1.5 + 30.0 / w ** 0.6 + 2.0 / L ** 0.8
            rows.append(dict(params=N, n_layer=L, d_model=w,
                             loss=loss * math.exp(rng.normal(0, 0.002))))
    return pl.DataFrame(rows)


def _ff_ratio(seed: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for N in (1e6, 1e7, 1e8):
        best = 4.0 * (N / 1e7) ** 0.1
        for r in (1, 2, 3, 4, 6, 8, 12):
            rows.append(dict(params=N, d_model=256, d_ff=r * 256,
                             loss=3 + 0.03 * math.log(r / best) ** 2 - 0.1 * math.log10(N)
                             + rng.normal(0, 0.0005)))
    return pl.DataFrame(rows)


# Muennighoff et al. 2023's C4 fit (the published muennighoff2023)
DATA_CONSTRAINED = dict(E=math.exp(0.6254804), A=math.exp(6.255414), B=math.exp(7.3049974),
                        alpha=0.3526596, beta=0.3526596, R_D=15.4, R_N=5.3)


def _data_constrained(seed: int, truth: dict[str, float] = DATA_CONSTRAINED,
                      n: int = 90) -> pl.DataFrame:
    """Runs of 1e7-3e9 parameters on 1e8-3e10 unique tokens repeated 1-40 times."""
    from archfit.laws.compute.data_constrained import loss

    rng = np.random.default_rng(seed)
    N = 10 ** rng.uniform(7, 9.5, n)
    U = 10 ** rng.uniform(8, 10.5, n)
    D = U * rng.choice([1, 1, 2, 4, 8, 16, 40], n)
    L = np.array([loss(truth, a, b, c) for a, b, c in zip(N, D, U)])
    return pl.DataFrame({"params": N, "tokens": D, "unique_tokens": U,
                         "loss": L * np.exp(rng.normal(0, 0.003, n))})


# a data-overfit truth: Chinchilla's terms near Muennighoff et al.'s C4 fit and an overfitting
# term of the size ScaleBench's training split of their runs shows (O 0.04, omega 0.85, rho 0.4)
DATA_OVERFIT = dict(E=1.9, A=500.0, B=1500.0, alpha=0.35, beta=0.35, O=0.04, omega=0.85,
                    rho=0.4)


def _data_overfit(seed: int, truth: dict[str, float] = DATA_OVERFIT, n: int = 90
                  ) -> pl.DataFrame:
    """Runs of 1e7-3e9 parameters on 1e8-3e10 unique tokens repeated 1-200 times."""
    rng = np.random.default_rng(seed)
    N = 10 ** rng.uniform(7, 9.5, n)
    U = 10 ** rng.uniform(8, 10.5, n)
    D = U * rng.choice([1, 1, 2, 4, 8, 16, 40, 100, 200], n)
    L = truth["E"] + truth["A"] / N ** truth["alpha"] + truth["B"] / D ** truth["beta"] \
        + truth["O"] * (N / U) ** truth["omega"] * (D / U) ** truth["rho"]
    return pl.DataFrame({"params": N, "tokens": D, "unique_tokens": U,
                         "loss": L * np.exp(rng.normal(0, 0.003, n))})


# a floor falling with size, a data exponent rising with it (0.29 at 1e9, 0.31 at 1e11)
FARSEER = dict(a1=0.05, b1=-1.3, alpha=0.2, a2=0.2, b2=5.5, beta=0.2, a3=0.5, b3=0.4,
               gamma=-0.3)


def _farseer(seed: int, truth: dict[str, float] = FARSEER, noise: float = 0.002
             ) -> pl.DataFrame:
    """A dense grid: 8 sizes from 1e8 to 1e10, each at 8 token counts from 1e9 to 3e11."""
    from archfit.laws.compute.farseer import loss

    rng = np.random.default_rng(seed)
    rows = [dict(params=N, tokens=D, loss=loss(truth, N, D) * math.exp(rng.normal(0, noise)))
            for N in np.logspace(8, 10, 8) for D in np.logspace(9, 11.5, 8)]
    return pl.DataFrame(rows)


# Chinchilla's form with alpha = beta: at each budget the loss is symmetric in ln N about
# N_opt = G (C/6)^(1/2), G = (A/B)^(1/(2 alpha)) (Hoffmann et al. eq. 4)
ISOFLOP_TRUTH = dict(E=1.7, A=400.0, B=1600.0, alpha=0.3, beta=0.3)


def isoflop_sweep(seed: int, budgets: tuple[float, ...] = (1e18, 1e19, 1e20, 1e21),
                  sizes: int = 7, half_width: float = 1.5, noise: float = 0.003,
                  truth: dict[str, float] = ISOFLOP_TRUTH) -> pl.DataFrame:
    """An isoFLOP sweep of ``truth``: at each budget, ``sizes`` sizes log-spaced within
    ``half_width`` in ln N of its optimum, each on D = C / (6 N) tokens."""
    rng = np.random.default_rng(seed)
    G = (truth["A"] / truth["B"]) ** (1 / (2 * truth["alpha"]))
    rows = []
    for C in budgets:
        n_opt = G * math.sqrt(C / 6)
        for x in np.linspace(-half_width, half_width, sizes):
            N = n_opt * math.exp(x)
            D = C / (6 * N)
            loss = truth["E"] + truth["A"] / N ** truth["alpha"] + truth["B"] / D ** truth["beta"]
            rows.append(dict(params=N, tokens=D, loss=loss * math.exp(rng.normal(0, noise))))
    return pl.DataFrame(rows)


def curve_points(seed: int, sizes: int = 21, noise: float = 0.002,
                 truth: dict[str, float] = ISOFLOP_TRUTH) -> pl.DataFrame:
    """Every logged point of runs of 1e7-1e9 parameters, each to 2e3 tokens per parameter,
    on ``truth``'s L(N, D): the rows the envelope reads."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, N in enumerate(np.logspace(7, 9, sizes)):
        for D in np.logspace(math.log10(N), math.log10(2e3 * N), 120):
            loss = truth["E"] + truth["A"] / N ** truth["alpha"] + truth["B"] / D ** truth["beta"]
            rows.append(dict(run_id=f"r{i}", params=float(N), tokens=float(D),
                             loss=loss * math.exp(rng.normal(0, noise))))
    return pl.DataFrame(rows)


def _lr_sweep(seed: int) -> pl.DataFrame:
    from archfit.laws.planted import lr_sweep

    return lr_sweep(seed=seed)


def _lr_surface(seed: int) -> pl.DataFrame:
    """A rate x batch grid drawn from lr-batch-surface: 4 sizes x 2 token counts x 5 rates x 3
    batches about the planted centres, 0.2% noise."""

    p = {"E": 1.5, "A": 20.0, "alpha": 0.25, "B": 30.0, "beta": 0.2, "c_lr": 2.0,
         "n_lr": -0.4, "d_lr": 0.05, "c_b": 1.0, "n_b": 0.05, "d_b": 0.25, "w_lr_lo": 0.03,
         "w_lr_hi": 0.06, "w_b": 0.02, "w_x": -0.01, "gamma": 1.0, "k_lr": 0.0, "k_b": 0.0}
    return lr_surface_grid(p, (1e6, 3e6, 1e7, 3e7), (2e8, 1e9), seed)


def lr_surface_grid(p: dict, sizes: tuple, tokens: tuple, seed: int = 0,
                    noise: float = 0.002) -> pl.DataFrame:
    """Each (size, tokens) cell's 5 rates x 3 batches about the law's centre, drawn from the
    surface at ``p`` with ``noise`` relative scatter."""
    from archfit.laws import get_law

    law, rng, rows = get_law("lr-batch-surface"), np.random.default_rng(seed), []
    for N in sizes:
        for D in tokens:
            o = law.optimum_point(p, N, D)
            for f_lr in (0.25, 0.5, 1.0, 2.0, 4.0):
                for f_b in (0.25, 1.0, 4.0):
                    cols = {"params": np.array([N]), "tokens": np.array([D]),
                            "lr": np.array([o["lr"] * f_lr]),
                            "batch_tokens": np.array([o["batch_tokens"] * f_b])}
                    loss = float(law.predict(p, cols)[0]) * math.exp(rng.normal(0, noise))
                    rows.append({k: float(v[0]) for k, v in cols.items()} | {"loss": loss})
    return pl.DataFrame(rows)


VOCAB = {"E": 5.5, "A1": 1.8, "A2": 0.2, "alpha2": 0.67, "B": 2.1, "beta": 0.45}
# about what vocab-basin fits on Tao et al.'s sweep (ScaleBench's training split)
VOCAB_BASIN = {"E": 5.6, "A": 1.76, "B": 1.39, "beta": 0.41, "kappa": 0.046, "lnV0": 8.72,
               "gamma": 0.19}


def _vocab(seed: int, p: dict = VOCAB, noise: float = 0.002, law_name: str = "vocab"
           ) -> pl.DataFrame:
    """A vocabulary sweep drawn from a vocabulary law: 4 sizes x 5 vocabularies, each run read
    at 6 character counts (its checkpoints), ``noise`` nats of scatter; every loss is below 0."""
    from archfit.laws import get_law

    law, rng, rows = get_law(law_name), np.random.default_rng(seed), []
    for n, d in ((3e7, 512), (1e8, 768), (3e8, 1024), (1e9, 2048)):
        for v in (4096, 8192, 16384, 32768, 65536):
            for h in np.geomspace(2e9, 4e11, 6):
                row = {"params": n, "vocab_size": float(v), "d_model": float(d),
                       "characters": float(h)}
                loss = float(law.predict(p, {k: np.array([x]) for k, x in row.items()})[0])
                rows.append(row | {"loss": loss + rng.normal(0, noise)})
    return pl.DataFrame(rows)


def _moe(law_name: str, sparsity: str, values: tuple[int, ...], params: dict) -> Callable:
    def draw(seed: int) -> pl.DataFrame:
        from archfit.laws import get_law

        law, rng, rows = get_law(law_name), np.random.default_rng(seed), []
        for N in (1e7, 4e7, 1.6e8, 6.4e8):
            for D in (1e9, 1e10, 1e11):
                for v in values:
                    rows.append({"params_active": N, "tokens": D, sparsity: float(v),
                                 "loss": law.loss(params, N, D, v)
                                 * math.exp(rng.normal(0, 0.002))})
        return pl.DataFrame(rows)
    return draw


EXAMPLES: dict[str, Callable[[int], pl.DataFrame]] = {
    "moe-granularity": _moe("moe-granularity", "granularity", (1, 2, 4, 8, 16),
                            {"a": 18.1, "alpha": 0.115, "b": 30.8, "beta": 0.147, "g": 2.1,
                             "gamma": 0.58, "c": 0.47}),
    "moe-experts": _moe("moe-experts", "n_experts", (1, 2, 4, 8, 16, 32, 64),
                        {"a": 30.0, "delta": 0.2, "alpha": 0.2, "gamma": -0.01, "b": 40.0,
                         "omega": -0.4, "beta": 0.18, "zeta": 0.02, "c": 1.4}),
    "data-constrained": _data_constrained,
    "data-overfit": _data_overfit,
    "farseer": _farseer,
    "isoflop": isoflop_sweep,
    "envelope": curve_points,
    "kaplan-n": _kaplan_n,
    "kaplan-nd": _kaplan_nd,
    "chinchilla": lambda seed: pl.from_pandas(_chinchilla(seed)[0]),
    "chinchilla-varpro": lambda seed: pl.from_pandas(_chinchilla(seed)[0]),
    "levine": lambda seed: _levine(seed=seed, seeds=2),
    "depth-width": _depth_width,
    "depth-joint": lambda seed: _joint(n_shapes=20, n_tokens=8, seed=seed)[0],
    "ff-ratio": _ff_ratio,
    "lr-batch": lambda seed: _lr_sweep(seed=seed).drop("lr_opt_true"),
    "lr-batch-surface": _lr_surface,
    "vocab": _vocab,
    "vocab-basin": lambda seed: _vocab(seed, VOCAB_BASIN, law_name="vocab-basin"),
}
VERDICTS = ("informative", "weak", "uninformative")


def check_law(name: str, data: pl.DataFrame, tmp: Path) -> None:
    """A law fits the data it was drawn from, says how far to trust the fit, survives a JSON
    round trip, answers what its role promises (a shape, a compute split, an ff ratio, a
    loss) and draws its figures."""
    from archfit.laws import Fit, get_law
    from archfit.laws.inference.fitting import fit
    from archfit.plots import draw_all
    from archfit.recommending import recommend

    law = get_law(name)
    f = fit(data, law=name, bootstrap=30, seed=0)
    assert f.law == name and set(f.params) == set(law.param_names), name
    assert all(math.isfinite(v) for v in f.params.values()), (name, f.params)
    assert f.trust["verdict"] in VERDICTS and isinstance(f.trust["reasons"], list), name
    back = Fit.from_json(f.to_json())
    assert back.law == f.law and back.params == f.params, name
    assert back.trust["verdict"] == f.trust["verdict"], name
    assert back.to_json() == Fit.from_json(back.to_json()).to_json(), name  # stable
    target = None
    if law.role == "shape":
        target = 1e9
        r = recommend(params=target, fit=f, top=3)
        assert abs(r.shape.params_non_embedding / target - 1) <= 0.02, name
        assert r.trust["verdict"] in VERDICTS, name
    elif law.role == "compute":
        r = recommend(compute=1e21, fit=f)
        assert r.compute and r.compute["N_opt"] > 0 and r.compute["D_opt"] > 0, name
    elif law.role == "ff":
        r = recommend(params=1e8, fit=["levine2020", f], ff_ratio="auto")
        assert r.shape.ff_ratio > 0 and any("ff-ratio fit" in n for n in r.notes), name
    elif law.role == "hparam":
        r = recommend(params=1e8, fit=["levine2020", f], tokens=2e9)
        assert r.recipe and r.recipe["lr"]["provenance"] == "fitted", name
    elif law.role == "moe":
        target = 1e22
        at = {"params_active": 1e9, "tokens": 2e10, "granularity": 8.0, "n_experts": 8.0}
        assert all(math.isfinite(v) for v in f.predict(
            **{c: at[c] for c in (*law.columns, *law.optional_columns) if c != "loss"})), name
        assert any(k.startswith(("G_opt@", "E_opt@")) for k in law.derived(f.params, [1e22]))
    elif law.role == "vocab":
        r = recommend(params=1e8, fit=["levine2020", f], vocab_size="auto")
        assert r.vocabulary and r.vocabulary["provenance"] == "fitted", name
        at = {"params": 1e9, "vocab_size": 32768, "d_model": 2048, "characters": 4e11}
        assert all(math.isfinite(v) for v in f.predict(**{c: at[c] for c in (*law.columns,
                                                                            "characters")
                                                          if c != "loss"})), name
    elif law.role == "loss":
        at = {"params": 1e9, "tokens": 2e10}  # every input column the law declares
        assert all(math.isfinite(v) for v in f.predict(
            **{c: at[c] for c in law.columns if c != "loss"})), name
    else:  # a kind registered beyond these: its record's own check
        from archfit.laws import kind_of

        kind = kind_of(law)
        assert kind.check is not None, f"kind {kind.role!r} has no contract check (Kind.check)"
        kind.check(f)
    paths = draw_all(f, str(tmp), target=target)
    assert paths and all(Path(p).stat().st_size > 5000 for p in paths), (name, paths)


def check_export(fmt: str, tmp: Path) -> None:
    """A format writes, for its own family's shape, a file that parses in the format's own
    syntax, names the exact params_total and its convention, and expresses the shape."""
    from archfit.formats import FORMATS, ExportOptions, family_fields, problems
    from archfit.formats import read_text as read_export_text
    from archfit.shapes import Shape

    f = FORMATS[fmt]
    s = Shape(**family_fields({"n_layer": 4, "d_model": 256, "n_head": 4, "vocab_size": 1000,
                               "n_ctx": 128, **f.defaults}))
    assert problems(s, fmt) == [], fmt
    text = f.render(s, ExportOptions())
    back = read_export_text(text, Path(f.filename).suffix).shape  # archfit reads what it wrote
    assert back.params_total == s.params_total and back == s, fmt
    path = tmp / f.filename
    path.write_text(text)
    if f.filename.endswith(".json"):
        cfg = json.loads(text)
        assert cfg["archfit"]["params_total"] == s.params_total, fmt
    else:
        assert f"{s.params_total:,}" in text or str(s.params_total) in text, fmt
        if f.filename.endswith((".yaml", ".yml")):
            import yaml

            assert isinstance(yaml.safe_load(text), dict), fmt
        elif f.filename.endswith(".py"):
            ast.parse(text)
        elif f.filename.endswith(".sh"):
            r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
            assert r.returncode == 0, (fmt, r.stderr)
    assert "written by archfit" in text or '"archfit"' in text, fmt
