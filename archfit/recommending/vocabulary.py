"""The vocabulary a recommendation trains with: ``recommend --vocab auto`` picks it from a
vocabulary law (a fitted ``vocab`` law given with ``--fit``, else Tao et al. 2024's published
constants), at the recommended shape and the recipe's training compute, and says how much lower
it predicts the loss than the family's vocabulary, with a 95% interval on the pick where the law
has bootstrap draws. Without ``--vocab auto`` the answer names the law's pick where it is more
than 2x from the vocabulary it trains with.

The law (Tao et al. 2024, "Scaling Laws with Vocabulary: Larger Models Deserve Larger
Vocabularies", arXiv 2407.13623, approach 3; the constants published with its code,
repository sail-sg/scaling-with-vocab, ``optimal_Nv_predict.py``; the published fit
``tao2024``, :mod:`archfit.laws.published`)::

    L_u = -E + A1 / N_nv^alpha1 + A2 / (V d)^alpha2 + B / D^beta,   alpha1 = beta

with ``L_u`` the unigram-normalized loss (nats/token less the unigram model's: comparable
across vocabularies, negative for good models), ``N_nv`` the non-vocabulary parameters in
millions, ``V d`` the vocabulary parameters (vocabulary x width) in millions, ``D`` the training
tokens in billions; E 5.5328, A1 1.8314, A2 0.19584, B 2.1241, alpha1 = beta 0.44661, alpha2
0.67074. At a fixed compute C = 6 (N_nv + V d) D a larger vocabulary costs tokens, so the best
vocabulary balances the two terms; their fit covers 33M to 3B parameters (vocabularies 4K to
96K). No interval is published: the pick is a point estimate, marked so."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

PUBLISHED_LAW = "tao2024"  # the published fit (archfit.laws.published) used without --fit
CONVENTION = ("unigram-normalized loss (nats/token less the unigram model's); vocabulary "
              "parameters V x d_model; non-vocabulary parameters: archfit's non-embedding N")
SEARCH = (1024, 2 ** 21)  # vocabularies weighed (1K to 2M)
NOTE_FACTOR = 2.0  # the law's pick is named when this far from the vocabulary trained with
MIN_DRAWS = 20  # an interval on the pick needs this many of the fit's draws

# a law's L_u at (non-vocabulary parameters, vocabulary, width, tokens)
LossFn = Callable[[float, float, float, float], float]


def unigram_loss(n_nv: float, vocab: float, d_model: float, tokens: float) -> float:
    """The published law's L_u at ``n_nv`` non-vocabulary parameters, a vocabulary of
    ``vocab`` at width ``d_model`` and ``tokens`` training tokens (plain counts)."""
    return law_of().loss(n_nv, vocab, d_model, tokens)


@dataclass
class PickSource:
    """Where a pick comes from, read off a vocabulary law's fit (the law itself is
    :class:`archfit.laws.VocabularyLaw`'s): its loss, its name and provenance, the sizes and
    vocabularies it covered, and its bootstrap draws' losses (none for a published fit)."""

    label: str
    provenance: str  # "published" or "fitted"
    loss: LossFn
    reach: dict[str, tuple[float, float]]
    source: str
    draws: list[LossFn] = field(default_factory=list)
    interval_provenance: Any = None  # the fit's (archfit.interval), for an interval on a pick


def law_of(fit: Any = None) -> PickSource:
    """The vocabulary law of a ``vocab`` fit (:class:`archfit.laws.Fit`: fitted, or a published
    one such as ``tao2024``), or the published default where ``fit`` is None."""
    from archfit.laws.published import PUBLISHED

    if fit is None:
        return _published()
    law, span = fit.law_obj, fit.diagnostics.get("span") or {}

    def of(p: dict[str, float]) -> LossFn:
        return lambda n, v, d, t: law.unigram_loss(p, n, v, d, t)

    reach = {"params": (span.get("params_min", 0.0), span.get("params_max", math.inf)),
             "vocab_size": (span.get("vocab_size_min", 0.0),
                            span.get("vocab_size_max", math.inf))}
    draws = fit.draws()
    published = fit.label in PUBLISHED and not draws
    src = fit.source or ", ".join(i.get("path", "") for i in fit.inputs) or "fitted by archfit"
    return PickSource(fit.label, "published" if published else "fitted", of(fit.params),
                         reach, src, [of(p) for p in draws],
                         None if published else fit.interval_provenance())


@functools.lru_cache(maxsize=1)
def _published() -> PickSource:
    """The published default's law, read once."""
    from archfit.laws import load_fit

    return law_of(load_fit(PUBLISHED_LAW))


def _at_compute(loss: LossFn, n_nv: float, d_model: float, compute: float) -> Callable:
    """L_u over ln V at a fixed compute C = 6 (N_nv + V d) D: a larger vocabulary trains on
    fewer tokens."""
    return lambda log_v: loss(n_nv, math.exp(log_v), d_model,
                              compute / (6.0 * (n_nv + math.exp(log_v) * d_model)))


def best_vocabulary(n_nv: float, d_model: float, compute: float, multiple: int = 128,
                    loss: LossFn | None = None) -> tuple[int, float]:
    """The vocabulary of least L_u at ``compute`` training FLOPs, rounded to ``multiple``;
    and its L_u."""
    from scipy.optimize import minimize_scalar

    f = _at_compute(loss or unigram_loss, n_nv, d_model, compute)
    res: Any = minimize_scalar(f, bounds=tuple(math.log(x) for x in SEARCH),
                               method="bounded", options={"xatol": 1e-4})
    v = max(multiple, round(math.exp(res.x) / multiple) * multiple)
    return v, f(math.log(v))


def vocabulary_record(shape: Any, tokens: float, multiple: int = 128,
                      law: PickSource | None = None) -> dict[str, Any]:
    """The law's pick for ``shape`` trained on ``tokens`` at the compute that costs with its
    own vocabulary, the predicted loss of both, the pick's 95% interval over the law's draws
    (none for a law without draws), whether it is a pick at all (``usable``: neither it nor its
    interval on the search's bound), and how far the shape lies past the law's reach."""
    law = law or law_of()
    n_nv, d, v0 = float(shape.params_non_embedding), float(shape.d_model), shape.vocab_size
    compute = 6.0 * (n_nv + v0 * d) * tokens
    pick, loss = best_vocabulary(n_nv, d, compute, multiple, law.loss)
    base = law.loss(n_nv, v0, d, tokens)
    lo, hi = law.reach["params"]
    past = n_nv / hi if n_nv > hi else lo / n_nv if n_nv < lo else 1.0
    interval, why = None, ("no interval: the law's authors publish none"
                           if law.provenance == "published" else
                           f"no interval: fewer than {MIN_DRAWS} bootstrap draws")
    ends = [pick]
    if len(law.draws) >= MIN_DRAWS:
        from archfit.interval import Interval

        from archfit.numbers import draw_ends

        picks = [best_vocabulary(n_nv, d, compute, multiple, f)[0] for f in law.draws]
        lo, hi = draw_ends(picks) or (pick, pick)  # the one percentile convention, then
        ends += [math.floor(lo / multiple) * multiple,  # widened to the multiples around it
                 math.ceil(hi / multiple) * multiple]
        interval = Interval.of(ends[1:], law.interval_provenance)
        why = None
    return {"value": pick, "default": v0, "multiple": multiple,
            "usable": not any(on_bound(v, multiple) for v in ends),
            "loss": loss, "loss_default": base, "gain": base - loss,
            "tokens": compute / (6.0 * (n_nv + pick * d)), "compute": compute,
            "law": law.label, "provenance": law.provenance, "interval": interval,
            "interval_note": why, "convention": CONVENTION, "source": law.source,
            "reach": {**law.reach, "factor": past}}


def far_from_pick(shape: Any, tokens: float, factor: float = NOTE_FACTOR,
                  law: PickSource | None = None) -> str | None:
    """The note an answer carries when the law's pick for ``shape`` on ``tokens`` lies more
    than ``factor`` from the vocabulary it trains with, else None. The law's loss at a fixed
    compute is unimodal in ln V, so the pick is below V / factor exactly where the loss rises
    there, and above V x factor where it falls there: three evaluations decide it, and the
    pick is searched only then."""
    law = law or law_of()
    n_nv, d, v0 = float(shape.params_non_embedding), float(shape.d_model), shape.vocab_size
    at = _at_compute(law.loss, n_nv, d, 6.0 * (n_nv + v0 * d) * tokens)

    def slope(v: float) -> float:  # d L_u / d ln V at a fixed compute, by a small step
        return at(math.log(v * 1.001)) - at(math.log(v / 1.001))

    if slope(v0 / factor) <= 0 <= slope(v0 * factor):
        return None
    # the pick to two digits from a ladder of vocabularies a quarter-octave apart (no
    # optimizer on the answer's path: --vocab auto searches it exactly)
    ladder = [SEARCH[0] * 2 ** (k / 4) for k in range(4 * 11 + 1)]
    about = min(ladder, key=lambda v: at(math.log(v)))
    kind = _kind(law.label, law.provenance)
    if about in (ladder[0], ladder[-1]):
        return f"vocabulary ({kind}): " + unbounded()
    side = "below" if about < v0 else "above"
    return (f"vocabulary ({kind}): the law's pick at this shape and compute is about "
            f"{float(f'{about:.2g}'):,.0f}, more than {factor:g}x {side} the {v0:,} trained "
            "with; --vocab auto trains with it and states its predicted gain")


def on_bound(vocab: float, multiple: int = 128) -> bool:
    """Whether a pick lies on the search's bound (:data:`SEARCH`, as rounded)."""
    return vocab <= max(SEARCH[0], multiple) or vocab >= SEARCH[1] - multiple


def unbounded() -> str:
    """Why a pick (or its interval) on the search's bound is no pick."""
    return (f"the law's pick, or its 95% interval, runs to the search's bound ({SEARCH[0]:,} "
            f"to {SEARCH[1]:,}): it cannot pick a vocabulary at this shape and compute (its "
            "vocabulary term is not identified by the runs it was fitted on), so the "
            "vocabulary trained with stays")


def _kind(label: str, provenance: str) -> str:
    return (f"{label}, published, point estimate" if provenance == "published" else
            f"{label}, fitted")


def kept_vocabulary(rec: dict[str, Any], tokens: float) -> dict[str, Any]:
    """The record of an answer that keeps its vocabulary because the law's pick is no pick
    (``rec["usable"]`` false): the vocabulary trained with and its loss, the law's own pick
    beside them, no gain."""
    return {**rec, "value": rec["default"], "law_pick": rec["value"],
            "law_pick_loss": rec["loss"], "loss": rec["loss_default"], "gain": 0.0,
            "tokens": tokens}


def vocabulary_note(rec: dict[str, Any]) -> str:
    """The line an answer carries about the law's pick (or why it is none)."""
    kind = _kind(rec["law"], rec["provenance"])
    if not rec["usable"]:
        return f"vocabulary ({kind}): {unbounded()} ({rec['default']:,})"
    past = rec["reach"]["factor"]
    lo, hi = rec["reach"]["params"]
    span = " to ".join(f"{x:.2g}".replace("e+0", "e").replace("e+", "e") for x in (lo, hi))
    reach = (f"; {past:.3g}x past the sizes the law was fitted on ({span}): an "
             "extrapolation" if past > 1 else "")
    iv = rec["interval"]
    band = f" [95%: {iv.low:,.0f} to {iv.high:,.0f}]" if iv is not None else ""
    return (f"vocabulary ({kind}): {rec['value']:,}{band} predicts a unigram-normalized loss "
            f"{rec['gain']:.4f} nats/token lower than {rec['default']:,} at the same training "
            f"compute ({rec['tokens']:.3g} tokens with it){reach}")
