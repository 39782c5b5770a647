"""A fit's parameter draws are one object (archfit.laws.inference.draws.Draws): made once per
fit, the one place that turns draws into an interval, with one percentile convention
(numpy's default, Hyndman & Fan's type 7) and one refusal when too few draws give a value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from archfit.interval import FITTED, record
from archfit.laws.inference.draws import Draws

PROV = record(FITTED, "percentiles over 40 bootstrap resamples", source="test")


def _draws(n: int = 40) -> Draws:
    rng = np.random.default_rng(0)
    return Draws([{"a": float(x), "b": float(2 * x)} for x in rng.normal(1.0, 0.1, n)], PROV)


def test_an_interval_is_type_7_percentiles_of_the_finite_values():
    """Against the closed form of type-7 percentiles (linear between order statistics,
    Hyndman & Fan 1996), written out here, not numpy's."""
    d = _draws()
    b = sorted(p["b"] for p in d)

    def type7(q: float) -> float:
        h = (len(b) - 1) * q
        lo = math.floor(h)
        return b[lo] + (h - lo) * (b[min(lo + 1, len(b) - 1)] - b[lo])

    iv = d.interval(lambda p: p["b"])
    assert (iv.low, iv.high) == (pytest.approx(type7(0.025)), pytest.approx(type7(0.975)))
    assert iv.kind == FITTED and iv.level == 0.95 and "40 bootstrap" in iv.method
    iv90 = d.interval(lambda p: p["b"], level=0.9)
    assert iv90.level == 0.9 and iv90.low == pytest.approx(type7(0.05))


def test_draws_without_a_value_are_left_out_and_too_few_refuse():
    d = _draws(12)
    # a quantity that does not exist on most draws: left out, then too few for an interval
    vals = d.values(lambda p: math.log(p["a"] - 1.05))
    assert len(vals) == sum(p["a"] > 1.05 for p in d) < 10
    assert d.interval(lambda p: math.log(p["a"] - 1.05)) is None
    assert d.interval(lambda p: None if p["a"] > 1 else p["a"]) is None
    assert d.interval(lambda p: p["a"], min_count=13) is None
    assert Draws([], None).interval(lambda p: 1.0) is None


def test_a_fit_makes_its_draws_once_and_again_when_its_samples_change():
    import archfit
    from conftest import _chinchilla

    f = archfit.fit(_chinchilla(0)[0], law="chinchilla", bootstrap=20, heldout=False)
    first = f.draws()
    assert f.draws() is first and len(first) == f.n_bootstrap() == 20
    assert first.provenance == f.interval_provenance()
    samples = f.bootstrap["samples"]
    f.bootstrap = {**f.bootstrap, "samples": {k: v[:15] for k, v in samples.items()}}
    again = f.draws()
    assert again is not first and len(again) == 15
