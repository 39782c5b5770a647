"""How fast a shape trains and serves on a device: a step-time model, calibrated by a sweep's
own measured tokens/s or modelled from a data sheet (its matmul efficiency measured on the
device by ``benchmarks/bench_gpu.py`` where it was: :func:`calibration`), and a decode-latency
model. Plain arithmetic on the shape (no torch; numpy and scipy only inside
:func:`fit_step_model`).

**Training step time** (seconds per optimizer step, one process or GPU)::

    t = flop_s * F + byte_s * B + layer_s * n_layer + step_s

- ``F``: the step's exact matrix-multiply FLOPs (``matmul_train``: forward and backward of every
  projection, the attention scores over the whole context and the logits).
- ``B``: the step's memory traffic in bytes: every activation the backward pass keeps is
  written once and read once (archfit.train.memory's per-layer, per-token bytes), and AdamW reads and
  writes its fp32 state (parameter, gradient, two moments: 28 bytes per parameter).
- ``n_layer``: a fixed cost per layer and step (kernel launches, Python, synchronisation);
  it is what makes deep narrow shapes slow at the same FLOPs.
- ``step_s``: a fixed cost per step.

*Modelled* (:func:`modelled`): ``flop_s = 1 / (MATMUL_EFFICIENCY * peak)``, ``byte_s =
1 / (BANDWIDTH_EFFICIENCY * bandwidth)``, ``layer_s = LAYER_OVERHEAD_S``, ``step_s =
STEP_OVERHEAD_S``: assumptions, stated as such. *Calibrated* (:func:`fit_step_model`): the
four coefficients fitted (non-negative least squares, relative error) to measured runs, with
bootstrap CIs, a held-out error and a verdict.

**Decode latency** (one new token, :func:`decode_latency`): a roofline. The step reads every
weight once (bf16) and the KV cache of ``batch`` sequences of ``context`` tokens; it does
2 FLOPs per weight per sequence plus the attention over the context. Its time is the larger
of bytes / (``BANDWIDTH_EFFICIENCY`` * bandwidth) and FLOPs / (``MATMUL_EFFICIENCY`` * peak),
plus ``DECODE_LAYER_S`` per layer for the kernels each layer launches (eager, no CUDA
graphs). Tensor parallelism, speculative decoding and quantized weights are not modelled.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from importlib import resources
from typing import Any, Iterable, Mapping, NamedTuple

from archfit.train.accelerators import Device, device
from archfit.errors import ArchfitError
from archfit.numbers import draw_ends
from archfit.train.memory import activation_token_bytes
from archfit.shapes import Shape


MATMUL_EFFICIENCY = 0.5  # share of peak FLOP/s a large bf16 matmul reaches (assumed)
BANDWIDTH_EFFICIENCY = 0.8  # share of the data sheet's bandwidth a stream reaches (assumed)
LAYER_OVERHEAD_S = 60e-6  # per layer and training step: ~30 kernels x 2 us (assumed)
STEP_OVERHEAD_S = 2e-3  # per training step: optimizer launch, data, sync (assumed)
# an eager step's traffic per logit beyond a compiled one's: the cross-entropy's upcast, softmax
# and gradient passes over tokens x vocabulary in fp32 (assumed where no eager run was measured:
# about ten fp32 passes; a device's measured rows replace it, archfit.train.perf.calibration)
EAGER_LOGIT_BYTES = 40.0
DECODE_LAYER_S = 40e-6  # per layer and decoded token: ~10 kernels x 4 us, eager (assumed)
OPTIMIZER_BYTES = 28  # AdamW fp32: read/write parameter, m, v (24) + read gradient (4)
ASSUMPTIONS = (f"matmuls at {MATMUL_EFFICIENCY:.0%} of peak, memory at "
               f"{BANDWIDTH_EFFICIENCY:.0%} of bandwidth, {LAYER_OVERHEAD_S * 1e6:.0f} us per "
               f"layer and step, {STEP_OVERHEAD_S * 1e3:.0f} ms per step (assumed, not "
               "measured)")


# ============================================================================ training
def step_features(shape: Shape, tokens_per_step: float, precision: str = "bf16"
                  ) -> tuple[float, float, float, float]:
    """(matmul FLOPs, bytes of memory traffic, layers, 1) of one training step."""
    act = 2 if precision == "bf16" else 4
    flops = shape.flops_per_token("matmul_train") * tokens_per_step
    acts = 2 * activation_token_bytes(shape, act) * tokens_per_step
    return flops, acts + OPTIMIZER_BYTES * shape.params_total, float(shape.n_layer), 1.0


COEFFICIENTS = ("flop_s", "byte_s", "layer_s", "step_s")
STEP_MODEL_FORMAT = "archfit-step-model"  # the "format" of a step model's JSON


@dataclass
class StepModel:
    """Seconds per training step as a linear model of :func:`step_features` (see the module
    doc). ``kind`` is ``modelled`` (a data sheet and stated assumptions) or ``calibrated``
    (fitted to measured runs: ``ci``, ``heldout`` and ``trust`` say how well)."""

    flop_s: float
    byte_s: float
    layer_s: float
    step_s: float
    device: str
    kind: str  # modelled | calibrated
    precision: str = "bf16"
    source: str = ""
    ci: dict[str, list[float]] | None = None
    heldout: dict[str, Any] | None = None
    trust: dict[str, Any] | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)
    # an eager step's extra seconds per logit (tokens x vocabulary): its cross-entropy's passes
    # over the logits in fp32, which a compiled step fuses (0: the step is compiled)
    eager_logit_s: float = 0.0

    def step_time(self, shape: Shape, tokens_per_step: float, compiled: bool = True) -> float:
        f = step_features(shape, tokens_per_step, self.precision)
        eager = 0.0 if compiled else self.eager_logit_s * shape.vocab_size * tokens_per_step
        return sum(c * x for c, x in zip(self.coefficients(), f)) + eager

    def tokens_per_s(self, shape: Shape, tokens_per_step: float, compiled: bool = True
                     ) -> float:
        return tokens_per_step / self.step_time(shape, tokens_per_step, compiled)

    def coefficients(self) -> tuple[float, float, float, float]:
        return self.flop_s, self.byte_s, self.layer_s, self.step_s

    def label(self) -> str:
        return f"{self.kind} for {self.device}" + (f" ({self.source})" if self.source else "")

    def compare(self, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Measured against predicted tokens/s for runs of :func:`measured_runs` (kept as
        :attr:`runs`, each with its relative ``error``)."""
        self.runs = [{"run_id": r["run_id"], "n_layer": r["shape"].n_layer,
                      "d_model": r["shape"].d_model, "measured": r["tokens_per_s"],
                      "predicted": self.tokens_per_s(r["shape"], r["tokens_per_step"])}
                     for r in runs]
        for r in self.runs:
            r["error"] = r["predicted"] / r["measured"] - 1
        return self.runs

    def summary(self) -> str:
        """The coefficients with their CIs, the effective FLOP/s, the held-out check and the
        verdict, as text (the runs: :meth:`to_frame`)."""
        names = {"flop_s": "s per matmul FLOP", "byte_s": "s per byte moved",
                 "layer_s": "s per layer and step", "step_s": "s per step"}
        lines = [f"step model: {self.label()}; {self.precision}"]
        for k, what in names.items():
            ci = (self.ci or {}).get(k)
            lines.append(f"  {what:<22}{getattr(self, k):.4g}"
                         + (f"  [{ci[0]:.3g}, {ci[1]:.3g}] (95% bootstrap CI)" if ci else ""))
        if self.flop_s:
            lines.append(f"  -> {1 / self.flop_s:.3g} matmul FLOP/s effective")
        if self.heldout:
            h = self.heldout
            lines.append(f"held-out (two-fold, {h['predicted']} runs, each half predicting the "
                         f"other): median |error| {h['median_abs_rel_error']:.1%}, worst "
                         f"{h['max_abs_rel_error']:.1%}")
        if self.trust:
            lines.append(f"verdict: {self.trust['verdict'].upper()}: "
                         + "; ".join(self.trust["reasons"]))
        return "\n".join(lines)

    def to_frame(self) -> Any:
        """The runs compared (:meth:`compare`): measured and predicted tokens/s, error."""
        import polars as pl

        return pl.DataFrame(sorted(self.runs, key=lambda r: r["n_layer"]))

    def to_dict(self) -> dict[str, Any]:
        return {"format": STEP_MODEL_FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepModel:
        if d.get("format") != STEP_MODEL_FORMAT:
            raise ArchfitError("not an archfit step model (archfit throughput --out writes one)")
        try:
            return cls(**{k: v for k, v in d.items() if k != "format"})
        except TypeError as e:
            raise ArchfitError(f"a damaged step model: {e}") from None


def modelled(dev: str | Device, calibrated: bool = True) -> StepModel:
    """The step-time model of a data sheet and :data:`ASSUMPTIONS` (bf16); where archfit's
    trainer was measured on the device (:mod:`archfit.train.perf`), its matmuls at the
    measured efficiency instead (``calibrated=False``: the assumed one)."""
    d = device(dev) if isinstance(dev, str) else dev
    cal = calibration(d.key) if calibrated else None
    eff = cal.matmul_efficiency if cal else MATMUL_EFFICIENCY
    logit_bytes = cal.eager_logit_bytes if cal and cal.eager_logit_bytes else EAGER_LOGIT_BYTES
    source = f"{d.source}; {ASSUMPTIONS}" if cal is None else (
        f"{d.source}; matmuls at {eff:.0%} of peak, {cal.source}; memory at "
        f"{BANDWIDTH_EFFICIENCY:.0%} of bandwidth, {LAYER_OVERHEAD_S * 1e6:.0f} us per layer "
        f"and step, {STEP_OVERHEAD_S * 1e3:.0f} ms per step (assumed)")
    byte_s = 1 / (BANDWIDTH_EFFICIENCY * d.bandwidth)
    return StepModel(flop_s=1 / (eff * d.peak_flops), byte_s=byte_s, layer_s=LAYER_OVERHEAD_S,
                     step_s=STEP_OVERHEAD_S, device=d.key, kind="modelled", source=source,
                     eager_logit_s=logit_bytes * byte_s)


def gpu_hours(rows: list[dict[str, Any]], gpu: str, *, base: dict[str, Any] | None = None,
              tokens_per_step: float) -> tuple[Any, str]:
    """(GPU-hours of each run on ``gpu``, the unit's description): each row's shape (n_layer,
    d_model, optionally n_head and d_ff, the rest from ``base``) at its step time for
    ``tokens_per_step`` tokens, times its steps; without shape columns, its training FLOPs
    (C = 6 N D) at ``MATMUL_EFFICIENCY`` of peak."""
    import numpy as np

    model = modelled(gpu)  # an unknown GPU: one line naming the known ones
    if not rows or not {"n_layer", "d_model"} <= set(rows[0]):
        flops = np.array([6.0 * float(r["params"]) * float(r["tokens"]) for r in rows])
        return flops * model.flop_s / 3600.0, (
            f"GPU-hours on {model.device} (C = 6 N D at {MATMUL_EFFICIENCY:.0%} of peak; no "
            "shape columns for the step-time model)")
    b = {k: v for k, v in (base or {}).items()
         if k in ("vocab_size", "n_ctx", "mlp", "tied_embeddings")}
    out = np.empty(len(rows))
    for i, row in enumerate(rows):
        d, L = int(row["d_model"]), int(row["n_layer"])
        heads = int(row.get("n_head") or max(1, d // 64))
        s = Shape(n_layer=L, d_model=d, n_head=heads if d % heads == 0 else 1,
                  d_ff=int(row["d_ff"]) if row.get("d_ff") else None, **b)
        out[i] = model.step_time(s, tokens_per_step) * (float(row["tokens"]) / tokens_per_step) \
            / 3600.0
    return out, (f"GPU-hours on {model.device} (modelled step time, {tokens_per_step:,.0f} "
                 f"tokens per step; {model.source})")


def is_step_model(path: str) -> bool:
    """Whether ``path`` is a step model archfit wrote (archfit throughput --out)."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return isinstance(d, dict) and d.get("format") == STEP_MODEL_FORMAT


def load_step_model(path: str) -> StepModel:
    import json

    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except FileNotFoundError:
        raise ArchfitError(f"{path}: no such step model (archfit throughput DATA --out FILE "
                           "writes one)") from None
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise ArchfitError(f"{path}: not a readable step model ({type(e).__name__})") from None
    if not isinstance(d, dict):
        raise ArchfitError(f"{path}: not an archfit step model")
    try:
        return StepModel.from_dict(d)
    except ArchfitError as e:
        raise ArchfitError(f"{path}: {e}") from None


def measured_runs(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The runs of a run table that measured their speed: shape, tokens per step, tokens/s."""
    out = []
    for r in rows:
        tps, tokens, steps = r.get("tokens_per_s"), r.get("tokens"), r.get("steps")
        if r.get("status") not in (None, "ok") or not tps or not tokens or not steps:
            continue
        if not all(r.get(k) for k in ("n_layer", "d_model", "n_head")):
            continue
        shape = Shape.from_config({k: v for k, v in r.items()  # d_ff stands for ff_ratio
                                   if v is not None and k != "ff_ratio"})
        out.append({"shape": shape, "tokens_per_step": tokens / steps,
                    "tokens_per_s": float(tps), "device": r.get("device") or "unknown",
                    "run_id": r.get("run_id")})
    return out


def _nnls_rel(feats: Any, times: Any) -> Any:
    """Non-negative coefficients minimising the squared relative error of step times."""
    import numpy as np
    from scipy.optimize import nnls

    scale = feats.max(axis=0)
    scale[scale == 0] = 1.0
    A = feats / scale / times[:, None]  # rows in relative units
    coef, _ = nnls(A, np.ones(len(times)))
    return coef / scale


def fit_step_model(runs: list[dict[str, Any]], *, precision: str = "fp32",
                   bootstrap: int = 200, seed: int = 0, device_name: str | None = None
                   ) -> StepModel:
    """Calibrate :class:`StepModel` on measured runs (:func:`measured_runs`): coefficients by
    non-negative least squares on relative error, 95% bootstrap CIs over runs, a held-out check
    (fit on every other run by size of its step time, predict the rest) and a verdict."""
    import numpy as np

    if len(runs) < 5:
        raise ArchfitError(f"{len(runs)} runs measured their speed; a step model needs at least "
                           "5 (different depths or widths)")
    devices = sorted({r["device"] for r in runs})
    if len(devices) > 1:
        raise ArchfitError(f"the runs come from several devices ({', '.join(devices)}); "
                           "calibrate one device at a time")
    feats = np.array([step_features(r["shape"], r["tokens_per_step"], precision) for r in runs])
    times = np.array([r["tokens_per_step"] / r["tokens_per_s"] for r in runs])
    coef = _nnls_rel(feats, times)
    if bootstrap < 1:
        raise ArchfitError(f"--bootstrap must be 1 or more for the step model's CIs, got "
                           f"{bootstrap}")
    rng = np.random.default_rng(seed)
    boots = np.array([_nnls_rel(feats[i], times[i]) for i in
                      (rng.integers(0, len(runs), len(runs)) for _ in range(bootstrap))])
    ci = {n: draw_ends(boots[:, k], min_count=1) or [math.nan, math.nan]
          for k, n in enumerate(COEFFICIENTS)}
    heldout = holdout_check(feats, times)
    model = StepModel(*map(float, coef), device=device_name or devices[0], kind="calibrated",
                      precision=precision,
                      source=f"fitted to {len(runs)} measured runs", ci=ci, heldout=heldout)
    model.compare(runs)
    model.trust = step_model_trust(heldout, len(runs))
    return model


def precision_of(devices: Iterable[str]) -> str:
    """The compute dtype runs on these devices trained in: fp32 on CPUs, bf16 autocast on GPUs
    (what ``precision = "auto"`` does in the trainer)."""
    return "fp32" if all(d.startswith("cpu") for d in devices) else "bf16"


def calibrate(rows: Iterable[Mapping[str, Any]], *, step_model: str | None = None,
              precision: str = "auto", bootstrap: int = 200) -> StepModel:
    """A step model for the runs of a run table (rows): calibrated on them, or the saved one
    ``step_model`` (a path) compared with them. Raises when no row measured its speed."""
    runs = measured_runs(rows)
    if not runs:
        raise ArchfitError("no run measured its speed (ok runs with tokens_per_s, tokens and "
                           "steps); give collected run tables (archfit sweep collect)")
    if precision == "auto":
        precision = precision_of(r["device"] for r in runs)
    if step_model:
        model = load_step_model(step_model)
        model.compare(runs)
        return model
    return fit_step_model(runs, precision=precision, bootstrap=bootstrap)


def holdout_check(feats: Any, times: Any) -> dict[str, Any]:
    """Two-fold cross-validation: the runs ordered by step time are dealt into two halves by
    turns; each half's fit predicts the other, so every run is predicted once by a model that
    did not see it. Returns the relative errors of the predicted tokens/s."""
    import numpy as np

    order = np.argsort(times)
    halves = (order[::2], order[1::2])
    err = np.empty(len(order))
    for train, test in (halves, halves[::-1]):
        coef = _nnls_rel(feats[train], times[train])
        err[test] = times[test] / (feats[test] @ coef) - 1  # tokens/s predicted vs measured
    err = err[order]
    return {"fit_on": int(len(halves[1])), "predicted": int(len(order)),
            "max_abs_rel_error": float(np.max(np.abs(err))),
            "median_abs_rel_error": float(np.median(np.abs(err))),
            "errors": [float(e) for e in err]}


# held-out error of predicted tokens/s that makes a step model informative / weak
STEP_INFORMATIVE, STEP_WEAK = 0.10, 0.25


def step_model_trust(heldout: Mapping[str, Any], n: int) -> dict[str, Any]:
    worst = heldout["max_abs_rel_error"]
    reasons = [f"held-out tokens/s within {worst:.1%} on {heldout['predicted']} runs "
               f"(two-fold)"]
    if worst <= STEP_INFORMATIVE and n >= 8:
        verdict = "informative"
    elif worst <= STEP_WEAK:
        verdict = "weak"
        if n < 8:
            reasons.append(f"only {n} runs")
    else:
        verdict = "uninformative"
    return {"verdict": verdict, "reasons": reasons}


def expert_all_to_all(shape: Shape, tokens_per_step: float, dev: str | Device,
                      expert_parallel: int = 8, dtype_bytes: int = 2) -> dict[str, Any] | None:
    """A mixture of experts' expert-parallel all-to-all in one training step of one GPU,
    modelled: each sparse layer sends every token's activation to its ``top_k`` experts and
    back (dispatch and combine), in the forward pass and again in the backward. Of that, the
    share bound for the other GPUs of its node, ``(min(ep, 8) - 1) / ep``, crosses NVLink, and
    the share bound for other nodes, ``(ep - min(ep, 8)) / ep``, the network (one NIC per
    GPU), each at ``BANDWIDTH_EFFICIENCY`` of the data sheet's rate each way, the two at once.
    Assumed: experts spread evenly over ``expert_parallel`` GPUs in nodes of 8, balanced
    routing, no overlap with compute. None for a dense shape."""
    from archfit.train.accelerators import GPUS_PER_NODE

    if not shape.moe:
        return None
    d = device(dev) if isinstance(dev, str) else dev
    if expert_parallel < 1:
        raise ArchfitError(f"expert_parallel must be at least 1, got {expert_parallel}")
    ep = expert_parallel
    node = min(ep, GPUS_PER_NODE)
    routed = 2 * 2 * shape.n_sparse_layers * tokens_per_step * shape.top_k * shape.d_model \
        * dtype_bytes
    in_node, off_node = routed * (node - 1) / ep, routed * (ep - node) / ep
    t_link = in_node / (BANDWIDTH_EFFICIENCY * d.link_bandwidth) if d.link_bandwidth else None
    t_net = off_node / (BANDWIDTH_EFFICIENCY * d.network_bandwidth) \
        if d.network_bandwidth else None
    t = None if t_link is None or (off_node and t_net is None) else max(t_link, t_net or 0.0)
    return {"bytes_per_step": in_node + off_node, "off_node_bytes_per_step": off_node,
            "s_per_step": t, "expert_parallel": ep, "device": d.key, "kind": "modelled",
            "assumptions": (f"bf16 activations, dispatch and combine in the forward and backward "
                            f"passes; {(node - 1) / ep:.0%} of them to GPUs of the node over "
                            f"NVLink ({d.link_bandwidth / 1e9:.0f} GB/s each way)"
                            + (f", {(ep - node) / ep:.0%} to other nodes over the network "
                               f"({d.network_bandwidth / 1e9:.0f} GB/s each way)"
                               if off_node else "")
                            + f", at {BANDWIDTH_EFFICIENCY:.0%} of each; balanced routing, no "
                              "overlap with compute")}


# bytes a parameter takes to train with Adam in mixed precision: bf16 weights and gradients,
# fp32 master weights and the two moments (the ZeRO paper's 16, Rajbhandari et al. 2020)
TRAIN_BYTES_PER_PARAM = 16
# the share of a GPU's memory the sharded weights and optimizer may take (the rest:
# activations, buffers, the framework)
STATE_MEMORY_SHARE = 0.5


def training_layout(shape: Shape, dev: str | Device) -> dict[str, Any]:
    """The fewest whole nodes of ``dev`` whose memory holds the model's training state
    (:data:`TRAIN_BYTES_PER_PARAM` a parameter, sharded over every GPU, in
    :data:`STATE_MEMORY_SHARE` of each GPU's memory), and a mixture of experts' expert
    parallelism over them (every GPU, at most one expert's share each: min(GPUs, experts))."""
    from archfit.train.accelerators import GPUS_PER_NODE

    d = device(dev) if isinstance(dev, str) else dev
    state = TRAIN_BYTES_PER_PARAM * shape.params_total
    per_gpu = STATE_MEMORY_SHARE * d.memory_gib * 2 ** 30
    nodes = max(1, math.ceil(state / per_gpu / GPUS_PER_NODE))
    gpus = nodes * GPUS_PER_NODE
    return {"gpus": gpus, "nodes": nodes, "device": d.key,
            "expert_parallel": min(gpus, shape.n_experts) if shape.moe else None,
            "state_bytes": state, "state_gib_per_gpu": state / gpus / 2 ** 30,
            "kind": "modelled",
            "assumptions": (f"{TRAIN_BYTES_PER_PARAM} bytes a parameter (bf16 weights and "
                            "gradients, fp32 master weights and Adam's moments), sharded over "
                            f"every GPU in at most {STATE_MEMORY_SHARE:.0%} of its "
                            f"{d.memory_gib:.0f} GiB; whole nodes of {GPUS_PER_NODE}")}


# ============================================================================ inference
def decode_latency(shape: Shape, dev: str | Device, *, batch: int = 1,
                   context: int | None = None, dtype_bytes: int = 2) -> dict[str, Any]:
    """Predicted time to decode one token for ``batch`` sequences holding ``context`` tokens
    (default: the shape's n_ctx) on ``dev``, and what bounds it (see the module doc)."""
    d = device(dev) if isinstance(dev, str) else dev
    if batch < 1:
        raise ArchfitError(f"batch must be at least 1, got {batch}")
    ctx = shape.n_ctx if context is None else context
    head = shape.vocab_size * shape.d_model  # the output layer (tied or not) is read once
    # a mixture of experts reads the experts its tokens use: its active weights (exact at
    # batch 1; a larger batch reaches more experts, which this does not model)
    blocks = shape.params_active_non_embedding
    weights = (blocks + head) * dtype_bytes
    attending = [lay for lay in shape.layers() if lay.attn]
    kv = batch * ctx * sum(shape.kv_cache_width(lay.kv_heads) for lay in attending) * dtype_bytes
    flops = batch * (2 * (blocks + head)
                     + 4 * ctx * sum(shape.attention_width(lay.heads) for lay in attending))
    t_mem = (weights + kv) / (BANDWIDTH_EFFICIENCY * d.bandwidth)
    t_cmp = flops / (MATMUL_EFFICIENCY * d.peak_flops)
    t = max(t_mem, t_cmp) + shape.n_layer * DECODE_LAYER_S
    return {"ms_per_token": t * 1e3, "batch": batch, "context": ctx, "device": d.key,
            "weight_bytes": weights, "kv_cache_bytes": kv, "flops": flops,
            "bound": "memory" if t_mem >= t_cmp else "compute",
            "layer_overhead_ms": shape.n_layer * DECODE_LAYER_S * 1e3,
            "kind": "modelled",
            "assumptions": (f"bf16 weights and KV cache read once per token at "
                            f"{BANDWIDTH_EFFICIENCY:.0%} of {d.bandwidth / 1e12:.2f} TB/s, "
                            f"matmuls at {MATMUL_EFFICIENCY:.0%} of peak, "
                            f"{DECODE_LAYER_S * 1e6:.0f} us of kernel launches per layer "
                            "(eager); no tensor parallelism, no speculative decoding")}


# ============================================================================ measured
# What archfit's trainer measured on each accelerator, and the planner's numbers taken from it.
#
# ``archfit/published/gpu_measured.json`` holds the runs of ``benchmarks/bench_gpu.py --out``
# (one entry per device and date: each shape's measured tokens/s and peak memory, archfit's and
# HF's, eager and compiled). From archfit's rows on a device the planner takes:
# - ``matmul_efficiency``: from the compiled rows, the share of the data sheet's peak at which
#   the step-time model (:func:`modelled`) reproduces each row's measured step time, its other
#   terms (bytes, per-layer and per-step costs) as assumed; the median over the rows.
# - ``eager_logit_bytes``: from the eager rows, the step time beyond that compiled model, per
#   logit (tokens x vocabulary), in bytes at the assumed bandwidth; the median over the rows.
# - ``mfu``: measured tokens/s times the ``kaplan_train`` FLOPs per token over the data sheet's
#   peak, the median over the compiled rows: what ``sweep plan --gpu`` prices GPU-hours at.
# - ``activation_share``, eager and compiled apart: the measured peak less everything
#   :func:`archfit.train.memory.estimate` counts beside the activations (weights, gradients,
#   optimizer state, the logits, :data:`OVERHEAD_GIB` of fixed overhead, assumed), over the
#   activations it counts; the median over each mode's rows.
# A device with no measured rows keeps the assumed figures (MATMUL_EFFICIENCY,
# EAGER_LOGIT_BYTES, DEFAULT_MFU, every activation counted), and every output says which it
# used.
MEASURED_FILE = "gpu_measured.json"


class Calibration(NamedTuple):
    """A device's planner figures measured by benchmarks/bench_gpu.py (the section's comment)."""

    matmul_efficiency: float
    mfu: float
    overhead_gib: float
    rows: int
    source: str
    # the share of the counted activations a step holds at its peak, eager and compiled
    # (None: not measured in that mode), and an eager step's extra bytes per logit
    activation_share: dict[str, float | None] = {"eager": None, "compiled": None}
    eager_logit_bytes: float | None = None


@lru_cache(maxsize=1)
def gpu_measured() -> tuple[dict[str, Any], ...]:
    """The shipped bench_gpu.py runs (none until one is measured)."""
    text = resources.files("archfit").joinpath("published", MEASURED_FILE).read_text("utf-8")
    return tuple(json.loads(text).get("runs", []))


def derive(runs: Any, key: str) -> Calibration | None:
    """The figures of device ``key`` (h100, h200, ...) from bench_gpu.py ``runs``; None when
    none of them measured archfit compiled on that device."""
    from archfit.train import memory
    from archfit.train.accelerators import DEVICES, device_key
    from archfit.train.memory import OVERHEAD_GIB

    dev = DEVICES[key]
    base = modelled(dev, calibrated=False)
    rows = [(run, r) for run in runs if device_key(run.get("device", "")) == key
            for r in run.get("rows", []) if r.get("model") == "archfit" and r.get("tokens_per_s")]
    effs, mfus, dates = [], [], []
    share: dict[str, list[float]] = {"eager": [], "compiled": []}
    for run, r in rows:
        s = Shape(**r["fields"])
        tokens = r["batch"] * s.n_ctx
        if r.get("compiled"):
            flops, nbytes, layers, one = step_features(s, tokens, "bf16")
            rest = base.byte_s * nbytes + base.layer_s * layers + base.step_s * one
            t = tokens / r["tokens_per_s"]
            if t > rest:
                effs.append(flops / (dev.peak_flops * (t - rest)))
            mfus.append(r["tokens_per_s"] * s.flops_per_token("kaplan_train") / dev.peak_flops)
            dates.append(run.get("date", "undated"))
        if r.get("peak_memory_gib"):
            e = memory.estimate(s, r["batch"], precision="bf16", overhead_gib=OVERHEAD_GIB,
                                compiled=bool(r.get("compiled")))
            rest_gib = (e.total - e.activations) / memory.GIB
            share["compiled" if r.get("compiled") else "eager"].append(
                (r["peak_memory_gib"] - rest_gib) / (e.activations / memory.GIB))
    if not effs:
        return None
    eff = statistics.median(effs)
    compiled = replace(base, flop_s=1 / (eff * dev.peak_flops))
    extra = [(tokens / r["tokens_per_s"] - compiled.step_time(s, tokens))
             / (s.vocab_size * tokens) / base.byte_s
             for _, r in rows if not r.get("compiled")
             for s in [Shape(**r["fields"])] for tokens in [r["batch"] * s.n_ctx]]
    how = sorted({run.get("source") or "benchmarks/bench_gpu.py" for run, _ in rows})
    return Calibration(eff, statistics.median(mfus), OVERHEAD_GIB, len(rows),
                       f"measured on {dev.name}, {', '.join(sorted(set(dates)))}, "
                       f"{len(rows)} runs of archfit's trainer ({'; '.join(how)})",
                       {k: statistics.median(v) if v else None for k, v in share.items()},
                       max(0.0, statistics.median(extra)) if extra else None)


def planned(shape: Shape, dev: str, sequences: int, compiled: bool = True) -> dict[str, Any]:
    """What the planner says of training ``shape`` on one ``dev`` (h100, h200, ...) at
    ``sequences`` of ``shape.n_ctx`` tokens a step, compiled or eager: its tokens/s (the
    step-time model, :func:`modelled`) and its peak memory (:func:`archfit.train.memory.estimate`
    in bf16, with the device's measured activation share and overhead where
    ``benchmarks/bench_gpu.py`` measured it), and which figures were measured."""
    from archfit.train import memory
    from archfit.train.memory import OVERHEAD_GIB

    key = device(dev).key
    cal = calibration(key)
    mode = "compiled" if compiled else "eager"
    share = (cal.activation_share.get(mode) if cal else None)
    e = memory.estimate(shape, sequences, precision="bf16", compiled=compiled,
                        overhead_gib=cal.overhead_gib if cal else OVERHEAD_GIB,
                        activation_share=share or 1.0)
    return {"tokens_per_s": modelled(key).tokens_per_s(shape, sequences * shape.n_ctx,
                                                        compiled),
            "memory_gib": e.total / memory.GIB, "mode": mode,
            "calibrated": {"speed": cal is not None, "memory": share is not None},
            "source": cal.source if cal else ASSUMPTIONS}


def calibration(key: str) -> Calibration | None:
    """The shipped measurements' figures for device ``key``, or None (assumed figures)."""
    return derive(gpu_measured(), key)
