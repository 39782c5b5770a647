"""The ``archfit`` command. Subcommands are imported lazily, so ``archfit recommend`` never
pays for torch, matplotlib or polars it does not use."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from archfit.errors import ArchfitError

_COMMANDS: dict[str, tuple[str, str]] = {
    "shape": ("archfit.cli.shape_cmd:shape", "Count a shape's parameters and FLOPs exactly."),
    "grid": ("archfit.cli.shape_cmd:grid", "Iso-parameter families of shapes for a target size."),
    "train": ("archfit.cli.train_cmd:train", "Train one GPT and report its losses."),
    "sweep": ("archfit.cli.sweep_cmd:sweep", "Plan, run, watch and collect sweeps."),
    "fit": ("archfit.cli.fit_cmd:fit", "Fit a scaling law to tables of runs."),
    "laws": ("archfit.cli.fit_cmd:laws", "List the laws and the published fits shipped."),
    "recommend": ("archfit.cli.recommend_cmd:recommend", "Recommend a shape for a size or budget."),
    "plot": ("archfit.cli.plot_cmd:plot", "Draw a fit and its evidence."),
    "demo": ("archfit.cli.demo_cmd:demo", "Run the demo end to end: sweep, fit, recommend, plots."),
}


class ArchfitGroup(click.Group):
    """A click group with lazily imported commands and one-line errors (exit 2)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in _COMMANDS:
            return None
        module, attr = _COMMANDS[name][0].split(":")
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, help_) in _COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        try:
            rv = super().main(args, prog_name or "archfit", complete_var,
                              standalone_mode=False, **extra)
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx is not None else "archfit"
            click.echo(f"Error: {e.format_message()} (see '{where} --help')", err=True)
            sys.exit(2)
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted.", err=True)
            sys.exit(1)
        except ArchfitError as e:
            click.echo(f"Error: {e}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=ArchfitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="archfit", prog_name="archfit")
def main() -> None:
    """archfit: for N parameters, how deep and how wide?

    Counts shapes exactly, trains GPTs over depth x width grids, fits scaling laws to the
    runs and recommends a buildable shape with error bars.
    """
