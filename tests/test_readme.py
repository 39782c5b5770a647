"""The README and the docs site match the code: every `archfit ...` command they show is
extracted and, unless it trains (sweeps, the demo, validation) or names a placeholder, run on a
fresh copy of the shipped files; each must exit 0. Where a console block shows a command's
output, the printed output must match it: the text word for word (spacing aside), every number
within 1% (or half a unit of its last printed digit), `...` standing for what is left out."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
# verbs that train or take minutes: run by the slow tests and the demo's own test
TRAINS = {"demo", "train", "validate", "campaign"}  # campaign: its run trains, the rest read a run
SWEEP_TRAINS = {"run", "collect"}  # collect reads what run trained
# the README's placeholders: a command naming one is a pattern, not a command
PLACEHOLDER = re.compile(r"\b(FIT|DATA|FILE|NAME|SPEC|TABLE|DIR|DONE|TARGET|FMT|N|C|COL)\b|\.\.\.|"
                         r"<|yours|mine|corpus/|shards/|raw\.csv|llama-sweep|grid\.csv|"
                         r"mixed\.csv|done\.csv|big\.csv|runs\.csv|pool\.csv|scattered|bigger|"
                         r"demo-out/|tokenizer\.json|my-|"
                         r"throughput-cpu\.parquet|layer-variants\.parquet|"
                         r"moe-granularity\.parquet|moe-granularity-fit\.json|"
                         r"scaling-with-vocab/|scalebench-train/|vocab\.json")  # a public sweep's clone


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _all_text() -> str:
    return "\n".join(p.read_text() for p in DOCS)


def readme_commands() -> list[str]:
    text = _all_text()
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
    """A fresh tree: the shipped specs, datasets and fits, with sweeps/demo.parquet as the
    README's sweep row leaves it (datasets/demo_sweep.parquet: that row's real output, shipped,
    since the row trains) and the design example's demo-half.parquet (the same runs at or below
    1.2e5, half the largest size)."""
    import polars as pl

    d = tmp_path_factory.mktemp("fresh")
    for sub in ("sweeps", "datasets", "fits"):
        shutil.copytree(ROOT / sub, d / sub)
    demo = pl.read_parquet(ROOT / "datasets" / "demo_sweep.parquet")
    demo.write_parquet(d / "sweeps" / "demo.parquet")
    demo.filter(pl.col("target_params") <= 1.2e5).write_parquet(d / "demo-half.parquet")
    return d


_RAN: dict[str, object] = {}  # each command runs once; both tests below read its result


def run_once(tree, cmd: str, monkeypatch):  # type: ignore[no-untyped-def]
    """The command's CliRunner result, in the fresh tree (run on first asking)."""
    from archfit.cli import main

    if cmd not in _RAN:
        monkeypatch.chdir(tree)
        argv = shlex.split(cmd)[1:]
        if argv[0] in ("fit", "backtest") and "--bootstrap" not in argv:
            argv += ["--bootstrap", "20"]  # the same command, fewer resamples
        _RAN[cmd] = CliRunner().invoke(main, argv)
    return _RAN[cmd]


@pytest.mark.parametrize("cmd", [c for c in readme_commands() if runnable(c)[0]])
def test_each_readme_command_runs(tree, cmd, monkeypatch):
    r = run_once(tree, cmd, monkeypatch)
    assert r.exit_code == 0, (cmd, r.output[-1500:])


@pytest.mark.slow  # a design on the sweep's fit: about 13 s
def test_the_first_design_help_example_runs_as_printed(tree, monkeypatch):
    """'archfit design --help' opens with an example that runs as
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


# ---------------------------------------------------------------- the table's rows, as written
ROW = re.compile(r"^\| `(archfit [^`]+)` \| (.*) \|$", re.M)
ROW_TIME = re.compile(r"\(about ([\d.]+) (s|min)\b")


def readme_rows() -> list[tuple[str, float]]:
    """The README table's rows, in order: (the command cell with its ``[optional]`` parts
    dropped, the seconds the row says it takes)."""
    rows = []
    for cell, what in ROW.findall((ROOT / "README.md").read_text()):
        m = ROW_TIME.search(what)
        assert m, f"the README row {cell!r} does not say how long it takes: '(about N s)'"
        rows.append((_clean(cell.replace("\\|", "|")),
                     float(m.group(1)) * (60 if m.group(2) == "min" else 1)))
    return rows


def test_every_readme_row_says_how_long_it_takes():
    assert len(readme_rows()) >= 10


@pytest.mark.slow  # the rows train a run, a sweep and a validation: about 7 min
@pytest.mark.timing
@pytest.mark.timeout(1800)  # past the suite's 600 s: 10 min on 2026-12-01's machine; each row
def test_the_readme_rows_run_as_written_in_order(tmp_path):  # keeps its own bound below
    """Every row of the README's table, exactly as written (globs expanded as a shell would),
    in order, in a fresh copy of the shipped files: each exits 0, within twice the time its
    row states plus 10 s (the README's times are a named reference machine's, and it promises
    them on a box half as fast; the 10 s is a cold interpreter's start on a loaded one)."""
    import glob
    import subprocess
    import sys
    import time

    for sub in ("sweeps", "datasets", "fits"):
        shutil.copytree(ROOT / sub, tmp_path / sub)
    report = []
    for cmd, stated in readme_rows():
        t0 = time.monotonic()
        for part in re.split(r"\s*&&\s*", cmd):
            argv = [a2 for a in shlex.split(part)[1:]
                    for a2 in (sorted(glob.glob(a, root_dir=tmp_path)) or [a] if "*" in a
                               else [a])]
            r = subprocess.run([sys.executable, "-m", "archfit", *argv], cwd=tmp_path,
                               capture_output=True, text=True, timeout=900)
            assert r.returncode == 0, (part, r.stdout[-1500:], r.stderr[-1500:])
        took = time.monotonic() - t0
        report.append(f"{took:7.1f} s (README: about {stated:g} s)  {cmd}")
        print(report[-1], flush=True)
        assert took <= 2 * stated + 10, report[-1]


# ---------------------------------------------------------------- shown output against printed
NUM = r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:e[-+]?\d+)?"
REL = 0.01  # the stated precision: numbers within 1%, or half a unit of their last digit


def shown_outputs() -> list[tuple[str, str, list[str]]]:
    """(page, command, the output lines shown after it) for each console block's commands."""
    out = []
    for page in DOCS:
        for block in re.findall(r"```console\n(.*?)```", page.read_text(), re.S):
            cmd, lines = None, []
            for line in block.replace("\\\n", " ").splitlines() + ["$ "]:
                if line.startswith("$ "):
                    if cmd and lines:
                        out.append((page.relative_to(ROOT).as_posix(), cmd, lines))
                    cmd, lines = " ".join(line[2:].split()), []
                elif cmd is not None:
                    lines.append(line)
    return out


def _pattern(line: str) -> tuple[re.Pattern, list[str]]:
    """A shown line as a regex (whitespace runs alike, '...' anything, numbers captured) and
    its numbers."""
    parts, nums = [], []
    for tok in re.split(rf"(\.\.\.|\s+|{NUM})", line.strip()):
        if not tok:
            continue
        if tok == "...":
            parts.append(".*")
        elif tok.isspace():
            parts.append(r"\s+")
        elif re.fullmatch(NUM, tok):
            parts.append(f"({NUM})")
            nums.append(tok)
        else:
            parts.append(re.escape(tok))
    return re.compile("".join(parts)), nums


def _close(shown: str, got: str) -> bool:
    a, b = float(shown.replace(",", "")), float(got.replace(",", ""))
    digits = shown.split("e")[0]
    unit = 10.0 ** -(len(digits.split(".")[1]) if "." in digits else 0)
    if "e" in shown:
        unit *= 10.0 ** int(shown.split("e")[1])
    return abs(a - b) <= max(REL * abs(a), unit / 2 + 1e-12)


def _line_matches(shown: str, got: str) -> bool:
    pat, nums = _pattern(shown)
    m = pat.fullmatch(" ".join(got.split()) if not shown.startswith(" ") else got.strip())
    if m is None:
        m = pat.fullmatch(got.strip())
    return m is not None and all(_close(s, g) for s, g in zip(nums, m.groups()))


def match_output(shown: list[str], printed: list[str]) -> str | None:
    """None when ``printed`` shows every run of ``shown`` lines (split at '...' lines) in
    order, each run on consecutive lines; else the first shown line not found."""
    runs, cur = [], []
    for line in shown:
        if line.strip() == "...":
            runs.append(cur)
            cur = []
        elif line.strip():
            cur.append(line)
    runs.append(cur)
    printed = [p for p in printed if p.strip()]
    at = 0
    for run in (r for r in runs if r):
        for start in range(at, len(printed) - len(run) + 1):
            if all(_line_matches(s, printed[start + k]) for k, s in enumerate(run)):
                at = start + len(run)
                break
        else:
            found = [s for s in run if not any(_line_matches(s, p) for p in printed[at:])]
            return (found or run)[0]
    return None


def _filtered(cmd: str, text: str) -> tuple[str, list[str]]:
    """The command without its pipe, and its output through it (tail -N, grep -A K PAT)."""
    head, _, pipe = cmd.partition(" | ")
    lines = text.splitlines()
    if pipe.startswith("tail -"):
        lines = lines[-int(pipe.split("-")[1]):]
    elif pipe.startswith("grep"):
        argv = shlex.split(pipe)
        after = next((int(a[2:] or argv[i + 1]) for i, a in enumerate(argv)
                      if a.startswith("-A")), 0)
        pat = argv[-1]
        idx = [i for i, ln in enumerate(lines) if pat in ln]
        lines = [lines[j] for i in idx[:1] for j in range(i, min(len(lines), i + after + 1))]
    return head, lines


def comparable() -> list[tuple[str, str, list[str]]]:
    return [(p, c, lines) for p, c, lines in shown_outputs()
            if c.startswith("archfit ") and "&&" not in c and runnable(c.split(" | ")[0])[0]]


def test_the_output_matcher_can_fail():
    """The matcher tells a right output from a wrong one (a wrong number, a missing line)."""
    shown = ["target: 1e+12 parameters", "...", "  params 1,000,296 (+0.03% from ...)"]
    good = ["target: 1e+12 parameters", "x", "  params   1,000,300 (+0.03% from target)"]
    assert match_output(shown, good) is None
    assert match_output(shown, ["target: 2e+12 parameters", "  params 1,000,296 (+0.03% from"])
    assert match_output(shown, good[:2])
    assert match_output(["depth 94.7"], ["depth 95.8"]) and not match_output(["depth 94.7"],
                                                                            ["depth 94.72"])


def test_blocks_with_output_are_compared():
    cmds = [c for _, c, _ in comparable()]
    assert len(cmds) >= 6, cmds
    assert any(c.startswith("archfit design") for c in cmds)


@pytest.mark.parametrize("page,cmd,shown", comparable(), ids=lambda x: x if isinstance(x, str) and x.startswith("archfit") else "")
def test_each_shown_output_is_what_the_command_prints(tree, page, cmd, shown, monkeypatch):
    head, _ = _filtered(cmd, "")
    r = run_once(tree, _clean(head), monkeypatch)
    assert r.exit_code == 0, (page, cmd, r.output[-1500:])
    _, printed = _filtered(cmd, r.output)
    missing = match_output(shown, printed)
    assert missing is None, (f"{page}: '{cmd}' no longer prints {missing!r}; it printed:\n"
                             + "\n".join(printed[:40]))
