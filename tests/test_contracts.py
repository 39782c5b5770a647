"""Every registered law and every export format passes its contract (tests/contracts.py)."""

from __future__ import annotations

import pytest
from contracts import EXAMPLES, check_export, check_law

from archfit.frameworks import FORMATS
from archfit.laws import LAWS

# the laws archfit ships (a test may register a law of its own: it is not one of these)
BUILT_IN = sorted(n for n, law in LAWS.items() if type(law).__module__.startswith("archfit."))


def test_every_law_has_example_data():
    assert set(BUILT_IN) <= set(EXAMPLES), set(BUILT_IN) - set(EXAMPLES)


@pytest.mark.parametrize("name", BUILT_IN)
def test_law_contract(name, tmp_path):
    check_law(name, EXAMPLES[name](0), tmp_path)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_export_contract(fmt, tmp_path):
    check_export(fmt, tmp_path)
