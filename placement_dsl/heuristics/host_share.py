"""The host's share of a contiguous placement when the accelerators' memory binds.

With one host device ``h`` (a CPU of unbounded memory) and a contiguous placement (Tarnawski Def. 3.1: every
device's ops convex), the ops ``H`` on ``h`` split the rest in two: ``F``, the ops reached from ``H``, is a filter
(an op reached from ``F`` is reached from ``H``, and is not in ``H``, which is convex), and ``I = V \\ (H u F)`` is
an ideal (a predecessor of ``I`` in ``H`` or ``F`` would put it in ``F``). The accelerators hold ``I u F``
within their summed memory ``C``, so with ``t`` the host's times (a host's load is at least its work)::

    OPT >= t(V) - max {t(I) + t(F) : I an ideal, F a filter, mem(I) + mem(F) <= C}

The maximum over pairs ``(I, V \\ J)`` of ideals, disjoint or not (a relaxation: the bound stays valid), is one
sort and a running maximum over the ideals by memory. The hosts-last bound of
:mod:`.ordered_memory` is the case ``F`` empty; it holds for DAG-ordered placements only,
this one for every contiguous placement, the host anywhere in the pipeline. The ideals are walked
(:mod:`.ideal_walk`, in Python: no compiled kernel to load), so the bound is taken only where they are few: on
20,000 ops of chained ResNet-152 onto 16 accelerators of 16 GB (21,121 ideals, 0.2 s of CPU; through the DP's
lattice and its compiled sums it took 2 s, 7 s at load 8) it is 34,023.3 where greedy's split gives 34,141 and the
fractional knapsack over all placements (:mod:`placement_dsl.bounds.capacity`) 6,454.6.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..constraints import Contiguous, DagOrder
from ..evaluate import MemoryMode, Objective
from .ideal_walk import ideal_sums_walked

SAFETY = 1e-9  # relative shave: the sums run in another order than the cost model's
MAX_IDEALS = 500_000


def applies(problem: Any) -> bool:
    """Whether the bound may be positive for ``problem``: a max load over contiguous placements (``Contiguous``, or
    ``DagOrder``: without a backward pass every edge goes to the same or a later device, so each device's ops are
    convex) under hard memory, without terms that widen them, one host device beside devices of finite memory that
    cannot hold every op, and no backward pass. ``O(n + D)``."""
    model, cluster, graph = problem.cost_model(), problem.cluster, problem.graph
    if model.objective is not Objective.MAX_LOAD or model.memory is not MemoryMode.HARD:
        return False
    if not (problem.has(Contiguous) or problem.has(DagOrder)) or problem.widens:
        return False
    host = np.asarray(cluster.host, dtype=bool)
    caps = np.asarray(cluster.memory, dtype=float)[~host]
    if int(host.sum()) != 1 or not caps.size or not np.isfinite(caps).all() or graph.backward.any():
        return False
    return float((graph.param_bytes + graph.activation_bytes).sum()) > float(caps.sum())


def host_share_bound(problem: Any, deadline: float | None = None, max_ideals: int = MAX_IDEALS) -> float | None:
    """The module's bound for ``problem`` (``None`` where it does not apply, :func:`applies`), over the graph's
    ideals walked by :func:`~.ideal_walk.ideal_sums_walked`, which raises ``SpecError`` beyond ``max_ideals`` and
    ``TimeLimitReached`` past ``deadline`` (``time.monotonic()``)."""
    if not applies(problem):
        return None
    graph, cluster = problem.graph, problem.cluster
    host = np.asarray(cluster.host, dtype=bool)
    mem = (graph.param_bytes + graph.activation_bytes).astype(float)
    C = float(np.asarray(cluster.memory, dtype=float)[~host].sum()) * (1 + 1e-12)
    t = cluster.times(graph)[:, host].min(axis=1)
    t = np.where(np.isfinite(t), t, 0.0)  # an op the host cannot run adds nothing: the bound stays valid
    sums = ideal_sums_walked(graph, np.column_stack([mem, t]), max_ideals, deadline)
    return float(t.sum() - most_held(sums[:, 0], sums[:, 1], float(mem.sum()), float(t.sum()), C)) * (1 - SAFETY)


def most_held(mem: np.ndarray, t: np.ndarray, total_mem: float, total_t: float, C: float) -> float:
    """``max t(I) + t(V \\ J)`` over ideals ``I, J`` (their memory ``mem`` and work ``t``) with ``mem(I) + mem(V \\ J)
    <= C``, at least 0 (the empty pair). ``O(N log N)`` for ``N`` ideals.

    >>> most_held(np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0, 5.0]), 3.0, 5.0, 1.5)  # {a} held, the rest on the host
    2.0
    """
    order = np.argsort(mem, kind="stable")
    by_mem, best_t = mem[order], np.maximum.accumulate(t[order])
    room = C - (total_mem - mem)  # what I may hold beside the filter V \ J
    at = np.searchsorted(by_mem, room, side="right") - 1
    fits = at >= 0
    if not fits.any():
        return 0.0
    return max(0.0, float((best_t[at[fits]] + total_t - t[fits]).max()))
