"""How far a fit's evidence reaches: a verdict (``informative`` / ``weak`` / ``uninformative``)
with one line per reason and the numbers behind it. numpy-free (``archfit recommend`` prints
it). Each law computes its own through :meth:`archfit.laws.Law.trust`; this module holds the
record and the thresholds, stated once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

VERDICTS = ("informative", "weak", "uninformative")

# thresholds: (weak above, uninformative above)
EXTRAPOLATION = (10.0, 1000.0)  # target N / largest N seen
OPTIMUM_CI_RATIO = (2.0, 10.0)  # 95% range high / low of the optimal depth (shape laws)
COMPUTE_CI_RATIO = (3.0, 10.0)  # 95% range high / low of N_opt (compute laws)
HELDOUT_COVERAGE = 0.8  # share of held-out runs inside their 95% intervals: weak below
BOOTSTRAP_FAILURES = (0.1, 0.5)  # failed resamples / resamples
MIN_SIZE_SPAN = 3.0  # largest / smallest N: below this the sizes barely vary
MIN_SIZE_CLASSES = 3  # shape laws: optima at fewer sizes than this are weak evidence


@dataclass
class Trust:
    verdict: str = "informative"
    reasons: list[str] = field(default_factory=list)
    extrapolation_factor: float | None = None
    checks: dict[str, Any] = field(default_factory=dict)  # the numbers behind the reasons

    def weak(self, reason: str) -> None:
        self.reasons.append(reason)
        if self.verdict == "informative":
            self.verdict = "weak"

    def bad(self, reason: str) -> None:
        self.reasons.append(reason)
        self.verdict = "uninformative"

    def grade(self, value: float, limits: tuple[float, float], reason: str) -> None:
        """``reason`` as weak above ``limits[0]``, as uninformative above ``limits[1]``."""
        if value > limits[1]:
            self.bad(reason)
        elif value > limits[0]:
            self.weak(reason)

    def merge(self, other: Trust, prefix: str) -> None:
        for r in other.reasons:
            self.reasons.append(f"{prefix}: {r}")
        if VERDICTS.index(other.verdict) > VERDICTS.index(self.verdict):
            self.verdict = other.verdict
        self.checks[prefix] = other.checks

    def line(self) -> str:
        return f"verdict: {self.verdict}" + (f" ({'; '.join(self.reasons)})"
                                              if self.reasons else "")

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reasons": list(self.reasons),
                "extrapolation_factor": self.extrapolation_factor, **self.checks}
