"""The ``archfit`` command. The command modules import no torch, matplotlib or polars at their
top: each command imports what it uses when it runs."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from archfit.cli.backtest_cmd import backtest, predict
from archfit.cli.campaign_cmd import campaign
from archfit.cli.compare_cmd import compare
from archfit.cli.data_cmd import data
from archfit.cli.demo_cmd import demo
from archfit.cli.design_cmd import design
from archfit.cli.fit_cmd import fit, laws
from archfit.cli.plot_cmd import plot
from archfit.cli.recommend_cmd import recommend
from archfit.cli.shape_cmd import grid, shape
from archfit.cli.sweep_cmd import sweep
from archfit.cli.throughput_cmd import throughput
from archfit.cli.trade_cmd import trade
from archfit.cli.tune_cmd import tune
from archfit.cli.train_cmd import train
from archfit.cli.validate_cmd import validate
from archfit.errors import ArchfitError, Stopped, WorkerError, describe_os_error

EXIT_BAD_INPUT = 2  # any expected failure: bad input, a file that cannot be read or written
EXIT_RUNS_FAILED = 3  # sweep run: some runs failed or diverged (--allow-failures: 0)

# each command and its line in 'archfit --help', in that order
COMMANDS: dict[str, tuple[click.Command, str]] = {
    "shape": (shape, "Count a shape's parameters and FLOPs exactly."),
    "grid": (grid, "Iso-parameter families of shapes for a target size."),
    "train": (train, "Train one GPT and report its losses."),
    "data": (data, "Tokenize a corpus into training shards."),
    "sweep": (sweep, "Plan, run, watch and collect sweeps."),
    "fit": (fit, "Fit a scaling law to tables of runs."),
    "laws": (laws, "List the laws and the published fits shipped."),
    "predict": (predict, "Predict runs' loss with prediction intervals from a fit."),
    "backtest": (backtest, "Fit on smaller runs, predict larger ones: coverage and error."),
    "recommend": (recommend, "Recommend a shape for a size or budget."),
    "design": (design, "Choose the next runs: most information about a target for their cost."),
    "validate": (validate, "Train the recommended shape and its rivals: did it hold?"),
    "tune": (tune, "Write the learning-rate x batch sweep that tunes the recipe."),
    "trade": (trade,
              "A per-layer plan against the uniform shape: loss, step time, time to a loss."),
    "plot": (plot, "Draw a fit and its evidence."),
    "throughput": (throughput,
                   "Calibrate a step-time model on measured runs; measured vs predicted."),
    "compare": (compare, "Known models (GPT-3, Llama, ...) against a law's optimal depth."),
    "campaign": (campaign,
                 "Design, train, fit and recommend, round after round, within a budget."),
    "demo": (demo, "Run the demo end to end: sweep, fit, recommend, plots."),
}


class ArchfitGroup(click.Group):
    """A click group of :data:`COMMANDS` with one-line errors (exit 2)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return COMMANDS[cmd_name][0] if cmd_name in COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_) for name, (_, help_) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """The one error boundary: expected failures exit 2 with one line; anything else prints
        one line and the path of a log holding the traceback (``--debug`` or ``ARCHFIT_DEBUG=1``
        shows it instead)."""
        argv = list(sys.argv[1:] if args is None else args)
        debug = "--debug" in argv or os.environ.get("ARCHFIT_DEBUG", "") not in ("", "0")
        if "--debug" in argv:
            argv.remove("--debug")
        import warnings

        from archfit.errors import UninformativeWarning

        warnings.simplefilter("ignore", UninformativeWarning)  # every command prints its verdict
        rv: Any = None
        try:
            rv = super().main(argv, prog_name or "archfit", complete_var,
                              standalone_mode=False, **extra)
        except click.UsageError as e:
            where = e.ctx.command_path if e.ctx is not None else "archfit"
            _fail(f"{e.format_message()} (see '{where} --help')")
        except click.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted.", err=True)
            sys.exit(1)
        except WorkerError as e:  # a worker's failure: one line here, its traceback in a log
            if debug:
                raise
            _fail(f"{e}; the worker's traceback is in {_crash_log(e.worker_traceback)} (or "
                  "rerun with --debug); please report it", code=1)
        except ArchfitError as e:
            _fail(str(e))
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            sys.exit(130)
        except Stopped as e:  # SIGTERM while workers trained: they were stopped first
            click.echo(f"{e}: the runs under way were asked to checkpoint and stop, and did; "
                       "run the same command to resume", err=True)
            sys.exit(143)
        except OSError as e:
            if debug:
                raise
            _fail(describe_os_error(e))
        except Exception as e:  # the unexpected: one line here, the traceback in a log
            if debug:
                raise
            _fail(f"unexpected {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}; "
                  f"the traceback is in {_crash_log()} (or rerun with --debug); please report it",
                  code=1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    click.echo(f"Error: {' '.join(message.split())}", err=True)
    sys.exit(code)


def _crash_log(worker_traceback: str = "") -> str:
    """Write the current traceback (and a worker's, where one failed) to a log file; return
    its path."""
    import tempfile
    import time
    import traceback

    folder = os.environ.get("ARCHFIT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "archfit")
    try:
        os.makedirs(os.path.join(folder, "logs"), exist_ok=True)
        folder = os.path.join(folder, "logs")
    except OSError:
        folder = tempfile.gettempdir()
    path = os.path.join(folder, f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
    with open(path, "w") as f:
        f.write(f"archfit {' '.join(sys.argv[1:])}\n\n{traceback.format_exc()}")
        if worker_traceback:
            f.write(f"\nthe worker's own traceback:\n{worker_traceback}")
    return path


@click.group(cls=ArchfitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="archfit", prog_name="archfit")
@click.option("--debug", is_flag=True, help="Show full tracebacks (also ARCHFIT_DEBUG=1).")
def main(debug: bool = False) -> None:
    """archfit: for N parameters, how deep and how wide?

    Counts shapes exactly, trains GPTs over depth x width grids, fits scaling laws to the
    runs and recommends a buildable shape with error bars.
    """
