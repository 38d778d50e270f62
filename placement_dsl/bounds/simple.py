"""The simple lower bound (Archer et al. Lemma 3.3), generalized to heterogeneous devices and to
replicated stages (Tarnawski et al. App. C.2)."""
from __future__ import annotations

import numpy as np

from ..cluster import Cluster
from ..graph import Graph
from ..replication import ALLREDUCE_FACTOR


def simple_lower_bound(graph: Graph, cluster: Cluster) -> float:
    """``L = max(max_v t_v, sum_v t_v / D) <= OPT`` for the max-load objective.

    ``t_v = min_d time(v, d)`` is the op's fastest running time on any device, so every
    device holding ``v`` spends at least ``t_v`` on it, and the ``D`` device loads sum to at
    least ``sum_v t_v`` (transfers only add). With identical stages this is Lemma 3.3.

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name="a", work=3), Op(name="b", work=1), Op(name="c", work=1)])
    >>> simple_lower_bound(g, Cluster.stages(2))
    3.0
    """
    t = cluster.times(graph).min(axis=1)
    return float(max(t.max(), t.sum() / cluster.size))


def replicated_lower_bound(graph: Graph, cluster: Cluster, max_per_stage: int, overlap: str = "none") -> float:
    """Lemma 3.3 over placements whose stages run on up to ``max_per_stage`` replicas (App. C.2).

    A stage ``S`` on ``r`` replicas loads each of them with ``L_S / r + sync`` (or
    ``max(L_S / r, sync)`` with overlapped communication), ``sync = 2 (r-1)/r * P_S / B_ring``
    (:mod:`placement_dsl.replication`), where ``L_S`` is at least the stage's compute.

    * Sum: the ``r`` replicas of ``S`` carry at least ``L_S >= sum_{v in S} t_v`` together, and
      stages and replicas occupy distinct devices, so the ``D`` loads sum to at least
      ``sum_v t_v``: ``T >= sum_v t_v / D`` as without replication.
    * Max: the stage holding ``v`` has ``L_S >= t_v`` and ``P_S >= p_v``, and its ring is no
      faster than ``B* = max_{a != b} min(B_ab, B_ba)`` over non-host devices, so
      ``T >= min_{1 <= r <= R} rep(t_v, 2 (r-1)/r * p_v / B*, r)`` with ``R`` the replica cap
      (``R = 1`` when fewer than two non-host devices exist).

    Holds for every placement with replica sets of at most ``max_per_stage`` devices under any
    overlap mode and memory mode (overflow only adds load).

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name="a", work=10, param_bytes=2), Op(name="b", work=1)], [("a", "b")])
    >>> replicated_lower_bound(g, Cluster.accelerators(3), 3)  # a on 3 replicas: 10/3 + 2*(2/3)*2
    6.0
    """
    t = cluster.times(graph).min(axis=1)
    acc = np.flatnonzero(~cluster.host)
    bw = cluster.route_bandwidth[np.ix_(acc, acc)]
    ring = np.minimum(bw, bw.T)
    np.fill_diagonal(ring, 0.0)
    fastest = float(ring.max()) if acc.size >= 2 else 0.0
    R = int(min(max_per_stage, acc.size)) if fastest > 0 else 1
    per_op = t.copy()
    for r in range(2, R + 1):
        sync = ALLREDUCE_FACTOR * (r - 1) / r * graph.param_bytes / fastest
        share = t / r
        per_op = np.minimum(per_op, share + sync if overlap == "none" else np.maximum(share, sync))
    return float(max(per_op.max(initial=0.0), t.sum() / cluster.size))
