"""Over-training and inference in the token budget (archfit.recommending.budget), against
closed forms of Chinchilla's law and a brute-force search that shares no code with it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from archfit.laws import Fit
from archfit.recommending.budget import inference_optimal, overtraining

# Hoffmann et al. 2022's published fit (eq. 10), total parameters
P = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)


def chinchilla() -> Fit:
    return Fit(law="chinchilla", params=dict(P), conventions={"params": "total parameters"})


def loss(N, D):  # type: ignore[no-untyped-def]
    return P["E"] + P["A"] / N ** P["alpha"] + P["B"] / D ** P["beta"]


def optimum(C: float) -> tuple[float, float]:
    """Hoffmann et al. eq. 4: N_opt = G (C/6)^(beta/(alpha+beta)), G = (alpha A / beta B)^..."""
    a, b = P["alpha"], P["beta"]
    G = (a * P["A"] / (b * P["B"])) ** (1 / (a + b))
    N = G * (C / 6) ** (b / (a + b))
    return N, C / (6 * N)


def test_overtraining_prices_the_loss_against_the_compute_optimal_model():
    C, R = 1e23, 200.0
    o = overtraining(chinchilla(), C, R)
    N = math.sqrt(C / (6 * R))
    assert o["N"] == pytest.approx(N, rel=1e-12) and o["D"] == pytest.approx(R * N, rel=1e-12)
    assert o["loss_compute_optimal"] == pytest.approx(loss(*optimum(C)), rel=1e-9)
    assert o["penalty"] == pytest.approx(loss(N, R * N) / loss(*optimum(C)) - 1, rel=1e-9)
    assert o["penalty"] > 0  # any split but the optimum costs loss
    assert overtraining(chinchilla(), C, optimum(C)[1] / optimum(C)[0])["penalty"] == \
        pytest.approx(0, abs=1e-12)


@pytest.mark.parametrize("T", [1e11, 1e13, 1e15])
def test_inference_optimal_split_matches_a_brute_force_search(T):
    """The least 6 N D + 2 N T at the compute-optimal loss, against a dense grid over N with
    D(N) solved in closed form: D = (B / (L* - E - A / N^alpha))^(1 / beta)."""
    C = 1e23
    target = loss(*optimum(C))
    N = np.exp(np.linspace(np.log(optimum(C)[0]) - 8, np.log(optimum(C)[0]), 200_001))
    gap = target - P["E"] - P["A"] / N ** P["alpha"]
    ok = gap > 0
    D = (P["B"] / gap[ok]) ** (1 / P["beta"])
    total = 6 * N[ok] * D + 2 * N[ok] * T
    i = int(np.argmin(total))
    r = inference_optimal(chinchilla(), C, T)
    assert r["N"] == pytest.approx(N[ok][i], rel=1e-3)
    assert r["D"] == pytest.approx(D[i], rel=1e-3)
    assert r["total_flops"] == pytest.approx(total[i], rel=1e-6)
    assert r["N"] < optimum(C)[0] and r["D"] > optimum(C)[1]  # smaller, trained longer
    assert r["compute_optimal_total_flops"] == pytest.approx(C + 2 * optimum(C)[0] * T)


def test_no_inference_leaves_the_compute_optimal_split():
    r = inference_optimal(chinchilla(), 1e23, 1e-6)
    assert r["N"] == pytest.approx(optimum(1e23)[0], rel=1e-3)


def test_recommend_with_inference_builds_a_smaller_model_trained_longer(cli):
    """The issue's command: a smaller model on more tokens than --compute alone, with both FLOP
    budgets and the law named; the recipe trains it on the planned tokens."""
    plain = json.loads(cli("recommend", "--compute", 1e23, "--json").output)
    r = cli("recommend", "--compute", 1e23, "--inference-tokens", 1e13, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    p = d["compute"]["plan"]
    assert p["kind"] == "inference" and p["law"] == "epoch2024"
    assert d["params_total"] < plain["params_total"]
    assert p["D"] > plain["compute"]["D_opt"] and d["recipe"]["tokens"]["value"] == p["D"]
    assert p["train_flops"] > 1e23 and p["total_flops"] < p["compute_optimal_total_flops"]
    text = cli("recommend", "--compute", 1e23, "--tokens-per-param", 200).output
    assert "over-trained at 200 tokens per parameter" in text and "compute-optimal: +" in text


@pytest.mark.parametrize("argv, match", [
    (["--params", "7e9", "--inference-tokens", "1e13"], "with --compute C"),
    (["--compute", "1e23", "--inference-tokens", "1e13", "--tokens-per-param", "100"],
     "give one of them"),
    (["--compute", "1e23", "--tokens-per-param", "-5"], "must be greater than zero"),
])
def test_budget_options_refuse_what_they_cannot_answer(cli, argv, match):
    r = cli("recommend", *argv)
    assert r.exit_code == 2 and match in r.output, r.output
