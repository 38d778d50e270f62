"""List scheduling on heterogeneous devices: placements that come with their schedule (makespan objective).

* :func:`heft` (method ``"list"``) — HEFT (Topcuoglu et al. 2002) in MOIRAI's setting (Zhang
  et al. §III: per-device op times, per-device memory, per-pair transfer times). Ops are
  taken by decreasing upward rank, computed with each op's mean time over the devices it
  may run on and each tensor's mean transfer time over ordered device pairs (ties by
  topological index). An op whose colocation group (:attr:`Graph.group_id`; MOIRAI's flows
  share their producer's) has no device yet goes to the device where it finishes earliest
  (insertion-based; its input transfers booked on ports or channels as in
  :func:`~placement_dsl.schedule.list_schedule`), among the devices the whole group may run
  on whose remaining memory holds the group's param + activation bytes. The later ops of a
  group follow it. The placement carries the schedule built on the way.
* :func:`one_device_best` (method ``"one-device-best"``) — every op on the single device
  with the least makespan among those that may run every op and hold all of them.

Memory is kept feasible for the groups still to come: a device is taken only if a packing
of the remaining groups into the remaining memory is known (the last packing found, a
counting argument, or best-fit decreasing), so a tight instance such as MOIRAI's example-1
(memory exactly the sum of its ops) is not stranded by an early greedy choice.

Both optimize the makespan with ``model.congestion`` and report the cost model's objective for
``model`` (default ``CostModel.named("makespan")``; pass a makespan model to score makespans).
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from ..cluster import Cluster
from ..congestion import Congestion
from ..errors import InfeasibleError
from ..evaluate import CostModel, MemoryMode, Objective, evaluate
from ..graph import Graph
from ..placement import Placement
from ..schedule import (
    ListScheduler,
    Schedule,
    exact_transfer_table,
    list_schedule,
    priority_order,
    schedule_makespan,
    upward_rank,
)
from . import manifest
from .base import HeuristicResult, cut_at, deadline_at, expired, stopped
from .baselines import one_device_misfits
from .registry import heuristic

PACK_LIMIT = 5000  # groups left above which best-fit decreasing is not re-run (the last packing is followed)
TOL = 1e-9


def makespan_model(model: CostModel | None) -> CostModel:
    """``model``, else the makespan cost model the list schedulers search for."""
    return model or CostModel.named("makespan")


def schedule_result(method: str, placement: Placement, model: CostModel | None, start: float,
                    **info: object) -> HeuristicResult:
    """``method``'s result for ``placement`` scored by :func:`makespan_model`, its schedule's makespan in
    ``info["makespan"]``, with the seconds since ``start``."""
    mk = makespan_model(model)
    ev = evaluate(placement, mk)
    makespan = ev.objective if mk.objective is Objective.MAKESPAN else schedule_makespan(placement, mk.congestion)[0]
    return HeuristicResult(method=method, placement=placement, objective=ev.objective, evaluations=1,
                           seconds=time.perf_counter() - start, info={"makespan": makespan, **info})


# ---------------------------------------------------------------------------- memory
class Packing:
    """Remaining memory per device and a packing of the groups not yet placed (a witness).

    Group ``u`` may go to device ``d`` when ``d`` may run it, has room, and the rest still
    pack: ``d`` is the witness's choice, or any-fit cannot fail (no restricted group left and
    ``rest <= sum_k (free_k - largest)^+``), or best-fit decreasing packs the rest.
    """

    def __init__(self, size: np.ndarray, allowed: np.ndarray, capacity: np.ndarray):
        self.size, self.allowed, self.free = size, allowed, capacity.astype(float).copy()
        self.left, self.n_left = np.ones(size.size, dtype=bool), size.size
        self.order = np.argsort(-size, kind="stable")
        self.total, self.top = float(size.sum()), 0
        self.restricted = ~allowed.all(axis=1)
        self.n_restricted = int(self.restricted.sum())
        self.unbounded = bool(np.isinf(self.free).all())
        self.witness = None if self.unbounded else self._pack(-1, -1)
        self._found: dict[int, np.ndarray] = {}

    def room(self, u: int, d: int) -> bool:
        return bool(self.allowed[u, d]) and self.size[u] <= self.free[d] + TOL * max(1.0, self.size[u])

    def _largest(self) -> float:
        while self.top < self.order.size and not self.left[self.order[self.top]]:
            self.top += 1
        return float(self.size[self.order[self.top]]) if self.top < self.order.size else 0.0

    def _easy(self, u: int, d: int) -> bool:
        if self.n_restricted > int(self.restricted[u]):
            return False
        free = self.free.copy()
        free[d] -= self.size[u]
        return self.total - self.size[u] <= np.maximum(free - self._largest(), 0.0).sum()

    def _pack(self, u: int, d: int) -> np.ndarray | None:
        """Best-fit decreasing of the groups left (with ``u`` on ``d``): a device per group, or ``None``."""
        free = self.free.copy()
        out = np.full(self.size.size, -1, dtype=np.int64)
        if u >= 0:
            free[d] -= self.size[u]
            out[u] = d
        for w in self.order[self.left[self.order]]:
            if w == u:
                continue
            ok = self.allowed[w] & (free >= self.size[w] - TOL * max(1.0, self.size[w]))
            if not ok.any():
                return None
            k = int(np.argmin(np.where(ok, free, math.inf)))
            free[k] -= self.size[w]
            out[w] = k
        return out

    def admits(self, u: int, d: int) -> bool:
        if not self.room(u, d):
            return False
        if self.unbounded or (self.witness is not None and self.witness[u] == d) or self._easy(u, d):
            return True
        if self.n_left > PACK_LIMIT:
            return False
        pack = self._pack(u, d)
        if pack is not None:
            self._found[d] = pack
        return pack is not None

    def take(self, u: int, d: int) -> None:
        if self.witness is None or self.witness[u] != d:
            self.witness = self._found.get(d)
        self._found.clear()
        self.free[d] -= self.size[u]
        self.left[u], self.n_left = False, self.n_left - 1
        self.total -= float(self.size[u])
        self.n_restricted -= int(self.restricted[u])


def op_groups(graph: Graph, cluster: Cluster, hard: bool) -> tuple[np.ndarray, Packing]:
    """Each op's group index and the packing state; raises when some group fits no device."""
    _, unit = np.unique(graph.group_id, return_inverse=True)
    U = int(unit.max()) + 1
    size = np.bincount(unit, weights=graph.param_bytes + graph.activation_bytes, minlength=U)
    runs = np.isfinite(cluster.times(graph))
    allowed = np.ones((U, cluster.size), dtype=bool)
    np.logical_and.at(allowed, unit, runs)
    capacity = cluster.memory if hard else np.full(cluster.size, math.inf)
    fits = allowed & (capacity[None, :] >= size[:, None] * (1 - TOL))
    for u in np.flatnonzero(~fits.any(axis=1))[:1]:
        op = graph.names[int(np.flatnonzero(unit == u)[0])]
        if not allowed[u].any():
            raise InfeasibleError(f"op {op!r} (with its colocation group) cannot run on any device; kinds are "
                                  f"{sorted({d.kind for d in cluster.devices})}")
        caps = ", ".join(f"{n}={m:.6g}" for n, m in zip(cluster.names, capacity))
        raise InfeasibleError(f"op {op!r} (with its colocation group) needs memory {size[u]:.6g} on one of the "
                              f"devices it may run on {[cluster.names[d] for d in np.flatnonzero(allowed[u])]}; "
                              f"capacities are {caps}")
    return unit, Packing(size, allowed, capacity)


# ---------------------------------------------------------------------------- HEFT
def mean_costs(graph: Graph, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """HEFT's averages: each op's mean time over the devices it may run on, and its output's
    mean transfer time over ordered device pairs ``a != b`` (pairs with a route)."""
    times = cluster.times(graph)
    finite = np.isfinite(times)
    mean_time = np.where(finite, times, 0.0).sum(axis=1) / np.maximum(finite.sum(axis=1), 1)
    D = cluster.size
    if D == 1:
        return mean_time, np.zeros(graph.n)
    with np.errstate(divide="ignore"):
        per_byte = 1.0 / cluster.route_bandwidth
    pairs = ~np.eye(D, dtype=bool) & np.isfinite(per_byte)
    mean_pb = float(per_byte[pairs].mean()) if pairs.any() else 0.0
    mean_lat = float(cluster.route_latency[pairs].mean()) if pairs.any() else 0.0
    comm = np.where(graph.out_bytes > 0, graph.out_bytes * mean_pb, 0.0) + mean_lat
    pos, stack = exact_transfer_table(graph, D)
    has = pos >= 0
    comm[has] = stack[pos[has]][:, ~np.eye(D, dtype=bool)].mean(axis=1)
    return mean_time, comm


def earliest_finish_device(builder: ListScheduler, packing: Packing, v: int, u: int) -> int:
    """The admissible device where op ``v`` finishes first (ties: lower index)."""
    fits = [d for d in range(builder.cluster.size) if packing.room(u, d)]
    if not fits:
        caps = ", ".join(f"{n}={m:.6g}" for n, m in zip(builder.cluster.names, packing.free))
        raise InfeasibleError(f"op {builder.graph.names[v]!r} (with its colocation group) needs memory "
                              f"{packing.size[u]:.6g}; the devices it may run on have no room (free: {caps})")
    by_finish = sorted((builder.finish_on(v, d), d) for d in fits)
    reached = [(t, d) for t, d in by_finish if math.isfinite(t)]  # a device no route brings v's inputs to: never
    if not reached:
        raise InfeasibleError(f"op {builder.graph.names[v]!r}: its inputs reach none of the devices that may run and "
                              f"hold it ({[builder.cluster.names[d] for d in fits]}) by the cluster's routes")
    for _, d in reached:
        if packing.admits(u, d):
            return d
    return reached[0][1]  # no packing known for the rest: greedy


def list_walk(graph: Graph, cluster: Cluster, congestion: Congestion, unit: np.ndarray, packing: Packing,
              rank: np.ndarray, at: float | None, choose: Callable[[ListScheduler, int, int, bool, int], int]
              ) -> tuple[np.ndarray, Schedule, bool]:
    """The walk list scheduling shares (HEFT, CPOP): the ops by :func:`~placement_dsl.schedule.priority_order` of
    ``rank``, each unit (colocation group) on the device ``choose(builder, v, u, cut, last)`` gives when its first op
    ``v`` comes (taken from ``packing``; ``last``: the device of the op placed before, ``-1`` at first; ``cut``: once
    ``at`` passed, checked every 256 ops), its later ops following it, each op placed on the schedule as it comes.
    Returns each op's device, the schedule and whether the walk was cut."""
    builder = ListScheduler(graph, cluster, congestion)
    device = np.full(packing.size.size, -1, dtype=np.int64)
    last, cut = -1, False
    for k, v in enumerate(priority_order(graph, rank)):
        u = unit[v]
        if device[u] < 0:
            cut = cut or ((k & 255) == 0 and expired(at))
            device[u] = choose(builder, v, u, cut, last)
            packing.take(u, int(device[u]))
        builder.place(v, int(device[u]))
        last = int(device[u])
    return device[unit], builder.schedule(), cut


@heuristic("list", optimizes="makespan", options=manifest.Nothing)
def heft(graph: Graph, cluster: Cluster, *, model: CostModel | None = None,
         seed: int | None = None, time_limit: float | None = None) -> HeuristicResult:
    """HEFT with memory-aware earliest-finish device choice (see the module docstring).

    Past ``time_limit`` seconds, less the time to place the ops left and score the schedule
    (:func:`~.base.cut_at`), the ops left stop comparing finish times on every device: each
    joins the device of the op placed just before it when that device admits it (``info["stopped"]``)."""
    start = time.perf_counter()
    at = cut_at(deadline_at("list", time_limit), graph)  # the ops left are placed and the schedule scored after it
    mk = makespan_model(model)
    unit, packing = op_groups(graph, cluster, hard=mk.memory is MemoryMode.HARD)
    mean_time, comm = mean_costs(graph, cluster)
    rank = upward_rank(graph, mean_time, comm[graph.src])

    def choose(builder: ListScheduler, v: int, u: int, cut: bool, last: int) -> int:
        keep = cut and last >= 0 and packing.admits(u, last)
        return last if keep else earliest_finish_device(builder, packing, v, u)

    assign, schedule, cut = list_walk(graph, cluster, mk.congestion, unit, packing, rank, at, choose)
    placement = Placement(graph, cluster, assign, source="list", schedule=schedule)
    result = schedule_result("list", placement, model, start)
    return stopped(result) if cut else result


@heuristic("one-device-best", optimizes="makespan", options=manifest.Nothing)
def one_device_best(graph: Graph, cluster: Cluster, *, model: CostModel | None = None,
                    seed: int | None = None, time_limit: float | None = None) -> HeuristicResult:
    """Every op on the one device with the least makespan among those that may run and hold them all
    (once one is scheduled, no further device is tried after ``time_limit`` seconds: ``info["stopped"]``)."""
    start = time.perf_counter()
    at = cut_at(deadline_at("one-device-best", time_limit), graph)  # a device's schedule built and scored by then
    mk = makespan_model(model)
    best: tuple[float, int, Placement] | None = None
    reasons = []
    cut = False
    for d, why in enumerate(one_device_misfits(graph, cluster, memory=mk.memory is MemoryMode.HARD)):
        if best is not None and expired(at):
            cut = True
            break
        if why is not None:
            reasons.append(why)
        else:
            p = Placement(graph, cluster, np.full(graph.n, d))
            p = Placement(graph, cluster, p.assign, source="one-device-best", schedule=list_schedule(p, mk.congestion))
            makespan = schedule_makespan(p, mk.congestion)[0]
            if best is None or (makespan, d) < best[:2]:
                best = (makespan, d, p)
    if best is None:
        raise InfeasibleError("one-device-best: no single device may run and hold every op: " + "; ".join(reasons))
    result = schedule_result("one-device-best", best[2], model, start, device=cluster.names[best[1]])
    return stopped(result) if cut else result
