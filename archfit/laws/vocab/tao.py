"""``vocab``: the unigram-normalized loss over the non-vocabulary size, the vocabulary and the
training characters, in the form of Tao et al. 2024 ("Scaling Laws with Vocabulary: Larger
Models Deserve Larger Vocabularies", arXiv 2407.13623, approach 3)::

    L_u = -E + A1 / N^beta + A2 / (V d)^alpha2 + B / D^beta,   D = H t(V)

with ``N`` the non-vocabulary parameters and ``V d`` the vocabulary parameters (vocabulary x
width), both in millions, ``H`` the training characters and ``D`` the tokens they make, in
billions. ``t(V)``, the tokens per character of a vocabulary of V, is Tao et al.'s own fit of
their tokenizers (``H_to_D`` in their code, sail-sg/scaling-with-vocab, ``utils.py``):
``t = 0.00639222 ln(V)^2 - 0.15811069 ln(V) + 1.20470122``, a published fact of their data,
used here with V counted in tokens. The size and data exponents are one (their constraint).

``L_u`` is the loss less a unigram model's on the same tokens: comparable across
vocabularies, and negative for a good model, so this law works on the loss itself (Huber,
δ = 1e-3, on ``L_u``: Tao et al.'s objective), not on its log as the others do. Columns:
``loss`` (``L_u``), ``params`` (non-vocabulary parameters: archfit's non-embedding N, one
vocabulary's embedding off), ``vocab_size``, ``d_model``, and ``tokens`` (read as they are) or
``characters`` (turned into tokens by ``t(V)``, within the vocabularies it was measured on)."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any, Callable, Mapping

from archfit.laws.base import HUBER_DELTA, Constraints, Data, Estimate, VocabularyLaw, register

if TYPE_CHECKING:
    import numpy as np

NAMES = ("E", "A1", "A2", "alpha2", "B", "beta")
# Tao et al.'s tokens per character, a quadratic in ln V (their utils.py, H_to_D)
TOKENS_PER_CHAR = (0.00639222, -0.15811069, 1.20470122)


def training_data(data: Mapping[str, Any]) -> str:
    """The column a vocabulary law reads the training data from (``tokens`` where the table has
    it, else ``characters``), checked finite and positive."""
    from archfit.laws.columns import finite_positive

    c = _data_column(data)
    finite_positive(c, data[c])
    return c


def _data_column(data: Mapping[str, Any]) -> str:
    from archfit.errors import FitInputError

    for c in ("tokens", "characters"):
        if c in data:
            return c
    raise FitInputError("a vocabulary law needs the training data as a column 'tokens' or "
                        "'characters'; map it with --map tokens=COLUMN")


# the vocabularies Tao et al.'s tokens-per-character fit was measured over (their
# fit_tokenization_func.py: 1,024 to 1,024,000): the fallback holds only within them
TOKENIZER_FIT_REACH = (1024.0, 1024000.0)


def training_tokens(data: Mapping[str, Any]) -> Any:
    """Each run's training tokens: the ``tokens`` column where the table has one, else its
    ``characters`` times Tao et al. 2024's tokens per character at its vocabulary (their
    tokenizers' fit, :func:`tokens_per_character`, a stated fallback refused outside the
    vocabularies it was measured on)."""
    import numpy as np

    from archfit.errors import FitInputError

    if _data_column(data) == "tokens":
        return np.asarray(data["tokens"], float)
    V = np.asarray(data["vocab_size"], float)
    lo, hi = TOKENIZER_FIT_REACH
    if np.any((V < lo) | (V > hi)):
        raise FitInputError(f"vocabularies outside {lo:,.0f} to {hi:,.0f}: Tao et al.'s "
                            "tokens-per-character fit, which turns characters into tokens "
                            "here, was measured within them; give a 'tokens' column")
    return np.asarray(data["characters"], float) * tokens_per_character(V)


def sweep_residuals(law: Any, data: Data, constraints: Constraints | None
                    ) -> tuple[str, Callable[[Any], Any]]:
    """A vocabulary sweep checked for a fit (its training data counted, its sizes, vocabularies
    and amounts of data spread), the column the data came from, and the Huber fit's residuals
    (predicted less observed L_u, in ``law.param_names``' order; 1e3 where not finite)."""
    import numpy as np

    from archfit.laws.columns import require_spread

    amount = training_data(data)
    training_tokens(data)  # refuses characters it cannot count, before the search
    require_spread(law, data, (("params", "sizes"), ("vocab_size", "vocabularies"),
                               (amount, "amounts of training data")), constraints)
    L = np.asarray(data["loss"], float)

    def resid(theta: Any) -> Any:
        r = law.predict(dict(zip(law.param_names, theta)), data) - L
        return np.where(np.isfinite(r), r, 1e3)

    return amount, resid


def data_note(column: str) -> str:
    """How a vocabulary fit counted its training tokens."""
    return ("training tokens: the table's 'tokens' column" if column == "tokens" else
            "training tokens: characters x Tao et al. 2024's tokens per character at each "
            "vocabulary (their tokenizers' fit; a fallback: give a 'tokens' column to use the "
            "table's own)")


def tokens_per_character(vocab: Any) -> Any:
    """Tao et al.'s fit of their tokenizers' tokens per character at vocabulary ``vocab``."""
    import numpy as np

    lv = np.log(np.asarray(vocab, float))
    a, b, c = TOKENS_PER_CHAR
    return a * lv * lv + b * lv + c


@register
class Vocab(VocabularyLaw):
    name = "vocab"
    formula = ("L_u = -E + A1/N^beta + A2/(V d)^alpha2 + B/D^beta, "
               "D = tokens, or characters x t(V) "
               "[Tao et al. 2024, approach 3; N, V d in millions, D in billions of tokens; "
               "L_u unigram-normalized]")
    description = ("Unigram-normalized loss over non-vocabulary size, vocabulary parameters "
                   "and tokens (Tao et al. 2024); Huber on the loss itself.")
    columns = ("loss", "params", "vocab_size", "d_model")
    param_names = NAMES
    min_points = 12
    min_sizes = 2
    target_convention = "non-vocabulary parameters (archfit's non-embedding N)"
    domains = {"A1": (0.0, None, False), "A2": (0.0, None, False), "B": (0.0, None, False),
               "alpha2": (0.0, None, True), "beta": (0.0, None, True)}

    def groups(self, data: Data, by: Any = None) -> tuple[np.ndarray, str]:
        """Bootstrap units: a run_id, else one (size, vocabulary, width), whose rows at several
        character counts are the checkpoints of one training run; ``by`` overrides."""
        from archfit.laws.columns import run_groups

        if by or "run_id" in data:
            return run_groups(data, by)
        return run_groups(data, ("params", "vocab_size", "d_model"))[0], (
            "training run (rows of one params, vocab_size, d_model at several character counts)")

    def unigram_loss(self, params: Mapping[str, float], n_nv: float, vocab: float,
                     d_model: float, tokens: float) -> float:
        p = params
        return float(-p["E"] + p["A1"] / (n_nv / 1e6) ** p["beta"]
                     + p["A2"] / (vocab * d_model / 1e6) ** p["alpha2"]
                     + p["B"] / (tokens / 1e9) ** p["beta"])

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        p = params
        N = np.asarray(data["params"], float) / 1e6
        V = np.asarray(data["vocab_size"], float)
        Nv = V * np.asarray(data["d_model"], float) / 1e6
        D = training_tokens(data) / 1e9
        with np.errstate(all="ignore"):
            return (-p["E"] + p["A1"] / N ** p["beta"] + p["A2"] / Nv ** p["alpha2"]
                    + p["B"] / D ** p["beta"])

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        from archfit.laws.inference.optimize import Reparam, huber_lsq

        amount, resid = sweep_residuals(self, data, constraints)

        starts = ([np.asarray(start, float)] if start is not None else
                  [np.array([5.0, 2.0, 0.2, a2, 2.0, b])
                   for a2, b in itertools.product((0.3, 0.7), (0.2, 0.45, 0.7))])
        bounds = [(0.0, math.inf), (0.0, math.inf), (0.0, math.inf), (0.01, 3.0),
                  (0.0, math.inf), (0.01, 3.0)]
        theta = huber_lsq(resid, starts, Reparam([(n, False) for n in NAMES], constraints),
                          HUBER_DELTA, None, bounds=bounds)
        return Estimate(np.asarray(theta, float),
                        extra={"objective": "Huber (delta 1e-3) on the unigram-normalized loss",
                               "residual_space": "unigram-normalized loss",
                               "notes": [data_note(amount)]})
