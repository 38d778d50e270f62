"""The hosts' share of a DAG-ordered placement when the accelerators' memory binds.

Under :class:`~placement_dsl.constraints.DagOrder` an edge never goes from a later device to an earlier one (in the
cluster's index order), so the ops on the devices before any index form an ideal (down-closed set). When every host
device (``Device.host``: CPUs, unbounded memory) comes after every other device, the non-host devices hold an ideal
``I`` that fits their summed memory ``C`` and the hosts run ``V \\ I``; when every host comes first, the hosts hold
an ideal and the others its complement. The hosts' loads sum to at least the work they run at the fastest host's
times ``t_U`` (a host pays no transfers), so with ``|U|`` hosts::

    OPT >= (t_U(V) - max {t_U(I) : I an ideal, mem(I) <= C}) / |U|        (hosts last)
    OPT >= min {t_U(I) : I an ideal, mem(V \\ I) <= C} / |U|               (hosts first)

The ideals are walked (:func:`~placement_dsl.heuristics.ideal_walk.ideal_sums_walked`), so the bound is taken
only where they are few: on the chained CNNs of 20,000 ops (about 21,000 ideals) it is within 0.2 % of the best
placement, where the fractional knapsack over all placements (:mod:`placement_dsl.bounds.capacity`) stops at half
of it, the accelerators then holding the ops of best work per byte wherever they lie. Memory counts each op's parameters and
activations, as the cost model's hard memory does.
"""
from __future__ import annotations

import numpy as np

from ..cluster import Cluster
from ..graph import Graph
from .ideal_walk import ideal_sums_walked

SAFETY = 1e-9  # relative shave: the sums run in another order than the cost model's
MAX_IDEALS = 500_000


def host_side(cluster: Cluster) -> str | None:
    """``"last"`` when every host device comes after every other device in the cluster's order, ``"first"`` when
    before, ``None`` otherwise (or without both kinds)."""
    host = np.asarray(cluster.host, dtype=bool)
    if host.all() or not host.any():
        return None
    idx = np.arange(host.size)
    if idx[host].min() > idx[~host].max():
        return "last"
    if idx[host].max() < idx[~host].min():
        return "first"
    return None


def ordered_memory_bound(graph: Graph, cluster: Cluster, deadline: float | None = None,
                         max_ideals: int = MAX_IDEALS) -> float | None:
    """The module's bound for DAG-ordered placements under hard memory; ``0.0`` when the non-host devices hold the
    whole graph's memory, ``None`` where it does not apply (hosts between other devices, unbounded memory beside the
    hosts, a backward pass). Raises what :func:`~placement_dsl.heuristics.ideal_walk.ideal_sums_walked` raises:
    ``SpecError`` beyond ``max_ideals``, ``TimeLimitReached`` past ``deadline`` (``time.monotonic()``)."""
    side = host_side(cluster)
    host = np.asarray(cluster.host, dtype=bool)
    caps = np.asarray(cluster.memory, dtype=float)[~host]
    if side is None or not np.isfinite(caps).all() or graph.backward.any() or graph.n == 0:
        return None
    mem = (graph.param_bytes + graph.activation_bytes).astype(float)
    C = float(caps.sum()) * (1 + 1e-12)
    if float(mem.sum()) <= C:
        return 0.0
    tu = cluster.times(graph)[:, host].min(axis=1)
    tu = np.where(np.isfinite(tu), tu, 0.0)  # an op no host runs adds nothing: the bound stays valid
    sums = ideal_sums_walked(graph, np.column_stack([mem, tu]), max_ideals, deadline)
    hosts = int(host.sum())
    if side == "last":
        fits = sums[:, 0] <= C
        held = float(sums[fits, 1].max()) if fits.any() else 0.0
        return max(0.0, float(tu.sum()) - held) / hosts * (1 - SAFETY)
    fits = float(mem.sum()) - sums[:, 0] <= C
    return (float(sums[fits, 1].min()) if fits.any() else 0.0) / hosts * (1 - SAFETY)
