"""Known models on a shape law's map: each published model's depth against the law's optimal
depth at its size (Kaplan's N), with the optimum's CI where the fit has one. Plain ``math``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from archfit.errors import RecommendError
from archfit.interval import Interval
from archfit.shapes.known import KnownModel, load_known_models
from archfit.laws import Fit, ShapeLaw, load_fit
from archfit.laws.published import DEFAULT_SHAPE_LAW


@dataclass(frozen=True)
class Placement:
    """One model against the law at its size."""

    model: KnownModel
    N: int  # Kaplan's N: non-embedding parameters
    n_layer_opt: float
    d_model_opt: float
    ci: Interval | None  # the optimal depth's 95% CI over the fit's draws
    verdict: str  # the law's verdict on answering at this N

    @property
    def ratio(self) -> float:
        return self.model.shape.n_layer / self.n_layer_opt

    @property
    def call(self) -> str:
        """``deeper`` / ``shallower`` than the optimum (beyond its CI when there is one), or
        ``within CI``."""
        L = self.model.shape.n_layer
        if self.ci is not None and self.ci.low is not None and self.ci.high is not None \
                and self.ci.low <= L <= self.ci.high:
            return "within CI"
        return "deeper" if L > self.n_layer_opt else "shallower"

    @property
    def summary(self) -> str:
        """``1.19x too deep`` / ``1.92x too shallow`` / ``0.97x, within the CI``."""
        if self.call == "within CI":
            return f"{self.ratio:.2f}x, within the CI"
        r = self.ratio if self.ratio >= 1 else 1 / self.ratio
        return f"{r:.2f}x too {'deep' if self.ratio > 1 else 'shallow'}"

    def to_dict(self) -> dict[str, Any]:
        s = self.model.shape
        return {"name": self.model.name, "family": self.model.family, "n_layer": s.n_layer,
                "d_model": s.d_model, "N": self.N, "N_convention": N_CONVENTION,
                "params_total": s.params_total, "params_active": s.params_active,
                "n_experts": s.n_experts, "top_k": s.top_k,
                "n_layer_opt": self.n_layer_opt, "d_model_opt": self.d_model_opt,
                "n_layer_opt_ci": self.ci, "depth_ratio": self.ratio, "call": self.call, "summary": self.summary,
                "verdict": self.verdict, "source": self.model.source}


# where a model sits on a shape law's map: its (active) non-embedding count
N_CONVENTION = ("params_active_non_embedding (Kaplan's N; a mixture of experts at its active "
                "size, the dense backbone's)")


def place_known_models(fit: Fit | str | None = None,
                       models: Sequence[KnownModel] | None = None) -> tuple[Fit, list[Placement]]:
    """Each known model (default: the bundled table) against a shape law's optimal depth at its
    Kaplan N; ``fit`` is a shape-law fit or published name (default levine2020)."""
    f = load_fit(fit if fit is not None else DEFAULT_SHAPE_LAW)
    law = f.law_obj
    if not isinstance(law, ShapeLaw):
        raise RecommendError(f"{f.label} is a {law.role} law: it has no optimal depth to compare "
                             "models with; give a shape-law fit (e.g. levine2020)")
    out = []
    for m in (load_known_models() if models is None else models):
        N = m.shape.params_active_non_embedding  # a mixture of experts: its backbone's size
        try:
            L, d = law.optimum(f.params, N)
        except (ValueError, OverflowError, ZeroDivisionError):
            L, d = math.nan, math.nan
        if not (math.isfinite(L) and L > 0):
            raise RecommendError(f"the {f.label} fit gives no finite optimal depth at {m.name}'s "
                                 f"size ({N:.3g})")
        ci = f.optimum_ci(N)
        out.append(Placement(m, N, L, d, Interval.of(ci and ci["n_layer"],
                                                      f.interval_provenance()),
                             f.verdict(N).verdict))
    return f, out
