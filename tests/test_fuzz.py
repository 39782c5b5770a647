"""A catalogue of bad inputs across every verb: each exits 2 with one line on stderr, no
traceback, and leaves every input file as it was. Plus hypothesis fuzzing of spec TOMLs and fit
tables: the API answers with a result or a typed error, never anything else."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archfit.cli import main
from archfit.errors import ArchfitError, SpecError

ROOT = Path(__file__).resolve().parents[1]
SMOKE = (ROOT / "sweeps" / "smoke.toml").read_text()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A folder of inputs, good and bad, that the catalogue points at."""
    d = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(0)
    N, D = 10 ** rng.uniform(7, 10, 60), 10 ** rng.uniform(8, 11, 60)
    good = pl.DataFrame({"params": N, "tokens": D,
                         "loss": 1.7 + 400 / N ** 0.34 + 800 / D ** 0.3})
    good.write_csv(d / "good.csv")
    pl.concat([good, good]).write_csv(d / "dup.csv")
    good.rename({"params": "loss", "loss": "params"}).write_csv(d / "swapped.csv")
    good.with_columns(pl.Series("params", [1e7, 1e8] * 30)).write_csv(d / "two_sizes.csv")
    good.with_columns(pl.lit("x").alias("loss")).write_csv(d / "strings.csv")
    (d / "empty.csv").write_text("")
    (d / "header.csv").write_text("params,tokens,loss\n")
    (d / "junk.parquet").write_bytes(os.urandom(300))
    (d / "notes.txt").write_text("hello")
    (d / "junk.json").write_text("{nope")
    (d / "other.json").write_text(json.dumps({"law": "levine", "params": {"a": 1}}))
    (d / "good.toml").write_text(SMOKE)
    (d / "bad.toml").write_text("name = [unclosed")
    (d / "empty.toml").write_text("")
    (d / "junk.toml").write_bytes(b"\xff\xfe\x00binary")
    (d / "steps0.toml").write_text(re.sub(r"(?m)^(steps|tokens) = .*$", "steps = 0", SMOKE))
    (d / "unknown.toml").write_text(SMOKE + '\ncolour = "blue"\n')
    (d / "folder").mkdir()
    from archfit.laws.fitting import fit

    fit(good, law="chinchilla-varpro", bootstrap=0).to_json(d / "chin.json")
    lev = pl.DataFrame([dict(params=N, n_layer=float(L), loss=3 + 0.05 * math.log(L / 3) ** 2
                             + 0.01 * ((i * 7) % 5 - 2), target_params=N)
                        for N in (2e5, 4e5, 8e5) for i, L in enumerate((1, 2, 3, 4, 6))])
    lev.write_csv(d / "lev.csv")
    fit(lev, law="levine", bootstrap=100).to_json(d / "thin.json")
    return d


def catalogue(d: Path) -> list[tuple[list[str], str]]:
    shp = ["--layers", "2", "--width", "64", "--heads", "2"]
    tr = ["train", *shp, "--ctx", "32", "--batch-size", "2"]
    csv, toml = str(d / "good.csv"), str(d / "good.toml")
    return [
        (["shape", "--layers", "0", "--width", "64", "--heads", "2"], "greater than zero"),
        (["shape", "--layers", "2", "--width", "64", "--heads", "3"], "not divisible"),
        (["shape", "--layers", "2", "--width", "64"], "Missing option"),
        (["shape", "--layers", "x", "--width", "64", "--heads", "2"], "cannot read"),
        (["shape", *shp, "--ff-ratio", "2", "--d-ff", "100"], "not both"),
        (["shape", "--layers", "2", "--width", "64", "--heads", "4", "--kv-heads", "3"],
         "not divisible by n_kv_head"),
        (["shape", "--layers", "2.5", "--width", "64", "--heads", "2"], "whole number"),
        (["shape", *shp, "--mlp", "foo"], "Invalid value"),
        (["shape", "--layers", "2", "--width", "66", "--heads", "2", "--rope"], "even head_dim"),
        (["shape", "--layers", "1e400", "--width", "64", "--heads", "2"], "not finite"),
        (["grid", "--params", "50M"], "--depths"),
        (["grid", "--params", "-5", "--depths", "2"], "greater than zero"),
        (["grid", "--params", "50M", "--depths", "2,x"], "cannot read"),
        (["grid", "--params", "50M", "--aspect-ratios", "32", "--depths", "2"], "replaces"),
        (["grid", "--params", "50M", "--depths", "2", "--head-dim", "64", "--n-head", "4"],
         "not both"),
        (["grid", "--params", "50M", "--depths", "0"], "greater than zero"),
        ([*tr], "exactly one budget"),
        ([*tr, "--steps", "2", "--tokens", "1e5"], "exactly one budget"),
        ([*tr, "--steps", "0"], "greater than zero"),
        ([*tr, "--steps", "2", "--device", "cuda"], "no CUDA device"),
        ([*tr, "--steps", "2", "--device", "bogus"], "not a torch device"),
        ([*tr, "--steps", "2", "--data", str(d / "nope.bin")], "no such file"),
        ([*tr, "--steps", "2", "--run-dir", csv], "is a file"),
        ([*tr, "--steps", "2", "--lr", "-1"], "greater than zero"),
        ([*tr, "--steps", "2", "--ctx", "10000000"], "fewer than one window"),
        (["sweep", "plan", str(d / "folder")], "is a directory"),
        (["sweep", "plan", str(d / "nope.toml")], "no such sweep spec"),
        (["sweep", "plan", str(d / "bad.toml")], "not valid TOML"),
        (["sweep", "plan", str(d / "steps0.toml")], "greater than zero"),
        (["sweep", "plan", str(d / "unknown.toml")], "unknown key"),
        (["sweep", "plan", toml, "--max-runs", "2"], "more than --max-runs"),
        (["sweep", "plan", str(d / "empty.toml")], "grid: give params"),
        (["sweep", "plan", str(d / "junk.toml")], "junk.toml"),
        (["sweep", "run", str(d / "bad.toml")], "not valid TOML"),
        (["sweep", "run", toml, "--out", csv], "is a file"),
        (["sweep", "run", toml, "--executor", "k8s"], "Invalid value"),
        (["sweep", "status", str(d / "nope.toml")], "no such sweep spec"),
        (["sweep", "collect", toml, "-o", toml], "is also an input"),
        (["sweep", "collect", toml, "--out", str(d / "folder"), "-o", csv],
         "not an archfit run table"),
        (["sweep", "collect", toml, "-o", str(d / "folder")], "is a directory"),
        (["fit", str(d / "nope.csv")], "no such file"),
        (["fit", str(d / "empty.csv")], "empty.csv"),
        (["fit", str(d / "header.csv")], "no rows"),
        (["fit", str(d / "junk.parquet")], "cannot read as parquet"),
        (["fit", csv, "--law", "palm"], "unknown law"),
        (["fit", csv, "--map", "params"], "archfit_column=source_column"),
        (["fit", csv, "--map", "size=params"], "unknown archfit column"),
        (["fit", csv, "--map", "params=Nope"], "no column 'Nope'"),
        (["fit", csv, "--law", "chinchilla", "--bootstrap", "-1"], "bootstrap must be >= 0"),
        (["fit", str(d / "dup.csv"), "--law", "chinchilla"], "exact duplicates"),
        (["fit", str(d / "swapped.csv"), "--law", "chinchilla"], "not a parameter count"),
        (["fit", str(d / "two_sizes.csv"), "--law", "chinchilla"], "3 or more different sizes"),
        (["fit", csv, "--law", "kaplan-n", "--out", csv], "is also an input"),
        (["fit", csv, "--law", "kaplan-n", "--out", str(d / "folder")], "is a directory"),
        (["fit", csv, "--law", "kaplan-n", "--out", str(d / "notes.txt")],
         "not an archfit fit artifact"),
        (["fit", str(d / "lev.csv"), "--law", "levine", "--fix", "q=1"], "not a parameter"),
        (["fit", csv, "--law", "kaplan-n", "--prior", "levine2020"], "takes no --fix/--prior"),
        (["fit", str(d / "notes.txt")], "unknown file type"),
        (["fit", str(d / "strings.csv"), "--law", "kaplan-n"], "not numeric"),
        (["recommend", "--params", "1e9", "--fit", str(d / "nope.json")], "no such fit file"),
        (["recommend", "--params", "1e9", "--fit", str(d / "junk.json")], "not JSON"),
        (["recommend", "--params", "1e9", "--fit", str(d / "chin.json")], "answers --compute"),
        (["recommend", "--params", "1e9", "--compute", "1e20"], "--params"),
        (["recommend", "--params", "1e9", "--head-dim", "96"], "does not divide"),
        (["recommend", "--params", "1e9", "--ff-ratio", "auto"], "ff-ratio fit"),
        (["recommend", "--params", "1e4"], "no shape near"),
        (["recommend", "--params", "1e9", "--fit", str(d / "other.json")], "needs params b"),
        (["recommend", "--params", "1e9", "--fit", str(d / "thin.json"), "--strict"],
         "uninformative"),
        (["recommend", "--params", "1e9", "--tp", "0"], "greater than zero"),
        (["plot", str(d / "nope.json")], "no such fit file"),
        (["plot", str(d / "thin.json"), "-o", csv], "is a file"),
        (["plot", str(d / "chin.json"), "--target", "1e9", "-o", str(d / "folder")],
         "needs a shape-law fit"),
        (["plot", str(d / "thin.json"), str(d / "lev.csv"), "--map", "loss=nope", "-o",
          str(d / "folder")], "no column 'nope'"),
        (["plot", str(d / "thin.json"), "--reference", "epoch2024", "-o", str(d / "folder")],
         "has no optimal depth"),
        (["plot", str(d / "thin.json"), "--format", "gif"], "Invalid value"),
        (["laws", "--bogus"], "No such option"),
        (["demo", "--spec", str(d / "nope.toml")], "no such sweep spec"),
        (["demo", "--spec", toml, "--out", csv], "is a file"),
        (["shape", "--from", str(d / "nope.json")], "no such file"),
        (["shape", "--from", csv], "not valid JSON"),
        (["shape", *shp, "--emit", "hf-llama", "--mlp", "gelu"], "cannot express"),
        (["shape", *shp, "--emit", "nanogpt", "--kv-heads", "1"], "cannot express"),
        (["recommend", "--params", "1e9", "--emit", "hf-gpt2", "-o", csv], "is a file"),
        (["recommend", "--params", "1e9", "--emit", "hf-gpt2", "--json"], "not both"),
        (["recommend", "--params", "1e9", "-o", str(d / "x")], "go with --emit"),
        (["compare", "--fit", "epoch2024"], "no optimal depth"),
        (["compare", "--family", "Nope"], "unknown family"),
        (["plot", "--known-models", str(d / "chin.json"), "-o", str(d / "folder")],
         "no optimal depth"),
        (["data", "prepare", str(d / "nope.txt"), "-o", str(d / "dp"), "--tokenizer", "bytes"],
         "no such file"),
        (["data", "prepare", csv, "-o", str(d / "dp"), "--tokenizer", str(d / "nope.json")],
         "no such file"),
        (["data", "prepare", csv, "-o", str(d / "dp"), "--tokenizer", csv],
         "not a tiktoken BPE file"),
        (["data", "prepare", csv, "-o", str(d / "dp"), "--tokenizer", "bytes",
          "--val-fraction", "2"], "between 0 and 1"),
        ([*tr, "--steps", "1", "--nproc", "2", "--batch-size", "3"], "not divisible"),
        (["sweep", "plan", toml, "--gpu", "tpu9"], "unknown accelerator"),
        (["sweep", "plan", toml, "--gpu-memory", "lots"], "give a size"),
    ]


def tree(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def test_the_catalogue_is_large(inputs):
    cases = catalogue(inputs)
    assert len(cases) >= 60
    verbs = {c[0][0] if c[0][0] != "sweep" else "sweep " + c[0][1] for c in cases}
    assert verbs >= {"shape", "grid", "train", "sweep plan", "sweep run", "sweep status",
                     "sweep collect", "fit", "recommend", "plot", "laws", "demo", "compare",
                     "data"}


@pytest.mark.parametrize("i", range(93))
def test_bad_input(inputs, i):
    cases = catalogue(inputs)
    if i >= len(cases):
        pytest.skip("catalogue shorter than the parametrization")
    args, needle = cases[i]
    before = tree(inputs)
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, (args, r.output)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:"), (args, r.stderr)
    assert needle in lines[0], (args, lines[0])
    assert "Traceback" not in r.output
    assert tree(inputs) == before, args  # nothing changed, nothing half-written


# ---------------------------------------------------------------------------- hypothesis
scalars = st.one_of(st.integers(-5, 10**7), st.floats(allow_nan=False, allow_infinity=False,
                                                      width=32),
                    st.text("abcM1e.-", max_size=6), st.booleans())


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return repr(v)


@st.composite
def specs(draw):
    from archfit.sweep.spec import SPEC

    lines, tables = [], {}
    for key in draw(st.lists(st.sampled_from(sorted(SPEC) + ["junk"]), unique=True)):
        k = SPEC.get(key)
        if k is not None and k.kind == "table" and k.table:
            inner = draw(st.lists(st.sampled_from(sorted(k.table) + ["bogus"]), unique=True,
                                  max_size=4))
            tables[key] = {n: draw(st.one_of(scalars, st.lists(scalars, max_size=3)))
                           for n in inner if not (k.table.get(n) and k.table[n].kind == "table")}
        else:
            lines.append(f"{key} = {toml_value(draw(st.one_of(scalars, st.lists(scalars, max_size=3))))}")
    for name, kv in tables.items():
        lines.append(f"[{name}]")
        lines += [f"{n} = {toml_value(v)}" for n, v in kv.items()]
    return "\n".join(lines) + "\n"


@given(specs())
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_spec_loads_or_says_what_is_wrong(tmp_path_factory, text):
    from archfit.sweep import load_spec

    p = tmp_path_factory.mktemp("spec") / "s.toml"
    p.write_text(text)
    try:
        spec = load_spec(str(p), max_runs=2000)
    except SpecError as e:
        assert str(e).strip() and "\n" not in str(e)
    else:
        assert all(r.run_id for r in spec.runs)


values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10**12))


@given(cols=st.dictionaries(st.sampled_from(["params", "tokens", "loss", "n_layer", "d_model",
                                             "d_ff", "target_params", "junk"]),
                            st.lists(values, min_size=12, max_size=12), min_size=1),
       law=st.sampled_from(["kaplan-n", "chinchilla-varpro", "levine", "depth-width",
                            "ff-ratio", "depth-joint"]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_table_fits_or_raises_a_typed_error(cols, law):
    from archfit.laws.fitting import fit

    try:
        f = fit(pl.DataFrame({k: [float(x) for x in v] for k, v in cols.items()}), law=law,
                bootstrap=0, heldout=False)
    except ArchfitError as e:
        assert str(e).strip()
    else:
        assert all(math.isfinite(v) for v in f.params.values())
