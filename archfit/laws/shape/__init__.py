"""Shape laws: the best depth, width and MLP ratio at a size (:class:`~archfit.laws.ShapeLaw`,
:class:`~archfit.laws.FFRatioLaw`), and the optima measured in the runs beside them."""

from archfit.laws.shape import depth_joint, depth_width, ff_ratio, levine  # noqa: F401  (registers them)
