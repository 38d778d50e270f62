"""The sweep report's pictures (matplotlib, Agg backend, PNG); none without matplotlib.

* ``running_times.png``: Archer et al. Fig. 4 — every task's running time against the graph's
  number of ops, log-log, one panel per ``k`` on a shared y axis, coloured by level or heuristic
  (the ``guess`` level's time is the sum over its k MIPs, as in the paper).
* ``bound_ratios.png``: Tables 1 and 3 drawn — each level's geometric mean of bound / best
  upper bound against ``k``, a panel per testbed family.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..files import atomic_open

RUNNING_TIMES, BOUND_RATIOS = "running_times.png", "bound_ratios.png"


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_figures(s: dict[str, Any], out: Path) -> dict[str, str]:
    """Write the pictures of summary ``s`` into ``out``; ``{title: file name}`` of those written."""
    plt = _pyplot()
    if plt is None or not s["instances"]:
        return {}
    written = {"Running times (Archer Fig. 4 form)": running_times(plt, s, out / RUNNING_TIMES)}
    if s["levels"]:
        written["Bound / best upper bound against k"] = bound_ratios(plt, s, out / BOUND_RATIOS)
    return {title: path.name for title, path in written.items()}


def _save(plt: Any, fig: Any, path: Path) -> None:
    """Write ``fig`` as a PNG through :func:`placement_dsl.files.atomic_open` and close it, written or not."""
    try:
        with atomic_open(path, "wb") as fh:
            fig.savefig(fh, format="png", dpi=110)
    finally:
        plt.close(fig)


def _grid(plt: Any, panels: int, sharey: bool) -> tuple[Any, list[Any]]:
    cols = min(panels, 3)
    rows = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), sharey=sharey, squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat[:panels]


def running_times(plt: Any, s: dict[str, Any], path: Path) -> Path:
    """Seconds per task against ops, a panel per k (log-log, shared y)."""
    names = [("level", lv) for lv in s["levels"]] + [("method", m) for m in s["methods"]]
    colours = {name: plt.cm.tab10(i % 10) for i, name in enumerate(names)}
    fig, axes = _grid(plt, len(s["ks"]), sharey=True)
    for ax, k in zip(axes, s["ks"]):
        for kind, name in names:
            pts = [(i["n"], cell["seconds"]) for i in s["instances"] if i["k"] == k
                   for cell in [i[kind + "s"].get(name)] if cell and cell["seconds"] and i["n"]]
            if pts:
                ax.scatter(*zip(*pts), s=18, color=colours[(kind, name)], marker="o" if kind == "level" else "x",
                           label=name)
        ax.set(xscale="log", yscale="log", title=f"k = {k}", xlabel="ops")
        ax.xaxis.set_minor_formatter(plt.NullFormatter())  # minor labels crowd a short decade
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("seconds")
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        h, lab = ax.get_legend_handles_labels()
        handles += [x for x, y in zip(h, lab) if y not in labels]
        labels += [y for y in lab if y not in labels]
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), frameon=False)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    _save(plt, fig, path)
    return path


def bound_ratios(plt: Any, s: dict[str, Any], path: Path) -> Path:
    """Geometric mean of bound / best UB against k, a line per level, a panel per family."""
    fig, axes = _grid(plt, len(s["families"]), sharey=True)
    for ax, fam in zip(axes, s["families"]):
        for level in s["levels"]:
            pts = [(r["k"], r["geomean"]) for r in s["bounds"]
                   if r["family"] == fam and r["level"] == level and r["geomean"] is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=level)
        ax.set_xscale("log", base=2)
        ax.set(title=f"{fam} graphs", xlabel="k", ylim=(0, 1.02))
        ax.set_xticks(s["ks"], [str(k) for k in s["ks"]])
        ax.minorticks_off()
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    axes[0].set_ylabel("bound / best upper bound")
    fig.tight_layout()
    _save(plt, fig, path)
    return path
