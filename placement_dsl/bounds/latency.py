"""Lower bounds on single-sample latency (Tarnawski et al., NeurIPS 2020, §4's invocation model).

:func:`critical_path_bound` is the closed-form rung of the latency hierarchy in
:mod:`placement_dsl.certify`: the longest path through the graph when every op runs on its
fastest allowed device and no tensor is ever transferred. Every placement's latency is at
least that: an op starts after each of its inputs is produced, takes at least its fastest
allowed time, and transfers and invocation overheads only add.

:func:`route_path_latency` and :func:`energy_latency` add what every invocation schedule pays:
an edge between an accelerator's subgraph and another device's work moves its tensor through
host memory (written by the producer's subgraph at ``1 / bandwidth`` per byte, read by the
consumer's), so each edge pays the cheapest such move between the devices its ends could run
on (0 when they can share a device or both run on hosts); and each accelerator runs its
subgraphs in turn, while hosts run any number of ops at once, so the ops no host may run share
the accelerators' time between their heads and tails (:func:`~.makespan.energy_bound`).
"""
from __future__ import annotations

import numpy as np

from ..cluster import Cluster
from ..errors import InfeasibleError
from ..graph import Graph
from ..problem import Problem
from .makespan import allowed_times, energy_bound, route_path_bound


def critical_path_bound(problem: Problem) -> tuple[float, list[str]]:
    """The longest fastest-time path, in cost-model units, and the ops on it (first to last).

    "Allowed" is the problem's: pins, allowed kinds and colocation (a group runs where all its
    members may) narrow an op's devices, so the bound holds for every placement the problem
    accepts, contiguous or not, under any number of subgraphs per accelerator.

    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.cluster import Cluster
    >>> from placement_dsl.objectives import Latency
    >>> g = Graph([Op(name="a", work=2), Op(name="b", work=3), Op(name="c", work=1)], [("a", "b"), ("a", "c")])
    >>> critical_path_bound(Problem(g, Cluster.accelerators(2), Latency()))
    (5.0, ['a', 'b'])
    """
    g, c = problem.graph, problem.cluster
    times = c.times(g)  # inf where an op may not run
    unit = np.asarray(g.group_id if problem.colocation_shared else np.arange(g.n), dtype=np.int64)
    unit_allowed = np.ones((g.n, c.size), dtype=bool)
    np.logical_and.at(unit_allowed, unit, np.isfinite(times))  # a colocation unit runs where all its members may
    pinned = {int(unit[g.index[op]]) for op in problem.pins}  # a pin its group cannot follow: counted 0 below
    for u in np.unique(unit):
        if not unit_allowed[u].any() and int(u) not in pinned:
            members = [g.names[i] for i in np.flatnonzero(unit == u)]
            raise InfeasibleError(f"op(s) {members} have no device they may all run on; "
                                  "relax AllowedKinds/colocation or add a device of a suitable kind")
    allowed = unit_allowed[unit]
    for op, device in problem.pins.items():  # a pin holds the op's whole colocation unit on its device
        members = unit == unit[g.index[op]]
        allowed[members] &= np.arange(c.size) == c.index[device]
    fastest = np.where(allowed, times, np.inf).min(axis=1, initial=np.inf)
    stuck = np.flatnonzero(~np.isfinite(fastest))
    if stuck.size:  # the problem's own checks name it; a bound of "no placement" is not ours to claim
        fastest[stuck] = 0.0
    head = fastest.copy()
    back = np.full(g.n, -1)
    for v in g.topo.tolist():
        preds = g.predecessors(v)
        if preds.size:
            best = int(preds[np.argmax(head[preds])])
            back[v], head[v] = best, head[v] + head[best]
    v = int(np.argmax(head))  # a graph has at least one op
    path = [v]
    for _ in range(g.n - 1):  # a path visits each op at most once
        if back[path[-1]] < 0:
            break
        path.append(int(back[path[-1]]))
    return float(head[v]), [g.names[u] for u in reversed(path)]


def latency_transfer_table(graph: Graph, cluster: Cluster) -> np.ndarray:
    """``comm[u, d, d2]``: what moving ``u``'s output from ``d`` to ``d2`` adds to a path in the invocation model:
    the producer's write and the consumer's read, ``out_bytes * (1 / bw_d + 1 / bw_d2)`` (0 on a host's side, 0 on
    one device, 0 for an op without consumers)."""
    scale = cluster.transfer_scale
    sent = np.where(np.diff(graph.succ_ptr) > 0, graph.out_bytes, 0.0)
    comm = sent[:, None, None] * (scale[:, None] + scale[None, :])[None]
    comm[:, np.arange(cluster.size), np.arange(cluster.size)] = 0.0
    return comm


def route_path_latency(problem: Problem) -> tuple[float, str]:
    """The longest path with the invocation model's transfers (module docstring), in cost-model units."""
    g = problem.graph
    bound, v = route_path_bound(g, allowed_times(problem), latency_transfer_table(g, problem.cluster))
    return bound, f"longest path through {g.names[v]!r} with reads and writes" if g.n else "empty graph"


def energy_latency(problem: Problem) -> tuple[float, str]:
    """The accelerators' work between heads and tails, hosts free (module docstring), in cost-model units."""
    g, c = problem.graph, problem.cluster
    kinds = np.array([d.kind for d in c.devices])
    bound = energy_bound(g, allowed_times(problem), latency_transfer_table(g, c), free=c.host, kinds=kinds)
    return bound, f"work no host may run over {int((~c.host).sum())} accelerators with heads and tails"
