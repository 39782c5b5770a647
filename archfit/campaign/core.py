"""``archfit campaign``: design → train → fit → recommend, round after round, until the answer
is informative, its interval is narrow enough, the budget is spent or the rounds run out.

A campaign is a TOML spec (:func:`load`) and a folder. The folder holds the ledger
(``ledger.json``, written atomically after every step) and one folder per round: the round's
sweep spec, its run folders (the sweep engine's), its collected runs, its fit and its design
figure. Every step reads the ledger first, so a campaign killed at any moment resumes with the
same command: a round's design is never redrawn (its spend is counted once, when it is
designed), finished runs are never trained again (the sweep engine skips them) and a fit that
did not finish is redone from the same runs and seed.

One ``run`` at a time holds a folder (an exclusive ``flock`` on ``DIR/.lock``, released by the
kernel even on SIGKILL). A changed spec on resume is refused with the difference shown;
``restart=True`` starts over.

For tests and for diagnosing a crash, ``ARCHFIT_CAMPAIGN_HOLD=MOMENT[:N]`` makes a run stop and
wait at the N-th time (default 1) it reaches MOMENT (``train``: a round's first run has
finished; ``fit``: a round's fit has begun; ``ledger``: a new ledger is written but not yet in
place), after writing ``DIR/.held``: the moment at which a kill is to be tested.

About 620 lines because the loop, its ledger, its stop rules and the spec's checks are one
state machine, read together.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from archfit.errors import ArchfitError

LEDGER = "ledger.json"
SCHEMA = "archfit.campaign/1"
VERDICTS = ("informative", "weak", "uninformative")
EXECUTORS = ("local", "slurm", "ray")
RECIPE = ("model", "train", "data", "executor")
RECOMMEND_KEYS = {"vocab_size", "n_ctx", "head_dim", "multiple_of", "ff_ratio", "mlp",
                  "n_kv_head", "tp", "tied_embeddings", "position", "bias", "norm", "ff_multiple",
                  "tolerance"}  # the sweep spec's sections a round inherits


class CampaignError(ArchfitError):
    """A campaign that cannot run as asked (one line: what is wrong, how to mend it)."""


# ---------------------------------------------------------------------------- the spec
@dataclass
class Spec:
    """A campaign spec, checked. ``raw`` is the TOML as read (the ledger keeps it, so a changed
    spec is caught on resume)."""

    path: str
    raw: dict[str, Any]
    name: str
    law: str
    target_kind: str  # params | compute
    target: float
    prior: str | None
    pool: dict[str, Any]
    budget: dict[str, Any]
    stop: dict[str, Any]
    executor: str
    batch: int
    first_batch: int
    seed: int
    bootstrap: int
    validate: bool
    shape_args: dict[str, Any] = field(default_factory=dict)  # recommend's shape options


def load(path: str) -> Spec:
    """Read and check a campaign spec; every problem is one line (CampaignError)."""
    import tomllib

    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except OSError as e:
        raise CampaignError(f"{path}: cannot read ({e.strerror or e})") from None
    except tomllib.TOMLDecodeError as e:
        raise CampaignError(f"{path}: not valid TOML ({e})") from None

    def need(section: str, hint: str) -> dict[str, Any]:
        v = raw.get(section)
        if not isinstance(v, dict) or not v:
            raise CampaignError(f"{path}: no [{section}] section; {hint}")
        return v

    target = need("target", "add e.g. [target] params = 7.2e5 (or compute = 1e18)")
    kinds = [k for k in ("params", "compute") if k in target]
    if len(kinds) != 1:
        raise CampaignError(f"{path}: [target] needs exactly one of params or compute")
    value = _positive(target[kinds[0]], f"[target] {kinds[0]}", path)
    budget = need("budget", "add e.g. [budget] pool_fraction = 0.5 (or flops = 1e13, or "
                            "gpu_hours = 500 with gpu = \"h100\")")
    units = [k for k in ("flops", "gpu_hours", "pool_fraction") if k in budget]
    if len(units) != 1:
        raise CampaignError(f"{path}: [budget] needs exactly one of flops, gpu_hours or "
                            "pool_fraction")
    _positive(budget[units[0]], f"[budget] {units[0]}", path)
    if units[0] == "pool_fraction" and budget["pool_fraction"] > 1:
        raise CampaignError(f"{path}: [budget] pool_fraction is a share of the pool's cost, "
                            f"in (0, 1]; got {budget['pool_fraction']}")
    if units[0] == "gpu_hours" and not budget.get("gpu"):
        raise CampaignError(f"{path}: [budget] gpu_hours needs gpu = \"h100\" (or another "
                            "known GPU) to price each run")
    law = _law(path, str(raw.get("law", "")), kinds[0])
    pool = need("pool", "add a grid ([pool] sizes, depths, tokens) or a table ([pool] table = "
                        "\"pool.csv\")")
    if "table" not in pool and not all(k in pool for k in ("sizes", "tokens")):
        raise CampaignError(f"{path}: [pool] needs table = FILE, or sizes and tokens (and "
                            "depths, for a shape law)")
    ex: dict[str, Any] = raw["executor"] if isinstance(raw.get("executor"), dict) else {}
    kind = str(ex.get("kind", "local"))
    if kind not in EXECUTORS:
        raise CampaignError(f"{path}: unknown executor {kind!r}; use {', '.join(EXECUTORS)}")
    stop: dict[str, Any] = raw["stop"] if isinstance(raw.get("stop"), dict) else {}
    if stop.get("verdict") is not None and stop["verdict"] not in VERDICTS[:2]:
        raise CampaignError(f"{path}: [stop] verdict must be informative or weak, got "
                            f"{stop['verdict']!r}")
    rounds = stop.get("rounds", 5)
    if not isinstance(rounds, int) or rounds < 1:
        raise CampaignError(f"{path}: [stop] rounds must be a whole number of at least 1")
    if stop.get("ci_ratio") is not None and not (_positive(stop["ci_ratio"], "[stop] ci_ratio",
                                                           path) > 1):
        raise CampaignError(f"{path}: [stop] ci_ratio is a 95% CI's high/low, above 1")
    rec_keys = set(dict(raw.get("recommend") or {})) - RECOMMEND_KEYS
    if rec_keys:
        raise CampaignError(f"{path}: [recommend] does not take {', '.join(sorted(rec_keys))} "
                            "(top-level keys such as seeds and lrs go above the first [section])")
    counts = {k: raw.get(k, d) for k, d in (("batch", 4), ("first_batch", 0), ("seed", 0),
                                            ("bootstrap", 100))}
    for k, v in counts.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < (0 if k != "batch" else 1):
            raise CampaignError(f"{path}: {k} must be a whole number, got {v!r}")
    return Spec(path=path, raw=raw, name=str(raw.get("name") or "campaign"), law=law.name,
                target_kind=kinds[0], target=value, prior=raw.get("prior"), pool=pool,
                budget=budget, stop={"rounds": rounds, **stop}, executor=kind,
                batch=counts["batch"], first_batch=counts["first_batch"] or counts["batch"],
                seed=counts["seed"], bootstrap=counts["bootstrap"],
                validate=bool(raw.get("validate", False)),
                shape_args=dict(raw.get("recommend") or {}))


def _law(path: str, law_name: str, kind: str) -> Any:
    """The spec's law, if it can run a campaign toward a ``kind`` target."""
    from archfit.laws import get_law

    try:
        law = get_law(law_name)
    except Exception:
        raise CampaignError(f"{path}: law {law_name!r} is not known; see 'archfit laws'") from None
    if not law.predicts_loss:
        raise CampaignError(f"{path}: {law.name} has no loss model, so a run's outcome cannot "
                            "be predicted; use depth-joint or depth-width (shape), chinchilla "
                            "(compute)")
    if kind == "params" and law.role != "shape":
        raise CampaignError(f"{path}: a [target] params campaign needs a shape law (depth-joint, "
                            f"depth-width); {law.name} is a {law.role} law")
    if kind == "compute" and law.role != "compute":
        raise CampaignError(f"{path}: a [target] compute campaign needs a compute law "
                            f"(chinchilla); {law.name} is a {law.role} law")
    return law


def _positive(v: Any, what: str, path: str) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        x = math.nan
    if not (x > 0 and math.isfinite(x)):
        raise CampaignError(f"{path}: {what} must be a positive number, got {v!r}")
    return x


def recipe(spec: Spec) -> Any:
    """The sweep recipe a round's spec inherits (model, train, data, executor; seeds, lrs),
    as the object :meth:`archfit.designing.Design.write` reads."""
    from types import SimpleNamespace

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
    base_dir = os.path.dirname(os.path.abspath(spec.path))
    grid, tps = recipe_grid(recipe(spec))
    if "table" in p:
        import polars as pl

        f = os.path.join(base_dir, str(p["table"]))
        try:
            frame = pl.read_csv(f) if f.endswith(".csv") else pl.read_parquet(f)
        except Exception as e:
            raise CampaignError(f"[pool] table {p['table']}: cannot read ({e})") from None
        return frame, grid["base"], tps
    sizes, tokens = [float(x) for x in p["sizes"]], [float(x) for x in p["tokens"]]
    if "depths" not in p:
        return dz.pool_from_sizes(sizes, tokens), None, tps
    grid["tolerance"] = float(p.get("tolerance", grid["tolerance"]))
    frame = dz.pool_from_grid(sizes, [int(d) for d in p["depths"]], tokens,
                              [float(x) for x in p.get("ff_ratios", [4.0])], **grid)
    return frame, grid["base"], tps


# ---------------------------------------------------------------------------- the ledger
def read_ledger(out: str) -> dict[str, Any] | None:
    path = os.path.join(out, LEDGER)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            led = json.load(f)
    except (OSError, ValueError) as e:
        raise CampaignError(f"{path}: not a readable campaign ledger ({e})") from None
    if not isinstance(led, dict) or led.get("schema") != SCHEMA:
        raise CampaignError(f"{path}: not an archfit campaign ledger (schema {SCHEMA})")
    return led


def write_ledger(out: str, led: dict[str, Any]) -> None:
    """Atomically: the old ledger or the new one, never half of either."""
    from archfit.io import atomic_path, jsonable

    with atomic_path(os.path.join(out, LEDGER)) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(jsonable(led), f, indent=1, sort_keys=True)
        hold(out, "ledger")


_SEEN: dict[str, int] = {}


def hold(out: str, moment: str) -> None:
    """The fault-injection point (ARCHFIT_CAMPAIGN_HOLD=MOMENT[:N]): wait here for a kill."""
    want = os.environ.get("ARCHFIT_CAMPAIGN_HOLD", "")
    if not want:
        return
    name, _, nth = want.partition(":")
    if name != moment:
        return
    _SEEN[moment] = _SEEN.get(moment, 0) + 1
    if _SEEN[moment] == int(nth or 1):
        with open(os.path.join(out, ".held"), "w", encoding="utf-8") as f:
            f.write(moment)
        while True:
            time.sleep(1)


def _open_folder(spec: Spec, out: str, restart: bool) -> dict[str, Any]:
    """The ledger to continue (or a new one), after checking the folder is this campaign's."""
    import shutil

    led = read_ledger(out) if os.path.isdir(out) else None
    if os.path.isdir(out) and led is None and [f for f in os.listdir(out) if f != ".lock"]:
        raise CampaignError(f"{out} holds files but no campaign ledger: it is not a campaign "
                            "folder; give --out a new or empty folder")
    if led is not None and restart:
        for f in os.listdir(out):
            if f != ".lock":
                p = os.path.join(out, f)
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        led = None
    if led is not None and led["spec"] != spec.raw:
        import tomli_w

        diff = "; ".join(ln for ln in difflib.unified_diff(
            tomli_w.dumps(led["spec"]).splitlines(), tomli_w.dumps(spec.raw).splitlines(),
            "ledger", "spec", lineterm="", n=0) if ln[:1] in "+-" and ln[:3] not in ("---", "+++"))
        raise CampaignError(f"the spec changed since {out} began ({diff}); run it unchanged "
                            "to resume, or pass --restart to start over")
    return led or {"schema": SCHEMA, "name": spec.name, "spec": spec.raw, "rounds": [],
                   "budget": None, "spent": 0.0, "unit": None, "stopped_because": None,
                   "validation": None}


# ---------------------------------------------------------------------------- the loop
Progress = Callable[[dict[str, Any]], None]


def run(spec: Any, out: str, *, restart: bool = False, progress: Progress | None = None
        ) -> dict[str, Any]:
    """Run (or resume) the campaign ``spec`` (a path or a :class:`Spec`) in the folder ``out``;
    returns the final ledger. ``progress`` gets one event dict per step."""
    spec = load(os.fspath(spec)) if isinstance(spec, (str, os.PathLike)) else spec
    made = not os.path.exists(out)
    os.makedirs(out, exist_ok=True)
    try:
        return _locked(spec, out, restart, progress)
    finally:  # a run refused before its first ledger leaves no folder it made
        if made and not os.path.exists(os.path.join(out, LEDGER)):
            import shutil

            shutil.rmtree(out, ignore_errors=True)


def _locked(spec: Spec, out: str, restart: bool, progress: Progress | None) -> dict[str, Any]:
    import fcntl

    lock = open(os.path.join(out, ".lock"), "a+")  # noqa: SIM115 (held for the whole run)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise CampaignError(f"another 'archfit campaign run' holds {out}; wait for it, or stop "
                            "it, before running this one") from None
    try:
        led = _open_folder(spec, out, restart)
        return _loop(spec, out, led, progress or (lambda e: None))
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _loop(spec: Spec, out: str, led: dict[str, Any], say: Progress) -> dict[str, Any]:
    from archfit import designing as dz

    pool, base, tps = pool_of(spec)
    cost, unit = dz.costs(pool, spec.budget.get("gpu"), base=base, tokens_per_step=tps,
                          n_counts="non-embedding")  # recipe_grid's shapes count so
    budget = (float(spec.budget["pool_fraction"]) * float(cost.sum())
              if "pool_fraction" in spec.budget else
              float(spec.budget.get("flops") or spec.budget["gpu_hours"]))
    if budget < float(cost.min()):
        raise CampaignError(f"the budget {budget:.4g} {unit} is below the cheapest run in the "
                            f"pool ({float(cost.min()):.4g}); raise it or add cheaper candidates")
    if led["budget"] is None:
        led.update(budget=budget, unit=unit)
        write_ledger(out, led)
    while led["stopped_because"] is None:
        k = len(led["rounds"])
        if k and led["rounds"][-1]["state"] != "fitted":
            k -= 1  # the last round is unfinished: continue it
        else:
            why = _stop_reason(spec, led)
            if why is None:
                why = _design(spec, out, led, pool, budget, say)
            if why is not None:
                led["stopped_because"] = why
                write_ledger(out, led)
                say({"event": "stopped", "because": why})
                break
        r = led["rounds"][k]
        if r["state"] == "designed":
            _train(spec, out, r, say)
            r["state"] = "trained"
            write_ledger(out, led)
        if r["state"] == "trained":
            _fit(spec, out, led, r, say)
            r["state"] = "fitted"
            write_ledger(out, led)
    if (spec.validate and spec.target_kind == "params" and led["validation"] is None
            and any("recommendation" in r for r in led["rounds"])):
        led["validation"] = _validate(spec, out, led, say)
        write_ledger(out, led)
    return led


def _stop_reason(spec: Spec, led: dict[str, Any]) -> str | None:
    if not led["rounds"]:
        return None
    last, stop = led["rounds"][-1], spec.stop
    if stop.get("verdict") and VERDICTS.index(last["verdict"]) <= VERDICTS.index(stop["verdict"]):
        return f"the verdict is {last['verdict']} ([stop] verdict = {stop['verdict']})"
    ci = last.get("target_ci")
    if stop.get("ci_ratio") and ci and ci[0] > 0 and ci[1] / ci[0] <= float(stop["ci_ratio"]):
        return (f"the target's 95% CI spans {ci[1] / ci[0]:.3g}x, within [stop] ci_ratio "
                f"{stop['ci_ratio']}")
    if len(led["rounds"]) >= stop["rounds"]:
        return f"{len(led['rounds'])} rounds run ([stop] rounds = {stop['rounds']})"
    if led["spent"] >= led["budget"] * (1 - 1e-9):
        return f"the budget is spent ({led['spent']:.4g} of {led['budget']:.4g} {led['unit']})"
    return None


def results_of(out: str, led: dict[str, Any]) -> Any:
    """Every finished run so far, one polars frame (None before the first round's runs)."""
    import polars as pl

    frames = [pl.read_parquet(p) for r in led["rounds"]
              if os.path.exists(p := os.path.join(out, r["dir"], "runs.parquet"))]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def _design(spec: Spec, out: str, led: dict[str, Any], pool: Any, budget: float,
            say: Progress) -> str | None:
    """Design round k, write its sweep spec and figure, count its spend; a stop reason when
    nothing more can be run."""
    from archfit import designing as dz

    k = len(led["rounds"])
    left = budget - led["spent"]  # each round may spend what is left; its batch bounds it
    results = results_of(out, led)
    target = dz.Target(spec.target_kind, spec.target)
    pool = open_pool(pool, led)
    if not pool.height:
        return "every candidate in the pool has been run"
    kw: dict[str, Any] = dict(law=spec.law, target=target, results=results,
                              prior=spec.prior if results is not None else None,
                              fit=spec.prior if results is None else None,
                              batch=spec.batch if k else spec.first_batch, seed=spec.seed + k,
                              bootstrap=spec.bootstrap, gpu=spec.budget.get("gpu"),
                              n_counts="non-embedding")  # recipe_grid's shapes count so
    from archfit.errors import FitError, FitInputError

    try:
        d = dz.design(pool, budget=left, **kw)
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

    draw_design(d, os.path.join(folder, "design.png"), runs=results)
    from archfit.sweep import load_spec

    spend = float(sum(c["cost"] for c in d.chosen))
    pending = {r.run_id: "pending" for r in load_spec(os.path.join(folder, "spec.toml")).runs}
    led["rounds"].append({"round": k, "state": "designed", "dir": f"round-{k}",
                          "chosen": d.chosen, "spend": spend, "ci_before": d.ci_now,
                          "ci_predicted": d.ci_after, "notes": d.notes, "runs": pending})
    led["spent"] += spend
    write_ledger(out, led)
    say({"event": "designed", "round": k, "runs": len(d.chosen), "spend": spend,
         "spent": led["spent"], "budget": led["budget"], "unit": led["unit"]})
    return None


KEYS = ("params", "n_layer", "d_model", "tokens")  # a pool row's identity


def open_pool(pool: Any, led: dict[str, Any]) -> Any:
    """The pool without the candidates earlier rounds chose (matched on their planned size,
    depth, width and tokens: a run trains whole steps, so its tokens differ from the plan)."""
    import polars as pl

    keys = [k for k in KEYS if k in pool.columns]
    done = {tuple(round(float(c[k]), 3) for k in keys)
            for r in led["rounds"] for c in r["chosen"]}
    keep = [tuple(round(float(v), 3) for v in row) not in done
            for row in pool.select(keys).iter_rows()]
    return pool.filter(pl.Series(keep))


def _train(spec: Spec, out: str, r: dict[str, Any], say: Progress) -> None:
    from archfit import sweep as sw
    from archfit.sweep.store import collect

    folder = os.path.join(out, r["dir"])
    rs = sw.load_spec(os.path.join(folder, "spec.toml"))
    runs_dir = os.path.join(folder, "runs")
    dirs = sw.prepare_dirs(rs, runs_dir)
    sw.heal(rs, runs_dir)
    total = len(rs.runs)

    def done(d: str, state: str) -> None:
        c = sw.counts(rs, runs_dir)
        say({"event": "run", "round": r["round"], "run": os.path.basename(d), "state": state,
             "done": c.get("ok", 0) + c.get("failed", 0) + c.get("diverged", 0),
             "of": total})
        hold(out, "train")

    sw.execute(rs, runs_dir, dirs, spec.executor, on_done=done)
    collect(rs, runs_dir, os.path.join(folder, "runs.parquet"))
    for run in rs.runs:
        res, _ = sw.check_result(os.path.join(runs_dir, run.run_id), run)
        r["runs"][run.run_id] = (res or {}).get("status", "missing")


def _fit(spec: Spec, out: str, led: dict[str, Any], r: dict[str, Any], say: Progress) -> None:
    import warnings

    from archfit.errors import FitError, FitInputError, UninformativeWarning
    from archfit.laws.fitting import fit
    from archfit.recommending import recommend

    hold(out, "fit")
    results = results_of(out, led)
    try:
        f = fit(results, law=spec.law, bootstrap=spec.bootstrap, seed=spec.seed,
                prior=spec.prior)
    except (FitError, FitInputError) as e:
        r.update(verdict="uninformative", target_ci=None, fit_error=str(e))
        say({"event": "fitted", "round": r["round"], "verdict": "uninformative",
             "target_ci": None, "error": str(e)})
        return
    f.to_json(os.path.join(out, r["dir"], "fit.json"))
    opt = f.optimum(spec.target)  # the target's 95% interval over the fit's draws
    ci = opt.get("n_layer_ci" if spec.target_kind == "params" else "N_opt_ci")
    r.update(verdict=f.verdict(spec.target).verdict, target_ci=list(ci) if ci else None,
             point=opt.get("n_layer" if spec.target_kind == "params" else "N_opt"))
    if spec.target_kind == "params":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UninformativeWarning)
            r["recommendation"] = recommend(spec.target, fit=f, **spec.shape_args).to_dict()
    say({"event": "fitted", "round": r["round"], "verdict": r["verdict"], "target_ci": ci,
         "spent": led["spent"], "budget": led["budget"], "unit": led["unit"]})


def _validate(spec: Spec, out: str, led: dict[str, Any], say: Progress) -> dict[str, Any]:
    """Train the last fit's pick beside its rivals (archfit.recommending.validation), with the recipe of the
    last round's sweep; the validation's record and its figure (validation/validation.png)."""
    from archfit.recommending import validation
    from archfit.plots import draw_validation
    from archfit.sweep import load_spec

    last = next(r for r in reversed(led["rounds"]) if os.path.exists(
        os.path.join(out, r["dir"], "fit.json")))
    say({"event": "validating", "round": last["round"]})
    folder = os.path.join(out, "validation")
    p = validation.plan(os.path.join(out, last["dir"], "fit.json"), spec.target,
                        load_spec(os.path.join(out, last["dir"], "spec.toml")))
    v = validation.run(p, folder, spec.executor).to_dict()
    draw_validation(v, os.path.join(folder, "validation.png"))
    return v


# ---------------------------------------------------------------------------- status
@dataclass
class Status:
    """Where a campaign stands: ``rounds`` and ``runs`` as polars frames, and the totals."""

    ledger: dict[str, Any]
    rounds: Any
    runs: Any

    def to_dict(self) -> dict[str, Any]:
        led = self.ledger
        last = next((r for r in reversed(led["rounds"]) if "verdict" in r), {})
        return {"name": led["name"], "budget": led["budget"], "spent": led["spent"],
                "unit": led["unit"], "verdict": last.get("verdict"),
                "target_ci": last.get("target_ci"), "stopped_because": led["stopped_because"],
                "rounds": self.rounds.to_dicts(), "runs": self.runs.to_dicts(),
                "validation": led.get("validation")}


def status(out: str) -> Status:
    """The campaign in ``out``: its rounds (chosen runs, spend, verdict, target CI) and every
    run with its round and state, as frames."""
    import polars as pl

    led = read_ledger(out)
    if led is None:
        raise CampaignError(f"{out}: no campaign ledger here (run 'archfit campaign run SPEC "
                            f"--out {out}' first)")
    rounds = pl.DataFrame([{"round": r["round"], "state": r["state"],
                            "runs": len(r["chosen"]), "spend": r["spend"],
                            "verdict": r.get("verdict"),
                            "target_ci_low": (r.get("target_ci") or [None, None])[0],
                            "target_ci_high": (r.get("target_ci") or [None, None])[1],
                            "chosen": [json.dumps(c, sort_keys=True) for c in r["chosen"]]}
                           for r in led["rounds"]],
                          schema_overrides={"target_ci_low": pl.Float64,
                                            "target_ci_high": pl.Float64})
    runs = pl.DataFrame([{"run_id": rid, "round": r["round"], "state": st}
                         for r in led["rounds"] for rid, st in r["runs"].items()],
                        schema={"run_id": pl.String, "round": pl.Int64, "state": pl.String})
    return Status(led, rounds, runs)


def _ci(ci: Any) -> str:
    return f"[{ci[0]:.3g}, {ci[1]:.3g}] ({ci[1] / ci[0]:.3g}x)" if ci and ci[0] > 0 else "none"


def describe(e: dict[str, Any]) -> str:
    """One progress line for an event of :func:`run`."""
    k = e.get("round")
    if e["event"] == "designed":
        return (f"round {k}: designed {e['runs']} runs costing {e['spend']:.3g}; spent "
                f"{e['spent']:.3g} of {e['budget']:.3g} {e['unit']}")
    if e["event"] == "run":
        return f"round {k}: {e['done']}/{e['of']} runs done ({e['run']} {e['state']})"
    if e["event"] == "fitted":
        return (f"round {k}: fitted: verdict {e['verdict']}, target 95% CI {_ci(e['target_ci'])}"
                + (f" ({e['error']})" if e.get("error") else ""))
    if e["event"] == "stopped":
        return f"stopped: {e['because']}"
    return f"{e['event']}: round {k}"


def summary(st: Status) -> str:
    """The status as text: one line per round, the totals and why it stopped."""
    d = st.to_dict()
    lines = [f"campaign {d['name']}: spent {d['spent']:.4g} of {d['budget']:.4g} {d['unit']}",
             "  round  state     runs      spend  verdict         target 95% CI"]
    for r in d["rounds"]:
        ci = [r["target_ci_low"], r["target_ci_high"]] if r["target_ci_low"] else None
        lines.append(f"  {r['round']:>5}  {r['state']:<8} {r['runs']:>5}  {r['spend']:>9.3g}  "
                     f"{r['verdict'] or '-':<14}  {_ci(ci)}")
    lines.append(f"  stopped: {d['stopped_because']}" if d["stopped_because"] else
                 "  running (or interrupted: run it again to resume)")
    return "\n".join(lines)
