"""A campaign spec (TOML): its schema, and the checks that need nothing but the spec itself.
:func:`load` reports every unknown key and every value of the wrong type at once, in one line;
what needs the pool, the prior fit or the executor is checked by
:func:`archfit.campaign.loop.prepare`, still before anything is written or trained.

A spec may be changed between two runs of a campaign only where the change continues it: a
larger budget (in the same unit), more rounds, or a changed stop rule (:func:`changes`)."""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from archfit.errors import ArchfitError
from archfit.shapes import MLP_KINDS, NORM_KINDS, POSITION_KINDS
from archfit.sweep.schema import Key, check, number
from archfit.sweep.spec import EXECUTOR, MODEL, TRAIN

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class CampaignError(ArchfitError):
    """A campaign that cannot run as asked (one line: what is wrong, how to mend it)."""


VERDICTS = ("informative", "weak", "uninformative")
EXECUTORS = ("local", "slurm", "ray")
BUDGET_UNITS = ("flops", "gpu_hours", "pool_fraction")
# the largest pool a grid may expand to: every candidate is priced and scored each round
MAX_POOL = 20_000

POS_INT, POS_NUM = Key("int", positive=True), Key("number", positive=True)
NUMBERS = Key("list", item="number", positive=True, nonempty=True)
RECOMMEND = {"vocab_size": POS_INT, "n_ctx": POS_INT, "head_dim": POS_INT,
             "multiple_of": POS_INT, "ff_ratio": POS_NUM,
             "mlp": Key("str", choices=MLP_KINDS), "n_kv_head": POS_INT, "tp": POS_INT,
             "tied_embeddings": Key("bool"), "position": Key("str", choices=POSITION_KINDS),
             "bias": Key("bool"), "norm": Key("str", choices=NORM_KINDS),
             "ff_multiple": POS_INT, "tolerance": POS_NUM}
SCHEMA = {
    "name": Key("str"), "description": Key("str"), "law": Key("str"), "prior": Key("str"),
    "batch": POS_INT, "first_batch": POS_INT, "seed": Key("int", nonnegative=True),
    "bootstrap": POS_INT,
    "validate": Key("bool"), "data": Key("str"),
    "seeds": Key("list", item="int", nonempty=True, nonnegative=True),
    "lrs": Key("list", item="lr", positive=True, nonempty=True),  # as a sweep spec's
    "target": Key("table", table={"params": POS_NUM, "compute": POS_NUM}),
    "budget": Key("table", table={"flops": POS_NUM, "gpu_hours": POS_NUM,
                                  "pool_fraction": POS_NUM, "gpu": Key("str")}),
    "pool": Key("table", table={"sizes": NUMBERS,
                                "depths": Key("list", item="int", positive=True, nonempty=True),
                                "tokens": NUMBERS, "ff_ratios": NUMBERS, "tolerance": POS_NUM,
                                "table": Key("str")}),
    "stop": Key("table", table={"rounds": POS_INT, "verdict": Key("str", choices=VERDICTS[:2]),
                                "ci_ratio": POS_NUM}),
    "recommend": Key("table", table=RECOMMEND),
    # the training recipe: a sweep spec's sections, checked by the sweep's own schema
    "model": Key("table", table=MODEL), "train": Key("table", table=TRAIN),
    "executor": Key("table", table=EXECUTOR),
}


@dataclass(frozen=True)
class Stop:
    """The stop rules: at most ``rounds`` rounds; stop early once the verdict is ``verdict``
    (or better) or the target's 95% CI spans at most ``ci_ratio`` (high / low)."""

    rounds: int = 5
    verdict: str | None = None
    ci_ratio: float | None = None


@dataclass
class Spec:
    """A campaign spec, checked. ``raw`` is the TOML as read: the ledger keeps it, so a change
    is seen on resume."""

    path: str
    raw: dict[str, Any]
    name: str
    law: str
    target_kind: str  # params | compute
    target: float
    prior: str | None
    pool: dict[str, Any]
    budget_unit: str  # flops | gpu_hours | pool_fraction
    budget_value: float
    gpu: str | None
    stop: Stop
    executor: str
    batch: int
    first_batch: int
    seed: int
    bootstrap: int
    validate: bool
    min_runs: int  # the fewest runs the law (every law, for auto) can be fitted to
    shape_args: dict[str, Any] = field(default_factory=dict)  # recommend's shape options


def read(path: str) -> dict[str, Any]:
    """The TOML of ``path``; a file that cannot be read, is not UTF-8 or is not TOML is one
    line."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise CampaignError(f"{path}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise CampaignError(f"{path}: not UTF-8 text; save the spec as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise CampaignError(f"{path}: not valid TOML ({e})") from None


def load(path: str | os.PathLike[str]) -> Spec:
    """Read and check a campaign spec: every unknown key and every value of the wrong type at
    once, then the rules between keys; each refusal is one line (:class:`CampaignError`)."""
    path = os.fspath(path)
    raw = read(path)
    problems: list[str] = []
    check(raw, SCHEMA, "spec", problems)
    if problems:
        raise CampaignError(f"{path}: " + "; ".join(problems))
    target = _one_of(raw, "target", ("params", "compute"), path,
                     "add e.g. [target] params = 7.2e5 (or compute = 1e18)")
    budget = _one_of(raw, "budget", BUDGET_UNITS, path,
                     'add e.g. [budget] pool_fraction = 0.5 (or flops = 1e13, or gpu_hours = '
                     '500 with gpu = "h100")')
    b = raw["budget"]
    _plausible(path, raw, target, budget)
    if budget == "pool_fraction" and number(b["pool_fraction"]) > 1:
        raise CampaignError(f"{path}: [budget] pool_fraction is a share of the pool's cost, in "
                            f"(0, 1]; got {b['pool_fraction']}")
    if budget == "gpu_hours" and not b.get("gpu"):
        raise CampaignError(f"{path}: [budget] gpu_hours needs gpu = \"h100\" (or another known "
                            "GPU) to price each run")
    _check_gpu(b.get("gpu"), path)
    pool = dict(raw.get("pool") or {})
    if "table" in pool and any(k in pool for k in ("sizes", "depths", "tokens", "ff_ratios")):
        raise CampaignError(f"{path}: [pool] is either table = FILE or a grid (sizes, depths, "
                            "tokens), not both")
    if "table" not in pool and not all(k in pool for k in ("sizes", "tokens")):
        raise CampaignError(f"{path}: [pool] needs table = FILE, or sizes and tokens (and depths, "
                            "for a shape law)")
    if "table" not in pool:
        n = math.prod(len(pool.get(k) or [1]) for k in ("sizes", "depths", "tokens", "ff_ratios"))
        if n > MAX_POOL:
            raise CampaignError(f"{path}: [pool] expands to {n:,} candidates, more than "
                                f"{MAX_POOL:,}; give fewer sizes, depths or tokens")
    law = _law(path, str(raw.get("law", "")), target)
    if target == "params" and "table" not in pool and "depths" not in pool:
        raise CampaignError(f"{path}: [pool] needs depths for a shape law ({law.name} chooses "
                            "among depths at each size)")
    stop = raw.get("stop") or {}
    ci_ratio = number(stop["ci_ratio"]) if "ci_ratio" in stop else None
    if ci_ratio is not None and not ci_ratio > 1:
        raise CampaignError(f"{path}: [stop] ci_ratio is a 95% CI's high/low, above 1; got "
                            f"{stop['ci_ratio']}")
    ex = raw.get("executor") or {}
    batch = raw.get("batch", 4)
    first = raw.get("first_batch", max(batch, law.min_points))
    if first < law.min_points:
        raise CampaignError(f"{path}: first_batch = {first} runs cannot be fitted: {law.name} "
                            f"needs at least {law.min_points} runs; set first_batch >= "
                            f"{law.min_points}")
    return Spec(path=path, raw=raw, name=str(raw.get("name") or "campaign"), law=law.name,
                target_kind=target, target=number(raw["target"][target]),
                prior=raw.get("prior"), pool=pool, budget_unit=budget,
                budget_value=number(b[budget]), gpu=b.get("gpu"),
                stop=Stop(rounds=stop.get("rounds", 5), verdict=stop.get("verdict"),
                          ci_ratio=ci_ratio),
                executor=ex.get("kind", "local"), batch=batch, first_batch=first,
                seed=raw.get("seed", 0), bootstrap=raw.get("bootstrap", 100),
                validate=raw.get("validate", False), min_runs=law.min_points,
                shape_args=dict(raw.get("recommend") or {}))


# the most training tokens a pool may plan for one run: past it a number is a typo
MAX_TOKENS = 1e16


def _plausible(path: str, raw: dict[str, Any], target: str, budget: str) -> None:
    """The target, the budget and the pool's sizes and tokens are values a run could use:
    finite, and within the sizes and token counts archfit plans for; each refusal names the
    file, the section and the key."""
    from archfit.numbers import MAX_PARAMS

    checks = [("target", target, raw["target"][target], MAX_PARAMS if target == "params"
               else math.inf),
              ("budget", budget, raw["budget"][budget], math.inf)]
    pool = raw.get("pool") or {}
    checks += [("pool", "sizes", v, MAX_PARAMS) for v in pool.get("sizes") or []]
    checks += [("pool", "tokens", v, MAX_TOKENS) for v in pool.get("tokens") or []]
    for section, key, value, top in checks:
        v = number(value)
        if not (math.isfinite(v) and 0 < v <= top):
            limit = f" and at most {top:.0e}" if math.isfinite(top) else ""
            raise CampaignError(f"{path}: [{section}] {key} = {value!r}: give a finite number "
                                f"above 0{limit}")


def _one_of(raw: dict[str, Any], section: str, keys: tuple[str, ...], path: str,
            hint: str) -> str:
    table = raw.get(section)
    if not table:
        raise CampaignError(f"{path}: no [{section}] section; {hint}")
    given = [k for k in keys if k in table]
    if len(given) != 1:
        raise CampaignError(f"{path}: [{section}] needs exactly one of {', '.join(keys)}"
                            + (f" (got {', '.join(given)})" if given else ""))
    return given[0]


def _check_gpu(gpu: str | None, path: str) -> None:
    if gpu is None:
        return
    from archfit.train.accelerators import DEVICES

    if gpu.lower() not in DEVICES:
        raise CampaignError(f"{path}: [budget] gpu {gpu!r} is not known; use one of "
                            f"{', '.join(DEVICES)}")


def _law(path: str, law_name: str, kind: str) -> Any:
    """The spec's law, if it can run a campaign toward a ``kind`` target."""
    from archfit.laws import LAWS
    from archfit.laws.inference.selection import AUTO, FIRST_CHOICE, candidates

    if law_name == AUTO:  # every law of the target's role, compared on the runs each round
        role = "shape" if kind == "params" else "compute"
        names = [n for n in candidates(_ALL_COLUMNS, role)]
        law = max((LAWS[n] for n in names), key=lambda lw: lw.min_points)
        return _Auto(AUTO, law.min_points, LAWS[FIRST_CHOICE[role]])
    if not law_name:
        raise CampaignError(f"{path}: no law; add e.g. law = \"depth-joint\" (see 'archfit laws')")
    names = sorted(LAWS)
    if law_name not in names:
        raise CampaignError(f"{path}: law {law_name!r} is not known; use one of "
                            f"{', '.join(names)}")
    law = LAWS[law_name]
    if not law.predicts_loss:
        raise CampaignError(f"{path}: {law.name} has no loss model, so a run's outcome cannot "
                            "be predicted; use depth-joint or depth-width (shape), chinchilla "
                            "(compute)")
    if law.target_kind != kind:
        needs = ("a shape law (depth-joint, depth-width)" if kind == "params" else
                 "a compute law (chinchilla)")
        raise CampaignError(f"{path}: a [target] {kind} campaign needs {needs}; {law.name} is a "
                            f"{law.role} law")
    return law


# the columns a campaign's runs carry (the sweep engine's run table): what --law auto may use
_ALL_COLUMNS = ("loss", "params", "tokens", "n_layer", "d_model", "d_ff", "n_head", "lr")


@dataclass(frozen=True)
class _Auto:
    """``law = "auto"``: its name, the most runs any of its candidates needs, and the law that
    stands in for it before runs can be compared (its columns price the pool)."""

    name: str
    min_points: int
    first: Any


# ---------------------------------------------------------------------------- changes
def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _name(key: str) -> str:
    section, _, k = key.rpartition(".")
    return f"[{section}] {k}" if section else k


def changes(old: dict[str, Any], new: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the changes that continue a campaign, the ones that would change it) between the spec
    a campaign began with and a new one, each as one phrase. A campaign continues with a larger
    budget in the same unit, more rounds, or another stop verdict or CI ratio."""
    a, b = _flat(old), _flat(new)
    allowed, refused = [], []
    units = [[k for k in d if k.startswith("budget.") and k[7:] in BUDGET_UNITS] for d in (a, b)]
    switched: set[str] = set()
    if (len(units[0]) == len(units[1]) == 1 and units[0] != units[1]
            and "budget.pool_fraction" in units[0] + units[1]):
        # a share of the pool and an absolute budget are one budget in the design's cost unit:
        # the caller checks the new one against the campaign's (it can only be raised)
        (ka,), (kb,) = units
        allowed.append(f"{_name(ka)} = {a[ka]} -> {_name(kb)} = {b[kb]}")
        switched = {ka, kb}
    for key in sorted(set(a) | set(b)):
        if a.get(key) == b.get(key) or key in switched:
            continue
        was, now = a.get(key, "(unset)"), b.get(key, "(unset)")
        phrase = f"{_name(key)}: {was} -> {now}"
        if key in ("stop.verdict", "stop.ci_ratio"):
            allowed.append(phrase)
        elif key == "stop.rounds" and key in a and key in b:
            (allowed if b[key] >= a[key] else refused).append(
                phrase + ("" if b[key] >= a[key] else " (rounds can only be raised)"))
        elif key in ("budget." + u for u in BUDGET_UNITS) and key in a and key in b:
            up = number(b[key]) >= number(a[key])
            (allowed if up else refused).append(
                phrase + ("" if up else " (the budget can only be raised)"))
        else:
            refused.append(phrase)
    return allowed, refused
