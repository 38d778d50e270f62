"""The makespan problem a cost model describes, and the windows every single-sample LNS slides.

The makespan's window search is the contracted LNS (:mod:`placement_dsl.search.anytime`, method
``"makespan-lns"``): one mechanism for latency and makespan, whose steps keep a window of ops fine and free
and the rest contracted and pinned where the incumbent runs it. The former ``"schedule-lns"`` (one CP-SAT model
of the whole graph, the units outside a window fixed by assumptions) is deprecated: the method name still runs,
warns, and forwards its options to the contracted LNS (:func:`placement_dsl.search.anytime.schedule_lns_options`).
"""
from __future__ import annotations

import random
from typing import Any

from ..cluster import Cluster
from ..deprecated import forward
from ..evaluate import CostModel
from ..graph import Graph
from ..heuristics.base import HeuristicResult
from ..heuristics.registry import heuristic
from ..placement import Placement
from ..presets import makespan_problem
from . import ScheduleLns


def windows(units: list[int], size: int, rng: random.Random, sweep: bool) -> list[list[int]]:
    """Sliding windows of ``size`` consecutive units (ops, colocation units) with half overlap (``sweep``), else
    one random window."""
    size = max(1, min(size, len(units)))
    if not sweep:
        lo = rng.randrange(0, len(units) - size + 1)
        return [units[lo:lo + size]]
    stride = max(1, size // 2)
    return [units[lo:lo + size] for lo in range(0, max(len(units) - size, 0) + 1, stride)]


@heuristic("schedule-lns", optimizes="makespan", options=ScheduleLns)
def schedule_lns(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = 0,
                 window: int = 16, step_limit: float = 5.0, time_limit: float | None = None,
                 solver: str | None = None, start: str | Placement = "list", threads: int = 1) -> HeuristicResult:
    """Deprecated: the makespan's window search is ``"makespan-lns"``; this name forwards there (module docstring)."""
    options: dict[str, Any] = {"model": model, "seed": seed, "window": window, "step_limit": step_limit,
                               "time_limit": time_limit, "solver": solver, "start": start, "threads": threads}
    return forward("method 'schedule-lns'", "placement_dsl.search.anytime:schedule_lns_options", graph, cluster,
                   options, instead="method 'makespan-lns' (the contracted LNS)")


__all__ = ["makespan_problem", "schedule_lns", "windows"]  # makespan_problem lives in presets, public here too
