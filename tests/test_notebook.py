"""The planning notebook (examples/plan-a-7b.ipynb) runs, top to bottom, in a real Jupyter
kernel (nbclient + ipykernel), and says what a planner needs: a fit shown as HTML, a 7e9
recommendation with its verdict and near-optimal set, the laws compared, a designed batch,
an export that transformers' own LlamaConfig loads, and two figures drawn inline."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "plan-a-7b.ipynb"

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


def _builder():
    spec = importlib.util.spec_from_file_location("make_notebook", ROOT / "scripts" / "make_notebook.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_notebook"] = mod
    spec.loader.exec_module(mod)
    return mod


def _text(cell) -> str:
    out = []
    for o in cell.outputs:
        if o.output_type == "stream":
            out.append(o.text)
        elif "data" in o:
            out.append(o["data"].get("text/plain", ""))
    return "\n".join(out)


def test_the_committed_notebook_is_the_builders():
    """What ships is what scripts/make_notebook.py writes (so neither goes stale alone)."""
    committed = nbformat.read(NOTEBOOK, as_version=4)
    built = _builder().build()
    assert [c.source for c in committed.cells] == [c.source for c in built.cells]
    code = [c for c in committed.cells if c.cell_type == "code"]
    assert all(c.outputs for c in code), "the committed notebook is executed"


@pytest.mark.slow  # seconds of training or a kernel: the fast suite stays under 2 minutes
def test_the_notebook_runs_in_a_real_kernel_and_plans_a_7b():
    nb = _builder().execute(nbformat.read(NOTEBOOK, as_version=4), str(ROOT), timeout=180)
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    by_first = {c.source.splitlines()[0]: c for c in code}
    fit_cell = next(c for c in code if c.source.startswith("fit = archfit.fit"))
    html = fit_cell.outputs[0]["data"]["text/html"]
    assert "<table>" in html and "alpha" in html and "verdict" in html
    rec = _text(next(c for c in code if "archfit.recommend(" in c.source))
    assert "recommended: n_layer" in rec and "verdict:" in rec and "near-optimal" in rec
    near = _text(next(c for c in code if c.source.startswith("near = ")))
    lo, hi = (int(x) for x in near.split("any depth from ")[1].split(" is within")[0].split(" to "))
    assert 1 <= lo < hi  # a set, not a point
    compared = _text(next(c for c in code if "compare(" in c.source))
    assert "levine2020" in compared and "depth-width" in compared
    design = _text(next(c for c in code if "archfit.design(" in c.source))
    assert "archfit design: depth-width" in design and "this batch" in design
    export = _text(next(c for c in code if "LlamaConfig" in c.source))
    layers = int(rec.split("recommended: n_layer ")[1].split(",")[0])
    assert export.split()[0] == str(layers)  # the loaded config has the recommended depth
    pngs = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 2
    check = _text(code[-1])
    assert "runs past 1.2e9" in check
    assert by_first
