"""What the pictures share: device colours, matplotlib on demand, and writing a figure by its suffix."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..files import atomic_open

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
"""Device colours in cluster order (Tableau 10, then matplotlib's tab10), repeated past 16 devices."""
PICTURES = (".png", ".svg")


def device_colour(index: int) -> str:
    """The colour of the cluster's ``index``-th device."""
    return PALETTE[index % len(PALETTE)]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend, text kept as text in SVG files."""
    try:
        import matplotlib
    except ImportError:
        raise SpecError("drawing PNG or SVG pictures needs matplotlib; install it with "
                        "pip install 'placement_dsl[viz]', or write a .dot file") from None
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    plt.rcParams["svg.fonttype"] = "none"
    return plt


def picture_path(path: str | Path, allowed: tuple[str, ...] = PICTURES) -> Path:
    """``path`` when its suffix is one of ``allowed``, else a :class:`SpecError` naming the choices."""
    path = Path(path)
    if path.suffix.lower() not in allowed:
        raise SpecError(f"cannot draw {str(path)!r}: the file name must end in one of {list(allowed)}")
    return path


def save(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` as PNG or SVG (by the suffix) and close it."""
    plt = pyplot()
    path = picture_path(path)
    try:
        with atomic_open(path, "wb") as fh:
            fig.savefig(fh, format=path.suffix[1:].lower(), bbox_inches="tight", dpi=120)
    finally:
        plt.close(fig)
    return path


def pictures_or_dot(path: str | Path) -> Path:
    """``path`` when it ends in .dot, .png or .svg."""
    return picture_path(path, (".dot", *PICTURES))
