"""SliceGraph (Archer et al. §4): Kahn's algorithm with node priorities, then an optimal slicing.

* :func:`kahn` — Alg. 3: a topological order that breaks ties by priority (higher first).
* :class:`Slicer` — Alg. 1 with the Lemma 4.1 segment costs: the exact min-max DP that cuts
  a topological order into at most ``k`` stages (``dp[t][j] = min_i max(dp[t-1][i], f_t(i, j))``,
  empty stages allowed). Columns ``f(., j)`` are streamed (:func:`.segments.advance`), never
  stored; only segments whose compute is at most a cutoff are visited (compute is monotone
  and ``f >= compute``), with the cutoff the best of a balanced slicing of the same order and
  the caller's incumbent. Time ``O(n * band * k)``, memory ``O(n k)``.
* :func:`slicegraph` — the registered heuristic: slice a given / default order (Alg. 2 decoder
  with fixed priorities). Stages are the cluster's devices in pipeline order; devices may
  differ (each class has its own times, memory and transfer scale), so accelerators + CPUs
  work too. Colocation groups are kept whole by forbidding the boundaries inside a group's span.
* Replication (Tarnawski App. C.2, ``replication=True``): a stage may take ``r <= max_replicas``
  consecutive devices of one non-host class, its ops on the first and ``r - 1`` replicas after
  it, at the cost model's ``load / r`` with the ring all-reduce of the stage's parameters over
  those devices (:mod:`placement_dsl.replication`); the slicing DP then also chooses ``r`` and
  stays exact for the order.
"""
from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import InfeasibleError, SpecError
from ..evaluate import CostModel, Objective, evaluate
from ..graph import Graph
from ..placement import Placement
from ..replication import ALLREDUCE_FACTOR, ring_bandwidth
from . import manifest
from . import slice_kernels as sk
from .base import HeuristicResult, deadline_at, expired, stopped
from .contract import contract
from .ideal_lattice import dfs_order
from .kernels import priority_order as _kahn
from .registry import heuristic
from .segments import check_order, forward_projection, require_allowed, stage_params
from .slice_kernels import INF, SLACK


# ---------------------------------------------------------------------------- Alg. 3
def kahn(graph: Graph, priorities: np.ndarray) -> np.ndarray:
    """Topological order by Kahn's algorithm, ready op with the highest priority first (Alg. 3).

    Ties go to the lower op index. ``priorities = -graph.rank`` reproduces ``graph.topo``.

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name=c) for c in "abc"], [("a", "c"), ("b", "c")])
    >>> kahn(g, np.array([0.1, 0.9, 0.5])).tolist()
    [1, 0, 2]
    """
    prio = np.asarray(priorities, dtype=float)
    if prio.shape != (graph.n,) or not np.all(np.isfinite(prio)):
        raise SpecError(f"kahn: priorities must be {graph.n} finite numbers, got shape {prio.shape}")
    indeg = np.diff(graph.pred_ptr)
    return _kahn(prio, graph.succ_ptr, graph.succ_idx, indeg)


class Slicer:
    """A graph, its devices and cost model, prepared for slicing many orders (Alg. 1-2).

    ``devices`` restricts and orders the stages (default: every device of the cluster, in order).
    ``boundaries`` optionally forbids cuts at positions of the order (``bool`` array of length
    ``n + 1``, consulted with each order); colocation groups are always kept whole.

    A training graph is sliced through its forward projection (:func:`.segments.forward_projection`,
    Tarnawski App. B): orders, bounds and ``boundaries`` then refer to the nodes of
    ``self.sliced``; priorities are still given per op of ``graph``, and :meth:`placement`
    lifts the slicing back to the ops.

    ``max_replicas > 1`` lets a stage run on up to that many consecutive devices of one non-host
    class (Tarnawski App. C.2): :meth:`slice` then returns each device's replica count too.
    """

    def __init__(self, graph: Graph, cluster: Cluster, model: CostModel | None = None,
                 devices: np.ndarray | None = None, max_replicas: int = 1):
        self.graph, self.cluster = graph, cluster
        self.model = model or CostModel()
        self.devices = np.arange(cluster.size) if devices is None else np.asarray(devices, dtype=np.int64)
        if self.devices.size == 0:
            raise SpecError("Slicer: no devices to slice onto; pass a non-empty devices list")
        ml = replace(self.model, objective=Objective.MAX_LOAD)
        self.projection = forward_projection(graph, cluster)
        if not self.projection.identity:
            require_allowed(graph, stage_params(graph, cluster, ml, self.devices), cluster, self.devices)
        graph = self.sliced = self.projection.graph
        p = stage_params(graph, cluster, ml, self.devices)
        require_allowed(graph, p, cluster, self.devices)
        self.params = p
        tmin = p.times.min(axis=0)
        self._indeg = np.diff(graph.pred_ptr)
        self._outdeg = np.diff(graph.succ_ptr)
        self._mem = graph.param_bytes + graph.activation_bytes
        self._tmin = tmin
        self._dp_args = (graph.pred_ptr, graph.pred_idx, self._outdeg, graph.out_bytes, self._mem, p.times, tmin,
                         p.memory, p.tscale, p.overflow, p.hard, p.cls, p.overlap, graph.param_bytes,
                         self._sync_coefficients(max_replicas))
        self._value_args = (graph.succ_ptr, graph.succ_idx, graph.out_bytes, self._mem, p.times,
                            p.memory, p.tscale, p.overflow, p.hard, p.cls, p.overlap)
        self._all = np.ones(graph.n + 1, dtype=bool)

    def _sync_coefficients(self, max_replicas: int) -> np.ndarray:
        """``[t, r]``: all-reduce time per parameter byte of a stage on devices ``t .. t+r-1`` (App. C.2's
        ring at its slowest link), ``-1`` where those devices are not ``r`` non-host devices of one class."""
        if isinstance(max_replicas, bool) or not isinstance(max_replicas, (int, np.integer)) or max_replicas < 1:
            raise SpecError(f"Slicer: max_replicas must be a whole number >= 1, got {max_replicas!r}")
        R, D, c = min(int(max_replicas), self.k), self.k, self.cluster
        coef = np.full((D, R + 1), -1.0)
        cls, host = self.params.cls, c.host[self.devices]
        for t in range(D):
            for r in range(2, min(R, D - t) + 1):
                block = self.devices[t:t + r]
                if host[t:t + r].any() or (cls[t:t + r] != cls[t]).any():
                    break
                bw = ring_bandwidth(block.tolist(), c.route_bandwidth)
                if bw > 0:
                    coef[t, r] = ALLREDUCE_FACTOR * (r - 1) / r / bw
        return coef

    @property
    def k(self) -> int:
        return int(self.devices.size)

    def order(self, priorities: np.ndarray) -> np.ndarray:
        """Alg. 3 on the sliced graph, from priorities per op of the original graph."""
        prio = self.projection.priorities(np.asarray(priorities, dtype=float))
        return _kahn(prio, self.sliced.succ_ptr, self.sliced.succ_idx, self._indeg)

    def allowed(self, order: np.ndarray, boundaries: np.ndarray | None = None) -> np.ndarray:
        extra = self._all if boundaries is None else boundaries
        return sk.allowed_boundaries(order, self.sliced.group_id, extra)

    def solve(self, order: np.ndarray, cutoff: float = INF, boundaries: np.ndarray | None = None,
              deadline: float | None = None) -> tuple[float, np.ndarray]:
        """Optimal slicing value and stage bounds of ``order``; ``inf`` if no slicing is ``<= cutoff``; ``nan``
        with the work-balanced slicing's bounds when ``time.monotonic()`` passes ``deadline`` first."""
        value, bounds, _ = self.slice(order, cutoff, boundaries, deadline)
        return value, bounds

    def slice(self, order: np.ndarray, cutoff: float = INF, boundaries: np.ndarray | None = None,
              deadline: float | None = None) -> tuple[float, np.ndarray, np.ndarray]:
        """:meth:`solve` with each device's replica count (1 unless ``max_replicas > 1``)."""
        allowed = self.allowed(order, boundaries)
        upper = min(self.balanced_value(order, allowed), self.single_value(order), self.spread_value(order, allowed))
        at = INF if deadline is None else float(deadline)
        value, bounds, replicas = sk.slice_dp(order, *self._dp_args, allowed, min(cutoff, upper), at, sk.SPARSE, sk.CLOCK_STEPS)
        if value == INF and upper < cutoff:  # rounding guard: the balanced slicing itself qualifies
            value, bounds, replicas = sk.slice_dp(order, *self._dp_args, allowed, cutoff, at, sk.SPARSE, sk.CLOCK_STEPS)
        if math.isnan(value):  # stopped: the better of the two balanced slicings
            bounds = self.balanced_bounds(order, allowed)
            if self.spread_value(order, allowed) < sk.slicing_value(order, bounds, *self._value_args):
                bounds = self.spread_bounds(order, allowed)
        return value, bounds, replicas

    def value(self, order: np.ndarray, bounds: np.ndarray) -> float:
        """Cost of the slicing of ``order`` at stage ``bounds`` (``O(n + m)``)."""
        return sk.slicing_value(order, bounds, *self._value_args)

    def balanced_value(self, order: np.ndarray, allowed: np.ndarray) -> float:
        """Cost of the work-balanced slicing of ``order``: the DP's initial cutoff."""
        return sk.slicing_value(order, self.balanced_bounds(order, allowed), *self._value_args)

    def spread_value(self, order: np.ndarray, allowed: np.ndarray) -> float:
        """Cost of the work-balanced slicing of ``order`` over the non-host devices, the hosts' stages empty
        (``inf`` without both kinds). Beside a slow host CPU the balanced slicing gives the host its share of the
        ops, so its cost is the host's (1,170 against 81.5 on 20,000 ops of ResNet onto 64 accelerators and a CPU),
        and as the DP's cutoff it left every segment alive: 31 s against 1.6 s."""
        host = self.cluster.host[self.devices]
        if host.all() or not host.any():
            return INF
        return sk.slicing_value(order, self.spread_bounds(order, allowed), *self._value_args)

    def spread_bounds(self, order: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """Stage bounds of the work-balanced slicing of ``order`` over the non-host devices (``O(n + k)``)."""
        host = self.cluster.host[self.devices]
        _, _, _, tm = sk.prefix(order, self.params.times[:0], self._mem, self._tmin)
        inner = sk.balanced_bounds(tm, allowed, int((~host).sum()))
        ends = np.cumsum(~host)  # stage t ends where the non-host stages up to it end
        return np.concatenate([[0], inner[ends]]).astype(np.int64)

    def single_value(self, order: np.ndarray) -> float:
        """Least cost of the slicings that put every op on one device (one per device class): where every cut
        costs more than the whole graph's work (slow links), this is the optimum, and as the DP's cutoff it
        leaves no split prefix alive, so the DP visits each segment in O(1)."""
        n, k, best = int(order.size), self.k, INF
        for t in np.unique(self.params.cls, return_index=True)[1].tolist():
            bounds = np.where(np.arange(k + 1) <= t, 0, n).astype(np.int64)
            best = min(best, sk.slicing_value(order, bounds, *self._value_args))
        return best

    def balanced_bounds(self, order: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray:
        """Stage bounds of the work-balanced slicing of ``order`` (``O(n)``)."""
        _, _, _, tm = sk.prefix(order, self.params.times[:0], self._mem, self._tmin)
        return sk.balanced_bounds(tm, self.allowed(order) if allowed is None else allowed, self.k)

    def placement(self, order: np.ndarray, bounds: np.ndarray, source: str = "",
                  replicas: np.ndarray | None = None) -> Placement:
        assign = np.empty(self.sliced.n, dtype=np.int64)
        for t in range(self.k):
            assign[order[bounds[t]:bounds[t + 1]]] = self.devices[t]
        names = self.cluster.names
        sets = {names[self.devices[t]]: [names[d] for d in self.devices[t:t + r]]
                for t, r in enumerate([] if replicas is None else replicas.tolist()) if r > 1}
        return Placement(self.graph, self.cluster, self.projection.lift(assign), source=source, replicas=sets or None)

    def result(self, method: str, order: np.ndarray, bounds: np.ndarray, start: float,
               evaluations: int, replicas: np.ndarray | None = None, **info: Any) -> HeuristicResult:
        placement = self.placement(order, bounds, source=method, replicas=replicas)
        objective = evaluate(placement, self.model).objective
        info = {"order": order, "bounds": bounds, **info}
        return HeuristicResult(method=method, placement=placement, objective=objective,
                               seconds=time.perf_counter() - start, evaluations=evaluations, info=info)


@heuristic("slicegraph", optimizes="max_load", options=manifest.Slicegraph)
def slicegraph(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
               order: np.ndarray | None = None, priorities: np.ndarray | None = None, replication: bool = False,
               max_replicas: int | None = None, time_limit: float | None = None) -> HeuristicResult:
    """SliceGraph(G, k, pi) (Archer Alg. 1): the optimal slicing of one topological order.

    ``order`` (a topological order) or ``priorities`` (for :func:`kahn`, Alg. 3) choose the
    order; the default is the better of the graph's own topological order and the DFS order
    DPL slices (:func:`dfs_priorities`; ``info["order"]`` is the one taken), the second skipped
    once ``time_limit`` seconds have passed (``info["stopped"]``). ``seed`` is unused: the method is
    deterministic. A training graph is sliced through its forward projection (Tarnawski App. B;
    :class:`Slicer`): a given order then sets node priorities (earliest member first).
    ``replication`` lets a stage run on up to ``max_replicas`` (default: all) consecutive devices
    of its class (Tarnawski App. C.2); the placement carries the replicas.

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name=c, work=1.0) for c in "abcd"], [("a", "b"), ("b", "c"), ("c", "d")])
    >>> slicegraph(g, Cluster.stages(2)).objective  # two ops + one tensor of 0 bytes per stage
    2.0
    """
    start = time.perf_counter()
    at = deadline_at("slicegraph", time_limit)
    slicer = Slicer(graph, cluster, model, max_replicas=(max_replicas or cluster.size) if replication else 1)
    if order is not None and priorities is not None:
        raise SpecError("slicegraph: give either order= or priorities=, not both")
    if order is not None:
        order = np.asarray(order, dtype=np.int64)
        check_order(graph, order)
        if not slicer.projection.identity:
            priorities, order = -np.argsort(order).astype(float), None
    if priorities is not None:
        order = slicer.order(priorities)
    skipped = False
    if order is None:
        value, order, bounds, replicas, skipped = _best_default_order(slicer, graph, cluster, at)
    else:
        value, bounds, replicas = slicer.slice(order, deadline=at)
    if math.isnan(value):  # the DP passed the time limit: the work-balanced slicing of the order
        result = slicer.result("slicegraph", order, bounds, start, evaluations=1, replicas=replicas)
        return stopped(result, dp_value=None, stopped_in="the slicing DP (the work-balanced slicing is returned)")
    if value == INF:
        raise InfeasibleError(f"slicegraph: no slicing of this order onto the {slicer.k} devices in cluster order "
                              f"fits their memory and the kinds each op may run on (graph {graph.name!r}); add "
                              "devices, use the 'bottleneck' (overflow) model, or another order or method")
    result = slicer.result("slicegraph", order, bounds, start, evaluations=1, replicas=replicas, dp_value=value)
    return stopped(result) if skipped else result


def dfs_priorities(graph: Graph, cluster: Cluster) -> np.ndarray:
    """Op priorities (for :func:`kahn`) of the DFS order of the colocation-contracted forward DAG, the order
    along which DPL (Tarnawski §5.1.2) is exact: a branch is finished before the next starts, and an op
    that only feeds a later one (a weight) comes just before it rather than with the graph's sources."""
    con = contract(graph, kinds={d.kind for d in cluster.devices}, memory=float(cluster.memory.min()))
    rank = np.empty(con.n_nodes)
    rank[dfs_order(con)] = np.arange(con.n_nodes)
    return -(rank[con.image] * graph.n + graph.rank)


def _best_default_order(slicer: Slicer, graph: Graph, cluster: Cluster, at: float | None
                        ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, bool]:
    """The better slicing of two orders: the graph's own topological order, and (unless the time limit
    ``at`` passed) :func:`dfs_priorities`' order. Sliced along the graph's order alone, a graph whose
    weights are source ops pays a transfer for every weight read past a cut, so every split can cost more
    than one device (Tarnawski's operator graphs, with or without a host CPU). Last: whether the time
    limit skipped the second."""
    order = graph.topo.copy() if slicer.projection.identity else slicer.order(-graph.rank.astype(float))
    value, bounds, replicas = slicer.slice(order, deadline=at)
    if math.isnan(value) or expired(at) or graph.n < 2:
        return value, order, bounds, replicas, graph.n >= 2 and not math.isnan(value)
    other = slicer.order(dfs_priorities(graph, cluster))
    got = slicer.slice(other, value * (1 - SLACK) if value < INF else INF, deadline=at)
    if math.isnan(got[0]):
        return value, order, bounds, replicas, True
    if got[0] < value:
        return got[0], other, got[1], got[2], False
    return value, order, bounds, replicas, False


def node_slicing(graph: Graph, cluster: Cluster, model: CostModel, image: np.ndarray, node_order: np.ndarray,
                 deadline: float | None = None) -> tuple[float, Slicer, np.ndarray, np.ndarray] | None:
    """The optimal slicing of the ops in the order of their supernodes (``image``: op -> supernode, cut only
    between supernodes, visited in ``node_order``, ops of one supernode by topological rank): DPL's path DP
    (Tarnawski §5.1.2) when the devices are one class of identical devices, whatever their order. Value (``nan``
    past ``deadline``, ``inf`` when nothing fits), the slicer, the op order and the stage bounds; ``None`` where
    the slicing is not that DP (several device classes, ops the devices cannot run, a backward pass)."""
    if len(cluster.homogeneous_groups()) != 1:
        return None
    return ordered_node_slicing(graph, cluster, model, image, node_order, None, deadline)


def ordered_node_slicing(graph: Graph, cluster: Cluster, model: CostModel, image: np.ndarray,
                         node_order: np.ndarray, devices: np.ndarray | None = None, deadline: float | None = None,
                         cutoff: float = INF) -> tuple[float, Slicer, np.ndarray, np.ndarray] | None:
    """:func:`node_slicing` onto ``devices`` in that order (default: the cluster's), of any classes: the best
    slicing of the supernode order whose stages run on those devices one after another (empty stages leave a
    device unused). Every such slicing is a split of DPL's prefixes, so its value bounds DPL's optimum from
    above (with one class of identical devices it is that optimum); ``inf`` when none is ``<= cutoff``. ``None``
    with a backward pass or an op some device cannot run."""
    if graph.backward.any() or not np.isfinite(cluster.times(graph)).all():
        return None
    slicer = Slicer(graph, cluster, model, devices=devices)
    rank = np.empty(len(node_order), dtype=np.int64)
    rank[np.asarray(node_order, dtype=np.int64)] = np.arange(len(node_order))
    order = np.lexsort((graph.rank, rank[image])).astype(np.int64)
    nodes = image[order]
    cuts = np.ones(graph.n + 1, dtype=bool)
    cuts[1:-1] = nodes[1:] != nodes[:-1]
    value, bounds = slicer.solve(order, cutoff, boundaries=cuts, deadline=deadline)
    return value, slicer, order, bounds
