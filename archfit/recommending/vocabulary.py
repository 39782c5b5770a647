"""The vocabulary a recommendation trains with: ``recommend --vocab auto`` picks it from Tao et
al. 2024's vocabulary law (their approach 3, the parametric fit), at the recommended shape and
the recipe's training compute, and says how much lower it predicts the loss than the family's
vocabulary. Without ``--vocab auto`` the answer names the law's pick where it is more than 2x
from the vocabulary it trains with.

The law (Tao et al. 2024, "Scaling Laws with Vocabulary: Larger Models Deserve Larger
Vocabularies", arXiv 2407.13623, approach 3; the constants published with its code,
repository sail-sg/scaling-with-vocab, ``optimal_Nv_predict.py``; :data:`SOURCE`)::

    L_u = -E + A1 / N_nv^alpha1 + A2 / (V d)^alpha2 + B / D^beta,   alpha1 = beta

with ``L_u`` the unigram-normalized loss (nats/token less the unigram model's: comparable
across vocabularies, negative for good models), ``N_nv`` the non-vocabulary parameters in
millions, ``V d`` the vocabulary parameters (vocabulary x width) in millions, ``D`` the training
tokens in billions; E 5.5328, A1 1.8314, A2 0.19584, B 2.1241, alpha1 = beta 0.44661, alpha2
0.67074. At a fixed compute C = 6 (N_nv + V d) D a larger vocabulary costs tokens, so the best
vocabulary balances the two terms; their fit covers 33M to 3B parameters (vocabularies 4K to
96K). No interval is published: the pick is a point estimate, marked so."""

from __future__ import annotations

import math
from typing import Any

TAO2024 = {"E": 5.5327846803337435, "A1": 1.8313851559554126, "alpha1": 0.44660634152009615,
           "A2": 0.19584238398665638, "alpha2": 0.6707374679896795, "B": 2.1241123120064955,
           "beta": 0.44660634152009615}
SOURCE = ("Tao et al. 2024, 'Scaling Laws with Vocabulary' (arXiv 2407.13623), approach 3: "
          "the constants published with its code (sail-sg/scaling-with-vocab, commit 6701cc2)")
CONVENTION = ("unigram-normalized loss (nats/token less the unigram model's); vocabulary "
              "parameters V x d_model; non-vocabulary parameters: archfit's non-embedding N")
# the law's reach: the sizes and vocabularies its runs covered
REACH = {"params": (3.3e7, 3.0e9), "vocab_size": (4096, 96256)}
SEARCH = (1024, 2 ** 21)  # vocabularies weighed (1K to 2M)
NOTE_FACTOR = 2.0  # the law's pick is named when this far from the vocabulary trained with


def unigram_loss(n_nv: float, vocab: float, d_model: float, tokens: float,
                 p: dict[str, float] = TAO2024) -> float:
    """The law's L_u at ``n_nv`` non-vocabulary parameters, a vocabulary of ``vocab`` at width
    ``d_model`` and ``tokens`` training tokens (plain counts; the law's units inside)."""
    n, v, d = n_nv / 1e6, vocab * d_model / 1e6, tokens / 1e9
    return (-p["E"] + p["A1"] / n ** p["alpha1"] + p["A2"] / v ** p["alpha2"]
            + p["B"] / d ** p["beta"])


def best_vocabulary(n_nv: float, d_model: float, compute: float, multiple: int = 128
                    ) -> tuple[int, float]:
    """The vocabulary of least L_u at ``compute`` training FLOPs (C = 6 (N_nv + V d) D: a
    larger vocabulary trains on fewer tokens), rounded to ``multiple``; and its L_u."""
    from scipy.optimize import minimize_scalar

    def loss(log_v: float) -> float:
        v = math.exp(log_v)
        return unigram_loss(n_nv, v, d_model, compute / (6.0 * (n_nv + v * d_model)))

    res: Any = minimize_scalar(loss, bounds=tuple(math.log(x) for x in SEARCH),
                               method="bounded", options={"xatol": 1e-4})
    v = max(multiple, round(math.exp(res.x) / multiple) * multiple)
    return v, loss(math.log(v))


def vocabulary_record(shape: Any, tokens: float, multiple: int = 128) -> dict[str, Any]:
    """The law's pick for ``shape`` trained on ``tokens`` at the compute that costs with its
    own vocabulary, the predicted loss of both, and how far the shape lies past the law's
    reach."""
    n_nv, d, v0 = float(shape.params_non_embedding), float(shape.d_model), shape.vocab_size
    compute = 6.0 * (n_nv + v0 * d) * tokens
    pick, loss = best_vocabulary(n_nv, d, compute, multiple)
    base = unigram_loss(n_nv, v0, d, tokens)
    lo, hi = REACH["params"]
    past = n_nv / hi if n_nv > hi else lo / n_nv if n_nv < lo else 1.0
    return {"value": pick, "default": v0, "multiple": multiple,
            "loss": loss, "loss_default": base, "gain": base - loss,
            "tokens": compute / (6.0 * (n_nv + pick * d)), "compute": compute,
            "law": "tao2024", "provenance": "published", "interval": None,
            "interval_note": "no interval: the law's authors publish none",
            "convention": CONVENTION, "source": SOURCE,
            "reach": {**REACH, "factor": past}}


def far_from_pick(shape: Any, tokens: float, factor: float = NOTE_FACTOR) -> str | None:
    """The note an answer carries when the law's pick for ``shape`` on ``tokens`` lies more
    than ``factor`` from the vocabulary it trains with, else None. The law's loss at a fixed
    compute is unimodal in ln V, so the pick is below V / factor exactly where the loss rises
    there, and above V x factor where it falls there: three evaluations decide it, and the
    pick is searched only then."""
    n_nv, d, v0 = float(shape.params_non_embedding), float(shape.d_model), shape.vocab_size
    compute = 6.0 * (n_nv + v0 * d) * tokens

    def slope(v: float) -> float:  # d L_u / d ln V at a fixed compute, by a small step
        def at(x: float) -> float:
            return unigram_loss(n_nv, x, d, compute / (6.0 * (n_nv + x * d)))
        return at(v * 1.001) - at(v / 1.001)

    if slope(v0 / factor) <= 0 <= slope(v0 * factor):
        return None
    # the pick to two digits from a ladder of vocabularies a quarter-octave apart (no
    # optimizer on the answer's path: --vocab auto searches it exactly)
    ladder = [SEARCH[0] * 2 ** (k / 4) for k in range(4 * 11 + 1)]
    about = min(ladder, key=lambda v: unigram_loss(n_nv, v, d, compute / (6.0 * (n_nv + v * d))))
    side = "below" if about < v0 else "above"
    return (f"vocabulary (tao2024, published, point estimate): the law's pick at this shape and "
            f"compute is about {float(f'{about:.2g}'):,.0f}, more than {factor:g}x {side} the "
            f"{v0:,} trained "
            "with; --vocab auto trains with it and states its predicted gain")


def vocabulary_note(rec: dict[str, Any]) -> str:
    """The line an answer carries about the law's pick."""
    past = rec["reach"]["factor"]
    reach = (f"; {past:.3g}x past the sizes the law was fitted on (3.3e7 to 3e9): an "
             "extrapolation" if past > 1 else "")
    return (f"vocabulary (tao2024, published, point estimate): {rec['value']:,} predicts a "
            f"unigram-normalized loss {rec['gain']:.4f} nats/token lower than {rec['default']:,} "
            f"at the same training compute ({rec['tokens']:.3g} tokens with it){reach}")
