"""``archfit recommend``'s click-free path (archfit/__main__.py) prints what the click command
prints, takes only what it can answer, and leaves every failure to the click command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from archfit.__main__ import quick_recommend

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "import sys; from archfit.__main__ import main; sys.argv[0] = 'archfit'; main()"


def both(argv: list[str], tmp_path: Path, monkeypatch) -> tuple[Any, Any]:  # type: ignore[no-untyped-def]
    """The console script run as a user runs it (a process), and the click command (in this
    process, through click's test runner), both from tmp_path."""
    from click.testing import CliRunner

    from archfit.cli import main

    script = subprocess.run([sys.executable, "-c", SCRIPT, *argv], capture_output=True,
                            text=True, cwd=tmp_path, timeout=120)
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, argv, prog_name="archfit")
    return script, subprocess.CompletedProcess(argv, r.exit_code, r.stdout, r.stderr)


ANSWERED = [
    ["--params", "1e12"],
    ["--params", "7e9", "--json"],
    ["--params=7B", "--ctx", "4096", "--vocab", "32000", "--tolerance", "0.01", "--top", "3"],
    ["--compute", "1e24", "--json"],
    ["--params", "7e9", "--law", "gemstones2025", "--head-dim", "64", "--multiple-of", "64"],
    ["--params", "1e9", "--law", "levine2020", "--law", "gemstones2025", "--strict"],
]


@pytest.mark.parametrize("argv", ANSWERED)
def test_the_fast_path_prints_what_the_click_command_prints(argv, tmp_path, monkeypatch):
    assert quick_recommend(argv) is not None  # this path answers it, without click
    fast, slow = both(["recommend", *argv], tmp_path, monkeypatch)
    assert slow.returncode == 0, slow.stderr
    assert (fast.returncode, fast.stdout, fast.stderr) == (0, slow.stdout, slow.stderr)
    assert "recommended" in fast.stdout or '"n_layer"' in fast.stdout


REFUSED = [
    ["--params", "-1"],                          # a bad value
    ["--params", "abc"],
    ["--params", "1e12", "--compute", "1e24"],   # both targets
    [],                                          # no target
    ["--params", "1e12", "--fit", "no-such-fit.json"],  # a failure inside recommend
    ["--params", "1e12", "--law", "no-such-law"],
    ["--params", "1e12", "--top", "2.5"],
    ["--params", "1e12", "--json=yes"],
    ["--params"],                                # a flag without its value
]


@pytest.mark.parametrize("argv", REFUSED)
def test_failures_go_to_the_click_command_with_one_line_and_status_2(argv, tmp_path,
                                                                    monkeypatch):
    assert quick_recommend(argv) is None
    fast, slow = both(["recommend", *argv], tmp_path, monkeypatch)
    assert fast.returncode == slow.returncode == 2
    assert fast.stderr == slow.stderr and len(fast.stderr.strip().splitlines()) == 1
    assert fast.stderr.startswith("Error: ") and fast.stdout == ""
    assert not list(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("argv", [["--params", "1e12", "--mlp", "swiglu"], ["--help"],
                                  ["--params", "1e12", "--compare"],
                                  ["--params", "1e12", "--params", "1e9"]])
def test_options_it_does_not_take_go_to_the_click_command(argv, tmp_path, monkeypatch):
    assert quick_recommend(argv) is None
    fast, slow = both(["recommend", *argv], tmp_path, monkeypatch)
    if argv == ["--help"]:  # click wraps help to the terminal: its test runner's is 80 wide
        fast.stdout, slow.stdout = fast.stdout.split("\n\n")[0], slow.stdout.split("\n\n")[0]
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout,
                                                           slow.stderr)
    assert fast.returncode == 0


def test_the_fast_path_imports_no_click_and_no_heavy_library(tmp_path):
    """Nor typing and dataclasses (with inspect): 12 ms of a 44 ms start before the shape
    core's and the laws' records became archfit.record's (issue 57's 3x target)."""
    for argv in (["--params", "1e12"], ["--compute", "1e24"]):  # a shape law; Chinchilla's
        code = (SCRIPT.replace("main()", f"sys.argv[1:] = ['recommend', *{argv!r}, '--json']; "
                               "main()")
                + "; print(sorted(m for m in ('click', 'numpy', 'polars', 'torch', "
                  "'matplotlib', 'typing', 'dataclasses', 'inspect') if m in sys.modules), "
                  "file=sys.stderr)")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=tmp_path, check=True, timeout=120)
        assert r.stderr.strip() == "[]", (argv, r.stderr)
    # and another verb still reaches the click command through the same entry point
    r = subprocess.run([sys.executable, "-m", "archfit", "laws", "--json"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and '"levine2020"' in r.stdout
