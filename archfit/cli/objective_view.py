"""``archfit recommend --objective time|cost|latency``: the candidates with their predicted loss,
speed, GPU-hours and latency, the pick, the trade-off in one line, and the Pareto figure
(the flow is :func:`archfit.recommending.objectives.recommend_for`; this module prints it)."""

from __future__ import annotations

from typing import Any

import click

from archfit.text import wrap

from archfit.cli.common import emit_json, print_table


def run_objective(req: Any, pareto: str | None, as_json: bool) -> None:
    """The objective's pick among the request's candidates, as a table or JSON, and with
    ``pareto`` (a .png path) its figure."""
    from archfit.recommending.objectives import recommend_for

    if pareto:
        from archfit.io import check_output
        from archfit.plots import is_archfit_png

        if not pareto.endswith(".png"):
            raise click.UsageError(f"--pareto {pareto}: give a .png path")
        step_model = req.objective.step_model
        check_output(pareto, "figure", inputs=[step_model] if step_model else (),
                     ours=is_archfit_png)
    c = recommend_for(req)
    figure = None
    if pareto:
        from archfit.plots import draw_pareto

        figure = draw_pareto(c, pareto)
    if as_json:
        emit_json({**c.to_dict(), "figure": figure})
        return
    click.echo(wrap(c.header()))
    print_table(*c.table(), caption=c.MARKS)
    click.echo("\n" + wrap(c.tradeoff))
    if figure:
        click.echo(f"wrote {figure}")
