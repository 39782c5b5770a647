"""archfit: for N parameters, how deep and how wide?

The top-level names are imported lazily so ``import archfit`` stays cheap and never pulls in
torch or matplotlib.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Shape": "archfit.shapes",
    "gpt2": "archfit.shapes",
    "iso_param_family": "archfit.shapes.families",
    "fixed_width_family": "archfit.shapes.families",
    "aspect_ratio_family": "archfit.shapes.families",
    "parse_number": "archfit.numbers",
    "known_models": "archfit.shapes.known",
    "fit": "archfit.laws.fitting",
    "backtest": "archfit.laws.backtest",
    "UninformativeWarning": "archfit.errors",
    "load_fit": "archfit.laws",
    "Fit": "archfit.laws",
    "read_runs": "archfit.sweep.store:runs_frame",  # a polars frame of a sweep dir or run table
    "recommend": "archfit.recommending",
    "compare": "archfit.recommending",
    # functions whose modules are named apart (archfit.designing, archfit.recommending), so that
    # importing a module never replaces a name here
    "design": "archfit.designing",
    "replay": "archfit.designing",
    "trade": "archfit.recommending.trading",
    "parse_plan": "archfit.shapes",
    "Recommendation": "archfit.recommending",
    "TrainConfig": "archfit.train",
    "Budget": "archfit.train",
    "load_spec": "archfit.sweep",
    "ArchfitError": "archfit.errors",
    "campaign": "archfit.campaign:",  # the module itself: archfit.campaign.run(...), .status(...)
}

if TYPE_CHECKING:  # what each lazy name is, for type checkers and editors (never run)
    from archfit.designing import design, replay
    from archfit.errors import ArchfitError, UninformativeWarning
    from archfit.shapes.families import aspect_ratio_family, fixed_width_family, iso_param_family
    from archfit.shapes.known import known_models
    from archfit.laws import Fit, load_fit
    from archfit.laws.backtest import backtest
    from archfit.laws.fitting import fit
    from archfit.numbers import parse_number
    from archfit import campaign
    from archfit.recommending import Recommendation, compare, recommend
    from archfit.shapes import Shape, gpt2, parse_plan
    from archfit.sweep.store import runs_frame as read_runs
    from archfit.sweep import load_spec
    from archfit.recommending.trading import trade
    from archfit.train import Budget, TrainConfig

__all__ = [
    "ArchfitError",
    "Budget",
    "Fit",
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
    "replay",
    "trade",
    "__version__",
]  # _LAZY's names, literal for type checkers (a test matches them)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, colon, attr = _LAZY[name].partition(":")
        mod = importlib.import_module(module)
        return mod if colon and not attr else getattr(mod, attr or name)
    raise AttributeError(f"module 'archfit' has no attribute {name!r}")
