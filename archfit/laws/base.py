"""The law registry, the fit driver (point estimate, bootstrap, diagnostics) and the Fit object."""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Mapping, Sequence

from archfit._lazy import lazy

np = lazy("numpy")

from archfit.errors import FitError, FitInputError
from archfit.tables import RunTable, finite_positive, fmt_sci, read_runs, size_classes

FIT_SCHEMA = "archfit.fit/1"
Data = dict[str, Any]


@dataclass
class Estimate:
    """What one law fit returns: parameter vector, optional covariance, law-specific extras."""

    params: np.ndarray
    cov: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Law:
    """A scaling law. Subclasses set the class attributes and implement :meth:`fit_point`.

    Register a new law with :func:`register`; nothing else needs editing.
    """

    name: ClassVar[str]
    formula: ClassVar[str]
    description: ClassVar[str]
    columns: ClassVar[tuple[str, ...]]
    param_names: ClassVar[tuple[str, ...]]
    min_points: ClassVar[int]
    kind: ClassVar[str] = "loss"  # "loss": predicts loss; "shape": predicts an optimal shape
    default_targets: ClassVar[tuple[float, ...]] = ()

    # -- data
    def prepare(self, frame: Any) -> Data:
        missing = [c for c in self.columns if c not in frame.columns]
        if missing:
            raise FitInputError(
                f"law {self.name!r} needs column(s) {', '.join(missing)}; have "
                f"{', '.join(frame.columns)}; map foreign names with --map {missing[0]}=COLUMN")
        data: Data = {}
        for c in frame.columns:
            arr = frame[c].to_numpy()
            data[c] = arr if arr.dtype.kind in "OUS" else arr.astype(float)
        for c in self.columns:
            finite_positive(c, data[c])
        n = len(data["loss"])
        if n < self.min_points:
            raise FitError(f"law {self.name!r} needs at least {self.min_points} runs, got {n}; "
                           "add runs or choose a simpler law")
        return data

    def classes(self, data: Data) -> np.ndarray:
        return size_classes(data["params"], data.get("target_params"))

    def groups(self, data: Data) -> np.ndarray:
        """Bootstrap units: one per shape when several seeds share a shape, else one per run."""
        keys = [k for k in ("params", "n_layer", "d_model", "d_ff", "tokens", "lr") if k in data]
        if "seed" in data and len(np.unique(data["seed"])) > 1 and keys:
            stacked = np.stack([data[k] for k in keys], axis=1)
            _, g = np.unique(stacked, axis=0, return_inverse=True)
            return g.ravel()
        return np.arange(len(data["loss"]))

    # -- to implement
    def fit_point(self, data: Data, start: np.ndarray | None = None, *,
                  full: bool = True) -> Estimate:
        raise NotImplementedError

    def predict(self, params: Mapping[str, float], data: Mapping[str, Any]) -> np.ndarray:
        raise NotImplementedError

    def derived(self, params: Mapping[str, float], targets: Sequence[float],
                extra: Mapping[str, Any] | None = None) -> dict[str, float]:
        return {}

    # -- diagnostics (loss laws: residuals of log loss)
    def residuals(self, params: Mapping[str, float], data: Data,
                  extra: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """(observed, fitted) in log space."""
        pred = self.predict(params, data)
        return np.log(data["loss"]), np.log(pred)

    def heldout(self, data: Data) -> dict[str, Any]:
        """Fit on all but the largest size class, report the error on the largest."""
        cls = self.classes(data)
        top = cls.max()
        train = {k: v[cls != top] for k, v in data.items()}
        test = {k: v[cls == top] for k, v in data.items()}
        try:
            if len(train["loss"]) < self.min_points:
                raise FitError("too few runs below the largest size class")
            est = self.fit_point(train, full=False)
        except FitError as e:
            return {"ok": False, "reason": f"held-out fit failed: {e}"}
        p = dict(zip(self.param_names, est.params))
        obs = np.log(test["loss"])
        pred = np.log(self.predict(p, test))
        return {
            "ok": True,
            "held_out_class_params": float(np.median(test["params"])),
            "n_train": int(len(train["loss"])),
            "n_test": int(len(obs)),
            "rmse_log": float(np.sqrt(np.mean((obs - pred) ** 2))),
            "mean_rel_error": float(np.mean(np.exp(pred - obs) - 1)),
        }


LAWS: dict[str, Law] = {}


def register(cls: type[Law]) -> type[Law]:
    """Class decorator: make a law available to ``fit`` and ``archfit fit --law``."""
    LAWS[cls.name] = cls()
    return cls


def get_law(name: str) -> Law:
    from archfit.laws import loss_laws, shape_laws  # noqa: F401  (registers the laws)

    try:
        return LAWS[name]
    except KeyError:
        raise FitError(f"unknown law {name!r}; choose one of {', '.join(sorted(LAWS))}") from None


# ============================================================================ the Fit object
@dataclass
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
    extra: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    name: str | None = None
    archfit_version: str = ""

    @property
    def law_obj(self) -> Law:
        return get_law(self.law)

    @property
    def formula(self) -> str:
        return self.law_obj.formula

    def predict(self, data: Any = None, **columns: Any) -> np.ndarray:
        """Evaluate the law. Loss laws return predicted loss (``params=``, ``tokens=``, ...);
        shape laws return the optimal depth (levine) or ff ratio (ff-ratio) at ``params=``."""
        cols: dict[str, Any] = {}
        if data is not None:
            from archfit.tables import to_polars

            df = to_polars(data)
            cols.update({c: df[c].to_numpy() for c in df.columns})
        cols.update(columns)
        arrays = {k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in cols.items()}
        return self.law_obj.predict(self.params, arrays)

    def samples(self) -> dict[str, np.ndarray]:
        s = self.bootstrap.get("samples") or {}
        return {k: np.asarray(v, dtype=float) for k, v in s.items()}

    def summary(self) -> str:
        law = self.law_obj
        lines = [f"archfit fit: {self.law}" + (f" ({self.name})" if self.name else ""),
                 f"  {law.formula}"]
        if self.source:
            lines.append(f"  source: {self.source}")
        if self.n_points is not None:
            lines.append(f"  runs: {self.n_points}" + (
                f", bootstrap resamples: {self.bootstrap.get('n_ok')} of "
                f"{self.bootstrap.get('n')}" if self.bootstrap.get("n") else ""))
        for k, v in self.conventions.items():
            lines.append(f"  {k}: {v}")
        lines.append("")
        lines.append(f"  {'param':<14}{'estimate':>14}{'95% CI low':>14}{'95% CI high':>14}")
        lines.append("  " + "-" * 56)
        for name, val in self.params.items():
            ci = self.ci.get(name)
            lo, hi = (ci if ci else (None, None))
            lines.append(f"  {name:<14}{_g(val):>14}{_g(lo):>14}{_g(hi):>14}")
        if self.derived:
            lines.append("")
            lines.append(f"  {'derived':<26}{'estimate':>12}{'95% CI low':>13}{'95% CI high':>13}")
            for name, val in self.derived.items():
                ci = self.derived_ci.get(name)
                lo, hi = (ci if ci else (None, None))
                lines.append(f"  {name:<26}{_g(val):>12}{_g(lo):>13}{_g(hi):>13}")
        d = self.diagnostics
        if d:
            lines.append("")
            if "rmse_log" in d:
                lines.append(f"  RMSE (log space) {d['rmse_log']:.4g}   R² (log space) "
                             f"{_g(d.get('r2_log'))}")
            h = d.get("heldout")
            if h:
                if h.get("ok"):
                    parts = [f"{k}={_g(v)}" for k, v in h.items() if k != "ok"]
                    lines.append("  held-out largest size class: " + ", ".join(parts))
                else:
                    lines.append(f"  held-out check: {h.get('reason')}")
        for n in self.notes:
            lines.append(f"  note: {n}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        from archfit.cli.common import jsonable

        return jsonable({
            "schema": FIT_SCHEMA,
            "law": self.law,
            "name": self.name,
            "formula": self.law_obj.formula,
            "params": self.params,
            "ci": self.ci,
            "cov": self.cov,
            "param_names": list(self.params),
            "derived": self.derived,
            "derived_ci": self.derived_ci,
            "n_points": self.n_points,
            "diagnostics": self.diagnostics,
            "bootstrap": self.bootstrap,
            "inputs": self.inputs,
            "notes": self.notes,
            "conventions": self.conventions,
            "extra": self.extra,
            "source": self.source,
            "archfit_version": self.archfit_version,
        })

    def to_json(self, path: str | os.PathLike[str] | None = None, indent: int = 2) -> str:
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            atomic_write_text(os.fspath(path), text + "\n")
        return text

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "fit") -> Fit:
        if not isinstance(d, Mapping) or "law" not in d or "params" not in d:
            raise FitInputError(f"{where}: not an archfit fit (no 'law' and 'params' keys)")
        law = get_law(str(d["law"]))
        params = d["params"]
        missing = [p for p in law.param_names if p not in params or params[p] is None]
        if missing:
            raise FitInputError(f"{where}: law {law.name!r} needs params {', '.join(missing)}")
        return cls(
            law=law.name,
            params={k: float(v) for k, v in params.items()},
            ci=dict(d.get("ci") or {}),
            cov=d.get("cov"),
            bootstrap=dict(d.get("bootstrap") or {}),
            derived=dict(d.get("derived") or {}),
            derived_ci=dict(d.get("derived_ci") or {}),
            n_points=d.get("n_points"),
            diagnostics=dict(d.get("diagnostics") or {}),
            inputs=list(d.get("inputs") or []),
            notes=list(d.get("notes") or []),
            conventions=dict(d.get("conventions") or {}),
            extra=dict(d.get("extra") or {}),
            source=d.get("source"),
            name=d.get("name"),
            archfit_version=str(d.get("archfit_version") or ""),
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
            except OSError as e:
                raise FitInputError(f"{s}: cannot read: {e.strerror}") from None
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise FitInputError(f"{where}: not JSON ({e.msg} at line {e.lineno}); is this a fit "
                                "artifact written by 'archfit fit --out'?") from None
        return cls.from_dict(d, where)


def _g(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, (int, float)) and math.isfinite(v):
        return f"{v:.4g}"
    return str(v)


def atomic_write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file in the same folder, then rename."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file ordinary permissions
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# ============================================================================ the driver
def fit(
    frame: Any = None,
    law: str = "chinchilla",
    *,
    paths: Sequence[str] | None = None,
    mapping: Mapping[str, str] | None = None,
    bootstrap: int = 200,
    seed: int = 0,
    targets: Sequence[float] | None = None,
    heldout: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> Fit:
    """Fit ``law`` to a table of runs (polars or pandas ``frame``, or files in ``paths``).

    Returns a :class:`Fit` with parameters, 95% CIs (percentile bootstrap over runs, or over
    shapes when several seeds share one; Wald intervals from the covariance when
    ``bootstrap=0`` and the law has one), derived quantities at ``targets``, and diagnostics
    (RMSE and R² in log space, held-out check on the largest size class).
    """
    import archfit

    if frame is None and paths is None:
        raise FitInputError("give a frame or paths to fit")
    # a RunTable (already read, e.g. filtered by the CLI) keeps its sources, inputs and notes
    table: RunTable = frame if isinstance(frame, RunTable) else read_runs(
        paths or [], mapping, frame=frame)
    lw = get_law(law)
    if bootstrap < 0:
        raise FitInputError(f"bootstrap must be >= 0, got {bootstrap}")
    data = lw.prepare(table.frame)
    targets = list(targets) if targets else list(lw.default_targets)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1), np.errstate(all="ignore"):
        return _fit(lw, table, data, targets, bootstrap, seed, heldout, progress,
                    archfit.__version__)


def _fit(lw: Law, table: RunTable, data: Data, targets: list[float], bootstrap: int, seed: int,
         heldout: bool, progress: Callable[[int, int], None] | None, version: str) -> Fit:
    est = lw.fit_point(data)
    _check_finite(lw, est.params)
    params = {n: float(v) for n, v in zip(lw.param_names, est.params)}
    derived = lw.derived(params, targets, est.extra)

    # diagnostics
    obs, fitted = lw.residuals(params, data, est.extra)
    resid = obs - fitted
    ss_tot = float(np.sum((obs - obs.mean()) ** 2))
    diagnostics: dict[str, Any] = {
        "rmse_log": float(np.sqrt(np.mean(resid ** 2))),
        "r2_log": float(1 - np.sum(resid ** 2) / ss_tot) if ss_tot > 0 else None,
        "residuals": resid.tolist(),
        "fitted_log": fitted.tolist(),
        "residual_space": est.extra.get("residual_space", "log loss"),
    }
    if heldout:
        diagnostics["heldout"] = lw.heldout(data)

    # uncertainty
    ci: dict[str, list[float] | None] = {n: None for n in lw.param_names}
    derived_ci: dict[str, list[float] | None] = {k: None for k in derived}
    boot_info: dict[str, Any] = {}
    if bootstrap > 0:
        samples, dsamples, n_failed = _bootstrap(lw, data, est, bootstrap, seed, targets,
                                                 progress)
        n_ok = len(samples)
        boot_info = {"n": bootstrap, "n_ok": n_ok, "n_failed": n_failed, "seed": seed,
                     "unit": "shape" if len(np.unique(lw.groups(data))) < len(data["loss"])
                     else "run",
                     "samples": {n: samples[:, i].tolist() for i, n in enumerate(lw.param_names)}
                     if n_ok else {}}
        if n_ok >= max(10, bootstrap // 4):
            for i, n in enumerate(lw.param_names):
                ci[n] = np.percentile(samples[:, i], [2.5, 97.5]).tolist()
            for k in derived:
                vals = np.asarray([d.get(k, np.nan) for d in dsamples], dtype=float)
                vals = vals[np.isfinite(vals)]
                if len(vals) >= 10:
                    derived_ci[k] = np.percentile(vals, [2.5, 97.5]).tolist()
                    boot_info["samples"][k] = vals.tolist()
        else:
            table.notes.append(f"only {n_ok} of {bootstrap} bootstrap resamples converged: no "
                               "bootstrap CIs (the fit is fragile; add runs)")
    if est.cov is not None and all(v is None for v in ci.values()):
        se = np.sqrt(np.clip(np.diag(est.cov), 0, None))
        for i, n in enumerate(lw.param_names):
            if np.isfinite(se[i]):
                ci[n] = [params[n] - 1.96 * float(se[i]), params[n] + 1.96 * float(se[i])]
        table.notes.append("CIs are Wald intervals (±1.96 SE from the covariance)")

    conventions = {"params": f"column {table.sources.get('params', 'params')!r}"}
    if table.sources.get("params") == "params_non_embedding":
        conventions["params"] += " (Kaplan's N: non-embedding parameters)"
    if "tokens" in table.sources:
        src = table.sources["tokens"]
        conventions["tokens"] = ("D = FLOPs / (6 N)" if src.startswith("flops") else
                                 f"column {src!r} (training tokens)")
    conventions["loss"] = f"column {table.sources.get('loss', 'loss')!r} (nats/token)"
    return Fit(
        law=lw.name, params=params, ci=ci,
        cov=est.cov.tolist() if est.cov is not None else None,
        bootstrap=boot_info, derived=derived, derived_ci=derived_ci,
        n_points=int(len(data["loss"])), diagnostics=diagnostics, inputs=table.inputs,
        notes=table.notes + list(est.extra.get("notes", [])), conventions=conventions,
        extra={k: v for k, v in est.extra.items() if k not in ("notes", "residual_space")},
        archfit_version=version,
    )


def _check_finite(lw: Law, params: np.ndarray) -> None:
    if not np.all(np.isfinite(params)):
        raise FitError(f"law {lw.name!r} did not converge to finite parameters; check the data "
                       "spans enough sizes (and tokens) for this law")


def _bootstrap(lw: Law, data: Data, est: Estimate, n: int, seed: int,
               targets: Sequence[float],
               progress: Callable[[int, int], None] | None,
               workers: int | None = None) -> tuple[np.ndarray, list, int]:
    """Refit on ``n`` resamples of the bootstrap units (warm-started at the point estimate).
    Resamples are drawn up front from ``seed``, so results do not depend on the worker count;
    with several cores they are spread over processes."""
    rng = np.random.default_rng(seed)
    groups = lw.groups(data)
    uniq = np.unique(groups)
    members = [np.flatnonzero(groups == g) for g in uniq]
    picks = [np.concatenate([members[j] for j in rng.integers(0, len(uniq), len(uniq))])
             for _ in range(n)]
    if workers is None:
        workers = min(os.cpu_count() or 1, 8) if n >= 64 else 1
    n_chunks = min(n, max(1, workers) * 8)
    chunks = [c for c in np.array_split(np.arange(n), n_chunks) if len(c)]
    results: list[tuple[np.ndarray | None, dict[str, float]]] = []
    done = 0
    if workers > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        from concurrent.futures.process import BrokenProcessPool

        # workers only run numpy/scipy: fork is safe for them and starts in milliseconds
        method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        try:
            with ProcessPoolExecutor(max_workers=workers,
                                     mp_context=mp.get_context(method)) as pool:
                futs = [pool.submit(_boot_chunk, lw.name, data, est.params,
                                    [picks[i] for i in c], list(targets)) for c in chunks]
                for fut in futs:
                    part = fut.result()
                    results.extend(part)
                    done += len(part)
                    if progress is not None:
                        progress(done, n)
            chunks = []
        except (BrokenProcessPool, OSError):
            results, done = [], 0  # no usable process pool here: fall back to one process
    for c in chunks:
        part = _boot_chunk(lw.name, data, est.params, [picks[i] for i in c], list(targets))
        results.extend(part)
        done += len(part)
        if progress is not None:
            progress(done, n)
    ok = [(p, d) for p, d in results if p is not None]
    params = np.asarray([p for p, _ in ok], dtype=float).reshape(-1, len(lw.param_names))
    return params, [d for _, d in ok], len(results) - len(ok)


def _boot_chunk(law_name: str, data: Data, start: np.ndarray, picks: list[np.ndarray],
                targets: list[float]) -> list[tuple[np.ndarray | None, dict[str, float]]]:
    from threadpoolctl import threadpool_limits

    lw = get_law(law_name)
    out: list[tuple[np.ndarray | None, dict[str, float]]] = []
    # the fits are tiny: BLAS threads only contend (3x slower with 2 threads on 2 cores)
    with np.errstate(all="ignore"), threadpool_limits(1):
        for idx in picks:
            sub = {k: v[idx] for k, v in data.items()}
            try:
                e = lw.fit_point(sub, start=start, full=False)
                if not np.all(np.isfinite(e.params)):
                    raise FitError("non-finite")
            except (FitError, np.linalg.LinAlgError, ValueError, FloatingPointError):
                out.append((None, {}))
                continue
            p = dict(zip(lw.param_names, e.params))
            out.append((e.params, lw.derived(p, targets, e.extra)))
    return out


def derived_name(quantity: str, target: float) -> str:
    return f"{quantity}@{fmt_sci(target)}"
