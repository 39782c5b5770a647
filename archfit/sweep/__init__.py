"""Sweeps: a TOML spec expanded into runs (:mod:`~archfit.sweep.spec`), what they will cost
(:mod:`~archfit.sweep.plan`), the run-directory protocol (:mod:`~archfit.sweep.rundir`) and
where they train (:mod:`~archfit.sweep.executors`). Collecting results into parquet is the
store's job (:func:`archfit.sweep.store.collect`)."""

from __future__ import annotations

from archfit.sweep.executors import (SlurmRun, check_executor, execute, fmt_eta, run_local, run_ray,
                                     slurm_max_array_size,
                                     submit_slurm, wait_for)
from archfit.sweep.plan import measured_flops_rate, plan_rows
from archfit.sweep.rundir import (TERMINAL, check_result, counts, heal, is_locked, prepare_dirs,
                                  read_result, run_one, set_aside)
from archfit.sweep.spec import Run, Spec, load_spec, run_id_of

__all__ = ["Run", "SlurmRun", "check_executor", "execute", "Spec", "TERMINAL", "check_result", "counts", "heal", "set_aside", "fmt_eta", "is_locked", "load_spec",
           "measured_flops_rate", "plan_rows", "prepare_dirs", "read_result", "run_id_of",
           "run_local", "run_one", "run_ray", "slurm_max_array_size", "submit_slurm",
           "wait_for"]
