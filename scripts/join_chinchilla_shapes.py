"""Join Epoch AI's 245 Chinchilla points to the shapes of Hoffmann et al.'s Table A9.

Writes ``datasets/chinchilla_epoch2024_shapes.csv``: every point of
``datasets/chinchilla_epoch2024.csv`` with the depth, width and MLP size of the Table A9 model
whose published size (in millions) is nearest its ``params`` (all 245 land within 0.6% of one,
and no point is within 0.3% of a second one). ``params_non_embedding`` takes one 32,000 x
d_model token embedding off Epoch's total: Table A9's sizes are reproduced by a tied 32k
vocabulary (Hoffmann et al. use a 32,000-token SentencePiece vocabulary) plus relative
position weights in each layer, which count as non-embedding here.

    python scripts/join_chinchilla_shapes.py [--check]
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VOCAB = 32000
MATCH = 0.01  # a point's size within 1% of its Table A9 model's


def join() -> str:
    with open(ROOT / "datasets/chinchilla_table_a9.csv", newline="") as f:
        a9 = list(csv.DictReader(f))
    with open(ROOT / "datasets/chinchilla_epoch2024.csv", newline="") as f:
        points = list(csv.DictReader(f))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["params", "params_non_embedding", "tokens", "flops", "loss", "n_layer",
                "d_model", "d_ff", "n_head", "a9_params_millions"])
    for p in points:
        n = float(p["params"])
        best = min(a9, key=lambda r: abs(math.log(n / (1e6 * float(r["params_millions"])))))
        if abs(n / (1e6 * float(best["params_millions"])) - 1) > MATCH:
            raise SystemExit(f"no Table A9 model within {MATCH:.0%} of {n:.4g} parameters")
        d = int(best["d_model"])
        w.writerow([p["params"], repr(n - VOCAB * d), p["tokens"], p["flops"], p["loss"],
                    best["n_layers"], d, best["ffw_size"], best["n_heads"],
                    best["params_millions"]])
    return out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="exit 1 if the shipped file differs from a fresh join")
    a = ap.parse_args()
    text, path = join(), ROOT / "datasets/chinchilla_epoch2024_shapes.csv"
    if a.check:
        sys.exit(0 if path.read_text() == text else 1)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    print(f"wrote {path.relative_to(ROOT)}: {text.count(chr(10)) - 1} rows")


if __name__ == "__main__":
    main()
