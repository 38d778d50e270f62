"""The one-device-or-cut bound for the max-load objective on identical devices.

In a placement on ``k`` identical devices either one device holds every op, and its load is the whole
graph's (its work, plus the overflow of all the memory when memory is soft; no placement at all when it
is hard and the graph does not fit), or every device holding ops holds a proper subset ``S``. Join two ops
when a tensor of positive size runs between them (a producer and each of its consumers): when that joins
every op, a proper subset ``S`` separates some producer from a consumer, so its device sends or receives
at least the cheapest tensor, ``c = min_p out_bytes(p) / bw`` (Archer et al. eq. 3: a tensor crossing the
boundary is paid once). The busiest of the ``m <= k`` devices in use computes at least
``w = max(W / k, max_v t_v)``, so::

    OPT >= min(load(V on one device), w + c)          communication not overlapped
    OPT >= min(load(V on one device), max(w, c))      overlapped (half or full duplex)

Where every cut costs more than the graph's work (slow links), the first term binds and the bound is the
optimum; Lemma 3.3 alone stops at ``W / k``. ``O(n + m)``; no recursion.
"""
from __future__ import annotations

import math

import numpy as np

from ..cluster import Cluster
from ..evaluate import MemoryMode, Objective, Overlap
from ..graph import Graph
from ..problem import Problem

SAFETY = 1e-12  # relative shave: the cost model sums the same numbers in another order


def applies(graph: Graph, cluster: Cluster) -> str | None:
    """``None`` when :func:`one_or_cut_bound` bounds placements of ``graph`` on ``cluster``, else why not."""
    if cluster.host.any() or cluster.routed or len(cluster.homogeneous_groups()) != 1:
        return "the one-device-or-cut bound needs identical non-host devices without routes"
    if not np.isfinite(cluster.times(graph)).all():
        return "some op cannot run on the devices' kind"
    return None


def _connected_by_tensors(graph: Graph) -> bool:
    """Whether the tensors of positive size join every op (union-find, iterative)."""
    parent = np.arange(graph.n)

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = int(parent[x])
        return x

    joined = graph.out_bytes[graph.src] > 0
    for a, b in zip(graph.src[joined].tolist(), graph.dst[joined].tolist()):
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[ra] = rb
    return len({root(v) for v in range(graph.n)}) == 1


def one_or_cut_bound(graph: Graph, cluster: Cluster, overlap: Overlap = Overlap.NONE, soft_memory: bool = False
                     ) -> float:
    """The module's bound (``0`` on an empty graph).

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name="a", work=1, out_bytes=50), Op(name="b", work=1)], [("a", "b")])
    >>> one_or_cut_bound(g, Cluster.stages(2))  # a cut moves 50: both ops on one device
    2.0
    """
    why = applies(graph, cluster)
    if why:
        raise ValueError(why)
    if graph.n == 0:
        return 0.0
    dev = cluster.devices[0]
    t = cluster.times(graph)[:, 0]
    mem = float((graph.param_bytes + graph.activation_bytes).sum())
    work = math.fsum(t.tolist())  # the one-device load is a placement's: summed exactly, not shaved
    if soft_memory:
        one = work + max(mem - dev.memory, 0.0) / dev.bandwidth
    else:
        one = work if mem <= dev.memory * (1 + 1e-9) else math.inf
    if cluster.size == 1:
        return one
    w = max(work / cluster.size, float(t.max()))
    sizes = graph.out_bytes[graph.src]
    c = float(sizes[sizes > 0].min()) * float(cluster.transfer_scale[0]) if (sizes > 0).any() else 0.0
    if c > 0 and not _connected_by_tensors(graph):
        c = 0.0
    split = w + c if overlap is Overlap.NONE else max(w, c)
    return min(one, split * (1 - SAFETY))


def problem_applies(problem: Problem) -> str | None:
    """``None`` when the bound holds for ``problem`` (a max load on identical devices), else why not."""
    model = problem.cost_model()
    if model.objective is not Objective.MAX_LOAD:
        return f"the one-device-or-cut bound bounds a max load, not {model.objective.value!r}"
    return applies(problem.graph, problem.cluster)


def problem_bound(problem: Problem) -> float:
    """:func:`one_or_cut_bound` of ``problem``'s graph, cluster and cost model."""
    model = problem.cost_model()
    return one_or_cut_bound(problem.graph, problem.cluster, model.overlap, model.memory is MemoryMode.OVERFLOW)
