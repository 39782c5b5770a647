"""A sweep spec (TOML) and its expansion into runs, each with a stable id.

The run id hashes the run's flat config (:meth:`archfit.train.TrainConfig.to_dict`) and its
planned size: the same spec always gives the same ids, so a sweep directory resumes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from archfit.errors import ArchfitError, ShapeError, SpecError
from archfit.shapes.families import REINVEST, aspect_ratio_family, iso_param_family, plan_variant
from archfit.shapes import (ARCH_FIELDS, MLP_KINDS, MOE_FIELDS, NORM_KINDS, PARAMETRIZATIONS,
                            POSITION_KINDS, Shape, parse_plan)
from archfit.sweep.schema import Key, check, number
from archfit.train.hyperparameters import resolve_lr
from archfit.train.trackers import TRACKERS
from archfit.train.config import (FIELD_HELP, MOE_BALANCES, OPTIMIZERS, PARALLEL, PRECISIONS,
                                  RUNTIME_KEYS,
                                  SCHEDULES, Budget, TrainConfig)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

POS_INT, POS_NUM = Key("int", positive=True), Key("number", positive=True)
MODEL = {"mlp": Key("str", choices=MLP_KINDS),
         "parametrization": Key("str", choices=PARAMETRIZATIONS),
         "tied_embeddings": Key("bool"), "position": Key("str", choices=POSITION_KINDS),
         "norm": Key("str", choices=NORM_KINDS), "bias": Key("bool"),
         "qk_norm": Key("bool"), "head_dim": POS_INT, "n_head": POS_INT, "multiple": POS_INT,
         "kv_group": POS_INT, "vocab_size": POS_INT,
         # a mixture of experts (archfit.shapes.Shape): fixed for every run, or grid axes below
         "n_experts": Key("int"), "top_k": Key("int"), "n_shared_experts": Key("int"),
         "granularity": POS_NUM, "moe_every": POS_INT, "dense_first": Key("int")}
GRID = {"params": Key("list", item="number", positive=True, nonempty=True),
        "depths": Key("list", item="int", positive=True, nonempty=True),
        "ff_ratios": Key("list", item="number", positive=True, nonempty=True),
        "shapes": Key("list", item="table", nonempty=True),
        "aspect_ratios": Key("list", item="number", positive=True, nonempty=True),
        "tolerance": POS_NUM,
        # per-layer plans of every shape (archfit.shapes.parse_plan) and where the parameters
        # a plan frees go (archfit.shapes.families.plan_variant)
        "variants": Key("list", item="str", nonempty=True),
        "reinvest": Key("str", choices=REINVEST),
        # sparsity axes (every combination; experts 0 is the dense model), sized by the total
        # or the active non-embedding count (params)
        "experts": Key("list", item="int", nonempty=True),
        "top_k": Key("list", item="int", positive=True, nonempty=True),
        "granularity": Key("list", item="number", positive=True, nonempty=True),
        # with granularity: expansion x G experts, top-G (Krajewski et al.'s setting)
        "expansion": POS_NUM,
        "count": Key("str", choices=("total", "active"))}
BUDGET = {"tokens": POS_NUM, "tokens_per_param": POS_NUM, "steps": POS_INT}
TRAIN = {"batch_size": POS_INT, "grad_accum": POS_INT, "ctx": POS_INT,
         "schedule": Key("str", choices=SCHEDULES), "warmup": Key("number"),
         "min_lr_ratio": Key("number"), "weight_decay": Key("number"),
         "grad_clip": Key("number"), "optimizer": Key("str", choices=OPTIMIZERS),
         "eval_every": POS_INT, "eval_windows": POS_INT, "checkpoint_every": Key("int"),
         "decay_fraction": Key("number"), "beta1": Key("number"), "beta2": Key("number"),
         "compile": Key("bool"), "threads": POS_INT,
         "precision": Key("str", choices=PRECISIONS),
         "parallel": Key("str", choices=PARALLEL),
         "tracker": Key("str", choices=TRACKERS), "tracker_dir": Key("str"),
         "moe_balance": Key("str", choices=MOE_BALANCES), "moe_aux_coef": Key("number")}
SLURM = {"partition": Key("str"), "time_min": POS_INT, "gpus_per_run": Key("int"),
         "cpus_per_run": POS_INT, "mem_gb": POS_NUM, "array_parallelism": POS_INT,
         "max_array_size": POS_INT, "additional": Key("table")}
RAY = {"address": Key("str"), "num_gpus": Key("number"), "num_cpus": Key("number"),
       "max_retries": Key("int")}
EXECUTOR = {"kind": Key("str", choices=("local", "slurm", "ray")), "concurrency": POS_INT,
            "threads_per_run": POS_INT, "throughput": POS_NUM, "gpus_per_run": POS_INT,
            "gpus_per_run_by_size": Key("table"), "gpu": Key("str"),
            "gpu_memory_gb": POS_NUM, "mfu": POS_NUM, "activation_checkpointing": Key("bool"),
            "slurm": Key("table", table=SLURM), "ray": Key("table", table=RAY)}
SPEC = {"name": Key("str"), "description": Key("str"), "data": Key("str"),
        "seeds": Key("list", item="int", nonempty=True, nonnegative=True),
        "lrs": Key("list", item="lr", positive=True, nonempty=True),
        # sequences per optimizer step, each trained at every learning rate (a rate x batch grid,
        # which 'fit --law lr-batch' reads); absent: [train] batch_size alone
        "batch_sizes": Key("list", item="int", positive=True, nonempty=True),
        # every run at each of these token counts ([budget] otherwise): a sweep over D
        "token_budgets": Key("list", item="number", positive=True, nonempty=True),
        "model": Key("table", table=MODEL), "grid": Key("table", table=GRID),
        "budget": Key("table", table=BUDGET), "train": Key("table", table=TRAIN),
        "executor": Key("table", table=EXECUTOR)}
# the keys of [train] that are the shape's, not the trainer's
_SHAPE_IN_TRAIN = ("ctx",)


@dataclass
class Run:
    run_id: str
    config: dict[str, Any]  # TrainConfig.to_dict()
    meta: dict[str, Any]  # target_params, sweep

    @property
    def train_config(self) -> TrainConfig:
        return TrainConfig.from_dict(self.config)

    @property
    def shape(self) -> Shape:
        return self.train_config.shape


@dataclass
class Spec:
    name: str
    path: str
    raw: dict[str, Any]
    runs: list[Run] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # family members that did not fit
    executor: dict[str, Any] = field(default_factory=dict)

    def default_out(self) -> str:
        return os.path.join(os.path.dirname(os.path.abspath(self.path)), "runs", self.name)

    def gpus_for(self, run: Run) -> int:
        """GPUs (= processes) that train ``run``: ``executor.gpus_per_run_by_size`` (the entry of
        the largest size class at or below the run's target size; 1 below the smallest),
        else ``executor.gpus_per_run`` (or ``executor.slurm.gpus_per_run``), else 1."""
        ex = self.executor
        by_size = ex.get("gpus_per_run_by_size")
        if by_size:
            size = float(run.meta.get("target_params") or run.shape.params_non_embedding)
            fits = [(number(k), int(v)) for k, v in by_size.items() if number(k) <= size]
            return max(fits)[1] if fits else 1
        return int(ex.get("gpus_per_run") or (ex.get("slurm") or {}).get("gpus_per_run") or 1)


def run_id_of(config: dict[str, Any], meta: dict[str, Any]) -> str:
    config = {k: v for k, v in config.items() if k not in RUNTIME_KEYS}
    blob = json.dumps({"config": config, "target_params": meta.get("target_params")},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _read(path: str) -> dict[str, Any]:
    if not os.path.exists(path):
        raise SpecError("no such sweep spec; see sweeps/smoke.toml for an example", path)
    if os.path.isdir(path):
        raise SpecError("is a directory; give the spec's .toml file", path)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"not valid TOML: {e}", path) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(f"cannot read: {getattr(e, 'strerror', None) or e}", path) from None


def _budget(raw: dict[str, Any], problems: list[str]) -> Budget | None:
    b: dict[str, Any] = raw["budget"] if isinstance(raw.get("budget"), dict) else {}
    listed = (raw.get("grid") or {}).get("shapes")
    if not b and isinstance(listed, list) and listed and all(
            isinstance(s, dict) and "flops" in s for s in listed):
        return None  # every shape names its own FLOP budget
    if "token_budgets" in raw:  # each run's budget is one of these instead
        if b:
            problems.append("budget: give [budget] or token_budgets, not both")
        return None
    try:
        return Budget(**{k: (int(v) if k == "steps" else number(v))  # type: ignore[arg-type]
                         for k, v in b.items() if k in BUDGET})  # Budget checks each kind
    except (ArchfitError, TypeError, ValueError) as e:
        problems.append(f"budget: {e}")
        return None


def _family(grid: dict[str, Any], target: float, head: dict[str, Any], base: dict[str, Any],
            multiple: int) -> list[Any]:
    tol = number(grid.get("tolerance", DEFAULT_TOLERANCE))
    ffs = [number(x) for x in grid.get("ff_ratios", [4])]
    if "aspect_ratios" in grid:
        if grid.get("count", "total") != "total":
            raise ValueError("grid.count = 'active' sizes depths (grid.depths), not "
                             "aspect_ratios")
        return [m for ff in ffs for m in aspect_ratio_family(
            target, [number(a) for a in grid["aspect_ratios"]], ff, multiple=multiple,
            tolerance=tol, **head, **base)]
    return iso_param_family(target, [int(d) for d in grid["depths"]], ffs, multiple=multiple,
                            tolerance=tol, count=grid.get("count", "total"), **head, **base)


def sparsity_bases(grid: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """The shape bases of the grid's sparsity axes (experts x top_k x granularity; experts 0
    is the dense model, once; or, with ``expansion``, each granularity G at expansion x G
    experts, top-G: the active MLP the dense one's width), or ``[base]`` without them."""
    axes = [k for k in ("experts", "top_k", "granularity", "expansion") if k in grid]
    if not axes:
        return [base]
    out: list[dict[str, Any]] = []
    if "expansion" in grid:  # Krajewski et al.'s setting: expansion x G experts, top-G
        return [{**base, "n_experts": int(round(number(grid["expansion"]) * number(g))),
                 "top_k": int(round(number(g))), "granularity": number(g)}
                for g in grid.get("granularity", [1.0])]
    for E in grid.get("experts", [base.get("n_experts", 0)]):
        if E == 0:
            dense = {k: v for k, v in base.items() if k not in MOE_FIELDS}
            if dense not in out:
                out.append(dense)
            continue
        for k in grid.get("top_k", [base.get("top_k", 1)]):
            for g in grid.get("granularity", [base.get("granularity", 1.0)]):
                out.append({**base, "n_experts": int(E), "top_k": int(k),
                            "granularity": number(g)})
    return out


DEFAULT_TOLERANCE = 0.05  # grid.tolerance: how far a family member may miss its size


def shape_base(raw: dict[str, Any]) -> dict[str, Any]:
    """The shape fields every run of a spec shares: the model table's architecture fields,
    its vocab (256, bytes, by default) and the context (train.ctx, 256 by default)."""
    model = raw.get("model", {})
    base = {k: model[k] for k in ARCH_FIELDS if k in model}
    base.update(vocab_size=model.get("vocab_size", 256),
                n_ctx=raw.get("train", {}).get("ctx", 256))
    return base


PlannedShape = tuple[Shape, float | None, str | None, float | None]


def _shapes(raw: dict[str, Any], problems: list[str]) -> tuple[list[PlannedShape], list[str]]:
    """The spec's shapes (with the size each was planned for, its layer variant and its own
    FLOP budget, if any) and the members that missed."""
    shapes, skipped = _base_shapes(raw, problems)
    variants = raw.get("grid", {}).get("variants")
    if not variants or problems:
        return [(s, t, None, c) for s, t, c in shapes], skipped
    reinvest = raw["grid"].get("reinvest", "none")
    out: list[PlannedShape] = []
    for s, t, c in shapes:
        for v in variants:
            try:
                out.append((plan_variant(s, v, reinvest), t, v, c))
            except ShapeError as e:
                problems.append(f"grid.variants: {s.n_layer} x {s.d_model}: {e}")
    return out, skipped


def _base_shapes(raw: dict[str, Any], problems: list[str]
                 ) -> tuple[list[tuple[Shape, float | None, float | None]], list[str]]:
    """The spec's shapes before variants (with the size each was planned for and the FLOP
    budget a ``grid.shapes`` entry names, trained on C / (6 N) tokens) and the members that
    missed."""
    model, grid = raw.get("model", {}), raw.get("grid", {})
    base = shape_base(raw)
    shapes: list[tuple[Shape, float | None, float | None]] = []
    skipped: list[str] = []
    if "shapes" in grid:
        for i, s in enumerate(grid["shapes"]):
            s = dict(s)
            flops = s.pop("flops", None)
            if flops is not None and (isinstance(flops, bool) or not isinstance(
                    flops, (int, float)) or not flops > 0):
                problems.append(f"grid.shapes[{i}]: flops must be a positive number (the "
                                f"run's FLOP budget), got {flops!r}")
                continue
            try:
                shapes.append((Shape(**{**base, **s}), None,
                               None if flops is None else float(flops)))
            except (ShapeError, TypeError) as e:
                problems.append(f"grid.shapes[{i}]: {e}")
        return shapes, skipped
    if "params" not in grid or not ({"depths", "aspect_ratios"} & set(grid)):
        problems.append("grid: give params (with depths or aspect_ratios) or shapes")
        return shapes, skipped
    head = (dict(head_dim=None, n_head=model["n_head"]) if "n_head" in model
            else dict(head_dim=model.get("head_dim", 64)))
    try:
        for b in sparsity_bases(grid, base):
            for t in (number(p) for p in grid["params"]):
                for m in _family(grid, t, head, b, model.get("multiple", 64)):
                    if m.shape is not None and m.within_tolerance:
                        shapes.append((m.shape, t, None))
                    else:
                        skipped.append(f"N={t:.3g} depth {m.n_layer}{_moe_label(b)}: {m.note}")
    except (ShapeError, ValueError, TypeError) as e:
        problems.append(f"grid: {e}")
    if not shapes and not problems:
        problems.append("grid: expands to no runs (every family member missed its tolerance: "
                        + "; ".join(skipped[:3]) + ")")
    return shapes, skipped


def _moe_label(base: dict[str, Any]) -> str:
    E = base.get("n_experts")
    return (f" ({E} experts, top-{base.get('top_k')}, granularity {base.get('granularity', 1):g})"
            if E else "")


def _runs(raw: dict[str, Any], name: str, shapes: list[PlannedShape], budget: Budget | None
          ) -> list[Run]:
    model, trn = raw.get("model", {}), raw.get("train", {})
    train_kw = {k: v for k, v in trn.items() if k not in _SHAPE_IN_TRAIN}
    runs = []
    data_sha = _manifest_sha(raw.get("data"))
    batches = raw.get("batch_sizes") or [None]  # None: [train] batch_size, or the default
    budgets = [Budget(tokens=number(t)) for t in raw.get("token_budgets") or []] or [budget]
    for s, target, variant, flops in shapes:
        # a shape with its own FLOP budget trains on D = C / (6 N), N non-embedding (Kaplan's)
        own = [Budget(tokens=flops / (6.0 * s.params_non_embedding))] if flops else budgets
        for lr, batch, seed, tokens in itertools.product(raw.get("lrs") or [3e-3], batches,
                                                         raw.get("seeds") or [0], own):
            kw = train_kw if batch is None else {**train_kw, "batch_size": batch}
            cfg = TrainConfig(shape=s, budget=tokens,
                              vocab_from_data=model.get("vocab_size") is None,
                              parametrization=model.get("parametrization", "standard"),
                              data=raw.get("data"), data_sha256=data_sha,
                              lr=1.0 if lr == "auto" else number(lr), seed=seed, **kw)
            meta: dict[str, Any] = {"target_params": target, "sweep": name}
            if flops:
                meta["budget_flops"] = flops
            if lr == "auto":
                cfg, meta["lr_source"] = resolve_lr(cfg)
            c = cfg.to_dict()
            if variant is not None:
                meta["variant"] = variant
            runs.append(Run(run_id_of(c, meta), c, meta))
    return runs


MAX_RUNS = 100_000


def _manifest_sha(data: str | None) -> str | None:
    """The hash of a prepared dataset's manifest (data = its folder or manifest.json): it goes
    into every run's id, so other data means other runs."""
    if not data:
        return None
    p = os.path.expanduser(data)
    man = p if p.endswith("manifest.json") else os.path.join(p, "manifest.json")
    if not os.path.isfile(man):
        return None
    from archfit.train.prepare import manifest_hash

    return manifest_hash(man)


NAME_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _check_name(name: Any, given: bool, problems: list[str]) -> None:
    """A sweep's name names its folders and its run table: a plain name (letters, digits and
    ``-_.``, not starting with ``.`` or ``-``), so nothing it writes can land outside the
    output folder."""
    if not isinstance(name, str) or not NAME_RULE.fullmatch(name) or name in (".", ".."):
        where = "name" if given else "the spec's file name (used as its name)"
        problems.append(f"{where}: {name!r} is not a plain name; use letters, digits and -_. "
                        "only (e.g. name = \"depth-sweep-1\")")


def missing_data(data: Any) -> str | None:
    """Why the data a spec names cannot be opened here, or None (``sweep run`` refuses such a
    spec before anything is made; ``sweep plan`` warns, since a plan may be for a cluster
    that holds the data)."""
    if not isinstance(data, str) or data in ("", "stdlib"):
        return None
    if os.path.exists(os.path.expanduser(data)):
        return None
    return (f"data: {data}: no such file or folder (a relative path is read from the folder "
            f"archfit runs in, {os.getcwd()}); run archfit data prepare, or give the path of "
            "prepared data, a token file or text")


def _check_data(data: Any, problems: list[str]) -> None:
    why = missing_data(data)
    if why:
        problems.append(why)


def _size_bound(raw: dict[str, Any]) -> int:
    """An upper bound on the runs a (schema-valid) spec expands to, from list lengths alone."""
    g = raw.get("grid", {})
    shapes = len(g["shapes"]) if "shapes" in g else len(g.get("params", [])) * max(
        len(g.get("depths", [])), len(g.get("aspect_ratios", []))) * len(g.get("ff_ratios", [4]))
    sparsity = max(1, len(g.get("experts") or [0]) * len(g.get("top_k") or [0])
                   * len(g.get("granularity") or [0]))
    return (shapes * len(raw.get("lrs") or [0]) * len(raw.get("seeds") or [0])
            * len(raw.get("batch_sizes") or [0]) * len(g.get("variants") or [0])
            * len(raw.get("token_budgets") or [0]) * sparsity)


def _check_gpus(spec: Spec, problems: list[str]) -> None:
    """gpus_per_run_by_size: sizes (numbers) to whole GPU counts; each count divides the
    batch of the runs it applies to (every process takes an equal share)."""
    by_size = spec.executor.get("gpus_per_run_by_size")
    if isinstance(by_size, dict):
        for k, v in by_size.items():
            try:
                number(k)
            except (ArchfitError, ValueError, TypeError):
                problems.append(f"executor.gpus_per_run_by_size: {k!r} is not a size (e.g. "
                                "\"1e8\" = 1)")
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                problems.append(f"executor.gpus_per_run_by_size.{k}: expected a positive whole "
                                f"number of GPUs, got {v!r}")
    if problems:
        return
    for r in spec.runs:
        g, b = spec.gpus_for(r), r.config.get("batch_size") or 1
        if g > 1 and b % g:
            problems.append(f"executor: a run with batch_size {b} on {g} GPUs: the batch must "
                            "divide evenly among the processes")
            return


def _with_help(problem: str) -> str:
    """A [train] key's problem, with what the key means (TrainConfig's FIELD_HELP)."""
    m = re.match(r"train\.(\w+): ", problem)
    if m and m.group(1) in FIELD_HELP and "unknown key" not in problem:
        return f"{problem} ({m.group(1)}: {FIELD_HELP[m.group(1)]})"
    return problem


def load_spec(path: str, max_runs: int = MAX_RUNS, check_data: bool = False) -> Spec:
    """Read and validate a sweep spec; every problem is reported at once (:class:`SpecError`).
    A spec that could expand to more than ``max_runs`` runs is refused before expanding it.
    ``check_data``: the data it names must exist now (``sweep run``; ``plan`` warns instead,
    and ``status`` and ``collect`` of a finished sweep do not need it)."""
    return spec_from_raw(_read(path), path, max_runs, check_data)


def spec_from_raw(raw: dict[str, Any], path: str, max_runs: int = MAX_RUNS,
                  check_data: bool = False) -> Spec:
    """:func:`load_spec` of a spec already read (``path`` names it in errors, and names the
    sweep when ``raw`` has no name): every problem at once (:class:`SpecError`)."""
    problems: list[str] = []
    check(raw, SPEC, "spec", problems)
    problems[:] = [_with_help(p) for p in problems]
    if not problems and _size_bound(raw) > max_runs:
        raise SpecError(f"expands to up to {_size_bound(raw):,} runs, more than --max-runs "
                        f"{max_runs:,}; shrink the grid, lrs or seeds, or raise --max-runs", path)
    budget = _budget(raw, problems)
    name = raw.get("name") or os.path.splitext(os.path.basename(path))[0]
    _check_name(name, "name" in raw, problems)
    if check_data:
        _check_data(raw.get("data"), problems)
    shapes, skipped, runs = [], [], []
    if not any(p.startswith(("grid", "model", "train.ctx")) for p in problems):
        shapes, skipped = _shapes(raw, problems)
    if not problems:
        runs = _runs(raw, name, shapes, budget)  # type: ignore[arg-type]
        if len({r.run_id for r in runs}) != len(runs):
            problems.append("grid: some runs are identical (duplicate shapes, lrs, batch_sizes or seeds)")
        for r in runs[:1] + [r for r in runs[1:] if r.config["lr"] != runs[0].config["lr"]]:
            try:  # every value a run is trained with, checked as the trainer checks it
                r.train_config.validate()
            except ArchfitError as e:
                problems.append(f"train / lrs: {e}")
                break
    spec = Spec(name=name, path=path, raw=raw, runs=runs, skipped=skipped,
                executor=dict(raw.get("executor", {})))
    _check_gpus(spec, problems)
    if problems:
        raise SpecError(problems, path)
    _assign_micro_batches(spec)
    return spec


def _assign_micro_batches(spec: Spec) -> None:
    """With a GPU named (executor.gpu or gpu_memory_gb), each run's micro-batch is the largest
    that fits (archfit.train.memory); it is not part of the run id."""
    ex = spec.executor
    if not (ex.get("gpu") or ex.get("gpu_memory_gb")):
        return
    from archfit.train import memory
    from archfit.train.configure import micro_batch_for

    mem = ex.get("gpu_memory_gb") or memory.accelerator(ex["gpu"])[0]
    ac = bool(ex.get("activation_checkpointing"))
    for r in spec.runs:
        try:
            m, _, _ = micro_batch_for(r.train_config, spec.gpus_for(r), mem * memory.GIB,
                                      activation_checkpointing=ac)
        except ArchfitError:  # not one sequence fits: sweep plan --gpu says so
            continue
        r.config["micro_batch"] = m


def spec_for_runs(chosen: list[dict[str, Any]], spec: Any = None, description: str = ""
                  ) -> dict[str, Any]:
    """The sweep spec (as a dict, what ``archfit sweep run`` reads from TOML) that trains the
    ``chosen`` runs with the recipe of ``spec`` (a sweep spec's ``raw`` sections: data, model,
    train, executor; its seeds and learning rates)."""
    if not chosen or "n_layer" not in chosen[0]:
        raise SpecError("a sweep spec needs shapes (n_layer, d_model); write the chosen "
                        "runs as a table instead (-o next.csv)")
    raw: dict[str, Any] = {k: dict(spec.raw[k]) for k in ("model", "train", "executor")
                           if spec is not None and k in spec.raw}
    if spec is not None and "data" in spec.raw:
        raw["data"] = spec.raw["data"]
    toks = {round(c["tokens"]) for c in chosen}
    tpp = {round(c["tokens"] / c["params"], 2) for c in chosen}
    if len(toks) == 1:
        budget = {"tokens": float(toks.pop())}
    elif len(tpp) == 1:
        budget = {"tokens_per_param": float(tpp.pop())}
    else:
        raise SpecError(f"the chosen runs train on {len(toks)} different token counts; a "
                        "sweep spec holds one budget: write them as a table (-o next.csv)")
    model = raw.setdefault("model", {})
    model.pop("n_head", None)
    shapes = [_spec_shape(c) for c in chosen]
    default_lr = ((spec.raw.get("lrs") if spec is not None else None) or [3e-3])[0]
    runs = {(repr(sh), _lr(c.get("lr") or default_lr), int(c.get("seed") or 0))
            for sh, c in zip(shapes, chosen)}
    lrs, seeds = {r[1] for r in runs}, {r[2] for r in runs}
    if len({c.get("batch_size") for c in chosen if c.get("batch_size")}) > 1:
        raise SpecError("the chosen runs train at several batch sizes; a sweep spec built from "
                        "runs holds one: write them as a table (-o next.csv)")
    uniq = {r[0] for r in runs}
    if len(runs) != len(uniq) * len(lrs) * len(seeds):  # a spec trains shapes x lrs x seeds
        raise SpecError(f"the chosen runs are not every shape at every one of their "
                        f"{len(lrs)} learning rate(s) and {len(seeds)} seed(s), which is "
                        "what a sweep spec trains: write them as a table (-o next.csv)")
    shapes = [dict(t) for t in dict.fromkeys(tuple((k, tuple(v) if isinstance(v, list)
                                                     else v) for k, v in sh.items())
                                               for sh in shapes)]
    shapes = [{k: list(v) if isinstance(v, tuple) else v for k, v in sh.items()}
              for sh in shapes]
    raw.update(name=(spec.name + "-next") if spec is not None else "design-next",
               description=description,
               seeds=sorted(seeds), lrs=sorted(lrs), grid={"shapes": shapes}, budget=budget)
    return raw


def _lr(v: Any) -> Any:
    """A learning rate as a spec holds it: a number, or "auto" (the published recipe's)."""
    return v if v == "auto" else float(v)


def _spec_shape(c: dict[str, Any]) -> dict[str, Any]:
    """A chosen run as a grid.shapes entry: its dimensions and its per-layer plan (a layer
    variant written as a uniform shape would train a different model)."""
    out: dict[str, Any] = {k: int(c[k]) for k in ("n_layer", "d_model", "n_head", "d_ff")
                           if c.get(k)}
    plan = c.get("plan")
    if plan and plan != "uniform":
        out.update({k: list(v) for k, v in parse_plan(plan, out["n_layer"]).items()})
    return out
