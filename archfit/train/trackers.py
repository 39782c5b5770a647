"""Experiment trackers: TensorBoard, MLflow and W&B (offline or online), one tracker run per
archfit run, named by the run's folder (its run id in a sweep) and grouped by the sweep.

Each step logs train loss, lr, tokens/s and (on a GPU with a known peak) MFU; evaluations log
val loss; the end logs the result record's numbers. The packages are optional
(``pip install 'archfit[trackers]'``); a missing one is a :class:`TrackerError` naming the pip
command, raised before training starts.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from archfit.errors import ArchfitError

TRACKERS = ("tensorboard", "mlflow", "wandb")
_PACKAGE = {"tensorboard": "tensorboard", "mlflow": "mlflow", "wandb": "wandb"}


class TrackerError(ArchfitError):
    """An unknown tracker, or its package is not installed."""


def check_tracker(kind: str | None) -> None:
    """The tracker's package imports (or ``kind`` is None); else one line with the fix."""
    if kind is None:
        return
    if kind not in TRACKERS:
        raise TrackerError(f"unknown tracker {kind!r}; choose one of {', '.join(TRACKERS)}")
    try:
        importlib.import_module(_PACKAGE[kind])
    except ImportError:
        raise TrackerError(f"the {kind} tracker needs its package: pip install "
                           f"'archfit[trackers]' (or pip install {_PACKAGE[kind]})") from None


class Tracker:
    """One tracker run. ``log`` takes a training point (step, tokens, train_loss, lr and
    val_loss when evaluated) and the step's speed; ``finish`` the result record."""

    def __init__(self, kind: str, directory: str, name: str, group: str,
                 config: dict[str, Any]) -> None:
        check_tracker(kind)
        self.kind, self.step = kind, 0
        os.makedirs(directory, exist_ok=True)
        if kind == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            self._w = SummaryWriter(log_dir=os.path.join(directory, group, name))
            self._w.add_text("config", "\n".join(f"    {k}: {v}" for k, v in config.items()))
        elif kind == "mlflow":
            import mlflow  # type: ignore[import-not-found]  # the 'trackers' extra, imported on use

            # a local SQLite store in the folder (MLflow 3 keeps its file store read-mostly)
            self._client = mlflow.MlflowClient(tracking_uri=mlflow_uri(directory))
            exp = self._client.get_experiment_by_name(group)
            exp_id = exp.experiment_id if exp else self._client.create_experiment(
                group, artifact_location=_file_uri(os.path.join(directory, "artifacts")))
            run = self._client.create_run(exp_id, run_name=name, tags={"archfit.group": group})
            self._run_id = run.info.run_id
            for k, v in config.items():
                self._client.log_param(self._run_id, k, v)
        else:
            import wandb  # type: ignore[import-not-found]  # the 'trackers' extra, imported on use

            mode = os.environ.get("WANDB_MODE", "offline")  # online only when asked for
            self._run = wandb.init(dir=directory, project=group, group=group, name=name,
                                   id=name, config=config, reinit="finish_previous",
                                   mode=mode,  # type: ignore[arg-type]  # WANDB_MODE, as wandb reads it
                                   settings=wandb.Settings(silent=True, console="off"))

    def log(self, point: dict[str, Any], tokens_per_s: float | None = None,
            mfu: float | None = None) -> None:
        step = int(point["step"])
        m = {"train/loss": point["train_loss"], "train/lr": point["lr"],
             "train/tokens": point["tokens"]}
        if "val_loss" in point:
            m["val/loss"] = point["val_loss"]
        if tokens_per_s:
            m["perf/tokens_per_s"] = tokens_per_s
        if mfu:
            m["perf/mfu"] = mfu
        self._write(m, step)
        self.step = step

    def finish(self, result: dict[str, Any]) -> None:
        final = {f"result/{k}": float(v) for k, v in result.items()
                 if isinstance(v, (int, float)) and not isinstance(v, bool)}
        self._write(final, self.step)
        if self.kind == "tensorboard":
            self._w.add_text("result/status", str(result.get("status")), self.step)
            self._w.close()
        elif self.kind == "mlflow":
            status = "FINISHED" if result.get("status") == "ok" else "FAILED"
            self._client.set_tag(self._run_id, "archfit.status", str(result.get("status")))
            self._client.set_terminated(self._run_id, status=status)
        else:
            self._run.summary["status"] = result.get("status")
            self._run.finish(exit_code=0 if result.get("status") == "ok" else 1)

    def _write(self, metrics: dict[str, float], step: int) -> None:
        if self.kind == "tensorboard":
            for k, v in metrics.items():
                self._w.add_scalar(k, v, step)
        elif self.kind == "mlflow":
            for k, v in metrics.items():
                self._client.log_metric(self._run_id, k, v, step=step)
        else:
            self._run.log(metrics, step=step)


def mlflow_uri(directory: str) -> str:
    """The tracking URI of the MLflow store archfit writes in ``directory``."""
    return "sqlite:///" + os.path.join(os.path.abspath(directory), "mlflow.db")


def _file_uri(directory: str) -> str:
    return "file://" + os.path.abspath(directory)
