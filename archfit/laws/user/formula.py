"""A law of the user's own: ``archfit fit TABLE --formula "loss ~ E + A / params^alpha + B /
tokens^beta"``. The names that are columns of the table are its variables, the rest its
parameters (:mod:`archfit.laws.user.expression` reads the text under an allow-list). It is
fitted as the built-in loss laws are (Huber, δ = 1e-3, on log loss; many starts, the
coefficients of the additive terms solved exactly for each start of the others), and the
machinery reads it as any law: the bootstrap, the held-out check, the verdict, the artifact,
``predict``, ``plot``, ``backtest`` and ``--law auto``.

Its name is ``formula: <the text>``; the artifact keeps the text and the variables, and
:func:`formula_law` parses them again, under the same rules, when the fit is read."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping

from archfit.errors import FitError, FitInputError
from archfit.laws.base import FORMULAS, HUBER_DELTA, Constraints, Data, Estimate, LossCurveLaw
from archfit.laws.user.expression import (Expression, evaluate, evaluate_with_gradient,
                                          linear_parameters, parse)

if TYPE_CHECKING:
    import numpy as np

PREFIX = "formula: "
# start values of each parameter the projection does not solve (an exponent, an offset)
START_GRID = (-1.0, 0.1, 0.3, 0.6, 1.0)
MAX_STARTS = 256  # the grid's points, thinned evenly past this
POLISHED = 4  # the starts of least Huber loss polished by the optimizer
STEPS = 2000  # scipy's evaluations (of the residuals, its Jacobian's aside) a start may take
# A table past START_ROWS rows has its starts chosen and polished on that many of them, evenly
# spaced, in at most FEW_STEPS evaluations each (a start needs the law's shape, not every row:
# 5,000 evaluations of a formula over 100,000 rows took minutes); the best is then polished on
# every row in at most FINAL_STEPS (from there a law the data pins moves by its sampling error)
START_ROWS, FEW_STEPS, FINAL_STEPS = 2_000, 100, 20


# the smallest singular value of a formula's unit-scaled sensitivities below which parameters
# trade off exactly (see FormulaLaw._unidentified)
UNIDENTIFIED = 1e-7


def thinned_product(axes: list[tuple[float, ...]], limit: int) -> list[tuple[float, ...]]:
    """Every ``ceil(n / limit)``-th point of ``itertools.product(*axes)`` (n points in all), in
    its order, each built from its index: a grid of 5^12 points is never built to keep 256."""
    sizes = [len(a) for a in axes]
    total = math.prod(sizes)
    out = []
    for i in range(0, total, max(1, math.ceil(total / limit))):
        point = []
        for axis, size in zip(reversed(axes), reversed(sizes)):  # the last axis runs fastest
            i, r = divmod(i, size)
            point.append(axis[r])
        out.append(tuple(reversed(point)))
    return out


class FormulaLaw(LossCurveLaw):
    """A loss law from a formula (see the module)."""

    predicts_loss = True
    supports_ties = True

    def __init__(self, expr: Expression, variables: tuple[str, ...],
                 starts: Mapping[str, float] | None = None,
                 bounds: Mapping[str, tuple[float, float]] | None = None):
        if expr.response in expr.names:  # loss ~ E + A * loss fits itself, perfectly
            raise FitInputError(f"--formula {expr.text!r} names its response {expr.response!r}"
                                " on its right-hand side: a law predicts the loss from the "
                                "other columns; write it without the loss there")
        params = tuple(n for n in expr.names if n not in variables)
        if not params:
            raise FitInputError(f"--formula {expr.text!r} has no parameter to fit: every name "
                                "is a column of the table")
        if not variables:
            raise FitInputError(f"--formula {expr.text!r} names no column of the table: its "
                                "variables must be columns")
        if expr.response != "loss":
            raise FitInputError(f"--formula's response is {expr.response!r}; archfit fits the "
                                "loss column (map yours with --map loss=COLUMN)")
        self.expr = expr
        self.variables = variables
        # what a built-in law declares on its class, this law holds on its instance
        for key, value in {"name": PREFIX + expr.text, "formula": expr.text,
                           "description": "a law of the user's own (--formula), Huber on "
                                          "log loss",
                           "columns": ("loss", *variables), "param_names": params,
                           "min_points": len(params) + 2,
                           "params_column": "params" if "params" in variables
                           else variables[0],
                           # the user's bounds, as a built-in law declares its own: the verdict
                           # names a parameter on one (None: an open end)
                           "bounds": {n: (lo if math.isfinite(lo) else None,
                                          hi if math.isfinite(hi) else None)
                                      for n, (lo, hi) in dict(bounds or {}).items()}}.items():
            setattr(self, key, value)
        self.linear = linear_parameters(expr.tree, params)
        self.starts = dict(starts or {})
        self.bounds_given = dict(bounds or {})
        for name in [*self.starts, *self.bounds_given]:
            if name not in params:
                raise FitInputError(f"--start/--bounds name {name!r}, which is not a parameter "
                                    f"of the formula ({', '.join(params)})")
        for name, (lo, hi) in self.bounds_given.items():
            if not (math.isfinite(lo) or math.isfinite(hi)) or not lo < hi:
                raise FitInputError(f"--bounds {name}={lo:g}:{hi:g}: give low:high, low < high")
            if name in self.starts and not lo <= self.starts[name] <= hi:
                raise FitInputError(f"--start {name}={self.starts[name]:g} lies outside its "
                                    f"--bounds {lo:g}:{hi:g}")

    def to_record(self) -> dict[str, Any]:
        """What the artifact keeps to read the law again."""
        return {"text": self.expr.text, "variables": list(self.variables),
                "starts": self.starts, "bounds": {k: list(v) for k, v in
                                                  self.bounds_given.items()}}

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        import numpy as np

        env = {**{v: np.asarray(data[v], float) for v in self.variables}, **params}
        return np.broadcast_to(np.asarray(evaluate(self.expr.tree, env), float),
                               np.shape(data[self.variables[0]])).copy()

    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True, constraints: Constraints | None = None) -> Estimate:
        import numpy as np

        constraints = constraints or Constraints()
        names = self.param_names
        if start is not None:  # a resample's refit from the estimate: as the last polish
            big = len(data["loss"]) > START_ROWS
            theta = self._polish(data, [start], constraints, FINAL_STEPS if big else STEPS)
        else:
            few = _rows(data, START_ROWS)  # the whole table where it is small
            starts = self._starts(few)
            if not starts:
                raise FitError(f"{self.name}: no start gives a finite loss on these runs")
            theta = self._polish(few, starts, constraints, STEPS if few is data else FEW_STEPS)
            if few is not data:  # then a few steps on every row
                theta = self._polish(data, [theta], constraints, FINAL_STEPS)
        if not np.all(np.isfinite(self.predict(dict(zip(names, theta)), data))):
            raise FitError(f"{self.name}: the fitted law is not finite on every run")
        if full and not constraints and (tied := self._unidentified(theta, data)):
            raise FitInputError(f"--formula {self.expr.text!r}: {', '.join(tied)} trade off "
                                "exactly on these runs (the law's losses move the same way "
                                "whichever of them moves), so only a combination of them is "
                                "fitted and each one's interval would be meaningless; write "
                                "one parameter for them")
        return Estimate(theta, extra={"objective": "Huber (delta 1e-3) on log loss",
                                      "formula": self.to_record()})

    def _polish(self, data: Data, starts: list[np.ndarray], constraints: Constraints,
                steps: int) -> np.ndarray:
        """The Huber least-squares optimum on ``data`` from the POLISHED ``starts`` of least
        Huber loss, each taking at most ``steps`` evaluations."""
        import numpy as np
        from scipy.special import huber

        from archfit.laws.inference.optimize import Reparam, huber_lsq

        names = self.param_names
        logL = np.log(data["loss"])

        def resid(theta: np.ndarray) -> np.ndarray:
            pred = self.predict(dict(zip(names, theta)), data)
            with np.errstate(all="ignore"):
                r = np.log(pred) - logL
            return np.where(np.isfinite(r), r, 1e3)  # a start off the law's domain: far off

        columns = {v: np.asarray(data[v], float) for v in self.variables}

        def jac(theta: np.ndarray) -> np.ndarray:  # d resid / d theta, exact: (rows, params)
            value, partials = evaluate_with_gradient(self.expr.tree,
                                                     {**columns, **dict(zip(names, theta))},
                                                     names)
            pred = np.broadcast_to(np.asarray(value, float), logL.shape)
            J = np.zeros((len(logL), len(names)))
            with np.errstate(all="ignore"):
                for i, d in partials.items():
                    J[:, i] = np.broadcast_to(np.asarray(d, float), logL.shape) / pred
            return np.where(np.isfinite(J) & (pred > 0)[:, None], J, 0.0)  # resid's 1e3 rows

        rp = Reparam([(n, False) for n in names], constraints)
        bounds = [self.bounds_given.get(n, (-math.inf, math.inf)) for n in names] \
            if self.bounds_given else None
        if len(starts) > POLISHED:  # polish the starts of least Huber loss, as the laws do
            starts = sorted(starts, key=lambda t: float(np.sum(huber(HUBER_DELTA,
                                                                      resid(t)))))[:POLISHED]
        return huber_lsq(resid, starts, rp, HUBER_DELTA, constraints.scale, bounds=bounds,
                         jac=jac, max_nfev=steps)

    def _unidentified(self, theta: np.ndarray, data: Data) -> list[str]:
        """The parameters that trade off exactly at ``theta``: the columns of d ln L̂ / d ln θ
        (central differences), each scaled to unit length, have a singular value below
        UNIDENTIFIED (an exact trade-off, A and B of A * B, leaves the differences' error,
        about 1e-10; a weakly pinned one is orders above); those with a share of its singular
        vector above 0.1. Empty when every parameter is its own."""
        import numpy as np

        names = self.param_names
        if len(names) < 2:
            return []

        def logpred(t: np.ndarray) -> np.ndarray:
            with np.errstate(all="ignore"):
                return np.log(self.predict(dict(zip(names, t)), data))

        cols = []
        for i in range(len(names)):
            h = 1e-5 * max(abs(float(theta[i])), 1e-8)
            up, down = theta.copy(), theta.copy()
            up[i] += h
            down[i] -= h
            cols.append((logpred(up) - logpred(down)) / (2 * h) * max(abs(float(theta[i])),
                                                                     1e-8))
        J = np.stack(cols, 1)
        norms = np.linalg.norm(J, axis=0)
        if not np.all(np.isfinite(J)) or np.any(norms == 0):
            return []
        _, s, vt = np.linalg.svd(J / norms, full_matrices=False)
        if s[-1] >= UNIDENTIFIED:
            return []
        return [n for n, share in zip(names, np.abs(vt[-1])) if share > 0.1]

    def _starts(self, data: Data) -> list[np.ndarray]:
        """A grid over the parameters the projection does not solve; for each point, the
        linear ones by non-negative least squares of the loss on their terms."""
        import numpy as np
        from scipy.optimize import nnls

        names, linear = self.param_names, self.linear
        other = [n for n in names if n not in linear]
        axes = [(self.starts[n],) if n in self.starts else
                tuple(v for v in START_GRID if self._inside(n, v)) or (self._middle(n),)
                for n in other]
        grid = thinned_product(axes, MAX_STARTS)
        L = np.asarray(data["loss"], float)
        out = []
        for point in grid:
            base = dict(zip(other, point))
            rest = self.predict({**base, **{k: 0.0 for k in linear}}, data)
            cols = []
            for c in linear:  # each linear term's column: the law at c = 1, others 0
                env = {**base, **{k: (1.0 if k == c else 0.0) for k in linear}}
                cols.append(self.predict(env, data) - rest)
            if cols:
                X = np.stack(cols, 1)
                if not (np.all(np.isfinite(X)) and np.all(np.isfinite(rest))):
                    continue
                coef, _ = nnls(X / L[:, None], (L - rest) / L)  # relative error
                values = {**base, **dict(zip(linear, coef))}
            else:
                values = base
            values.update({n: v for n, v in self.starts.items() if n in linear})
            theta = np.array([values[n] for n in names], float)
            if np.all(np.isfinite(self.predict(dict(zip(names, theta)), data))):
                out.append(theta)
        return out


    def _inside(self, name: str, v: float) -> bool:
        lo, hi = self.bounds_given.get(name, (-math.inf, math.inf))
        return lo < v < hi

    def _middle(self, name: str) -> float:
        lo, hi = self.bounds_given[name]
        return (lo + hi) / 2 if math.isfinite(lo) and math.isfinite(hi) else (
            lo + 1.0 if math.isfinite(lo) else hi - 1.0)


def _rows(data: Data, limit: int) -> Data:
    """``data`` where it has at most ``limit`` rows, else ``limit`` of them evenly spaced."""
    import numpy as np

    from archfit.laws.columns import subset

    n = len(data["loss"])
    return data if n <= limit else subset(data, np.linspace(0, n - 1, limit).astype(int))


def formula_law(text: str, columns: set[str] | list[str] | tuple[str, ...],
                starts: Mapping[str, float] | None = None,
                bounds: Mapping[str, tuple[float, float]] | None = None,
                text_columns: set[str] | list[str] | tuple[str, ...] = ()) -> FormulaLaw:
    """The law of ``text`` over a table with numeric ``columns`` (its variables: the names
    that are columns), with ``starts`` and ``bounds`` for its parameters where given,
    registered in :data:`FORMULAS` under its name. A name that is one of ``text_columns``, or
    one of archfit's own column names the table lacks, is refused: neither is a parameter."""
    from archfit.sweep.store import CANONICAL

    expr = parse(text)
    if words := [n for n in expr.names if n in set(text_columns)]:
        raise FitInputError(f"--formula {expr.text!r} names the text column(s) "
                            f"{', '.join(words)}: a variable is a numeric column")
    absent = [n for n in expr.names if n in CANONICAL and n not in set(columns)
              and n != expr.response]
    if absent:
        raise FitInputError(
            f"--formula {expr.text!r} names {', '.join(absent)}, archfit's column name(s), "
            f"which the table lacks (its numeric columns: {', '.join(sorted(columns))}): "
            f"map yours (--map {absent[0]}=COLUMN) or name the parameter otherwise")
    law = FormulaLaw(expr, expr.variables(set(columns)), starts, bounds)
    FORMULAS[law.name] = law
    return law


def read_formula(name: str, record: Any, where: str) -> FormulaLaw:
    """The law of a fit artifact whose law is ``name``, from its ``extra["formula"]`` record,
    parsed again under the same rules."""
    if not isinstance(record, Mapping) or not isinstance(record.get("text"), str) or not \
            isinstance(record.get("variables"), list):
        raise FitInputError(f"{where}: a formula fit without its formula (extra.formula with "
                            "text and variables); refit with 'archfit fit --formula'")
    try:
        starts = {str(k): float(v) for k, v in (record.get("starts") or {}).items()}
        bounds = {str(k): (float(v[0]), float(v[1]))
                  for k, v in (record.get("bounds") or {}).items()}
    except (TypeError, ValueError, IndexError, AttributeError):
        raise FitInputError(f"{where}: extra.formula's starts or bounds are not numbers; "
                            "refit with 'archfit fit --formula'") from None
    try:
        law = formula_law(record["text"], [str(v) for v in record["variables"]], starts, bounds)
    except FitInputError as e:  # the file is the cause, not an option the user gave
        why = str(e).replace("--formula's", "its formula's").replace("--formula", "its formula")
        raise FitInputError(f"{where}: {why.replace('--start/--bounds', 'its starts or bounds')}"
                            ) from None
    if law.name != name or list(law.variables) != record["variables"]:
        raise FitInputError(f"{where}: its law {name!r} is not its formula's "
                            f"({law.name!r}); refit with 'archfit fit --formula'")
    return law
