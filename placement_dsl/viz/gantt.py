"""The pipeline's Gantt chart: every task of the simulated schedule as a bar on its device's row.

The tasks come from :func:`placement_dsl.simulate.simulate` with ``record=True``: one bar per
device pass (forward or backward) per microbatch, coloured by microbatch, backward passes
hatched.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..placement import Placement
from ..simulate import Schedule, SimulationResult, simulate
from .common import PALETTE, pyplot, save


def simulated(placement: Placement, schedule: Schedule | str | None = None, microbatches: int = 8) -> SimulationResult:
    """The recorded simulation of ``placement`` (schedule default: ``pipeline`` for inference, ``1f1b`` for training)."""
    if schedule is None:
        schedule = Schedule.ONE_F_ONE_B if placement.graph.is_training else Schedule.PIPELINE
    return simulate(placement, schedule, microbatches, record=True)


def bars(result: SimulationResult) -> list[dict[str, Any]]:
    """One row per task: device, pass, microbatch, start and end (ms), in the order the tasks started."""
    return [{"device": t.device, "pass": "backward" if t.backward else "forward", "microbatch": t.microbatch,
             "start": t.start, "end": t.end} for t in result.trace]


def draw(result: SimulationResult, path: str | Path, devices: tuple[str, ...] | None = None,
         title: str = "") -> Path:
    """Draw the Gantt chart of a recorded simulation to a PNG or SVG file.

    ``devices`` fixes the rows' order (default: as they first appear in the trace); rows it leaves out
    (a cluster's links, ``"src->dst"``) follow in that order.
    """
    plt = pyplot()
    rows = bars(result)
    seen = list(dict.fromkeys(r["device"] for r in rows))
    order = [*devices, *(d for d in seen if d not in devices)] if devices else seen
    order = [d for d in order if any(r["device"] == d for r in rows)]
    fig, ax = plt.subplots(figsize=(11, 0.55 * len(order) + 1.6))
    for r in rows:
        y = order.index(r["device"])
        ax.barh(y, r["end"] - r["start"], left=r["start"], height=0.7, color=PALETTE[r["microbatch"] % len(PALETTE)],
                edgecolor="black", linewidth=0.4, hatch="//" if r["pass"] == "backward" else None)
        if result.microbatches <= 16:
            ax.text((r["start"] + r["end"]) / 2, y, str(r["microbatch"]), ha="center", va="center", fontsize=6)
    ax.set_yticks(range(len(order)), order)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.set_title(title or f"{result.schedule.value} schedule, {result.microbatches} microbatches: makespan "
                 f"{result.makespan:.4g} ms, {result.time_per_sample:.4g} ms per sample")
    return save(fig, path)
