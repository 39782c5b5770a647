"""The shape of the code: layers point one way, functions stay short, cold paths stay cold."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "archfit"

# io -> shapes -> model -> train -> sweep -> store -> laws -> recommend -> plots -> cli
LAYERS = [
    ("io", ("archfit", "archfit.io", "archfit.errors", "archfit.numbers")),
    ("shapes", ("archfit.shapes", "archfit.frameworks", "archfit.known")),
    ("model", ("archfit.model",)),
    ("train", ("archfit.data", "archfit.train", "archfit.distributed", "archfit.memory",
               "archfit.perf", "archfit.prepare")),
    ("sweep", ("archfit.sweep",)),
    ("store", ("archfit.store",)),
    ("laws", ("archfit.laws",)),
    ("recommend", ("archfit.recommender", "archfit.landscape", "archfit.objectives")),
    ("plots", ("archfit.plots",)),
    ("cli", ("archfit.cli", "archfit.__main__")),
]


def layer_of(module: str) -> int:
    """The layer of a module: the longest matching prefix in LAYERS."""
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"module {module} is in no layer: add it to LAYERS"
    return rank


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """Every archfit module imported anywhere in the file (top level and inside functions)."""
    tree = ast.parse(path.read_text())
    me = module_name(path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("archfit")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import
                base = me.rsplit(".", node.level - (path.name == "__init__.py"))[0]
                mod = f"{base}.{node.module}" if node.module else base
            else:
                mod = node.module or ""
            if not mod.startswith("archfit"):
                continue
            for a in node.names:  # "from archfit import sweep" imports archfit.sweep
                sub = f"{mod}.{a.name}"
                spec_path = ROOT / Path(*sub.split("."))
                is_module = spec_path.with_suffix(".py").exists() or spec_path.is_dir()
                out.append((node.lineno, sub if is_module else mod))
    return out


def all_modules() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def test_every_module_has_a_layer():
    for p in all_modules():
        layer_of(module_name(p))


@pytest.mark.parametrize("path", all_modules(), ids=lambda p: module_name(p))
def test_no_module_imports_a_higher_layer(path):
    me = module_name(path)
    if me == "archfit":
        return  # the package facade names its API by string (importlib), lazily
    mine = layer_of(me)
    bad = [f"line {ln}: {mod} ({LAYERS[layer_of(mod)][0]})" for ln, mod in imports_of(path)
           if layer_of(mod) > mine]
    assert not bad, f"{me} ({LAYERS[mine][0]}) imports from a higher layer: {bad}"


def test_the_layer_check_catches_an_upward_import(tmp_path):
    """The check above is not vacuous: an upward import in a library file is found."""
    p = PKG / "laws" / "base.py"
    found = [m for _, m in imports_of(p)]
    assert "archfit.numbers" in found and "archfit.errors" in found
    assert layer_of("archfit.cli.common") > layer_of("archfit.laws.base")
    assert layer_of("archfit.sweep.rundir") < layer_of("archfit.store")


def function_lengths() -> list[tuple[str, int, str]]:
    out = []
    for p in all_modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                out.append((f"{module_name(p)}.{node.name}", n, ast.get_docstring(node) or ""))
    return out


def test_functions_are_short_or_say_why():
    """No function over 80 lines, unless its docstring gives the reason ("Long because")."""
    long_ = [(name, n) for name, n, doc in function_lengths()
             if n > 80 and "Long because" not in doc]
    assert not long_, f"functions over 80 lines without a reason in the docstring: {long_}"


@pytest.mark.parametrize("argv", [["recommend", "--params", "1e12", "--json"],
                                  ["recommend", "--compute", "1e24", "--json"],
                                  ["laws", "--json"]])
def test_cold_paths_import_no_heavy_library(argv):
    code = ("import sys; from archfit.cli import main; "
            f"main({argv!r}, standalone_mode=False); "
            "print(sorted(m for m in ('torch', 'matplotlib', 'polars', 'numpy', 'pandas', "
            "'scipy') if m in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       cwd=ROOT)
    assert r.stderr.strip().splitlines()[-1] == "[]", r.stderr


def test_import_archfit_and_the_laws_is_light():
    code = ("import sys, archfit, archfit.laws, archfit.recommender, archfit.shapes; "
            "print(sorted(m for m in ('torch', 'matplotlib', 'numpy', 'polars') "
            "if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"


def test_library_never_imports_the_cli():
    for p in all_modules():
        me = module_name(p)
        if me.startswith("archfit.cli") or me == "archfit.__main__":
            continue
        assert not [m for _, m in imports_of(p) if m.startswith("archfit.cli")], me


def test_no_test_reads_outside_the_repository():
    outside = ("..", "/shared"), ("/work", "/")
    for p in (ROOT / "tests").glob("*.py"):
        if p.name == Path(__file__).name:
            continue
        text = p.read_text()
        assert not any("".join(o) in text for o in outside), p.name
