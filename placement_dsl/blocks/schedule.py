"""MOIRAI's schedule MILP (Zhang et al., §III-D, eq. 4-8) as block templates.

=====================  ===========================  ==============================================
block                  template                     paper
=====================  ===========================  ==============================================
``op_times``           :class:`OpTimes`             eq. (4a) on operator edges, (4b)
``transfers``          :class:`TransferTasks`       eq. (7): ``z_q`` and channel choice ``u_{qk'k''}``;
                                                    eq. (4a) over the augmented DAG (Fig. 8)
``device_overlap``     :class:`DeviceOverlap`       eq. (6) with an apart choice per pair
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
Each such pair gets one disjunction ``[apart] v [first] v [second]``, where ``apart`` says the
two never share a device (or port, or channel), instead of MOIRAI's one big-M pair per device:
a binary per choice, exactly one per pair, and each choice's rows relaxed by their big-M where
it is not taken (:func:`_pair_orders`; the rows ``gdp.bigm`` would write, written directly).
Every big-M comes from variable bounds taken from the data: start times lie in
``[head, H - fastest - tail]`` with ``head`` and ``tail`` the longest paths of fastest times
into and out of an op, and ``H`` a known makespan
(:class:`~placement_dsl.blocks.schedule_data.ScheduleData`), never a constant.

The data the templates share (tasks, bounds, pairs) is :mod:`placement_dsl.blocks.schedule_data`;
the warm start and the re-timing of a solver's schedule are :mod:`placement_dsl.blocks.schedule_warm`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..placement import Placement
from ..schedule import Schedule, transfer_tasks
from .base import AssignmentLink, BlockTemplate, Context, Link, ScheduleLink, Stage, Warm, register
from .lazy import pyo
from .schedule_data import ScheduleData, schedule_data
from .schedule_warm import WarmSchedule, retime, warm_schedule


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


# ---------------------------------------------------------------------------- pair orders
Row = tuple[Any, float, float]  # a choice's row ``body <= bound``: body, bound and its big-M, the most the body
# exceeds the bound within the variables' bounds


def _pair_orders(blk: pyo.Block, pairs: list[tuple[Any, Any]], apart: list[tuple[Any, Any]],
                 apart_rows: Callable[[Any, Any], dict[Any, Row]],
                 order: Callable[[Any, Any], Row], what: str) -> None:
    """``[apart] v [i first] v [j first]`` per pair (``apart`` only where the pair may be separated), as big-M rows.

    One binary per choice, exactly one per pair (``order``); each choice's rows hold where its binary is 1 and are
    relaxed by their big-M where it is 0: ``body <= bound + M (1 - y)`` (``>=``: ``- M``). This is the MILP
    ``gdp.bigm`` made of the same disjunctions with the same big-Ms, row for row, written here directly: building
    the disjuncts and transforming them was 60 % of the model's build.
    """
    blk.pairs = index = pyo.Set(initialize=pairs, dimen=2, doc=f"pairs of {what} not ordered by precedence")
    blk.separable = pyo.Set(initialize=apart, dimen=2, doc=f"pairs of {what} that may be kept apart")
    blk.apart = pyo.Var(blk.separable, domain=pyo.Binary, doc=f"1 iff the two {what} never share a resource")
    blk.first = pyo.Var(index, domain=pyo.Binary, doc=f"1 iff of the two {what}, i precedes j")
    blk.second = pyo.Var(index, domain=pyo.Binary, doc=f"1 iff of the two {what}, j precedes i")
    apart_set, rows = set(apart), {}
    blk.order = pyo.Constraint(index, rule=lambda b, i, j: (b.apart[i, j] if (i, j) in apart_set else 0)
                               + b.first[i, j] + b.second[i, j] == 1,
                               doc=f"two {what} are apart or one precedes the other: exactly one choice")
    for i, j in apart:
        for r, row in apart_rows(i, j).items():
            rows[i, j, r] = row
    blk.apart_row = pyo.Constraint(
        pyo.Set(initialize=list(rows), dimen=3, doc=f"(i, j, resource r) rows of the pairs of {what} kept apart"),
        rule=lambda b, i, j, r: _relaxed(rows[i, j, r], b.apart[i, j]),
        doc=f"the two {what} do not share resource r, where they are kept apart")
    blk.first_row = pyo.Constraint(index, rule=lambda b, i, j: _relaxed(order(i, j), b.first[i, j]),
                                   doc=f"of the two {what}, i ends before j starts, where i is first")
    blk.second_row = pyo.Constraint(index, rule=lambda b, i, j: _relaxed(order(j, i), b.second[i, j]),
                                    doc=f"of the two {what}, j ends before i starts, where j is first")


def _relaxed(row: Row, chosen: Any) -> Any:
    """``row``'s ``body <= bound`` relaxed by its big-M where ``chosen`` is 0, as ``gdp.bigm`` writes it:
    ``body - M (1 - chosen) <= bound``; a row whose big-M is 0 holds whatever the choice."""
    body, bound, big_m = row
    return body <= bound if big_m == 0 else body - big_m * (1 - chosen) <= bound


def _upper(term: Any) -> float:
    """The upper bound of an assignment term: a number, or a variable within ``[0, 1]``."""
    if isinstance(term, (int, float)):
        return float(term)
    return 1.0 if term.ub is None else float(term.ub)


def _pair_values(blk: pyo.Block, choice: dict[tuple[Any, Any], str]) -> Iterator[tuple[Any, float]]:
    """The choice binaries of the block's pairs (``choice``: 'apart', 'first' or 'second')."""
    for label in ("apart", "first", "second"):
        for key, var in getattr(blk, label).items():
            yield var, float(choice[key] == label)


@register
class DeviceOverlap(_Timed):
    """MOIRAI eq. (6): ops not ordered by precedence that may share a device never overlap there (parallel
    host devices excepted: they run any number of ops at once, Tarnawski §4).

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

        def apart_rows(i: str, j: str) -> dict[Any, Row]:  # ops i and j are not both on device k
            terms = {k: (ctx.x(idx[i], dev[k]), ctx.x(idx[j], dev[k])) for k in shared[i, j]}
            return {k: (a + b, 1.0, max(_upper(a) + _upper(b) - 1, 0.0)) for k, (a, b) in terms.items()}

        def order(i: str, j: str) -> Row:
            v, u = idx[i], idx[j]
            longest = sum(float(ctx.work[v, d]) * _upper(ctx.x(v, d)) for d in range(ctx.D) if ctx.work[v, d] > 0)
            m = data.start_bounds(v)[1] + longest - data.start_bounds(u)[0]
            return times.start(v) + times.duration(v) - times.start(u), 0.0, max(m, 0.0)

        _pair_orders(blk, pairs, apart, apart_rows, order, "ops")

    def values(self, blk: pyo.Block, ctx: Context, warm: Warm) -> Iterator[tuple[Any, float]]:
        data, times, ops = self.data(ctx), self.warm(ctx, warm), ctx.ops
        choice = {(ops[i], ops[j]): times.op_order[i, j] for i, j, _ in data.op_pairs}
        yield from _pair_values(blk, choice)


@register
class TransferCongestion(_Timed):
    """MOIRAI eq. (8): transfers that may share a port (``mode="port"``: the sending or the receiving
    device), a channel (``"channel"``: the ordered pair) or a physical link (``"link"``: a link of both
    routes, :attr:`Cluster.route_links <placement_dsl.cluster.Cluster.route_links>`) never overlap there.

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

        def apart_rows(i: Any, j: Any) -> dict[Any, Row]:  # not both on this port or channel
            ki, kj = data.task_index[i], data.task_index[j]
            busy = [(data.busy_channels(ki, r), data.busy_channels(kj, r)) for r in usage[i, j]]
            return {r: (self._use(ctx, ki, a) + self._use(ctx, kj, b), 1.0, max(len(a) + len(b) - 1.0, 0.0))
                    for r, (a, b) in enumerate(busy)}

        def order(i: Any, j: Any) -> Row:
            ki, kj = data.task_index[i], data.task_index[j]
            u = data.tasks[ki].producer
            longest = sum(data.time(u, a, c) for a, c in data.task_channels[ki])
            m = data.task_bounds(ki)[1] + longest - data.task_bounds(kj)[0]
            return link.start(ki) + link.duration(ki) - link.start(kj), 0.0, max(m, 0.0)

        _pair_orders(blk, pairs, pairs, apart_rows, order, "transfers")

    @staticmethod
    def _use(ctx: Context, k: int, busy: list[tuple[int, int]]) -> Any:
        """Task ``k``'s use of a resource (a port ``(a, -1)`` out, ``(-1, b)`` in, channel ``(a, b)`` or link
        ``(-2, l)``) for a positive time: the sum of its channels ``busy`` there (:meth:`ScheduleData.busy_channels`)."""
        link = ctx.link(TaskLink)
        return sum(link.channel(k, a, c) for a, c in busy)

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
        serial = [d for d in ctx.devices if not ctx.cluster.parallel[ctx.cluster.index[d]]]
        blk.device_busy = pyo.Constraint(serial, rule=lambda b, d: b.makespan >= sum(
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


__all__ = ["DeviceOverlap", "MakespanObjective", "OpTimes", "ScheduleData", "TaskLink", "TimesLink",
           "TransferCongestion", "TransferTasks", "retime", "schedule_data", "warm_schedule"]
