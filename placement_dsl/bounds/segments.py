"""The makespan's segments with the transfers a device pays to join one (MOIRAI §III's schedules).

An op comparable with every other (an ancestor or a descendant of each, as a transformer's layer norm) splits every
schedule in time (:func:`~placement_dsl.bounds.makespan.segment_bound`): the ops ``S`` between two such *cut* ops
``a`` and ``b`` run in ``[end(a), start(b)]``, of length ``L``. A device ``d`` that runs some of ``S`` but not
``a`` starts its first one only after a tensor reaches it from another device (every op of ``S`` descends from
``a``, and the first one on ``d`` has an input from ``a`` or ``S`` produced elsewhere): at least ``in_d``, the
least over the tensors an op of ``S`` of another colocation class reads (a class runs on one device) of the
producer's least finish after ``a`` and the move into ``d``; likewise, not running ``b``, it ends its last one
``out_d`` before ``b`` starts, the least over the tensors an op of ``S`` or ``b`` of another class reads of the
move out of ``d`` and that reader's least time and tail to ``b``. So with ``U`` the devices that run ``S``,
``L >= o_d + load_d`` for each ``d`` in ``U``, ``o_d = in_d [d != dev(a)] + out_d [d != dev(b)]``, and for any
weights ``lambda`` on ``U``'s simplex (the LP dual of the load split)::

    L >= sum_{v in S} min_{d in U} lambda_d p_vd + sum_{d in U} lambda_d o_d.

The bound of a segment is the least over ``U`` and the devices of ``a`` and ``b`` (in ``U``: a smaller ``o``) of
the best weights' value, and at least its longest path. The split is fractional, so it lets a slow device take a
share of an op that alone outlasts the segment; but a segment of length ``L`` runs ``v`` on ``d`` only if ``v``'s
time there, with the least routes through the segment before and after it, fits in ``L``. With such ops kept off
such devices the value is at most ``L``, so the segment is at least the least ``L`` that passes this test (on
MOIRAI's GoogLeNet sheet the segments rise from their paths, 0.817 in all, to 0.922, and to 0.983 with the moves
in and out timed from the producer's finish and to the reader's tail). The makespan
is at least the cut ops' fastest times plus the segments' bounds. Where transfers cost more than the parallel
branches save, it is the serial work of the segment on one device, which the work and path bounds cannot see.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from ..deadline import Deadline
from .makespan import (
    allowed_times,
    comparable_cuts,
    dual_weights,
    heads_tails,
    segment_path,
    transfer_table,
    weighted_costs,
)

GRID = 10  # simplex steps of a segment's weights (four devices: 286 weight vectors per device set)
MAX_DEVICES = 6  # beyond, the device sets are too many to enumerate: the segments keep path and work only
MAX_OPS = 6000  # the reachability matrix of the cut ops (n^2 booleans)


def transfer_segment_bound(problem: Any, deadline: Deadline | None = None) -> tuple[float, str]:
    """The makespan bound of the module docstring, in cost-model units, and a note."""
    g = problem.graph
    if g.n == 0:
        return 0.0, "empty graph"
    if g.n > MAX_OPS:
        return 0.0, f"declined: {g.n} ops (the cut ops' reachability: at most {MAX_OPS})"
    found = segment_values(problem, deadline)
    if found is None:
        return 0.0, "budget spent before every segment was priced"
    total, values, cuts = found
    note = f"{cuts} cut ops, their segments' work with the transfers into and out of each device"
    return total + sum(values.values()), note


def segment_values(problem: Any, deadline: Deadline | None = None) -> tuple[float, dict[int, float], int] | None:
    """The cut ops' fastest times summed, each segment's bound of the module docstring by its number (the cut ops
    before it), and the number of cut ops; ``None`` when ``deadline`` passed first."""
    memo = REUSE.get()
    done = None if memo is None else memo.get(("values", id(problem)))
    if done is not None and done[0] is problem:  # the segment bounds of one solve ask for them three times
        return done[1][0], dict(done[1][1]), done[1][2]
    g, c = problem.graph, problem.cluster
    times = allowed_times(problem)
    comm = transfer_table(g, c)
    routes = comm.copy()
    D = c.size
    comm[:, np.arange(D), np.arange(D)] = np.inf
    comm[~crossing(g)] = np.inf  # a tensor only colocated consumers read never leaves its device
    into = comm.min(axis=1)  # into[u, d]: the cheapest move of u's tensor into d from another device
    out_of = comm.min(axis=2)  # out_of[u, d]: ... out of d
    fastest = times.min(axis=1)
    reach, cuts = comparable_cuts(g)
    segment = np.where(np.isin(np.arange(g.n), cuts), -1, reach[cuts].sum(axis=0))  # the cut ops before each op
    total, sets = float(fastest[cuts].sum()), (_device_sets(D) if D <= MAX_DEVICES else [])
    values = {}
    for s in np.unique(segment[segment >= 0]).tolist():
        if deadline is not None and deadline.expired():
            return None
        ops = np.flatnonzero(segment == s)
        a = int(cuts[s - 1]) if s > 0 else -1
        b = int(cuts[s]) if s < len(cuts) else -1
        path = segment_path(g, ops, fastest)
        spread = 0.0
        if D <= MAX_DEVICES:
            ready, tail = heads_tails(g, times, routes, g.group_id, ops)
            ins, outs = _ends(g, ops, a, b, into, out_of, ready + times, times + tail)
            spread = _windowed(g, ops, times, ready + times + tail, path, ins, outs, sets, c.parallel)
        values[s] = max(path, spread)
    if memo is not None:
        memo[("values", id(problem))] = (problem, (total, dict(values), len(cuts)))
    return total, values, len(cuts)


REUSE: ContextVar[dict[Any, Any] | None] = ContextVar("segment_reuse", default=None)
"""The segment bounds' memo within :func:`reused` (``None`` outside it): the LP bound reads and fills it too."""


@contextmanager
def reused() -> Iterator[None]:
    """Within the block, a problem's segment values and segment LPs, once all priced, are answered again without
    pricing them: a solve prices them in-process, then its closed forms ask for them again (segment values three
    times, 0.65 s each, and the LPs twice, 2 s, on a 1,137-op transformer at load 8)."""
    token = REUSE.set({})
    try:
        yield
    finally:
        REUSE.reset(token)


def _device_sets(D: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every non-empty device set with its weight vectors (each over the set's simplex, spread to ``D`` columns)."""
    out = []
    for k in range(1, D + 1):
        for subset in itertools.combinations(range(D), k):
            idx = np.array(subset)
            lam = np.zeros((0, D))
            if k == 1:
                lam = np.zeros((1, D))
                lam[0, idx] = 1.0
            else:
                steps = [np.array([*p, GRID - sum(p)], dtype=float) / GRID
                         for p in itertools.product(range(GRID + 1), repeat=k - 1) if sum(p) <= GRID]
                full = np.zeros((len(steps) + 1, D))
                full[:-1, idx] = np.array(steps)
                full[-1, idx] = dual_weights(k, np.ones(k))[0]
                lam = full
            out.append((idx, lam))
    return out


def crossing(graph: Any) -> np.ndarray:
    """Per op, whether some consumer is of another colocation class: only such a tensor may move between devices
    (every placement keeps a class on one device)."""
    out = np.zeros(graph.n, dtype=bool)
    out[graph.src[between_classes(graph)]] = True
    return out


def between_classes(graph: Any) -> np.ndarray:
    """Per edge, whether its ends are of two colocation classes (only such an edge's tensor may move)."""
    return graph.group_id[graph.src] != graph.group_id[graph.dst]


def _ends(graph: Any, ops: np.ndarray, a: int, b: int, into: np.ndarray, out_of: np.ndarray, done: np.ndarray,
          then: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(in_d, out_d)`` of the module docstring, each move timed from the segment's ends: the first op of ``ops`` on
    ``d`` (not ``a``'s device) waits for an input from ``ops`` or ``a`` of another class, at the earliest its
    producer's least finish ``done`` after ``a`` (0 for ``a``) and then its move into ``d``; the last one (not on
    ``b``'s device) sends to an op of ``ops`` or ``b`` of another class, which then runs with its least time and tail
    ``then`` (0 for ``b``). ``a`` or ``b`` of -1 (the graph's ends): no move."""
    D = into.shape[1]
    inside = np.zeros(graph.n, dtype=bool)
    inside[ops] = True
    src, dst = graph.src, graph.dst
    other = between_classes(graph)
    ins = outs = np.zeros(D)
    if a >= 0:
        e = np.flatnonzero(other & inside[dst] & (inside[src] | (src == a)))
        first = np.where((src[e] == a)[:, None], 0.0, done[src[e]].min(axis=1, keepdims=True)) + into[src[e]]
        ins = first.min(axis=0, initial=np.inf)
    if b >= 0:
        e = np.flatnonzero(other & inside[src] & (inside[dst] | (dst == b)))
        last = out_of[src[e]] + np.where((dst[e] == b)[:, None], 0.0, then[dst[e]].min(axis=1, keepdims=True))
        outs = last.min(axis=0, initial=np.inf)
    return np.where(np.isfinite(ins), ins, 0.0), np.where(np.isfinite(outs), outs, 0.0)


def _windows(graph: Any, ops: np.ndarray, span: np.ndarray) -> np.ndarray:
    """``span[ops]`` (per op and device: its time there between the least routes through the segment before and
    after it, :func:`~placement_dsl.bounds.makespan.heads_tails` on the segment alone), each colocation class taking
    its members' largest on each device, for it runs on one."""
    span = span[ops]
    group = graph.group_id[ops]
    for gid in np.unique(group).tolist():
        members = group == gid
        span[members] = span[members].max(axis=0)
    return span


def _windowed(graph: Any, ops: np.ndarray, times: np.ndarray, through: np.ndarray, path: float, ins: np.ndarray,
              outs: np.ndarray, sets: list[tuple[np.ndarray, np.ndarray]], parallel: np.ndarray) -> float:
    """The least ``L`` (at least ``path``) that the spread of the ops allowed on each device within ``L`` does not
    exceed. A segment of length ``L`` runs no op on a device where its window (:func:`_windows`) is longer, so the
    spread with those times dropped is at most ``L``; dropping fewer as ``L`` grows, the spread only falls, and the
    least such ``L`` is found by bisection over the windows' values, each a step of the spread. Ops of no time on
    every device are left out (they add no work; dropping their windows only relaxes), and a ``parallel`` device
    (a host running its ops side by side) loads no work, only its windows bind there."""
    span = _windows(graph, ops, through)
    times = times[ops]
    busy = (np.where(np.isfinite(times), times, 0.0) > 0).any(axis=1)  # an op of no time adds no work
    span, times = span[busy], times[busy]
    times = np.where(parallel & np.isfinite(times), 0.0, times)
    steps = np.unique(np.append(span[np.isfinite(span) & (span > path)], path))

    def spread(k: int) -> float:
        return _spread(np.where(span <= steps[k], times, np.inf), ins, outs, sets)

    lo, hi = 0, len(steps) - 1  # the least step k whose spread is below the next step (the last step's always is)
    while lo < hi:
        mid = (lo + hi) // 2
        if spread(mid) < steps[mid + 1]:
            hi = mid
        else:
            lo = mid + 1
    value = max(float(steps[lo]), spread(lo))
    return value if np.isfinite(value) else 0.0  # an op no device may run: left to the feasibility checks


def _spread(times: np.ndarray, ins: np.ndarray, outs: np.ndarray, sets: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """The least over device sets ``U`` and the cut ops' devices in ``U`` of the best weights' value (``inf`` when no
    set may run every op)."""
    best = np.inf
    for idx, lam in sets:
        if not np.isfinite(times[:, idx]).any(axis=1).all():
            continue  # an op no device of the set may run
        work = weighted_costs(times[:, idx], lam[:, idx]).sum(axis=1)  # per weight vector: sum_v min_d lambda_d p_vd
        base = work + lam @ (ins + outs)  # then a's device pays no way in, b's no way out: (weights, da, db)
        free = base[:, None, None] - (lam[:, idx] * ins[idx])[:, :, None] - (lam[:, idx] * outs[idx])[:, None, :]
        best = min(best, float(free.max(axis=0).min()))
        if best <= 0:
            return 0.0
    return best
