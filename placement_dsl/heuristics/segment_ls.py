"""The critical-chain search of ``schedule-ls`` run segment by segment, between the ops every schedule passes.

An op comparable with every other (a *cut*, :func:`~placement_dsl.bounds.makespan.comparable_cuts`: a transformer's
residual adds and layer norms, a CNN's block outputs) splits every schedule in time: the ops ``S`` between two cuts
``a`` and ``b`` descend from ``a`` and precede ``b``, so they run after ``a`` ends and before ``b`` starts, and
nothing else runs then but the transfers they need. A schedule of the whole graph is, up to the few tensors that skip
a cut (a residual's), the schedules of its segments one after the other, each from its ``a`` to its ``b``, and its
makespan the sum of their spans (MOIRAI §III's schedules, Fig. 10's GPT-3 of 24 identical layers).

On GPT-3 330M's 4,886 ops list scheduling the whole graph takes 0.3-1 s per candidate, so the whole-graph search
(:func:`~placement_dsl.heuristics.schedule_ls.schedule_local_search`) tries a few hundred moves in minutes, spread
over 48 segments, and GETF's schedule stayed a local optimum for its time. Here each segment is a graph of its own
(:func:`segments`): its ops, free; the ops feeding it from outside (``a``, and a residual's source) with no time,
held where the incumbent runs them; and ``b``, held too, with its time. The critical-chain search then runs on the
segment (a few milliseconds per candidate on a transformer layer's 170 ops), minimizing the segment's span, and
identical segments (equal times, tensors and structure, the same held devices: the layers of a model without
profiling noise) are searched once. The segments' best assignments, each list-scheduled in its own best order, one
segment after the other, make the candidate for the whole graph, which the cost model scores and which is kept only
when it is better (:func:`improve_segments`).

Once the descent stalls on every segment, each distinct segment is annealed over its devices and its list order
together (:mod:`.segment_anneal`), within the time left: a move of the descent keeps the incumbent's order, and on
GPT-3 330M intra-server GETF's attention segment is a local optimum of the descent that the annealing leaves (its
span 0.975 to 0.967 in 4,200 steps, 143.60 to 143.41 for the whole graph).
"""
from __future__ import annotations

import hashlib
import math
import random
import time
from dataclasses import dataclass, field

import numpy as np

from ..bounds.makespan import comparable_cuts
from ..cluster import Cluster
from ..errors import PlacementError
from ..evaluate import CostModel
from ..graph import Graph
from .schedule_moves import ScheduleState, descend, device_ball, start_order
from .segment_anneal import anneal, canonical, shape, transplant

MAX_OPS = 6000  # the cut ops' reachability (n^2 booleans), as the segment bounds
MIN_FREE = 3  # segments with fewer free ops are left as they are
LARGEST = 0.5  # of the graph's ops, the most its largest segment may hold for the search by segments to run


@dataclass
class Segment:
    """One segment as a graph of its own: ``ops`` (full-graph ids of ``graph``'s nodes: the ops feeding it, then its
    own in the incumbent's start order, then its closing cut), which of them may move, and its identity ``key``."""

    graph: Graph
    ops: np.ndarray
    movable: np.ndarray
    fed: int  # the first ``fed`` nodes feed the segment from outside (no time, held)
    key: str = ""
    assign: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def cut_segments(graph: Graph) -> list[tuple[np.ndarray, int]] | None:
    """Each segment's ops and its closing cut (``-1`` after the last), segments in time order; ``None`` when the graph
    is too large for the reachability or has no cut."""
    if graph.n > MAX_OPS or graph.n < 2:
        return None
    reach, cuts = comparable_cuts(graph)
    if len(cuts) == 0:
        return None
    is_cut = np.zeros(graph.n, dtype=bool)
    is_cut[cuts] = True
    number = np.where(is_cut, -1, reach[cuts].sum(axis=0))  # the cuts before each op
    return [(np.flatnonzero(number == s), int(cuts[s]) if s < len(cuts) else -1) for s in range(len(cuts) + 1)]


def segments(graph: Graph, assign: np.ndarray, order: list[int], unit: np.ndarray) -> list[Segment]:
    """The segments of the incumbent (``assign``, start ``order``; ``unit``: each op's colocation unit) as graphs of
    their own (module docstring); an op whose unit reaches outside its segment is held, as are the fed ops and the
    closing cut."""
    parts = cut_segments(graph)
    if parts is None:
        return []
    position = np.empty(graph.n, dtype=np.int64)
    position[np.asarray(order, dtype=np.int64)] = np.arange(graph.n)
    out = []
    for ops, b in parts:
        own = ops[np.argsort(position[ops], kind="stable")]
        inside = np.zeros(graph.n, dtype=bool)
        inside[own] = True
        if b >= 0:
            inside[b] = True
        members = np.concatenate([own, [b]]) if b >= 0 else own
        fed = sorted({int(u) for v in members.tolist() for u in graph.predecessors(v).tolist() if not inside[u]})
        nodes = np.concatenate([np.asarray(fed, dtype=np.int64), members]).astype(np.int64)
        movable = np.zeros(len(nodes), dtype=bool)
        movable[len(fed):len(fed) + len(own)] = True
        whole = np.bincount(unit[own], minlength=int(unit.max()) + 1) == np.bincount(unit, minlength=int(unit.max()) + 1)
        movable[len(fed):len(fed) + len(own)] &= whole[unit[own]]
        if movable.sum() < MIN_FREE:
            continue
        sub = _subgraph(graph, nodes, len(fed), unit)
        out.append(Segment(sub, nodes, movable, len(fed), _key(sub, nodes, movable, assign)))
    return out


def _subgraph(graph: Graph, nodes: np.ndarray, fed: int, unit: np.ndarray) -> Graph:
    """The segment's graph: the fed ops without time, every op's group its unit's number (held ops alone)."""
    index = {int(v): k for k, v in enumerate(nodes.tolist())}
    ops = []
    for k, v in enumerate(nodes.tolist()):
        op = graph.ops[v]
        update = {"group": f"unit{int(unit[v])}" if k >= fed else None}
        if k < fed:
            update["work"] = {kind: 0.0 for kind in op.work} if isinstance(op.work, dict) else 0.0
        ops.append(op.model_copy(update=update))
    edges = [(graph.names[u], graph.names[v]) for v in nodes[fed:].tolist() for u in graph.predecessors(v).tolist()
             if u in index]
    return Graph(ops, edges, name=f"{graph.name}-segment")


def _key(sub: Graph, nodes: np.ndarray, movable: np.ndarray, assign: np.ndarray) -> str:
    """What makes two segments the same search: their structure, op data (times, tensors, memory, groups' shapes),
    which nodes move, and where the held ones run."""
    h = hashlib.sha1()
    pos = {name: k for k, name in enumerate(sub.names)}
    h.update(np.asarray([(pos[sub.names[u]], pos[sub.names[v]]) for u, v in zip(sub.src, sub.dst)],
                        dtype=np.int64).tobytes())
    for op in sub.ops:
        h.update(repr((sorted(op.work.items()) if isinstance(op.work, dict) else op.work, op.out_bytes,
                       op.param_bytes, op.activation_bytes, op.attrs.get("transfer_time"))).encode())
    groups = {}
    h.update(np.asarray([groups.setdefault(op.group, len(groups)) for op in sub.ops], dtype=np.int64).tobytes())
    h.update(movable.tobytes())
    h.update(np.where(movable, -1, np.asarray(assign)[nodes]).astype(np.int64).tobytes())
    return h.hexdigest()


def search_segment(segment: Segment, cluster: Cluster, model: CostModel, local: np.ndarray, order: list[int],
                   until: float, seed: int, budget: int | None = None
                   ) -> tuple[np.ndarray, list[int], float, float, int]:
    """The critical-chain search on one segment from its devices ``local`` (per node) list-scheduled in ``order``:
    a descent, then kicks each followed by a descent, until ``until`` (:func:`time.perf_counter`), ``budget``
    candidates scheduled (``None``: no limit), or :data:`STALE_KICKS` kicks in a row that found nothing. Returns the
    segment's best devices, its start order, its span then and before, and the candidates scheduled."""
    state = ScheduleState(segment.graph, cluster, model, hard=False)
    local = np.asarray(local, dtype=np.int64).copy()
    first, b = state.schedule(local, order)
    if b is None:
        return local, order, math.inf, math.inf, 1
    rng = random.Random(seed)
    local, best, b, (spent, _), _ = descend(state, local, first, b, until, rng, segment.movable, budget)
    spent += 1
    free = np.flatnonzero(segment.movable)
    stale = 0
    while time.perf_counter() < until and stale < STALE_KICKS and (budget is None or spent < budget):
        trial, kicked = _kick(state, segment, local, b, free, rng)  # a ball of the last device's ops moved
        if kicked is None:  # elsewhere, then the descent
            break
        stale, spent = stale + 1, spent + 1
        makespan, tb = state.schedule(trial, start_order(segment.graph, b))
        if tb is None:
            continue
        trial, makespan, tb, (more, _), _ = descend(state, trial, makespan, tb, until, rng, segment.movable,
                                                    None if budget is None else max(0, budget - spent))
        spent += more
        if makespan[0] < best[0] * (1 - 1e-9):
            local, best, b, stale = trial, makespan, tb, 0
    return local, start_order(segment.graph, b), best[0], first[0], spent


KICK_RADII = (0, 1, 2, 4)
STALE_KICKS = 20  # kicks in a row without a shorter span after which a segment's search ends


def _kick(state, segment: Segment, local: np.ndarray, b, free: np.ndarray, rng: random.Random):
    """``local`` with a ball of movable ops (on the device that ends last, mostly) moved to another device."""
    if free.size == 0 or state.c.size < 2:
        return local, None
    finish = np.asarray(b.finish)
    last = int(local[int(np.argmax(finish))])
    pool = free[local[free] == last] if rng.random() < 0.7 else free
    v = int(rng.choice((pool if pool.size else free).tolist()))
    ops, _ = device_ball(state, v, rng.choice(KICK_RADII), local)
    if not segment.movable[ops].all():  # the ball reaches a held op: v's colocation unit alone
        ops = state.members[int(state.unit[v])]
    d = rng.choice([k for k in range(state.c.size) if k != local[v]])
    trial = local.copy()
    trial[ops] = d
    return trial, v


ROUND = 400  # candidates a segment's search schedules per round (about 1 s on a transformer layer's 88 ops)
ROUND_GAIN = 1e-3  # a segment whose round shortens its span by less (relative) has stalled and leaves the search


def improve_segments(graph: Graph, cluster: Cluster, model: CostModel, assign: np.ndarray, order: list[int],
                     until: float, unit: np.ndarray, seed: int = 0
                     ) -> tuple[np.ndarray | None, list[int] | None, dict] | None:
    """A candidate for the whole graph from the incumbent (``assign``, start ``order``) searched segment by segment
    until ``until`` (:func:`time.perf_counter`; module docstring) or until every segment stalls: its devices, the
    order to list-schedule it in (both ``None`` when no segment improved), and what happened (``rounds``,
    ``candidates`` scheduled, ``stalled``: whether it ended because every segment had); ``None`` when the graph has no segment worth searching.

    The search runs in rounds: in each, every distinct segment still improving is searched from its best so far
    (:func:`search_segment`) for :data:`ROUND` candidates, within its share of the time left (by its ops); a segment
    whose round shortened its span by less than :data:`ROUND_GAIN` has stalled and is searched no more. The search
    ends after a round in which none improved, so where no segment can be shortened it costs one round, not its
    time, and the rest goes back to the caller. Once every segment has stalled, each distinct one is annealed
    (:func:`_anneal_all`), in rounds of a number of steps its size sets, while a round shortens it by
    :data:`ROUND_GAIN` and within the time left (``annealed`` counts the steps)."""
    parts = segments(graph, assign, order, unit)
    if not parts or max(p.graph.n for p in parts) > LARGEST * graph.n:
        return None  # one segment holds most of the graph: the whole graph's search is the same search
    distinct = list(dict.fromkeys(p.key for p in parts))
    part = {k: next(p for p in parts if p.key == k) for k in distinct}
    weight = {k: float(part[k].graph.n) for k in distinct}
    found = {k: (np.asarray(assign)[part[k].ops].astype(np.int64), list(range(part[k].graph.n)), math.inf, math.inf)
             for k in distinct}
    live, rounds, spent = list(distinct), 0, 0
    while live and time.perf_counter() < until:
        rounds, improving = rounds + 1, []
        for i, key in enumerate(live):  # each its share of the time left, what earlier ones left over
            now = time.perf_counter()
            if now >= until:
                improving = live  # cut short: not stalled
                break
            share = weight[key] / max(sum(weight[k] for k in live[i:]), 1e-12) * (until - now)
            local, order_ = found[key][:2]
            try:
                local, order_, new, before, made = search_segment(part[key], cluster, model, local, order_,
                                                                  now + share, seed + rounds, ROUND)
            except PlacementError:
                continue
            spent += made
            first = before if rounds == 1 else found[key][3]
            found[key] = (local, order_, min(new, before), first)
            if new < before * (1 - ROUND_GAIN):
                improving.append(key)
        live = improving
    annealed, shared = _anneal_all(graph, assign, part, distinct, weight, found, cluster, model, until, seed) \
        if not live else (0, 0)
    gained = {k: v[3] - v[2] for k, v in found.items() if v[2] < v[3] * (1 - 1e-9)}
    info = {"segments": len(parts), "distinct": len(distinct), "rounds": rounds, "candidates": spent,
            "annealed": annealed, "patterns": shared, "improved": len(gained), "stalled": not live}
    if not gained:
        return None, None, info
    new = np.asarray(assign).copy()
    rank = np.empty(graph.n, dtype=np.float64)
    rank[np.asarray(order, dtype=np.int64)] = np.arange(graph.n, dtype=np.float64)
    for p in parts:  # an improved segment's devices, and its ops in its own best order in the places they held
        if p.key not in gained:
            continue
        local, local_order = found[p.key][0], [k for k in found[p.key][1] if k >= p.fed]
        new[p.ops[p.movable]] = local[p.movable]
        rank[p.ops[local_order]] = np.sort(rank[p.ops[local_order]])
    sequence = np.argsort(rank, kind="stable").tolist()
    info["segment_gain"] = float(sum(gained[p.key] for p in parts if p.key in gained))
    return new, sequence, info


def _anneal_all(graph: Graph, assign: np.ndarray, part: dict[str, Segment], distinct: list[str],
                weight: dict[str, float], found: dict[str, tuple], cluster: Cluster, model: CostModel, until: float,
                seed: int) -> tuple[int, int]:
    """Each distinct segment's best so far annealed over its devices and list order together
    (:func:`~placement_dsl.heuristics.segment_anneal.anneal`), in rounds: in each, every segment still improving is
    annealed once from its best with the round's seed, within its share of the time left (by its ops), after the
    best schedule of the last segment of its shape annealed is tried on it
    (:func:`~placement_dsl.heuristics.segment_anneal.transplant`); a segment whose round shortens it by less than
    :data:`ROUND_GAIN` leaves. ``found`` is updated where a segment got shorter; returns the steps run and the
    patterns of another segment kept."""
    canon = {k: canonical(part[k].graph, part[k].ops, part[k].fed, graph.rank) for k in distinct}
    shapes = {k: shape(part[k].graph, canon[k], part[k].movable, np.asarray(assign)[part[k].ops]) for k in distinct}
    pattern: dict[str, str] = {}  # shape -> the segment annealed last
    steps, shared, live, rounds = 0, 0, list(distinct), 0
    while live and time.perf_counter() < until:
        rounds, improving = rounds + 1, []
        for i, key in enumerate(live):
            now = time.perf_counter()
            if now >= until:
                return steps, shared
            share = weight[key] / max(sum(weight[k] for k in live[i:]), 1e-12) * (until - now)
            seg, was = part[key], found[key][2]
            other = pattern.get(shapes[key])
            if other is not None and other != key:
                shared += _try_pattern(seg, found, key, *transplant(*found[other][:2], canon[other], canon[key]),
                                       cluster, model)
            local, order_, span, first = found[key]
            try:
                new, new_order, new_span, before, made = anneal(seg.graph, seg.movable, cluster, model, local,
                                                                 order_, now + share, seed + rounds)
            except PlacementError:
                continue
            steps += made
            first, span = (before if math.isinf(first) else first), min(span, before)
            found[key] = (new, new_order, new_span, first) if new_span < span * (1 - 1e-9) else \
                (local, order_, span, first)
            pattern[shapes[key]] = key
            if new_span < min(was, before) * (1 - ROUND_GAIN):
                improving.append(key)
        live = improving
    return steps, shared


def _try_pattern(seg: Segment, found: dict[str, tuple], key: str, devices: np.ndarray, order: list[int],
                 cluster: Cluster, model: CostModel) -> bool:
    """``found[key]`` replaced by the schedule ``devices`` list-scheduled in ``order`` where that is shorter (then
    ``True``)."""
    state = ScheduleState(seg.graph, cluster, model, hard=False)
    local, order_, span, first = found[key]
    if math.isinf(first):
        first = span = state.schedule(local, order_)[0][0]
    new = state.schedule(devices, order)[0][0]
    better = new < span * (1 - 1e-9)
    found[key] = (devices, order, new, first) if better else (local, order_, span, first)
    return better
