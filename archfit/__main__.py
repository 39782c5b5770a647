"""The ``archfit`` console script and ``python -m archfit``. ``archfit recommend`` with only the
options in ``_OPTIONS`` is answered here without importing click (whose import alone costs 2.5x
python's own start). Other options, --help and every failure go to the click command, which
parses, checks and reports them; this path prints only a success, the same bytes the click
command prints (tests/test_cli_fast.py holds the two to it)."""

from __future__ import annotations

import sys

# flag -> (recommend()'s keyword, the kind of value); the defaults are recommend()'s, which
# are the click command's
_OPTIONS = {"--params": ("params", float), "--compute": ("compute", float),
            "--fit": ("fits", list), "--law": ("laws", list), "--top": ("top", int),
            "--tolerance": ("tolerance", float), "--vocab": ("vocab_size", int),
            "--ctx": ("n_ctx", int), "--head-dim": ("head_dim", int),
            "--multiple-of": ("multiple_of", int), "--json": ("as_json", bool),
            "--strict": ("strict", bool)}


def quick_recommend(argv: list[str]) -> str | None:
    """What ``archfit recommend ARGV`` prints on success, or None where the click command
    must answer (an option this path does not take, a bad value, any error)."""
    kw: dict = {"fits": [], "laws": []}
    args = iter(argv)
    for arg in args:
        flag, eq, value = arg.partition("=")
        if flag not in _OPTIONS:
            return None
        key, kind = _OPTIONS[flag]
        if kind is bool:
            if eq or key in kw:
                return None
            kw[key] = True
            continue
        value = value if eq else next(args, None)
        if value is None or value.startswith("-") or (kind is not list and key in kw):
            return None
        if kind is list:
            kw[key].append(value)
        else:
            kw[key] = value
    try:
        import warnings

        from archfit.errors import UninformativeWarning
        from archfit.io import jsonable
        from archfit.numbers import parse_int, parse_number
        from archfit.recommender import recommend

        for key, kind in _OPTIONS.values():
            if key in kw and kind in (int, float):
                kw[key] = (parse_int if kind is int else parse_number)(kw[key])
                if not kw[key] > 0:
                    return None
        if ("params" in kw) == ("compute" in kw):
            return None
        fits, as_json = kw.pop("fits") + kw.pop("laws"), kw.pop("as_json", False)
        warnings.simplefilter("ignore", UninformativeWarning)
        r = recommend(kw.pop("params", None), fit=fits or None, **kw)
        if as_json:
            import json

            return json.dumps(jsonable(r.to_dict()), indent=2, allow_nan=False)
        return f"{r.text()}\n\n{r.alternatives_text()}"
    except Exception:  # the click command reports it, in one line, exit 2
        return None


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["recommend"]:
        out = quick_recommend(argv[1:])
        if out is not None:
            print(out)
            return
    from archfit.cli import main as cli

    cli()


if __name__ == "__main__":
    main()
