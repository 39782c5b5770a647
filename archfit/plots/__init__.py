"""archfit's figures (matplotlib; imported only by what draws): a fit and its evidence
(:mod:`.fits`), the checks on a fit (:mod:`.checks`) and a design (:mod:`.design`), on what
they share (:mod:`.base`)."""

from archfit.plots.base import (DPI, FIGSIZE, FORMATS, is_archfit_figure, is_archfit_png,
                                write_png)
from archfit.plots.checks import draw_backtest, draw_pareto, draw_validation
from archfit.plots.fits import (LABEL_PT, draw_all, draw_known_models, figure_files,
                                known_models_map, label_box, law_figure, optimal_shape_vs_size,
                                residuals)

__all__ = ["DPI", "FIGSIZE", "FORMATS", "LABEL_PT", "draw_all", "draw_backtest",
           "draw_known_models", "draw_pareto", "draw_validation", "figure_files",
           "is_archfit_figure", "is_archfit_png", "known_models_map", "label_box", "law_figure",
           "optimal_shape_vs_size", "residuals", "write_png"]
