"""The :class:`Fit` artifact (a fitted or published law), its JSON, and :func:`load_fit`.
The Fit is the inference on a law (:mod:`archfit.laws.base` is the model): draws, intervals,
predictions with bands, the optimum's CI, the verdict and the figure list. ``archfit
recommend`` reads fits through this module; numpy is imported inside the methods that draw or
band (``recommend`` loads it for its near-optimal set)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from archfit.errors import FitError, FitInputError
from archfit.io import atomic_write, jsonable
from archfit.laws.base import Law, get_law
from archfit.laws.published import PUBLISHED
from archfit.laws.inference.trust import Trust

if TYPE_CHECKING:
    from archfit.laws.inference.draws import Draws

FIT_SCHEMA = "archfit.fit/1"


class Summary(str):
    """A fit's summary: the text (it is a ``str``), and HTML for notebooks."""

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(str(self))}</pre>"

    def as_html(self) -> str:
        return self._repr_html_()


BAND_CHUNK = 50_000  # rows per prediction-band pass (its draws x rows array stays small)


@dataclass(repr=False)  # __repr__ below
class Fit:
    """A fitted (or published) law: parameters, uncertainty, diagnostics and provenance."""

    law: str
    params: dict[str, float]
    ci: dict[str, list[float] | None] = field(default_factory=dict)
    cov: list[list[float]] | None = None
    bootstrap: dict[str, Any] = field(default_factory=dict)
    derived: dict[str, float] = field(default_factory=dict)
    derived_ci: dict[str, list[float] | None] = field(default_factory=dict)
    n_points: int | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    inputs: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    conventions: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # the law's own payload
    source: str | None = None
    name: str | None = None
    archfit_version: str = ""
    mapping: dict[str, str] = field(default_factory=dict)  # the --map the data was read with
    prior: dict[str, Any] = field(default_factory=dict)  # --fix/--prior: source, values, data-only

    def __post_init__(self) -> None:
        """A fit names a known law and gives each of its parameters (also after
        ``dataclasses.replace``), so every method below can use them."""
        law = get_law(self.law)
        missing = [n for n in law.param_names if n not in (self.params or {})]
        if missing:
            raise FitInputError(f"a {self.law} fit needs the parameters "
                                f"{', '.join(law.param_names)}; missing: {', '.join(missing)}")

    @property
    def law_obj(self) -> Law:
        return get_law(self.law)

    @property
    def formula(self) -> str:
        return self.law_obj.formula

    @property
    def label(self) -> str:
        return self.name or self.law

    @property
    def trust(self) -> dict[str, Any]:
        """The law's verdict on this fit: ``{"verdict", "reasons", ...}`` (see laws.trust)."""
        return self.verdict().to_dict()

    # ------------------------------------------------------------------ inference
    def draws(self) -> Draws:
        """Parameter draws behind every interval (:class:`~archfit.laws.inference.draws.Draws`,
        with their provenance): the bootstrap's resamples, else (a fit with a covariance and no
        bootstrap) 1000 draws from the Wald normal, else none. Made once per fit and kept while
        its samples and covariance are the same objects."""
        from archfit.laws.inference.draws import Draws

        samples = (self.bootstrap or {}).get("samples") or {}
        key = (self.law, id(self.bootstrap), id(samples), len(next(iter(samples.values()), ())),
               id(self.cov), tuple(self.params.items()), self.source,
               tuple(i.get("path", "") for i in self.inputs))
        cached = self.__dict__.get("_draws")
        if cached is not None and cached[0] == key:
            return cached[1]
        law = self.law_obj
        out = self.bootstrap_params()
        if not out and self.cov:
            import numpy as np

            names = list(law.param_names)
            rng = np.random.default_rng(0)
            X = rng.multivariate_normal([self.params[n] for n in names],
                                        np.asarray(self.cov, float), 1000, check_valid="ignore")
            out = [dict(zip(names, map(float, x))) for x in X if np.all(np.isfinite(x))]
        draws = Draws(out, self.interval_provenance())
        self.__dict__["_draws"] = (key, draws)
        return draws

    def interval_provenance(self) -> dict[str, Any] | None:
        """Where the intervals over this fit's draws come from (:mod:`archfit.interval`):
        ``fitted`` with the method (the bootstrap's resamples of the runs, or the Wald
        covariance's draws); None for a fit with neither (a point estimate)."""
        from archfit.interval import FITTED, record

        k = self.n_bootstrap()
        src = self.source or (", ".join(i.get("path", "") for i in self.inputs) or None)
        if k:
            b = self.bootstrap or {}
            of = (f" of its {b['n_units']} {_plural(b['unit'])}"
                  if b.get("n_units") and b.get("unit") and not b.get("widened") else
                  f" of its {b['n_units']} rows ({b['clusters']} clusters are too few to "
                  f"resample), widened x{b['widened']:.2f} by their design effect"
                  if b.get("widened") else "")
            return record(FITTED, f"percentiles over {k} bootstrap resamples{of}", source=src)
        if self.cov:
            return record(FITTED, "percentiles over 1,000 draws from the normal of the fit's "
                                  "covariance (Wald)", source=src)
        return None

    def band_provenance(self) -> dict[str, Any]:
        """Where :meth:`band`'s prediction intervals come from: ``fitted``, from the fit's
        parameter draws and the scatter of runs about the law (widened where the held-out check
        needed it)."""
        from archfit.interval import FITTED, record

        k = self.n_bootstrap() or (1000 if self.cov else 0)  # what draws() gives
        widen = float(((self.diagnostics or {}).get("heldout") or {}).get("widen") or 1.0)
        return record(FITTED, (f"the fit's {k:,} parameter draws" if k else "the fit's point")
                      + " and the runs' scatter about the law"
                      + (f", widened x{widen:.3g} to cover the held-out sizes" if widen > 1
                         else ""), source=self.label)

    def parameter_provenance(self) -> dict[str, Any] | None:
        """Where the parameters' intervals (:meth:`conf_int`) come from: the fit's draws, else
        the source's stated intervals (``published``), else None."""
        from archfit.interval import PUBLISHED as STATED, record

        own = self.interval_provenance()
        if own is not None or not any(self.ci.values()):
            return own
        return record(STATED, (PUBLISHED.get(self.name or "", {})
                                  .get("ci_method") or "the source's stated 95% intervals"),
                      source=self.source)

    def conf_int(self, alpha: float = 0.05) -> dict[str, tuple[float, float] | None]:
        """Two-sided (1 - ``alpha``) intervals for the parameters: bootstrap percentiles, else
        Wald from the covariance; a published fit without samples gives its stated 95% CI."""
        if not 0 < alpha < 1:
            raise FitInputError(f"alpha must be between 0 and 1 (e.g. 0.05), got {alpha}")
        draws = self.draws()
        out: dict[str, tuple[float, float] | None] = {}
        for n in self.law_obj.param_names:
            ends = draws.ends([d[n] for d in draws], 1 - alpha)
            if ends is not None:
                out[n] = (ends[0], ends[1])
            elif abs(alpha - 0.05) < 1e-12 and self.ci.get(n):
                lo, hi = self.ci[n]  # type: ignore[misc]
                out[n] = (float(lo), float(hi))
            else:
                out[n] = None
        return out

    def se(self) -> dict[str, float | None]:
        """Standard errors: the bootstrap's sd, else the covariance's."""
        out: dict[str, float | None] = {}
        draws = self.draws()
        for i, n in enumerate(self.law_obj.param_names):
            vals = [d[n] for d in draws if math.isfinite(d[n])]
            if len(vals) >= 10:
                m = sum(vals) / len(vals)
                out[n] = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
            elif self.cov:
                out[n] = math.sqrt(max(float(self.cov[i][i]), 0.0))
            else:
                out[n] = None
        return out

    def band(self, columns: Mapping[str, Any], level: float = 0.95, beyond: bool = False
             ) -> tuple[Any, Any, Any]:
        """(predicted, low, high) loss arrays for rows given as columns of numpy arrays: a
        ``level`` prediction interval for a new run (parameter uncertainty and the scatter of
        runs about the law; see :func:`archfit.laws.inference.bands.prediction_band`), widened by the
        factor the held-out check needed to cover its runs, when it needed one. Rows the law
        refuses to predict (:meth:`Law.reach_refusal`) raise FitError, unless ``beyond`` (the
        held-out check, which extrapolates on purpose)."""
        law = self.law_obj
        if not law.predicts_loss:
            from archfit.laws.base import LAWS

            what = {"shape": "the optimal shape", "ff": "the best ff ratio",
                    "hparam": "the best learning rate and batch"}.get(law.role, law.role)
            with_loss = ", ".join(n for n in sorted(LAWS) if LAWS[n].predicts_loss)
            raise FitError(f"{law.name} predicts {what}, not loss; loss intervals come from "
                           f"laws with a loss model ({with_loss})")
        missing = [c for c in law.columns if c != "loss" and c not in columns]
        if missing:
            raise FitInputError(f"predicting with {law.name} needs column(s) "
                                f"{', '.join(missing)}")
        if not beyond:
            self.check_reach(columns)
        from archfit.laws.inference.bands import prediction_band

        draws, scatter = self.draws(), self.diagnostics.get("scatter")
        if not draws and not scatter:
            raise FitError(f"{self.label} carries no bootstrap samples and no scatter of runs, "
                           "so no interval can be made; refit with 'archfit fit' (bootstrap > 0)")
        held = self.diagnostics.get("heldout") or {}
        import numpy as np

        # rows that repeat a configuration are computed once, the rest in chunks: a table of
        # a million rows costs its distinct configurations, in bounded memory
        keys = [c for c in dict.fromkeys((*law.columns, *law.optional_columns, "tokens"))
                if c != "loss" and c in columns]
        cols = [np.asarray(columns[c], float).ravel() for c in keys]
        if len({len(c) for c in cols}) != 1 or not len(cols[0]) or any(
                np.isnan(c).any() for c in cols):  # broadcast, empty or NaN: as given
            return prediction_band(law, self.params, draws, scatter, columns, level,
                                   float(held.get("widen") or 1.0), held.get("reach"))
        X = np.column_stack(cols)
        uniq, inv = np.unique(X, axis=0, return_inverse=True)
        parts = [prediction_band(law, self.params, draws, scatter,
                                 {c: uniq[i:i + BAND_CHUNK, j] for j, c in enumerate(keys)},
                                 level, float(held.get("widen") or 1.0), held.get("reach"))
                 for i in range(0, len(uniq), BAND_CHUNK)]
        inv = inv.ravel()
        return tuple(np.concatenate([p[k] for p in parts])[inv] for k in range(3))  # type: ignore[return-value]

    def predict(self, data: Any = None, interval: float | None = None, **columns: Any) -> Any:
        """Evaluate the law. Loss laws return predicted loss (``params=``, ``tokens=``, ...);
        shape laws without a loss model return the optimal depth (levine) or ff ratio.

        With ``interval`` (e.g. 0.95), a polars frame of the rows with ``predicted``, ``low``
        and ``high``: a prediction interval for a new run, parameter uncertainty and the scatter
        of runs about the law both included (and ``actual`` when the rows have a loss)."""
        import numpy as np

        cols: dict[str, Any] = {}
        if data is not None:
            from archfit.sweep.store import to_polars

            df = to_polars(data)
            cols.update({c: df[c].to_numpy() for c in df.columns})
        cols.update(columns)
        arrays = {k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in cols.items()
                  if np.asarray(v).dtype.kind in "biuf"}
        try:  # a scalar beside a list means that value on every row
            arrays = dict(zip(arrays, np.broadcast_arrays(*arrays.values()))) if arrays else {}
        except ValueError:
            raise FitInputError("the columns to predict have different lengths: give one value "
                                "per row, or a single value for all rows") from None
        if interval is None:
            self.check_reach(arrays)
            return self.law_obj.predict(self.params, arrays)
        import polars as pl

        pred, lo, hi = self.band(arrays, float(interval))
        law = self.law_obj
        out = {k: arrays[k] for k in (*law.columns, *law.optional_columns)
               if k in arrays and k != "loss"}
        out.update(predicted=pred, low=lo, high=hi)
        if "loss" in arrays:
            out["actual"] = arrays["loss"]
        return pl.DataFrame(out)

    def check_reach(self, columns: Mapping[str, Any]) -> None:
        """Raise FitError where the law refuses to predict these rows (outside its reach)."""
        if why := self.law_obj.reach_refusal(self.extra, columns):
            raise FitError(why)

    def optimum(self, N: float, alpha: float = 0.05, values: bool = False,
                conditions: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The law's answer at ``N`` with (1 - ``alpha``) intervals over the parameter draws:
        shape laws the optimal ``n_layer`` and ``d_model`` at N parameters; compute laws
        ``N_opt``, ``D_opt`` and tokens per parameter for a budget of N FLOPs (under the law's
        ``conditions``, e.g. ``{"unique_tokens": U}``). This is the one computation of those
        intervals: ``recommend``, the verdict (:meth:`Law.spread`) and every JSON read it.
        ``values`` adds ``_values``: each quantity's draws."""
        law = self.law_obj
        cond = dict(conditions or {})
        names = law.answer_names
        if not names:
            raise FitError(f"{law.name} has no optimum (a {law.role} law)")
        point = law.answer(self.params, N, **cond)
        cols: list[list[float]] = [[] for _ in names]
        draws = self.draws()
        for p in draws:
            try:
                v = law.answer(p, N, **cond)
            except (ValueError, OverflowError, ZeroDivisionError):
                continue
            for i, x in enumerate(v):
                if math.isfinite(x) and x > 0:
                    cols[i].append(x)
        out: dict[str, Any] = {"at": N, "alpha": alpha}
        for i, n in enumerate(names):
            out[n] = point[i]
            vals = cols[i]
            out[f"{n}_ci"] = draws.ends(vals, 1 - alpha)
        if values:
            out["_values"] = dict(zip(names, cols))
        return out

    def outside_span(self, sizes: Any, factor: float = 10.0) -> str | None:
        """A warning when ``sizes`` (N, in the fit's convention) reach more than ``factor``
        below the smallest run or above the largest the fit saw, naming how far; None inside."""
        span = (self.diagnostics or {}).get("span") or {}
        lo, hi = span.get("params_min"), span.get("params_max")
        vals = [float(x) for x in (sizes if hasattr(sizes, "__iter__") else [sizes])
                if x is not None and float(x) > 0]
        if not lo or not hi or not vals:
            return None
        below, above = lo / min(vals), max(vals) / hi
        if max(below, above) <= factor:
            return None
        where = (f"{below:.3g}x below its smallest run ({lo:.3g})" if below >= above else
                 f"{above:.3g}x above its largest run ({hi:.3g})")
        return (f"{self.label} is used at N {min(vals):.3g}" + (
            f" to {max(vals):.3g}" if max(vals) > min(vals) else "") + f", {where}: outside "
            f"its data by more than {factor:g}x, its predictions there are extrapolations")

    def verdict(self, target: float | None = None,
                conditions: Mapping[str, Any] | None = None) -> Trust:
        """The verdict: on the fit (``target`` None: its evidence within the data, the same
        whatever targets were asked), or on answering at ``target`` (extrapolation, the CI of
        the answer there). The reasons and thresholds are :mod:`archfit.laws.inference.trust`'s."""
        from archfit.laws.inference.trust import verdict

        return verdict(self.law_obj, self, target, conditions)

    def n_bootstrap(self) -> int:
        """How many bootstrap resamples the fit carries (what :meth:`bootstrap_params` would
        return, counted without building them)."""
        names = self.law_obj.param_names
        samples = (self.bootstrap or {}).get("samples") or {}
        return len(samples[names[0]]) if all(n in samples for n in names) else 0

    def bootstrap_params(self, limit: int | None = None) -> list[dict[str, float]]:
        """The bootstrap's resamples as parameter dicts (none when the fit carries no samples)."""
        names = self.law_obj.param_names
        samples = (self.bootstrap or {}).get("samples") or {}
        if not all(n in samples for n in names):
            return []
        k = len(samples[names[0]])
        return [{n: float(samples[n][i]) for n in names}
                for i in range(k if limit is None else min(k, limit))]

    def optimum_ci(self, N: float, alpha: float = 0.05) -> dict[str, list[float]] | None:
        """The (1 - ``alpha``) interval of the optimal depth and width at N: the one
        :meth:`optimum` computes (the verdict and the JSON quote the same)."""
        opt = self.optimum(N, alpha)
        if opt.get("n_layer_ci") is None:
            return None
        return {"n_layer": list(opt["n_layer_ci"]), "d_model": list(opt["d_model_ci"])}

    def figures(self) -> list[Any]:
        """The figures this fit can draw: names from ``GENERIC_FIGURES`` and the law's
        ``own_figures`` whose ``when`` holds for this fit."""
        law = self.law_obj
        out: list[Any] = []
        out += list(law.kind_figures)
        out += [f for f in law.own_figures if f.when is None or f.when(self)]
        if self.diagnostics.get("residuals"):
            out.append("residuals")
        return out

    def summary(self) -> Summary:
        """The fit in words and tables: ``str()`` for a terminal, HTML in a notebook."""
        return Summary(self._summary_text())

    def __repr__(self) -> str:
        unit = (self.bootstrap or {}).get("n_units")
        return (f"<Fit {self.label}: {self.n_points} rows"
                + (f", {unit} runs" if unit else "")
                + f", verdict {self.verdict().verdict}>")

    def _repr_html_(self) -> str:  # a notebook's view (archfit.laws.inference.summary.fit_html)
        from archfit.laws.inference.summary import fit_html
        return fit_html(self)

    def _summary_text(self) -> str:
        law = self.law_obj
        lines = [f"archfit fit: {self.law}" + (f" ({self.name})" if self.name else ""),
                 f"  {law.formula}"]
        if self.source:
            lines.append(f"  source: {self.source}")
        b = self.bootstrap or {}
        if self.n_points is not None:
            lines.append(f"  rows: {self.n_points}" + (
                f", bootstrap resamples: {b.get('n_ok')} of {b.get('n')}" if b.get("n") else ""))
        if b.get("unit"):
            lines.append(f"  bootstrap unit: {b['unit']} ({b.get('n_units')} units)")
        if b.get("rule"):
            lines.append(f"  bootstrap resamples drawn by the rule {b['rule']}: "
                         + (f"settled at {b['n']:,}" if b.get("settled") else
                            f"not settled at {b['n']:,}") + f" (Monte-Carlo error of the ends "
                         f"{b.get('mc_error', float('nan')):.1%} of the width"
                         + _to_settle(b) + ")")
        lines += [f"  {k}: {v}" for k, v in self.conventions.items()]
        if self.mapping:
            lines.append("  column map: " + ", ".join(f"{k}={v}" for k, v in self.mapping.items()))
        from archfit.interval import describe
        from archfit.laws.inference.summary import cell_lines, diagnostic_lines, prior_table, table

        lines += ["", *(prior_table(self) if self.prior else
                        table("param", self.params, self.ci, 14, 14))]
        if self.derived:
            lines += ["", *table("derived", self.derived, self.derived_ci, 26, 12)]
        prov = self.parameter_provenance()
        lines.append(f"  each interval: {describe(prov)}" if prov else
                     "  no intervals: the fit has no bootstrap draws or covariance")
        if self.extra.get("cells"):
            lines += cell_lines(self.extra["cells"])
        lines += diagnostic_lines(self.diagnostics)
        lines += [f"  note: {n}" for n in self.notes]
        lines += ["", "  fit " + self.verdict().line()]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return jsonable({
            "schema": FIT_SCHEMA, "law": self.law, "name": self.name,
            "formula": self.law_obj.formula, "params": self.params,
            "ci": self._intervals(self.ci, self.parameter_provenance()),
            "cov": self.cov, "param_names": list(self.params), "derived": self.derived,
            "derived_ci": self._intervals(self.derived_ci, self.interval_provenance()),
            "n_points": self.n_points,
            "diagnostics": self.diagnostics, "bootstrap": self.bootstrap, "inputs": self.inputs,
            "notes": self.notes, "conventions": self.conventions, "mapping": self.mapping,
            "prior": self.prior,
            "extra": self.extra, "source": self.source, "archfit_version": self.archfit_version,
            "trust": self.trust,
        })

    @staticmethod
    def _intervals(cis: Mapping[str, Any], prov: dict[str, Any] | None) -> dict[str, Any]:
        """A table of pairs as a table of :class:`~archfit.interval.Interval` (the artifact's
        JSON), None where a pair is missing or nothing records where it came from."""
        from archfit.interval import Interval

        return {k: Interval.of(v, prov) for k, v in (cis or {}).items()}

    def to_frame(self, alpha: float = 0.05) -> Any:
        """The parameters and derived quantities as a polars frame: name, kind (parameter or
        derived), value, the (1 - ``alpha``) interval and, for parameters, the standard error."""
        import polars as pl

        ci, se = self.conf_int(alpha), self.se()
        rows = [{"name": n, "kind": "parameter", "value": float(v),
                 "low": (ci.get(n) or (None, None))[0], "high": (ci.get(n) or (None, None))[1],
                 "se": se.get(n)} for n, v in self.params.items()]
        for k, v in self.derived.items():
            dci = (self.derived_ci or {}).get(k) or (None, None)
            rows.append({"name": k, "kind": "derived", "value": float(v), "low": dci[0],
                         "high": dci[1], "se": None})
        return pl.DataFrame(rows, schema={"name": pl.Utf8, "kind": pl.Utf8, "value": pl.Float64,
                                          "low": pl.Float64, "high": pl.Float64,
                                          "se": pl.Float64})

    def to_json(self, path: str | os.PathLike[str] | None = None, indent: int = 2) -> str:
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            atomic_write(path, text + "\n")
        return text

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "fit") -> Fit:
        if not isinstance(d, Mapping) or "law" not in d or "params" not in d:
            raise FitInputError(f"{where}: not an archfit fit (no 'law' and 'params' keys)")
        schema = d.get("schema")
        if schema is not None and schema != FIT_SCHEMA:
            raise FitInputError(f"{where}: fit schema {schema!r} is not one this archfit reads "
                                f"({FIT_SCHEMA}); refit with this version ('archfit fit')")
        if str(d["law"]).startswith("formula: "):  # parsed again under the same rules
            from archfit.laws.base import formula_source

            law = formula_source().read(str(d["law"]), (d.get("extra") or {}).get("formula"),
                                        where)
        else:
            law = get_law(str(d["law"]))
        params = d["params"]
        if not isinstance(params, Mapping):
            raise FitInputError(f"{where}: 'params' must be a table of numbers, got "
                                f"{type(params).__name__}")
        missing = [p for p in law.param_names if p not in params or params[p] is None]
        if missing:
            raise FitInputError(f"{where}: law {law.name!r} needs params {', '.join(missing)}")
        extra = sorted(set(map(str, params)) - set(law.param_names))
        if extra:
            raise FitInputError(f"{where}: law {law.name!r} has no params {', '.join(extra)} (its "
                                f"params are {', '.join(law.param_names)}); is 'law' the law "
                                "this fit was made with? Refit with 'archfit fit'")
        for k, v in params.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise FitInputError(f"{where}: params.{k} is {type(v).__name__} {v!r}; a fit's "
                                    "constants are finite numbers (refit with 'archfit fit')")
            why = None if (v == 0 and k in law.folded_without_tokens) else law.domain_error(k, v)
            if why:
                raise FitInputError(f"{where}: params.{k} is {v!r}: {why} (refit with 'archfit "
                                    "fit')")
        _check_samples(d.get("bootstrap"), law, where)
        _check_estimate_among_draws(params, d.get("bootstrap"), where)
        raw = d.get("ci") or {}
        if not isinstance(raw, Mapping):
            raise FitInputError(f"{where}: ci is {raw!r}; a fit's ci is a table of intervals, "
                                "one per parameter")
        ci = {str(k): _pair(v, f"{where}: ci.{k}") for k, v in raw.items()}
        derived_ci = {str(k): _pair(v, f"{where}: derived_ci.{k}")
                      for k, v in (d.get("derived_ci") or {}).items()}
        return cls(
            law=law.name, params={k: float(v) for k, v in params.items()},
            ci=ci, cov=d.get("cov"), bootstrap=dict(d.get("bootstrap") or {}),
            derived=dict(d.get("derived") or {}),
            derived_ci=derived_ci,
            n_points=d.get("n_points"), diagnostics=dict(d.get("diagnostics") or {}),
            inputs=list(d.get("inputs") or []), notes=list(d.get("notes") or []),
            conventions=dict(d.get("conventions") or {}), extra=dict(d.get("extra") or {}),
            source=d.get("source"), name=d.get("name"),
            archfit_version=str(d.get("archfit_version") or ""),
            mapping={str(k): str(v) for k, v in (d.get("mapping") or {}).items()},
            prior=dict(d.get("prior") or {}),
        )

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike[str]) -> Fit:
        s = os.fspath(text_or_path)
        if s.lstrip().startswith("{"):
            where, text = "fit", s
        else:
            where = s
            if not os.path.exists(s):
                raise FitInputError(f"{s}: no such fit file; make one with 'archfit fit ... --out "
                                    f"{s}' or name a published law ('archfit laws')")
            try:
                with open(s, encoding="utf-8") as f:
                    text = f.read()
            except (OSError, UnicodeDecodeError) as e:
                raise FitInputError(f"{s}: cannot read: {getattr(e, 'strerror', None) or e}"
                                    ) from None
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise FitInputError(f"{where}: not JSON ({e.msg} at line {e.lineno}); is this a fit "
                                "artifact written by 'archfit fit --out'?") from None
        return cls.from_dict(d, where)


def is_fit_artifact(path: str) -> bool:
    """Whether ``path`` holds a fit artifact archfit wrote (so it may be replaced)."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(d, dict) and str(d.get("schema", "")).startswith("archfit.fit/")


def load_fit(name_or_path: str | os.PathLike[str] | Fit | Mapping[str, Any]) -> Fit:
    """A :class:`Fit` from a published name (``levine2020``, ``epoch2024``, ...), a JSON file,
    or the mapping a fit's JSON holds (``Fit.to_dict()``)."""
    if isinstance(name_or_path, Fit):
        return name_or_path
    if isinstance(name_or_path, Mapping):
        return Fit.from_dict(dict(name_or_path), "the fit given as a mapping")
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise FitInputError(f"a fit is a Fit, a published name, a fit file or a fit's mapping, "
                            f"not {type(name_or_path).__name__}")
    s = os.fspath(name_or_path)
    if s in PUBLISHED:
        from archfit._version import __version__

        d = dict(PUBLISHED[s])
        d["name"] = s
        d.setdefault("archfit_version", __version__)
        return Fit.from_dict(d, s)
    if not os.path.exists(s) and not s.endswith(".json"):
        raise FitInputError(f"{s!r} is neither a published law ({', '.join(PUBLISHED)}) nor a "
                            "fit file")
    return Fit.from_json(s)


def _plural(unit: str) -> str:
    """A bootstrap unit's name in the plural: its noun takes the s, not its parenthesis
    ("training run (run_id)" -> "training runs (run_id)"; "(size, tokens) cell: the runs of
    ..." -> "(size, tokens) cells: the runs of ...")."""
    head, colon, tail = unit.partition(":")  # "(size, tokens) cell: the runs of ..."
    noun, paren, rest = head.partition(" (")
    return f"{noun}s{paren}{rest}{colon}{tail}"


def _check_estimate_among_draws(params: Mapping[str, Any], boot: Any, where: str) -> None:
    """Each estimate within its own bootstrap draws, give or take their whole range again:
    the draws are refits warm-started at the estimate, so one far outside them (alpha edited
    to 1e300, the draws left as they were) would predict with an interval that is not its
    own. One line naming the parameter."""
    samples = (boot or {}).get("samples") if isinstance(boot, Mapping) else None
    if not isinstance(samples, Mapping):
        return
    for name, v in params.items():
        col = samples.get(name)
        if not isinstance(col, list) or len(col) < 10:
            continue
        lo, hi = min(col), max(col)
        reach = (hi - lo) + 1e-6 * max(abs(lo), abs(hi), 1e-300)
        if not lo - reach <= v <= hi + reach:
            raise FitInputError(f"{where}: params.{name} is {v:.6g}, far outside its own "
                                f"{len(col):,} bootstrap draws ({lo:.4g} to {hi:.4g}): the file "
                                "was edited, or its draws are another fit's; refit with "
                                "'archfit fit'")


def _check_samples(boot: Any, law: Any, where: str) -> None:
    """A fit's bootstrap draws as :meth:`Fit.bootstrap_params` reads them: a table of the law's
    parameters, each a list of finite numbers, all of one length; else one line naming it."""
    if boot is None:
        return
    if not isinstance(boot, Mapping):
        raise FitInputError(f"{where}: bootstrap is {type(boot).__name__}; it is a table")
    samples = boot.get("samples")
    if samples is None:
        return
    if not isinstance(samples, Mapping):
        raise FitInputError(f"{where}: bootstrap.samples is {type(samples).__name__}; it is a "
                            "table of the law's parameters, each a list of numbers")
    lengths = set()
    for name in law.param_names:
        col = samples.get(name)
        if col is None:
            continue
        if not isinstance(col, list) or not all(
                not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)
                for x in col):
            raise FitInputError(f"{where}: bootstrap.samples.{name} is not a list of finite "
                                "numbers (refit with 'archfit fit')")
        lengths.add(len(col))
    if len(lengths) > 1:
        raise FitInputError(f"{where}: bootstrap.samples hold {min(lengths)} to {max(lengths)} "
                            "draws per parameter; each parameter has one per resample (refit "
                            "with 'archfit fit')")


def _pair(v: Any, where: str) -> list[Any] | None:
    """An interval as the artifact stores it (its JSON, or a pair from an older artifact) as
    the fit holds it, [low, high], once :class:`~archfit.interval.Interval` accepts it (a
    known kind, a level in (0, 1), finite ends in order); else one line naming it."""
    from archfit.errors import IntervalError
    from archfit.interval import FITTED, Interval

    if v is None:
        return None
    try:
        if isinstance(v, Mapping):
            iv = Interval.from_json(v)
        elif isinstance(v, (list, tuple)) and len(v) == 2:
            iv = Interval(v[0], v[1], FITTED, "an older artifact's pair")
        else:
            raise IntervalError("an interval is an interval's JSON or a pair of numbers "
                                "[low, high]")
    except IntervalError as e:
        raise FitInputError(f"{where} is {v!r}: {e}") from None
    return [iv.low, iv.high]


def _to_settle(b: Mapping[str, Any]) -> str:
    """The bootstrap record's count that would settle an unsettled auto rule, as a clause."""
    n, most = b.get("to_settle"), b.get("bootstrap_max")
    if not n:
        return ""
    if most and n > most:
        return (f"; more than {most:,} resamples would be needed to settle it: the runs do "
                "not pin every parameter")
    return f"; about {n:,} would settle it: --bootstrap {n}"
