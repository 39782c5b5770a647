"""``--emit FORMAT [-o DIR]``: the architecture a format implies, and writing the export."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

import click

from archfit.cli.common import PATH
from click.core import ParameterSource

from archfit.formats import FORMAT_NAMES
from archfit.io import atomic_write, check_output

if TYPE_CHECKING:
    from archfit.shapes import Shape


_FLAG_OF = {"mlp": "--mlp", "ff_ratio": "--ff-ratio", "position": "--rope",
            "norm": "--rmsnorm", "bias": "--no-bias", "tied_embeddings": "--untied",
            "d_ff": "--d-ff", "n_kv_head": "--kv-heads", "qk_norm": "--qk-norm"}


def emit_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--make-vocab-size-divisible-by", "vocab_divisible_by", type=int,
                     default=128, show_default=True,
                     help="--emit megatron: Megatron pads the vocabulary to a multiple of this "
                          "times --tp; the file and the output give the padded count. "
                          "recommend --vocab auto: the pick is a multiple of this.")(f)
    f = click.option("--force", is_flag=True, help="With -o: replace an existing file.")(f)
    f = click.option("-o", "--out", "out_dir", type=PATH, default=None, metavar="DIR",
                     help="With --emit: write the config into this folder (stdout if absent).")(f)
    return click.option("--emit", "emit", type=FormatName(), default=None,
                        help=f"Export the shape to a framework's config: "
                             f"{', '.join(FORMAT_NAMES)} (or a format registered with "
                             "archfit.formats.base.register).")(f)


class FormatName(click.ParamType):
    """A format name, checked against the registry only when one is given (the built-in names
    need no import: ``archfit recommend`` stays cold)."""

    name = "format"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(FORMAT_NAMES) + "|...]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> str:
        if value in FORMAT_NAMES:
            return value
        from archfit.formats import FormatError, get_format

        try:
            return get_format(value).name
        except FormatError as e:
            self.fail(str(e), param, ctx)


def refuse_unused_vocab_multiple(ctx: click.Context, emit: str | None,
                                 vocab_auto: bool | None = None) -> None:
    """--make-vocab-size-divisible-by given where nothing reads it (no --emit megatron, and for
    recommend no --vocab auto): one line, rather than a silent default."""
    if explicit(ctx, "vocab_divisible_by") and emit != "megatron" and not vocab_auto:
        raise click.UsageError("--make-vocab-size-divisible-by goes with --emit megatron"
                               + (" or --vocab auto" if vocab_auto is not None else "")
                               + ": nothing else reads it")


def explicit(ctx: click.Context, name: str) -> bool:
    """Whether the user gave this option (rather than its default)."""
    return ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE,
                                              ParameterSource.ENVIRONMENT)


def apply_family(ctx: click.Context, fmt: str) -> tuple[dict[str, Any], str]:
    """:func:`archfit.formats.apply_family` with the options the user gave on the command
    line (the rest are the format's family's): the block options, and the line that says so."""
    from archfit.formats import apply_family as apply

    return apply(fmt, given={k for k in ctx.params if explicit(ctx, k)},
                 flag_of=lambda k: _FLAG_OF.get(k, k))


def family_flags(fmt: str) -> str:
    """The shape flags that give a format's own family (``--mlp swiglu --rope ...``)."""
    from archfit.formats import get_format

    d = get_format(fmt).defaults
    flags = [f"--mlp {d['mlp']}"] if d["mlp"] != "gelu" else []
    flags += ["--rope"] if d["position"] == "rope" else []
    flags += ["--rmsnorm"] if d["norm"] == "rmsnorm" else []
    flags += ["--no-bias"] if not d["bias"] else []
    flags += ["--untied"] if not d["tied_embeddings"] else []
    flags += [f"--ff-ratio {d['ff_ratio']}"] if d["ff_ratio"] == "llama" else []
    return " ".join(flags)


def refuse_inexpressible(ctx: click.Context, shape: Shape, fmt: str,
                         suggest_family: bool = False) -> None:
    """Exit 2 naming what ``fmt`` cannot express; ``suggest_family``: name the flags of the
    format's own family (``shape --emit`` keeps the shape given and never swaps a field)."""
    from archfit.formats import FormatError, problems

    why = problems(shape, fmt)
    if why:
        given = [_FLAG_OF[k] for k in _FLAG_OF if k in ctx.params and explicit(ctx, k)]
        hint = f" (you asked for {', '.join(given)})" if given else ""
        fam = family_flags(fmt)
        tail = (f"; archfit keeps the shape you gave: for this format's family add {fam}"
                if suggest_family and fam else "")
        raise FormatError(f"--emit {fmt} cannot express this shape{hint}: {'; '.join(why)}"
                          f"{tail}")


def _export_path(fmt: str, out_dir: str) -> str:
    from archfit.formats import get_format

    return os.path.join(out_dir, get_format(fmt).filename)


def write_export(shape: Shape, fmt: str, out_dir: str | None, force: bool, tp: int | None = None,
                 vocab_divisible_by: int = 128, recipe: dict[str, Any] | None = None,
                 kept: dict[str, Any] | None = None) -> str | None:
    """The export on stdout (and its counts on stderr), or written atomically into ``out_dir``
    (checked beforehand by :func:`check_emit_args`) with a line naming the file and its counts;
    returns the path."""
    from archfit.formats import ExportOptions, get_format

    f = get_format(fmt)
    o = ExportOptions(tp=tp or 1, vocab_divisible_by=vocab_divisible_by, recipe=recipe,
                      kept=kept or {})
    text = f.render(shape, o)
    counts = f.count_text(shape, o)
    if out_dir is None:
        click.echo(text, nl=False)
        click.echo(f"{fmt}: {counts}", err=True)
        return None
    path = _export_path(fmt, out_dir)
    os.makedirs(out_dir, exist_ok=True)
    atomic_write(path, text)
    click.echo(f"wrote {path} ({fmt}; {counts})")
    click.echo(f"  use it: {f.command.replace('FILE', path).replace('DIR', out_dir)}")
    return path


def check_emit_args(fmt: str | None, out_dir: str | None, force: bool, as_json: bool,
                    inputs: tuple[str, ...] = ()) -> None:
    """Option combinations, and the output folder and file, before any work: the export never
    replaces one of the command's ``inputs`` (``shape --from``'s config), and replaces an
    existing file without ``--force`` only when archfit wrote it."""
    if fmt is None and (out_dir is not None or force):
        raise click.UsageError("-o/--force go with --emit FORMAT")
    if fmt is not None and as_json:
        raise click.UsageError("give --emit or --json, not both")
    if out_dir is not None:
        from archfit.formats import is_archfit_export

        what = f"{fmt} config"
        check_output(out_dir, what, inputs=inputs, folder=True)
        check_output(_export_path(fmt, out_dir), what, inputs=inputs,  # type: ignore[arg-type]
                     force=force, ours=is_archfit_export)
