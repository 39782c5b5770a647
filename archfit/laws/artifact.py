"""The :class:`Fit` artifact (a fitted or published law), its JSON, and :func:`load_fit`.
numpy-free: ``archfit recommend`` reads fits through this module on its cold path."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from archfit.errors import FitInputError
from archfit.io import atomic_write, jsonable
from archfit.laws.base import Law, get_law
from archfit.laws.published import PUBLISHED

FIT_SCHEMA = "archfit.fit/1"


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
    extra: dict[str, Any] = field(default_factory=dict)  # the law's own payload
    source: str | None = None
    name: str | None = None
    archfit_version: str = ""
    mapping: dict[str, str] = field(default_factory=dict)  # the --map the data was read with
    prior: dict[str, Any] = field(default_factory=dict)  # --fix/--prior: source, values, data-only

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
        return self.law_obj.trust(self).to_dict()

    def predict(self, data: Any = None, **columns: Any) -> Any:
        """Evaluate the law. Loss laws return predicted loss (``params=``, ``tokens=``, ...);
        shape laws return the optimal depth (levine) or ff ratio (ff-ratio) at ``params=``."""
        import numpy as np

        cols: dict[str, Any] = {}
        if data is not None:
            from archfit.store import to_polars

            df = to_polars(data)
            cols.update({c: df[c].to_numpy() for c in df.columns})
        cols.update(columns)
        arrays = {k: np.atleast_1d(np.asarray(v, dtype=float)) for k, v in cols.items()}
        return self.law_obj.predict(self.params, arrays)

    def samples(self) -> dict[str, Any]:
        import numpy as np

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
        lines += [f"  {k}: {v}" for k, v in self.conventions.items()]
        if self.mapping:
            lines.append("  column map: " + ", ".join(f"{k}={v}" for k, v in self.mapping.items()))
        lines += ["", *(_prior_table(self) if self.prior else
                        _table("param", self.params, self.ci, 14, 14))]
        if self.derived:
            lines += ["", *_table("derived", self.derived, self.derived_ci, 26, 12)]
        lines += _diagnostic_lines(self.diagnostics)
        lines += [f"  note: {n}" for n in self.notes]
        lines += ["", "  " + self.law_obj.trust(self).line()]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict[str, Any]:
        return jsonable({
            "schema": FIT_SCHEMA, "law": self.law, "name": self.name,
            "formula": self.law_obj.formula, "params": self.params, "ci": self.ci,
            "cov": self.cov, "param_names": list(self.params), "derived": self.derived,
            "derived_ci": self.derived_ci, "n_points": self.n_points,
            "diagnostics": self.diagnostics, "bootstrap": self.bootstrap, "inputs": self.inputs,
            "notes": self.notes, "conventions": self.conventions, "mapping": self.mapping,
            "prior": self.prior,
            "extra": self.extra, "source": self.source, "archfit_version": self.archfit_version,
            "trust": self.trust,
        })

    def to_json(self, path: str | os.PathLike[str] | None = None, indent: int = 2) -> str:
        text = json.dumps(self.to_dict(), indent=indent, allow_nan=False)
        if path is not None:
            atomic_write(path, text + "\n")
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
            law=law.name, params={k: float(v) for k, v in params.items()},
            ci=dict(d.get("ci") or {}), cov=d.get("cov"), bootstrap=dict(d.get("bootstrap") or {}),
            derived=dict(d.get("derived") or {}), derived_ci=dict(d.get("derived_ci") or {}),
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


def _g(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, (int, float)) and math.isfinite(v):
        return f"{v:.4g}"
    return str(v)


def _table(head: str, values: Mapping[str, float], cis: Mapping[str, Any], w: int, wv: int
           ) -> list[str]:
    lines = [f"  {head:<{w}}{'estimate':>{wv}}{'95% CI low':>14}{'95% CI high':>14}"]
    if head == "param":
        lines.append("  " + "-" * 56)
    for name, val in values.items():
        lo, hi = cis.get(name) or (None, None)
        lines.append(f"  {name:<{w}}{_g(val):>{wv}}{_g(lo):>14}{_g(hi):>14}")
    return lines


def _prior_table(f: Fit) -> list[str]:
    """Prior, data alone and posterior side by side (a fit made with --fix or --prior)."""
    pr, alone = f.prior, f.prior.get("data_only")
    lines = [f"  prior: {pr.get('source') or 'stated'}" + (
        f" (data residual scale {pr['residual_scale']:.3g} in log loss)"
        if pr.get("residual_scale") else ""),
        f"  {'param':<10}{'prior':>22}{'data alone':>14}{'posterior':>12}{'95% CI':>24}",
        "  " + "-" * 82]
    for name, val in f.params.items():
        if name in pr.get("fixed", {}):
            p = "fixed"
        elif name in pr.get("prior", {}):
            m, sd = pr["prior"][name]
            p = f"{_g(m)} ± {_g(sd)}"
        else:
            p = "-"
        a = _g(alone.get(name)) if isinstance(alone, dict) else "-"
        lo, hi = f.ci.get(name) or (None, None)
        lines.append(f"  {name:<10}{p:>22}{a:>14}{_g(val):>12}{'[' + _g(lo) + ', ' + _g(hi) + ']':>24}")
    if isinstance(alone, str):
        lines.append(f"  data alone: {alone}")
    return lines


def _diagnostic_lines(d: Mapping[str, Any]) -> list[str]:
    if not d:
        return []
    lines = [""]
    if "rmse_log" in d:
        lines.append(f"  RMSE (log space) {d['rmse_log']:.4g}   R² (log space) "
                     f"{_g(d.get('r2_log'))}")
    h = d.get("heldout")
    if h and h.get("ok"):
        lines.append("  held-out largest size class: " + ", ".join(
            f"{k}={_g(v)}" for k, v in h.items() if k != "ok"))
    elif h:
        lines.append(f"  held-out check: {h.get('reason')}")
    return lines


def is_fit_artifact(path: str) -> bool:
    """Whether ``path`` holds a fit artifact archfit wrote (so it may be replaced)."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(d, dict) and str(d.get("schema", "")).startswith("archfit.fit/")


def load_fit(name_or_path: str | os.PathLike[str] | Fit) -> Fit:
    """A :class:`Fit` from a published name (``levine2020``, ``epoch2024``, ...) or a JSON file."""
    if isinstance(name_or_path, Fit):
        return name_or_path
    s = os.fspath(name_or_path)
    if s in PUBLISHED:
        import archfit

        d = dict(PUBLISHED[s])
        d["name"] = s
        d.setdefault("archfit_version", archfit.__version__)
        return Fit.from_dict(d, s)
    if not os.path.exists(s) and not s.endswith(".json"):
        raise FitInputError(f"{s!r} is neither a published law ({', '.join(PUBLISHED)}) nor a "
                            "fit file")
    return Fit.from_json(s)
