"""--fix, --tie and --prior: checking them against a law (:func:`constraints_for`), the point
estimate under them beside the data-only fit whose residual scale weighs the prior
(:func:`point_estimate`), and the record a fit keeps of them (:func:`prior_record`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from archfit.errors import FitError, FitInputError
from archfit.laws.base import Constraints, Data, Estimate, Law


def constraints_for(lw: Law, fix: dict[str, float] | None, prior: Any,
                    widths: dict[str, float] | None, tie: dict[str, str] | None = None
                    ) -> Constraints:
    """Check and resolve ``fix``, ``tie`` (``{"beta": "alpha"}``: beta = alpha) and ``prior``
    into the law's :class:`Constraints`."""
    fix, widths, tie = dict(fix or {}), dict(widths or {}), dict(tie or {})
    if not fix and prior is None and not tie:
        return Constraints()
    if tie and not lw.supports_ties:
        from archfit.laws.base import LAWS

        able = [n for n, x in sorted(LAWS.items()) if x.supports_ties]
        raise FitInputError(f"law {lw.name!r} takes no --tie; laws that do: {', '.join(able)}")
    for name in [*fix, *widths, *tie, *tie.values()]:
        if name not in lw.param_names:
            raise FitInputError(f"{name!r} is not a parameter of {lw.name} "
                                f"({', '.join(lw.param_names)})")
    for name, v in fix.items():
        why = lw.domain_error(name, float(v))
        if why:
            raise FitInputError(f"--fix {name}={v:g}: {why}")
    for a, b in tie.items():
        if a == b or b in tie or a in fix:
            raise FitInputError(f"--tie {a}={b}: tie a parameter to another free one, once "
                                "(and do not also fix it)")
    source, means = "", {}
    if isinstance(prior, dict):
        means = {k: tuple(v) for k, v in prior.items()}
        source = "stated"
    elif prior is not None:
        from archfit.laws.inference.artifact import load_fit

        pf = load_fit(prior)
        source = pf.label
        shared = [n for n in lw.param_names if n in pf.params and n not in fix]
        if not shared:
            raise FitInputError(f"the prior {source} shares no free parameter with {lw.name} "
                                f"({', '.join(lw.param_names)})")
        for n in shared:
            ci = (pf.ci or {}).get(n)
            sd = widths.get(n, (ci[1] - ci[0]) / 3.92 if ci else None)
            if sd is None:
                raise FitInputError(
                    f"the prior {source} carries no uncertainty for {n!r}: state its width, "
                    f"e.g. --prior {source}:" + ",".join(f"{m}=SD" for m in shared))
            means[n] = (pf.params[n], sd)
    for n, (_, sd) in means.items():
        if n not in lw.param_names:
            raise FitInputError(f"{n!r} is not a parameter of {lw.name}")
        if not sd > 0:
            raise FitInputError(f"the prior width of {n!r} must be positive, got {sd}")
    return Constraints(fixed={k: float(v) for k, v in fix.items()},
                       prior={k: (float(m), float(sd)) for k, (m, sd) in means.items()},
                       source=source, tied=tie)


def point_estimate(lw: Law, data: Data, cons: Constraints) -> tuple[Estimate, Constraints, Any]:
    """The point estimate; with constraints, also the data-only fit (None when the data alone
    cannot be fitted) whose residual scale weighs the prior."""
    if not cons:
        return lw.fit_point(data), cons, None
    try:
        alone = lw.fit_point(data, full=False)
        p = dict(zip(lw.param_names, alone.params))
        obs, fitted = lw.residuals(p, data, alone.extra)
        r = obs - fitted
        scale = float(1.4826 * np.median(np.abs(r - np.median(r)))) if len(r) > 2 else None
        cons = replace(cons, scale=scale if scale and scale > 0 else None)
        data_only: Any = p
    except FitError as e:
        data_only = f"the data alone cannot be fitted: {e}"
    return lw.fit_point(data, constraints=cons), cons, data_only


def prior_record(cons: Constraints, data_only: Any) -> dict[str, Any]:
    if not cons:
        return {}
    return {"source": cons.source, "fixed": cons.fixed, "tied": cons.tied,
            "prior": {k: list(v) for k, v in cons.prior.items()},
            "data_only": data_only, "residual_scale": cons.scale}
