"""The fits a recommendation reads, one per kind of law, asked for by kind."""

from __future__ import annotations

import pytest

from archfit.errors import RecommendError
from archfit.laws import ComputeLaw, FFRatioLaw, ShapeLaw, load_fit
from archfit.recommending.fits import Fits


def test_one_fit_per_kind_the_shape_law_by_default():
    fits = Fits.given(["epoch2024"], "levine2020")
    assert fits.shape.label == "levine2020" and fits.of(ComputeLaw).label == "epoch2024"
    assert ComputeLaw in fits and FFRatioLaw not in fits and len(fits) == 2
    with pytest.raises(RecommendError, match="two compute fits given"):
        Fits.given(["epoch2024", "hoffmann2022"], "levine2020")
    with pytest.raises(RecommendError, match="needs an ff-ratio fit"):
        fits.require(FFRatioLaw, "--ff-ratio auto needs an ff-ratio fit")


def test_a_law_no_recommendation_reads_is_refused_and_a_kind_is_replaced():
    with pytest.raises(RecommendError, match="says nothing about depth or width"):
        Fits.given(["kaplan2020"], "levine2020")  # a loss curve over N alone
    fits = Fits.given(["epoch2024"], "levine2020")
    swapped = fits.with_fit(load_fit("hoffmann2022"))
    assert swapped.of(ComputeLaw).label == "hoffmann2022" and fits.of(ComputeLaw).label == (
        "epoch2024")
    assert swapped.of(ShapeLaw) is fits.of(ShapeLaw)
