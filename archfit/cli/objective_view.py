"""``archfit recommend --objective time|cost|latency``: the candidates with their predicted loss,
speed, GPU-hours and latency, the pick, the trade-off in one line, and the Pareto figure."""

from __future__ import annotations

from typing import Any

import click

from archfit.cli.common import emit_json, print_table

OBJECTIVE_SPAN = (0.4, 2.0)  # candidate depths as multiples of the optimum: a wide trade-off


def run_objective(params: Any, compute: Any, fits: list[str], ff_ratio: Any, objective: str,
                  kw: dict[str, Any], o: dict[str, Any], strict: bool, as_json: bool) -> None:
    from archfit.errors import RecommendError
    from archfit.objectives import DEFAULT_BATCH_TOKENS, DEFAULT_GPU, choose
    from archfit.perf import device, load_step_model
    from archfit.recommender import recommend

    gpu = o["gpu"] or DEFAULT_GPU
    device(gpu)
    model = load_step_model(o["perf_file"]) if o["perf_file"] else None
    if o["pareto"]:
        from archfit.io import check_output
        from archfit.plots import is_archfit_png

        if not o["pareto"].endswith(".png"):
            raise click.UsageError(f"--pareto {o['pareto']}: give a .png path")
        check_output(o["pareto"], "figure", inputs=[o["perf_file"]] if o["perf_file"] else (),
                     ours=is_archfit_png)
    r = recommend(params, compute=compute, fit=fits or None, ff_ratio=ff_ratio,
                  depth_span=OBJECTIVE_SPAN, **kw)
    if strict and r.trust["verdict"] == "uninformative":
        raise RecommendError("the verdict is uninformative (--strict): "
                             + "; ".join(r.trust["reasons"]))
    c = choose(r, objective, gpu=gpu, step_model=model, gpu_hours=o["gpu_hours"],
               tokens=o["tokens"], max_latency_ms=o["max_latency_ms"],
               batch_tokens=o["gpu_batch_tokens"] or DEFAULT_BATCH_TOKENS,
               usd_per_gpu_hour=o["usd_per_gpu_hour"])
    figure = None
    if o["pareto"]:
        from archfit.plots import draw_pareto

        figure = draw_pareto(c, o["pareto"])
    if as_json:
        emit_json({**c.to_dict(), "trust": r.trust, "law": r.law, "target_params":
                   r.target_params, "target_convention": r.target_convention,
                   "figure": figure})
        return
    trust = r.trust
    click.echo(f"target: {r.target_params:.4g} parameters ({r.target_convention}); shape law "
               f"{r.law}, verdict {trust['verdict'].upper()}"
               + (f": {'; '.join(trust['reasons'])}" if trust.get("reasons") else ""))
    click.echo(f"objective: {objective}; {c.perf}")
    click.echo(f"loss: {c.data_law}, plus the shape law's penalty for depth")
    cols = [("n_layer", "layers"), ("d_model", "d_model"), ("shape_penalty", "shape pen."),
            ("predicted_loss", "pred. loss"), ("tokens_per_s", "tokens/s/GPU"),
            ("tokens", "tokens"), ("gpu_hours", "GPU-hours"), ("latency_ms", "ms/token"),
            ("usd", "USD"), ("mark", "")]
    rows = [{**x, "mark": ("<- pick" if x["chosen"] else "") +
             (" (loss-optimal)" if x["loss_optimal"] else "")} for x in c.rows]
    keep = [col for col in cols if any(x.get(col[0]) is not None for x in rows)]
    print_table(rows, keep)
    click.echo(f"\n{c.tradeoff}")
    if figure:
        click.echo(f"wrote {figure}")
