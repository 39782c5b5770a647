"""``archfit campaign run|status|report``: the design → train → fit → recommend loop."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from archfit.cli.common import FILE_PATH, PATH, emit_json


@click.group()
def campaign() -> None:
    """Run the loop by itself: design, train, fit, recommend, until informative or spent."""


@campaign.command()
@click.argument("spec_path", metavar="SPEC")
@click.option("--out", required=True, type=PATH, metavar="DIR", help="The campaign's folder (its ledger).")
@click.option("--restart", is_flag=True,
              help="Start over: once SPEC passes every check, remove what archfit wrote in DIR "
                   "(its ledger and rounds; nothing else).")
@click.option("--json", "as_json", is_flag=True, help="Progress as JSON lines on stdout.")
def run(spec_path: str, out: str, restart: bool, as_json: bool) -> None:
    """Run (or resume) the campaign SPEC in DIR; kill it at any moment and run it again.
    A SPEC that raises the budget or the rounds, or changes a stop rule, continues a finished
    campaign; any other change is refused.

    Example: archfit campaign run sweeps/campaign-demo.toml --out campaign-demo
    """
    from archfit import campaign as cp

    def say(e: dict[str, Any]) -> None:
        if as_json:
            click.echo(json.dumps(e, default=str), nl=True)
            sys.stdout.flush()
        else:
            click.echo(cp.describe(e), err=True)

    cp.run(spec_path, out, restart=restart, progress=say)
    if not as_json:
        click.echo(cp.summary(cp.status(out)))


@campaign.command()
@click.argument("out", metavar="DIR")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(out: str, as_json: bool) -> None:
    """Where the campaign in DIR stands: rounds, spend, verdict, the target's CI, every run."""
    from archfit import campaign as cp

    st = cp.status(out)
    if as_json:
        emit_json(st.to_dict())
    else:
        click.echo(cp.summary(st))


@campaign.command()
@click.argument("out", metavar="DIR")
@click.option("-o", "path", required=True, type=FILE_PATH, metavar="FILE.html", help="The report to write.")
@click.option("--force", is_flag=True, help="Replace a file archfit did not write.")
def report(out: str, path: str, force: bool) -> None:
    """One self-contained HTML page of the campaign in DIR: the target's CI against the spend,
    each round's design, the final recommendation, the validation and the ledger."""
    from archfit.campaign import write_report

    click.echo(f"wrote {write_report(out, path, force=force)}")
