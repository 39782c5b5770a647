"""The bottom layer: atomic writes that never tear a file nor leave a temporary one behind."""

from __future__ import annotations

import math
import os
import stat

import numpy as np
import pytest

from archfit.io import TMP_MARK, atomic_path, atomic_write, file_sha256, jsonable


def test_atomic_write_replaces_whole_and_respects_umask(tmp_path):
    p = tmp_path / "sub" / "a.json"
    atomic_write(p, "first")
    atomic_write(p, b"second")
    assert p.read_text() == "second"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask
    assert [f.name for f in p.parent.iterdir()] == ["a.json"]


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    p = tmp_path / "table.parquet"
    p.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="disk"):
        with atomic_path(p) as tmp:
            with open(tmp, "wb") as f:
                f.write(b"half of the new")
            raise RuntimeError("disk went away")
    assert p.read_bytes() == b"old"
    assert not [f for f in os.listdir(tmp_path) if TMP_MARK in f]


def test_atomic_path_for_writers_that_need_a_name(tmp_path):
    p = tmp_path / "x.npy"
    with atomic_path(p) as tmp:
        assert TMP_MARK in os.path.basename(tmp) and os.path.dirname(tmp) == str(tmp_path)
        np.arange(5).tofile(tmp)
    assert np.fromfile(p, dtype=np.int64).tolist() == [0, 1, 2, 3, 4]


def test_jsonable_and_hash(tmp_path):
    assert jsonable({"a": math.nan, "b": [np.float64(1.5), np.int64(2)], 3: np.array([1, 2])}) \
        == {"a": None, "b": [1.5, 2], "3": [1, 2]}
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    assert file_sha256(p) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_a_binary_file_named_csv_is_not_a_table(cli, tmp_path):
    path = tmp_path / "runs.csv"
    path.write_bytes(bytes(range(256)) * 20)
    r = cli("fit", path, "--law", "chinchilla")
    assert r.exit_code == 2 and "not text (it holds NUL bytes)" in r.output, r.output


@pytest.mark.parametrize("args", [
    ["recommend", "--params", "7e9", "--emit", "hf-llama", "-o", ""],
    ["plot", "levine2020", "-o", ""],
    ["sweep", "collect", "sweeps/smoke.toml", "--out", ""],
    ["fit", "datasets/chinchilla_epoch2024.csv", "--law", "chinchilla", "--out", ""],
])
def test_an_empty_path_is_refused_not_read_as_the_default(cli, repo, monkeypatch, args):
    monkeypatch.chdir(repo)
    r = cli(*args)
    assert r.exit_code == 2 and "is empty; give a path" in r.output, r.output
    assert not (repo / "sweeps" / "smoke.parquet").exists()
