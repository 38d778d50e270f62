"""Schedules into and out of MOIRAI's schedule MILP: the warm start and the re-timed read-back.

:func:`warm_schedule` turns a warm placement (with its schedule, else its list schedule, else the
:func:`serial_schedule`) into start times and the choice every pair of
:mod:`placement_dsl.blocks.schedule` takes; :func:`retime` re-times a solver's schedule in its
own order with exact (or rounded-up) durations, so a solver's tolerance never reaches the cost
model (used by the MILP read-back and by :mod:`placement_dsl.cpsat`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..congestion import TransferResources
from ..graph import least_first_order
from ..placement import Placement
from ..schedule import Schedule, check_schedule, list_schedule, transfer_tasks
from .base import Context, Warm
from .schedule_data import SLACK, ScheduleData


# ---------------------------------------------------------------------------- warm start
@dataclass(frozen=True)
class WarmSchedule:
    """A placement's schedule in model units, and the choice (apart, first, second) each pair takes."""

    start: np.ndarray
    task_start: np.ndarray
    channel: list[tuple[int, int] | None]
    op_order: dict[tuple[int, int], str]
    task_order: dict[tuple[int, int], str]
    makespan: float


def serial_schedule(placement: Placement) -> Schedule:
    """Every op and then its outgoing transfers, one after another in topological order: valid for any
    congestion, and never longer than :class:`ScheduleData`'s serial bound."""
    g = placement.graph
    dur = placement.op_times
    prod, recv, tdur = transfer_tasks(placement)
    start, moves, t = np.zeros(g.n), {}, 0.0
    for v in g.topo.tolist():
        start[v], t = t, t + dur[v]
        for k in np.flatnonzero(prod == v):
            moves[(v, int(recv[k]))], t = t, t + tdur[k]
    return Schedule(start, moves)


def _schedule(ctx: Context, warm: Warm, data: ScheduleData) -> Schedule:
    """The placement's schedule if valid within the horizon, else its list schedule, else the serial one."""
    placement = Placement(ctx.graph, ctx.cluster, warm.assign)
    limit = data.horizon * ctx.scale.time
    for make in (lambda: warm.schedule, lambda: list_schedule(placement, data.congestion)):
        schedule = make()
        if schedule is not None:
            makespan, bad = check_schedule(placement, schedule, data.congestion)
            if not bad and makespan <= limit:
                return schedule
    return serial_schedule(placement)


def _order(first: float, second: float, length: float, tol: float) -> str:
    return "first" if first + length <= second + tol else "second"


def _warm_schedule(ctx: Context, warm: Warm, data: ScheduleData) -> WarmSchedule:
    schedule, a, scale = _schedule(ctx, warm, data), warm.assign, ctx.scale.time
    start = schedule.start / scale
    dur = ctx.work[np.arange(ctx.n), a]
    task_start, channel = np.zeros(len(data.tasks)), []
    for k, t in enumerate(data.tasks):
        to = a[t.consumers[0]] if t.dest is None else t.dest
        needed = to != a[t.producer] and (t.dest is None or any(a[v] == to for v in t.consumers))
        channel.append((int(a[t.producer]), int(to)) if needed else None)
        task_start[k] = schedule.transfer_start[(t.producer, int(to))] / scale if needed else start[t.producer] + \
            dur[t.producer]
    tol = SLACK * data.horizon
    op_order = {(i, j): _order(start[i], start[j], dur[i], tol) if a[i] == a[j] and data.busy[i, a[i]]
                and data.busy[j, a[j]] else "apart" for i, j, _ in data.op_pairs}
    took = [0.0 if ch is None else data.time(t.producer, *ch) for t, ch in zip(data.tasks, channel)]
    moving = [ch if ch is not None and t > 0 else None for ch, t in zip(channel, took)]  # instants hold nothing
    task_order = {(k, j): _order(task_start[k], task_start[j], took[k], tol)
                  if moving[k] and moving[j] and data.held.shared(moving[k], moving[j]) else "apart"
                  for k, j, _ in data.task_pairs}
    finish = [task_start[k] + took[k] for k in range(len(data.tasks))]
    makespan = max(float((start + dur).max(initial=0.0)), max(finish, default=0.0))
    return WarmSchedule(start, task_start, channel, op_order, task_order, makespan)


def warm_schedule(ctx: Context, warm: Warm, data: ScheduleData) -> WarmSchedule:
    """The warm placement's :class:`WarmSchedule`, computed once per placement and horizon."""
    key = ("schedule_warm", id(data))
    cached = ctx.views.get(key)
    if cached is None or cached[0] is not warm:
        ctx.views[key] = (warm, _warm_schedule(ctx, warm, data))
    return ctx.views[key][1]


# ---------------------------------------------------------------------------- read-back
def retime(placement: Placement, schedule: Schedule, congestion: str,
           length: Callable[[float], Any] = float) -> tuple[list[Any], dict[tuple[int, int], Any], Any]:
    """``(op starts, {(u, d): transfer start}, makespan)``: the schedule's order kept, every task as early as it can be.

    Ops and transfers are taken in precedence order, by their start in ``schedule`` (ties: an op
    before its outgoing transfers, producers before consumers); each starts when its inputs are
    there and its device (unless it is parallel, a host), or the resources its transfer holds under ``congestion``
    (:class:`TransferResources`), are free, each lasting ``length(t)`` for its time ``t`` (e.g. rounded up to integer units). With ``length=float`` this removes a
    solver's rounding noise from a valid schedule without making it longer.
    """
    g, c, a = placement.graph, placement.cluster, placement.assign
    dur = [length(t) for t in placement.op_times]
    prod, recv, tdur = transfer_tasks(placement)
    move = {(int(u), int(d)): g.n + k for k, (u, d) in enumerate(zip(prod.tolist(), recv.tolist()))}
    preds: list[list[int]] = [[u if a[u] == a[v] else move[(u, int(a[v]))] for u in g.predecessors(v).tolist()]
                              for v in range(g.n)] + [[int(u)] for u in prod.tolist()]
    lengths = dur + [length(float(t)) for t in tdur]
    when = [float(schedule.start[v]) for v in range(g.n)] + [float(schedule.transfer_start[key]) for key in move]
    rank = [2 * int(r) for r in g.rank] + [2 * int(g.rank[u]) + 1 for u in prod.tolist()]
    start: list[Any] = [0] * len(preds)
    free: dict[Any, Any] = {}  # a device (its index) or a resource a transfer holds: when it is free again
    held, parallel = TransferResources(c, congestion), c.parallel.tolist()
    for i in _by_start(preds, when, rank):
        if lengths[i] <= 0:
            keys = []  # an instant holds nothing
        elif i < g.n:
            keys = [] if parallel[a[i]] else [int(a[i])]  # a host runs any number of ops at once, as the referee says
        else:
            keys = held(int(a[prod[i - g.n]]), int(recv[i - g.n]))
        start[i] = max([0, *(start[j] + lengths[j] for j in preds[i]), *(free.get(k, 0) for k in keys)])
        free.update((k, start[i] + lengths[i]) for k in keys)
    makespan = max((start[i] + lengths[i] for i in range(len(preds))), default=0)
    return start[:g.n], {key: start[i] for key, i in move.items()}, makespan


def _by_start(preds: list[list[int]], when: list[float], rank: list[int]) -> list[int]:
    """Tasks in precedence order, the earliest-starting available one first."""
    edges = [(j, i) for i, p in enumerate(preds) for j in p]
    return least_first_order(len(preds), edges, [(when[i], rank[i]) for i in range(len(preds))])


__all__ = ["WarmSchedule", "retime", "serial_schedule", "warm_schedule"]
