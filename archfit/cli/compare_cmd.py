"""``archfit compare``: where today's known models sit on a shape law's map."""

from __future__ import annotations

import click

from archfit.cli.common import emit_json


@click.command()
@click.option("--fit", "fit", default=None, metavar="FILE|NAME",
              help="A shape-law fit or published name (default levine2020).")
@click.option("--family", "families", multiple=True, metavar="NAME",
              help="Only these families (repeatable), e.g. GPT-3, Llama-2.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def compare(fit, families, as_json):
    """Each known model's depth against the law's optimal depth at its size (Kaplan's N), with
    the optimum's 95% CI where the fit has bootstrap samples.

    \b
    Examples:
      archfit compare
      archfit compare --fit fits/my-levine.json --family GPT-3 --family Llama-3
    """
    from archfit.errors import ArchfitError
    from archfit.text import wrap
    from archfit.shapes.known import KNOWN_MODELS_PATH, load_known_models
    from archfit.recommending.landscape import N_CONVENTION, place_known_models

    models = load_known_models()
    if families:
        known = sorted({m.family for m in models})
        by_lower = {k.lower(): k for k in known}  # --family gpt-3 is GPT-3
        bad = [f for f in families if f.lower() not in by_lower]
        if bad:
            raise ArchfitError(f"unknown family {', '.join(bad)}; choose from {', '.join(known)}")
        chosen = {by_lower[f.lower()] for f in families}
        models = [m for m in models if m.family in chosen]
    f, rows = place_known_models(fit, models)
    verdicts = sorted({r.verdict for r in rows})
    reasons = f.verdict(rows[-1].N).reasons if rows else []
    if as_json:
        emit_json({"law": f.label, "formula": f.law_obj.formula, "table": KNOWN_MODELS_PATH,
                   "N_convention": N_CONVENTION,
                   "models": [r.to_dict() for r in rows]})
        return
    click.echo(wrap(
        f"law: {f.label}: {f.law_obj.formula}\n"
        "N: non-embedding parameters (Kaplan's N; a mixture of experts at its active size), "
        "counted by archfit from each model's published shape (archfit/published/known_models.csv)"
        f"\nverdict of the law at these sizes: {', '.join(verdicts)}"
        + (f" ({'; '.join(reasons)})" if reasons else "")))
    click.echo("")
    click.echo(f"{'model':<16}{'N':>10}{'layers':>8}{'optimum':>9}{'95% CI':>18}  "
               f"{'verdict':<16}depth vs optimum")
    for r in rows:  # within 100 columns: a ratio of 100x and an uninformative mark
        ci = r.ci.text(".3g", named=False) if r.ci else "-"
        mark = "UNINFORMATIVE *" if r.verdict == "uninformative" else r.verdict
        click.echo(f"{r.model.name:<16}{r.N:>10.3g}{r.model.shape.n_layer:>8}"
                   f"{r.n_layer_opt:>9.1f}{ci:>18}  {mark:<16}{r.summary}")
    named = next((r.ci for r in rows if r.ci), None)
    click.echo(wrap(f"95% CI: the optimum's, {named.name()}" if named else
                    "95% CI: none, the fit carries no parameter draws"))
    if any(r.verdict == "uninformative" for r in rows):
        click.echo(wrap("* uninformative at that size: the law's answer there is not supported by "
                        "the evidence (see the verdict's reasons above)"))
    click.echo("\nsources of the shapes:")
    click.echo(wrap("\n".join(f"  {r.model.name}: {r.model.source}" for r in rows)))
