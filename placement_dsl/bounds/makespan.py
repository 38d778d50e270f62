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

import numpy as np

from ..cluster import Cluster
from ..graph import Graph
from ..schedule import transfer_durations

GRID = 20  # simplex grid steps of the work bound's weights (D <= 4: at most 1,771 weight vectors)


def critical_path_bound(graph: Graph, cluster: Cluster) -> float:
    """The longest path of fastest allowed op times."""
    fastest = np.where(np.isfinite(t := cluster.times(graph)), t, np.inf).min(axis=1)
    finish = np.zeros(graph.n)
    for v in graph.topo.tolist():
        preds = graph.predecessors(v)
        finish[v] = finish[preds].max(initial=0.0) + fastest[v]
    return float(finish.max(initial=0.0))


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


def segment_bound(graph: Graph, cluster: Cluster) -> float:
    """The sum over the ops comparable with all others and the segments between them (module docstring)."""
    times = cluster.times(graph)
    fastest = times.min(axis=1)
    reach = _reach(graph)
    related = reach | reach.T
    np.fill_diagonal(related, True)
    cuts = np.flatnonzero(related.all(axis=1))
    cuts = cuts[np.argsort(graph.rank[cuts])]
    before = reach[:, cuts]  # before[v, i]: v precedes cut i
    segment = np.where(np.isin(np.arange(graph.n), cuts), -1, before.shape[1] - before.sum(axis=1))
    total = float(fastest[cuts].sum())
    for s in np.unique(segment[segment >= 0]):
        ops = np.flatnonzero(segment == s)
        total += max(_segment_path(graph, ops, fastest), _work(times[ops], cluster.size))
    return float(total)


def _segment_path(graph: Graph, ops: np.ndarray, fastest: np.ndarray) -> float:
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
