"""Where a learning-rate window goes wrong: the bias of a cell's best rate read from a window
of rates, on noiseless curves steeper above their optimum than below.

For three asymmetric curves of loss against u = ln lr - ln lr*, two grid steps (a factor of
sqrt 2 and of 2 between rates) and the optimum at 41 offsets between two grid rates, the best
rate is read as the minimum of a parabola through the best rate and its neighbour on each side
(3 rates), of a parabola through 5 rates, and of a cubic through 5 rates; the median and the
largest |bias| of the rate are printed. Run: python benchmarks/bench_lr_window.py"""

from __future__ import annotations

import numpy as np


def piecewise(u: np.ndarray) -> np.ndarray:
    return np.where(u < 0, u ** 2, 3 * u ** 2)


def exp_wall(a: float):
    return lambda u: 2 * (np.exp(a * u) - 1 - a * u) / a ** 2


def vertex(x: np.ndarray, y: np.ndarray, window: str) -> float:
    i = int(np.argmin(y))
    span = slice(i - 1, i + 2) if window == "parabola, 3 rates" else slice(i - 2, i + 3)
    deg = 3 if window == "cubic, 5 rates" else 2
    c = np.polyfit(x[span], y[span], deg)
    roots = np.roots(np.polyder(c))
    minima = [r.real for r in roots if abs(r.imag) < 1e-12
              and np.polyval(np.polyder(c, 2), r.real) > 0]
    return min(minima, key=lambda r: abs(r - x[i])) if minima else float("nan")


def main() -> None:
    curves = {"piecewise 3:1": piecewise, "exp wall a=1.5": exp_wall(1.5),
              "exp wall a=3": exp_wall(3.0)}
    windows = ("parabola, 3 rates", "parabola, 5 rates", "cubic, 5 rates")
    print("median |bias| of the best rate (largest); piecewise 3:1: u^2 below, 3u^2 above;"
          "\nexp wall a: 2(e^{au} - 1 - au)/a^2")
    print(f"{'curve':<16}{'step':>6}" + "".join(f"{w:>24}" for w in windows))
    for name, f in curves.items():
        for step, h in (("sqrt2", np.log(2) / 2), ("2", np.log(2))):
            cells = []
            for w in windows:
                errs = []
                for d in np.linspace(-0.5, 0.5, 41):
                    x, xs = np.arange(-6, 7) * h, d * h
                    errs.append(abs(vertex(x, f(x - xs), w) - xs))
                cells.append(f"{np.expm1(np.median(errs)):.1%} (max {np.expm1(max(errs)):.1%})")
            print(f"{name:<16}{step:>6}" + "".join(f"{c:>24}" for c in cells))


if __name__ == "__main__":
    main()
