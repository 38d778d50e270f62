"""The simple lower bound (Archer et al. Lemma 3.3), generalized to heterogeneous devices."""
from __future__ import annotations

from ..cluster import Cluster
from ..graph import Graph


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
