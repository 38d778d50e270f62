"""The best closed-form bound of a single-sample problem (latency or makespan) within a small clock.

What a solve answers when its model is not built or its search proved less (:mod:`placement_dsl.solve`), and what
the closed-form levels of :mod:`placement_dsl.levels.latency` prove one by one: the critical path, the longest path
with route costs, the runs of cut ops with their side branches priced (latency, :mod:`.latency_spine`), the serial devices' work between heads and tails, the segment bound (memory cuts long paths,
each cut pays a transfer) and, for a makespan, the cut segments (:mod:`.segments`), their LPs
(:mod:`.segment_lp`) and the heads and tails that price the split of each op's ancestors (:mod:`.split_heads`).
On a cluster with links the latency model moves tensors over routes, which only the critical path covers.
"""
from __future__ import annotations

import math
from typing import Any

from ..deadline import BudgetSpent, Deadline
from ..evaluate import execution
from ..objectives import Latency
from .latency import critical_path_bound, energy_latency, route_path_latency
from .latency_spine import spine_or_nothing
from .makespan import GRID, energy_makespan, route_path_makespan
from .memory_path import segment_bound
from .segment_lp import segment_lp_bound
from .segments import transfer_segment_bound
from .simple import simple_lower_bound
from .split_heads import split_bound

SECONDS = 3.0  # the clock of the segment bounds, the parts whose time grows faster than the graph
MAX_ENERGY_CELLS = 1e7  # beyond (about 2,500 ops on four devices), the device-work bound is left to its level


def single_sample_bound(problem: Any, deadline: Deadline | None = None) -> tuple[float, str]:
    """The largest of the closed forms that hold for every placement of ``problem``, in cost-model units, and
    which proved it. The segment bounds stop by ``deadline`` (default :data:`SECONDS` from now; what they did not
    finish is left out) and the device-work bound runs when it is small (:data:`MAX_ENERGY_CELLS`).

    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.cluster import Cluster
    >>> from placement_dsl.constraints import Memory
    >>> from placement_dsl.objectives import Makespan
    >>> from placement_dsl.problem import Problem
    >>> g = Graph([Op(name=x, work=1.0, param_bytes=2.0, out_bytes=1.0) for x in "abc"], [("a", "b"), ("b", "c")])
    >>> single_sample_bound(Problem(g, Cluster.accelerators(2, memory=4.0, bandwidth=1.0), Makespan(), [Memory()]))
    (5.0, 'segment-path')
    """
    clock = deadline or Deadline(SECONDS)
    if not isinstance(problem.objective, Latency):  # Makespan is its alias
        raise TypeError(f"single_sample_bound: a Latency or Makespan objective, not {type(problem.objective).__name__}")
    latency = execution(problem.cluster) == "invocations"  # Tarnawski's restriction, else one op at a time
    if latency:
        found = {"critical-path": critical_path_bound(problem)[0]}
        if problem.cluster.links:
            return found["critical-path"], "critical-path"
        found["route-path"] = route_path_latency(problem)[0]
    else:
        found = {"route-path": route_path_makespan(problem)[0]}
        serial = not problem.cluster.parallel.any()  # the load and the cut segments count every device as serial
        if serial:
            found["simple"] = simple_lower_bound(problem.graph, problem.cluster)
        clocked = [("cut-segments", transfer_segment_bound)] if serial else []
        clocked += [("split-heads", split_bound), ("segment-lp", segment_lp_bound)]
        for k, (name, bound) in enumerate(clocked):  # an equal share of what is left, the segment path's included
            found[name] = bound(problem, clock.within(clock.left() / (len(clocked) + 1 - k)))[0]
    if not problem.graph.is_training:
        try:
            found["segment-path"] = segment_bound(problem, clock)[0]
        except BudgetSpent:
            pass
    if energy_cells(problem) <= MAX_ENERGY_CELLS:  # the work between heads and tails, when it is quick
        found["device-work"] = (energy_latency if latency else energy_makespan)(problem)[0]
    if latency:  # the runs of cut ops with their side branches, last with all the clock the quicker forms left (a
        # third of it, taken first, stopped Inception-v3's spine of 0.3 s in a 20 s solve at load 7; its segment path
        # takes 0.07 s); ties go to the bounds above
        found["cut-spine"] = spine_or_nothing(problem, clock)
    name = max(found, key=lambda k: found[k])
    return float(found[name]), name


def energy_cells(problem: Any) -> float:
    """Array cells of the device-work bound: ops x weight vectors x serial devices (the simplex grid for up to
    four serial devices, :func:`~placement_dsl.bounds.makespan.dual_weights`)."""
    c = problem.cluster
    serial = int((~c.parallel).sum())  # parallel hosts add no work term
    weights = 2 + len({d.kind for d in c.devices}) + (math.comb(GRID + serial - 1, serial - 1) if 1 <= serial <= 4 else 0)
    return float(problem.graph.n) * weights * max(serial, 1)
