"""Lower bounds on single-sample latency (Tarnawski et al., NeurIPS 2020, §4's invocation model).

:func:`critical_path_bound` is the closed-form rung of the latency hierarchy in
:mod:`placement_dsl.certify`: the longest path through the graph when every op runs on its
fastest allowed device and no tensor is ever transferred. Every placement's latency is at
least that: an op starts after each of its inputs is produced, takes at least its fastest
allowed time, and transfers and invocation overheads only add.
"""
from __future__ import annotations

import numpy as np

from ..errors import InfeasibleError
from ..problem import Problem


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
    for u in np.unique(unit):
        if not unit_allowed[u].any():
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
