"""What every archfit figure shares (matplotlib, Agg backend: no display needed): its size
(``FIGSIZE`` inches at ``DPI``, 800 x 500 pixels for PNG), the atomic write that marks it as
archfit's own, and the check that tells an archfit figure from a user's file."""

from __future__ import annotations

import os
from typing import Any

from archfit.io import atomic_path
from archfit.laws import Fit

FIGSIZE = (8.0, 5.0)
DPI = 100
FORMATS = ("png", "svg", "pdf")
PNG_SOFTWARE = "archfit"  # the PNG text chunk that marks a figure as archfit's own


def pyplot() -> Any:
    """matplotlib.pyplot, on the Agg backend outside a notebook."""
    import sys

    import matplotlib

    if "ipykernel" not in sys.modules:  # a notebook keeps its inline backend; elsewhere files
        matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def fit_title(fit: Fit, what: str) -> str:
    data = ", ".join(os.path.basename(i.get("path", "")) for i in fit.inputs) or (
        fit.source.split(",")[0] if fit.source else "in-memory data")
    return f"{what}\nlaw: {fit.label} · data: {data} · verdict: {fit.trust['verdict']}"


def save_figure(fig: Any, out_dir: str, name: str, fmt: str) -> str:
    path = os.path.join(out_dir, f"{name}.{fmt}")
    with atomic_path(path) as tmp:  # marked as archfit's, so a later plot may replace it
        fig.savefig(tmp, dpi=DPI, format=fmt, metadata=(
            {"Software": PNG_SOFTWARE} if fmt == "png" else {"Creator": PNG_SOFTWARE}))
    pyplot().close(fig)
    return path


def is_archfit_figure(path: str) -> bool:
    """Whether ``path`` is a figure archfit drew (PNG: its Software chunk; SVG and PDF: the
    Creator archfit wrote), so that a later plot may replace it without --force."""
    if path.endswith(".png"):
        return is_archfit_png(path)
    try:
        with open(path, "rb") as f:
            data = f.read(1 << 20)
    except OSError:
        return False
    return PNG_SOFTWARE.encode() in data and (b"<svg" in data[:4096] or data.startswith(b"%PDF"))


def is_archfit_png(path: str) -> bool:
    """Whether ``path`` is a PNG archfit drew (its Software text chunk): such a file may be
    replaced without --force."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.startswith(b"\x89PNG") and b"Software\x00" + PNG_SOFTWARE.encode() in head


def write_png(fig: Any, path: str) -> str:
    """The figure as a PNG at ``path``, written atomically with archfit's marker (so a later
    run may replace it), then closed."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format="png", metadata={"Software": PNG_SOFTWARE})
    pyplot().close(fig)
    return path


def finish_png(fig: Any, ax: Any, path: str) -> str:
    """Grid, legend and layout, then :func:`write_png`."""
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return write_png(fig, path)
