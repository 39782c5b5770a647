"""The README matches the code: every `archfit ...` command it shows is extracted and, unless it
trains (sweeps, the demo, validation) or names a placeholder, run on a fresh copy of the shipped
files; each must exit 0."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
# verbs that train or take minutes: run by the slow tests and the demo's own test
TRAINS = {"demo", "train", "validate", "design"}
SWEEP_TRAINS = {"run", "collect"}  # collect reads what run trained
# the README's placeholders: a command naming one is a pattern, not a command
PLACEHOLDER = re.compile(r"\b(FIT|DATA|FILE|NAME|SPEC|TABLE|DIR|DONE|TARGET|FMT|N|C|COL)\b|\.\.\.|"
                         r"<|yours|mine|corpus/|shards/|raw\.csv|llama-sweep|grid\.csv|"
                         r"mixed\.csv|done\.csv|big\.csv|runs\.csv|pool\.csv|scattered|bigger|"
                         r"demo-out/|demo-half|next\.toml|tokenizer\.json|my-|"
                         r"throughput-cpu\.parquet|layer-variants\.parquet")


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    cmds: list[str] = []
    for kind, block in re.findall(r"```(bash|console)\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if kind == "console":  # output lines are not commands
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            for part in re.split(r"\s*&&\s*", line):
                if part.startswith("archfit "):
                    cmds.append(_clean(part.split(" | ")[0]))
    for cell in re.findall(r"^\| `(archfit [^`]+)`", text, re.M):
        cmds += [_clean(c) for c in re.split(r"\s*&&\s*", cell.replace("\\|", "|"))]
    return list(dict.fromkeys(cmds))


def _clean(cmd: str) -> str:
    """A command as typed: optional parts in brackets dropped, spaces normalised."""
    return " ".join(re.sub(r"\[[^\]]*\]", "", cmd).split())


def runnable(cmd: str) -> tuple[bool, str]:
    argv = shlex.split(cmd)[1:]
    if not argv:
        return False, "no verb"
    if argv[0] in TRAINS or (argv[0] == "sweep" and len(argv) > 1 and argv[1] in SWEEP_TRAINS):
        return False, "trains (the slow tests run it)"
    if PLACEHOLDER.search(cmd) or "|" in cmd:
        return False, "a pattern with placeholders"
    return True, ""


def test_the_readme_shows_commands():
    cmds = readme_commands()
    assert len(cmds) >= 25, cmds
    assert sum(runnable(c)[0] for c in cmds) >= 12


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A fresh tree: the shipped specs, datasets and fits, and sweeps/demo.parquet as the
    README's sweep row leaves it (a planted stand-in with its columns, sizes and one token count
    per run, since that row trains)."""
    d = tmp_path_factory.mktemp("fresh")
    for sub in ("sweeps", "datasets", "fits"):
        shutil.copytree(ROOT / sub, d / sub)
    from archfit.laws.planted import correlated_sweep as planted

    planted("depth-joint", seed=0, n_shapes=17, n_tokens=1, n_min=3e4,
            n_max=2.4e5).write_parquet(d / "sweeps" / "demo.parquet")
    return d


@pytest.mark.parametrize("cmd", [c for c in readme_commands() if runnable(c)[0]])
def test_each_readme_command_runs(tree, cmd, monkeypatch):
    from archfit.cli import main

    monkeypatch.chdir(tree)
    argv = shlex.split(cmd)[1:]
    if argv[0] in ("fit", "backtest") and "--bootstrap" not in argv:
        argv += ["--bootstrap", "20"]  # the same command, fewer resamples
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 0, (cmd, r.output[-1500:])


@pytest.mark.slow  # a design on the sweep's fit: about 13 s
def test_the_first_design_help_example_runs_as_printed(tree, monkeypatch):
    """Integrity round four: 'archfit design --help' opens with an example that runs as
    printed (on the README tree's sweeps/demo.parquet), with fewer bootstrap resamples."""
    from archfit.cli import main

    monkeypatch.chdir(tree)
    text = CliRunner().invoke(main, ["design", "--help"]).output
    block = text.split("Examples:", 1)[1].replace("\\\n", " ")
    first = next(ln.strip() for ln in block.splitlines() if ln.strip().startswith("archfit"))
    argv = shlex.split(first)[1:] + ["--bootstrap", "20"]
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 0, (first, r.output[-1500:])
    assert (tree / "next.toml").is_file() and "wrote next.toml" in r.output
