"""MOIRAI's schedule MILP (Zhang et al., §III-D, eq. 4-8) as block templates.

=====================  ===========================  ==============================================
block                  template                     paper
=====================  ===========================  ==============================================
``op_times``           :class:`OpTimes`             eq. (4a) on operator edges, (4b)
``transfers``          :class:`TransferTasks`       eq. (7): ``z_q`` and channel choice ``u_{qk'k''}``;
                                                    eq. (4a) over the augmented DAG (Fig. 8)
``device_overlap``     :class:`DeviceOverlap`       eq. (6) with a same-device disjunct
``congestion``         :class:`TransferCongestion`  eq. (8), per port or per channel
``makespan``           :class:`MakespanObjective`   eq. (4) and device/port load cuts
=====================  ===========================  ==============================================

A transfer task carries producer ``u``'s output to another device: one task when ``u``'s
consumers outside its colocation unit form one unit (MOIRAI's flows: a flow node ``q`` of
the augmented DAG), else one task per receiving device ``d``. Its channel variables
``w[k, a, b]`` (MOIRAI's ``u_{qk'k''}``) are 1 when ``u`` runs on ``a`` and the output must
reach ``b``; its duration is ``sum w[k, a, b] p^comm_{u a b}``.

Non-overlap is written only for pairs that precedence does not already order (transitive
closure of the augmented DAG) and that may share a resource with positive durations (ops of
zero time and zero-time transfers are instants, as in :func:`~placement_dsl.schedule.check_schedule`).
Each such pair gets one ``pyomo.gdp`` disjunction ``[apart] v [first] v [second]``, where
``apart`` says the two never share a device (or port, or channel), instead of MOIRAI's one
big-M pair per device. Every big-M comes from variable bounds taken from the data (the
transformation derives it): start times lie in ``[head, H - fastest - tail]`` with ``head``
and ``tail`` the longest paths of fastest times into and out of an op, and ``H`` a known
makespan (:class:`~placement_dsl.blocks.schedule_data.ScheduleData`), never a constant.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.gdp import Disjunct, Disjunction

from ..constraints import Memory, congestion_of
from ..errors import InfeasibleError, SpecError
from ..placement import Placement
from ..schedule import Schedule, check_schedule, list_schedule, transfer_durations, transfer_tasks
from .base import AssignmentLink, BlockTemplate, Context, Link, ScheduleLink, Stage, Warm, register

Resource = tuple[int, int]  # (a, -1): out-port of a; (-1, b): in-port of b; (a, b): channel a -> b
SLACK = 1e-9  # the horizon is widened by this (relative and absolute) so the schedule that set it stays inside


@dataclass(frozen=True)
class TimesLink(Link):
    """Op times in model units: ``start(v)`` a variable, ``duration(v)`` an expression of the assignment."""

    start: Callable[[int], Any]
    duration: Callable[[int], Any]


@dataclass(frozen=True)
class TaskLink(Link):
    """Transfer tasks: ``start(k)``, ``duration(k)``, and ``channel(k, a, b)`` (1 iff task ``k`` runs on
    ``a -> b``; 0 where it cannot)."""

    start: Callable[[int], Any]
    duration: Callable[[int], Any]
    channel: Callable[[int, int, int], Any]


def _dur(ctx: Context, v: int) -> Any:
    return sum(float(ctx.work[v, d]) * ctx.x(v, d) for d in range(ctx.D) if ctx.work[v, d] > 0)


class _Timed(BlockTemplate):
    """A template reading the shared schedule data for one horizon (``None``: the data's default)."""

    def __init__(self, horizon: float | None = None):
        self.horizon = horizon

    def data(self, ctx: Context) -> ScheduleData:
        return schedule_data(ctx, self.horizon)

    def warm(self, ctx: Context, warm: Warm) -> WarmSchedule:
        return warm_schedule(ctx, warm, self.data(ctx))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({'' if self.horizon is None else f'horizon={self.horizon!r}'})"


# ---------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Task:
    """A transfer task: producer ``u``'s output to its consumers outside ``u``'s unit.

    ``dest`` is ``None`` when those consumers form one colocation unit (the task goes wherever
    they run: MOIRAI's flow node), else the one receiving device of this task.
    """

    producer: int
    consumers: tuple[int, ...]
    dest: int | None


class ScheduleData:
    """What the schedule templates share, in model units: times, bounds, tasks and the pairs to separate.

    ``horizon`` (cost-model units) is a known makespan; ``None`` takes the serial bound (every op
    on its slowest device and every transfer one after another), which no placement's best
    schedule exceeds. Pins restrict an op's unit to its device.
    """

    def __init__(self, ctx: Context, horizon: float | None):
        g, self.ctx, self.D = ctx.graph, ctx, ctx.D
        self.congestion = congestion_of(ctx.problem.constraints)
        self.allowed = ctx.unit_allowed[ctx.unit].copy()
        for v, d in ctx.pins.items():
            self.allowed[ctx.unit == ctx.unit[v]] = np.arange(ctx.D) == d
        _check_memory(ctx, self.allowed)
        self.busy = self.allowed & (ctx.work > 0)
        self.fastest = np.where(self.allowed, ctx.work, np.inf).min(axis=1)
        self.slowest = np.where(self.allowed, ctx.work, 0.0).max(axis=1)
        self._tasks(ctx)
        serial = float(self.slowest.sum() + sum(self.longest_transfer(k) for k in range(len(self.tasks))))
        bound = serial if horizon is None else min(serial, horizon / ctx.scale.time)
        self.horizon = bound * (1 + SLACK) + SLACK
        self.head, self.tail = _longest_paths(g, self.fastest)
        self.lower = max(float((self.head + self.fastest + self.tail).max(initial=0.0)),
                         float(self.fastest.sum()) / ctx.D)

    # ------------------------------------------------------------------ tasks
    def _tasks(self, ctx: Context) -> None:
        g, unit = ctx.graph, ctx.unit
        outs = {u: tuple(sorted({int(v) for v in g.successors(u) if unit[v] != unit[u]})) for u in range(ctx.n)}
        outs = {u: out for u, out in outs.items() if out}
        self._times = self._transfer_times(list(outs))
        self.tasks: list[Task] = []
        for u, out in outs.items():
            if len({int(unit[v]) for v in out}) == 1:
                self.tasks.append(Task(u, out, None))
                continue
            dests = np.flatnonzero(self.allowed[list(out)].any(axis=0))
            self.tasks += [Task(u, out, int(d)) for d in dests if (self.allowed[u] & (np.arange(ctx.D) != d)).any()]
        self.task_index = {self.task_key(k): k for k in range(len(self.tasks))}
        if len(self.task_index) < len(self.tasks):
            raise SpecError("schedule: an op name of the form 'producer@device' collides with a transfer task's name")
        self._carrier = {(t.producer, t.dest): k for k, t in enumerate(self.tasks)}
        self.task_channels = [self._channels(t) for t in self.tasks]
        self.channels = [(k, a, c) for k, chans in enumerate(self.task_channels) for a, c in sorted(chans)]

    def _transfer_times(self, producers: list[int]) -> dict[int, np.ndarray]:
        """``{u: (D, D)}`` transfer times of each producer's output (cost-model units)."""
        D = self.D
        u, a, b = (x.ravel() for x in np.meshgrid(producers, np.arange(D), np.arange(D), indexing="ij"))
        times = transfer_durations(self.ctx.graph, self.ctx.cluster, u, a, b).reshape(len(producers), D, D)
        return dict(zip(producers, times))

    def _channels(self, task: Task) -> set[tuple[int, int]]:
        ends = [task.dest] if task.dest is not None else np.flatnonzero(self.allowed[task.consumers[0]])
        return {(int(a), int(c)) for a in np.flatnonzero(self.allowed[task.producer]) for c in ends
                if a != c and np.isfinite(self.time(task.producer, a, c))}

    def time(self, u: int, a: int, c: int) -> float:
        """Transfer time of ``u``'s output from device ``a`` to ``c`` (model units; ``inf`` without a route)."""
        return float(self._times[u][a, c]) / self.ctx.scale.time

    def raw_time(self, u: int, a: int, c: int) -> float:
        """:meth:`time` in cost-model units."""
        return float(self._times[u][a, c])

    def task_key(self, k: int) -> str:
        """The task's name: its producer's, with ``@device`` for a task per receiving device."""
        t = self.tasks[k]
        return self.ctx.ops[t.producer] + ("" if t.dest is None else f"@{self.ctx.devices[t.dest]}")

    def carrier(self, u: int, d: int) -> int | None:
        """The task moving ``u``'s output to device ``d`` (``None`` if there is none)."""
        k = self._carrier.get((u, None))
        return self._carrier.get((u, d)) if k is None else k

    def arrivals(self, k: int) -> list[int]:
        """Consumers that wait for task ``k`` (those that may run on its device)."""
        t = self.tasks[k]
        return list(t.consumers) if t.dest is None else [v for v in t.consumers if self.allowed[v, t.dest]]

    def channel_needs(self) -> list[tuple[int, int, int, int]]:
        """``(k, a, c, v)``: channel ``a -> c`` of task ``k`` is needed when its consumer ``v`` runs on ``c``."""
        return [(k, a, c, v) for k, a, c in self.channels for v in self.arrivals(k)[:1 if self.tasks[k].dest is None
                                                                                    else None] if self.allowed[v, c]]

    @property
    def no_route(self) -> list[tuple[int, int, int, int]]:
        """``(u, a, v, c)``: producer on ``a`` and consumer on ``c`` with no route between them."""
        out = set()
        for t in self.tasks:
            for v in t.consumers:
                ends = [t.dest] if t.dest is not None else np.flatnonzero(self.allowed[v])
                out |= {(t.producer, int(a), v, int(c)) for a in np.flatnonzero(self.allowed[t.producer])
                        for c in ends if a != c and self.allowed[v, c] and not np.isfinite(self.time(t.producer, a, c))}
        return sorted(out)

    def longest_transfer(self, k: int) -> float:
        return max((self.time(self.tasks[k].producer, a, c) for a, c in self.task_channels[k]), default=0.0)

    # ------------------------------------------------------------------ bounds
    def start_bounds(self, v: int) -> tuple[float, float]:
        """``S_v`` lies in ``[head_v, H - fastest_v - tail_v]`` in every schedule within the horizon."""
        return float(self.head[v]), float(self.horizon - self.fastest[v] - self.tail[v])

    def task_bounds(self, k: int) -> tuple[float, float]:
        """A task starts after its producer's earliest completion and before its consumers' latest start."""
        u = self.tasks[k].producer
        late = min(self.start_bounds(v)[1] for v in self.arrivals(k))
        return float(self.head[u] + self.fastest[u]), late

    # ------------------------------------------------------------------ pairs
    @cached_property
    def reach(self) -> np.ndarray:
        """``reach[i, j]``: a path leads from op ``i`` to op ``j`` (the transitive closure, ``i != j``)."""
        g = self.ctx.graph
        reach = np.zeros((g.n, g.n), dtype=bool)
        for u in g.topo[::-1].tolist():
            for v in g.successors(u).tolist():
                reach[u, v] = True
                reach[u] |= reach[v]
        return reach

    @cached_property
    def op_pairs(self) -> list[tuple[int, int, list[str]]]:
        """``(i, j, devices)``: ops that may both take time on those devices and that neither precedence nor
        their time windows order (``i`` surely ends before ``j`` starts when ``latest S_i + p_i <= earliest S_j``)."""
        ops = np.flatnonzero(self.busy.any(axis=1))
        first, last = self.head, self.horizon - self.fastest - self.tail + self.slowest
        out = []
        for pos, i in enumerate(ops):
            rest = ops[pos + 1:]
            rest = rest[~self.reach[i, rest] & ~self.reach[rest, i] & (self.busy[rest] & self.busy[i]).any(axis=1)
                        & (last[i] > first[rest]) & (last[rest] > first[i])]
            out += [(int(i), int(j), [self.ctx.devices[d] for d in np.flatnonzero(self.busy[i] & self.busy[j])])
                    for j in rest]
        return out

    def separable(self, i: int, j: int) -> bool:
        """Ops ``i`` and ``j`` may avoid sharing a busy device (false for a unit busy on all its devices)."""
        shared = self.busy[i] & self.busy[j]
        return self.ctx.unit[i] != self.ctx.unit[j] or bool((self.allowed[i] & ~shared).any())

    def busy_channels(self, k: int, resource: Resource) -> list[tuple[int, int]]:
        """Channels of task ``k`` on ``resource`` that take a positive time."""
        a0, c0 = resource
        u = self.tasks[k].producer
        return [(a, c) for a, c in sorted(self.task_channels[k]) if (a0 < 0 or a == a0) and (c0 < 0 or c == c0)
                and self.time(u, a, c) > 0]

    def resources(self) -> list[Resource]:
        """The ports (``"port"``) or channels (``"channel"``) transfers contend for; none for ``"none"``."""
        D = range(self.D)
        if self.congestion == "port":
            return [(a, -1) for a in D] + [(-1, b) for b in D]
        return [(a, b) for a in D for b in D if a != b] if self.congestion == "channel" else []

    def _precedes(self, k: int, j: int) -> bool:
        """Task ``k`` ends before task ``j`` starts in every schedule within the horizon: its consumers all
        precede ``j``'s producer, or its latest end is before ``j``'s earliest start."""
        u = self.tasks[j].producer
        return (all(v == u or self.reach[v, u] for v in self.arrivals(k))
                or self.task_bounds(k)[1] + self.longest_transfer(k) <= self.task_bounds(j)[0])

    @cached_property
    def task_pairs(self) -> list[tuple[int, int, list[Resource]]]:
        """``(k, j, resources)``: tasks not ordered by precedence (or their windows) that may share those resources."""
        used = [{r for r in self.resources() if self.busy_channels(k, r)} for k in range(len(self.tasks))]
        return [(k, j, sorted(used[k] & used[j])) for k in range(len(self.tasks)) for j in range(k + 1, len(self.tasks))
                if used[k] & used[j] and not self._precedes(k, j) and not self._precedes(j, k)]


def _check_memory(ctx: Context, allowed: np.ndarray) -> None:
    """:class:`InfeasibleError` naming an op (and its colocation group) that no device it may run on can hold."""
    if not ctx.problem.has(Memory):
        return
    need = np.bincount(ctx.unit, weights=ctx.mem, minlength=ctx.n) * ctx.scale.memory
    cap = ctx.capacity * ctx.scale.memory
    for u in ctx.units:
        devs = np.flatnonzero(allowed[u])
        if need[u] > cap[devs].max(initial=0.0) * (1 + SLACK):
            members = [ctx.ops[v] for v in np.flatnonzero(ctx.unit == u)]
            raise InfeasibleError(f"op {ctx.ops[u]!r} (colocated with {members}) needs memory {need[u]:.6g}; no device "
                                  f"it may run on holds it: {', '.join(f'{ctx.devices[d]}={cap[d]:.6g}' for d in devs)}")


def _longest_paths(graph: Any, fastest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Heads (longest path of fastest times before an op) and tails (after it)."""
    head, tail = np.zeros(graph.n), np.zeros(graph.n)
    for v in graph.topo.tolist():
        preds = graph.predecessors(v)
        head[v] = (head[preds] + fastest[preds]).max(initial=0.0)
    for v in graph.topo[::-1].tolist():
        succ = graph.successors(v)
        tail[v] = (tail[succ] + fastest[succ]).max(initial=0.0)
    return head, tail


def schedule_data(ctx: Context, horizon: float | None) -> ScheduleData:
    """The shared :class:`ScheduleData` of a model for ``horizon`` (built once)."""
    return ctx.view(f"schedule:{horizon!r}", lambda: ScheduleData(ctx, horizon))


# ---------------------------------------------------------------------------- op times
@register
class OpTimes(_Timed):
    """Start times ``S_v`` in ``[head_v, H - fastest_v - tail_v]``; ``S_v >= S_u + p_u`` on every edge (eq. 4a-4b).

    ``p_u = sum_d p_{ud} x_{ud}`` (eq. 4b). The edge rows hold across devices too: a transfer
    starts after its producer ends and the consumer after it arrives.
    """

    name = "op_times"
    provides = (TimesLink,)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        data, ops = self.data(ctx), ctx.ops
        blk.S = pyo.Var(ops, bounds=lambda b, v: data.start_bounds(ctx.graph.index[v]),
                        doc="S[v]: start time of op v (scaled time), within its head and the horizon minus its tail")
        edges = sorted({(int(u), int(v)) for u, v in zip(ctx.graph.src, ctx.graph.dst)})
        blk.precedence = pyo.Constraint(
            [(ops[u], ops[v]) for u, v in edges],
            rule=lambda b, u, v: b.S[v] >= b.S[u] + _dur(ctx, ctx.graph.index[u]),
            doc="op v starts after its predecessor u completes (eq. 4a with C_u = S_u + p_u, eq. 4b)")
        ctx.provide(TimesLink(start=lambda v: blk.S[ops[v]], duration=lambda v: _dur(ctx, v)), by=repr(self))

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        times = self.warm(ctx, warm)
        for v, name in enumerate(ctx.ops):
            yield blk.S[name], float(times.start[v])


# ---------------------------------------------------------------------------- transfer tasks
@register
class TransferTasks(_Timed):
    """MOIRAI eq. (7): channel choice ``w[k, a, b] >= x_{ua} + x_{vb} - 1`` and task start ``T_k >= C_u``;
    the consumer starts after the transfer ends (eq. 4a over the augmented DAG)."""

    name = "transfers"
    needs = (AssignmentLink, TimesLink)
    provides = (TaskLink, ScheduleLink)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        data = self.data(ctx)
        keys = [data.task_key(k) for k in range(len(data.tasks))]
        blk.tasks = pyo.Set(initialize=keys, doc="transfer tasks: a producer, or 'producer@receiving device'")
        blk.T = pyo.Var(blk.tasks, bounds=lambda b, k: data.task_bounds(data.task_index[k]),
                        doc="T[k]: start time of transfer task k (scaled time)")
        chans = [(keys[k], ctx.devices[a], ctx.devices[c]) for k, a, c in data.channels]
        blk.w = pyo.Var(pyo.Set(initialize=chans, dimen=3, doc="(task, a, b) channels a task may take"), domain=pyo.Binary,
                        doc="w[k, a, b] = 1 iff task k moves its tensor from device a to b (MOIRAI u_{qk'k''})")
        self._rows(blk, ctx, data, keys)
        self._provide(blk, ctx, data, keys)

    def _rows(self, blk: pyo.Block, ctx: Context, data: ScheduleData, keys: list[str]) -> None:
        times = ctx.link(TimesLink)
        rows = [(keys[k], ctx.devices[a], ctx.devices[c], ctx.ops[v]) for k, a, c, v in data.channel_needs()]
        dev, idx = ctx.cluster.index, ctx.graph.index
        producer = {keys[k]: t.producer for k, t in enumerate(data.tasks)}
        blk.needed = pyo.Constraint(
            pyo.Set(initialize=rows, dimen=4, doc="(task, a, b, consumer) channel needs"),
            rule=lambda b, k, a, c, v: b.w[k, a, c] >= ctx.x(producer[k], dev[a]) + ctx.x(idx[v], dev[c]) - 1,
            doc="task k uses channel a -> b when its producer runs on a and consumer v on b (eq. 7, z_q and u)")
        blanks = [(ctx.ops[u], ctx.devices[a], ctx.ops[v], ctx.devices[c]) for u, a, v, c in data.no_route]
        blk.no_route = pyo.Constraint(
            pyo.Set(initialize=blanks, dimen=4, doc="(producer, a, consumer, b) pairs without a route"),
            rule=lambda b, u, a, v, c: ctx.x(idx[u], dev[a]) + ctx.x(idx[v], dev[c]) <= 1,
            doc="no route from device a to c: producer u on a excludes its consumer v on c")
        blk.ready = pyo.Constraint(
            blk.tasks, rule=lambda b, k: b.T[k] >= times.start(producer[k]) + times.duration(producer[k]),
            doc="a transfer starts after its producer completes (eq. 4a, operator -> flow)")
        arrive = [(keys[k], ctx.ops[v]) for k in range(len(data.tasks)) for v in data.arrivals(k)]
        waits = pyo.Set(initialize=arrive, dimen=2, doc="(task, consumer) pairs: the consumer waits for the task")
        blk.arrive = pyo.Constraint(waits, rule=lambda b, k, v: self._arrive(
            b, ctx, data, data.task_index[k], idx[v]), doc="consumer v starts after the transfer ends (eq. 4a)")

    def _arrive(self, blk: pyo.Block, ctx: Context, data: ScheduleData, k: int, v: int) -> Any:
        """``S_v >= T_k + dur_k`` (one destination unit), else ``- M (1 - x_{v d})`` with ``M`` from the bounds."""
        task, times = data.tasks[k], ctx.link(TimesLink)
        lhs = times.start(v) - blk.T[data.task_key(k)] - self._duration(blk, ctx, data, k)
        if task.dest is None:
            return lhs >= 0
        big_m = data.task_bounds(k)[1] + data.longest_transfer(k) - data.start_bounds(v)[0]
        return lhs >= -max(big_m, 0.0) * (1 - ctx.x(v, task.dest))

    @staticmethod
    def _duration(blk: pyo.Block, ctx: Context, data: ScheduleData, k: int) -> Any:
        u = data.tasks[k].producer
        return sum(float(data.time(u, a, c)) * blk.w[data.task_key(k), ctx.devices[a], ctx.devices[c]]
                   for a, c in data.task_channels[k])

    def _provide(self, blk: pyo.Block, ctx: Context, data: ScheduleData, keys: list[str]) -> None:
        def channel(k: int, a: int, c: int) -> Any:
            return blk.w[keys[k], ctx.devices[a], ctx.devices[c]] if (a, c) in data.task_channels[k] else 0

        ctx.provide(TaskLink(start=lambda k: blk.T[keys[k]], channel=channel,
                             duration=lambda k: self._duration(blk, ctx, data, k)), by=repr(self))
        snap = _Snap(ctx, data, blk)
        ctx.provide(ScheduleLink(start=snap.start, transfer_start=snap.transfer_start), by=repr(self))

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        data, times = self.data(ctx), self.warm(ctx, warm)
        for k in range(len(data.tasks)):
            yield blk.T[data.task_key(k)], float(times.task_start[k])
        for (key, a, c), var in blk.w.items():
            k = data.task_index[key]
            yield var, float(times.channel[k] == (ctx.cluster.index[a], ctx.cluster.index[c]))


class _Snap:
    """The solution's schedule as :class:`~.base.ScheduleLink` reads it: the solver's start times re-timed in
    their order with exact durations (:func:`retime`), so a solver's feasibility tolerance never reaches the
    cost model's stricter check; the referee still compares the makespan with the solver's."""

    def __init__(self, ctx: Context, data: ScheduleData, blk: pyo.Block):
        self.ctx, self.data, self.blk = ctx, data, blk
        self._key: tuple[Any, ...] | None = None
        self._times: tuple[list[float], dict[tuple[int, int], float]] = ([], {})

    def _current(self) -> tuple[list[float], dict[tuple[int, int], float]] | None:
        ctx, times = self.ctx, self.ctx.link(TimesLink)
        key = tuple(times.start(v).value for v in range(ctx.n)) + tuple(t.value for t in self.blk.T.values())
        if None in key:
            return None
        if key != self._key:
            x = np.array([[pyo.value(ctx.x(v, d)) for d in range(ctx.D)] for v in range(ctx.n)], dtype=float)
            placement = Placement(ctx.graph, ctx.cluster, np.nanargmax(np.nan_to_num(x, nan=-1.0), axis=1))
            prod, recv, _ = transfer_tasks(placement)
            moves = {(u, d): self.blk.T[self.data.task_key(self.data.carrier(u, d))].value * ctx.scale.time
                     for u, d in zip(prod.tolist(), recv.tolist())}
            raw = Schedule(np.maximum(np.array(key[:ctx.n]), 0.0) * ctx.scale.time, moves)
            starts, moved, _ = retime(placement, raw, self.data.congestion)
            self._key, self._times = key, ([t / ctx.scale.time for t in starts],
                                           {k: t / ctx.scale.time for k, t in moved.items()})
        return self._times

    def start(self, v: int) -> Any:
        times = self._current()
        return self.ctx.link(TimesLink).start(v) if times is None else times[0][v]

    def transfer_start(self, u: int, d: int) -> Any:
        k, times = self.data.carrier(u, d), self._current()
        if k is None or times is None:
            return None if k is None else self.blk.T[self.data.task_key(k)]
        return times[1].get((u, d), self.blk.T[self.data.task_key(k)].value)


# ---------------------------------------------------------------------------- disjunctions
def _pair_disjunctions(blk: pyo.Block, pairs: list[tuple[Any, Any]], apart: list[tuple[Any, Any]],
                       apart_rows: Callable[[Disjunct, Any, Any], None],
                       order: Callable[[Any, Any], Any], what: str) -> None:
    """``[apart] v [i first] v [j first]`` per pair (``apart`` only where the pair may be separated)."""
    index = pyo.Set(initialize=pairs, dimen=2, doc=f"pairs of {what} not ordered by precedence")
    blk.pairs = index
    separate = pyo.Set(initialize=apart, dimen=2, doc=f"pairs of {what} that may be kept apart")
    blk.apart = Disjunct(separate, rule=lambda d, i, j: apart_rows(d, i, j),
                         doc=f"the two {what} never share a resource")
    blk.first = Disjunct(index, rule=lambda d, i, j: d.add_component("row", pyo.Constraint(
        expr=order(i, j), doc=f"{what} i ends before j starts")), doc=f"{what} i precedes j")
    blk.second = Disjunct(index, rule=lambda d, i, j: d.add_component("row", pyo.Constraint(
        expr=order(j, i), doc=f"{what} j ends before i starts")), doc=f"{what} j precedes i")
    separable = set(apart)
    blk.order = Disjunction(index, rule=lambda b, i, j: ([b.apart[i, j]] if (i, j) in separable else [])
                            + [b.first[i, j], b.second[i, j]],
                            doc=f"two {what} are apart or one precedes the other")


def _pair_values(blk: pyo.Block, choice: dict[tuple[Any, Any], str]) -> Iterator[tuple[Any, float]]:
    """Indicator binaries of every disjunct of the block (``choice``: 'apart', 'first' or 'second')."""
    for label in ("apart", "first", "second"):
        for key, disjunct in getattr(blk, label).items():
            yield disjunct.binary_indicator_var, float(choice[key] == label)


@register
class DeviceOverlap(_Timed):
    """MOIRAI eq. (6): ops not ordered by precedence that may share a device never overlap there.

    ``apart``: ``x_{id} + x_{jd} <= 1`` on every device both may occupy for a positive time
    (absent for colocated ops); ``first``: ``S_j >= S_i + p_i``; ``second``: ``S_i >= S_j + p_j``.
    """

    name = "device_overlap"
    needs = (AssignmentLink, TimesLink)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        data, ops, idx, times = self.data(ctx), ctx.ops, ctx.graph.index, ctx.link(TimesLink)
        pairs = [(ops[i], ops[j]) for i, j, _ in data.op_pairs]
        shared = {(ops[i], ops[j]): devs for i, j, devs in data.op_pairs}
        apart = [(ops[i], ops[j]) for i, j, _ in data.op_pairs if data.separable(i, j)]
        dev = ctx.cluster.index

        def apart_rows(d: Disjunct, i: str, j: str) -> None:
            d.row = pyo.Constraint(shared[i, j], rule=lambda _, k: ctx.x(idx[i], dev[k]) + ctx.x(idx[j], dev[k]) <= 1,
                                   doc="ops i and j are not both on device k")

        _pair_disjunctions(blk, pairs, apart, apart_rows,
                           lambda i, j: times.start(idx[j]) >= times.start(idx[i]) + times.duration(idx[i]), "ops")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        data, times, ops = self.data(ctx), self.warm(ctx, warm), ctx.ops
        choice = {(ops[i], ops[j]): times.op_order[i, j] for i, j, _ in data.op_pairs}
        yield from _pair_values(blk, choice)


@register
class TransferCongestion(_Timed):
    """MOIRAI eq. (8): transfers that may share a port (``mode="port"``: the sending or the receiving
    device) or a channel (``"channel"``: the ordered pair) never overlap there.

    ``apart``: the two tasks do not both use that port (channel) for a positive time;
    ``first``: ``T_j >= T_i + dur_i``; ``second`` likewise. ``"none"`` builds nothing.
    """

    name = "congestion"
    needs = (AssignmentLink, TaskLink)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        data, link = self.data(ctx), ctx.link(TaskLink)
        key = data.task_key
        pairs = [(key(k), key(j)) for k, j, _ in data.task_pairs]
        usage = {(key(k), key(j)): rows for k, j, rows in data.task_pairs}

        def apart_rows(d: Disjunct, i: Any, j: Any) -> None:
            rows = usage[i, j]
            d.row = pyo.Constraint(range(len(rows)), rule=lambda _, r: self._use(ctx, data, i, rows[r])
                                   + self._use(ctx, data, j, rows[r]) <= 1, doc="not both on this port or channel")

        def order(i: Any, j: Any) -> Any:
            ki, kj = data.task_index[i], data.task_index[j]
            return link.start(kj) >= link.start(ki) + link.duration(ki)

        _pair_disjunctions(blk, pairs, pairs, apart_rows, order, "transfers")

    @staticmethod
    def _use(ctx: Context, data: ScheduleData, key: Any, resource: tuple[int, ...]) -> Any:
        """Task ``key``'s use of a port ``(a, -1)`` out, ``(-1, b)`` in, or channel ``(a, b)`` for a positive time."""
        k = data.task_index[key]
        link = ctx.link(TaskLink)
        return sum(link.channel(k, a, c) for a, c in data.busy_channels(k, resource))

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        data, times = self.data(ctx), self.warm(ctx, warm)
        choice = {(data.task_key(k), data.task_key(j)): times.task_order[k, j] for k, j, _ in data.task_pairs}
        yield from _pair_values(blk, choice)


# ---------------------------------------------------------------------------- objective
@register
class MakespanObjective(_Timed):
    """MOIRAI eq. (4): ``minimize C_max`` with ``C_max >= S_v + p_v`` for every op without successors.

    Valid cuts: a device's busy time ``sum_v p_{vd} x_{vd}`` and (per congestion mode) a port's or
    channel's busy time fit in ``[0, C_max]``; ``C_max`` lies in ``[LB, H]``, LB the longest path of
    fastest times and the total fastest time over the devices.
    """

    name = "makespan"
    stage = Stage.OBJECTIVE
    needs = (AssignmentLink, TimesLink, TaskLink)

    def build(self, blk: pyo.Block, ctx: Context) -> None:
        data, times, link = self.data(ctx), ctx.link(TimesLink), ctx.link(TaskLink)
        blk.makespan = pyo.Var(bounds=(data.lower, data.horizon), doc="C_max: the last completion (scaled time)")
        sinks = [ctx.ops[v] for v in range(ctx.n) if ctx.graph.successors(v).size == 0]
        idx = ctx.graph.index
        blk.last = pyo.Constraint(sinks, rule=lambda b, v: b.makespan >= times.start(idx[v]) + times.duration(idx[v]),
                                  doc="C_max is at least every final op's completion (eq. 4)")
        blk.device_busy = pyo.Constraint(ctx.devices, rule=lambda b, d: b.makespan >= sum(
            float(ctx.work[v, ctx.cluster.index[d]]) * ctx.x(v, ctx.cluster.index[d]) for v in range(ctx.n)
            if ctx.work[v, ctx.cluster.index[d]] > 0), doc="device d runs its ops one at a time within [0, C_max]")
        resources = data.resources()
        blk.link_busy = pyo.Constraint(range(len(resources)), rule=lambda b, r: b.makespan >= sum(
            float(data.time(data.tasks[k].producer, a, c)) * link.channel(k, a, c)
            for k in range(len(data.tasks)) for a, c in data.busy_channels(k, resources[r])),
            doc="a port (or channel) moves one tensor at a time within [0, C_max] (eq. 8)")
        blk.goal = pyo.Objective(expr=blk.makespan, sense=pyo.minimize, doc="minimize the makespan (eq. 4)")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        yield blk.makespan, float(self.warm(ctx, warm).makespan)


# ---------------------------------------------------------------------------- warm start
@dataclass(frozen=True)
class WarmSchedule:
    """A placement's schedule in model units, and the disjunct each pair takes."""

    start: np.ndarray
    task_start: np.ndarray
    channel: list[tuple[int, int] | None]
    op_order: dict[tuple[int, int], str]
    task_order: dict[tuple[int, int], str]
    makespan: float


def serial_schedule(placement: Placement) -> Schedule:
    """Every op and then its outgoing transfers, one after another in topological order: valid for any
    congestion, and never longer than :class:`ScheduleData`'s serial bound."""
    g, c, a = placement.graph, placement.cluster, placement.assign
    dur = c.times(g)[np.arange(g.n), a]
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
    task_order = {(k, j): _order(task_start[k], task_start[j], took[k], tol)
                  if _contend(channel[k], channel[j], took[k], took[j], data.congestion) else "apart"
                  for k, j, _ in data.task_pairs}
    finish = [task_start[k] + took[k] for k in range(len(data.tasks))]
    makespan = max(float((start + dur).max(initial=0.0)), max(finish, default=0.0))
    return WarmSchedule(start, task_start, channel, op_order, task_order, makespan)


def _contend(one: tuple[int, int] | None, other: tuple[int, int] | None, t1: float, t2: float, mode: str) -> bool:
    """Two transfers on these channels, lasting these times, share a port (or the channel) under ``mode``."""
    if one is None or other is None or t1 <= 0 or t2 <= 0:
        return False
    if mode == "port":
        return one[0] == other[0] or one[1] == other[1]
    return mode == "channel" and one == other


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
    there and its device, ports or channel (``congestion``) are free, each lasting ``length(t)``
    for its time ``t`` (e.g. rounded up to integer units). With ``length=float`` this removes a
    solver's rounding noise from a valid schedule without making it longer.
    """
    g, c, a = placement.graph, placement.cluster, placement.assign
    dur = [length(t) for t in c.times(g)[np.arange(g.n), a]]
    prod, recv, tdur = transfer_tasks(placement)
    move = {(int(u), int(d)): g.n + k for k, (u, d) in enumerate(zip(prod.tolist(), recv.tolist()))}
    preds: list[list[int]] = [[u if a[u] == a[v] else move[(u, int(a[v]))] for u in g.predecessors(v).tolist()]
                              for v in range(g.n)] + [[int(u)] for u in prod.tolist()]
    lengths = dur + [length(float(t)) for t in tdur]
    when = [float(schedule.start[v]) for v in range(g.n)] + [float(schedule.transfer_start[key]) for key in move]
    rank = [2 * int(r) for r in g.rank] + [2 * int(g.rank[u]) + 1 for u in prod.tolist()]
    start: list[Any] = [0] * len(preds)
    free: dict[tuple[str, int], Any] = {}
    for i in _by_start(preds, when, rank):
        keys = _resources(i, g.n, a, prod, recv, congestion, c.size) if lengths[i] > 0 else []
        start[i] = max([0, *(start[j] + lengths[j] for j in preds[i]), *(free.get(k, 0) for k in keys)])
        free.update((k, start[i] + lengths[i]) for k in keys)
    makespan = max((start[i] + lengths[i] for i in range(len(preds))), default=0)
    return start[:g.n], {key: start[i] for key, i in move.items()}, makespan


def _by_start(preds: list[list[int]], when: list[float], rank: list[int]) -> list[int]:
    """Tasks in precedence order, the earliest-starting available one first."""
    succ: list[list[int]] = [[] for _ in preds]
    left = [len(p) for p in preds]
    for i, p in enumerate(preds):
        for j in p:
            succ[j].append(i)
    heap = [(when[i], rank[i], i) for i in range(len(preds)) if not left[i]]
    heapq.heapify(heap)
    order = []
    while heap:
        i = heapq.heappop(heap)[2]
        order.append(i)
        for j in succ[i]:
            left[j] -= 1
            if not left[j]:
                heapq.heappush(heap, (when[j], rank[j], j))
    return order


def _resources(i: int, n: int, a: np.ndarray, prod: np.ndarray, recv: np.ndarray, congestion: str,
               D: int) -> list[tuple[str, int]]:
    if i < n:
        return [("device", int(a[i]))]
    src, dst = int(a[prod[i - n]]), int(recv[i - n])
    return {"port": [("out", src), ("in", dst)], "channel": [("channel", src * D + dst)]}.get(congestion, [])


__all__ = ["DeviceOverlap", "MakespanObjective", "OpTimes", "ScheduleData", "TaskLink", "TimesLink",
           "TransferCongestion", "TransferTasks", "schedule_data", "warm_schedule"]
