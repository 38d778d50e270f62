"""The pigeonhole bound for the max-load objective on accelerators and host CPUs.

Let ``K`` be the number of non-host devices, and for each colocation unit ``G`` (an op, or a
group that must share a device) let ``a_G`` be its cheapest compute time on any non-host device
and ``h_G`` on any host device (``inf`` without hosts). In a placement of max load ``T`` a unit
with ``h_G > T`` cannot sit on a host (it alone would load it beyond ``T``), so the units of
``B(T) = {G : h_G > T}`` share the ``K`` non-host devices and one of them holds at least
``m = ceil(|B(T)| / K)`` of them: its load is at least the sum ``f(T)`` of the ``m`` smallest
``a_G`` over ``B(T)`` (transfers and overflow only add; any overlap mode keeps the compute).
Hence the optimum ``T`` satisfies ``T >= f(T)``, and since ``f`` is a non-increasing step
function of ``T`` (it changes only where ``T`` crosses some ``h_G``),
``OPT >= min{T : T >= f(T)}``, found by scanning the steps in increasing order.

On Tarnawski et al.'s BERT-24 layer graph (25 layers of about 3.55 time units, six
accelerators and a CPU ten times slower) it gives five layers, 17.70, where Lemma 3.3 gives 13.2.
Valid for every placement without replicated stages (a replicated stage divides its load).
"""
from __future__ import annotations

import math

import numpy as np

from ..cluster import Cluster
from ..graph import Graph


def unit_times(graph: Graph, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
    """``(a, h)``: each colocation unit's cheapest time on a non-host and on a host device."""
    times = cluster.times(graph)
    _, gid = np.unique(graph.group_id, return_inverse=True)

    def cheapest(cols: np.ndarray) -> np.ndarray:
        if cols.size == 0:
            return np.full(int(gid.max()) + 1, math.inf)
        out = np.full(int(gid.max()) + 1, math.inf)
        for d in cols:  # a unit sits on one device: its time there is the sum of its members'
            with np.errstate(invalid="ignore"):
                out = np.minimum(out, np.bincount(gid, weights=times[:, d]))
        return np.nan_to_num(out, nan=math.inf)

    return cheapest(np.flatnonzero(~cluster.host)), cheapest(np.flatnonzero(cluster.host))


def movable_units(graph: Graph, cluster: Cluster) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``(a, h, K)``: the least accelerator and host times of the units some accelerator runs (a unit
    no accelerator runs sits on a host, where Lemma 3.3 covers it) and the number K of non-host
    devices; ``None`` for an empty graph or a cluster of hosts only (the bounds are then 0)."""
    if graph.n == 0:
        return None
    a, h = unit_times(graph, cluster)
    K = int((~cluster.host).sum())
    if K == 0:
        return None
    movable = np.isfinite(a)
    return a[movable], h[movable], K


def pigeonhole_bound(graph: Graph, cluster: Cluster) -> float:
    """``min{T : T >= f(T)}`` of the module docstring: a lower bound on the max load of every placement.

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 10.0}) for i in range(5)])
    >>> pigeonhole_bound(g, Cluster.accelerators(2, cpus=1))  # 3 of the 5 ops share an accelerator
    3.0
    """
    units = movable_units(graph, cluster)
    if units is None:
        return 0.0
    a, h, K = units
    order = np.argsort(-h, kind="stable")  # B(T) grows as T falls: units by host time, slowest first
    a, h = a[order], h[order]
    steps = np.unique(h)  # B(T) = {h > T} is constant on [steps[i], steps[i + 1])
    lows = np.concatenate([[-math.inf], steps])
    for i, lo in enumerate(lows):
        hi = steps[i] if i < steps.size else math.inf
        size = int((h > lo).sum()) if i > 0 else h.size  # |B(T)| for T in [lo, hi)
        f = float(np.sort(a[:size])[: math.ceil(size / K)].sum()) if size else 0.0
        T = max(lo, f, 0.0)
        if T < hi:
            return T
    return 0.0
