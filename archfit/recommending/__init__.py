"""From a fit to a buildable shape: :func:`recommend` (a shape for a size or a FLOP budget, its
interval and verdict), :func:`compare` (every law side by side), the near-optimal set
(:mod:`.near_optimal`), objectives beyond loss (:mod:`.objectives`), known models on a law's map
(:mod:`.landscape`), a layer plan's trade (:mod:`.trading`) and training the pick beside its
rivals (:mod:`.validation`)."""

from archfit.recommending.candidates import CONSTRAINT_NOTE, DEPTH_SPAN
from archfit.recommending.comparison import compare
from archfit.recommending.pipeline import next_runs, recommend
from archfit.recommending.result import Recommendation

__all__ = ["CONSTRAINT_NOTE", "DEPTH_SPAN", "Recommendation", "compare", "next_runs",
           "recommend"]
