"""Checkpoints: read with ``torch.load(weights_only=True)`` (tensors and plain values: a planted
file never runs code), and resumed only when they are this run's."""

from __future__ import annotations

import os
import warnings
from typing import Any

from archfit.errors import RunDirError
from archfit.train.config import RESUMABLE_CHANGES


def load_checkpoint(path: str, device: str = "cpu") -> dict[str, Any]:
    """A checkpoint of archfit's, read with ``torch.load(weights_only=True)``: tensors and plain
    values only, so a planted file cannot run code. Anything else is refused in one line
    (:class:`RunDirError`), and nothing in it is executed."""
    import pickle

    import torch

    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols it will refuse
            warnings.simplefilter("ignore")
            ck = torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as e:
        import re

        m = re.search(r"GLOBAL ([\w.]+)|Unsupported (operand \d+)", str(e))
        detail = f" (it asks for {m.group(1) or m.group(2)})" if m else ""
        raise RunDirError(f"{path}: holds objects archfit's checkpoints never contain{detail}; "
                          "refusing to load it, since unpickling it could run code (delete it, "
                          "or --restart to discard it)") from None
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a damaged file
        raise RunDirError(f"{path}: cannot be read ({type(e).__name__}); use --restart to "
                          "discard it") from None
    if not isinstance(ck, dict) or not {"model", "optimizers", "step"} <= set(ck):
        raise RunDirError(f"{path}: not an archfit checkpoint (no model, optimizers and step); "
                          "use --restart to discard it")
    return ck


def resume(s: Any, restart: bool) -> None:
    """Continue from the run directory's checkpoint, if it is this run's; refuse another run's
    (the difference shown) unless ``restart``, which discards it."""
    s.dist.barrier()  # every process sees the same checkpoint (or none)
    try:
        _resume_from_file(s, restart)
    finally:
        s.dist.barrier()


def _resume_from_file(s: Any, restart: bool) -> None:
    if not (s.ckpt_path and os.path.exists(s.ckpt_path)):
        return
    import torch

    ck = None
    try:
        ck = load_checkpoint(s.ckpt_path, s.device)
    except RunDirError:
        if not restart:
            raise
    mine = s.cfg.to_dict()
    theirs = (ck or {}).get("config") or {}
    diff = [f"{k} {theirs.get(k)!r} -> {v!r}" for k, v in mine.items()
            if k not in RESUMABLE_CHANGES and theirs.get(k) != v]
    if ck is None or diff:
        if not restart:
            raise RunDirError(f"{os.path.dirname(s.ckpt_path)}: holds a checkpoint of another "
                              f"run ({'; '.join(diff[:4])}); use --restart to discard it, or "
                              "another --run-dir")
        if s.dist.main:
            os.unlink(s.ckpt_path)
        return
    s.load_state(ck["model"], ck["optimizers"])
    s.rng.bit_generator.state = ck["data_rng"]
    torch.set_rng_state(ck["torch_rng"])
    s.start_step, s.best_val, s.curve = ck["step"], ck["best_val"], ck["curve"]
    s.result.resumed_from_step = s.start_step


# the files archfit writes in a run folder (the trainer and the sweep engine): a folder holding
# one of them is an archfit run; a non-empty folder holding none is someone else's
RUN_FILES = ("checkpoint.pt", "config.json", "result.json", "log.txt", "lock")


def check_run_dir(run_dir: str) -> None:
    """Refuse a non-empty folder that is not an archfit run (``train --run-dir``): archfit
    would leave a checkpoint among files it does not own."""
    from archfit.errors import OutputError

    if not os.path.isdir(run_dir):
        return
    names = set(os.listdir(run_dir))
    if names and not names & set(RUN_FILES):
        raise OutputError(f"{run_dir}: holds {len(names)} file(s) and is not an archfit run "
                          f"folder (no {', '.join(RUN_FILES[:3])}); give a new or empty folder "
                          "for --run-dir")
