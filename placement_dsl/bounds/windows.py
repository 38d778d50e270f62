"""Windows of a makespan schedule, each a small schedule of its own with release times and tails.

Any set ``S`` of ops splits off a relaxation: a schedule restricted to ``S`` (its ops, the transfers between them, the
devices' and the congested resources' order) is a schedule of the graph induced by ``S`` on the same cluster, and every
op ``v`` of ``S`` on device ``d`` still starts after ``R[v, d]`` and still has ``T[v, d]`` of the schedule after its end
(the split heads and tails, :mod:`.split_heads`, lower bounds valid in every schedule). So the makespan is at least the
least ``max_v (end_v + T[v, dev v])`` over the schedules of ``S`` alone whose ops start no earlier than their heads: the
*window problem*. Where the split heads price one op's neighbourhood at a time (the ops elsewhere run in parallel at no
cost), the window problem makes the ops of ``S`` share the devices, the ports and the transfers at once.

Windows: the whole graph when it is small (:data:`WHOLE_OPS`), and the :data:`WINDOW_OPS` ops nearest in topological
order to each of the most critical ops (the largest ``min_d R + p + T``), at most :data:`WINDOWS` of them. Dropped (so
the window problem is a relaxation): memory, pins (their devices keep an infinite head, which the pricing forbids),
the ops outside ``S`` and their edges. Heads and tails are given relative to the window's least head and least tail
(:attr:`Window.offset` adds them back), which keeps the window inside the schedule model's own horizon.

This module picks the windows and builds their problems; :mod:`placement_dsl.cpsat_segments` prices them with CP-SAT's
proven bound in a child process (OR-Tools stays out of the bounds layer). On MOIRAI-style sheets of 24 and 30 tasks on
five devices, where the split heads leave 10 and 14 % to the proven optimum, the whole graph with its heads and tails
is proven optimal in seconds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..constraints import Congestion
from ..deadline import Deadline
from ..graph import Graph
from ..objectives import Makespan
from ..problem import Problem
from .makespan import allowed_times, transfer_table
from .split_heads import split_heads

WINDOW_OPS = 64  # ops of a window around a critical op: CP-SAT proves windows of 60 ops of a 300-task sheet in a second
WHOLE_OPS = 128  # graphs this small are also priced whole (a 30-task sheet's 91 ops: proven in 4 s)
WINDOWS = 3  # windows around critical ops, the most critical first
MAX_OPS = 20_000  # beyond, the split heads alone take the level's time (O(n K^2 D), a Python pass over the ops)


@dataclass
class Window:
    """One window: its problem, the releases and tails of its ops per device (``(k, D)``, relative: ``inf`` where the
    op may not run), what to add back (:attr:`offset`), its op count and the op it is centred on (``None``: the whole
    graph)."""

    problem: Any
    release: np.ndarray
    tail: np.ndarray
    offset: float
    ops: int
    centre: str | None


def window_problems(problem: Any, deadline: Deadline | None = None) -> tuple[float, list[Window], str]:
    """The split heads' longest path (``max_v min_d R + p + T``), the windows to price, and a reason when there are
    none (a graph past :data:`MAX_OPS`, or heads and tails not priced by ``deadline``)."""
    g, c = problem.graph, problem.cluster
    if g.n > MAX_OPS:
        return 0.0, [], f"declined: {g.n} ops (the split heads of at most {MAX_OPS} ops)"
    times = allowed_times(problem)
    comm = transfer_table(g, c)
    serial = ~np.asarray(c.parallel, dtype=bool)
    heads, done = split_heads(g, times, comm, serial, deadline=deadline)
    tails, done = split_heads(g, times, comm, serial, reverse=True, deadline=deadline) if done else (heads, False)
    if not done:
        return 0.0, [], "declined: the split heads and tails were not priced in time"
    return critical_windows(problem, heads, tails, times) + ("",)


def critical_windows(problem: Any, heads: np.ndarray, tails: np.ndarray, times: np.ndarray,
                     windows: int = WINDOWS) -> tuple[float, list[Window]]:
    """The heads' longest path (``max_v min_d R + p + T``) and the windows to price with ``heads`` and ``tails`` (any
    lower bounds on each op's start and on what follows its end, per device): the whole graph when small, and the
    :data:`WINDOW_OPS` ops nearest in topological order to each of the ``windows`` most critical ops."""
    g, c = problem.graph, problem.cluster
    with np.errstate(invalid="ignore"):
        through = np.nan_to_num(heads + times + tails, nan=np.inf).min(axis=1)
    through = np.where(np.isfinite(through), through, 0.0)
    path = float(through.max(initial=0.0))
    mode = problem.cost_model().congestion
    chosen: list[tuple[np.ndarray, str | None]] = []
    if g.n <= WHOLE_OPS:
        chosen.append((np.arange(g.n), None))
    if g.n > WINDOW_OPS:
        covered = np.zeros(g.n, dtype=bool)
        for v in np.argsort(-through, kind="stable").tolist():
            if len(chosen) >= windows + (g.n <= WHOLE_OPS) or through[v] <= 0:
                break
            if covered[v]:
                continue
            near = np.sort(np.argsort(np.abs(g.rank - g.rank[v]), kind="stable")[:WINDOW_OPS])
            covered[near] = True
            chosen.append((near, g.names[v]))
    return path, [window_of(g, c, mode, ops, centre, heads, tails, times) for ops, centre in chosen]


def window_of(g: Graph, c: Any, mode: Any, ops: np.ndarray, centre: str | None, heads: np.ndarray,
            tails: np.ndarray, times: np.ndarray) -> Window:
    """The window problem of ``ops`` (indices, in graph order) with its relative releases and tails."""
    keep = set(ops.tolist())
    edges = [(g.names[u], g.names[v]) for u, v in zip(g.src.tolist(), g.dst.tolist()) if u in keep and v in keep]
    name = f"{g.name}-window-{centre}" if centre is not None else f"{g.name}-whole"
    sub = Problem(Graph([g.ops[v] for v in ops.tolist()], edges, name=name), c, Makespan(),
                  [Congestion(None if mode == "none" else mode)])
    ok = np.isfinite(times[ops]) & np.isfinite(heads[ops]) & np.isfinite(tails[ops])
    release, tail = np.where(ok, heads[ops], np.inf), np.where(ok, tails[ops], np.inf)
    r0 = float(release.min(axis=1, initial=np.inf).min(initial=np.inf))
    q0 = float(tail.min(axis=1, initial=np.inf).min(initial=np.inf))
    r0, q0 = (r0 if np.isfinite(r0) else 0.0), (q0 if np.isfinite(q0) else 0.0)
    return Window(sub, release - r0, tail - q0, r0 + q0, len(ops), centre)
