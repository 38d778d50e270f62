"""Simulated annealing of one segment's schedule: its devices and the order its ops are list-scheduled in, together.

The critical-chain descent (:mod:`.schedule_moves`) list-schedules every candidate in the incumbent's start order and
moves devices only, so an op moved to a device that is free earlier keeps its old place in the order, and a transfer
keeps its place on its port: a schedule that needs both a new device and a new order (a head of attention started on
a second device while the first still sends the inputs of a third) is out of its reach. On GPT-3 330M (MOIRAI
Table V, intra-server) GETF leaves every attention segment with one device busy all its span and the others waiting
on the first device's output port, and the descent, segment by segment, finds no single move that shortens it.

Here a segment (:class:`~placement_dsl.heuristics.segment_ls.Segment`) is annealed (Kirkpatrick et al. 1983) over
both. Each step is one of

* an *order move* (:data:`ORDER_SHARE` of the steps): an op moved to another place of the priority list, between its
  last predecessor and its first successor (the list stays topological);
* a *device move*: a movable op with the ops within ``r`` hops of it on its device (``r`` in :data:`RADII`, the
  critical-chain search's balls) moved to another device that may run them all,
  list-scheduled in the current priority list or in the current schedule's start order (each half of the time);

list-scheduled by :class:`~placement_dsl.schedule.ListScheduler` and accepted when its span is not longer, or with
probability ``exp(-increase / T)``, ``T`` falling linearly from :data:`TEMPERATURE` times the first span to zero
over the steps. The number of steps is :data:`STEPS_PER_OP` per op of the segment (at least :data:`MIN_STEPS`,
at most :data:`MAX_STEPS`), fewer when the time given holds fewer (the first steps' cost is measured); the cooling
follows the steps actually run. Deterministic for a seed when the time given holds every step.

Segments of one *shape* (:func:`shape`: the same edges, held nodes on the same devices and colocation units, once
their nodes are put in the graph's topological order; the layers of a model whose op times differ, by profiling
noise) are not one search, but a schedule of one is a candidate for the other (:func:`transplant`): the search by
segments tries the best pattern found so far for a shape on each segment of that shape before annealing it, so
that where the time holds one segment's annealing only, every layer still gets its pattern.
"""
from __future__ import annotations

import hashlib
import math
import random
import time
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..evaluate import CostModel
from .schedule_moves import ScheduleState, better_schedule, device_ball, start_order

ORDER_SHARE = 0.5  # of the steps, order moves
RADII = (0, 0, 1, 2, 4, 8)  # a device move's ball radius, drawn uniformly (single ops twice as often)
TEMPERATURE = 3e-3  # the first temperature, relative to the first span (a step 0.3 % longer is accepted at e^-1)
STEPS_PER_OP = 25  # steps per op of the segment (GPT-3 330M's attention segment, 168 ops: 4,200 steps, ~5 s)
MIN_STEPS, MAX_STEPS = 500, 20_000
PROBE = 20  # steps after which the time per step is measured and the steps cut to what the time holds


def steps_for(ops: int) -> int:
    """The steps an annealing of a segment of ``ops`` nodes takes when its time holds them."""
    return int(min(MAX_STEPS, max(MIN_STEPS, STEPS_PER_OP * ops)))


def anneal(graph: Any, movable: np.ndarray, cluster: Cluster, model: CostModel, local: np.ndarray,
           order: list[int], until: float, seed: int, steps: int | None = None
           ) -> tuple[np.ndarray, list[int], float, float, int]:
    """Anneal a segment's schedule (module docstring) from its devices ``local`` list-scheduled in ``order`` (a
    topological order of ``graph``'s nodes), moving only ``movable`` nodes, for ``steps`` steps (default
    :func:`steps_for`) or until ``until`` (:func:`time.perf_counter`). Returns the best devices, the priority list
    that schedules them, their span, the first span, and the steps run."""
    state = ScheduleState(graph, cluster, model, hard=False)
    cur, order = np.asarray(local, dtype=np.int64).copy(), list(order)
    first, b = state.schedule(cur, order)
    if b is None or not math.isfinite(first[0]):
        return cur, order, math.inf, math.inf, 1
    free = np.flatnonzero(movable).tolist()
    total = steps_for(graph.n) if steps is None else int(steps)
    if not free or total <= 0:
        return cur, order, first[0], first[0], 1
    preds = [graph.predecessors(v).tolist() for v in range(graph.n)]
    succs = [graph.successors(v).tolist() for v in range(graph.n)]
    rng, span, t0 = random.Random(seed), first, time.perf_counter()
    best = (first, cur, order)
    scale, step = TEMPERATURE * max(first[0], 1e-12), 0
    while step < total and time.perf_counter() < until:
        step += 1
        if step == PROBE:  # what the time left holds, at the pace of the first steps
            pace = (time.perf_counter() - t0) / PROBE
            total = min(total, PROBE + int((until - time.perf_counter()) / max(pace, 1e-9)))
        trial = _move(state, graph, movable, cur, order, b, free, preds, succs, rng)
        if trial is None:
            continue
        devices, priority = trial
        found, tb = state.schedule(devices, priority, span[0])
        if tb is None:
            continue
        temperature = scale * max(0.0, 1.0 - step / max(total, 1))
        worse = found[0] - span[0]
        if worse <= 0 or (temperature > 0 and rng.random() < math.exp(-worse / temperature)):
            cur, order, span, b = devices, priority, found, tb
            if better_schedule(found, best[0]):
                best = (found, devices, priority)
    return best[1].copy(), list(best[2]), best[0][0], first[0], step + 1


def _move(state: ScheduleState, graph: Any, movable: np.ndarray, cur: np.ndarray, order: list[int], b: Any,
          free: list[int], preds: list[list[int]], succs: list[list[int]], rng: random.Random
          ) -> tuple[np.ndarray, list[int]] | None:
    """One step's candidate ``(devices, priority list)``, or ``None`` when the drawn move changes nothing."""
    if rng.random() < ORDER_SHARE:
        position = {v: i for i, v in enumerate(order)}
        v = rng.randrange(graph.n)
        i = position[v]
        low = max((position[u] for u in preds[v]), default=-1) + 1
        high = min((position[w] for w in succs[v]), default=graph.n) - 1
        j = rng.randint(low, high)
        if j == i:
            return None
        moved = order[:i] + order[i + 1:]
        moved.insert(j, v)
        return cur, moved
    v = rng.choice(free)
    ops, units = device_ball(state, v, rng.choice(RADII), cur)
    if not movable[ops].all():  # the ball reaches a held node: v's own colocation unit
        units = np.array([int(state.unit[v])])
        ops = state.members[int(units[0])]
        if not movable[ops].all():
            return None
    devices = [d for d in range(state.c.size) if d != cur[v] and state.allowed[units, d].all()]
    if not devices:
        return None
    trial = cur.copy()
    trial[ops] = rng.choice(devices)
    return trial, (start_order(graph, b) if rng.random() < 0.5 else order)


def canonical(sub: Any, ops: np.ndarray, fed: int, rank: np.ndarray) -> np.ndarray:
    """A segment's nodes (``sub``'s, full-graph ids ``ops``, the first ``fed`` feeding it) in canonical order: the fed
    nodes, then the rest, each by the whole graph's topological ``rank``."""
    return np.lexsort((np.asarray(rank)[ops], np.arange(sub.n) >= fed))


def shape(sub: Any, canon: np.ndarray, movable: np.ndarray, held: np.ndarray) -> str:
    """What makes one segment's schedule valid for another (module docstring): its edges, movable nodes, held
    devices (``held``: each node's device, read where it does not move) and colocation units, in canonical order."""
    position = np.empty(sub.n, dtype=np.int64)
    position[canon] = np.arange(sub.n)
    groups: dict[Any, int] = {}
    h = hashlib.sha1()
    h.update(np.sort(position[sub.src] * sub.n + position[sub.dst]).astype(np.int64).tobytes())
    h.update(movable[canon].tobytes())
    h.update(np.where(movable, -1, held)[canon].astype(np.int64).tobytes())
    h.update(np.asarray([groups.setdefault(sub.ops[v].group, len(groups)) for v in canon.tolist()]).tobytes())
    return h.hexdigest()


def transplant(devices: np.ndarray, order: list[int], source: np.ndarray, target: np.ndarray
               ) -> tuple[np.ndarray, list[int]]:
    """A schedule of one segment (``devices`` per node, priority list ``order``) as a schedule of another of the same
    shape: node ``source[k]`` of the first is node ``target[k]`` of the second (their :func:`canonical` orders)."""
    to = np.empty(len(source), dtype=np.int64)
    to[source] = target
    out = np.empty(len(target), dtype=np.int64)
    out[to] = np.asarray(devices, dtype=np.int64)
    return out, to[np.asarray(order, dtype=np.int64)].tolist()


__all__ = ["MAX_STEPS", "MIN_STEPS", "STEPS_PER_OP", "anneal", "canonical", "shape", "steps_for", "transplant"]
