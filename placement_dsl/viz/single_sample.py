"""The Gantt chart of one sample's schedule (latency, makespan): ops, invocations and transfers as bars.

* Makespan (MOIRAI eq. 4): the placement's own schedule (a schedule file's, the schedule MILP's),
  else its list schedule (:func:`placement_dsl.schedule.list_schedule`), as the cost model scores
  it: one bar per op on its device's row, one per transfer on its ``src -> dst`` row.
* Latency (Tarnawski §4): the invocation schedule (:func:`placement_dsl.invocation.invocation_spans`),
  one bar per accelerator subgraph (reads, compute, writes) or host op.

The end of the last bar is the objective the cost model gives the placement.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import SpecError
from ..evaluate import CostModel, Objective, execution
from ..invocation import invocation_spans, invocations
from ..placement import Placement
from ..schedule import list_schedule, transfer_durations
from .common import PALETTE, pyplot, save


@dataclass(frozen=True)
class Bar:
    """One task of the schedule: its ``row`` (a device, or ``src -> dst`` for a transfer), label and times."""

    row: str
    label: str
    start: float
    end: float
    transfer: bool = False


def bars(placement: Placement, model: CostModel) -> list[Bar]:
    """The bars of ``placement``'s single-sample schedule under ``model`` (latency or makespan, one objective): its
    invocations where the accelerators run invocations, else its ops and transfers (:func:`~placement_dsl.evaluate.execution`)."""
    if model.objective in (Objective.LATENCY, Objective.MAKESPAN):
        if execution(placement.cluster) == "ops":
            return _schedule_bars(placement, model)
        return _invocation_bars(placement)
    raise SpecError(f"objective {model.objective.value!r} is not a single-sample one; its Gantt chart is the "
                    "simulated pipeline")


def _schedule_bars(p: Placement, model: CostModel) -> list[Bar]:
    g, c, a = p.graph, p.cluster, p.assign
    schedule = p.schedule if p.schedule is not None else list_schedule(p, model.congestion)
    dur = p.op_times
    out = [Bar(c.names[a[i]], g.names[i], float(schedule.start[i]), float(schedule.start[i] + dur[i]))
           for i in range(g.n) if dur[i] > 0]
    for (u, d), t in schedule.transfer_start.items():
        took = float(transfer_durations(g, c, np.array([u]), a[[u]], np.array([d]))[0])
        if took > 0:
            out.append(Bar(f"{c.names[a[u]]} -> {c.names[d]}", g.names[u], t, t + took, transfer=True))
    return sorted(out, key=lambda b: (b.start, b.row))


def _invocation_bars(p: Placement) -> list[Bar]:
    spans = invocation_spans(p)
    if not spans and p.graph.n:
        blocked = ", ".join(invocations(p).blocked[:4])
        raise SpecError(f"the placement's invocations cannot be ordered (a cycle through {blocked}); no schedule "
                        "to draw")
    return [Bar(p.cluster.names[d], label, start, end) for d, label, start, end in spans]


def span(rows: list[Bar]) -> float:
    """The schedule's length: the end of its last bar (0 when empty)."""
    return max((b.end for b in rows), default=0.0)


def draw(rows: list[Bar], path: str | Path, devices: tuple[str, ...] = (), title: str = "") -> Path:
    """Draw ``rows`` to a PNG or SVG file: devices first (in ``devices`` order), then transfer rows."""
    plt = pyplot()
    names = [d for d in devices if any(b.row == d for b in rows)]
    names += [r for r in dict.fromkeys(b.row for b in rows) if r not in names]
    fig, ax = plt.subplots(figsize=(11, 0.55 * max(len(names), 1) + 1.6))
    few = len(rows) <= 60
    for k, b in enumerate(rows):
        y = names.index(b.row)
        ax.barh(y, b.end - b.start, left=b.start, height=0.7, color=PALETTE[k % len(PALETTE)], edgecolor="black",
                linewidth=0.4, hatch="//" if b.transfer else None)
        if few:
            ax.text((b.start + b.end) / 2, y, b.label, ha="center", va="center", fontsize=5)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("time")
    end = span(rows)
    ax.set_title(title or f"single-sample schedule: {len(rows)} tasks, ends at {end:.6g}"
                 + ("" if math.isfinite(end) else " (unschedulable)"))
    return save(fig, path)
