"""The data MOIRAI's schedule templates share (Zhang et al., §III-D): times, transfer tasks, bounds, pairs.

:class:`ScheduleData` is computed once per model and horizon (:func:`schedule_data`) and read by
every template of :mod:`placement_dsl.blocks.schedule`, by the warm start
(:mod:`placement_dsl.blocks.schedule_warm`) and by the CP-SAT model (:mod:`placement_dsl.cpsat`).
It derives every big-M of the formulation from the data, never a constant:

* ``horizon`` ``H``: a known makespan (the warm start's), or the serial bound (every op on its
  slowest device, every transfer one after another), widened by :data:`SLACK`;
* ``head`` / ``tail``: longest paths of fastest times into and out of each op, so a start lies in
  ``[head_v, H - fastest_v - tail_v]`` (:meth:`ScheduleData.start_bounds`);
* transfer tasks (:class:`Task`: MOIRAI's flow nodes ``q`` of the augmented DAG, Fig. 8) with their
  channels and times per ordered device pair;
* the pairs to separate: ops (:attr:`ScheduleData.op_pairs`) and transfers
  (:attr:`ScheduleData.task_pairs`) that neither precedence (transitive closure) nor their time
  windows order and that may share a device, port or channel.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..congestion import Resource, TransferResources
from ..constraints import Memory, congestion_of
from ..errors import InfeasibleError, SpecError
from ..schedule import transfer_durations
from .base import Context

SLACK = 1e-9  # the horizon is widened by this (relative and absolute) so the schedule that set it stays inside


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
        self.held = TransferResources(ctx.cluster, self.congestion)  # what a transfer a -> b holds: ports, channel, links
        self.allowed = ctx.unit_allowed[ctx.unit].copy()
        for v, d in ctx.pins.items():
            self.allowed[ctx.unit == ctx.unit[v]] = np.arange(ctx.D) == d
        _check_memory(ctx, self.allowed)
        self.parallel = ctx.cluster.parallel  # host devices run any number of ops at once (Tarnawski §4)
        self.busy = self.allowed & (ctx.work > 0) & ~self.parallel  # ops that hold a device one at a time
        self.fastest = np.where(self.allowed, ctx.work, np.inf).min(axis=1)
        self.slowest = np.where(self.allowed, ctx.work, 0.0).max(axis=1)
        self._tasks(ctx)
        serial = float(self.slowest.sum() + sum(self.longest_transfer(k) for k in range(len(self.tasks))))
        bound = serial if horizon is None else min(serial, horizon / ctx.scale.time)
        self.horizon = bound * (1 + SLACK) + SLACK
        self.head, self.tail = longest_paths(g, self.fastest)
        serial_only = self.fastest if not self.parallel.any() else np.zeros(ctx.n)  # a host takes any work at once
        self.lower = max(float((self.head + self.fastest + self.tail).max(initial=0.0)),
                         float(serial_only.sum()) / ctx.D)

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
        """A task starts after its producer's earliest completion and before the latest start of a consumer that
        waits for it.

        A task to one colocation unit is waited for by all its consumers (the least of their latest starts); a task
        per receiving device only by the consumers that run there, which may be any of :meth:`arrivals` (the
        greatest): the least cut off a placement whose consumer on that device starts after another consumer's
        latest start elsewhere (a broadcast whose other branch is longer). Unneeded, the task starts when its
        producer completes, before every consumer.
        """
        t, late = self.tasks[k], [self.start_bounds(v)[1] for v in self.arrivals(k)]
        return float(self.head[t.producer] + self.fastest[t.producer]), min(late) if t.dest is None else max(late)

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
        """Channels ``(a, c)`` of task ``k`` that hold ``resource`` (:attr:`held`) for a positive time."""
        return self._busy[k].get(resource, [])

    @cached_property
    def _busy(self) -> list[dict[Resource, list[tuple[int, int]]]]:
        """Per task, the channels holding each resource for a positive time, found once (the congestion rows and
        pairs ask for them per pair, per resource)."""
        out: list[dict[Resource, list[tuple[int, int]]]] = []
        for k, t in enumerate(self.tasks):
            by_resource: dict[Resource, list[tuple[int, int]]] = {}
            for a, c in sorted(self.task_channels[k]):
                if self.time(t.producer, a, c) > 0:
                    for r in self.held(a, c):
                        by_resource.setdefault(r, []).append((a, c))
            out.append(by_resource)
        return out

    def resources(self) -> list[Resource]:
        """The resources transfers contend for (:attr:`TransferResources.all <placement_dsl.congestion.TransferResources.all>`):
        every device's out- and in-port (``"port"``), every ordered pair's channel (``"channel"``), every link of a route
        (``"link"``); none for ``"none"``."""
        return list(self.held.all)

    def _precedes(self, k: int, j: int) -> bool:
        """Task ``k`` ends before task ``j`` starts in every schedule within the horizon: its consumers all
        precede ``j``'s producer, or its latest end is before ``j``'s earliest start."""
        u = self.tasks[j].producer
        return (all(v == u or self.reach[v, u] for v in self.arrivals(k))
                or self.task_bounds(k)[1] + self.longest_transfer(k) <= self.task_bounds(j)[0])

    @cached_property
    def task_pairs(self) -> list[tuple[int, int, list[Resource]]]:
        """``(k, j, resources)``: tasks not ordered by precedence (or their windows) that may share those resources."""
        every = set(self.resources())
        used = [every.intersection(self._busy[k]) for k in range(len(self.tasks))]
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


def longest_paths(graph: Any, fastest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Heads (the longest path of fastest times before an op) and tails (after it), in ``O(n + m)``."""
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


__all__ = ["SLACK", "Resource", "ScheduleData", "Task", "schedule_data"]
