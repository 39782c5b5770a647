"""``archfit recommend --objective time|cost|latency``: the candidates with their predicted loss,
speed, GPU-hours and latency, the pick, the trade-off in one line, and the Pareto figure
(the flow is :func:`archfit.recommending.objectives.recommend_for`; this module prints it)."""

from __future__ import annotations

from typing import Any

import click

from archfit.text import wrap

from archfit.cli.common import emit_json, print_table


def run_objective(params: Any, compute: Any, fits: list[str], ff_ratio: Any, objective: str,
                  kw: dict[str, Any], o: dict[str, Any], strict: bool, as_json: bool) -> None:
    from archfit.recommending.objectives import recommend_for

    if o["pareto"]:
        from archfit.io import check_output
        from archfit.plots import is_archfit_png

        if not o["pareto"].endswith(".png"):
            raise click.UsageError(f"--pareto {o['pareto']}: give a .png path")
        check_output(o["pareto"], "figure", inputs=[o["perf_file"]] if o["perf_file"] else (),
                     ours=is_archfit_png)
    c = recommend_for(objective, params, compute=compute, fit=fits or None, ff_ratio=ff_ratio,
                      gpu=o["gpu"], step_model=o["perf_file"], gpu_hours=o["gpu_hours"],
                      tokens=o["tokens"], max_latency_ms=o["max_latency_ms"],
                      batch_tokens=o["gpu_batch_tokens"],
                      usd_per_gpu_hour=o["usd_per_gpu_hour"], strict=strict, **kw)
    figure = None
    if o["pareto"]:
        from archfit.plots import draw_pareto

        figure = draw_pareto(c, o["pareto"])
    if as_json:
        emit_json({**c.to_dict(), "figure": figure})
        return
    click.echo(wrap(c.header()))
    print_table(*c.table())
    click.echo("\n" + wrap(c.tradeoff))
    if figure:
        click.echo(f"wrote {figure}")
