"""From a fit to a buildable shape: :func:`recommend` (a shape for a size or a FLOP budget, its
interval and verdict) for a :class:`RecommendRequest`, :func:`recommend_sparse` (a mixture of
experts for a request with :class:`Experts`), :func:`recommend_for` (the pick for an
:class:`Objective` beyond loss, weighed on a GPU), :func:`compare` (every law side by side), the near-optimal set
(:mod:`.near_optimal`), objectives beyond loss (:mod:`.objectives`), known models on a law's map
(:mod:`.landscape`), a layer plan's trade (:mod:`.trading`) and training the pick beside its
rivals (:mod:`.validation`)."""

from archfit.recommending.candidates import CONSTRAINT_NOTE, DEPTH_SPAN
from archfit.recommending.comparison import compare
from archfit.recommending.objectives import recommend_for
from archfit.recommending.pipeline import next_runs, recommend
from archfit.recommending.request import (Block, Experts, Grid, Objective, RecommendRequest,
                                          Target)
from archfit.recommending.result import Recommendation
from archfit.recommending.sparse import SparseRecommendation, recommend_sparse

__all__ = ["CONSTRAINT_NOTE", "DEPTH_SPAN", "Block", "Experts", "Grid", "Objective",
           "RecommendRequest", "Recommendation", "SparseRecommendation", "Target", "compare",
           "next_runs", "recommend", "recommend_for", "recommend_sparse"]
