"""What a design strategy sees at each step (:class:`Step`): one module, which the strategies and
the ensemble both read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Step:
    """What a strategy sees: the law, the fit (None before the first), the pool and more."""

    law: Any
    fit: Any
    pool: dict[str, np.ndarray]
    cost: np.ndarray
    open: np.ndarray  # bool mask: not yet chosen
    target: Any
    rng: np.random.Generator
    data: dict[str, np.ndarray] | None = None  # the runs the fit was made on
    notes: list[str] = field(default_factory=list)  # what the criterion had to paper over
    test: dict[str, Any] | None = None  # the round's lack-of-fit test and what it decided
