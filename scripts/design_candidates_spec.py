"""Writes the spec of the six candidate runs that tests/test_design.py's designed-batch test
weighs: depths 1, 2, 3, 4, 6 and 8 at 2.4e5 non-embedding parameters, 3e5 tokens each, in the
demo sweep's recipe (sweeps/demo.toml). scripts/make_test_tables.sh trains it.

    python scripts/design_candidates_spec.py OUT.toml
"""

import sys
from pathlib import Path

import polars as pl

from archfit.designing import Target, design, pool_from_grid
from archfit.laws.inference.fitting import fit
from archfit.recommending.validation import recipe
from archfit.sweep import load_spec

ROOT = Path(__file__).resolve().parents[1]
spec = load_spec(str(ROOT / "sweeps" / "demo.toml"))
r = recipe(spec)
pool = pool_from_grid([2.4e5], [1, 2, 3, 4, 6, 8], [3e5], base=r["base"],
                      head_dim=r["head_dim"], multiple=r["multiple"], tolerance=r["tolerance"])
before = pl.read_parquet(ROOT / "datasets" / "demo_sweep.parquet").filter(
    pl.col("target_params") <= 1.2e5)
f0 = fit(before, "depth-joint", bootstrap=20, seed=0, heldout=False)
every = design(pool, law="depth-joint", target=Target("params", 3.6e5), fit=f0,
               budget_frac=1.0, batch=6, strategy="cheapest", seed=0, base=r["base"])
assert len(every.chosen) == 6, every.chosen
print(every.write(sys.argv[1], spec))
