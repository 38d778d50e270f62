"""Clusters whose links do not join every pair of devices: the groups of devices that all reach one another.

The heuristics that build pipelines over a device order (the DP over ideals, SliceGraph, the genetic searches,
polish, ...) assume any device may send to any other; on a cluster whose links leave a pair without a route the
cost model refuses a tensor sent across it. Within a group of devices that reach one another both ways (a strongly
connected component of the routes) every split routes, so a method run on the group's cluster
(:func:`sub_cluster`) answers a valid split of the whole cluster: :func:`placement_dsl.heuristics.run` falls back to
the groups when the method's own answer crosses a pair with no route.
"""
from __future__ import annotations

import numpy as np

from ..cluster import Cluster


def groups(cluster: Cluster) -> list[list[int]]:
    """The devices of ``cluster`` in groups whose members all reach one another by routes, largest first (ties by
    their first device); one group when every pair routes (no links: through host memory, always)."""
    D = cluster.size
    if not cluster.links:
        return [list(range(D))]
    reach = np.array([[cluster.route_links[a][b] is not None for b in range(D)] for a in range(D)])
    both = reach & reach.T
    found, seen = [], np.zeros(D, dtype=bool)
    for a in range(D):
        if not seen[a]:
            members = np.flatnonzero(both[a]).tolist()  # routes compose (chains of links): mutual reach is an
            seen[members] = True  # equivalence, and a's row is its class
            found.append(members)
    return sorted(found, key=lambda m: (-len(m), m[0]))


def unroutable_pair(cluster: Cluster) -> tuple[str, str] | None:
    """The first ordered pair of devices with no route between them, by name (``None``: every pair routes)."""
    for a in range(cluster.size):
        for b in range(cluster.size):
            if a != b and cluster.links and cluster.route_links[a][b] is None:
                return cluster.names[a], cluster.names[b]
    return None


def sub_cluster(cluster: Cluster, members: list[int]) -> Cluster:
    """The cluster of the devices ``members`` with the links and declared routes among them. A route between two
    members passes through members only (each device on it reaches both ends and is reached from them)."""
    names = {cluster.names[d] for d in members}
    links = [lk for lk in cluster.links if lk.src in names and lk.dst in names]
    routes = [r for r in cluster.routes if set(r.path) <= names]
    return Cluster([cluster.devices[d] for d in members], links, routes)
