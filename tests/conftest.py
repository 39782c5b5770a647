"""Shared fixtures and strategies.

- ``st.from_type(Shape)`` draws valid shapes of every kind (MLP kinds, tied and untied, GQA,
  RoPE, QK-norm, bias or not, both norms, and per-layer plans): registered here for every test.
- ``repo``: the repository root (tests read nothing outside it).
- ``cli``: run the ``archfit`` click command in-process; ``archfit_cmd``: argv for a subprocess.
- ``levine_synthetic`` / ``chinchilla_synthetic`` / ``joint_synthetic`` /
  ``correlated_sweep``: factories of synthetic tables drawn from a planted law (the last with
  correlated checkpoints: a shared per-run offset as well as per-row noise).
- Every test gets its own token cache (``ARCHFIT_CACHE``) under pytest's temporary folder.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import strategies as st

from archfit.shapes import Shape

ROOT = Path(__file__).resolve().parents[1]

def _plan(kind: int, L: int, h: int, g: int) -> dict:
    """A per-layer plan of kind 0 (uniform), 1 (no MLP in layer 0), 2 (no attention in the last
    layer), 3 (an hourglass: every other layer at half the heads, a multiple of the group g)."""
    if kind == 1:
        return {"no_mlp": (0,)}
    if kind == 2 and L > 1:
        return {"no_attn": (-1,)}
    if kind == 3:
        return {"heads_per_layer": tuple(g * (h if i % 2 == 0 else max(1, h // 2))
                                         for i in range(L))}
    return {}


def _moe(moe: tuple[int, ...] | None, L: int, ff: int) -> dict:
    """A mixture of experts (or none): E experts, top-k, shared experts, granularity G (d_ff is
    then G x ff, so each expert is ff wide), dense first layers and the sparse step."""
    if moe is None:
        return {"d_ff": ff}
    E, k, shared, G, first, every = moe
    first = min(first, L - 1)
    if (L // every) - (first // every) <= 0:
        every = 1
    return {"d_ff": G * ff, "n_experts": E, "top_k": min(k, E), "n_shared_experts": shared,
            "granularity": G, "dense_first": first, "moe_every": every}


st.register_type_strategy(Shape, st.builds(
    lambda L, hd, h, g, ff, mlp, tied, rope, bias, rms, qk, plan, moe, wide: Shape(
        n_layer=L, d_model=hd * h * g, n_head=h * g, n_kv_head=h, mlp=mlp,
        tied_embeddings=tied, position="rope" if rope else "learned", bias=bias,
        norm="rmsnorm" if rms else "layernorm", qk_norm=qk, vocab_size=257, n_ctx=64,
        d_head=2 * hd if wide else None, **_moe(moe if plan != 1 or L > 1 else None, L, ff),
        **_plan(plan, L, h, g)),
    st.integers(1, 12), st.sampled_from([2, 4, 8, 16]), st.integers(1, 4), st.integers(1, 3),
    st.integers(1, 512), st.sampled_from(["gelu", "relu2", "swiglu"]), st.booleans(),
    st.booleans(), st.booleans(), st.booleans(), st.booleans(), st.integers(0, 3),
    st.none() | st.tuples(st.integers(1, 8), st.integers(1, 4), st.integers(0, 2),
                          st.sampled_from([1, 2, 4]), st.integers(0, 2), st.integers(1, 2)),
    st.booleans(),
))


def pytest_configure(config):
    """Under pytest-xdist (the README's ``-n 2`` on 2 cores) each worker is one CPU-bound
    process: one torch thread and one BLAS thread in it (and in the processes it starts), and
    every sweep it starts trains one run at a time (``ARCHFIT_MAX_CONCURRENCY``), so that two
    workers never ask for more than the 2 cores."""
    import os

    if os.environ.get("PYTEST_XDIST_WORKER"):
        from threadpoolctl import threadpool_limits

        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = "1"  # read by each library as it loads: torch, scipy's BLAS
        threadpool_limits(1)  # and numpy's, loaded before this hook (for the worker's life)
        os.environ["ARCHFIT_MAX_CONCURRENCY"] = "1"
        import torch

        torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("ARCHFIT_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def repo() -> Path:
    return ROOT


@pytest.fixture
def cli():
    from archfit.cli import main

    def run(*args):
        return CliRunner().invoke(main, [str(a) for a in args])

    return run


@pytest.fixture
def archfit_cmd():
    return lambda *args: [sys.executable, "-m", "archfit", *map(str, args)]


def _levine(a=5.039, b=0.0555, sizes=(2e6, 1e7, 5e7, 2.5e8), seed=0, noise=0.002, seeds=1):
    """Loss = base(N) + c (ln L - ln L*(N))^2 with L* planted by the Levine relation."""
    from archfit.laws.shape.levine import optimal_depth

    rng = np.random.default_rng(seed)
    rows = []
    for N in sizes:
        Ls = optimal_depth(a, b, N)
        for L in np.unique(np.round(Ls * np.exp(np.linspace(-1.2, 1.2, 7))).astype(int)):
            if L < 1:
                continue
            d = math.sqrt(N / (12 * L))
            for s in range(seeds):
                loss = 10 * N ** -0.07 + 0.05 * (math.log(L) - math.log(Ls)) ** 2
                rows.append(dict(params=N, n_layer=float(L), d_model=d, seed=s,
                                 loss=loss + rng.normal(0, noise), target_params=N))
    return pl.DataFrame(rows)


def _chinchilla(seed=0, n=120, noise=0.01, truth=(1.7, 400.0, 800.0, 0.34, 0.3)):
    rng = np.random.default_rng(seed)
    E, A, B, a, b = truth
    N = 10 ** rng.uniform(7, 10, n)
    D = 10 ** rng.uniform(8, 11.5, n)
    L = (E + A / N**a + B / D**b) * np.exp(rng.normal(0, noise, n))
    return pd.DataFrame({"params": N, "tokens": D, "loss": L}), dict(
        E=E, A=A, B=B, alpha=a, beta=b)


JOINT_TRUTH = dict(E=1.8, A=300.0, alpha=0.32, B=1200.0, beta=0.33, kappa=0.04, p=-2.3, q=0.25)


def _joint(n_shapes=25, n_tokens=32, noise=0.005, seed=0, truth=None, span=40.0, n_min=1e7):
    """Scattered sweep from the depth-joint law: random width x depth shapes whose sizes span
    ``span``x from ``n_min``, each logged at ``n_tokens`` token counts, multiplicative noise."""
    t = dict(JOINT_TRUTH, **(truth or {}))
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_shapes):
        N = n_min * span ** rng.uniform(0, 1)
        L = int(round(math.exp(rng.uniform(math.log(2), math.log(48)))))
        d = math.sqrt(N / (12 * L))
        for D in np.geomspace(1e8, 1e10, n_tokens):
            loss = (t["E"] + t["A"] / N ** t["alpha"] + t["B"] / D ** t["beta"]
                    + t["kappa"] * (math.log(L) - t["p"] - t["q"] * math.log(N)) ** 2)
            rows.append(dict(params=N, n_layer=float(L), d_model=d, tokens=D,
                             loss=loss * math.exp(rng.normal(0, noise))))
    return pl.DataFrame(rows), t


def _correlated(law="depth-joint", seed=0, n_shapes=24, n_tokens=20, run_sd=0.01, row_sd=0.003):
    """A planted sweep with correlated checkpoints (:mod:`archfit.laws.planted`)."""
    from archfit.laws.planted import correlated_sweep

    return correlated_sweep(law, seed, n_shapes, n_tokens, run_sd, row_sd)


@pytest.fixture
def correlated_sweep():
    return _correlated


@pytest.fixture
def joint_synthetic():
    return _joint


@pytest.fixture
def levine_synthetic():
    return _levine


@pytest.fixture
def chinchilla_synthetic():
    return _chinchilla


TINY_SPEC = """name = "{name}"
seeds = [0]
lrs = [4e-3]

[model]
head_dim = 8
multiple = 8

[grid]
params = {params}
depths = {depths}
tolerance = 0.15

[budget]
{budget}

[train]
batch_size = {batch}
ctx = 64
eval_every = {eval_every}
eval_windows = {eval_windows}
warmup = 0.1

[executor]
kind = "local"
concurrency = 2
threads_per_run = 1
"""


def tiny_spec(path, name="tiny", params="[5e4, 1e5]", depths="[1, 2, 4]",
              budget="tokens = 1e5", batch=8, eval_every=50, eval_windows=64) -> str:
    """A CPU recipe like the demo's, smaller (byte-level stdlib corpus, ctx 64), written to
    ``path``; returns the path."""
    path.write_text(TINY_SPEC.format(name=name, params=params, depths=depths, budget=budget,
                                     batch=batch, eval_every=eval_every,
                                     eval_windows=eval_windows))
    return str(path)


# The fast suite runs in two workers, one file at a time each (-n 2 --dist loadfile), handed out
# in collection order: the longest files first, so that neither worker is left alone at the end
# with a long one (the others keep their order; within a file the order never changes).
LONGEST_FIRST = ("test_calibration.py", "test_readme.py", "test_design.py", "test_sweep.py",
                 "test_fuzz.py", "test_real_grids.py", "test_reliability.py")


def pytest_collection_modifyitems(session, config, items):  # type: ignore[no-untyped-def]
    def rank(item):  # type: ignore[no-untyped-def]
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each file's own order is kept
