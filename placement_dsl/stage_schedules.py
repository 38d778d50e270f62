"""A placement's virtual stages, their task times from the cost model, and an event simulator of rank orders.

Virtual stages (:func:`virtual_stages`): the forward ops a device holds split by their level on it
(:func:`~placement_dsl.invocation.run_levels` over the forward pass: the most runs of the device's ops on
a path ending in the op, Tarnawski §4.1's subgraphs); each level is one stage, whether or not edges of
the device join its ops (two branches of a DAG side by side on one device are one stage, not two), the
stages ordered by the forward data flow, where it leaves a choice by the earliest round-robin stage of
their ops (below). A device that holds stages ``0`` and ``2`` of a chain thus
holds two virtual stages, as interleaved 1F1B wants. A level is a set no path leaves and comes back
to, but the levels of two devices may still feed each other (``a -> b`` and ``b' -> a'``, ``a, a'`` on
one device and ``b, b'`` on another): the levels on such a cycle are cut by each op's earliest stage in torch's
round-robin layout (the least stage of its device no earlier than its inputs', later than another
device's), which no cycle of parts survives: it grows along every edge between devices and falls
along none. A backward op belongs to the stage of the forward ops of its colocation group (an op and its gradient). Under a
schedule whose rank map folds (ZBV) each device is one stage's slot: its ops are one stage whatever
their order in the graph, and the stages go in a topological order of the device graph, ties by
device number.

Task times (:func:`stage_times`): the cost model's per-device loads of a cluster with one copy
of each device per stage (:func:`placement_dsl.evaluate.device_costs`): a stage pays its compute
and its transfers in and out as its device would, except a tensor between two stages of one rank
(ZBV's turn), which the runtime hands over in its process. The backward splits into the weight gradient
``W`` (``weight_share`` of each backward op's compute; by default half of it for an op with
parameters, none for one without, the package's ``backward = 2 x forward`` rule) and the input
gradient ``I`` (the rest, with the backward's transfers). A stage's forward and backward pay the cost
model's ``task_overhead`` once each, as a device's passes do; under a split backward (``zb-h1``, ``zbv``)
its ``W`` is an action of its own and pays it too.

Links (:func:`stage_transfers`): on a cluster with links a tensor between stages of two devices is also a message
over the links of its route (:class:`~placement_dsl.congestion.TransferResources`), each hop a task on its link
(:class:`~placement_dsl.pipeline_orders.StageTransfer`), as the cost model loads links
(:func:`placement_dsl.evaluate.link_loads`); the stages still pay their transfers as their devices do (on a routed
cluster at the route's bandwidth). Each link's latency is the hop's lag (:class:`~placement_dsl.pipeline_orders.StageTransfer`
``latencies``): its bytes reach the next hop or the reader that long after the hop ends, while the link carries its
next hop; the steady state, a link's occupancy, is unchanged by it.

Memory (:func:`stage_memory`): :class:`~placement_dsl.training.TrainingMemorySpec`'s count per virtual
stage: a stage ``s`` holds ``state * param_s`` and, per micro-batch in flight, ``act_s + in_s``
(its forward ops' ``out_bytes + activation_bytes`` and the forward tensors it receives); the
micro-batches in flight follow the rank's order (:func:`placement_dsl.pipeline_orders.stash_peaks`),
so a device holds ``sum_s state * param_s + max_t sum_s n_s(t) (act_s + in_s)`` over its stages; with
``recompute`` only the inputs are stashed, ``n_s(t) in_s``, plus one micro-batch's ``act_s + in_s`` rebuilt
at a time (the largest of the device). Under a folded rank map (ZBV, :func:`stage_ranks`) a rank's
devices are its stages' slots, each checked against its own memory: give each its share of the rank's
(half a GPU each); the sum of the slots' peaks is never below the rank's peak. The spec's ``schedule`` and ``microbatches`` are not read: the order
and ``m`` given are.

Simulator (:func:`simulate_orders`): every rank runs its order
(:func:`placement_dsl.pipeline_orders.rank_orders`) one task at a time, each as soon as the rank
is free and its inputs are done: ``F(s, j)`` after ``F(s-1, j)``; ``B``/``I(s, j)`` after ``F(s, j)``
and ``B``/``I(s+1, j)``; ``W(s, j)`` after ``I(s, j)``; a rank waits for its next task rather than
reorder; with links, a message's first hop after the task that made it, each next hop after the one before, the
task reading it after its last hop, and each link carries its hops one at a time in a fixed order
(:meth:`~placement_dsl.pipeline_orders.TaskGraph.link_orders`).
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .cluster import Cluster, Link
from .congestion import Congestion, TransferResources
from .errors import SpecError
from .graph import PINNED, Graph
from .invocation import run_levels
from .pipeline_orders import (
    FOLDS,
    SPLIT,
    Action,
    StageTimes,
    StageTransfer,
    TaskGraph,
    check_round_robin,
    layout,
    rank_orders,
    stash_peaks,
)
from .placement import Placement
from .training import TrainingMemorySpec


def virtual_stages(p: Placement, schedule: str | None = None) -> tuple[np.ndarray, list[int]]:
    """``(stage of every op, device of every stage)``; stages in forward data-flow order.

    A stage is the forward ops of one level of a device (see the module docstring); under a schedule whose rank
    map folds (:data:`~placement_dsl.pipeline_orders.FOLDS`: ZBV), a stage is one device's ops, whatever the op
    order: each device is one stage's slot, and the stages go in a topological order of the device graph (the
    forward edges between devices), ties by device number.

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name=n, work=1.0) for n in "abcd"], [("a", "b"), ("b", "c"), ("c", "d")])
    >>> stage, device = virtual_stages(Placement(g, Cluster.stages(2), [0, 1, 0, 1]))
    >>> stage.tolist(), device
    ([0, 1, 2, 3], [0, 1, 0, 1])
    >>> d = Graph([Op(name=n, work=1.0) for n in "abcd"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    >>> virtual_stages(Placement(d, Cluster.stages(3), [0, 1, 1, 2]))[0].tolist()  # b, c: one stage
    [0, 1, 1, 2]
    """
    g = p.graph
    fw = ~g.backward
    if schedule in FOLDS:
        part = p.assign.astype(np.int64)
        device = {int(d): int(d) for d in np.unique(p.assign[fw])}
        key = {d: (0, d) for d in device}
    else:
        rounds = _rounds(g, p.assign, fw)
        part = _level_parts(p, fw, rounds)  # a part's representative is its first op
        device = {int(r): int(p.assign[r]) for r in np.unique(part[fw])}
        first = np.full(g.n, np.iinfo(np.int64).max)
        np.minimum.at(first, part[fw], rounds[fw])
        key = {r: (int(first[r]), r) for r in device}
    order = _part_order(g, fw, part, device, key)
    stage = np.full(g.n, -1, dtype=np.int64)
    rank: dict[int, int] = {}
    for r, after in zip(order, [None, *order]):  # a part right after one of its device's joins its stage
        rank[r] = rank[after] if after is not None and device[after] == device[r] else len(set(rank.values()))
    stage[fw] = [rank[int(r)] for r in part[fw]]
    for grp in g.groups:
        ahead = grp[fw[grp]]
        if ahead.size:
            stage[grp[~fw[grp]]] = stage[ahead[0]]
    orphan = np.flatnonzero(stage < 0)
    if orphan.size:
        raise SpecError(f"virtual stages: backward op {g.names[orphan[0]]!r} shares a colocation group with no "
                        "forward op; pair each gradient with its op (Graph groups) to give it a stage")
    return stage, [device[r] for r, after in zip(order, [None, *order]) if after is None or rank[after] != rank[r]]


def _level_parts(p: Placement, fw: np.ndarray, rounds: np.ndarray) -> np.ndarray:
    """Per op, its part's representative (the part's first op): the forward ops of one device and level
    (:func:`~placement_dsl.invocation.run_levels`); a level on a cycle of parts is cut by the ops' ``rounds``
    (:func:`_rounds`), which no cycle survives (module docstring)."""
    g = p.graph
    level = run_levels(g, p.assign, np.ones(p.cluster.size, dtype=bool), fw)
    unit = p.assign.astype(np.int64) * (int(level.max(initial=0)) + 1) + level
    part = _firsts(unit)
    tangled = np.isin(part, _tangled(g, fw, part))
    if not tangled.any():
        return part
    cut = _firsts(unit * (g.n + 1) + rounds)
    return np.where(tangled, cut, part)


def _firsts(key: np.ndarray) -> np.ndarray:
    """Per op, the first op with its ``key``."""
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first[inverse.ravel()]


def _rounds(g: Graph, assign: np.ndarray, fw: np.ndarray) -> np.ndarray:
    """Per forward op, its stage in torch's round-robin layout if every op ran as early as it could: stage ``s`` on
    the ``(s mod p)``-th of the ``p`` devices holding forward ops (in device order), each op in the first such stage of
    its device no earlier than its inputs' and later than those of another device. The stage grows along every forward
    edge between two devices and never falls along one, so the parts of one device and stage feed no cycle: around
    one it would grow. On the cuts of a chain of ideals dealt round robin (the fold's interleaved splits) it gives
    each cut's ops at most their cut's stage."""
    dev, ahead = assign.tolist(), fw.tolist()
    slot = {d: k for k, d in enumerate(sorted({dev[v] for v in range(g.n) if ahead[v]}))}
    p = max(len(slot), 1)
    out = [0] * g.n
    ptr, preds = g.pred_ptr.tolist(), g.pred_idx.tolist()
    for v in g.topo.tolist():
        if ahead[v]:
            low = max((out[u] + (dev[u] != dev[v]) for u in preds[ptr[v]:ptr[v + 1]] if ahead[u]), default=0)
            out[v] = low + (slot[dev[v]] - low) % p
    return np.asarray(out, dtype=np.int64)


def _tangled(g: Graph, fw: np.ndarray, part: np.ndarray) -> list[int]:
    """The parts on a cycle of the forward edges between parts, or between two cycles: those that neither a
    topological order from the sources nor one from the sinks reaches."""
    ends = {(int(part[u]), int(part[v])) for u, v in zip(g.src.tolist(), g.dst.tolist())
            if fw[u] and fw[v] and part[u] != part[v]}
    nodes = {int(r) for r in np.unique(part[fw])}

    def stuck(pairs: set[tuple[int, int]]) -> set[int]:
        succ: dict[int, list[int]] = {r: [] for r in nodes}
        indeg = dict.fromkeys(nodes, 0)
        for a, b in pairs:
            succ[a].append(b)
            indeg[b] += 1
        ready = [r for r in nodes if indeg[r] == 0]
        while ready:
            for b in succ[ready.pop()]:
                indeg[b] -= 1
                if indeg[b] == 0:
                    ready.append(b)
        return {r for r, k in indeg.items() if k > 0}

    return sorted(stuck(ends) & stuck({(b, a) for a, b in ends}))


def _part_order(g, fw: np.ndarray, part: np.ndarray, device: dict[int, int],
                key: dict[int, tuple[int, int]]) -> list[int]:
    """Parts in a topological order of the forward edges between them (a cycle is refused): after a part, a ready
    part of its device and round (``key[0]``), so that the two make one stage (no part lies between them); else the
    ready part of the least ``key``: the earliest round of its ops in torch's round-robin layout (:func:`_rounds`),
    then its first op (a part's representative: its first op, or under a fold its device)."""
    succ: dict[int, set[int]] = {r: set() for r in device}
    for u, v in zip(g.src.tolist(), g.dst.tolist()):
        if fw[u] and fw[v] and part[u] != part[v]:
            succ[int(part[u])].add(int(part[v]))
    indeg = {r: 0 for r in succ}
    for after in succ.values():
        for s in after:
            indeg[s] += 1
    ready: list[tuple[tuple[int, int], int]] = []
    mine: dict[tuple[int, int], list[int]] = {}  # the ready parts of each device and round (popped ones stay in ready)

    def push(r: int) -> None:
        heapq.heappush(ready, (key[r], r))
        heapq.heappush(mine.setdefault((device[r], key[r][0]), []), r)

    for r in sorted(r for r in succ if indeg[r] == 0):
        push(r)
    out: list[int] = []
    done: set[int] = set()
    while ready:
        same = mine.get((device[out[-1]], key[out[-1]][0]), []) if out else []
        while same and same[0] in done:
            heapq.heappop(same)
        r = heapq.heappop(same) if same else heapq.heappop(ready)[1]
        if r in done:
            continue
        out.append(r)
        done.add(r)
        for s in succ[r]:
            indeg[s] -= 1
            if indeg[s] == 0:
                push(s)
    if len(out) < len(succ):  # a device as one stage (the V); the levels' parts form no cycle (_level_parts)
        d = min(set(succ) - set(out))
        raise SpecError(f"virtual stages: device {d}'s ops reach each other through another device, and a V runs "
                        "each device as one stage; give the V's turn (stages p - 1 and p) and every other stage a "
                        "device of its own")
    return out


def stage_ranks(device: Sequence[int], schedule: str | None = None) -> tuple[int, ...]:
    """The rank map: the rank of each virtual stage (``device``: the device of each stage, in stage order).

    Each device is one rank, numbered in the order its first stage runs; under a schedule that folds
    (:data:`~placement_dsl.pipeline_orders.FOLDS`: ZBV's V, two stages per rank) each device is one stage's
    slot and stage ``s`` of ``S`` runs on rank :func:`~placement_dsl.pipeline_orders.layout` ``(s)`` of
    ``S / 2``: the V's turn puts stages ``p - 1`` and ``p`` back to back on one rank, which one device
    would hold as one stage. :class:`SpecError` when the stages do not fold or a device holds stages of two ranks.

    >>> stage_ranks([0, 1, 0, 1]), stage_ranks([0, 1, 2, 3], "zbv")
    ((0, 1, 0, 1), (0, 1, 1, 0))
    """
    if schedule in FOLDS:
        per, n = FOLDS[schedule], len(device)
        if n % per:
            raise SpecError(f"virtual stages: {schedule} runs {per} stages per rank in a V, and the placement has "
                            f"{n} stages; give the V's turn (stages p - 1 and p) a device each, one device per stage")
        rank = tuple(layout(schedule, n // per, n))
        owner: dict[int, int] = {}
        for s, (d, r) in enumerate(zip(device, rank)):
            if owner.setdefault(d, r) != r:
                raise SpecError(f"virtual stages: device {d} holds stage {s}, which {schedule} runs on rank {r}, and "
                                f"a stage of rank {owner[d]}; give each stage a device of its own")
        return rank
    ranks = {d: k for k, d in enumerate(dict.fromkeys(device))}
    return tuple(ranks[d] for d in device)


def weight_shares(p: Placement, weight_share: float | Sequence[float] | None = None) -> np.ndarray:
    """Per op, the share of its compute that is weight gradient (0 on forward ops)."""
    g = p.graph
    if weight_share is None:
        share = np.where(g.param_bytes > 0, 0.5, 0.0)
    else:
        try:
            share = np.broadcast_to(np.asarray(weight_share, dtype=float), (g.n,)).copy()
        except (TypeError, ValueError):
            raise SpecError(f"stage times: weight_share must be one number or one per op ({g.n}), got "
                            f"{np.size(weight_share)} values") from None
        bad = np.flatnonzero(~((share >= 0) & (share <= 1)))
        if bad.size:
            raise SpecError(f"stage times: weight_share of op {g.names[bad[0]]!r} is {float(share[bad[0]])!r}; "
                            "give a share of the backward compute between 0 and 1")
    return np.where(g.backward, share, 0.0)


def stage_times(p: Placement, costs: Callable[[Placement, Any], Sequence[Any]], model: Any,
                weight_share: float | Sequence[float] | None = None, schedule: str | None = None) -> StageTimes:
    """Each virtual stage's ``F``, ``I`` and ``W`` times from the cost model (see the module docstring), its rank
    from the rank map of ``schedule`` (:func:`stage_ranks`).

    ``costs`` and ``model``: the cost model's :func:`~placement_dsl.evaluate.device_costs` and its
    :class:`~placement_dsl.evaluate.CostModel` (this module sits below the evaluator, which calls it)."""
    c = p.cluster
    if p.replicated:
        d, members = next((d, m) for d, m in enumerate(p.replica_sets) if len(m) > 1)
        raise SpecError(f"stage times: the stage of device {c.names[d]!r} runs on {len(members)} replicas "
                        f"({', '.join(c.names[e] for e in members)}), and torch's interleaved and zero-bubble orders run "
                        "each stage on one rank, so no run of them prices it; drop its replicas (replicate whole "
                        "pipelines, data parallel, instead)")
    stage, device = virtual_stages(p, schedule)
    rank = stage_ranks(device, schedule)
    model = replace(model, memory="hard", training_memory=None, require=frozenset())
    copies = _copies(c, device)
    sent = _pins_on_copies(_sent(p.graph, stage, rank), stage, device, c, copies)
    rows = costs(Placement(sent, copies, stage), model)
    times = copies.times(sent)[np.arange(p.graph.n), stage]
    share = weight_shares(p, weight_share)
    with np.errstate(invalid="ignore"):  # an op its stage may not run (inf) with no weight gradient: none of it
        w = np.bincount(stage, weights=np.where(share > 0, share * times, 0.0), minlength=len(device))
    i = [float(r.load_bw - x) if math.isfinite(x) else math.inf for r, x in zip(rows, w)]
    if schedule in SPLIT:  # the runtime runs W as an action of its own, with its own fixed cost
        w = w + np.where(np.bincount(stage, weights=p.graph.backward, minlength=len(device)) > 0,
                         model.task_overhead, 0.0)
    return StageTimes(rank, tuple(float(r.load_fw) for r in rows), tuple(i), tuple(float(x) for x in w),
                      stage_transfers(sent, stage, device, c))


def _copies(c: Cluster, device: Sequence[int]) -> Cluster:
    """One copy of each stage's device, with no memory limit; on a routed cluster (servers) with links, a link
    between the copies of each two devices at their route's bandwidth, so that a stage pays its transfers as its
    device does (:func:`placement_dsl.replication.routed_transfers`)."""
    copies = [c.devices[d].model_copy(update={"name": f"{c.names[d]}/stage{s}", "memory": float("inf")})
              for s, d in enumerate(device)]
    if not (c.routed and c.links):
        return Cluster(copies)
    bw = c.route_bandwidth
    return Cluster(copies, [Link(src=copies[s].name, dst=copies[t].name, bandwidth=float(bw[a, b]))
                            for s, a in enumerate(device) for t, b in enumerate(device) if a != b and bw[a, b] > 0])


def stage_transfers(g: Graph, stage: np.ndarray, device: Sequence[int], cluster: Cluster
                    ) -> tuple[StageTransfer, ...]:
    """The messages between stages of two devices of a cluster with links (none without links): per sending stage
    and pass, receiving stage and the pass that reads it, each tensor once per receiving stage, over the links a
    transfer between the two devices holds (:class:`~placement_dsl.congestion.TransferResources`, link mode: its
    route's), each hop ``bytes / bandwidth``, as :func:`placement_dsl.evaluate.link_loads` loads them. ``g``:
    the graph as the stages send it (:func:`_sent`). A pair of devices no chain of links joins is a
    :class:`SpecError` naming the tensor.

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name="a", work=1.0, out_bytes=4.0), Op(name="b", work=1.0)], [("a", "b")])
    >>> c = Cluster([{"name": "x"}, {"name": "y"}], [Link(src="x", dst="y", bandwidth=2.0)])
    >>> stage_transfers(g, np.array([0, 1]), [0, 1], c)
    (StageTransfer(src=0, dst=1, sent='F', read='F', links=(0,), times=(2.0,), latencies=()),)
    """
    if not cluster.links:
        return ()
    dev = np.asarray(device)[stage]
    cross = (stage[g.src] != stage[g.dst]) & (dev[g.src] != dev[g.dst])
    read: dict[tuple[int, int], str] = {}  # (tensor, receiving stage): "F" when a forward op there reads it
    for u, v in zip(g.src[cross].tolist(), g.dst[cross].tolist()):
        key = (u, int(stage[v]))
        read[key] = "F" if read.get(key) == "F" or not g.backward[v] else "B"
    size: dict[tuple[int, str, int, str], float] = {}
    named: dict[tuple[int, str, int, str], int] = {}
    for (u, t), r in read.items():
        key = (int(stage[u]), "B" if g.backward[u] else "F", t, r)
        size[key] = size.get(key, 0.0) + float(g.out_bytes[u])
        named.setdefault(key, u)
    held = TransferResources(cluster, Congestion.LINK)
    out = []
    for key in sorted(size):
        s, kind, t, r = key
        a, b = device[s], device[t]
        if size[key] <= 0:
            continue
        if cluster.route_links[a][b] is None:
            raise SpecError(f"stage times: op {g.names[named[key]]!r}'s output has no route from device "
                            f"{cluster.names[a]!r} to {cluster.names[b]!r} (stage {s} to stage {t})")
        links = tuple(x.index for x in held(a, b))
        lags = tuple(cluster.links[k].latency for k in links)
        out.append(StageTransfer(s, t, kind, r, links, tuple(size[key] / cluster.links[k].bandwidth for k in links),
                                 lags if any(lags) else ()))
    return tuple(out)


def _pins_on_copies(g: Graph, stage: np.ndarray, device: Sequence[int], c: Cluster, copies: Cluster) -> Graph:
    """``g`` with each pinned op pinned to its stage's copy when that copy is of the device it is pinned to: the
    copies are named apart from their devices, so a pin left as it is would rule out every copy (its time
    ``inf``, its stage's loads ``inf`` and ``0 x inf`` in its weight gradient); a pin its placement breaks stays
    (the evaluator names that violation on the placement itself)."""
    moved = {i: copies.names[stage[i]] for i, dev in g.pinned.items() if c.names[device[stage[i]]] == dev}
    if not moved:
        return g
    return g.replace(ops=[op.model_copy(update={"attrs": {**op.attrs, PINNED: moved[i]}}) if i in moved else op
                          for i, op in enumerate(g.ops)])


def _sent(g: Graph, stage: np.ndarray, rank: Sequence[int]) -> Graph:
    """``g`` without the edges between two stages of one rank: the runtime hands such a tensor over in its
    process (ZBV's turn, stages ``p - 1`` and ``p``), with no message to pay."""
    r = np.asarray(rank)[stage]
    local = (stage[g.src] != stage[g.dst]) & (r[g.src] == r[g.dst])
    return g.without_edges(local) if local.any() else g


def stage_bytes(p: Placement, schedule: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per virtual stage (of ``schedule``'s stages, :func:`virtual_stages`): parameter bytes, stashed bytes of one
    micro-batch's forward ops, bytes of its inputs."""
    g = p.graph
    stage, device = virtual_stages(p, schedule)
    S, fw = len(device), ~g.backward
    param = np.bincount(stage, weights=g.param_bytes, minlength=S)
    act = np.bincount(stage, weights=np.where(fw, g.out_bytes + g.activation_bytes, 0.0), minlength=S)
    cross = fw[g.src] & fw[g.dst] & (stage[g.src] != stage[g.dst])
    reads = {(int(u), int(stage[v])) for u, v in zip(g.src[cross], g.dst[cross])}  # each tensor once per stage
    inputs = np.zeros(S)
    for u, s in reads:
        inputs[s] += g.out_bytes[u]
    return param, act, inputs


def stage_memory(p: Placement, schedule: str, microbatches: int, spec: TrainingMemorySpec | None = None
                 ) -> np.ndarray:
    """Per device of ``p``'s cluster, the bytes it holds under ``schedule`` (see the module docstring).

    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.zoo.training import with_backward
    >>> ops, edges = with_backward([Op(name=n, work=1.0, out_bytes=1.0, param_bytes=2.0) for n in "abcd"],
    ...                            [("a", "b"), ("b", "c"), ("c", "d")])
    >>> p = Placement(Graph(ops, edges), Cluster.stages(2), [0, 1, 0, 1] + [1, 0, 1, 0])
    >>> stage_memory(p, "interleaved-1f1b", 4).tolist()  # 2 stages x 8 x (2 + 2), then 0F0 0F1 2F0 2F1 0F2: 1+1+2+2+1
    [71.0, 70.0]
    """
    spec = spec or TrainingMemorySpec()
    param, act, inputs = stage_bytes(p, schedule)
    _, device = virtual_stages(p, schedule)
    rank = stage_ranks(device, schedule)
    ranks = max(rank) + 1
    zero = (0.0,) * len(rank)
    times = StageTimes(rank, zero, zero, zero)
    check_round_robin(times, ranks, schedule)
    orders = rank_orders(schedule, ranks, times.stages // ranks, microbatches)
    held = inputs if spec.recompute else act + inputs
    own = np.asarray(device)
    out = np.zeros(p.cluster.size)
    for d in dict.fromkeys(device):  # a device's stages sit on one rank: its peak along that rank's order
        mine = own == d
        _, peak = stash_peaks(times, orders, np.where(mine, held, 0.0))
        out[d] = spec.state_factor * param[mine].sum() + peak[rank[int(np.argmax(mine))]]
        if spec.recompute:
            out[d] += (act + inputs)[mine].max()
    return out


@dataclass(frozen=True)
class StageTask:
    """One task of a rank's order as it ran (a Gantt bar)."""

    rank: int
    action: Action
    start: float
    end: float


@dataclass(frozen=True)
class OrderSimulation:
    makespan: float
    trace: tuple[StageTask, ...] = field(default=(), repr=False)


def simulate_orders(times: StageTimes, orders: Sequence[Sequence[Action]], record: bool = False) -> OrderSimulation:
    """Event simulation of the ranks' fixed orders (see the module docstring), and of the links' where the stages
    send over links (``times.transfers``: each link carries its hops one at a time in
    :meth:`~placement_dsl.pipeline_orders.TaskGraph.link_orders`' order); a deadlock is a :class:`SpecError`.
    The trace holds the ranks' tasks."""
    tasks = TaskGraph(times, orders)
    queues = tasks.queues() if times.transfers else tasks.ranks
    done: dict[tuple, float] = {}
    nxt = [0] * len(queues)
    running: list[tuple[float, int]] = []
    trace: list[StageTask] = []
    now, left = 0.0, sum(len(q) for q in queues)
    idle = set(range(len(queues)))
    woken: set[float] = set()
    while left:
        for k in sorted(idle):
            if nxt[k] < len(queues[k]):
                key = queues[k][nxt[k]]
                ready = tasks.ready(key, done)
                if now < ready < math.inf and ready not in woken:  # a message's latency: wake up when it is there
                    woken.add(ready)
                    heapq.heappush(running, (ready, -1))
                if ready <= now:
                    end = now + tasks.duration(key)
                    idle.discard(k)
                    heapq.heappush(running, (end, k))
                    if record and k < len(orders):
                        trace.append(StageTask(k, Action(*key), now, end))
        if not running:
            raise SpecError(f"simulate: the ranks' orders wait on each other with {left} tasks left")
        now, k = heapq.heappop(running)
        while k < 0 and running and running[0][0] <= now:
            _, k = heapq.heappop(running)
        if k < 0:  # only a wake-up: the tasks waiting on a latency look again
            continue
        while True:
            done[queues[k][nxt[k]]] = now
            nxt[k] += 1
            idle.add(k)
            left -= 1
            while running and running[0][0] <= now and running[0][1] < 0:
                heapq.heappop(running)
            if not (running and running[0][0] <= now):
                break
            _, k = heapq.heappop(running)
    return OrderSimulation(now, tuple(trace))


__all__ = ["OrderSimulation", "StageTask", "simulate_orders", "stage_bytes", "stage_memory",
           "stage_ranks", "stage_times", "stage_transfers", "virtual_stages", "weight_shares"]
