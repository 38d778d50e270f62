"""Single-sample latency in Tarnawski et al.'s invocation model (NeurIPS 2020, §4 and §4.1).

An accelerator holding a *contiguous* set ``S`` (Def. 3.1) is invoked once: it starts when
every input tensor of ``S`` is in host memory (Fig. 3, constraint 6), reads them, computes
and writes its outputs back (7); each tensor is paid once per boundary. A host (CPU) op runs
as soon as its predecessors have finished and takes its own time (8, 9); there are as many
CPU cores as the graph is wide, so host ops never wait for a core.

A non-contiguous accelerator set is cut into contiguous *subgraphs* (§4.1, Fig. 4; the
reference code's ``reworkSplitIntoContiguous``): op ``v`` of accelerator ``a`` lands in
subgraph ``1 + r``, where ``r`` is the largest number of times a path ending in ``v`` leaves
``a``'s ops and comes back. Each subgraph is contiguous, every edge between two subgraphs of
``a`` goes to a higher index, and a contiguous set stays one subgraph. Each subgraph is its
own invocation; the subgraphs of one accelerator run one at a time in index order, which is
consistent with the DAG (Fig. 4, constraint 14). The latency is the longest path through the
invocations weighted by their durations. When invocations of different accelerators wait on
each other's outputs (their quotient has a cycle) no schedule exists and the latency is ``inf``.

Every pass is linear in the graph (times the number of accelerators for the cut).

On a cluster with links (:class:`~placement_dsl.cluster.Cluster` ``links``) tensors do not go
through host memory: an invocation is its computation, and a tensor ``u`` needed by an
invocation on another device ``d`` moves once to ``d`` over the route, taking the route's
latency plus ``out_bytes / bottleneck`` (:func:`~placement_dsl.schedule.transfer_durations`,
the makespan's transfer), from the end of ``u``'s invocation; the invocation starts when its
inputs have arrived. Transfers run in parallel unless a congestion mode
(:class:`~placement_dsl.congestion.Congestion`: ``port``, ``channel``, ``link``) serializes
them; then the invocations are taken in order of their earliest start and each books its
inputs' transfers at the first time their ports, channel or links are free.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace

import numpy as np

from .congestion import Congestion, Resource, TransferResources
from .graph import Graph, unique_pairs
from .placement import Placement
from .schedule import Timeline, earliest_free, transfer_durations


@dataclass(frozen=True)
class Invocations:
    """The invocation schedule of a placement (Tarnawski Fig. 4 with the subgraphs of §4.1).

    Attributes
    ----------
    latency
        Latest finish time (``inf`` when no invocation order exists).
    finish
        Per op, the time its output is in host memory (its subgraph's finish on an accelerator).
    subgraphs
        Per device, the number of contiguous subgraphs (invocations); 0 on hosts and idle devices.
    level
        Per op, its subgraph's index on its accelerator (1, 2, ...); 0 on host devices.
    blocked
        Labels of invocations on a cycle (``"acc0#2"`` = subgraph 2 of acc0, host ops by name);
        empty when a schedule exists.
    waiting
        How many of the ``invocations`` can never start (0 when a schedule exists).
    invocations
        Number of invocations: subgraphs plus host ops.
    """

    latency: float
    finish: np.ndarray
    subgraphs: np.ndarray
    level: np.ndarray
    blocked: tuple[str, ...] = ()
    waiting: int = 0
    invocations: int = 0


# ---------------------------------------------------------------------------- subgraphs
def subgraph_levels(p: Placement) -> np.ndarray:
    """Index (1, 2, ...) of the contiguous subgraph of its accelerator each op falls in; 0 on hosts.

    Tarnawski §4.1: ``level_a(v) = max(1, max_u level_a(u) + [u not on a])`` over the
    predecessors ``u`` of an op ``v`` on accelerator ``a``, and ``max_u level_a(u)`` for ``v``
    elsewhere: the most runs of ``a``'s ops on a path ending in ``v`` (:func:`run_levels` over the
    accelerators). A contiguous set gets level 1 throughout.
    """
    return run_levels(p.graph, p.assign, ~p.cluster.host)


def run_levels(g: Graph, assign: np.ndarray, counted: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Per op, the most runs of its device's ops on a path ending in it (1, 2, ...; :func:`subgraph_levels`), for the
    devices ``counted`` marks; 0 on the others' ops. With ``keep`` (an op mask) only the kept ops and the edges
    between them are paths, the others get 0: the forward pass alone, for the virtual stages of a training graph.
    The ops of one device and level form a set no path leaves and comes back to, and every edge between two levels of
    a device goes to the higher one.

    One pass in topological order carrying a row of levels (one per counted device) per op; the rows merge with
    ``map(max, ...)``. The recursion is sequential along every path, and on deep operator graphs this pass is faster
    than array calls per depth layer."""
    acc = np.flatnonzero(counted)
    col = np.full(len(counted), -1, dtype=np.int64)
    col[acc] = np.arange(acc.size)
    mine = col[assign].tolist()
    zero = [0] * acc.size
    rows: list[list[int]] = [zero] * g.n
    ptr, preds = g.pred_ptr.tolist(), g.pred_idx.tolist()
    kept = [True] * g.n if keep is None else np.asarray(keep, dtype=bool).tolist()
    out = [0] * g.n
    for v in g.topo.tolist():
        if not kept[v]:
            continue
        row, a = zero, mine[v]
        ins = [u for u in preds[ptr[v]:ptr[v + 1]] if kept[u]]
        for u in ins:
            row = list(map(max, row, rows[u]))
        if a >= 0:
            out[v] = max(1, row[a], *(rows[u][a] + 1 for u in ins if mine[u] != a))
            row = row.copy() if row is zero else row
            row[a] = out[v]
        rows[v] = row
    return np.asarray(out, dtype=np.int64)


def _units(p: Placement, level: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Invocation of each op, subgraphs per device and the first invocation id of each device.

    Subgraphs come first (device by device, in index order), then one invocation per host op.
    """
    c = p.cluster
    host = c.host[p.assign]
    pieces = np.zeros(c.size, dtype=np.int64)
    np.maximum.at(pieces, p.assign[~host], level[~host])
    first = np.concatenate(([0], np.cumsum(pieces))).astype(np.int64)
    unit = first[p.assign] + level - 1
    hosted = np.flatnonzero(host)
    unit[hosted] = first[-1] + np.arange(hosted.size)
    return unit, pieces, first


def _durations(p: Placement, unit: np.ndarray, n_units: int) -> np.ndarray:
    """``in + compute + out`` of each subgraph (Fig. 3, constraint 7); a host op's own time. On a
    cluster with links the transfers move over routes instead: an invocation is its computation."""
    g, c = p.graph, p.cluster
    dur = np.bincount(unit, weights=p.op_times, minlength=n_units)
    if c.links:
        return dur
    scale = np.zeros(n_units)
    scale[unit] = c.transfer_scale[p.assign]  # 0 for host ops
    cross = unit[g.src] != unit[g.dst]
    prod, recv = g.src[cross], unit[g.dst[cross]]
    if prod.size:
        pairs = unique_pairs(prod, recv)  # each tensor once per subgraph
        dur += np.bincount(pairs[:, 1], weights=g.out_bytes[pairs[:, 0]] * scale[pairs[:, 1]], minlength=n_units)
        sent = np.unique(prod)
        dur += np.bincount(unit[sent], weights=g.out_bytes[sent] * scale[unit[sent]], minlength=n_units)
    return dur


def _unit_edges(p: Placement, unit: np.ndarray, pieces: np.ndarray) -> np.ndarray:
    """Edges between invocations: data dependencies, and subgraph ``j -> j + 1`` of each accelerator."""
    g = p.graph
    cross = unit[g.src] != unit[g.dst]
    data = np.stack([unit[g.src[cross]], unit[g.dst[cross]]], axis=1)
    owner = np.repeat(np.arange(pieces.size), pieces)  # device of each subgraph, in id order
    ids = np.flatnonzero(owner[:-1] == owner[1:])
    chain = np.stack([ids, ids + 1], axis=1)
    both = np.concatenate([data, chain]).astype(np.int64)
    return unique_pairs(both[:, 0], both[:, 1])


# ---------------------------------------------------------------------------- schedule
def _longest_paths(n_units: int, edges: np.ndarray, dur: np.ndarray,
                   delay: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Finish time of each invocation (start = latest finish of its predecessors, plus the edge's
    ``delay`` when given) and how many were scheduled.

    Kahn's algorithm one invocation at a time: the invocation graph is as deep as the op
    graph where host ops chain, so per-layer array calls would cost more than this loop.
    """
    src, dst = edges[:, 0], edges[:, 1]
    indeg = np.bincount(dst, minlength=n_units).tolist()
    order = np.argsort(src, kind="stable")
    heads = dst[order].tolist()
    lag = (np.zeros(len(edges)) if delay is None else delay[order]).tolist()
    ptr = np.concatenate(([0], np.cumsum(np.bincount(src, minlength=n_units)))).tolist()
    start, took, finish = [0.0] * n_units, dur.tolist(), [math.inf] * n_units
    stack = [u for u in range(n_units) if indeg[u] == 0]
    done = 0
    while stack:
        a = stack.pop()
        done += 1
        finish[a] = end = start[a] + took[a]
        for k in range(ptr[a], ptr[a + 1]):
            b = heads[k]
            start[b] = max(start[b], end + lag[k])
            indeg[b] -= 1
            if indeg[b] == 0:
                stack.append(b)
    return np.asarray(finish, dtype=float), done


def _routed_inputs(p: Placement, unit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The tensors that move over routes: ``(producer, consumer invocation, receiving device, duration)``,
    one row per producer and consumer invocation on another device."""
    g, a = p.graph, p.assign
    cross = a[g.src] != a[g.dst]
    if not cross.any():
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty, np.empty(0)
    pairs = unique_pairs(g.src[cross], unit[g.dst[cross]])
    prod, consumer = pairs[:, 0], pairs[:, 1]
    where = np.zeros(int(unit.max()) + 1, dtype=np.int64)
    where[unit] = a  # the device of each invocation
    recv = where[consumer]
    return prod, consumer, recv, transfer_durations(g, p.cluster, prod, a[prod], recv)


def _edge_delays(p: Placement, unit: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Per invocation edge, the longest transfer of a tensor it carries between devices (0 on one device)."""
    prod, consumer, _, dur = _routed_inputs(p, unit)
    delay = np.zeros(len(edges))
    if prod.size:
        n = int(max(edges.max(initial=0), unit.max(initial=0))) + 1
        pos = {k: i for i, k in enumerate((edges[:, 0] * n + edges[:, 1]).tolist())}
        at = np.array([pos[k] for k in (unit[prod] * n + consumer).tolist()], dtype=np.int64)
        np.maximum.at(delay, at, dur)
    return delay


def _congested(p: Placement, unit: np.ndarray, n_units: int, edges: np.ndarray, dur: np.ndarray,
               congestion: Congestion) -> tuple[np.ndarray, int]:
    """Finish times of the invocations with their inputs' transfers serialized by ``congestion``.

    Invocations whose predecessors have finished are taken by earliest possible start (then id);
    each books its inputs' transfers (by the producer's finish, then index; a tensor moves once
    per receiving device) at the earliest time the ports, channel or links of the move are free.
    """
    c = p.cluster
    prod, consumer, recv, tdur = _routed_inputs(p, unit)
    inputs: dict[int, list[int]] = {}
    for k, b in enumerate(consumer.tolist()):
        inputs.setdefault(b, []).append(k)
    src, dst = edges[:, 0].tolist(), edges[:, 1].tolist()
    preds: list[list[int]] = [[] for _ in range(n_units)]
    succs: list[list[int]] = [[] for _ in range(n_units)]
    for a, b in zip(src, dst):
        preds[b].append(a)
        succs[a].append(b)
    indeg = [len(x) for x in preds]
    finish = [math.inf] * n_units
    lines: dict[Resource, Timeline] = {}
    arrive: dict[tuple[int, int], float] = {}
    dev = p.assign

    held = TransferResources(c, congestion)

    def resources(a: int, d: int) -> list[Timeline]:
        return [lines.setdefault(r, Timeline()) for r in held(a, d)]

    heap = [(0.0, b) for b in range(n_units) if indeg[b] == 0]
    heapq.heapify(heap)
    done = 0
    while heap:
        _, b = heapq.heappop(heap)
        done += 1
        start = max((finish[a] for a in preds[b]), default=0.0)
        for k in sorted(inputs.get(b, ()), key=lambda k: (finish[unit[prod[k]]], int(prod[k]))):
            u, d = int(prod[k]), int(recv[k])
            key = (u, d)
            if key not in arrive:
                t = finish[unit[u]]
                if math.isfinite(tdur[k]):
                    where = resources(int(dev[u]), d)
                    t = earliest_free(where, t, float(tdur[k]))
                    for line in where:
                        line.book(t, float(tdur[k]))
                arrive[key] = t + float(tdur[k])
            start = max(start, arrive[key])
        finish[b] = start + float(dur[b])
        for s in succs[b]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready = max(finish[a] for a in preds[s])
                heapq.heappush(heap, (ready, s))
    return np.asarray(finish, dtype=float), done


def _label(p: Placement, u: int, unit: np.ndarray, first: np.ndarray) -> str:
    """``"acc0#2"`` for subgraph 2 of acc0; ``"op 'x' on cpu0"`` for a host op."""
    if u < first[-1]:
        d = int(np.searchsorted(first, u, side="right") - 1)
        return f"{p.cluster.names[d]}#{u - first[d] + 1}"
    v = int(np.flatnonzero(unit == u)[0])
    return f"op {p.graph.names[v]!r} on {p.cluster.names[p.assign[v]]}"


def _cycle(p: Placement, edges: np.ndarray, finish: np.ndarray, unit: np.ndarray,
           first: np.ndarray) -> tuple[str, ...]:
    """Labels of one cycle among the invocations that were never scheduled."""
    import networkx as nx

    stuck = ~np.isfinite(finish)
    keep = stuck[edges[:, 0]] & stuck[edges[:, 1]]
    try:
        cyc = nx.find_cycle(nx.DiGraph(edges[keep].tolist()))
    except nx.NetworkXNoCycle:  # pragma: no cover - unscheduled invocations always contain a cycle
        return ()
    return tuple(_label(p, int(a), unit, first) for a, _ in cyc)


def _schedule(p: Placement, level: np.ndarray,
              congestion: Congestion = Congestion.NONE) -> tuple[Invocations, np.ndarray, np.ndarray, np.ndarray]:
    """Invocations for given subgraph levels: durations, dependencies, longest paths.

    Also returns what naming a cycle needs: the invocation edges, each op's invocation and
    each device's first invocation id.
    """
    unit, pieces, first = _units(p, level)
    n_units = int(first[-1]) + int(p.cluster.host[p.assign].sum())
    edges = _unit_edges(p, unit, pieces)
    dur = _durations(p, unit, n_units)
    if not p.cluster.links:
        finish, done = _longest_paths(n_units, edges, dur)
    elif congestion is Congestion.NONE:
        finish, done = _longest_paths(n_units, edges, dur, _edge_delays(p, unit, edges))
    else:
        finish, done = _congested(p, unit, n_units, edges, dur, congestion)
    latency = math.inf if done < n_units else float(finish.max()) if n_units else 0.0
    return Invocations(latency, finish[unit], pieces, level, (), n_units - done, n_units), edges, unit, first


def invocations(p: Placement, congestion: Congestion | str = Congestion.NONE) -> Invocations:
    """The invocation schedule of any placement: contiguous subgraphs, their order, the latency.

    ``congestion`` serializes transfers over the routes of a cluster with links (module
    docstring); without links it changes nothing (an invocation's reads and writes already run
    one after another).

    One invocation per accelerator is tried first: when those invocations can be ordered,
    every accelerator's set is contiguous (a non-contiguous set would wait on itself) and
    the schedule is Fig. 3's. Otherwise the sets are cut by :func:`subgraph_levels` (§4.1).

    Examples
    --------
    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.cluster import Cluster
    >>> g = Graph([Op(name=n, work=1, out_bytes=1) for n in "abc"], [("a", "b"), ("b", "c")])
    >>> s = invocations(Placement(g, Cluster.stages(2), [0, 1, 0]))  # stage0 holds a and c
    >>> s.subgraphs.tolist(), s.latency  # {a}: 1 + 1 out; {b}: 1 in + 1 + 1 out; {c}: 1 in + 1
    ([2, 1], 7.0)
    """
    congestion = Congestion(congestion)
    whole = (~p.cluster.host[p.assign]).astype(np.int64)  # level 1 on accelerators, 0 on hosts
    schedule, edges, unit, first = _schedule(p, whole, congestion)
    if schedule.waiting:
        level = subgraph_levels(p)
        if (level > 1).any():  # else contiguous sets wait on each other: no order exists
            schedule, edges, unit, first = _schedule(p, level, congestion)
    if schedule.waiting:
        finish = np.full(schedule.invocations, math.inf)
        finish[unit] = schedule.finish
        schedule = replace(schedule, blocked=_cycle(p, edges, finish, unit, first))
    return schedule


def invocation_spans(p: Placement) -> list[tuple[int, str, float, float]]:
    """``(device index, label, start, end)`` of every invocation of :func:`invocations`' schedule: a subgraph
    (``"acc0#2"``: reads, computes, writes) or a host op, in start order; empty when no order exists."""
    schedule = invocations(p)
    if schedule.waiting:
        return []
    unit, pieces, first = _units(p, schedule.level)
    n_units = schedule.invocations
    dur = _durations(p, unit, n_units)
    finish, _ = _longest_paths(n_units, _unit_edges(p, unit, pieces), dur)
    device = np.empty(n_units, dtype=np.int64)
    device[unit] = p.assign
    spans = [(int(device[u]), _label(p, u, unit, first), float(finish[u] - dur[u]), float(finish[u]))
             for u in range(n_units)]
    return sorted(spans, key=lambda s: (s[2], s[0]))
