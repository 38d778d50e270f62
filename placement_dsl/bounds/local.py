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
from ..evaluate import MemoryMode, Objective, evaluate
from ..graph import Graph, unique_pairs
from ..placement import Placement
from ..problem import Problem
from ..structure import cut_ops
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


def _stage_times(graph: Graph, cluster: Cluster) -> np.ndarray:
    """Each op's time on one of the identical stages, a pin left out: the bound holds over the placements that
    ignore the graph's pins, a superset of those that keep them (``cluster.times`` puts a pinned op off every
    other device at ``inf``, an infinite capacity in the cut's flow graph)."""
    dev = cluster.devices[0]
    return graph.work(dev.kind) / dev.speed


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
    t = _stage_times(graph, cluster)
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
    return part_loads(graph, cluster, graph.group_id)


def part_loads(graph: Graph, cluster: Cluster, unit: np.ndarray) -> np.ndarray:
    """The load of the part holding each op, the parts given by a label per op (from 0) that keeps each colocation
    group together (``O(n + m)``): each an upper bound on its ops' stage-cut values."""
    size = max(graph.n, int(np.max(unit, initial=-1)) + 1)
    t = _stage_times(graph, cluster)
    scale = float(cluster.transfer_scale[0])
    load = np.bincount(unit, weights=t, minlength=size)[unit]
    sent = graph.out_bytes[graph.src] > 0  # each net (a producer and its consumers) as (producer, unit) pairs
    producer = np.concatenate([graph.src[sent], np.unique(graph.src[sent])])
    pairs = unique_pairs(producer, unit[np.concatenate([graph.dst[sent], np.unique(graph.src[sent])])]).T
    units = np.bincount(pairs[0], minlength=size)  # the units each net touches
    crossed = units[pairs[0]] > 1  # each unit holding a member holds some but not all: the tensor crosses it
    paid = np.bincount(pairs[1][crossed], weights=graph.out_bytes[pairs[0][crossed]] * scale, minlength=size)
    load = load + paid[unit]
    mem = np.bincount(unit, weights=graph.param_bytes + graph.activation_bytes, minlength=size)[unit]
    memory = cluster.devices[0].memory
    if math.isfinite(memory):
        load += np.maximum(mem - memory, 0.0) / cluster.devices[0].bandwidth
    return load


def stage_cut_bound(graph: Graph, cluster: Cluster, overflow: bool = False, *, floor: float | None = None,
                    deadline: Deadline | None = None, ceiling: np.ndarray | None = None,
                    beat: float = -math.inf) -> tuple[float, int | None]:
    """``max_v min_{S ∋ v} load(S)`` (module doc) and the op attaining it (``None``: the simple bound did).

    ``overflow`` says whether memory over capacity is streamed (the ``bottleneck`` cost model);
    then the ``lam = 1`` cut is tried beside ``lam = 0``. ``floor`` (default: Lemma 3.3) is
    a bound already known: ops that cannot beat it are not cut. Colocation groups (the
    graph's ``group`` field) stay on one side. Past ``deadline`` no further op is cut: the
    maximum over the ops cut so far is still a bound. Each op's value is bounded from above
    (:func:`upper_values`: its smallest stage, its segment between cut ops, and ``ceiling``, e.g.
    :func:`ceilings`), and ops whose value cannot exceed ``beat`` (a bound known elsewhere, not returned) are not
    cut either.

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
    alone = upper_values(graph, cluster, ceiling)
    order = np.lexsort((-single_loads(graph, cluster), -alone))  # ties: the largest smallest stage first
    for lam in lams:
        G = _flow_graph(graph, cluster, lam)
        offset = lam * cluster.devices[0].memory / cluster.devices[0].bandwidth if lam else 0.0
        for v in order.tolist():
            if alone[v] <= max(best, beat) or (deadline is not None and deadline.expired()):
                break
            G.add_edge("s", v)
            value, _ = _networkx().maximum_flow(G, "s", "t")
            G.remove_edge("s", v)
            value = value * (1 - SAFETY) - offset
            if value > best:
                best, who = value, v
    return float(best), who


def segment_loads(graph: Graph, cluster: Cluster) -> np.ndarray:
    """The least load of a part holding each op, the graph cut at the ops comparable with all others
    (:func:`~placement_dsl.structure.cut_ops`, each closing the part before it) whose tensors are at most a
    quantile of theirs (:data:`CUT_QUANTILES`), colocation groups joined to the part of their first op: on a
    transformer a layer between its residual adds, far below a single op that reads and writes a wide tensor
    (GPT-3's GELU ops: 18.35 alone, the layer's stage 6.68)."""
    cuts = cut_ops(graph)
    best = np.full(graph.n, np.inf)
    if not cuts.size:
        return best
    pos = np.empty(graph.n, dtype=np.int64)
    pos[graph.topo] = np.arange(graph.n)
    size = graph.out_bytes[cuts]
    for most in np.unique(np.quantile(size, CUT_QUANTILES)).tolist():
        ends = np.sort(pos[cuts[size <= most]])
        label = np.searchsorted(ends, pos, side="left")  # a part ends with its cut op
        first = np.full(graph.n + 1, graph.n, dtype=np.int64)
        np.minimum.at(first, graph.group_id, label)  # each colocation group into its first op's part
        best = np.minimum(best, part_loads(graph, cluster, first[graph.group_id]))
    return best


CUT_QUANTILES = (0.0, 0.25, 0.5, 1.0)
"""The sizes of the cut ops' tensors at which :func:`segment_loads` cuts the graph (each a partition)."""


def upper_values(graph: Graph, cluster: Cluster, ceiling: np.ndarray | None = None) -> np.ndarray:
    """Each op's stage-cut value from above: the least of its smallest stage's load, its segment's and
    ``ceiling``'s."""
    upper = np.minimum(single_loads(graph, cluster), segment_loads(graph, cluster))
    return upper if ceiling is None else np.minimum(upper, ceiling)


def ceilings(placement: Placement, model: Any = None) -> np.ndarray | None:
    """Each op's device load in a valid ``placement`` (``None`` for a replicated one, whose loads are per replica):
    a stage holding the op, so at least its cheapest stage's load (the cost model's load counts what
    ``load(S)`` does and more)."""
    if placement.replicated:
        return None
    loads = np.array([d.load for d in evaluate(placement, model).devices])
    return loads[placement.assign]


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


def problem_bound(problem: Problem, deadline: Deadline | None = None, best: Placement | None = None,
                  beat: float = -math.inf) -> tuple[float, str]:
    """The stage-cut bound of ``problem`` (overflow counted when its memory is soft) and a note naming the op;
    the ops not cut by ``deadline`` are left out, and so are those whose stage in the valid placement ``best``
    or whose smallest stage cannot load more than ``beat`` (:func:`stage_cut_bound`)."""
    g = problem.graph
    ceiling = None if best is None else ceilings(best, problem.cost_model())
    bound, op = stage_cut_bound(g, problem.cluster, overflow=problem.cost_model().memory is MemoryMode.OVERFLOW,
                                deadline=deadline, ceiling=ceiling, beat=beat)
    if op is None and beat > bound:
        return bound, f"Lemma 3.3: no op's cheapest stage can beat {beat:.6g}"
    return bound, ("Lemma 3.3: no op's cheapest stage beats it" if op is None
                   else f"the cheapest stage holding {g.names[op]!r}")


def problem_reach(problem: Problem, best: Placement | None = None) -> float:
    """The most :func:`problem_bound` can be: the largest load of an op's smallest stage or, given a valid
    placement ``best``, of the device holding it there (``O(n + m)``)."""
    g = problem.graph
    ceiling = None if best is None else ceilings(best, problem.cost_model())
    most = float(np.max(upper_values(g, problem.cluster, ceiling), initial=0.0))
    return max(most, simple_lower_bound(g, problem.cluster))
