"""Closed-form lower bounds on the makespan of a schedule on heterogeneous devices (MOIRAI eq. 4).

Relaxations valid for every placement and schedule (memory and contention dropped):

* **critical path**: the longest path of the graph with every op at its fastest allowed time
  (a path may stay on one device, so it pays no transfer);
* **path with transfers** (optimistic finish times, as HEFT's ranks but minimized): ``EF[v, d]``,
  a lower bound on the finish of ``v`` if it runs on ``d``, is ``p_vd`` after the latest of its
  inputs, each arriving at best from its producer's cheapest device
  ``min_d' EF[u, d'] + c_u(d', d)`` (``c_u(d, d) = 0``); in any schedule ``v`` ends after
  ``min_d EF[v, d]``, so the last sink's value bounds the makespan and is at least the critical path;
* **work**: the devices together must run every op. Fractionally, with unrelated devices, the
  least ``T`` with a split of every op over the devices that loads none beyond ``T`` is a
  linear program whose dual gives, for *any* weights ``lambda`` on the simplex,
  ``T >= sum_v min_d lambda_d p_vd``. :func:`work_bound` evaluates the weights inversely
  proportional to each device's total time and a grid over the simplex, and keeps the best;
  with ``lambda_d = 1 / D`` it is the classic ``sum_v min_d p_vd / D``;
* **segments**: an op comparable with every other op (an ancestor or a descendant of each, as
  a transformer's ``qkv`` or ``concat``) splits every schedule in time: all ops before it end
  before it starts, all after start after it ends. With such ops ``w_1 < ... < w_k`` and the
  segments between them, the makespan is at least ``sum_i p_{w_i} + sum_s max(critical path,
  work)`` of the segments (fastest times): the attention heads between two such ops must share
  the devices, which a single path cannot see.
"""
from __future__ import annotations

import itertools
import weakref
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..graph import Graph
from ..schedule import transfer_durations
from ..structure import cut_ops

GRID = 20  # simplex grid steps of the work bound's weights (D <= 4: at most 1,771 weight vectors)


def critical_path_bound(graph: Graph, cluster: Cluster) -> float:
    """The longest path of fastest allowed op times."""
    return graph.longest(np.where(np.isfinite(t := cluster.times(graph)), t, np.inf).min(axis=1))


def path_bound(graph: Graph, cluster: Cluster) -> float:
    """The latest sink's least optimistic finish time ``min_d EF[v, d]`` (module docstring)."""
    D, times = cluster.size, cluster.times(graph)
    producers = np.flatnonzero([graph.successors(u).size > 0 for u in range(graph.n)])
    u, a, b = (x.ravel() for x in np.meshgrid(producers, np.arange(D), np.arange(D), indexing="ij"))
    comm = np.zeros((graph.n, D, D))
    comm[producers] = transfer_durations(graph, cluster, u, a, b).reshape(len(producers), D, D)
    comm[:, np.arange(D), np.arange(D)] = 0.0
    finish = np.zeros((graph.n, D))
    for v in graph.topo.tolist():
        preds = graph.predecessors(v)
        ready = (finish[preds][:, :, None] + comm[preds]).min(axis=1).max(axis=0) if preds.size else np.zeros(D)
        finish[v] = ready + times[v]
    return float(finish.min(axis=1).max(initial=0.0))


ENERGY_CELLS = 2_000_000
"""The most weights x ops :func:`energy_bound` prices: four serial devices give a grid of 1,773 weights, which on a
20,000-op graph took 9 s and 1 GB (a bounds call of 3 s took 13); past it the grid is thinned evenly."""


def dual_weights(D: int, totals: np.ndarray) -> np.ndarray:
    """Candidate dual weights: uniform, inverse total time, and a grid over the simplex (small ``D``)."""
    inverse = np.divide(1.0, totals, out=np.zeros(len(totals)), where=np.isfinite(totals) & (totals > 0))
    out = [np.full(D, 1.0 / D)] + ([inverse / inverse.sum()] if inverse.sum() > 0 else [])
    if D <= 4:
        for parts in itertools.product(range(GRID + 1), repeat=D - 1):
            if sum(parts) <= GRID:
                out.append(np.array([*parts, GRID - sum(parts)], dtype=float) / GRID)
    return np.array(out)


_weights = dual_weights  # the former name, kept for one release


def work_bound(graph: Graph, cluster: Cluster) -> float:
    """``max_lambda sum_v min_d lambda_d p_vd`` over the candidate weights (module docstring)."""
    return _work(cluster.times(graph), cluster.size)


def _reach(graph: Graph) -> np.ndarray:
    """``reach[i, j]``: a path leads from ``i`` to ``j``."""
    reach = np.zeros((graph.n, graph.n), dtype=bool)
    for u in graph.topo[::-1].tolist():
        for v in graph.successors(u).tolist():
            reach[u, v] = True
            reach[u] |= reach[v]
    return reach


def comparable_cuts(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """The reachability matrix (``reach[u, v]``: u precedes v) and the ops comparable with all others (every op
    precedes or follows them), in topological order: the cuts that split every schedule in time. Both read-only,
    and computed once per graph while it lives (:data:`KEPT` graphs): a makespan solve asks for them from its
    bounds, its segment bound and its search by segments (1.7 s each on GPT-3 330M's 4,886 ops)."""
    hit = _CUTS.get(id(graph))
    if hit is not None and hit[0]() is graph:
        return hit[1], hit[2]
    reach = _reach(graph)
    cuts = cut_ops(graph).copy()
    reach.setflags(write=False)
    cuts.setflags(write=False)
    while len(_CUTS) >= KEPT:
        _CUTS.pop(next(iter(_CUTS)))
    key = id(graph)
    _CUTS[key] = (weakref.ref(graph, lambda _, k=key: _CUTS.pop(k, None)), reach, cuts)
    return reach, cuts


KEPT = 2  # graphs whose cut ops (and reachability, n^2 booleans) comparable_cuts keeps
_CUTS: dict[int, tuple[weakref.ref, np.ndarray, np.ndarray]] = {}


def segment_bound(graph: Graph, cluster: Cluster) -> float:
    """The sum over the ops comparable with all others and the segments between them (module docstring)."""
    times = cluster.times(graph)
    fastest = times.min(axis=1)
    reach, cuts = comparable_cuts(graph)
    before = reach[:, cuts]  # before[v, i]: v precedes cut i
    segment = np.where(np.isin(np.arange(graph.n), cuts), -1, before.shape[1] - before.sum(axis=1))
    total = float(fastest[cuts].sum())
    for s in np.unique(segment[segment >= 0]):
        ops = np.flatnonzero(segment == s)
        total += max(segment_path(graph, ops, fastest), _work(times[ops], cluster.size))
    return float(total)


def segment_path(graph: Graph, ops: np.ndarray, fastest: np.ndarray) -> float:
    """The longest path of fastest times through ``ops`` only (given in any order)."""
    inside = np.zeros(graph.n, dtype=bool)
    inside[ops] = True
    finish: dict[int, float] = {}
    for v in sorted(ops.tolist(), key=lambda v: int(graph.rank[v])):
        finish[v] = max((finish[u] for u in graph.predecessors(v).tolist() if inside[u]), default=0.0) + fastest[v]
    return max(finish.values(), default=0.0)


def _work(times: np.ndarray, D: int) -> float:
    """``max_lambda sum_v min_d lambda_d p_vd`` over the candidate weights, for the ops whose times are given."""
    busy = times.sum(axis=0, where=np.isfinite(times))
    best = 0.0
    lam = _weights(D, busy)
    for chunk in np.array_split(lam, max(1, len(lam) // 256)):
        with np.errstate(invalid="ignore"):  # weight 0 on a device that cannot run the op: nan, read as inf
            scaled = chunk[:, None, :] * times[None]
        best = max(best, float(np.where(np.isnan(scaled), np.inf, scaled).min(axis=2).sum(axis=1).max()))
    return best


def makespan_bounds(graph: Graph, cluster: Cluster) -> dict[str, float]:
    """``{"critical_path": ..., "path": ..., "work": ..., "segments": ..., "bound": the largest}``.

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name="a", work=2.0), Op(name="b", work=2.0), Op(name="c", work=2.0)], [("a", "b")])
    >>> makespan_bounds(g, Cluster.accelerators(2))
    {'critical_path': 4.0, 'path': 4.0, 'work': 3.0, 'segments': 4.0, 'bound': 4.0}
    """
    out = {"critical_path": critical_path_bound(graph, cluster), "path": path_bound(graph, cluster),
           "work": work_bound(graph, cluster), "segments": segment_bound(graph, cluster)}
    return {**out, "bound": max(out.values())}


# ---------------------------------------------------------------------------- the problem's bounds (certify's levels)
def allowed_times(problem: Any) -> np.ndarray:
    """``times[v, d]`` of the problem's graph, ``inf`` where ``v`` may not run on ``d``: its kind's time, narrowed by
    pins and by colocation (a group runs where every member may). ``inf`` on every device where nothing is allowed
    would claim "no placement", which is the problem's own checks' to say: such an op keeps its times."""
    g, c = problem.graph, problem.cluster
    times = c.times(g).astype(float)
    ok = np.isfinite(times)
    for op, dev in problem.pins.items():
        pinned = np.zeros(c.size, dtype=bool)
        pinned[c.index[dev]] = True
        ok[g.index[op]] &= pinned
    groups, inverse = np.unique(g.group_id, return_inverse=True)
    if groups.size < g.n:
        together = np.ones((groups.size, c.size), dtype=bool)
        np.logical_and.at(together, inverse, ok)
        ok &= together[inverse]
    narrowed = np.where(ok, times, np.inf)
    stuck = ~np.isfinite(narrowed).any(axis=1)
    narrowed[stuck] = times[stuck]
    return narrowed


def transfer_table(graph: Graph, cluster: Cluster) -> np.ndarray:
    """``comm[u, d, d2]``: the least time op ``u``'s output takes from device ``d`` to ``d2`` in a schedule
    (:func:`~placement_dsl.schedule.transfer_durations`: route latency plus size over the route's bandwidth, or the
    sheet's matrix); 0 on one device and for an op without consumers."""
    D = cluster.size
    comm = np.zeros((graph.n, D, D))
    producers = np.flatnonzero(np.diff(graph.succ_ptr) > 0)
    if producers.size:
        u, a, b = (x.ravel() for x in np.meshgrid(producers, np.arange(D), np.arange(D), indexing="ij"))
        comm[producers] = transfer_durations(graph, cluster, u, a, b).reshape(len(producers), D, D)
    comm[:, np.arange(D), np.arange(D)] = 0.0
    return comm


def heads_tails(graph: Graph, times: np.ndarray, comm: np.ndarray, group: np.ndarray | None = None,
                ops: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ready, tail)``, both ``(n, D)``: ``ready[v, d]`` is a lower bound on when ``v`` can start on ``d`` (each
    input produced at its earliest, on its best device, and moved to ``d``); ``tail[v, d]`` a lower bound on the time
    from ``v``'s end on ``d`` to the end of the schedule (each consumer moved to, and run on, its best device, then
    its own tail). Every schedule starts ``v`` after ``min_d ready`` and runs at least ``min_d tail`` after it.
    ``group``: the ops' colocation classes, which every placement keeps on one device: an input or a consumer of
    ``v``'s class runs on ``d`` too (a MOIRAI flow op, colocated with its producer of no bytes, moves its tensor
    from the producer's device, not from wherever the move is cheapest). ``ops``: only the subgraph they induce, timed
    from its own start to its own end (the ops outside, and the edges to them, dropped; their rows stay 0)."""
    n, D = times.shape
    ready, tail = np.zeros((n, D)), np.zeros((n, D))
    inside = np.ones(n, dtype=bool)
    if ops is not None:
        inside[:] = False
        inside[ops] = True
    order = graph.topo[inside[graph.topo]].tolist()
    for v in order:
        preds = graph.predecessors(v)
        preds = preds[inside[preds]]
        if preds.size:
            done = ready[preds] + times[preds]  # (input, its device)
            arrive = (done[:, :, None] + comm[preds]).min(axis=1)
            if group is not None:
                same = group[preds] == group[v]
                arrive[same] = done[same]
            ready[v] = arrive.max(axis=0)
    for v in order[::-1]:
        succ = graph.successors(v)
        succ = succ[inside[succ]]
        if succ.size:
            run = times[succ] + tail[succ]  # (consumer, its device)
            after = (run[:, None, :] + comm[v][None]).min(axis=2)  # (consumer, d)
            if group is not None:
                same = group[succ] == group[v]
                after[same] = run[same]
            tail[v] = after.max(axis=0)
    return ready, tail


def route_path_bound(graph: Graph, times: np.ndarray, comm: np.ndarray,
                     group: np.ndarray | None = None) -> tuple[float, int]:
    """The longest path with route costs: ``max_v min_d ready[v, d] + p_vd + tail[v, d]`` and the ``v`` attaining it.

    Each edge pays the cheapest transfer between the devices its ends could run on (0 when they can share one, and
    always when ``group`` colocates them, :func:`heads_tails`)."""
    ready, tail = heads_tails(graph, times, comm, group)
    with np.errstate(invalid="ignore"):
        through = np.nan_to_num(ready + times + tail, nan=np.inf).min(axis=1)
    through = np.where(np.isfinite(through), through, 0.0)
    v = int(np.argmax(through)) if graph.n else 0
    return (float(through[v]) if graph.n else 0.0), v


def weighted_costs(times: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``cost[w, v] = min_d weights[w, d] * times[v, d]`` (``0 * inf`` read as ``inf``; an op no weighted device can
    run, with some device of weight 0 that can, costs 0)."""
    with np.errstate(invalid="ignore"):
        scaled = weights[:, None, :] * times[None]
    return np.where(np.isnan(scaled), np.inf, scaled).min(axis=2)


def energy_bound(graph: Graph, times: np.ndarray, comm: np.ndarray, free: np.ndarray | None = None,
                 kinds: np.ndarray | None = None, ends: tuple[np.ndarray, np.ndarray] | None = None) -> float:
    """Work over devices with release and tail times (an energy bound).

    For a set ``S`` of ops, every schedule runs ``S`` inside ``[min_S head, C - min_S tail]`` (heads and tails of
    :func:`heads_tails`), and the serial devices (not ``free``: a ``free`` device runs any number of ops at once, as
    the latency model's hosts) must do ``S``'s work there, which fractionally takes at least ``sum_{v in S} min_d
    lambda_d p_vd`` for any weights ``lambda`` on the serial devices' simplex (the LP dual of the load split), an op
    a free device may run costing nothing. So ``C >= min_S head + W(S) + min_S tail``, taken over the sets of ops
    whose head (or tail) is at least each value, and over the weights: uniform, inverse total time, uniform on
    each device kind (``kinds``: a kind label per device), and a grid for at most four serial devices.
    With ``S`` every op and no free devices this is :func:`work_bound`. ``ends``: heads and tails ``(n, D)`` of a
    stronger argument (any lower bounds on an op's start and on what follows its end, given its device), used in
    place of :func:`heads_tails`.
    """
    n, D = times.shape
    if n == 0:
        return 0.0
    free = np.zeros(D, dtype=bool) if free is None else np.asarray(free, dtype=bool)
    serial = np.flatnonzero(~free)
    if serial.size == 0:
        return 0.0
    ready, tail = heads_tails(graph, times, comm) if ends is None else ends
    with np.errstate(invalid="ignore"):
        head = np.nan_to_num(ready, nan=np.inf).min(axis=1, where=np.isfinite(times), initial=np.inf)
        rest = np.nan_to_num(tail, nan=np.inf).min(axis=1, where=np.isfinite(times), initial=np.inf)
    head, rest = np.where(np.isfinite(head), head, 0.0), np.where(np.isfinite(rest), rest, 0.0)
    sub = times[:, serial]
    weights = dual_weights(serial.size, sub.sum(axis=0, where=np.isfinite(sub)))
    if weights.shape[0] * n > ENERGY_CELLS:  # any weights give a bound: the simplex's grid, thinned evenly
        keep = np.unique(np.r_[0, 1, np.linspace(2, weights.shape[0] - 1, max(ENERGY_CELLS // n - 2, 1))
                                .round().astype(np.int64)])
        weights = weights[keep[keep < weights.shape[0]]]
    if kinds is not None:
        labels = np.asarray(kinds)[serial]
        weights = np.vstack([weights, *[(labels == k) / (labels == k).sum() for k in np.unique(labels)]])
    cost = weighted_costs(sub, weights)
    cost[:, np.isfinite(times[:, free]).any(axis=1)] = 0.0  # a free device runs it at no capacity
    cost[~np.isfinite(cost)] = 0.0  # an op nothing may run: the problem's checks say so, not a bound
    best = 0.0
    for first, other in ((head, rest), (rest, head)):
        order = np.argsort(first, kind="stable")
        work = np.cumsum(cost[:, order][:, ::-1], axis=1)[:, ::-1]  # work of the ops from position k on
        least = np.minimum.accumulate(other[order][::-1])[::-1]
        best = max(best, float((first[order][None] + work + least[None]).max()))
    return best


def route_path_makespan(problem: Any) -> tuple[float, str]:
    """:func:`route_path_bound` of a makespan problem (allowed times, the cost model's transfers) and a note."""
    g = problem.graph
    bound, v = route_path_bound(g, allowed_times(problem), transfer_table(g, problem.cluster), g.group_id)
    return bound, f"longest path through {g.names[v]!r} with route costs" if g.n else "empty graph"


def energy_makespan(problem: Any) -> tuple[float, str]:
    """:func:`energy_bound` of a makespan problem: every device but the parallel hosts runs one op at a time."""
    g, c = problem.graph, problem.cluster
    kinds = np.array([d.kind for d in c.devices])
    times, comm = allowed_times(problem), transfer_table(g, c)
    ends = heads_tails(g, times, comm, g.group_id)  # a colocation class on one device
    return energy_bound(g, times, comm, free=c.parallel, kinds=kinds, ends=ends), \
        f"work of {g.n} ops over {c.size} devices with heads and tails"
