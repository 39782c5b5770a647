"""``--emit FORMAT [-o DIR]``: the architecture a format implies, and writing the export."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

import click
from click.core import ParameterSource

from archfit.formats import FORMAT_NAMES
from archfit.io import atomic_write, check_output

if TYPE_CHECKING:
    from archfit.shapes import Shape


_FLAG_OF = {"mlp": "--mlp", "ff_ratio": "--ff-ratio", "position": "--rope",
            "norm": "--rmsnorm", "bias": "--no-bias", "tied_embeddings": "--untied",
            "d_ff": "--d-ff", "n_kv_head": "--kv-heads", "qk_norm": "--qk-norm"}


def emit_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--force", is_flag=True, help="With -o: replace an existing file.")(f)
    f = click.option("-o", "--out", "out_dir", default=None, metavar="DIR",
                     help="With --emit: write the config into this folder (stdout if absent).")(f)
    return click.option("--emit", "emit", type=click.Choice(FORMAT_NAMES), default=None,
                        help="Export the shape: hf-llama / hf-gpt2 (transformers config.json), "
                             "nanogpt (GPTConfig), megatron (arguments), torchtitan (TOML), "
                             "litgpt (YAML).")(f)


def explicit(ctx: click.Context, name: str) -> bool:
    """Whether the user gave this option (rather than its default)."""
    return ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE,
                                              ParameterSource.ENVIRONMENT)


TP_FRIENDLY = 8  # --emit of a Llama-style format: heads divisible by 8 unless --tp says otherwise


def apply_family(ctx: click.Context, fmt: str | None, kw: dict[str, Any]) -> str | None:
    """Set the architecture options the user left at their defaults to the format's family
    (``--emit hf-llama`` designs a Llama-style shape); returns the line that says so."""
    if fmt is None:
        return None
    from archfit.frameworks import STYLE_TEXT, get_format

    f = get_format(fmt)
    for name, value in f.defaults.items():
        if name not in kw or explicit(ctx, name):
            continue
        if name == "ff_ratio" and kw.get("d_ff") is not None:
            continue  # an explicit --d-ff stands
        kw[name] = value
    given = [_FLAG_OF.get(k, k) for k in f.defaults if k in kw and explicit(ctx, k)]
    tp = ""
    if (f.style == "llama" and "tp" in kw and kw.get("tp") is None
            and not explicit(ctx, "tp")):  # a model this size is trained tensor-parallel
        kw["tp"] = TP_FRIENDLY
        tp = (f"; heads a multiple of {TP_FRIENDLY} (tensor-parallel friendly; --tp 1 to "
              "lift)")
    return (f"--emit {fmt}: designing {STYLE_TEXT[f.style]}"
            + (f" (as given: {', '.join(given)})" if given else "") + tp)


def refuse_inexpressible(ctx: click.Context, shape: Shape, fmt: str) -> None:
    from archfit.frameworks import FormatError, problems

    why = problems(shape, fmt)
    if why:
        given = [_FLAG_OF[k] for k in _FLAG_OF if k in ctx.params and explicit(ctx, k)]
        hint = f" (you asked for {', '.join(given)})" if given else ""
        raise FormatError(f"--emit {fmt} cannot express this shape{hint}: {'; '.join(why)}")


def _export_path(fmt: str, out_dir: str) -> str:
    from archfit.frameworks import get_format

    return os.path.join(out_dir, get_format(fmt).filename)


def write_export(shape: Shape, fmt: str, out_dir: str | None, force: bool) -> str | None:
    """The export on stdout, or written atomically into ``out_dir`` (checked beforehand by
    :func:`check_emit_args`); returns the path."""
    from archfit.frameworks import get_format

    text = get_format(fmt).render(shape)
    if out_dir is None:
        click.echo(text, nl=False)
        return None
    path = _export_path(fmt, out_dir)
    os.makedirs(out_dir, exist_ok=True)
    atomic_write(path, text)
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
        from archfit.frameworks import is_archfit_export

        what = f"{fmt} config"
        check_output(out_dir, what, inputs=inputs, folder=True)
        check_output(_export_path(fmt, out_dir), what, inputs=inputs,  # type: ignore[arg-type]
                     force=force, ours=is_archfit_export)
