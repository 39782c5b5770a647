"""Every registered law and every export format passes its contract (tests/contracts.py)."""

from __future__ import annotations

import pytest
from contracts import EXAMPLES, check_export, check_law

from archfit.formats import FORMATS
from archfit.laws import LAWS

# the laws archfit ships (a test may register a law of its own: it is not one of these)
BUILT_IN = sorted(n for n, law in LAWS.items() if type(law).__module__.startswith("archfit."))


def test_every_law_has_example_data():
    assert set(BUILT_IN) <= set(EXAMPLES), set(BUILT_IN) - set(EXAMPLES)


SLOW_CONTRACTS = ("data-constrained", "moe-experts")  # seconds each: the slow suite's


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_CONTRACTS
                                  else n for n in BUILT_IN])
def test_law_contract(name, tmp_path):
    check_law(name, EXAMPLES[name](0), tmp_path)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_export_contract(fmt, tmp_path):
    check_export(fmt, tmp_path)


def test_a_format_registered_in_a_test_serves_emit_from_and_the_contract(tmp_path, cli):
    """Adding a format is one module that registers a Format: --emit writes it, --from reads it
    back, the limits refuse what it cannot hold, and the contract test passes it."""
    import json

    from archfit.formats import base
    from archfit.shapes import Shape

    def render(s, o):
        return json.dumps({"toy": True, "written by archfit": 1, "L": s.n_layer, "d": s.d_model,
                           "h": s.n_head, "archfit": base.archfit_block(s)}) + "\n"

    def read(text, where):
        d = json.loads(text)
        return base.Imported(Shape(n_layer=d["L"], d_model=d["d"], n_head=d["h"], n_ctx=128,
                                   vocab_size=1000), "toy")

    def limits(s):
        out: list[str] = []
        base.need(s.position == "learned" and s.mlp == "gelu", "toy is GPT-2-like only", out)
        return out

    toy = base.Format("toy", "a toy JSON format", "gpt2", "toy.json", render, limits,
                      "toy-train FILE", suffixes=(".json",),
                      sniff=lambda text: '"toy": true' in text, read=read)
    base.register(toy)
    try:
        shape = ["--layers", "4", "--width", "256", "--heads", "4", "--vocab", "1000",
                 "--ctx", "128"]
        r = cli("shape", *shape, "--emit", "toy", "-o", tmp_path)
        assert r.exit_code == 0, r.output
        r = cli("shape", "--from", tmp_path / "toy.json", "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["params_total"] == Shape(
            n_layer=4, d_model=256, n_head=4, vocab_size=1000, n_ctx=128).params_total
        r = cli("shape", *shape, "--rope", "--emit", "toy")
        assert r.exit_code == 2 and "toy is GPT-2-like only" in r.output
        r = cli("shape", *shape, "--no-mlp", "0", "--emit", "toy")
        assert r.exit_code == 2 and "layer 0 has no MLP" in r.output
        check_export("toy", tmp_path)
    finally:
        base.REGISTRY.pop("toy")
    r = cli("shape", *shape, "--emit", "toy")
    assert r.exit_code == 2 and "unknown export format 'toy'" in r.output


# inference on a fit lives on Fit (laws.artifact) and in laws.trust, never on a law
INFERENCE = ("trust", "verdict", "spread", "bound_reasons", "optimum_ci", "bootstrap_params",
             "figures", "draws", "conf_int", "band")


@pytest.mark.parametrize("name", sorted(LAWS))
def test_a_law_is_the_model_and_never_implements_inference(name):
    """Law holds the functional form, parameters, bounds, starts, data preparation and the
    optimum; every method of a law takes parameters, not a Fit."""
    import inspect

    from archfit.laws.base import Law

    cls = type(LAWS[name])
    for klass in cls.__mro__:
        if klass in (Law, object) or not issubclass(klass, Law):
            continue
        for attr, member in vars(klass).items():
            if not inspect.isfunction(member):
                continue
            assert attr not in INFERENCE, f"{klass.__name__}.{attr}: inference belongs on Fit"
            assert "fit" not in inspect.signature(member).parameters, \
                f"{klass.__name__}.{attr} takes a fit: give it parameters, or move it to Fit"
    for attr, member in vars(Law).items():
        if inspect.isfunction(member):
            assert attr not in INFERENCE and "fit" not in inspect.signature(member).parameters, attr


def test_the_inference_check_catches_a_law_that_reads_a_fit():
    import inspect

    from archfit.laws.base import Law

    class Nosy(Law):
        def trust(self, fit):  # a planted violation
            return fit

    assert "fit" in inspect.signature(vars(Nosy)["trust"]).parameters and "trust" in INFERENCE


def test_the_law_table_holds_every_registered_law_class_in_the_package():
    """Every class decorated ``@register`` in a module under archfit/laws is in :data:`LAWS`
    once ``archfit.laws`` is imported (its room's import line was not forgotten), read from the
    source."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    registered = set()
    for p in (root / "archfit" / "laws").rglob("*.py"):
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(d, ast.Name) and d.id == "register" for d in node.decorator_list):
                registered.add((".".join(p.relative_to(root).with_suffix("").parts), node.name))
    assert registered == {(type(LAWS[n]).__module__, type(LAWS[n]).__name__) for n in BUILT_IN}


