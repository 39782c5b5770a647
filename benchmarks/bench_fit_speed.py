"""How fast archfit fits, as ratios against peers in the same run: each law on its largest
public table (point fit, 100 resamples), against a plain ``scipy.optimize.least_squares`` of
the same model (Huber on log loss, from the same point estimate: what a fit costs without
archfit's starts and checks), and the CLI's fits of the README and of issue 104's targets
against ``python -c "import numpy"`` (an interpreter's start with numpy). The machine is named
first: cores and numpy's sgemm GFLOP/s, so a time read on another box can be scaled.

    python benchmarks/bench_fit_speed.py                       # ScaleBench from ../shared
    python benchmarks/bench_fit_speed.py --scalebench DIR      # its training splits elsewhere
    python benchmarks/bench_fit_speed.py --quick               # the laws' table only

Without ScaleBench's training splits (which this repository does not ship: two of their sources
carry no licence) the rows that need them are skipped, with the reason.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "datasets"


def sgemm_gflops() -> float:
    """numpy's float32 matrix product of 2,000 x 2,000, best of 5, in GFLOP/s."""
    a = np.random.default_rng(0).standard_normal((2000, 2000)).astype(np.float32)
    a @ a
    best = min(_timed(lambda: a @ a) for _ in range(5))
    return 2 * 2000 ** 3 / best / 1e9


def _timed(fn, *args, **kw) -> float:
    t0 = time.perf_counter()
    fn(*args, **kw)
    return time.perf_counter() - t0


def scalebench_tables(root: Path) -> dict[str, pl.DataFrame]:
    """ScaleBench's training splits in archfit's column names (their values unchanged; the
    rate grid's batch in tokens: sequences of 2,048)."""
    out = {}
    if (root / "lr_bsz_train.parquet").exists():
        d = pl.read_parquet(root / "lr_bsz_train.parquet")
        out["lr_bsz"] = d.select(pl.col("lr"), (pl.col("bsz") * 2048).alias("batch_tokens"),
                                 pl.col("non_embedding_param_size").alias("params"),
                                 pl.col("data_size").alias("tokens"),
                                 pl.col("lm_loss").alias("loss"))
    if (root / "farseer_train.parquet").exists():
        d = pl.read_parquet(root / "farseer_train.parquet")
        out["farseer"] = d.select(pl.col("N").alias("params"), pl.col("D").alias("tokens"),
                                  pl.col("loss")).unique(maintain_order=True)  # 4 repeated rows
    return out


def cases(sb: dict[str, pl.DataFrame]) -> list[tuple[str, str, pl.DataFrame | None, str]]:
    """(law, table's name, table or None, why it is missing)."""
    chin = pl.read_csv(DATA / "chinchilla_epoch2024.csv")
    c4 = pl.read_csv(DATA / "muennighoff2023" / "c4_runs.csv")
    demo = pl.read_parquet(DATA / "demo_sweep.parquet")
    miss = "ScaleBench's training split not found (--scalebench DIR)"
    return [("lr-batch-surface", "ScaleBench lr & batch (Step Law), 2,702 runs",
             sb.get("lr_bsz"), miss),
            ("chinchilla", "Epoch's Chinchilla points, 245", chin, ""),
            ("farseer", "ScaleBench Farseer grid, 404 runs", sb.get("farseer"), miss),
            ("data-constrained", f"Muennighoff et al. C4, {c4.height} runs", c4, ""),
            ("depth-joint", f"the demo's CPU sweep, {demo.height} runs", demo, "")]


def peer_seconds(law: str, frame: pl.DataFrame, params: np.ndarray) -> float:
    """A plain scipy least_squares of the law's model (its own predict), Huber (1e-3) on log
    loss, numeric Jacobian, started at the fitted point: the floor a fit can cost."""
    from scipy.optimize import least_squares

    from archfit.laws.base import get_law

    lw = get_law(law)
    if "final_val_loss" in frame.columns:  # a sweep's own table: archfit's names for the peer
        frame = frame.rename({"final_val_loss": "loss", "params_non_embedding": "params"})
    data = lw.prepare(frame)
    t = np.log(data["loss"])
    names = lw.param_names

    def resid(th: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            r = np.log(lw.predict(dict(zip(names, th)), data)) - t
        return np.where(np.isfinite(r), r, 1e3)

    x0 = np.asarray(params, float) * (1 + 0.01 * np.sign(params))  # a step off the optimum
    return _timed(lambda: least_squares(resid, x0, loss="huber", f_scale=1e-3, method="trf"))


def law_rows() -> None:
    from threadpoolctl import threadpool_limits

    import archfit

    sb = scalebench_tables(SCALEBENCH)
    print(f"{'law':<18}{'table':<44}{'point':>8}{'100 res.':>10}{'peer':>8}{'ratio':>7}")
    for law, name, frame, why in cases(sb):
        if frame is None:
            print(f"{law:<18}{name:<44}  skipped: {why}")
            continue
        archfit.fit(frame, law=law, bootstrap=0, heldout=False)  # imports out of the timing
        t0 = time.perf_counter()
        f = archfit.fit(frame, law=law, bootstrap=0, heldout=False)
        point = time.perf_counter() - t0
        boot = _timed(archfit.fit, frame, law=law, bootstrap=100, heldout=False)
        with threadpool_limits(1):
            peer = peer_seconds(law, frame, np.array([f.params[n] for n in f.params]))
        print(f"{law:<18}{name[:43]:<44}{point:>7.2f}s{boot:>9.2f}s{peer:>7.2f}s"
              f"{point / peer:>6.1f}x")
    print("point: archfit.fit(bootstrap=0, heldout=False), every start; 100 res.: the same with "
          "100 resamples; peer: one plain least_squares from the optimum (numeric Jacobian); "
          "ratio: point / peer")


def cli_rows() -> None:
    exe = [sys.executable, "-m", "archfit"]
    base = min(_timed(subprocess.run, [sys.executable, "-c", "import numpy"], check=True)
               for _ in range(3))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sb = scalebench_tables(SCALEBENCH)
        if "lr_bsz" in sb:
            path = os.path.join(tmp, "lr_bsz.parquet")
            sb["lr_bsz"].write_parquet(path)
            rows += [("fit lr_bsz --law lr-batch-surface --bootstrap 0", 5.0,
                      [path, "--law", "lr-batch-surface", "--bootstrap", "0"]),
                     ("fit lr_bsz --law lr-batch-surface --bootstrap 100", 30.0,
                      [path, "--law", "lr-batch-surface", "--bootstrap", "100"])]
        rows += [("fit chinchilla_epoch2024.csv --law auto", 10.0,
                  [str(DATA / "chinchilla_epoch2024.csv"), "--law", "auto"]),
                 ("fit demo_sweep.parquet --law depth-joint", 30.0,
                  [str(DATA / "demo_sweep.parquet"), "--law", "depth-joint"])]
        print(f"\n{'command (archfit ...)':<54}{'wall':>8}{'goal':>7}{'x numpy':>9}")
        for what, goal, args in rows:
            out = os.path.join(tmp, "fit.json")
            cmd = exe + ["fit", *args, "--out", out, "--force"]
            t = _timed(subprocess.run, cmd, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, cwd=tmp)
            print(f"{what:<54}{t:>7.1f}s{goal:>6.0f}s{t / base:>8.0f}x")
    print(f"peer: python -c 'import numpy' {base:.2f} s. The cold start of recommend from a "
          "wheel: benchmarks/bench_recommend.py --installed")


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--scalebench", type=Path,
                    default=ROOT.parent / "shared" / "datasets" / "scalebench-train")
parser.add_argument("--quick", action="store_true", help="the laws' table only")
args = parser.parse_args()
SCALEBENCH = args.scalebench
print(f"machine: {os.cpu_count()} cores, numpy sgemm {sgemm_gflops():.0f} GFLOP/s")
law_rows()
if not args.quick:
    cli_rows()
