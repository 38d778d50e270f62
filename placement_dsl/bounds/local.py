"""The stage-cut bound: the cheapest stage any op can sit on, by one minimum cut per op.

Every op ``v`` runs on some device, whose ops ``S`` (``v in S``) cost it (Archer et al. eq. 1-3,
:mod:`placement_dsl.evaluate`, communication not overlapped)::

    load(S) = sum_{u in S} t_u + sum_{p: net(p) cut by S} c_p + (mem(S) - M)^+ / bw

where ``net(p)`` is producer ``p`` with its consumers, *cut* when some of its members are in
``S`` and some are not (the tensor leaves ``S`` if ``p`` is in it, else enters it: once either
way), and ``c_p = out_bytes(p) / bw``. Hence ``OPT >= max_v min_{S ∋ v} load(S)``, for every
placement on identical devices, whatever their order. With the overflow replaced by its
lower bound ``lam * (mem(S) - M) / bw`` (``lam`` in ``{0, 1}``) the inner minimum is a
minimum s-t cut (Lawler's hyperedge gadget): source ``-> v`` (infinite), ``u -> sink``
(``t_u + lam * mem_u / bw``), and for each net two auxiliary nodes ``a -> b`` of capacity
``c_p`` with member ``-> a`` and ``b ->`` member (infinite). A cut separating members pays
``c_p`` once; a colocation group is joined by infinite arcs both ways.

``min_{S ∋ v} load(S) <= load(G_v)``, with ``G_v`` the op's colocation group (``{v}`` without one), so ops
are visited by ``load(G_v)`` descending and the search stops when no remaining op can beat the best bound found.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..cluster import Cluster
from ..deadline import Deadline
from ..evaluate import MemoryMode, Objective
from ..graph import Graph
from ..placement import Placement
from ..problem import Problem
from .simple import simple_lower_bound

if TYPE_CHECKING:  # networkx (about 0.3 s to import) loads where a flow is solved, not with the certificate's levels
    import networkx as nx

SAFETY = 1e-12  # relative shave of a max-flow value computed in floating point


def stage_cut_applies(graph: Graph, cluster: Cluster, overlap: str = "none") -> str | None:
    """``None`` when :func:`stage_cut_bound` bounds the problem, else why not."""
    if overlap != "none":
        return f"the stage-cut bound sums compute and transfers; overlap {overlap!r} takes their maximum"
    if cluster.host.any() or cluster.routed or len(cluster.homogeneous_groups()) != 1:
        return "the stage-cut bound needs identical non-host devices without routes"
    return None


def _nets(graph: Graph) -> list[tuple[int, np.ndarray]]:
    """``(producer, members)`` of every tensor with a consumer."""
    out: list[tuple[int, np.ndarray]] = []
    for p in range(graph.n):
        consumers = graph.successors(p)
        if len(consumers) and graph.out_bytes[p] > 0:
            out.append((p, np.unique(np.concatenate([[p], consumers]))))
    return out


def _networkx() -> Any:
    import networkx

    return networkx


def _flow_graph(graph: Graph, cluster: Cluster, lam: float) -> nx.DiGraph:
    dev = cluster.devices[0]
    t = cluster.times(graph)[:, 0]
    scale = float(cluster.transfer_scale[0])
    G = _networkx().DiGraph()
    node_cost = t + (lam * (graph.param_bytes + graph.activation_bytes) / dev.bandwidth if lam else 0.0)
    for u in range(graph.n):
        G.add_edge(u, "t", capacity=float(node_cost[u]))
    for p, members in _nets(graph):
        a, b = ("a", p), ("b", p)
        G.add_edge(a, b, capacity=float(graph.out_bytes[p] * scale))
        for x in members.tolist():
            G.add_edge(x, a)  # no capacity attribute: infinite
            G.add_edge(b, x)
    for members in graph.groups:
        for x, y in zip(members[:-1].tolist(), members[1:].tolist()):
            G.add_edge(x, y)
            G.add_edge(y, x)
    return G


def single_loads(graph: Graph, cluster: Cluster) -> np.ndarray:
    """The load of the smallest stage holding each op: the op with its colocation group (``load({v})`` for an op
    without one), an upper bound on its stage-cut value."""
    t = cluster.times(graph)[:, 0]
    scale = float(cluster.transfer_scale[0])
    unit = graph.group_id  # an op's colocation group, or the op alone
    load = np.bincount(unit, weights=t, minlength=graph.n)[unit]
    for p, members in _nets(graph):
        touched = np.unique(unit[members])
        if touched.size > 1:  # each unit holding a member holds some but not all: the tensor crosses its boundary
            load[np.isin(unit, touched)] += graph.out_bytes[p] * scale
    mem = np.bincount(unit, weights=graph.param_bytes + graph.activation_bytes, minlength=graph.n)[unit]
    memory = cluster.devices[0].memory
    if math.isfinite(memory):
        load += np.maximum(mem - memory, 0.0) / cluster.devices[0].bandwidth
    return load


def stage_cut_bound(graph: Graph, cluster: Cluster, overflow: bool = False, *,
                    floor: float | None = None, deadline: Deadline | None = None) -> tuple[float, int | None]:
    """``max_v min_{S ∋ v} load(S)`` (module doc) and the op attaining it (``None``: the simple bound did).

    ``overflow`` says whether memory over capacity is streamed (the ``bottleneck`` cost model);
    then the ``lam = 1`` cut is tried beside ``lam = 0``. ``floor`` (default: Lemma 3.3) is
    a bound already known: ops that cannot beat it are not cut. Colocation groups (the
    graph's ``group`` field) stay on one side. Past ``deadline`` no further op is cut: the
    maximum over the ops cut so far is still a bound.

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name="a", work=1, out_bytes=5), Op(name="b", work=4, out_bytes=0)], [("a", "b")])
    >>> bound, op = stage_cut_bound(g, Cluster.stages(2))  # b alone reads 5; with a it costs 1 + 4
    >>> round(bound, 9), g.names[op]
    (5.0, 'b')
    """
    why = stage_cut_applies(graph, cluster)
    if why:
        raise ValueError(why)
    best = simple_lower_bound(graph, cluster) if floor is None else floor
    who: int | None = None
    lams = (0.0, 1.0) if overflow and math.isfinite(cluster.devices[0].memory) else (0.0,)
    alone = single_loads(graph, cluster)
    order = np.argsort(-alone, kind="stable")
    for lam in lams:
        G = _flow_graph(graph, cluster, lam)
        offset = lam * cluster.devices[0].memory / cluster.devices[0].bandwidth if lam else 0.0
        for v in order.tolist():
            if alone[v] <= best or (deadline is not None and deadline.expired()):
                break
            G.add_edge("s", v)
            value, _ = _networkx().maximum_flow(G, "s", "t")
            G.remove_edge("s", v)
            value = value * (1 - SAFETY) - offset
            if value > best:
                best, who = value, v
    return float(best), who


def cheapest_stage(graph: Graph, cluster: Cluster, v: int) -> Placement:
    """A placement whose first device holds a minimum-cost set ``S ∋ v`` (``lam = 0``) and the second the rest:
    a witness that the cut's value is attained by a real stage (for tests)."""
    G = _flow_graph(graph, cluster, 0.0)
    G.add_edge("s", v)
    _, (side, _) = _networkx().minimum_cut(G, "s", "t")
    assign = np.array([0 if u in side else 1 for u in range(graph.n)], dtype=np.int64)
    return Placement(graph, cluster, assign)


def problem_applies(problem: Problem) -> str | None:
    """``None`` when the stage-cut level bounds ``problem`` (a max load, identical stages, no overlap), else why not."""
    model = problem.cost_model()
    if model.objective is not Objective.MAX_LOAD:
        return f"the stage-cut bound bounds a max load, not {model.objective.value!r}"
    return stage_cut_applies(problem.graph, problem.cluster, model.overlap.value)


def problem_bound(problem: Problem, deadline: Deadline | None = None) -> tuple[float, str]:
    """The stage-cut bound of ``problem`` (overflow counted when its memory is soft) and a note naming the op;
    the ops not cut by ``deadline`` are left out."""
    g = problem.graph
    bound, op = stage_cut_bound(g, problem.cluster, overflow=problem.cost_model().memory is MemoryMode.OVERFLOW,
                                deadline=deadline)
    return bound, ("Lemma 3.3: no op's cheapest stage beats it" if op is None
                   else f"the cheapest stage holding {g.names[op]!r}")
