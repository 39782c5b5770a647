"""The shape of the code: layers point one way, no import cycles, functions stay short, cold
paths stay cold."""

from __future__ import annotations

import functools
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "archfit"

# io -> shapes -> model -> train -> sweep -> store -> laws -> recommend -> plots -> campaign -> cli
LAYERS = [
    ("io", ("archfit", "archfit.io", "archfit.errors", "archfit.numbers", "archfit.text")),
    ("shapes", ("archfit.shapes", "archfit.formats")),
    ("model", ("archfit.train.model", "archfit.train.experts")),
    ("train", ("archfit.train",)),
    ("sweep", ("archfit.sweep",)),
    ("store", ("archfit.sweep.store",)),
    ("laws", ("archfit.laws",)),
    ("recommend", ("archfit.recommending", "archfit.designing")),
    ("plots", ("archfit.plots",)),
    # the loop that runs the others (design, train, fit, recommend) and draws each round
    ("campaign", ("archfit.campaign",)),
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


def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """Every archfit module imported anywhere in the file (top level and inside functions);
    not the imports under ``if TYPE_CHECKING:``, which never run. A file of the repository is
    parsed once (the tests here read each again and again; a planted copy elsewhere, each
    time); the list is not to be changed."""
    return _repository_imports(path) if root == ROOT else _imports_of(path, root)


@functools.cache
def _repository_imports(path: Path) -> list[tuple[int, str]]:
    return _imports_of(path, ROOT)


def _imports_of(path: Path, root: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    me = module_name(path, root)
    out = []
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for stmt in node.body for n in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
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
                spec_path = root / Path(*sub.split("."))
                is_module = spec_path.with_suffix(".py").exists() or spec_path.is_dir()
                out.append((node.lineno, sub if is_module else mod))
    return out


def all_modules(root: Path = ROOT) -> list[Path]:
    return sorted((root / "archfit").rglob("*.py"))


def upward_imports(root: Path = ROOT) -> list[str]:
    """Every import of a higher layer's module, as 'module (layer) imports other (layer)'."""
    bad = []
    for path in all_modules(root):
        me = module_name(path, root)
        if me == "archfit":
            continue  # the package's __init__ re-exports every layer's public API
        mine = layer_of(me)
        bad += [f"line {ln}: {me} ({LAYERS[mine][0]}) imports {mod} "
                f"({LAYERS[layer_of(mod)][0]})" for ln, mod in imports_of(path, root)
                if layer_of(mod) > mine]
    return bad


def _import_time_lines(tree: ast.Module) -> set[int]:
    """Lines of the imports that run when the module is imported: module level, inside
    module-level if/try/with blocks and class bodies, but not under ``if TYPE_CHECKING`` and
    not inside functions."""
    lines: set[int] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                lines.add(node.lineno)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, (ast.With, ast.ClassDef)):
                visit(node.body)

    visit(tree.body)
    return lines


def import_graph(root: Path = ROOT, lazy: bool = False) -> dict[str, set[str]]:
    """archfit module -> the archfit modules it imports when imported (``lazy``: also the
    imports inside functions)."""
    paths = {module_name(p, root): p for p in all_modules(root)}
    graph: dict[str, set[str]] = {}
    for me, path in paths.items():
        when = None if lazy else _import_time_lines(ast.parse(path.read_text()))
        deps = set()
        for ln, mod in imports_of(path, root):
            if when is not None and ln not in when:
                continue
            while mod not in paths and "." in mod:
                mod = mod.rsplit(".", 1)[0]
            if mod in paths and mod != me and mod != "archfit":
                deps.add(mod)
        graph[me] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The import cycles: strongly connected groups of two or more modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(group)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


# cycles through imports inside functions, each with its reason; a new one fails
KNOWN_LAZY_CYCLES: list[set[str]] = []


def test_every_module_has_a_layer():
    for p in all_modules():
        layer_of(module_name(p))


def test_no_module_imports_a_higher_layer():
    bad = upward_imports()
    assert not bad, f"imports from a higher layer: {bad}"


def test_no_import_cycle_at_import_time():
    assert cycles(import_graph()) == []


def test_no_new_cycle_through_lazy_imports():
    new = [c for c in cycles(import_graph(lazy=True)) if c not in KNOWN_LAZY_CYCLES]
    assert not new, f"new import cycles (through imports inside functions): {new}"


def law_rooms(root: Path = ROOT) -> dict[str, set[str]]:
    """The rooms of archfit/laws and the rooms each imports (imports inside functions too): a
    room is a subpackage (``inference``, ``shape``, ``user``, ...) or one top-level module
    (``base``, ``columns``, ``published``, ``planted``; the package's ``__init__`` is ``laws``)."""
    def room(mod: str) -> str | None:
        parts = mod.split(".")
        if parts[:2] != ["archfit", "laws"]:
            return None
        return parts[2] if len(parts) > 2 else "laws"

    graph: dict[str, set[str]] = {}
    for me, deps in import_graph(root, lazy=True).items():
        if (mine := room(me)) is not None:
            graph.setdefault(mine, set()).update(
                r for d in deps if (r := room(d)) is not None and r != mine)
    return graph


def test_the_rooms_of_the_laws_import_in_one_direction():
    """No circle among the laws' rooms (a room whose modules import another room's, which
    imports back, cannot be lifted apart even where no module imports its importer): the base
    imports no room, the shared machinery (inference) no room of laws."""
    graph = law_rooms()
    assert {"base", "inference", "shape", "compute", "user"} <= set(graph)
    assert cycles(graph) == [], f"rooms of archfit/laws in a circle: {cycles(graph)}"


@pytest.mark.slow
def test_the_checks_catch_a_planted_upward_import_and_cycle(tmp_path):
    """The checks above are not vacuous: in a copy of the package, a real upward import
    (shapes -> cli) and a real import-time cycle (errors <-> numbers) are both found."""
    import shutil

    shutil.copytree(PKG, tmp_path / "archfit", ignore=shutil.ignore_patterns("__pycache__"))
    assert upward_imports(tmp_path) == [] and cycles(import_graph(tmp_path)) == []
    shape_module = tmp_path / "archfit" / "shapes" / "shape.py"
    assert shape_module.exists()  # a real module of the shapes layer
    with open(shape_module, "a") as f:
        f.write("\nfrom archfit.cli import common  # planted\n")
    with open(tmp_path / "archfit" / "errors.py", "a") as f:
        f.write("\nimport archfit.numbers  # planted\n")
    assert any("archfit.shapes.shape (shapes) imports archfit.cli.common (cli)" in b
               for b in upward_imports(tmp_path))
    assert {"archfit.errors", "archfit.numbers"} in cycles(import_graph(tmp_path))
    assert cycles(law_rooms(tmp_path)) == []
    with open(tmp_path / "archfit" / "laws" / "base.py", "a") as f:
        f.write("\nfrom archfit.laws.inference import trust  # planted\n")
    assert {"base", "inference"} in cycles(law_rooms(tmp_path))


def function_lengths() -> list[tuple[str, int, str]]:
    out = []
    for p in all_modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                out.append((f"{module_name(p)}.{node.name}", n, ast.get_docstring(node) or ""))
    return out


def test_functions_are_short_or_say_why():
    """No function over 80 lines, unless its docstring gives the reason ("Long because"), and
    none over 100 lines at all."""
    lengths = function_lengths()
    long_ = [(name, n) for name, n, doc in lengths if n > 80 and "Long because" not in doc]
    assert not long_, f"functions over 80 lines without a reason in the docstring: {long_}"
    too_long = [(name, n) for name, n, _ in lengths if n > 100]
    assert not too_long, f"functions over 100 lines: {too_long}"


def test_the_code_tells_todays_story():
    """No docstring calls a path numpy-free (recommend loads numpy); the version is read from
    archfit._version, never by importing the whole package; the fitting driver and the law
    selection (law="auto") do not import each other; the loss laws search for their compute
    optimum in one place."""
    texts = {p: p.read_text() for p in all_modules()}
    assert not [p for p, t in texts.items() if "numpy-free" in t]
    whole = [f"{p.relative_to(ROOT)}" for p, t in texts.items()
             if p.name != "__init__.py" or p.parent != PKG
             for node in ast.walk(ast.parse(t)) if isinstance(node, ast.Import)
             and any(a.name == "archfit" for a in node.names)]
    assert not whole, f"modules that import the whole package: {whole}"
    graph = import_graph(lazy=True)
    assert "archfit.laws.inference.selection" not in graph["archfit.laws.inference.fitting"]
    laws = PKG / "laws"
    searches = {str(p.relative_to(laws)): texts[p].count("minimize_scalar(")
                for p in laws.rglob("*.py") if texts[p].count("minimize_scalar(")}
    assert searches == {"base.py": 1}, searches  # every law module, in every room


def cli_private_imports(root: Path = ROOT) -> list[str]:
    """Names a cli module imports from the library that are not its public API: a private
    name (``_x``) or a private module (``archfit._x``, ``archfit.x._y``)."""
    bad = []
    for p in sorted((root / "archfit" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("archfit")):
                continue
            if node.module.startswith("archfit.cli"):
                continue
            private_mod = any(part.startswith("_") for part in node.module.split("."))
            for a in node.names:
                if private_mod or a.name.startswith("_"):
                    bad.append(f"{p.name}:{node.lineno} from {node.module} import {a.name}")
    return bad


def test_the_cli_imports_only_the_public_api(tmp_path):
    """Commands are arguments -> one library call -> print: they import the library's public
    names only (a computation a notebook would want has a public name and a test). The check
    catches a planted private import."""
    import shutil

    assert cli_private_imports() == [], cli_private_imports()
    shutil.copytree(PKG, tmp_path / "archfit", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "archfit" / "cli" / "fit_cmd.py", "a") as f:
        f.write("\nfrom archfit.recommending import _rank  # planted\n")
    assert cli_private_imports(tmp_path) == ["fit_cmd.py:" + str(
        (tmp_path / "archfit" / "cli" / "fit_cmd.py").read_text().count("\n"))
        + " from archfit.recommending import _rank"]


@pytest.mark.parametrize("argv", [["recommend", "--params", "1e12", "--json"],
                                  ["recommend", "--compute", "1e24", "--json"],
                                  ["laws", "--json"]])
def test_cold_paths_import_no_heavy_library(argv):
    """numpy and scipy may load on a planning command; torch, matplotlib and the data-frame
    libraries load only in the functions that train, draw or read tables."""
    code = ("import sys; from archfit.cli import main; "
            f"main({argv!r}, standalone_mode=False); "
            "print(sorted(m for m in ('torch', 'matplotlib', 'polars', 'pandas') "
            "if m in sys.modules), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       cwd=ROOT)
    assert r.stderr.strip().splitlines()[-1] == "[]", r.stderr


def test_import_archfit_loads_no_torch_or_matplotlib():
    code = ("import sys, archfit, archfit.laws, archfit.recommending, archfit.shapes, "
            "archfit.train, archfit.formats, archfit.cli; "
            "print(sorted(m for m in ('torch', 'matplotlib', 'polars', 'pandas') "
            "if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"


def lazy_attribute_hooks(root: Path = ROOT) -> list[str]:
    """Modules with a module-level ``__getattr__`` or a ``_LAZY`` table of names to import."""
    bad = []
    for p in sorted((root / "archfit").rglob("*.py")):
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                bad.append(f"{p.relative_to(root)}: __getattr__")
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in targets):
                    bad.append(f"{p.relative_to(root)}: _LAZY")
    return bad


def test_packages_import_what_they_export(tmp_path):
    """No module-level ``__getattr__`` and no table of lazy names: a package imports what it
    exports, and each name in ``__all__`` is there. The check finds a planted hook."""
    import shutil

    import archfit
    import archfit.formats
    import archfit.train

    assert lazy_attribute_hooks() == []
    for mod in (archfit, archfit.train, archfit.formats):
        for n in mod.__all__:
            assert getattr(mod, n) is not None, (mod.__name__, n)
    shutil.copytree(PKG, tmp_path / "archfit", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "archfit" / "io.py", "a") as f:
        f.write("\n_LAZY = {}\n\ndef __getattr__(name):\n    raise AttributeError(name)\n")
    assert lazy_attribute_hooks(tmp_path) == ["archfit/io.py: _LAZY", "archfit/io.py: __getattr__"]


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


def test_the_cli_is_thin():
    """The CLI parses and prints; the library decides (the goal: cli/ at most 15% of the
    package's lines; ``__main__``, recommend's click-free path, counts as the CLI)."""
    def lines(paths) -> int:  # type: ignore[no-untyped-def]
        return sum(len(p.read_text().splitlines()) for p in paths)

    cli = lines([*(PKG / "cli").glob("*.py"), PKG / "__main__.py"])
    total = lines(PKG.rglob("*.py"))
    print(f"\ncli/ is {cli:,} of the package's {total:,} lines ({cli / total:.2%})")
    assert cli / total <= 0.15




# quantiles that are not over draws: the contour levels of a loss grid in a law's figure
NOT_DRAWS = {"archfit/laws/compute/chinchilla.py"}


def test_percentiles_over_draws_are_taken_in_one_module():
    """Every interval over draws goes through archfit.numbers (draw_ends, draw_percentiles):
    one percentile convention and one minimum count. A numpy percentile or quantile anywhere
    else is a second convention (the contour levels of a loss grid are not draws)."""
    import re

    call = re.compile(r"\b(?:np|numpy)\.(?:nan)?(?:percentile|quantile)\b")
    found = sorted(str(p.relative_to(ROOT)) for p in all_modules()
                   if call.search(p.read_text()))
    assert set(found) - NOT_DRAWS == {"archfit/numbers.py"}, found
