"""The sweep engine's own overhead per run (start, data open, write) with a near-zero training
budget, and re-running a finished 100-run sweep. Targets: <= 1 s per run; <= 2 s for 100.

The peer measured in the same run is one bare training step in-process (no engine)."""

import os
import subprocess
import sys
import tempfile
import time

here = os.path.dirname(os.path.abspath(__file__))
spec_tpl = """
name = "overhead"
lrs = [{lrs}]
[model]
head_dim = 8
multiple = 8
[grid]
shapes = [{{n_layer = 1, d_model = 16, n_head = 2}}]
[budget]
steps = 1
[train]
batch_size = 1
ctx = 16
eval_every = 1
eval_windows = 1
[executor]
concurrency = 1
threads_per_run = 1
"""


def run(spec, out):
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "archfit", "sweep", "run", spec, "--out", out],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


with tempfile.TemporaryDirectory() as tmp:
    from archfit.shapes import Shape
    from archfit.train import Budget, TrainConfig, train

    cfg = TrainConfig(shape=Shape(n_layer=1, d_model=16, n_head=2, vocab_size=256, n_ctx=16),
                      budget=Budget(steps=1), batch_size=1, eval_every=1, eval_windows=1)
    train(cfg)  # warm the data cache
    t0 = time.perf_counter()
    train(cfg)
    bare = time.perf_counter() - t0
    for n in (1, 21):
        spec = os.path.join(tmp, f"s{n}.toml")
        with open(spec, "w") as f:
            f.write(spec_tpl.format(lrs=", ".join(str(1e-3 * (i + 1)) for i in range(n))))
        t = run(spec, os.path.join(tmp, f"o{n}"))
        if n == 1:
            t1 = t
    per_run = (t - t1) / 20
    print(f"engine: {per_run:.3f} s per extra run (20 runs, 1 worker; target <= 1 s); "
          f"bare in-process run {bare:.3f} s -> engine overhead {per_run - bare:.3f} s/run; "
          f"first run incl. pool start and torch import {t1:.2f} s")
    spec = os.path.join(tmp, "s100.toml")
    with open(spec, "w") as f:
        f.write(spec_tpl.format(lrs=", ".join(str(1e-4 * (i + 1)) for i in range(100))))
    run(spec, os.path.join(tmp, "o100"))
    t = run(spec, os.path.join(tmp, "o100"))
    print(f"re-running a finished 100-run sweep: {t:.2f} s (target <= 2 s)")
