"""Bounded time for the slowest laws on Epoch's 245 Chinchilla points, idle on this project's
2-core machine: a Farseer fit with 1000 bootstrap resamples (target <= 15 s) and
``fit --law auto`` with the pick's 1000 resamples (target <= 30 s). Peer in the same run: the
same Farseer fit in the law's public parameters with a numeric Jacobian (the fit before it
moved to the (u, c, e) coordinates), and the cost each reaches."""

import os
import time

from archfit import fit
from archfit.laws.compute import farseer
from archfit.laws.base import Constraints

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "datasets", "chinchilla_epoch2024.csv")
fit(paths=[path], law="chinchilla", bootstrap=0)  # imports and caches out of the timings


def timed(law: str) -> tuple[object, float]:
    t0 = time.perf_counter()
    f = fit(paths=[path], law=law, bootstrap=1000)
    return f, time.perf_counter() - t0


f, dt = timed("farseer")
a, dt_auto = timed("auto")
stable = farseer._fit_stable
farseer._fit_stable = lambda data, starts: farseer.Farseer()._fit_public(  # the peer
    data, starts, Constraints())
g, peer = timed("farseer")
farseer._fit_stable = stable
cores = os.cpu_count()
print(f"farseer fit + 1000 bootstrap resamples + held-out check on {f.n_points} points: "
      f"{dt:.1f} s ({cores} cores; target <= 15 s)")
print(f"fit --law auto (picked {a.law}) with the pick's 1000 resamples: {dt_auto:.1f} s "
      "(target <= 30 s)")
print(f"peer, public parameters with a numeric Jacobian: {peer:.1f} s -> {peer / dt:.1f}x "
      f"faster now; resamples converged {f.bootstrap['n_ok']} against {g.bootstrap['n_ok']}")
print(f"point estimate's RMSE (log loss): {f.diagnostics['rmse_log']:.5f} now, "
      f"{g.diagnostics['rmse_log']:.5f} for the peer")
for k in ("N_opt@1e21", "N_opt@1e24"):
    now, before = f.derived_ci[k], g.derived_ci[k]
    print(f"{k}: {f.derived[k]:.3g}, 95% CI [{now[0]:.3g}, {now[1]:.3g}] now; peer "
          f"{g.derived[k]:.3g} [{before[0]:.3g}, {before[1]:.3g}]")
