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
PROGRESS = re.compile(r"prepare: \d+% of [\d.,]+ MiB$")


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
    from archfit.laws.inference.fitting import fit

    fit(good, law="chinchilla-varpro", bootstrap=0).to_json(d / "chin.json")
    lev = pl.DataFrame([dict(params=N, n_layer=float(L), loss=3 + 0.05 * math.log(L / 3) ** 2
                             + 0.01 * ((i * 7) % 5 - 2), target_params=N)
                        for N in (2e5, 4e5, 8e5) for i, L in enumerate((1, 2, 3, 4, 6))])
    lev.write_csv(d / "lev.csv")
    fit(lev, law="levine", bootstrap=100).to_json(d / "thin.json")
    _file_safety_inputs(d)
    _numeric_inputs(d, good)
    zero = pl.Series("tokens", [0.0] * 3 + good["tokens"].to_list()[3:])
    good.with_columns(zero).write_csv(d / "tok0.csv")  # zero tokens in 3 rows
    good.with_columns(pl.lit(0.0).alias("tokens")).write_csv(d / "tokall0.csv")
    (d / "negpool.csv").write_text("params,tokens\n-1e9,2e10\n2e9,2e10\n")
    _damaged_fit_inputs(d, good)
    _unusable_answer_inputs(d)
    return d


def _unusable_answer_inputs(d: Path) -> None:
    """Inputs for the unusable answers: learning-rate tables with no usable best
    rate, repeated data with nothing to measure, specs with values no run could use."""
    rows = [dict(params=N, tokens=20 * N, lr=lr, loss=3.0 - 0.1 * math.log(lr)
                 + 1e-9 * math.log(lr) ** 2)
            for N in (1e6, 4e6, 1.6e7) for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)]
    pl.DataFrame(rows).write_csv(d / "lr_falls.csv")
    rng = np.random.default_rng(3)
    rows = [dict(params=N, tokens=20 * N, lr=lr, seed=s, loss=3.0 + 0.01 * rng.normal())
            for N in (1e6, 4e6, 1.6e7, 6.4e7) for lr in (1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
            for s in range(2)]
    pl.DataFrame(rows).write_csv(d / "lr_flat.csv")
    runs = pl.read_csv(ROOT / "datasets" / "muennighoff2023" / "c4_runs.csv")
    runs.with_columns(pl.lit(1.0).alias("unique_tokens")).write_csv(d / "one_unique.csv")
    (d / "lr_inf.toml").write_text(re.sub(r"(?m)^lrs = .*$", "lrs = [inf]",
                                          (ROOT / "sweeps" / "demo.toml").read_text()))


def _damaged_fit_inputs(d: Path, good: pl.DataFrame) -> None:
    """Inputs for the damaged inputs: a fit whose constants are strings, a replay
    table with duplicate rows, a trade whose plan names a layer the runs lack, a file where a
    sweep's folder is due."""
    f = json.loads((d / "chin.json").read_text())
    (d / "strconst.json").write_text(json.dumps({**f, "params": {k: str(v) for k, v in
                                                                  f["params"].items()}}))
    big = good.sort("params")
    pl.concat([big.head(50), big.head(50)]).write_csv(d / "dupreplay.csv")
    big.tail(10).write_csv(d / "replaytarget.csv")
    rows = [{"run_id": f"{v}-{s}", "variant": v, "plan": v, "seed": s, "lr": 4e-3,
             "target_params": 2e5, "status": "ok", "final_val_loss": 3.0 + 0.01 * s,
             "n_layer": 3, "d_model": 64, "n_head": 4, "steps": 10, "train_s": 1.0}
            for v in ("uniform", "no-mlp:9") for s in range(3)]
    pl.DataFrame(rows).write_parquet(d / "plan9.parquet")


def _numeric_inputs(d: Path, good: pl.DataFrame) -> None:
    """Inputs for the numeric extremes: an unknown fit schema, a status column that
    is empty on every row, a fit whose data term is folded away (one token count)."""
    from archfit.laws.inference.fitting import fit
    from archfit.laws.planted import correlated_sweep

    f = json.loads((d / "chin.json").read_text())
    (d / "schema99.json").write_text(json.dumps({**f, "schema": "archfit.fit/99"}))
    good.with_columns(pl.lit(None, dtype=pl.Utf8).alias("status")).write_parquet(
        d / "nullstatus.parquet")
    (d / "userplots").mkdir()
    (d / "userplots" / "levine2020-optimal_depth_vs_size.png").write_text("my own figure")
    (d / "foreign_run").mkdir()
    (d / "foreign_run" / "notes.txt").write_text("not a run")
    one = correlated_sweep("depth-joint", seed=0, n_shapes=16, n_tokens=1)
    fit(one, law="depth-joint", bootstrap=0, heldout=False).to_json(d / "folded.json")


def _file_safety_inputs(d: Path) -> None:
    """Inputs for the file safety cases: user folders, archfit's own outputs that a
    command also reads, damaged progress files, mistyped configs, binary and mistyped corpora."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    from archfit.train.prepare import prepare

    text = "".join(f"line {i}: depth and width of a transformer\n" for i in range(4000))
    (d / "corpus.txt").write_text(text)
    (d / "one.txt").write_text("a single short document")
    (d / "binary.txt").write_bytes(bytes(range(256)) * 400)
    (d / "latin.txt").write_bytes(("caf\xe9 " * 3000).encode("latin-1"))
    recs = [{"text": f"document {i} " * 20} for i in range(50)]
    for name, bad in (("null", None), ("number", 12345), ("list", ["a", "b"])):
        rows = recs[:7] + [{"text": bad}] + recs[7:]
        (d / f"{name}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    user = d / "userdata"  # a user's own nanoGPT folder: no archfit manifest
    user.mkdir()
    (user / "train.bin").write_bytes(b"\x01\x00" * 64)
    (user / "val.bin").write_bytes(b"\x02\x00" * 64)
    prepare([str(d / "corpus.txt")], str(d / "dp"), "bytes", val_fraction=0.1)
    for name, state in (("badstate", "{nope"), ("liststate", "[1, 2]")):
        (d / name).mkdir()
        (d / name / "prepare-state.json").write_text(state)
    tok = Tokenizer(models.WordLevel({"line": 0, "depth": 1, "[UNK]": 70000}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(d / "sparse-tokenizer.json"))  # 3 entries, but an id past uint16
    (d / "hf").mkdir()  # an HF config that shape --from reads
    (d / "hf" / "config.json").write_text(json.dumps(
        {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
         "num_attention_heads": 2, "intermediate_size": 256, "vocab_size": 100,
         "rms_norm_eps": 1e-5}))
    base = json.loads((d / "hf" / "config.json").read_text())
    for name, change in (("mt_list", {"model_type": ["llama"]}),
                         ("act_list", {"hidden_act": ["silu"]}),
                         ("hd_str", {"head_dim": "32"})):
        (d / f"{name}.json").write_text(json.dumps({**base, **change}))
    for name, value in (("abs", "/tmp/archfit-escape"), ("up", "../../x"), ("sp", "a b")):
        (d / f"name_{name}.toml").write_text(
            re.sub(r"(?m)^name = .*$", f"name = {json.dumps(value)}", SMOKE))
    (d / "nodata.toml").write_text(f"data = {json.dumps(str(d / 'no-such-data'))}\n" + SMOKE)
    (d / "tables").mkdir()


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
        (["fit", csv, "--law", "chinchilla", "--bootstrap", "-1"], "bootstrap must be 'auto' or between 0 and"),
        (["fit", str(d / "dup.csv"), "--law", "chinchilla"], "exact duplicates"),
        (["fit", str(d / "swapped.csv"), "--law", "chinchilla"], "not a parameter count"),
        (["fit", str(d / "two_sizes.csv"), "--law", "chinchilla"], "3 or more different sizes"),
        (["fit", csv, "--law", "kaplan-n", "--out", csv], "is also an input"),
        (["fit", csv, "--law", "kaplan-n", "--out", str(d / "folder")], "is a directory"),
        (["fit", csv, "--law", "kaplan-n", "--out", str(d / "notes.txt")],
         "not an archfit fit artifact"),
        (["fit", str(d / "lev.csv"), "--law", "levine", "--fix", "q=1"], "not a parameter"),
        (["fit", csv, "--law", "kaplan-n", "--prior", "levine2020"], "shares no free parameter"),
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
         "answers another question than"),
        (["plot", str(d / "thin.json"), "--format", "gif"], "Invalid value"),
        (["laws", "--bogus"], "No such option"),
        (["demo", "--spec", str(d / "nope.toml")], "no such sweep spec"),
        (["demo", "--spec", toml, "--out", csv], "is a file"),
        (["validate", "epoch2024", "--params", "1e6", "--spec", toml], "needs a law that "
                                                                       "recommends a shape"),
        (["validate", "levine2020", "--params", "1e6", "--spec", str(d / "nope.toml")],
         "no such sweep spec"),
        (["validate", "levine2020", "--params", "-3", "--spec", toml], "greater than zero"),
        (["validate", "levine2020", "--params", "1e6", "--spec", toml, "--out", csv],
         "is a file"),
        (["shape", "--from", str(d / "nope.json")], "no such file"),
        (["shape", "--from", csv], "format not supported"),
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
        *file_safety(d),
    ]


def file_safety(d: Path) -> list[tuple[list[str], str]]:
    """File safety: user files never replaced, paths that cannot escape,
    inputs checked for what they are, messages that name the real problem."""
    toml = str(d / "good.toml")
    prep = ["data", "prepare", "--tokenizer", "bytes"]
    return [
        # outputs: never a user's folder without --force, never an input even with --force
        ([*prep, str(d / "corpus.txt"), "-o", str(d / "userdata")], "not made by archfit"),
        ([*prep, str(d / "dp" / "train.bin"), "-o", str(d / "dp"), "--force"],
         "is also an input"),
        ([*prep, str(d / "corpus.txt"), "-o", str(d / "dp2"), "--tokenizer",
          str(d / "dp2" / "x")], "no such file"),
        (["shape", "--from", str(d / "hf"), "--emit", "hf-llama", "-o", str(d / "hf"),
          "--force"], "is also an input"),
        (["shape", "--from", str(d / "hf" / "config.json"), "--emit", "hf-llama", "-o",
          str(d / "hf")], "is also an input"),
        # spec names are plain names; plan and run check the data before making anything
        (["sweep", "plan", str(d / "name_abs.toml")], "not a plain name"),
        (["sweep", "run", str(d / "name_up.toml")], "not a plain name"),
        (["sweep", "collect", str(d / "name_sp.toml")], "not a plain name"),
        (["sweep", "run", str(d / "nodata.toml"), "--out", str(d / "swout")],
         "no such file or folder"),
        # corpora: what they are, or refused naming the field and the line
        ([*prep, str(d / "binary.txt"), "-o", str(d / "o1")], "looks like binary data"),
        ([*prep, str(d / "latin.txt"), "-o", str(d / "o1")], "not UTF-8 text"),
        ([*prep, str(d / "null.jsonl"), "-o", str(d / "o2")], "line 8: field 'text' is null"),
        ([*prep, str(d / "number.jsonl"), "-o", str(d / "o2")], "is a number, not a string"),
        ([*prep, str(d / "list.jsonl"), "-o", str(d / "o2")], "is a list, not a string"),
        (["data", "prepare", str(d / "corpus.txt"), "-o", str(d / "o3"), "--tokenizer",
          str(d / "sparse-tokenizer.json")], "ids go up to 70,000"),
        ([*prep, str(d / "corpus.txt"), "-o", str(d / "badstate")],
         "not a readable progress file"),
        ([*prep, str(d / "corpus.txt"), "-o", str(d / "liststate")], "not a progress file"),
        ([*prep, str(d / "one.txt"), "-o", str(d / "o4")], "whatever --val-fraction"),
        ([*prep, str(d / "corpus.txt"), "-o", str(d / "o4"), "--val-fraction", "0.9"],
         "sends every document to validation"),
        # configs with mistyped fields
        (["shape", "--from", str(d / "mt_list.json")], "model_type must be a string"),
        (["shape", "--from", str(d / "act_list.json")], "hidden_act must be a string"),
        (["shape", "--from", str(d / "hd_str.json")], "head_dim must be a whole number"),
        # options that were silently accepted
        (["sweep", "plan", toml, "--gpu", ""], "--gpu is empty"),
        (["fit", str(d / "lev.csv"), "--law", "levine", "--fix", "a=1", "--fix", "a=2"],
         "given twice"),
        (["recommend", "--params", "1e9", "--fit", str(d / "thin.json"), "--compare",
          "--strict"], "uninformative"),
        (["recommend", "--params", "7e9", "--tp", "3", "--kv-heads", "2"],
         "cannot be split over tensor parallelism 3"),
        (["plot", str(d / "chin.json"), str(d / "swapped.csv"), "-o", str(d / "folder")],
         "not a parameter count"),
        (["fit", str(d / "tables")], "is a directory"),
        (["fit", str(d / "table*")], "is a directory"),
        # a run that cannot fit this machine's memory is refused before it starts
        (["train", "--layers", "4", "--width", "512", "--heads", "8", "--ctx", "100000",
          "--batch-size", "16", "--steps", "1"], "needs about"),
        *numeric_extremes(d),
        *design_surfaces(d),
        *damaged_inputs(d),
        *unusable_answers(d),
    ]


def numeric_extremes(d: Path) -> list[tuple[list[str], str]]:
    csv, toml = str(d / "good.csv"), str(d / "good.toml")
    return [
        # one number must not take the machine down, no unexpected
        # error at a numeric extreme, unknown and degenerate cases named
        (["recommend", "--params", "1e30", "--fit", str(d / "thin.json")], "beyond 1e+15"),
        (["recommend", "--params", "1e30"], "beyond 1e+15"),
        (["validate", str(d / "thin.json"), "--params", "1e30", "--spec", toml, "--plan-only",
          "-o", str(d / "v.toml")], "beyond 1e+15"),
        (["throughput", csv, "--bootstrap", "0"], "--bootstrap"),
        (["throughput", csv, "--bootstrap", "-5"], "--bootstrap"),
        (["shape", "--layers", "2", "--width", "1e300", "--heads", "2"], "beyond 1e+09"),
        (["predict", str(d / "schema99.json"), csv], "fit schema 'archfit.fit/99'"),
        (["recommend", "--params", "1e9", "--fit", str(d / "schema99.json")], "fit schema"),
        (["recommend", "--params", "7.2e5k"], "mixes an exponent and a suffix"),
        (["recommend", "--params", "1e9", "--fit", str(d / "folded.json"), "--objective",
          "time", "--tokens", "1e9"], "folded its data term away"),
        (["recommend", "--params", "1e9", "--objective", "time", "--gpu-hours", "1e300"],
         "--gpu-hours 1e+300 is outside"),
        (["recommend", "--params", "1e9", "--objective", "cost", "--gpu-hours", "10"],
         "needs a price"),
        (["fit", str(d / "nullstatus.parquet"), "--law", "chinchilla"],
         "status column is empty on all 60 rows"),
        (["plot", "levine2020", "-o", str(d / "userplots")], "was not made by archfit"),
        (["train", "--layers", "1", "--width", "16", "--heads", "1", "--steps", "2",
          "--run-dir", str(d / "foreign_run")], "is not an archfit run folder"),
    ]


def design_surfaces(d: Path) -> list[tuple[list[str], str]]:
    """The design's surfaces: each class once."""
    csv = str(d / "good.csv")
    grid = ["design", "--law", "chinchilla", "--sizes", "1e8,2e8,4e8", "--tokens", "2e9,4e9",
            "--compute", "1e21"]
    return [
        (grid + ["--budget-frac", "1.5"], "--budget-frac must be in (0, 1]"),
        (grid + ["--budget-frac", "0.5", "--seed", "-3"], "-3 is not in the range x>=0"),
        (["design", "--replay", csv, "--target", csv, "--law", "chinchilla", "--budget-frac",
          "0.1"], "every row of the replay table is a target row"),
        # a negative seed, in every verb that takes one (numpy's generators take none)
        (["fit", csv, "--law", "chinchilla", "--seed", "-1"], "-1 is not in the range x>=0"),
        (["backtest", csv, "--law", "chinchilla", "--cut", "1e9", "--seed", "-2"],
         "-2 is not in the range x>=0"),
        (["train", "--layers", "1", "--width", "8", "--heads", "1", "--seed", "-1"],
         "-1 is not in the range x>=0"),
        # --fix outside a parameter's domain, for every law with one
        (["fit", csv, "--law", "chinchilla", "--fix", "alpha=-1"], "alpha must be > 0"),
        (["fit", csv, "--law", "chinchilla", "--fix", "beta=0"], "beta must be > 0"),
        (["fit", csv, "--law", "chinchilla-varpro", "--fix", "beta=0"], "beta must be > 0"),
        (["fit", str(d / "lev.csv"), "--law", "depth-joint", "--fix", "kappa=-1"],
         "kappa must be > 0 in depth-joint"),
        (["fit", str(d / "lev.csv"), "--law", "depth-joint", "--fix", "q=3"],
         "q must be <= 2 in depth-joint"),
        (["fit", csv, "--law", "kaplan-nd", "--fix", "alpha_D=0"], "alpha_D must be > 0"),
        (["fit", str(d / "lev.csv"), "--law", "levine", "--fix", "b=-0.1"], "b must be > 0"),
        # a per-layer plan too deep to list
        (["shape", "--layers", "1e9", "--width", "8", "--heads", "1", "--no-mlp", "0"],
         "a per-layer plan over 1,000,000,000 layers"),
        (["recommend", "--params", "7e9", "--tolerance", "1.5"], "tolerance must be a fraction"),
        # zero tokens: fit refuses them, and so does design --results (no silent first batch)
        (["fit", str(d / "tok0.csv"), "--law", "chinchilla"], "'tokens' has 3 missing"),
        (["fit", str(d / "tokall0.csv"), "--law", "chinchilla"], "'tokens' has 60 missing"),
        (["design", "--law", "chinchilla", "--sizes", "1e10,2e10", "--tokens", "2e11,4e11",
          "--compute", "1e23", "--budget-frac", "0.5", "--results", str(d / "tok0.csv")],
         "--results: column 'tokens' has 3 missing"),
        # messages that point the right way
        (["shape", "--layers", "4", "--width", "64", "--heads", "2", "--no-attn", "midd"],
         "'midd' is not a layer index"),
        (["shape", "--layers", "4", "--width", "64", "--heads", "2", "--gpu", ""],
         "--gpu': an empty name"),
        (["grid", "--params", "1e3", "--depths", "1,2"], "no depth/width fits 1000"),
        (["design", "--law", "chinchilla", "--compute", "1e25", "--pool", str(d / "negpool.csv"),
          "--budget-frac", "0.5"], "the candidate pool's column 'params' has 1 missing"),
        (["design", "--law", "depth-joint", "--fit", "levine2020", "--params", "1e9", "--sizes",
          "1e9", "--depths", "4,8", "--tokens", "1e10", "--budget-frac", "0.5"],
         "levine has no loss model to design with"),
    ]


def unusable_answers(d: Path) -> list[tuple[list[str], str]]:
    """Answers no run could use, and tables with nothing to measure."""
    return [
        (["fit", str(d / "lr_falls.csv"), "--law", "lr-batch"],
         "the best rate lies above the rates tried"),
        (["fit", str(d / "lr_flat.csv"), "--law", "lr-batch"],
         "the loss does not measurably depend on the rate"),
        (["fit", str(d / "one_unique.csv"), "--law", "data-constrained"],
         "every repeated run repeats its data more than 107 times"),
        (["sweep", "plan", str(d / "lr_inf.toml")], "lr must be a positive rate"),
        (["train", "--layers", "1", "--width", "32", "--heads", "2", "--tokens", "2e4", "--lr",
          "1e9"], "lr must be a positive rate at most 1"),
        (["plot", "steplaw2025", "-o", str(d / "figs")], "has nothing archfit can draw"),
    ]


def damaged_inputs(d: Path) -> list[tuple[list[str], str]]:
    """The design's remaining gaps, and a fit read from a damaged file."""
    grid = ["design", "--law", "depth-joint", "--params", "1e10", "--budget-frac", "0.5"]
    return [
        (["recommend", "--params", "7e9", "--fit", str(d / "strconst.json")],
         "params.E is str '"),
        (["design", "--replay", str(d / "dupreplay.csv"), "--target",
          str(d / "replaytarget.csv"), "--law", "chinchilla", "--budget-frac", "0.3"],
         "50 of 100 rows of the replay table are exact duplicates"),
        (["backtest", str(d / "dup.csv"), "--law", "chinchilla", "--cut", "1e9"],
         "pass --dedupe"),
        (["trade", str(d / "plan9.parquet")],
         "variant plan 'no-mlp:9' on 3-layer runs: no_mlp layer 9 is outside the 3 layers"),
        (grid + ["--sizes", "1e300", "--depths", "2,4", "--tokens", "1e10"],
         "no depth of 2, 4 gives a shape within 12% of a size in 1e+300"),
        (grid + ["--sizes", "1e9", "--depths", "100000", "--tokens", "1e10"],
         "no depth of 100000 gives a shape"),
        (grid + ["--sizes", "1e9", "--depths", "2,4", "--tokens", "1e300"],
         "costs more FLOPs (C = 6 N D) than a float holds"),
        (["sweep", "collect", str(d / "good.toml"), "--out", str(d / "notes.txt")],
         "is a file; give the sweep's folder"),
        (["sweep", "status", str(d / "good.toml"), "--out", str(d / "notes.txt")],
         "is a file; give the sweep's folder"),
    ]


def tree(d: Path) -> dict[str, str]:
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


def test_the_catalogue_is_large(inputs):
    cases = catalogue(inputs)
    print(f"\nthe catalogue of bad inputs: {len(cases)} cases (test_bad_input runs each)")
    assert len(cases) >= 60
    verbs = {c[0][0] if c[0][0] != "sweep" else "sweep " + c[0][1] for c in cases}
    assert verbs >= {"shape", "grid", "train", "sweep plan", "sweep run", "sweep status",
                     "sweep collect", "fit", "recommend", "plot", "laws", "demo", "compare",
                     "data", "validate"}


def command(args: list[str]) -> str:
    """The command a case runs (``sweep plan``, ``fit``, ...): what the catalogue is ordered by."""
    return " ".join(args[:2]) if args[0] in ("sweep", "data", "campaign") else args[0]


def ordered(cases: list[tuple[list[str], str]]) -> list[tuple[list[str], str]]:
    """The cases by command (stable: each command's cases keep their order)."""
    return sorted(cases, key=lambda c: command(c[0]))


def case_ids(cases: list[tuple[list[str], str]]) -> list[str]:
    """A readable id per case: its command and what its one line must say (numbered where
    two cases of a command expect the same words)."""
    ids, seen = [], {}
    for args, needle in cases:
        base = f"{command(args)}: {' '.join(needle.split())[:48]}"
        seen[base] = seen.get(base, 0) + 1
        ids.append(base if seen[base] == 1 else f"{base} ({seen[base]})")
    return ids


# the catalogue as collected (its paths under a placeholder folder; each test reads its case
# from the catalogue of the real inputs, in the same order)
CASES = ordered(catalogue(Path("inputs")))


@pytest.mark.parametrize("i", range(len(CASES)), ids=case_ids(CASES))  # one test per case
def test_bad_input(inputs, i):
    args, needle = ordered(catalogue(inputs))[i]
    before = tree(inputs)
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, (args, r.output)
    # progress lines ("prepare: 40% of 1.2 MiB") may come before the error: one error line
    lines = [x for x in r.stderr.strip().splitlines() if not PROGRESS.match(x)]
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
    from archfit.laws.inference.fitting import fit

    try:
        f = fit(pl.DataFrame({k: [float(x) for x in v] for k, v in cols.items()}), law=law,
                bootstrap=0, heldout=False)
    except ArchfitError as e:
        assert str(e).strip()
    else:
        assert all(math.isfinite(v) for v in f.params.values())


# ---------------------------------------------------------------------------- faults
TINY = ["train", "--layers", "1", "--width", "16", "--heads", "2", "--ctx", "16",
        "--batch-size", "2", "--steps", "2", "--eval-every", "1"]


def _plant_payload(path: Path, marker: Path) -> None:
    """A checkpoint whose unpickling runs a command (os.system writes ``marker``): what an
    attacker who can write a run directory would leave there."""
    import pickle

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    path.parent.mkdir(parents=True, exist_ok=True)
    for protocol in (2,):
        path.write_bytes(pickle.dumps({"model": Payload(), "step": 1}, protocol=protocol))


def test_the_payload_is_real(tmp_path):
    """The planted file does run its command when unpickled without weights_only (so the
    tests below would see the marker if archfit ran it)."""
    import pickle

    marker = tmp_path / "ran"
    _plant_payload(tmp_path / "checkpoint.pt", marker)
    pickle.loads((tmp_path / "checkpoint.pt").read_bytes())
    assert marker.exists()


def test_a_planted_checkpoint_never_runs_under_train(tmp_path):
    rd, marker = tmp_path / "rd", tmp_path / "ran"
    _plant_payload(rd / "checkpoint.pt", marker)
    before = (rd / "checkpoint.pt").read_bytes()
    r = CliRunner().invoke(main, [*TINY, "--run-dir", str(rd)])
    assert r.exit_code == 2, r.output
    line = r.stderr.strip()
    assert "\n" not in line and "refusing to load it" in line and "posix.system" in line, line
    assert not marker.exists()
    assert (rd / "checkpoint.pt").read_bytes() == before  # kept for the user to inspect
    # --restart discards it (unread) and trains
    r = CliRunner().invoke(main, [*TINY, "--run-dir", str(rd), "--restart", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["status"] == "ok" and not marker.exists()


@pytest.mark.slow  # seconds of training or a kernel: the fast suite stays under 2 minutes
def test_a_planted_checkpoint_never_runs_under_sweep_run(tmp_path):
    spec, out, marker = tmp_path / "s.toml", tmp_path / "runs", tmp_path / "ran"
    spec.write_text(re.sub(r"(?m)^steps = .*$", "steps = 2", SMOKE))
    from archfit import sweep as sw

    s = sw.load_spec(str(spec))
    dirs = sw.prepare_dirs(s, str(out))
    _plant_payload(Path(dirs[0]) / "checkpoint.pt", marker)
    r = CliRunner().invoke(main, ["sweep", "run", str(spec), "--out", str(out)])
    assert r.exit_code == 3, r.output  # that run failed, the others trained
    assert not marker.exists()
    res = json.loads((Path(dirs[0]) / "result.json").read_text())
    assert res["status"] == "failed" and "refusing to load it" in res["error"]
    assert all(json.loads((Path(d) / "result.json").read_text())["status"] == "ok"
               for d in dirs[1:])


def test_sweep_run_without_slurm_refuses_before_making_anything(tmp_path, monkeypatch):
    """Where sbatch/srun are not on PATH, --executor slurm exits 2 and creates nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    os.symlink(sys_executable(), bin_dir / "python3")
    monkeypatch.setenv("PATH", str(bin_dir))
    out = tmp_path / "runs"
    r = CliRunner().invoke(main, ["sweep", "run", str(ROOT / "sweeps" / "smoke.toml"),
                                  "--executor", "slurm", "--out", str(out)])
    assert r.exit_code == 2, r.output
    assert "sbatch and srun not found" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not out.exists()


def sys_executable() -> str:
    import sys

    return sys.executable


@pytest.mark.parametrize("suffix", ["gz", "bz2", "xz", "zst"])
def test_compressed_corpora_give_the_tokens_of_their_plain_copy(tmp_path, suffix):
    import bz2
    import gzip
    import lzma

    recs = "\n".join(json.dumps({"text": f"record {i}: " + "depth width " * (i % 7 + 1)})
                     for i in range(300)) + "\n"
    plain = tmp_path / "c.jsonl"
    plain.write_text(recs)
    packed = tmp_path / f"c.jsonl.{suffix}"
    if suffix == "zst":
        import zstandard  # an archfit dependency

        packed.write_bytes(zstandard.ZstdCompressor().compress(recs.encode()))
    else:
        opener = {"gz": gzip.open, "bz2": bz2.open, "xz": lzma.open}[suffix]
        with opener(packed, "wt") as f:
            f.write(recs)
    outs = {}
    for name, src in (("plain", plain), ("packed", packed)):
        r = CliRunner().invoke(main, ["data", "prepare", str(src), "-o", str(tmp_path / name),
                                      "--tokenizer", "bytes", "--json"])
        assert r.exit_code == 0, r.output
        outs[name] = json.loads(r.stdout)
    for split in ("train", "val"):
        assert ((tmp_path / "plain" / f"{split}.bin").read_bytes()
                == (tmp_path / "packed" / f"{split}.bin").read_bytes())
    assert outs["packed"]["sources"][0]["compression"] in ("gzip", "bzip2", "xz", "zstd")


def test_a_full_disk_names_the_file(tmp_path):
    """A real ENOSPC (the token file is /dev/full): one line naming the file, exit 2."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink("/dev/full", out / "train.bin.partial")
    (tmp_path / "c.txt").write_text("depth and width\n" * 20000)
    r = CliRunner().invoke(main, ["data", "prepare", str(tmp_path / "c.txt"), "-o", str(out),
                                  "--tokenizer", "bytes", "--force"])
    assert r.exit_code == 2, r.output
    lines = [x for x in r.stderr.strip().splitlines() if not PROGRESS.match(x)]
    assert len(lines) == 1 and "train.bin.partial: no space left" in lines[0], r.stderr


def test_an_archfit_export_is_replaced_without_force_a_user_file_is_not(tmp_path):
    shp = ["shape", "--layers", "2", "--width", "64", "--heads", "2", "--emit", "megatron",
           "-o", str(tmp_path)]
    assert CliRunner().invoke(main, shp).exit_code == 0
    first = (tmp_path / "megatron_args.sh").read_text()
    r = CliRunner().invoke(main, [*shp[:2], "4", *shp[3:]])  # another shape, same file
    assert r.exit_code == 0, r.output
    assert (tmp_path / "megatron_args.sh").read_text() != first
    (tmp_path / "megatron_args.sh").write_text("# my own launcher\n")
    r = CliRunner().invoke(main, shp)
    assert r.exit_code == 2 and "not an archfit megatron config" in r.stderr
    assert (tmp_path / "megatron_args.sh").read_text() == "# my own launcher\n"


def test_plan_warns_and_run_refuses_a_spec_whose_data_is_missing(inputs, tmp_path):
    """A plan may be for a cluster that holds the data: it warns in one line and exits 0. A
    run here is refused before any run directory is made."""
    spec = str(inputs / "nodata.toml")
    r = CliRunner().invoke(main, ["sweep", "plan", spec, "--json"])
    assert r.exit_code == 0, r.output
    assert len(json.loads(r.stdout)) == 6
    assert r.stderr.startswith("warning: data:") and "no such file or folder" in r.stderr
    r = CliRunner().invoke(main, ["sweep", "run", spec, "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and "no such file or folder" in r.stderr
    assert not (tmp_path / "o").exists()


EXTREMES = [
    # every numeric extreme, under 4 GB of address space
    ["recommend", "--params", "1e30"],
    ["plot", "levine2020", "-o", "{d}/userplots"],
    ["train", "--layers", "1", "--width", "16", "--heads", "1", "--steps", "2", "--run-dir",
     "{d}/foreign_run"],
    ["throughput", "{d}/good.csv", "--bootstrap", "0"],
    ["throughput", "{d}/good.csv", "--bootstrap", "-5"],
    ["predict", "{d}/schema99.json", "{d}/good.csv"],
    ["recommend", "--params", "7.2e5k"],
    ["recommend", "--params", "1e9", "--fit", "{d}/folded.json", "--objective", "time",
     "--tokens", "1e9"],
    ["recommend", "--params", "1e9", "--objective", "cost", "--gpu-hours", "10"],
    ["sweep", "plan", "{d}/good.toml", "--gpu", ""],
    ["fit", "{d}/nullstatus.parquet", "--law", "chinchilla"],
    ["fit", "{d}/good.csv", "--law", "chinchilla", "--bootstrap", "1e12"],
    ["validate", "{d}/thin.json", "--params", "1e6", "--spec", "{d}/good.toml", "--seeds",
     "1e9", "--plan-only", "-o", "{d}/v.toml"],
    ["recommend", "--params", "1e30", "--fit", "{d}/thin.json"],
    ["validate", "{d}/thin.json", "--params", "1e30", "--spec", "{d}/good.toml", "--plan-only",
     "-o", "{d}/v.toml"],
    ["shape", "--layers", "2", "--width", "1e300", "--heads", "2"],
    ["recommend", "--params", "1e9", "--objective", "time", "--gpu-hours", "1e300"],
    ["design", "--params", "1e30", "--sizes", "1e9", "--depths", "4", "--tokens", "1e9",
     "--budget-frac", "0.5", "--results", "{d}/good.csv"],
    ["shape", "--layers", "1e9", "--width", "8", "--heads", "1", "--no-mlp", "0"],
]

# One process runs every extreme in turn, each through the CLI's own error boundary, under the
# limit (a process per case cost the suite 7 s of interpreter starts); after each, the inputs'
# hashes, so that a case that writes into them is the one named.
_EXTREMES_CHILD = """
import contextlib, hashlib, io, json, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (4_000_000 * 1024, 4_000_000 * 1024))
from archfit.cli import main
d = Path(sys.argv[1])
out = []
for args in json.loads(sys.argv[2]):
    err = io.StringIO()
    code = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(args)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException as e:
            code, err = 99, io.StringIO(f"{type(e).__name__}: {e}")
    tree = {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}
    out.append({"code": code, "stderr": err.getvalue(), "tree": tree})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def extremes(inputs):
    import json
    import subprocess
    import sys

    before = tree(inputs)
    argv = [[a.format(d=inputs) for a in case] for case in EXTREMES]
    r = subprocess.run([sys.executable, "-c", _EXTREMES_CHILD, str(inputs), json.dumps(argv)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return before, json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("i", range(len(EXTREMES)), ids=[" ".join(c[:3]) for c in EXTREMES])
def test_extremes_under_4_gb_of_address_space(extremes, i):
    """Every extreme value exits 2 with one line inside a 4 GB address space (RLIMIT_AS):
    nothing is materialized in proportion to the user's number, and no input is written."""
    before, results = extremes
    r = results[i]
    lines = [x for x in r["stderr"].strip().splitlines() if x.strip()]
    assert r["code"] == 2 and len(lines) == 1 and lines[0].startswith("Error:"), (
        EXTREMES[i], r["code"], r["stderr"][-500:])
    assert r["tree"] == before


def test_a_uniform_shape_counts_at_any_depth_in_constant_memory():
    """shape --layers 1e9 --width 8 --heads 1 (a MemoryError at 4 GB before): a uniform shape's
    count and FLOPs are closed-form, under 4 GB of address space."""
    import resource
    import subprocess
    import sys

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (4_000_000 * 1024, 4_000_000 * 1024))

    r = subprocess.run([sys.executable, "-m", "archfit", "shape", "--layers", "1e9", "--width",
                        "8", "--heads", "1", "--json"], capture_output=True, text=True,
                       timeout=60, preexec_fn=limit)
    assert r.returncode == 0, r.stderr[-500:]
    out = json.loads(r.stdout)
    d, L, f, c = 8, 10 ** 9, 32, out["n_ctx"]
    # per block: q, k, v, o (4 d^2 + 4 d biases), the MLP (2 d f + f + d), two layernorms (4 d)
    block = 4 * d * d + 4 * d + 2 * d * f + f + d + 4 * d
    assert out["params_non_embedding"] == L * block + 2 * d  # and the final layernorm
    kaplan = 6 * out["params_non_embedding"] + 6 * L * c * d
    assert out["flops_per_token"] == pytest.approx(kaplan, rel=1e-12)


def test_every_exported_name_stays_what_it_was_after_importing_every_module():
    """Every name archfit exports stays what it first was (a function is never replaced by a
    module of its name), and importing any archfit module does not replace one."""
    import importlib
    import importlib.util
    import pkgutil

    import archfit

    first = {n: getattr(archfit, n) for n in archfit.__all__ if n != "__version__"}
    for m in pkgutil.iter_modules(archfit.__path__):
        if m.name not in ("__main__",):
            importlib.import_module(f"archfit.{m.name}")
    for n in first:  # 'import archfit.<name>' where such a module exists
        if importlib.util.find_spec(f"archfit.{n}") is not None:
            importlib.import_module(f"archfit.{n}")
    for n, obj in first.items():
        assert getattr(archfit, n) is obj, n
        if n == "campaign":  # a module by design: archfit.campaign.run(...), .status(...)
            assert obj is importlib.import_module(f"archfit.{n}"), n
        else:
            assert not isinstance(obj, type(archfit)), f"archfit.{n} is a module, not a plain name"
    assert callable(archfit.trade) and callable(archfit.design) and callable(archfit.replay)


def test_a_plan_names_the_middle_layer_and_a_model_without_attention_is_noted(cli):
    r = cli("shape", "--layers", "4", "--width", "64", "--heads", "2", "--no-attn", "middle",
            "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["no_attn"] == [2]  # the middle of 4 layers: 4 // 2
    r = cli("shape", "--layers", "2", "--width", "64", "--heads", "2", "--no-attn", "0,1",
            "--json")
    assert r.exit_code == 0, r.output
    assert any("no layer has attention" in n for n in json.loads(r.output)["notes"])
