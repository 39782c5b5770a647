"""What every export format shares: :class:`Format` (renderer, limits, reader), the
registry the format modules add themselves to (:func:`register`), the architecture families
(:data:`LLAMA_STYLE`, :data:`GPT2_STYLE`: :mod:`archfit.shapes.architectures`' blocks with the
frameworks' d_ff), :class:`ExportOptions`, :class:`Imported` and the helpers the readers share.
The format modules import this one; nothing here imports them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from archfit.errors import ShapeError
from archfit.shapes import Shape
from archfit.shapes.architectures import GPT2, LLAMA


class FormatError(ShapeError):
    """A config that cannot be read, or a shape a format cannot express."""


CONVENTION = ("params_total counts every trainable parameter once (tied embeddings once); "
              "params_non_embedding is Kaplan's N (no token/position embeddings, no untied head)")

# ====================================================================== architecture families
# the blocks of archfit.shapes.architectures, with each framework's d_ff: ff_ratio "llama" is
# Meta's rule (llama_ffn_hidden), the one Llama d_ff rule of archfit
LLAMA_STYLE: dict[str, Any] = {**LLAMA.fields, "ff_ratio": "llama", "ff_multiple": 256}
GPT2_STYLE: dict[str, Any] = {**GPT2.fields, "ff_ratio": GPT2.ff_ratio}
# the architecture a Llama-family config always has (its readers fill these in)
LLAMA_FIXED: dict[str, Any] = {k: v for k, v in LLAMA.fields.items() if k != "tied_embeddings"}


def llama_ffn_hidden(dim: int, multiple_of: int, ffn_dim_multiplier: float | None = None) -> int:
    """The SwiGLU hidden size of Meta's Llama reference ``FeedForward`` (and torchtitan's
    llama3 args): 2/3 of 4*dim, times the multiplier, rounded up to ``multiple_of``."""
    hidden = int(2 * 4 * dim / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def family_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Shape fields with a family's d_ff rule applied: ``ff_ratio="llama"`` (the Llama family's
    default) becomes the d_ff of :func:`llama_ffn_hidden` at the family's multiple."""
    out = dict(fields)
    out.pop("ff_multiple", None)
    if out.get("ff_ratio") == "llama":
        out["d_ff"] = llama_ffn_hidden(out["d_model"], LLAMA_STYLE["ff_multiple"])
        out["ff_ratio"] = None
    return out


@dataclass(frozen=True)
class ExportOptions:
    """What a file needs beyond the shape: the tensor-parallel degree, Megatron's vocab
    multiple (Megatron pads the vocabulary to ``vocab_divisible_by * tp``) and the recipe."""

    tp: int = 1
    vocab_divisible_by: int = 128
    # the recommendation's recipe (archfit.recommending.recipe), written as the framework's
    # training arguments where it has them (nanoGPT's globals, Megatron's TRAIN_ARGS)
    recipe: dict[str, Any] | None = None
    # fields of the config read with --from that do not change the counts but that the same
    # format writes (a mixture's routing: n_group, topk_group, routed_scaling_factor, ...):
    # kept as given rather than replaced by the export's defaults
    kept: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.tp < 1 or self.vocab_divisible_by < 1:
            raise FormatError(f"--tp and --make-vocab-size-divisible-by must be >= 1, got "
                              f"{self.tp} and {self.vocab_divisible_by}")


@dataclass(frozen=True)
class Format:
    """One export target: the family it implies, the file it writes, what it cannot express,
    the command its framework's users run with the file, and how ``--from`` reads it back."""

    name: str
    description: str
    style: str  # "llama" or "gpt2": the architecture the format implies
    filename: str
    render: Callable[[Shape, ExportOptions], str]
    limits: Callable[[Shape], list[str]]
    command: str  # how a user of the framework runs the file (FILE: the written file)
    d_ff_rule: Callable[[int], int] | None = None  # a d_ff the framework fixes (nanoGPT: 4 d)
    counts: Callable[[Shape, ExportOptions], str] | None = None  # the framework's own count
    # the reader of --from: the file suffixes it reads, whether a text is this format's (among
    # formats sharing a suffix), and the reader (never executing anything in the file)
    holds_plans: bool = False  # whether the file can hold a per-layer plan (Shape.layers)
    suffixes: tuple[str, ...] = ()
    sniff: Callable[[str], bool] = lambda text: True
    read: Callable[[str, str], Imported] | None = None
    # fields of the format's own family beyond its style's (a mixture of experts' experts)
    family: dict[str, Any] = field(default_factory=dict)

    def count_text(self, s: Shape, o: ExportOptions) -> str:
        """params_total, and the count the framework itself reports where that differs."""
        own = f"; {self.counts(s, o)}" if self.counts else ""
        return f"params_total {s.params_total:,}{own}"

    @property
    def defaults(self) -> dict[str, Any]:
        return {**(LLAMA_STYLE if self.style == "llama" else GPT2_STYLE), **self.family}


def need(cond: bool, reason: str, out: list[str]) -> None:
    if not cond:
        out.append(reason)


def llama_limits(s: Shape, who: str) -> list[str]:
    out: list[str] = []
    need(s.mlp == "swiglu", f"{who} has only a gated SiLU MLP (SwiGLU), not {s.mlp}", out)
    need(s.norm == "rmsnorm", f"{who} has only RMSNorm, not {s.norm}", out)
    need(s.position == "rope", f"{who} has only rotary positions, not {s.position}", out)
    need(not s.bias and not s.qkv_bias, f"{who} is written without biases (drop biases "
          "with --no-bias)", out)
    need(not s.qk_norm, f"{who} has no QK-norm", out)
    return out


def gpt2_limits(s: Shape, who: str = "GPT2Config") -> list[str]:
    out: list[str] = []
    need(s.mlp == "gelu", f"{who} has only a GELU MLP, not {s.mlp}", out)
    need(s.norm == "layernorm", f"{who} has only LayerNorm, not {s.norm}", out)
    need(s.position == "learned", f"{who} has only learned positions, not {s.position}", out)
    need(s.n_kv_head == s.n_head, f"{who} has only multi-head attention (no GQA/MQA)", out)
    need(not s.qk_norm, f"{who} has no QK-norm", out)
    if who == "GPT2Config":
        need(s.bias, f"{who} always has biases", out)
    return out


def count_note(s: Shape) -> str:
    return (f"params_total {s.params_total:,}; params_non_embedding {s.params_non_embedding:,} "
            f"(archfit {version()}): {CONVENTION}")


def version() -> str:
    from archfit._version import __version__

    return __version__


def archfit_block(s: Shape) -> dict[str, Any]:
    out = {"params_total": s.params_total, "params_non_embedding": s.params_non_embedding,
           "params_embedding": s.params_embedding, "convention": CONVENTION,
           "archfit_version": version()}
    if s.moe:
        out.update(params_active=s.params_active,
                   params_active_non_embedding=s.params_active_non_embedding)
    return out


def is_archfit_export(path: str) -> bool:
    """Whether ``path`` is a config archfit exported (an HF config.json with its ``archfit``
    entry, or a file whose header says "written by archfit"): such a file may be replaced."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(1 << 16)
    except (OSError, UnicodeDecodeError):
        return False
    if any("written by archfit" in line for line in head.splitlines()[:3]):
        return True
    try:
        cfg = json.loads(head)
    except ValueError:
        return False
    return isinstance(cfg, dict) and isinstance(cfg.get("archfit"), dict) \
        and "params_total" in cfg["archfit"]


@dataclass
class Imported:
    """A shape read from a framework config, and what archfit did with each field."""

    shape: Shape
    family: str
    ignored: list[str] = field(default_factory=list)  # known fields that do not change counts
    unknown: list[str] = field(default_factory=list)  # fields archfit does not know
    notes: list[str] = field(default_factory=list)
    # routing fields as the file gives them (they do not change the counts; an export to the
    # same format keeps them)
    routing: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "ignored_fields": self.ignored,
                "unknown_fields": self.unknown, "notes": self.notes, "routing": self.routing}


def whole(cfg: dict[str, Any], key: str) -> Any:
    v = cfg[key]
    if isinstance(v, float) and v.is_integer():
        raise FormatError(f"{key} is {v!r}, written with a decimal point; the framework reads an "
                          f"integer here (transformers would fail on it): write {int(v)}")
    if isinstance(v, bool) or not isinstance(v, (int, type(None))):
        raise FormatError(f"{key} must be a whole number, got {v!r}")
    return v


def json_object(text: str, where: str) -> dict[str, Any]:
    """A JSON config's top-level object; anything else (not JSON, an array, a number past
    Python's 4,300-digit limit) is one line naming ``where``."""
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(f"{where}: not valid JSON ({e}); a config is one JSON object, "
                          "without comments") from None
    except ValueError as e:  # an integer of thousands of digits
        raise FormatError(f"{where}: a number in it is too long to be a model's ({e.args[0][:60]}"
                          "...)") from None
    if not isinstance(d, dict):
        raise FormatError(f"{where}: a JSON {type(d).__name__.replace('list', 'array')}, not a "
                          "config (one JSON object of fields)")
    return d


def python_literals(text: str, where: str) -> dict[str, Any]:
    """The module-level ``NAME = literal`` assignments of a Python file, read with ``ast``
    (never executed)."""
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise FormatError(f"{where}: not valid Python ({e.msg}, line {e.lineno})") from None
    out: dict[str, Any] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue  # not a literal: code, which archfit does not run
    return out


# the formats that hold a mixture of experts, and those that hold a head width of its own
MOE_FORMATS = ("hf-mixtral", "hf-qwen3-moe", "hf-deepseek-v3", "megatron")
HEAD_DIM_FORMATS = ("hf-llama", "hf-mixtral", "hf-qwen3-moe", "hf-deepseek-v3", "megatron")
MLA_FORMATS = ("hf-deepseek-v3",)


def plan_limits(s: Shape, who: str) -> list[str]:
    """No format archfit writes holds a per-layer plan: its loader builds one block n_layer
    times, so a plan is refused, naming its first non-uniform layer, never uniformized. A
    mixture of experts (or a head width other than d_model / n_head) is refused by the formats
    that cannot hold one, naming those that can."""
    if s.mla and who not in MLA_FORMATS:
        return [f"{who} has no multi-head latent attention; export it with --emit "
                f"{' or '.join(MLA_FORMATS)}"]
    if s.moe and who not in MOE_FORMATS:
        return [f"{who} has no experts (this shape has {s.n_experts}); export a mixture of "
                f"experts with --emit {' or '.join(MOE_FORMATS)}"]
    if s.d_head is not None and s.d_head * s.n_head != s.d_model and who not in HEAD_DIM_FORMATS:
        return [f"{who} has head_dim = width / heads, and this shape's heads are {s.d_head} "
                f"wide ({s.n_head} x {s.d_head} != {s.d_model}); export it with --emit "
                f"{' or '.join(HEAD_DIM_FORMATS)}"]
    for lay in s.layers():
        what = [w for w, missing in (("no MLP", not lay.mlp), ("no attention", not lay.attn),
                                     (f"{lay.heads} heads, not {s.n_head}",
                                      lay.heads != s.n_head)) if missing]
        if what:
            return [f"{who} builds every layer alike, and layer {lay.index} has "
                    f"{' and '.join(what)} (plan {s.plan}); train or count it with archfit, "
                    "or export the uniform shape"]
    return []



# ---------------------------------------------------------------------------- the registry
REGISTRY: dict[str, Format] = {}


def register(*formats: Format) -> None:
    """Add formats to the registry (a format module does so at import; a test or a plugin may
    add its own: ``--emit``, ``--from``, the limits and the contract test then serve it)."""
    for f in formats:
        REGISTRY[f.name] = f


def recipe_steps(recipe: dict[str, Any], n_ctx: int) -> dict[str, Any]:
    """The recipe in a framework's step units: sequences per optimizer step (at least 1),
    total steps, warmup steps, peak and final learning rates. A recipe no run could use (its
    verdict ``uninformative``) is refused, not rounded into a config."""
    if recipe.get("verdict") == "uninformative":
        raise FormatError("the recipe is not one a run could use ("
                          + "; ".join(recipe.get("reasons") or []) + "); give --tokens for a "
                          "run of many batches, or --fit an lr-batch fit of your own sweep")
    seqs = max(1, round(recipe["batch_tokens"]["value"] / n_ctx))
    steps = max(1, round(recipe["tokens"]["value"] / (seqs * n_ctx)))
    lr = recipe["lr"]["value"]
    return {"sequences": seqs, "steps": steps,
            "warmup": min(steps, round(recipe["warmup"]["steps"])),
            "lr": lr, "min_lr": lr * recipe["decay"]["min_lr_ratio"]}
