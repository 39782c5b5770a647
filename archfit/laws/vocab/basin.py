"""``vocab-basin``: the unigram-normalized loss over the non-vocabulary size, the vocabulary and
the training characters, for a vocabulary sweep that does not record the width::

    L_u = -E + A / N^beta + B / D^beta + kappa (ln V - lnV0 - gamma ln N)^2,   D = H t(V)

with ``N`` the non-vocabulary parameters in millions, ``H`` the training characters and ``D``
the tokens they make in billions (``t(V)``: Tao et al. 2024's tokens per character, as the
``vocab`` law; a ``tokens`` column, where the table has one, is read instead). The last term
is the loss's second-order expansion in ln V about its best vocabulary (the same construction
as the rate basin of ``lr-batch-surface``), and that best vocabulary, ``exp(lnV0) N^gamma``,
grows as a power of the non-vocabulary size: Tao et al.'s finding ("Scaling Laws with
Vocabulary", arXiv 2407.13623, approaches 1 and 2: the optimal vocabulary parameters follow a
power of the non-vocabulary ones). The size and data exponents are one, as in their approach 3.

Where ``vocab`` (their approach 3) needs each run's width to count the vocabulary's
parameters, this one needs none: public vocabulary sweeps, ScaleBench's among them, often omit
it. Huber (delta 1e-3) on ``L_u`` itself, as the ``vocab`` law. Columns: ``loss`` (``L_u``),
``params`` (non-vocabulary parameters), ``vocab_size``, and ``tokens`` or ``characters``."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from archfit.laws.base import (HUBER_DELTA, Constraints, Data, Estimate, VocabularyLaw,
                               derived_name, register)
from archfit.laws.vocab.tao import data_note, sweep_residuals, training_tokens

if TYPE_CHECKING:
    import numpy as np

NAMES = ("E", "A", "B", "beta", "kappa", "lnV0", "gamma")
# the size (millions) and tokens (billions) each coefficient is counted in
N_UNIT, D_UNIT = 1e6, 1e9


@register
class VocabBasin(VocabularyLaw):
    name = "vocab-basin"
    formula = ("L_u = -E + A/N^beta + B/D^beta + kappa (ln V - lnV0 - gamma ln N)^2, "
               "D = tokens, or characters x t(V) [N in millions, D in billions of tokens; L_u "
               "unigram-normalized; best vocabulary exp(lnV0) N^gamma]")
    description = ("Unigram-normalized loss with a basin in ln V whose centre grows as a power "
                   "of the non-vocabulary size; needs no width. Huber on the loss itself.")
    columns = ("loss", "params", "vocab_size")
    param_names = NAMES
    min_points = 14
    min_sizes = 3
    default_targets = (1e9, 7e9)
    target_convention = "non-vocabulary parameters (archfit's non-embedding N)"
    domains = {"A": (0.0, None, False), "B": (0.0, None, False), "kappa": (0.0, None, True),
               "beta": (0.0, None, True)}

    def groups(self, data: Data, by: Any = None) -> tuple[np.ndarray, str]:
        """Bootstrap units: a run_id, else one (size, vocabulary), whose rows at several
        character counts are the checkpoints of one training run; ``by`` overrides."""
        from archfit.laws.columns import run_groups

        if by or "run_id" in data:
            return run_groups(data, by)
        return run_groups(data, ("params", "vocab_size"))[0], (
            "training run (rows of one params, vocab_size at several character counts)")

    @staticmethod
    def _loss(p: Mapping[str, float], N: Any, V: Any, D: Any) -> Any:
        import numpy as np

        with np.errstate(all="ignore"):
            return (-p["E"] + p["A"] / N ** p["beta"] + p["B"] / D ** p["beta"]
                    + p["kappa"] * (np.log(V) - p["lnV0"] - p["gamma"] * np.log(N)) ** 2)

    def unigram_loss(self, params: Mapping[str, float], n_nv: float, vocab: float,
                     d_model: float, tokens: float) -> float:
        """The law's L_u; ``d_model`` does not enter (the law counts no vocabulary
        parameters)."""
        return float(self._loss(params, n_nv / N_UNIT, vocab, tokens / D_UNIT))

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        V = np.asarray(data["vocab_size"], float)
        D = training_tokens(data) / D_UNIT
        return self._loss(params, np.asarray(data["params"], float) / N_UNIT, V, D)

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        """``V_best`` at each non-vocabulary size in ``targets``: the basin's centre, the
        vocabulary of least loss at a fixed token count."""
        return {derived_name("V_best", N): math.exp(params["lnV0"] + params["gamma"]
                                                    * math.log(N / N_UNIT)) for N in targets}

    def derived_notes(self, derived: Mapping[str, float],
                      extra: Mapping[str, Any] | None = None) -> list[str]:
        notes = super().derived_notes(derived, extra)
        lo, hi = (extra or {}).get("vocab_reach") or (0.0, math.inf)
        for k, v in derived.items():
            if k.startswith("V_best@") and not lo <= v <= hi:
                notes.append(f"{k} = {v:,.0f} lies outside the vocabularies the runs trained "
                             f"({lo:,.0f} to {hi:,.0f}): the basin's centre is extrapolated")
        return notes

    def _starts(self, data: Data, V: np.ndarray) -> list[np.ndarray]:
        """At each exponent and centre slope tried, the law's linear coefficients (E, and A, B
        and kappa at >= 0) by bounded linear least squares on the losses (variable projection
        for a start: the nonlinear search then begins at its best linear fit)."""
        import numpy as np
        from scipy.optimize import lsq_linear

        N = np.asarray(data["params"], float) / N_UNIT
        D = training_tokens(data) / D_UNIT
        L = np.asarray(data["loss"], float)
        lv, mid = np.log(V), float(np.log(V).mean())
        out = []
        for b, g in itertools.product((0.2, 0.45, 0.7), (0.0, 0.3)):
            c = mid - g * math.log(100.0)
            X = np.stack([-np.ones_like(N), N ** -b, D ** -b, (lv - c - g * np.log(N)) ** 2], 1)
            sol = lsq_linear(X, L, bounds=([-np.inf, 0, 0, 0], [np.inf] * 4))
            E, A, B, k = sol.x
            out.append(np.array([E, A, B, b, max(k, 1e-3), c, g]))
        return out

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.inference.optimize import Reparam, huber_lsq

        amount, resid = sweep_residuals(self, data, constraints)

        V = np.asarray(data["vocab_size"], float)
        starts = ([np.asarray(start, float)] if start is not None else
                  self._starts(data, V))
        bounds = [(-math.inf, math.inf), (0.0, math.inf), (0.0, math.inf), (0.01, 3.0),
                  (0.0, math.inf), (-math.inf, math.inf), (-2.0, 3.0)]
        theta = huber_lsq(resid, starts, Reparam([(n, False) for n in NAMES], constraints),
                          HUBER_DELTA, None, bounds=bounds)
        reach = (float(V.min()), float(V.max()))
        return Estimate(np.asarray(theta, float),
                        extra={"objective": "Huber (delta 1e-3) on the unigram-normalized loss",
                               "residual_space": "unigram-normalized loss",
                               "vocab_reach": reach, "notes": [data_note(amount)]})
