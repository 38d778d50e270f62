"""Capacity bounds for the max-load objective on devices of different speeds and memories.

*Speed.* Let ``c_v = min_d t_d(v)`` be op ``v``'s cheapest time and ``rho_d = max_v c_v / t_d(v)`` the most
cheapest work device ``d`` does per unit of its own time (``1`` for the fastest device of every op, ``1/20``
for a CPU twenty times slower on every op). A device of load ``T`` holds ops of cheapest work at most
``rho_d T``, so ``sum_v c_v <= T sum_d rho_d``::

    OPT >= sum_v c_v / sum_d rho_d

Lemma 3.3 counts a slow host CPU as a whole device (``sum_v c_v / D``); here it counts for what it can do.

*Memory.* Under hard memory, the devices of finite memory ``F`` hold at most ``sum_{d in F} M_d`` of the ops'
memory, so the devices of unbounded memory ``U`` (host CPUs) hold ops ``S`` with ``mem(S) >= need =
mem(V) - sum_F M_d``; their loads sum to at least ``sum_{v in S} t_U(v)`` (``t_U``: the fastest time on ``U``),
whose least value over such ``S`` is at least the fractional knapsack's (ops by ``t_U / mem`` ascending)::

    OPT >= knapsack(need) / |U|

Both hold for every placement without replicated stages (transfers and overflow only add); ``O(n D + n log n)``.
"""
from __future__ import annotations

import math

import numpy as np

from ..cluster import Cluster
from ..graph import Graph

SAFETY = 1e-12  # relative shave: sums in another order


def speed_bound(graph: Graph, cluster: Cluster) -> float:
    """``max(max_v c_v, sum_v c_v / sum_d rho_d)`` (module doc).

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 20.0}) for i in range(41)])
    >>> round(speed_bound(g, Cluster.accelerators(2, cpus=1)), 6)  # 41 / (1 + 1 + 1/20); Lemma 3.3: 41 / 3
    20.0
    """
    t = cluster.times(graph)
    if graph.n == 0:
        return 0.0
    cheapest = t.min(axis=1)
    runs = np.isfinite(cheapest)
    cheapest = np.where(runs, cheapest, 0.0)  # an op no device runs: no placement, 0 keeps the bound valid
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.isfinite(t) & (t > 0), cheapest[:, None] / t, 0.0)
    rho = np.minimum(ratio.max(axis=0), 1.0)
    rho[(np.isfinite(t) & (t == 0)).any(axis=0) & (rho == 0)] = 1.0  # runs only free ops: counts as a full device
    total = math.fsum(cheapest.tolist())
    spread = total / float(rho.sum()) if rho.sum() > 0 else 0.0
    return max(float(cheapest.max()), spread) * (1 - SAFETY)


def memory_bound(graph: Graph, cluster: Cluster) -> float:
    """``knapsack(need) / |U|`` under hard memory (module doc); ``0`` when every op fits the finite memories or no
    device has unbounded memory."""
    caps = cluster.memory
    unbounded = ~np.isfinite(caps)
    mem = graph.param_bytes + graph.activation_bytes
    need = math.fsum(mem.tolist()) - float(caps[~unbounded].sum())
    if need <= 0 or not unbounded.any():
        return 0.0
    tu = cluster.times(graph)[:, unbounded].min(axis=1)
    ok = np.isfinite(tu) & (mem > 0)
    if float(mem[ok].sum()) < need:
        return 0.0  # no placement fits at all
    order = np.argsort(tu[ok] / mem[ok], kind="stable")
    t_sorted, m_sorted = tu[ok][order], mem[ok][order]
    before = np.concatenate([[0.0], np.cumsum(m_sorted)[:-1]])
    whole = before + m_sorted <= need
    part = np.clip(need - before, 0.0, m_sorted) / m_sorted
    value = float(np.sum(np.where(whole, t_sorted, t_sorted * part)))
    return value / int(unbounded.sum()) * (1 - SAFETY)


def capacity_bound(graph: Graph, cluster: Cluster, hard_memory: bool = True) -> float:
    """The better of :func:`speed_bound` and (under hard memory) :func:`memory_bound`."""
    return max(speed_bound(graph, cluster), memory_bound(graph, cluster) if hard_memory else 0.0)
