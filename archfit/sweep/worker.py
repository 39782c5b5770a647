"""``python -m archfit.sweep.worker RUN_DIR [--nproc K] [--retry-failed]``: train one run of a
sweep (the run-directory protocol of :func:`archfit.sweep.rundir.run_one`) and print its status
as the last line; the local executor starts one per run when it packs runs onto GPUs."""

from __future__ import annotations

import argparse

from archfit.sweep.rundir import run_one


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--nproc", type=int, default=1)
    ap.add_argument("--retry-failed", action="store_true")
    a = ap.parse_args()
    print(run_one(a.run_dir, a.retry_failed, a.nproc), flush=True)


if __name__ == "__main__":
    main()
