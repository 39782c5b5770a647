"""What a user reads says what a thing does today: no --help option text over 300 characters,
and no docstring, --help or user page names a commit hash (history lives in docs/benchmarks/
and docs/develop.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_OPTION_HELP = 300
# a commit: "commit 1a2b3c4", or a bare 7-9 (short) or 40 (full) character hex word holding both
# letters and digits; run ids (12 characters) and SHA-256 digests (64) are not commits
COMMIT = re.compile(r"\bcommits? [0-9a-f]{7,40}\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])"
                    r"(?:[0-9a-f]{7,9}|[0-9a-f]{40})\b")


def commits(text: str) -> list[str]:
    return [m.group() for m in COMMIT.finditer(text)]


def test_the_commit_pattern_finds_commits_and_not_run_ids_or_digests():
    assert commits("fixed in 68c6c23, see commit 1f3708c0a12d") == ["68c6c23",
                                                                  "commit 1f3708c0a12d"]
    assert commits("run a1ebb9b04bc2; sha256 " + "ab12" * 16 + "; colour faebdd; 2026-11-26") == []


def options() -> list[tuple[str, str, str]]:
    from archfit.cli import main

    ctx = click.Context(main)
    out = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, name
                walk(sub, path + [name])
        else:
            out.extend([(" ".join(path), p.name or "", getattr(p, "help", None) or "")
                        for p in cmd.params])
            out.append((" ".join(path), "(command)", cmd.help or ""))

    walk(main, [])
    return out


def test_no_option_help_is_over_300_characters():
    opts = options()
    assert len(opts) > 100  # every command's options were walked
    long = [(c, o, len(h)) for c, o, h in opts if o != "(command)" and len(h) > MAX_OPTION_HELP]
    assert not long, long


def docstrings() -> list[tuple[str, str]]:
    out = []
    for p in sorted((ROOT / "archfit").rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    out.append((f"{p.relative_to(ROOT)}:{getattr(node, 'name', '')}", doc))
    return out


def user_pages() -> list[Path]:
    """The README and the docs site's pages for users (not the benchmark pages and not the
    developers' page, where dated history belongs)."""
    pages = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    return [p for p in pages if "benchmarks" not in p.parts and p.name != "develop.md"]


@pytest.mark.parametrize("where", ["docstrings", "help", "pages"])
def test_no_docstring_help_or_user_page_names_a_commit(where):
    if where == "docstrings":
        found = [(w, c) for w, d in docstrings() for c in commits(d)]
    elif where == "help":
        found = [(f"{c} {o}", x) for c, o, h in options() for x in commits(h)]
    else:
        found = [(p.name, c) for p in user_pages() for c in commits(p.read_text())]
    assert not found, found


# A link between the docs' pages: [text](page.md#anchor), relative, to a page and maybe a heading.
LINK = re.compile(r"\]\(([^)\s:]+?\.md)?(?:#([^)\s]+))?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc extension makes it (its default slugify)."""
    text = re.sub(r"[^\w\s-]", "", heading).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    found = {slug(re.sub(r"[`*_]|\[([^]]*)\]\([^)]*\)", r"\1", m.group(1)))
             for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}
    return found | set(re.findall(r'id="([^"]+)"', text))


def broken_links(pages: list[Path]) -> list[str]:
    broken = []
    for page in pages:
        for target, anchor in LINK.findall(FENCE.sub("", page.read_text())):
            if not target and not anchor:
                continue
            dest = (page.parent / target).resolve() if target else page
            if not dest.is_file():
                broken.append(f"{page.name}: {target} does not exist")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target}#{anchor} names no heading there")
    return broken


def test_every_link_between_the_docs_pages_reaches_its_page_and_heading():
    # mkdocs build --strict says it of docs/ in CI, after the slow suite; this says it in two
    # seconds, and of the README and the datasets' and benchmarks' pages too
    pages = [ROOT / "README.md"] + sorted(p for d in ("docs", "datasets", "benchmarks")
                                          for p in (ROOT / d).rglob("*.md"))
    broken = broken_links(pages)
    assert not broken, broken


def test_a_link_to_a_missing_heading_or_page_is_found(tmp_path):
    (tmp_path / "a.md").write_text("# The design, judged\n\n## Leave-one-sweep-out on `public` sweeps\n")
    (tmp_path / "b.md").write_text(
        "[ok](a.md#leave-one-sweep-out-on-public-sweeps) [ok](a.md#the-design-judged)\n"
        "[stale](a.md#benchmarks-the-design) [gone](c.md)\n```\n[in code](z.md)\n```\n")
    assert broken_links([tmp_path / "b.md"]) == [
        "b.md: a.md#benchmarks-the-design names no heading there", "b.md: c.md does not exist"]


@pytest.mark.parametrize("argv", [["recommend", "--params", "7e9"],
                                  ["recommend", "--params", "1e12"],
                                  ["recommend", "--compute", "1e24"],
                                  ["recommend", "--params", "7e9", "--tokens", "1e30"],
                                  ["recommend", "--params", "1e12", "--active-params", "3.2e10"],
                                  ["shape", "--from",
                                   str(ROOT / "datasets/moe-configs/deepseek-v3/config.json")],
                                  ["sweep", "plan", str(ROOT / "sweeps/moe-granularity-cpu.toml")],
                                  ["sweep", "plan", str(ROOT / "sweeps/levine-small.toml"),
                                   "--gpu", "h100"],
                                  ["recommend", "--compute", "1e23", "--compare"],
                                  ["recommend", "--params", "7e9", "--compare"],
                                  ["compare"],
                                  ["recommend", "--params", "7e9", "--objective", "time",
                                   "--gpu-hours", "1e5", "--usd-per-gpu-hour", "2.5"],
                                  ["laws"]])
def test_every_line_a_person_reads_fits_100_columns(cli, argv):
    """recommend opens with its answer in one line, and no line of recommend, shape, sweep plan,
    compare or laws text is wider than 100 columns (the longer ones wrapped, tables made to fit)."""
    r = cli(*argv)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    if argv[0] == "recommend" and not {"--active-params", "--compare", "--objective"} & set(argv):
        first = lines[0]
        assert first.startswith("answer: ") and " heads; depths " in first
        assert first.endswith(("; weak", "; informative", "; uninformative"))


def test_wrapping_keeps_a_path_whole():
    """A word longer than the width (a path) stays on one line, whole: a reader copies it."""
    from archfit.text import wrap

    path = "/tmp/" + "x" * 120 + "/figure.png"
    out = wrap(f"  figure: {path}")
    assert path in out.splitlines()[-1] and out.splitlines()[0] == "  figure:"
