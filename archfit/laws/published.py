"""Published laws shipped with archfit, usable by name anywhere a fit file is accepted."""

from __future__ import annotations

import math
from typing import Any

from archfit.interval import PUBLISHED as PUBLISHED_KIND, Interval, record
from archfit.shapes import SHAPE_LAW_N

# The sizes each paper trained, as its abstract states them (for the extrapolation check).
# Levine et al. 2020 state no single range archfit could record, so levine2020 has none.
KAPLAN_SPAN = {"params_min": 768.0, "params_max": 1.5e9,
               "note": "Kaplan et al. 2020: 768 to 1.5 billion non-embedding parameters"}
CHINCHILLA_SPAN = {"params_min": 7e7, "params_max": 1.6e10,
                   "note": "Hoffmann et al. 2022: 70 million to over 16 billion parameters"}

# Loss over depth at fixed N, from Kaplan et al. 2020, Fig. 5's caption: "an (n_layer, d_model)
# = (6, 4288) reaches a loss within 3% of the (48, 1600) model" (1.5B non-embedding). Read as
# the penalty of a depth a factor 8 from the optimum, the relative curvature in ln depth is
# 0.03 / ln(8)^2. The paper states a bound, not a fit: the range is archfit's assumption.
KAPLAN_CURVATURE = {
    "value": 0.03 / math.log(8) ** 2,
    "range": [0.5 * 0.03 / math.log(8) ** 2, 2 * 0.03 / math.log(8) ** 2],
    "unit": "fraction of the loss per (ln n_layer - ln n_layer*)^2",
    "provenance": "assumed",
    "why": "a factor 2 either way of the curvature read from Kaplan et al. 2020's Fig. 5 bound "
           "((6, 4288) within 3% of (48, 1600) at 1.5B); the paper states no interval",
    "source": "Kaplan et al. 2020, 'Scaling Laws for Neural Language Models', Fig. 5: (6, 4288) "
              "within 3% of (48, 1600) at 1.5B",
    "link": "https://arxiv.org/abs/2001.08361",
}

PUBLISHED: dict[str, dict[str, Any]] = {
    "levine2020": {
        "link": "https://arxiv.org/abs/2006.12467",
        "law": "levine",
        "params": {"a": 5.039, "b": 0.0555},
        "source": "Levine et al. 2020, 'Limits to Depth Efficiencies of Self-Attention' "
                  "(NeurIPS 2020), fit as quoted in the BigScience math notes",
        "conventions": {"params": f"non-embedding parameters, {SHAPE_LAW_N}"},
        "extra": {"curvature_rel": KAPLAN_CURVATURE},
    },
    "gemstones2025": {
        "link": "https://arxiv.org/abs/2502.06857",
        "law": "depth-width",
        # ln L = logsumexp(a_w - alpha ln w, a_d - beta ln d, a_D - gamma ln D, e): A = e^a_w,
        # B = e^a_d, C = e^a_D, E = e^e (e = -155.5: no floor)
        "params": {"E": 0.0, "A": math.exp(2.1161206619), "alpha": 0.2607743843,
                   "B": math.exp(0.7321112501), "beta": 0.1418010881,
                   "C": math.exp(11.5418232414), "gamma": 0.5420589921},
        "source": "McLeish et al. 2025, 'Gemstones: A Model Suite for Multi-Faceted Scaling "
                  "Laws' (arXiv 2502.06857): the width-depth approach-3 fit (Huber 1e-4) of "
                  "their constant-learning-rate checkpoints past 100B tokens, repository "
                  "mcleish7/gemstone-scaling-laws, parameters_delta-4/approach_3_width_depth_"
                  "grid_search_0_hot_100b+.json (commit 1fb97a2); a point estimate, no "
                  "interval published",
        "conventions": {"params": "12 n_layer d_model^2 (width and depth are what it reads)",
                        "tokens": "training tokens", "loss": "nats/token, their data"},
        "diagnostics": {"span": {"params_min": 5e7, "params_max": 2e9,
                                 "note": "Gemstones: about 50 million to 2 billion parameters"}},
    },
    "kaplan2020": {
        "link": "https://arxiv.org/abs/2001.08361",
        "law": "kaplan-n",
        "params": {"N_c": 8.8e13, "alpha_N": 0.076},
        "source": "Kaplan et al. 2020, 'Scaling Laws for Neural Language Models', eq. 1.1; "
                  "data law L(D) = (D_c/D)^alpha_D with alpha_D 0.095, D_c 5.4e13 tokens",
        "conventions": {"params": "non-embedding parameters", "loss": "nats/token, WebText2"},
        "extra": {"data_law": {"alpha_D": 0.095, "D_c": 5.4e13}},
        "diagnostics": {"span": KAPLAN_SPAN},
    },
    "kaplan2020-nd": {
        "link": "https://arxiv.org/abs/2001.08361",
        "law": "kaplan-nd",
        "params": {"N_c": 6.4e13, "D_c": 1.8e13, "alpha_N": 0.076, "alpha_D": 0.103},
        "source": "Kaplan et al. 2020, eq. 1.5 / Table 2 (the L(N, D) fit)",
        "diagnostics": {"span": KAPLAN_SPAN},
        "conventions": {"params": "non-embedding parameters", "tokens": "training tokens"},
    },
    "hoffmann2022": {
        "link": "https://arxiv.org/abs/2203.15556",
        "law": "chinchilla",
        "params": {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28},
        "source": "Hoffmann et al. 2022, 'Training Compute-Optimal Large Language Models', "
                  "approach 3 (eq. 10)",
        "diagnostics": {"span": CHINCHILLA_SPAN},
        "conventions": {"params": "total parameters (embeddings included)",
                        "tokens": "training tokens", "compute": "C = 6 N D"},
    },
    "epoch2024": {
        "link": "https://arxiv.org/abs/2404.10102",
        "law": "chinchilla",
        "params": {"E": 1.8172, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658},
        "ci": {"E": [1.8172 - 1.96 * 0.03, 1.8172 + 1.96 * 0.03],
               "A": [482.01 - 1.96 * 124.58, 482.01 + 1.96 * 124.58],
               "B": [2085.43 - 1.96 * 1293.23, 2085.43 + 1.96 * 1293.23],
               "alpha": [0.3478 - 1.96 * 0.02, 0.3478 + 1.96 * 0.02],
               "beta": [0.3658 - 1.96 * 0.02, 0.3658 + 1.96 * 0.02]},
        "source": "Besiroglu et al. 2024, 'Chinchilla Scaling: A replication attempt' "
                  "(arXiv 2404.10102), refit of Hoffmann et al.'s approach 3 on 240 points",
        "ci_method": "±1.96 x the paper's standard errors",
        "diagnostics": {"span": CHINCHILLA_SPAN},
        "conventions": {"params": "total parameters (embeddings included)",
                        "tokens": "training tokens", "compute": "C = 6 N D"},
    },
    "muennighoff2023": {
        "link": "https://arxiv.org/abs/2305.16264",
        "law": "data-constrained",
        # Chinchilla's form fitted to C4 (their isoFLOP points), then the decays on their runs
        # with those held: A = e^6.255414, B = e^7.3049974, E = e^0.6254804, alpha = beta
        "params": {"E": math.exp(0.6254804), "A": math.exp(6.255414), "B": math.exp(7.3049974),
                   "alpha": 0.3526596, "beta": 0.3526596, "R_D": 15.4, "R_N": 5.3},
        "source": "Muennighoff et al. 2023, 'Scaling Data-Constrained Language Models' "
                  "(NeurIPS 2023), the C4 fit: R_D* = 15.4, R_N* = 5.3 with alpha = beta = "
                  "0.353, A = 521, B = 1488, E = 1.87 (to full precision from the authors' "
                  "repository huggingface/datablations); no interval published",
        "conventions": {"params": "parameters as the paper counts them",
                        "tokens": "training tokens", "unique_tokens": "unique tokens",
                        "loss": "nats/token, C4 validation", "compute": "C = 6 N D"},
        "diagnostics": {"span": {"params_min": 7e6, "params_max": 8.7e9,
                                 "note": "Muennighoff et al. 2023: 7 million to 8.7 billion "
                                         "parameters, up to 900 billion tokens"}},
    },
    "krajewski2024": {
        "link": "https://arxiv.org/abs/2402.07871",
        "law": "moe-granularity",
        "params": {"a": 18.1, "alpha": 0.115, "b": 30.8, "beta": 0.147, "g": 2.1,
                   "gamma": 0.58, "c": 0.47},
        "source": "Krajewski et al. 2024, 'Scaling Laws for Fine-Grained Mixture of Experts' "
                  "(arXiv 2402.07871), the fit of eq. 5 (Table 2), on C4 at expansion rate 64; "
                  "no interval published",
        "conventions": {"params": "active non-embedding parameters (their N)",
                        "tokens": "training tokens",
                        "granularity": "the dense MLP's width over one expert's (G); "
                                       "expansion rate 64, top-k = G",
                        "loss": "nats/token, their C4 data",
                        "compute": "(12 c_f d^2 + c_r d E G) n_blocks D, c_f 6, c_r 14"},
        # what the paper's runs covered, as far as archfit could read it: granularities 1 to
        # 16 at expansion rate 64 (64 G experts, top-G); the runs' active sizes and token
        # counts are not recorded (not read from a source reachable here), so how far an
        # answer extrapolates in N and D cannot be checked
        "diagnostics": {"span": {"granularity_min": 1.0, "granularity_max": 16.0,
                                 "n_experts_min": 64, "n_experts_max": 1024,
                                 "top_k_min": 1, "top_k_max": 16, "expansion": 64.0,
                                 "recorded_from": "Krajewski et al. 2024 (arXiv 2402.07871): "
                                                  "granularity 1 to 16 at expansion rate 64; "
                                                  "sizes and tokens not recorded"}},
    },
    "tao2024": {
        "link": "https://arxiv.org/abs/2407.13623",
        "law": "vocab",
        # their approach 3, alpha1 = beta (their constraint), N and V d in millions, D in
        # billions of tokens, the unigram-normalized loss
        "params": {"E": 5.5327846803337435, "A1": 1.8313851559554126,
                   "A2": 0.19584238398665638, "alpha2": 0.6707374679896795,
                   "B": 2.1241123120064955, "beta": 0.44660634152009615},
        "source": "Tao et al. 2024, 'Scaling Laws with Vocabulary' (arXiv 2407.13623), "
                  "approach 3: the constants published with its code (sail-sg/scaling-with-"
                  "vocab, optimal_Nv_predict.py, commit 6701cc2); no interval published",
        "conventions": {"params": "non-vocabulary parameters (archfit's non-embedding N)",
                        "tokens": "training tokens",
                        "loss": "unigram-normalized loss (nats/token less the unigram "
                                "model's), their data"},
        "diagnostics": {"span": {"params_min": 3.3e7, "params_max": 3.0e9,
                                 "vocab_size_min": 4096.0, "vocab_size_max": 96256.0,
                                 "note": "Tao et al. 2024: 33 million to 3 billion "
                                         "non-vocabulary parameters, vocabularies 4K to 96K"}},
    },
}

def _hyper(name: str) -> dict[str, Any]:
    """A published hyperparameter law (archfit.train.hyperparameters) as a fit of the lr-batch law: its
    learning-rate and batch power laws."""
    from archfit.train.hyperparameters import HYPER_LAWS

    h = HYPER_LAWS[name]
    c, n, d = h.lr
    cb, nb, db = h.batch
    return {"link": h.link, "law": "lr-batch",
            "params": {"a": math.log(c), "b": n, "c": d,
                       "a_B": math.log(cb), "b_B": nb, "c_B": db},
            "source": h.citation + "; no interval published",
            "conventions": {**h.conventions, "tokens": "training tokens",
                            "lr": "peak learning rate", "batch": "tokens per optimizer step"},
            "extra": {"batch_fitted": True}}


PUBLISHED["steplaw2025"] = _hyper("steplaw2025")
PUBLISHED["deepseek2024"] = _hyper("deepseek2024")

DEFAULT_SHAPE_LAW = "levine2020"
DEFAULT_COMPUTE_LAW = "epoch2024"
# the compute law of a budget on repeated data (recommend --compute C --unique-tokens U)
DEFAULT_DATA_LAW = "muennighoff2023"


def constants() -> list[dict[str, Any]]:
    """Every published constant archfit ships, one row each: the fit, the constant, its value,
    its interval where there is one (an :class:`~archfit.interval.Interval`: the source's
    ``published`` 95% CI, or ``assumed`` for archfit's reading of a bound), where the value comes
    from, the citation and the link.
    What ``archfit laws`` lists."""
    rows = []
    for name, e in PUBLISHED.items():
        ci = e.get("ci") or {}
        for k, v in e["params"].items():
            stated = record(PUBLISHED_KIND, e.get("ci_method") or "the source's stated 95% "
                            "intervals", source=e["source"])
            rows.append({"fit": name, "constant": k, "value": v,
                         "interval": Interval.of(ci.get(k), stated), "provenance": "published",
                         "source": e["source"], "link": e.get("link")})
        rel = (e.get("extra") or {}).get("curvature_rel")
        if rel:
            kind = rel.get("provenance", PUBLISHED_KIND)
            rows.append({"fit": name, "constant": "curvature_rel", "value": rel["value"],
                         "interval": Interval.of(rel["range"], record(
                             kind, rel.get("why") or "the source's stated range",
                             source=rel["source"])),
                         "provenance": kind, "source": rel["source"], "link": rel.get("link")})
    return rows
