"""The campaign's loop: design a round, train it through the sweep engine, refit, recommend,
check the stop rules, and again, until a rule stops it.

:func:`prepare` checks the whole spec against everything it names (the pool and each
candidate's cost, the budget against the cheapest run, the prior fit, the recommend options,
the training recipe and the executor) before :func:`run` touches the folder. Every step reads
the ledger first, so a campaign killed at any moment resumes with the same command: a round's
design is never redrawn (its spend is counted once, when it is designed), finished runs are
never trained again (the sweep engine skips them) and a fit that did not finish is redone from
the same runs and seed. One ``run`` at a time holds a folder (an exclusive ``flock`` on
``DIR/.lock``, released by the kernel even on SIGKILL)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

from archfit.campaign import ledger as lg
from archfit.campaign.ledger import Ledger, Round, RoundState
from archfit.campaign.spec import VERDICTS, CampaignError, Spec, changes, load
from archfit.campaign.status import target_ci
from archfit.interval import to_json
from archfit.io import held_by_another

RECIPE = ("model", "train", "data", "executor")  # the sweep spec's sections a round inherits
KEYS = ("params", "n_layer", "d_model", "tokens")  # a pool row's identity

Progress = Callable[[dict[str, Any]], None]


@dataclass
class Prepared:
    """What a checked spec runs on: the candidate ``pool`` with each one's ``cost`` in
    ``unit``, the shape ``base`` and tokens per step of the recipe, and the ``budget``."""

    pool: Any
    cost: Any
    unit: str
    base: dict[str, Any] | None
    tokens_per_step: float | None
    budget: float


def as_spec(spec: Any) -> Spec:
    """A :class:`Spec` from a path (str or os.PathLike) or a Spec; anything else is a
    :class:`CampaignError`."""
    if isinstance(spec, Spec):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return load(spec)
    raise CampaignError(f"a campaign spec is a path to a TOML file (or a Spec from "
                        f"archfit.campaign.load), not {type(spec).__name__}")


def recipe(spec: Spec) -> Any:
    """The sweep recipe a round's spec inherits (model, train, data, executor; seeds, lrs),
    as the object :meth:`archfit.designing.Design.write` reads."""
    raw = {k: spec.raw[k] for k in RECIPE if k in spec.raw}
    ex = dict(raw.get("executor") or {})
    ex.pop("kind", None)
    raw["executor"] = ex
    for k in ("seeds", "lrs"):
        if k in spec.raw:
            raw[k] = spec.raw[k]
    return SimpleNamespace(raw=raw, name=spec.name, path=spec.path)


def pool_of(spec: Spec) -> tuple[Any, dict[str, Any] | None, float | None]:
    """(the candidate pool, the shape base, tokens per step) from ``[pool]``."""
    from archfit import designing as dz
    from archfit.recommending.validation import recipe_grid

    p = spec.pool
    grid, tps = recipe_grid(recipe(spec))
    if "table" in p:
        import polars as pl

        f = os.path.join(os.path.dirname(os.path.abspath(spec.path)), str(p["table"]))
        try:
            frame = pl.read_csv(f) if f.endswith(".csv") else pl.read_parquet(f)
        except Exception as e:
            raise CampaignError(f"[pool] table {p['table']}: cannot read ({e})") from None
        return frame, grid["base"], tps
    sizes, tokens = [float(x) for x in p["sizes"]], [float(x) for x in p["tokens"]]
    if "depths" not in p:
        return dz.pool_from_sizes(sizes, tokens), None, tps
    grid["tolerance"] = float(p.get("tolerance", grid["tolerance"]))
    frame = dz.pool_from_grid(sizes, list(p["depths"]), tokens,
                              [float(x) for x in p.get("ff_ratios", [4.0])], **grid)
    return frame, grid["base"], tps


def prepare(spec: Spec) -> Prepared:
    """Check everything the spec names, writing nothing: the executor can run here, the prior
    fit loads and is of the spec's law, the recommend options build shapes, the pool is
    readable and priced, the budget buys at least its cheapest run, and the training recipe
    makes a sweep spec the sweep engine accepts. Each refusal is one line."""
    from archfit import designing as dz
    from archfit.errors import ArchfitError
    from archfit.sweep.executors import check_executor

    where = spec.path
    try:
        check_executor(spec.executor, (spec.raw.get("executor") or {}).get("ray", {})
                       .get("address"))
    except ArchfitError as e:
        raise CampaignError(f"{where}: [executor] kind = {spec.executor!r}: {e}") from None
    _check_prior(spec)
    if spec.target_kind == "params":
        from archfit.recommending.pipeline import check_recommend_options

        try:
            check_recommend_options(**spec.shape_args)
        except ArchfitError as e:
            raise CampaignError(f"{where}: [recommend] {e}") from None
    from archfit.laws import get_law

    try:
        pool, base, tps = pool_of(spec)
        dz.check_pool(pool, get_law(_standing(spec)), f"{where}: [pool]")
        cost, unit = dz.costs(pool, spec.gpu, base=base, tokens_per_step=tps,
                              n_counts="non-embedding")  # recipe_grid's shapes count so
    except CampaignError:
        raise
    except ArchfitError as e:
        raise CampaignError(f"{where}: [pool] {e}") from None
    if not pool.height:
        raise CampaignError(f"{where}: [pool] holds no candidate: no size and depth of the grid "
                            "gives a shape with this recipe (check sizes, depths and "
                            "[model] head_dim / multiple)")
    budget = (spec.budget_value * float(cost.sum()) if spec.budget_unit == "pool_fraction"
              else spec.budget_value)
    if budget < float(cost.min()):
        raise CampaignError(f"the budget {budget:.4g} {unit} is below the cheapest run in the "
                            f"pool ({float(cost.min()):.4g}); raise it or add cheaper candidates")
    need = spec.min_runs
    cheapest = sorted(float(c) for c in cost)[:need]
    if len(cheapest) < need or sum(cheapest) > budget:
        buys = sum(1 for i in range(len(cheapest)) if sum(cheapest[:i + 1]) <= budget)
        raise CampaignError(f"{where}: {spec.law} needs {need} runs to be fitted, and "
                            + (f"the pool holds {pool.height}" if pool.height < need else
                               f"the budget ({budget:.4g} {unit}) buys {buys} of the "
                               "cheapest")
                            + "; raise the budget or add (cheaper) candidates")
    if "n_layer" in pool.columns:
        _check_recipe(spec, pool)
    return Prepared(pool, cost, unit, base, tps, budget)


def _check_prior(spec: Spec) -> None:
    if not spec.prior:
        return
    from archfit.errors import ArchfitError
    from archfit.laws import load_fit

    try:
        f = load_fit(spec.prior)
    except ArchfitError as e:
        raise CampaignError(f"{spec.path}: prior = {spec.prior!r}: {e}") from None
    if spec.law != "auto" and f.law != spec.law:
        raise CampaignError(f"{spec.path}: prior = {spec.prior!r} is a {f.law} fit; a prior for "
                            f"this campaign must be a {spec.law} fit")


def _standing(spec: Spec) -> str:
    """The law that prices the pool: the spec's, or for auto the first choice of its role."""
    from archfit.laws.inference.selection import AUTO, FIRST_CHOICE

    if spec.law != AUTO:
        return spec.law
    return FIRST_CHOICE["shape" if spec.target_kind == "params" else "compute"]


def _check_recipe(spec: Spec, pool: Any) -> None:
    """The sweep spec a round would write for the pool's first candidate, checked by the sweep
    engine (schema, data, shapes, budget, executor options) in memory."""
    from archfit.errors import ArchfitError
    from archfit.sweep.spec import spec_for_runs, spec_from_raw

    first = pool.row(0, named=True)
    try:
        spec_from_raw(spec_for_runs([first], recipe(spec), "archfit campaign: the preflight "
                                                          "check"), spec.path, check_data=True)
    except ArchfitError as e:
        raise CampaignError(f"{spec.path}: the training recipe ([model], [train], [executor], "
                            f"data): {e}") from None


# ---------------------------------------------------------------------------- the folder
def _check_folder(out: str, restart: bool) -> None:
    """``out`` is a new folder, an empty one, or a campaign's: checked before anything is
    written there (the lock included). A damaged ledger is refused, unless ``restart``."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise CampaignError(f"{out}: is a file; give --out a folder")
    if not os.path.isdir(out):
        return
    has_ledger = os.path.exists(os.path.join(out, lg.LEDGER))
    if has_ledger and not restart:
        lg.read(out)  # a damaged ledger is one line here, before the lock
    if not has_ledger and lg.foreign(out):
        raise CampaignError(f"{out} holds files but no campaign ledger: it is not a campaign "
                            "folder; give --out a new or empty folder")


def run(spec: Any, out: str | os.PathLike[str], *, restart: bool = False,
        progress: Progress | None = None) -> Ledger:
    """Run (or resume) the campaign ``spec`` (a path or a :class:`Spec`) in the folder ``out``;
    returns the final ledger. ``progress`` gets one event dict per step.

    A spec changed since the campaign began continues it where the change only raises the
    budget, adds rounds or changes a stop rule (the ledger records the change); any other
    change is refused. ``restart=True`` removes what archfit wrote in ``out`` (its ledger,
    rounds, lock and temporary files; nothing else) once the new spec has passed every check,
    and starts over."""
    if not isinstance(out, (str, os.PathLike)) or not os.fspath(out):
        raise CampaignError(f"out: the campaign's folder is a path (a str or a PathLike), got "
                            f"{out!r}")
    spec = as_spec(spec)
    out = os.fspath(out)
    ready = prepare(spec)
    _check_folder(out, restart)
    made = not os.path.exists(out)
    os.makedirs(out, exist_ok=True)
    try:
        return _locked(spec, out, ready, restart, progress or (lambda e: None))
    finally:  # a run refused before its first ledger leaves nothing of its own behind
        if not os.path.exists(os.path.join(out, lg.LEDGER)):
            lock = os.path.join(out, lg.LOCK)
            if os.path.exists(lock) and not held_by_another(lock):
                os.remove(lock)
            if made and not os.listdir(out):
                os.rmdir(out)


def _locked(spec: Spec, out: str, ready: Prepared, restart: bool, say: Progress) -> Ledger:
    import fcntl

    lock = open(os.path.join(out, lg.LOCK), "a+")  # noqa: SIM115 (held for the whole run)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise CampaignError(f"another 'archfit campaign run' holds {out}; wait for it, or stop "
                            "it, before running this one") from None
    try:
        if restart:
            lg.clear(out)
        led = lg.read(out)
        led = _continue(spec, out, led, ready) if led is not None else Ledger(
            name=spec.name, spec=spec.raw, budget=ready.budget, unit=ready.unit)
        lg.write(out, led)
        return _loop(spec, out, led, ready, say)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _continue(spec: Spec, out: str, led: Ledger, ready: Prepared) -> Ledger:
    """The ledger to resume: unchanged, or continued by a spec whose changes only raise the
    budget, add rounds or change a stop rule (recorded in the ledger)."""
    if led.spec == spec.raw:
        return led
    allowed, refused = changes(led.spec, spec.raw)
    if refused:
        raise CampaignError(f"the spec changed since {out} began ({'; '.join(refused)}); a "
                            "campaign continues only with a raised budget, more rounds or "
                            "another stop rule: run it unchanged to resume, or pass --restart "
                            "to start over")
    if led.unit and ready.unit != led.unit:
        raise CampaignError(f"the new budget is in {ready.unit}, the campaign's in {led.unit}; "
                            f"give it in {led.unit}")
    if led.budget is not None and ready.budget < led.budget * (1 - 1e-9):
        raise CampaignError(f"the new budget ({ready.budget:.4g} {ready.unit}) is below the "
                            f"campaign's ({led.budget:.4g}); the budget can only be raised")
    led.record_change(allowed)
    led.spec, led.budget, led.unit, led.stopped_because = spec.raw, ready.budget, ready.unit, None
    return led


def _loop(spec: Spec, out: str, led: Ledger, ready: Prepared, say: Progress) -> Ledger:
    while led.stopped_because is None:
        if led.rounds and led.rounds[-1].state is not RoundState.FITTED:
            r = led.rounds[-1]  # the last round is unfinished: continue it
        else:
            why = stop_reason(spec, led)
            if why is None:
                why = _design(spec, out, led, ready, say)
                why = None if why is None else why + unheeded_ci(spec, led)
            if why is not None:
                led.stopped_because = why
                lg.write(out, led)
                say({"event": "stopped", "because": why})
                break
            r = led.rounds[-1]
        if r.state is RoundState.DESIGNED:
            _train(spec, out, r, say)
            r.state = RoundState.TRAINED
            lg.write(out, led)
        if r.state is RoundState.TRAINED:
            _fit(spec, out, led, r, say)
            r.state = RoundState.FITTED
            lg.write(out, led)
    if (spec.validate and spec.target_kind == "params" and led.validation is None
            and any(r.recommendation for r in led.rounds)):
        led.validation = _validate(spec, out, led, say)
        lg.write(out, led)
    return led


def stop_reason(spec: Spec, led: Ledger) -> str | None:
    """Why the campaign stops before another round (a stop rule met, the budget spent), or
    None."""
    stop = spec.stop
    last = led.last_fitted()
    if last is not None and last.verdict and stop.verdict and (
            VERDICTS.index(last.verdict) <= VERDICTS.index(stop.verdict)):
        return f"the verdict is {last.verdict} ([stop] verdict = {stop.verdict})"
    ci = last.target_ci if last is not None else None
    # an interval stops the campaign only under a verdict that accepts it: an uninformative
    # fit's interval may be narrow by accident (a bound, a few resamples), not by evidence
    if ci and _narrow(spec, led) and last is not None and last.verdict != "uninformative":
        return (f"the target's 95% CI spans {ci[1] / ci[0]:.3g}x, within [stop] ci_ratio "
                f"{stop.ci_ratio}")
    unheeded = unheeded_ci(spec, led)
    if len(led.rounds) >= stop.rounds:
        return f"{len(led.rounds)} rounds run ([stop] rounds = {stop.rounds}){unheeded}"
    if led.budget is not None and led.spent >= led.budget * (1 - 1e-9):
        return (f"the budget is spent ({led.spent:.4g} of {led.budget:.4g} {led.unit})"
                f"{unheeded}")
    return None


def _narrow(spec: Spec, led: Ledger) -> bool:
    """Whether the last fitted round's target CI is within [stop] ci_ratio."""
    last = led.last_fitted()
    ci = last.target_ci if last is not None else None
    return bool(spec.stop.ci_ratio and ci and ci[0] > 0
                and ci[1] / ci[0] <= spec.stop.ci_ratio)


def unheeded_ci(spec: Spec, led: Ledger) -> str:
    """What a stop for another reason adds when the target CI met [stop] ci_ratio under an
    uninformative verdict (and so did not stop the campaign); else ''."""
    last = led.last_fitted()
    if last is None or last.verdict != "uninformative" or not _narrow(spec, led):
        return ""
    lo, hi = last.target_ci  # type: ignore[misc]
    return (f"; the target's 95% CI spans {hi / lo:.3g}x, within [stop] ci_ratio "
            f"{spec.stop.ci_ratio}, but under an uninformative verdict it does not stop the "
            "campaign")


def results_of(out: str, led: Ledger) -> Any:
    """Every finished run so far, one polars frame (None before the first round's runs)."""
    import polars as pl

    frames = [pl.read_parquet(p) for r in led.rounds
              if os.path.exists(p := os.path.join(out, r.dir, "runs.parquet"))]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def open_pool(pool: Any, led: Ledger) -> Any:
    """The pool without the candidates earlier rounds chose (matched on their planned size,
    depth, width and tokens: a run trains whole steps, so its tokens differ from the plan)."""
    import polars as pl

    keys = [k for k in KEYS if k in pool.columns]
    done = {tuple(round(float(c[k]), 3) for k in keys) for r in led.rounds for c in r.chosen}
    keep = [tuple(round(float(v), 3) for v in row) not in done
            for row in pool.select(keys).iter_rows()]
    return pool.filter(pl.Series(keep))


def _design(spec: Spec, out: str, led: Ledger, ready: Prepared, say: Progress) -> str | None:
    """Design the next round, write its sweep spec and figure, count its spend; a stop reason
    when nothing more can be run."""
    from archfit import designing as dz
    from archfit.errors import FitError, FitInputError

    k = len(led.rounds)
    assert led.budget is not None
    left = led.budget - led.spent  # each round may spend what is left; its batch bounds it
    results = results_of(out, led)
    pool = open_pool(ready.pool, led)
    if not pool.height:
        return "every candidate in the pool has been run"
    try:
        d = dz.design(pool, budget=left, law=spec.law, target=dz.Target(spec.target_kind,
                                                                       spec.target),
                      results=results, prior=spec.prior if results is not None else None,
                      fit=spec.prior if results is None else None,
                      batch=spec.batch if k else spec.first_batch, seed=spec.seed + k,
                      bootstrap=spec.bootstrap, gpu=spec.gpu,
                      n_counts="non-embedding")  # recipe_grid's shapes count so
    except dz.DesignError as e:
        return f"nothing more fits the budget ({e})"
    except (FitError, FitInputError) as e:
        return f"the runs so far cannot be fitted to design the next round ({e})"
    if not d.chosen:
        return f"nothing more fits the budget ({d.stop or 'no affordable candidate'})"
    folder = os.path.join(out, f"round-{k}")
    os.makedirs(folder, exist_ok=True)
    rec = recipe(spec)
    rec.name = f"{spec.name}-r{k}"
    d.write(os.path.join(folder, "spec.toml"), rec)
    from archfit.plots.design import draw_design
    from archfit.sweep import load_spec

    draw_design(d, os.path.join(folder, "design.png"), runs=results)
    spend = float(sum(c["cost"] for c in d.chosen))
    pending = {r.run_id: "pending" for r in load_spec(os.path.join(folder, "spec.toml")).runs}
    led.rounds.append(Round(round=k, state=RoundState.DESIGNED, dir=f"round-{k}",
                            chosen=d.chosen, spend=spend,
                            ci_before=list(d.ci_now.finite_ends()) if d.ci_now else None,
                            ci_predicted=list(d.ci_after.finite_ends()) if d.ci_after
                            else None, notes=d.notes, runs=pending))
    led.spent += spend
    lg.write(out, led)
    say({"event": "designed", "round": k, "runs": len(d.chosen), "spend": spend,
         "spent": led.spent, "budget": led.budget, "unit": led.unit})
    return None


def _train(spec: Spec, out: str, r: Round, say: Progress) -> None:
    from archfit import sweep as sw
    from archfit.sweep.store import collect

    folder = os.path.join(out, r.dir)
    rs = sw.load_spec(os.path.join(folder, "spec.toml"))
    runs_dir = os.path.join(folder, "runs")
    dirs = sw.prepare_dirs(rs, runs_dir)
    sw.heal(rs, runs_dir)
    total = len(rs.runs)

    def done(d: str, state: str) -> None:
        c = sw.counts(rs, runs_dir)
        say({"event": "run", "round": r.round, "run": os.path.basename(d), "state": state,
             "done": c.get("ok", 0) + c.get("failed", 0) + c.get("diverged", 0), "of": total})

    sw.execute(rs, runs_dir, dirs, spec.executor, on_done=done)
    collect(rs, runs_dir, os.path.join(folder, "runs.parquet"))
    for run in rs.runs:
        res, _ = sw.check_result(os.path.join(runs_dir, run.run_id), run)
        r.runs[run.run_id] = (res or {}).get("status", "missing")


def _fit(spec: Spec, out: str, led: Ledger, r: Round, say: Progress) -> None:
    import warnings

    from archfit.errors import FitError, FitInputError, UninformativeWarning
    from archfit.laws.inference.selection import fit
    from archfit.recommending import recommend
    from archfit.recommending.request import RecommendRequest

    say({"event": "fitting", "round": r.round})
    try:
        f = fit(results_of(out, led), law=spec.law, bootstrap=spec.bootstrap, seed=spec.seed,
                prior=spec.prior)
    except (FitError, FitInputError) as e:
        r.verdict, r.target_ci, r.fit_error = "uninformative", None, str(e)
        say({"event": "fitted", "round": r.round, "verdict": "uninformative",
             "target_ci": None, "error": str(e)})
        return
    f.to_json(os.path.join(out, r.dir, "fit.json"))
    opt = f.optimum(spec.target)  # the target's 95% interval over the fit's draws
    ci = opt.get("n_layer_ci" if spec.target_kind == "params" else "N_opt_ci")
    trust = f.verdict(spec.target)
    r.verdict = trust.verdict
    r.target_ci = list(ci) if ci else None
    r.point = opt.get("n_layer" if spec.target_kind == "params" else "N_opt")
    if spec.target_kind == "params":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UninformativeWarning)
            req = RecommendRequest.of(spec.target, fit=f, **spec.shape_args)
            r.recommendation = recommend(req).to_dict()
    say({"event": "fitted", "round": r.round, "verdict": r.verdict, "reasons": trust.reasons,
         "target_ci": to_json(target_ci(r)), "spent": led.spent, "budget": led.budget, "unit": led.unit})


def _validate(spec: Spec, out: str, led: Ledger, say: Progress) -> dict[str, Any]:
    """Train the last fit's pick beside its rivals (archfit.recommending.validation), with the
    recipe of the last round's sweep; the validation's record and its figure."""
    from archfit.plots import draw_validation
    from archfit.recommending import validation
    from archfit.sweep import load_spec

    last = next(r for r in reversed(led.rounds)
                if os.path.exists(os.path.join(out, r.dir, "fit.json")))
    say({"event": "validating", "round": last.round})
    folder = os.path.join(out, "validation")
    p = validation.plan(os.path.join(out, last.dir, "fit.json"), spec.target,
                        load_spec(os.path.join(out, last.dir, "spec.toml")))
    v = validation.run(p, folder, spec.executor).to_dict()
    draw_validation(v, os.path.join(folder, "validation.png"))
    return v
