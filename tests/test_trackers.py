"""Experiment trackers, each for real and offline: a 20-step ``archfit train --tracker X``
whose 20 train losses and 2 val losses are read back from TensorBoard's event files, an MLflow
local store queried through MlflowClient, and the W&B offline run file (``-m frameworks``: the
packages come with ``archfit[trackers]``)."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_spec

ARGS = ("train", "--layers", "1", "--width", "32", "--heads", "2", "--ctx", "32", "--steps",
        "20", "--eval-every", "10", "--json", "--curve")


def _run(cli, tmp_path: Path, tracker: str) -> tuple[dict, Path]:
    tdir = tmp_path / "tracker"
    r = cli(*ARGS, "--tracker", tracker, "--tracker-dir", tdir, "--run-dir",
            tmp_path / "mysweep" / "run-a")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert out["status"] == "ok" and len(out["curve"]) == 20
    return out, tdir


def _expect(out: dict) -> tuple[list[float], list[float]]:
    return ([p["train_loss"] for p in out["curve"]],
            [p["val_loss"] for p in out["curve"] if "val_loss" in p])


@pytest.mark.frameworks
def test_tensorboard_event_files_hold_the_losses(cli, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, tdir = _run(cli, tmp_path, "tensorboard")
    ea = EventAccumulator(str(tdir / "mysweep" / "run-a"))  # grouped by sweep, named by run
    ea.Reload()
    train, val = _expect(out)
    got = ea.Scalars("train/loss")
    assert [e.step for e in got] == list(range(1, 21))
    assert [e.value for e in got] == pytest.approx(train, rel=1e-6)
    assert [e.value for e in ea.Scalars("val/loss")] == pytest.approx(val, rel=1e-6)
    assert {"train/lr", "perf/tokens_per_s", "result/final_val_loss"} <= \
        set(ea.Tags()["scalars"])


@pytest.mark.frameworks
def test_mlflow_store_is_queried_for_the_losses(cli, tmp_path):
    mlflow = pytest.importorskip("mlflow")
    from archfit.train.trackers import mlflow_uri

    out, tdir = _run(cli, tmp_path, "mlflow")
    client = mlflow.MlflowClient(tracking_uri=mlflow_uri(str(tdir)))
    exp = client.get_experiment_by_name("mysweep")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.run_name == "run-a" and run.info.status == "FINISHED"
    train, val = _expect(out)
    hist = sorted(client.get_metric_history(run.info.run_id, "train/loss"), key=lambda m: m.step)
    assert [m.step for m in hist] == list(range(1, 21))
    assert [m.value for m in hist] == pytest.approx(train, rel=1e-6)
    assert [m.value for m in client.get_metric_history(run.info.run_id, "val/loss")] == \
        pytest.approx(val, rel=1e-6)
    assert run.data.params["n_layer"] == "1"


def wandb_records(path: Path) -> list[bytes]:
    """The records of a W&B run file: a 7-byte header (":W&B", magic, version), then LevelDB
    log blocks of 32 KiB whose records carry a 7-byte header (crc32, length, type: full, first,
    middle, last). wandb >= 0.23 ships no Python reader of its own."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, out, buf = 7, [], b""
    while pos + 7 <= len(data):
        left = 32768 - pos % 32768
        if left < 7:  # the block's tail is padding
            pos += left
            continue
        _crc, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + n], pos + 7 + n
        if kind == 0:
            break
        buf = chunk if kind in (1, 2) else buf + chunk
        if kind in (1, 4):
            out.append(buf)
    return out


@pytest.mark.frameworks
def test_wandb_offline_run_holds_the_losses(cli, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from wandb.proto import wandb_internal_pb2

    monkeypatch.delenv("WANDB_MODE", raising=False)  # offline unless asked otherwise
    monkeypatch.setenv("WANDB_SILENT", "true")
    out, tdir = _run(cli, tmp_path, "wandb")
    # the CLI ran in this process, whose exit would shut W&B's service down and flush its
    # files (wandb's atexit hook); do here what that exit does before reading the run file
    import wandb

    wandb.teardown()
    (path,) = (tdir / "wandb").glob("offline-run-*-run-a/run-run-a.wandb")
    hist: dict[int, dict] = {}
    kinds: list[str | None] = []
    for raw in wandb_records(path):
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(raw)
        kinds.append(rec.WhichOneof("record_type"))
        if kinds[-1] == "history":
            items = {(i.key or "/".join(i.nested_key)): json.loads(i.value_json)
                     for i in rec.history.item}
            hist[items["_step"]] = items
    train, val = _expect(out)
    steps = sorted(s for s in hist if "train/loss" in hist[s])
    assert steps == list(range(1, 21)), (path.stat().st_size, kinds)
    assert [hist[s]["train/loss"] for s in steps] == pytest.approx(train, rel=1e-6)
    assert [hist[s]["val/loss"] for s in steps if "val/loss" in hist[s]] == \
        pytest.approx(val, rel=1e-6)


def test_a_missing_tracker_package_is_one_line_with_the_pip_command(cli, tmp_path,
                                                                    monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow fails, as when absent
    r = cli(*ARGS, "--tracker", "mlflow", "--run-dir", tmp_path / "r")
    assert r.exit_code == 2, r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "pip install 'archfit[trackers]'" in lines[0], r.output
    assert not (tmp_path / "r").exists()  # refused before any work


def test_a_spec_tracker_is_not_part_of_the_run_ids(tmp_path):
    from archfit.sweep.spec import load_spec

    plain = load_spec(tiny_spec(tmp_path / "a.toml"))
    text = (tmp_path / "a.toml").read_text().replace("[train]\n", "[train]\ntracker = "
                                                     "\"tensorboard\"\n")
    (tmp_path / "b.toml").write_text(text)
    tracked = load_spec(str(tmp_path / "b.toml"))
    assert [r.run_id for r in tracked.runs] == [r.run_id for r in plain.runs]
    assert all(r.config["tracker"] == "tensorboard" for r in tracked.runs)
    (tmp_path / "c.toml").write_text(text.replace('"tensorboard"', '"neptune"'))
    from archfit.errors import ArchfitError

    with pytest.raises(ArchfitError, match="tracker"):
        load_spec(str(tmp_path / "c.toml"))
