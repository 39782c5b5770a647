"""archfit: for N parameters, how deep and how wide?

``import archfit`` imports what it exports; none of it loads torch or matplotlib at import time
(the trainer and the figures import them inside the functions that need them).
"""

from __future__ import annotations

from archfit import campaign
from archfit.designing import design, replay
from archfit.errors import ArchfitError, UninformativeWarning
from archfit.interval import Interval
from archfit.laws import Fit, load_fit
from archfit.laws.inference.backtest import backtest
from archfit.laws.inference.selection import fit
from archfit.numbers import parse_number
from archfit.recommending import (Recommendation, RecommendRequest, compare, recommend,
                                  recommend_sparse)
from archfit.recommending.trading import trade
from archfit.shapes import Shape, gpt2, parse_plan
from archfit.shapes.families import aspect_ratio_family, fixed_width_family, iso_param_family
from archfit.shapes.known import known_models
from archfit.sweep import load_spec
from archfit.sweep.store import runs_frame as read_runs  # a polars frame of a sweep dir or table
from archfit.train import Budget, TrainConfig

from archfit._version import __version__

__all__ = [
    "ArchfitError",
    "Budget",
    "Fit",
    "Interval",
    "RecommendRequest",
    "Recommendation",
    "Shape",
    "TrainConfig",
    "UninformativeWarning",
    "aspect_ratio_family",
    "backtest",
    "campaign",
    "compare",
    "design",
    "fit",
    "fixed_width_family",
    "gpt2",
    "iso_param_family",
    "known_models",
    "load_fit",
    "load_spec",
    "parse_number",
    "parse_plan",
    "read_runs",
    "recommend",
    "recommend_sparse",
    "replay",
    "trade",
    "__version__",
]
