"""Shared pieces of the CLI: number options, the one map from shape flags to :class:`Shape`'s
field names, JSON output, tables."""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Callable, Iterable, Sequence

import click

from archfit.text import WIDTH, wrap

from archfit.errors import ArchfitError
from archfit.io import jsonable
from archfit.numbers import parse_list, parse_number
from archfit.train.accelerators import DEVICES
from archfit.shapes import MLP_KINDS


class NumberType(click.ParamType):
    """Accepts 1e12, 50e6, 50M, 1.3B, 1T."""

    name = "NUMBER"

    def __init__(self, integer: bool = False, positive: bool = True):
        self.integer = integer
        self.positive = positive

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            v = float(value)
        else:
            try:
                v = parse_number(value)
            except ArchfitError as e:
                self.fail(str(e).removeprefix("number: "), param, ctx)
        if self.positive and not v > 0:
            self.fail(f"{value!r} must be greater than zero", param, ctx)
        if self.integer:
            if v != int(v):
                self.fail(f"{value!r} must be a whole number", param, ctx)
            return int(v)
        return v


class LearningRateType(NumberType):
    """A positive learning rate, or ``auto`` (the published recipe's at the run's size and
    tokens, :mod:`archfit.train.hyperparameters`)."""

    name = "LR|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        return super().convert(value, param, ctx)


class NumberListType(click.ParamType):
    """A comma-separated list of numbers: 1,2,4,8 or 25M,50M."""

    name = "LIST"

    def __init__(self, integer: bool = False):
        self.integer = integer

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, list):
            return value
        try:
            items = parse_list(value, integer=self.integer)
        except ArchfitError as e:
            self.fail(str(e).replace("list: ", ""), param, ctx)
        if any(not x > 0 for x in items):
            self.fail(f"{value!r}: every value must be greater than zero", param, ctx)
        return items


NUMBER = NumberType()
LR = LearningRateType()


class WordOrNumber(click.ParamType):
    """A number, or one word that stands for a rule: ``llama`` for --ff-ratio (Meta's d_ff
    rule: 8/3 d rounded up to 256), ``auto`` for recommend's --vocab (the vocabulary law's
    pick)."""

    def __init__(self, word: str, number: click.ParamType, name: str):
        self.word, self.number, self.name = word, number, name

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() == self.word:
            return self.word
        try:
            return self.number.convert(value, param, ctx)
        except click.BadParameter as e:
            self.fail(f"{e.message}; or the word {self.word}", param, ctx)


INT = NumberType(integer=True)
FF_RATIO = WordOrNumber("llama", NUMBER, "ratio|llama")
VOCAB = WordOrNumber("auto", INT, "size|auto")
COUNT = NumberType(integer=True, positive=False)


class BootstrapCount(click.ParamType):
    """``--bootstrap``: a whole number of resamples, or ``auto``."""

    name = "count|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> int | str:
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        return COUNT.convert(value, param, ctx)


BOOTSTRAP = BootstrapCount()
INT_LIST = NumberListType(integer=True)
# a random seed: numpy's generators take none below 0, so neither does any --seed
SEED = click.IntRange(min=0)
NUMBER_LIST = NumberListType()


class OutPath(click.Path):
    """A path a command writes (or reads): an empty one is a mistake, never the default."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            self.fail("is empty; give a path", param, ctx)
        return super().convert(value, param, ctx)


PATH = OutPath()
FILE_PATH = OutPath(dir_okay=False)


# The one map from CLI flags to Shape's field names: every command that takes part of a shape
# declares it here, so --ctx is n_ctx, --vocab is vocab_size, --kv-heads is n_kv_head, ... and
# the command receives keyword arguments it can pass to Shape (or recommend) unchanged.
SHAPE_FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "n_layer": ("--layers", dict(type=INT, help="Number of blocks (n_layer).")),
    "d_model": ("--width", dict(type=INT, help="Model width (d_model).")),
    "n_head": ("--heads", dict(type=INT, help="Attention (query) heads (n_head).")),
    "n_kv_head": ("--kv-heads", dict(type=INT, default=None, help="Key/value heads (GQA/MQA).")),
    "ff_ratio": ("--ff-ratio", dict(type=NUMBER, default=None,
                                    help="d_ff / d_model (default 4).")),
    "d_ff": ("--d-ff", dict(type=INT, default=None, help="MLP hidden size (instead of "
                                                          "--ff-ratio).")),
    "vocab_size": ("--vocab", dict(type=INT, default=50257, show_default=True,
                                   help="Vocabulary size.")),
    "n_ctx": ("--ctx", dict(type=INT, default=1024, show_default=True,
                            help="Context length (tokens).")),
    "mlp": ("--mlp", dict(type=click.Choice(MLP_KINDS), default="gelu", show_default=True,
                          help="MLP kind (swiglu has three matrices).")),
    "qk_norm": ("--qk-norm", dict(is_flag=True, help="Normalize queries and keys per head.")),
    "qkv_bias": ("--qkv-bias", dict(is_flag=True, help="Biases on the q/k/v projections only "
                                                      "(Qwen2); --no-bias removes the rest.")),
    "tied_embeddings": ("--untied", dict(flag_value=False, default=True,
                                         help="Untied output head (counted as embedding).")),
    "position": ("--rope", dict(flag_value="rope", default="learned",
                                help="Rotary positions (no position embedding).")),
    "bias": ("--no-bias", dict(flag_value=False, default=True,
                               help="No biases in linears and norms.")),
    "norm": ("--rmsnorm", dict(flag_value="rmsnorm", default="layernorm",
                               help="RMSNorm instead of LayerNorm.")),
    "no_mlp": ("--no-mlp", dict(default="", metavar="I,J", help="Layers without an MLP "
                                "(0 the first, -1 the last): a per-layer plan.")),
    "no_attn": ("--no-attn", dict(default="", metavar="I,J", help="Layers without attention "
                                  "(or 'mid', the middle layer).")),
    "heads_per_layer": ("--heads-per-layer", dict(default="", metavar="H0,H1,...",
                                                  help="Query heads of each layer at the fixed "
                                                       "head_dim width/heads (an hourglass).")),
    "d_head": ("--head-dim", dict(type=INT, default=None, help="Head width, where it is not "
                                  "width / heads (Qwen3, Gemma).")),
    # a mixture of experts (Shape's class docstring)
    "n_experts": ("--experts", dict(type=COUNT, default=0, help="Routed experts per sparse "
                                    "layer: a mixture of experts (0: a dense MLP).")),
    "top_k": ("--top-k", dict(type=COUNT, default=0, help="Routed experts each token uses.")),
    "n_shared_experts": ("--shared-experts", dict(type=COUNT, default=0,
                                                  help="Experts every token uses.")),
    "d_expert": ("--expert-d-ff", dict(type=INT, default=None, help="One expert's MLP width "
                                       "(default: d_ff / --granularity).")),
    "granularity": ("--granularity", dict(type=NUMBER, default=None, help="d_ff over one "
                                          "expert's width (Krajewski et al. 2024; default 1).")),
    "moe_every": ("--moe-every", dict(type=INT, default=1, help="Every k-th layer is sparse "
                                      "(layer i when (i + 1) % k == 0).")),
    "dense_first": ("--dense-first", dict(type=COUNT, default=0, help="The first n layers "
                                          "keep a dense MLP (DeepSeek).")),
    # multi-head latent attention (Shape's class docstring)
    "kv_lora_rank": ("--kv-rank", dict(type=COUNT, default=0, help="Multi-head latent "
                                       "attention (DeepSeek): the key/value latent's width.")),
    "q_lora_rank": ("--q-rank", dict(type=COUNT, default=0, help="With --kv-rank: the query "
                                     "latent's width (0: a full query projection).")),
    "qk_rope_head_dim": ("--rope-head-dim", dict(type=COUNT, default=0, help="With --kv-rank: "
                                                 "each head's rotary query/key part.")),
    "v_head_dim": ("--v-head-dim", dict(type=INT, default=None, help="With --kv-rank: each "
                                        "head's value width (default: the head width).")),
}
# the per-layer plan's flags (shapes.PLAN_FIELDS), for the commands that build a shape
PLAN_FLAGS = ("no_mlp", "no_attn", "heads_per_layer")


def shape_options(*fields: str, **overrides: dict[str, Any]) -> Callable[[Any], Any]:
    """Click options for these :class:`Shape` fields, each passed to the command under the
    field's own name; ``overrides`` change an option's settings, e.g. ``n_ctx={"default": 256}``."""
    def deco(f: Any) -> Any:
        for name in reversed(fields):
            flag, kw = SHAPE_FLAGS[name]
            f = click.option(flag, name, **{**kw, **overrides.get(name, {})})(f)
        return f
    return deco


# the options every command that reads a table of runs shares
map_option = click.option("--map", "maps", multiple=True, metavar="COL=SOURCE",
                          help="Map a foreign column: --map params='Model Size' (repeatable).")
group_option = click.option(
    "--group", "group", multiple=True, metavar="COL",
    help="Columns whose rows are one training run, resampled together by the bootstrap "
         "(repeatable; default: run_id, else one shape and seed at several token counts, else "
         "every row alone).")


def perf_options(f: Any) -> Any:
    """--gpu, --perf and --gpu-batch-tokens: where archfit.train.perf predicts a shape's speed."""
    f = click.option("--gpu-batch-tokens", type=NUMBER, default=None,
                     callback=_gpu_batch_tokens,
                     help="Tokens per GPU and optimizer step for the training speed (default "
                          "2^19, at most 2^26).")(f)
    f = click.option("--perf", "perf_file", default=None, metavar="FILE",
                     help="A calibrated step model (archfit throughput --out) for the training "
                          "speed instead of the modelled one.")(f)
    return click.option("--gpu", default=None, metavar="NAME", callback=_gpu_name,
                        help=f"The accelerator ({', '.join(DEVICES)}; default h100) whose "
                             "training speed and decode latency archfit.train.perf predicts.")(f)


def _gpu_batch_tokens(ctx: Any, param: Any, value: float | None) -> float | None:
    """Tokens per GPU and step from 1 to 2^26, as a recommendation takes them (past that the
    step's memory plan searches micro-batches for minutes)."""
    from archfit.recommending.request import MAX_GPU_BATCH_TOKENS

    if value is not None and not 1 <= value <= MAX_GPU_BATCH_TOKENS:
        raise click.BadParameter(f"{value:.3g} is not from 1 to {MAX_GPU_BATCH_TOKENS:,} "
                                 "(2^26) tokens per GPU and step; today's largest global "
                                 "batches are a few million tokens")
    return value


def _gpu_name(ctx: Any, param: Any, value: str | None) -> str | None:
    """An empty --gpu is a mistake, not a request for the default."""
    if value is not None and not value.strip():
        raise click.BadParameter(f"an empty name; give one of {', '.join(DEVICES)}")
    return value


def pick(kw: dict[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """The entries of ``kw`` named in ``fields`` (a command's shape keyword arguments)."""
    return {k: kw[k] for k in fields if k in kw}


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(jsonable(obj), indent=2, allow_nan=False))


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v != 0 and (abs(v) >= 1e6 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:.4g}"
    return str(v)


def _is_number(cell: str) -> bool:
    try:
        float(cell.replace(",", "").rstrip("%x"))
    except ValueError:
        return cell in ("-", "")
    return True


def print_table(rows: Sequence[dict[str, Any]], columns: Iterable[tuple[str, str]],
                title: str | None = None, caption: str | None = None,
                fit_width: bool = False) -> None:
    """Print rows as a table: rich on a terminal, aligned plain text otherwise; with
    ``fit_width`` (tables of text: formulas, sources), a plain table wider than 100 columns is
    drawn by rich at 100, its cells wrapped."""
    cols = list(columns)
    cells = [[fmt(r.get(key)) for key, _ in cols] for r in rows]
    headers = [h for _, h in cols]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    tty = sys.stdout.isatty()
    if tty or (fit_width and sum(widths) + 2 * (len(widths) - 1) > WIDTH):
        from rich.console import Console
        from rich.table import Table

        t = Table(title=title, caption=caption)
        for i, (_, header) in enumerate(cols):
            numeric = all(_is_number(r[i]) for r in cells)
            t.add_column(header, justify="right" if numeric else "left", overflow="fold")
        for row in cells:
            t.add_row(*row)
        Console(width=None if tty else WIDTH, no_color=not tty).print(t)
        return
    if title:
        click.echo(wrap(title))
    for r in [headers, *cells]:
        click.echo("  ".join(c.rjust(w) for c, w in zip(r, widths)).rstrip())
    if caption:
        click.echo(caption)
