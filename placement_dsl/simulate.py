"""A discrete-event simulator of pipelined schedules: checks the analytic objectives.

The simulator works at the granularity the cost model scores: a *unit* is the set of ops
of one pass (forward or backward) on one device; its duration is that device's forward or
backward load from :func:`placement_dsl.evaluate.device_costs` (compute, transfers and
overflow combined as the cost model's overlap mode says). On a cluster with links each link
is a resource too: its unit of a pass moves that pass's tensors over it for the link's load
(:func:`placement_dsl.evaluate.link_loads`), between the producer's and the consumer's units. Units depend on each other
through the data-flow edges that cross them; every microbatch ``j = 0 .. n-1`` runs every
unit once, in microbatch order per unit; a device runs one unit at a time. A device holding a
colocation group with ops of both passes (an op and its gradient) runs its backward unit for
microbatch ``j`` only after its forward unit for ``j``: the backward reads the activations the
forward stashed (:func:`_stash_pairs`). Graphs whose backward pass reaches every forward op
through the loss already imply it; graphs that omit the forward-to-backward edges (the
dnn-partitioning training inputs of Tarnawski et al., whose backward edges mirror the forward
ones in the same direction) need it, or each device's backward stream runs ahead of its forwards.

Schedules
---------
``pipeline``
    Inference pipelining (Archer et al.; Tarnawski et al. §5): each device runs its
    forward unit for microbatches ``0, 1, ...`` as soon as the inputs are there.
    Time per sample tends to ``max_d load_d`` (the bottleneck, Archer eq. 4).
``1f1b``
    PipeDream's one-forward-one-backward (Narayanan et al.; Tarnawski §5.3): a device
    runs ``depth_d`` forwards (``depth_d`` = forward units on the longest path from ``d``
    to the end, PipeDream's NOAM warm-up), then strictly alternates one backward and one
    forward, then drains its backwards; it waits for its next task rather than reorder.
    Time per sample tends to ``max_d (FW_d + BW_d)``. (A greedy rule that runs any ready
    backward first falls into forward-forward-backward-backward cycles on unequal stages:
    on VGG-16 over two stages the first then idles for ``F1 + B1 - F0`` every two
    micro-batches, 9.8 % above ``max (FW + BW)`` whatever the number of micro-batches.)
``gpipe``
    GPipe (Huang et al.; Tarnawski §5.3): per mini-batch of ``n`` microbatches, a device
    runs all its forwards, then all its backwards (pipeline flush). Time per sample tends
    to ``max_d FW_d + max_d BW_d`` when every forward op reaches the loss (as in a real
    model); units not on such a path are only held back by their own dependencies.
``interleaved-1f1b``, ``zb-h1``, ``zbv``
    Virtual stages (a device holds ``v`` non-adjacent stages) and the split backward (input
    gradient ``I``, weight gradient ``W``), task by task per stage: each rank runs the order
    torch's ``ScheduleInterleaved1F1B`` / ``ScheduleInterleavedZeroBubble`` / ``ScheduleZBVZeroBubble``
    gives it (:mod:`placement_dsl.pipeline_orders`, :mod:`placement_dsl.stage_schedules`); under ``zbv``
    each device holds one stage and the V's rank map folds two devices onto a rank. On a cluster with links
    each message between stages of two devices holds the links of its route hop by hop, each link carrying
    its hops in one fixed order (:class:`~placement_dsl.pipeline_orders.TaskGraph`), as the cost model's
    recurrence has them.

For ``n`` microbatches the makespan is ``n * T + O(fill)``, so ``makespan / n`` converges
to the analytic objective ``T`` as ``n`` grows (see :func:`analytic_time_per_sample`).
"""
from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from enum import Enum

import numpy as np

from .cluster import Cluster
from .errors import SpecError
from .evaluate import CostModel, device_costs, link_loads
from .order_bounds import closed_form_makespan
from .pipeline_orders import (
    ORDERS,
    check_round_robin,
    order_makespan,
    rank_orders,
    steady_state,
)
from .placement import Placement
from .replication import replica_routes
from .stage_schedules import simulate_orders, stage_ranks, stage_times, virtual_stages
from .training import gpipe_time_per_sample

STAGE_ORDERS = ORDERS  # schedules run from rank orders over virtual stages


class Schedule(str, Enum):
    PIPELINE = "pipeline"
    ONE_F_ONE_B = "1f1b"
    GPIPE = "gpipe"
    INTERLEAVED = "interleaved-1f1b"  # virtual stages, torch's ScheduleInterleaved1F1B order
    ZB_H1 = "zb-h1"  # split backward (I, W), torch's ScheduleInterleavedZeroBubble order
    ZBV = "zbv"  # split backward in a V, two stages per rank, torch's ScheduleZBVZeroBubble order


RUN_SCHEDULES = tuple(s.value for s in Schedule if s is not Schedule.PIPELINE)
"""The schedules a pipeline runtime runs (``pipeline`` is the cost model's steady state, not one of them)."""


@dataclass(frozen=True)
class Task:
    """One unit run for one microbatch (a Gantt bar)."""

    device: str
    backward: bool
    microbatch: int
    start: float
    end: float


@dataclass(frozen=True)
class SimulationResult:
    """Makespan of ``microbatches`` samples and the time per sample it implies."""

    schedule: Schedule
    microbatches: int
    makespan: float
    trace: tuple[Task, ...] = field(default=(), repr=False)

    @property
    def time_per_sample(self) -> float:
        """``makespan / microbatches``."""
        return self.makespan / self.microbatches


@dataclass
class _Units:
    device: np.ndarray  # unit -> device index
    backward: np.ndarray  # unit -> pass
    duration: np.ndarray  # unit -> time per microbatch
    preds: list[list[int]]  # unit -> predecessor units
    of_device: dict[int, dict[bool, int]]  # device -> {backward: unit}
    lag: np.ndarray  # unit -> the time after it ends before a unit reading it may start (a link's latency)


def _units(p: Placement, model: CostModel) -> _Units:
    """Units of device passes and, on a cluster with links, of link passes: resource ``D + k`` is link ``k``,
    whose unit of a pass moves that pass's tensors over it (``Evaluation.links``), between the
    producer's unit and the consumer's along the route."""
    g, c = p.graph, p.cluster
    D = c.size
    label = 2 * p.assign + g.backward.astype(np.int64)
    rows = device_costs(p, model)
    durations = {int(lab): rows[lab // 2].load_bw if lab % 2 else rows[lab // 2].load_fw for lab in np.unique(label)}
    cross = label[g.src] != label[g.dst]
    links = link_loads(p)  # none without links
    edges: set[tuple[int, int]] = set()
    for u, v in zip(g.src[cross].tolist(), g.dst[cross].tolist()):
        a, b = int(p.assign[u]), int(p.assign[v])
        routes = replica_routes(c, p.replica_sets, a, b) if links and a != b and g.out_bytes[u] > 0 else []
        for route in routes or [()]:  # each replica pair's route (an all-reduce's links have no edges: their load)
            path = [int(label[u]), *(2 * (D + k) + int(g.backward[u]) for k in route), int(label[v])]
            edges |= set(itertools.pairwise(path))
    for k, lk in enumerate(links):
        for back, load in ((0, lk.load_fw), (1, lk.load_bw)):
            if load > 0:  # every link a tensor crosses in a pass carries its bytes there
                durations[2 * (D + k) + back] = load
    present = np.array(sorted(durations), dtype=np.int64)
    uid = {int(lab): i for i, lab in enumerate(present)}
    dur = np.array([durations[int(lab)] for lab in present], float)
    pairs = {(uid[a], uid[b]) for a, b in edges}
    pairs |= {(uid[2 * d], uid[2 * d + 1]) for d in _stash_pairs(p) if 2 * d in uid and 2 * d + 1 in uid}
    import networkx as nx  # here, not at import: the command line's parser imports this module for its choices

    q = nx.DiGraph(list(pairs))
    q.add_nodes_from(range(len(present)))
    if not nx.is_directed_acyclic_graph(q):
        cyc = nx.find_cycle(q)
        names = [f"{_resource_names(c)[present[a] // 2]}/{'bw' if present[a] % 2 else 'fw'}" for a, _ in cyc]
        raise SpecError(f"simulate: the device passes form a cycle {' -> '.join(names)}; "
                        "a pipelined schedule needs an acyclic quotient graph (make the placement contiguous)")
    preds = [sorted(q.predecessors(u)) for u in range(len(present))]
    of_device: dict[int, dict[bool, int]] = {}
    for u, lab in enumerate(present):
        of_device.setdefault(int(lab) // 2, {})[bool(lab % 2)] = u
    lag = np.array([c.links[r - D].latency if r >= D else 0.0 for r in (present // 2).tolist()])
    return _Units(present // 2, present % 2 == 1, dur, preds, of_device, lag)


def _resource_names(cluster: Cluster) -> list[str]:
    """Device names, then ``"src->dst"`` for each link (resource ``D + k``)."""
    return [*cluster.names, *(f"{lk.src}->{lk.dst}" for lk in cluster.links)]


def _stash_pairs(p: Placement) -> set[int]:
    """Devices holding a colocation group with ops of both passes: their backward unit reads what their
    forward unit stashed, so it waits for the same microbatch's forward."""
    g = p.graph
    return {int(p.assign[grp[0]]) for grp in g.groups
            if g.backward[grp].any() and not g.backward[grp].all() and (p.assign[grp] == p.assign[grp[0]]).all()}


def _depths(units: _Units) -> dict[int, int]:
    """Forward units on the longest path from each device's forward unit to the end (NOAM)."""
    fw = [u for u in range(len(units.device)) if not units.backward[u]]
    succ: dict[int, list[int]] = {u: [] for u in fw}
    for v in fw:
        for u in units.preds[v]:
            if not units.backward[u]:
                succ[u].append(v)
    depth: dict[int, int] = {}

    def visit(u: int) -> int:
        if u not in depth:
            depth[u] = 1 + max((visit(v) for v in succ[u]), default=0)
        return depth[u]

    return {int(units.device[u]): visit(u) for u in fw}


class _Simulator:
    def __init__(self, units: _Units, schedule: Schedule, n: int, record: bool, extra: int = 0):
        self.u, self.schedule, self.n, self.record = units, schedule, n, record
        self.done = np.zeros(len(units.device), dtype=np.int64)  # microbatches finished per unit
        self.started = np.zeros(len(units.device), dtype=np.int64)
        depth = _depths(units) if schedule is Schedule.ONE_F_ONE_B else {}
        self.depth = {d: k + extra for d, k in depth.items()}
        self.trace: list[tuple[int, int, float, float]] = []
        self.finish: dict[tuple[int, int], float] = {}  # (unit, microbatch) -> when it ended
        self.now = 0.0
        self.wake: set[float] = set()  # when a unit waiting on a link's latency looks again

    def _ready(self, unit: int) -> bool:
        j = int(self.started[unit])
        if j >= self.n or not all(self.done[v] > j for v in self.u.preds[unit]):
            return False
        at = max((self.finish[(v, j)] + self.u.lag[v] for v in self.u.preds[unit]), default=0.0)
        if at > self.now:
            self.wake.add(float(at))
        return at <= self.now

    def _pick(self, d: int) -> int | None:
        units = self.u.of_device[d]
        fw, bw = units.get(False), units.get(True)
        if self.schedule is Schedule.GPIPE:
            if fw is not None and self.started[fw] < self.n:
                return fw if self._ready(fw) else None
            return bw if bw is not None and self._ready(bw) else None
        if self.schedule is Schedule.ONE_F_ONE_B and fw is not None and bw is not None:
            unit = self._one_f_one_b(fw, bw, self.depth.get(d, 1))
            return unit if self._ready(unit) else None
        if bw is not None and self._ready(bw):
            return bw
        return fw if fw is not None and self._ready(fw) else None

    def _one_f_one_b(self, fw: int, bw: int, depth: int) -> int:
        """The device's next task in 1F1B order: ``depth`` forwards (warm-up), then one backward and one
        forward in turn, then the remaining backwards; the device waits for it rather than reorder."""
        f, b = int(self.started[fw]), int(self.started[bw])
        warm = min(depth, self.n)
        if f < warm:
            return fw
        if f >= self.n:
            return bw
        return bw if b <= f - warm else fw

    def run(self) -> float:
        events: list[tuple[float, int, int]] = []
        idle = set(self.u.of_device)
        now, remaining = 0.0, self.n * len(self.u.device)
        seen: set[float] = set()
        while remaining:
            self.now = now
            for d in sorted(idle):
                unit = self._pick(d)
                if unit is not None:
                    idle.discard(d)
                    end = now + float(self.u.duration[unit])
                    self.trace.append((unit, int(self.started[unit]), now, end))
                    self.started[unit] += 1
                    heapq.heappush(events, (end, d, unit))
            for at in self.wake - seen:  # a link's latency: wake the devices up when the bytes are there
                heapq.heappush(events, (at, -1, -1))
            seen |= self.wake
            if not events:
                raise SpecError(f"simulate: schedule {self.schedule.value!r} is stuck with {remaining} tasks left")
            now, d, unit = heapq.heappop(events)
            while True:
                if d >= 0:
                    self._finish(d, unit, idle, now)
                    remaining -= 1
                if not (events and events[0][0] <= now):
                    break
                _, d, unit = heapq.heappop(events)
        return now

    def _finish(self, d: int, unit: int, idle: set[int], now: float) -> None:
        self.finish[(unit, int(self.done[unit]))] = now
        self.done[unit] += 1
        idle.add(d)


def simulate(placement: Placement, schedule: Schedule | str = Schedule.PIPELINE, microbatches: int = 64,
             model: CostModel | None = None, record: bool = False, extra_in_flight: int = 0,
             weight_share: float | None = None) -> SimulationResult:
    """Simulate ``microbatches`` samples through a placement under a pipelined schedule.

    Parameters
    ----------
    placement
        The placement; its device passes must form an acyclic quotient graph.
    schedule
        ``"pipeline"`` (inference graphs), ``"1f1b"`` or ``"gpipe"`` (training graphs).
    microbatches
        Number ``n >= 1`` of samples (microbatches) pushed through.
    model
        Cost model giving the unit durations (default: no overlap, overflow memory, so
        that a placement over capacity still has a time).
    record
        Keep the per-task trace (for Gantt charts).
    extra_in_flight
        1F1B: forwards admitted in the warm-up beyond PipeDream's depth (more activations
        stashed; the steady state already reaches ``max (FW + BW)`` at the depth).
    weight_share
        ``zb-h1``: the share of each backward op's compute that is weight gradient
        (:func:`placement_dsl.stage_schedules.weight_shares`; default half for ops with parameters).

    Examples
    --------
    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.cluster import Cluster
    >>> g = Graph([Op(name="a", work=1.0), Op(name="b", work=3.0)], [("a", "b")])
    >>> p = Placement(g, Cluster.stages(2), [0, 1])
    >>> simulate(p, "pipeline", microbatches=10).makespan  # 1 + 10 * 3
    31.0
    """
    schedule = _schedule(schedule)
    if not isinstance(microbatches, (int, np.integer)) or microbatches < 1:
        raise SpecError(f"simulate: microbatches must be an integer >= 1, got {microbatches!r}")
    training = placement.graph.is_training
    if training != (schedule is not Schedule.PIPELINE):
        want = "'1f1b', 'gpipe', 'interleaved-1f1b', 'zb-h1' or 'zbv'" if training else "'pipeline'"
        raise SpecError(f"simulate: schedule {schedule.value!r} does not fit graph {placement.graph.name!r} "
                        f"({'training' if training else 'inference'}); use {want}")
    model = model or CostModel(memory="overflow", require=frozenset())
    if schedule.value in STAGE_ORDERS:
        return _simulate_stages(placement, schedule, int(microbatches), model, record, weight_share)
    sim = _Simulator(_units(placement, model), schedule, int(microbatches), record, int(extra_in_flight))
    makespan = sim.run()
    trace: tuple[Task, ...] = ()
    if record:
        names = _resource_names(placement.cluster)
        trace = tuple(Task(names[sim.u.device[u]], bool(sim.u.backward[u]), j, s, e) for u, j, s, e in sim.trace)
    return SimulationResult(schedule, int(microbatches), float(makespan), trace)


def stage_plan(placement: Placement, schedule: Schedule | str, microbatches: int, model: CostModel | None = None,
               weight_share: float | None = None):
    """``(stage times, rank orders)`` of ``placement`` under ``interleaved-1f1b``, ``zb-h1`` or ``zbv``.

    The placement's virtual stages (:func:`placement_dsl.stage_schedules.virtual_stages`) must sit on
    the ranks as torch's schedules place them: round-robin, stage ``s`` on rank ``s mod p``, or ZBV's V
    (:func:`placement_dsl.stage_schedules.stage_ranks`)."""
    schedule = _schedule(schedule)
    if schedule.value not in STAGE_ORDERS:
        raise SpecError(f"stage_plan: schedule {schedule.value!r} runs device passes; choose from {list(STAGE_ORDERS)}")
    times = stage_times(placement, device_costs, model or CostModel(memory="overflow", require=frozenset()),
                        weight_share, schedule.value)
    ranks = max(times.rank) + 1
    check_round_robin(times, ranks, schedule.value)
    return times, rank_orders(schedule.value, ranks, times.stages // ranks, microbatches)


def schedule_stage_times(placement: Placement, model: CostModel | None = None, weight_share: float | None = None):
    """The virtual stages' ``F``/``I``/``W`` times of ``placement`` (:func:`placement_dsl.stage_schedules.stage_times`)
    under ``model`` (default: no overlap, overflow memory, as :func:`simulate`)."""
    return stage_times(placement, device_costs, model or CostModel(memory="overflow", require=frozenset()),
                       weight_share)


def _simulate_stages(placement: Placement, schedule: Schedule, m: int, model: CostModel, record: bool,
                     weight_share: float | None) -> SimulationResult:
    times, orders = stage_plan(placement, schedule, m, model, weight_share)
    run = simulate_orders(times, orders, record)
    names = _rank_names(placement, schedule.value)
    trace = tuple(Task(names[t.rank], t.action.kind != "F", t.action.microbatch, t.start, t.end) for t in run.trace)
    return SimulationResult(schedule, m, float(run.makespan), trace)


def _rank_names(placement: Placement, schedule: str) -> list[str]:
    """Device names of the ranks (``a+b`` for a rank ZBV folds two devices onto), in rank order."""
    _, device = virtual_stages(placement, schedule)
    held: dict[int, list[str]] = {}
    for d, k in zip(device, stage_ranks(device, schedule)):
        held.setdefault(k, []).append(placement.cluster.names[d])
    return ["+".join(dict.fromkeys(held[k])) for k in sorted(held)]


def _schedule(value: Schedule | str) -> Schedule:
    try:
        return Schedule(value)
    except ValueError:
        raise SpecError(f"simulate: unknown schedule {value!r}; choose from {[s.value for s in Schedule]}") from None


def analytic_time_per_sample(placement: Placement, schedule: Schedule | str = Schedule.PIPELINE,
                             model: CostModel | None = None, microbatches: int | None = None,
                             weight_share: float | None = None) -> float:
    """The steady-state time per sample the schedule tends to.

    ``pipeline``: ``max_d load_d``; ``1f1b``: ``max_d (FW_d + BW_d)``;
    ``gpipe``: ``max_d FW_d + max_d BW_d`` (Tarnawski et al. §5.3), with ``FW_d``/``BW_d``
    the forward/backward loads of device ``d``; with ``microbatches`` ``m``, GPipe's time per
    sample of one mini-batch of ``m`` micro-batches, fill and drain included
    (:func:`placement_dsl.training.gpipe_time_per_sample`), which :func:`simulate` matches.
    ``interleaved-1f1b``, ``zb-h1`` and ``zbv``: ``max`` over ranks of their stages' ``F + I + W``; with ``m``,
    the makespan of the ranks' orders over ``m`` (the max-plus recurrence,
    :func:`placement_dsl.pipeline_orders.order_makespan`), which :func:`simulate` matches.
    """
    schedule = _schedule(schedule)
    if schedule.value in STAGE_ORDERS:
        return _stage_time_per_sample(placement, schedule, model, microbatches, weight_share=weight_share)
    rows = device_costs(placement, model or CostModel(memory="overflow", require=frozenset()))
    if schedule is Schedule.GPIPE and microbatches is not None:
        return gpipe_time_per_sample(placement, np.array([r.load_fw for r in rows]),
                                     np.array([r.load_bw for r in rows]), microbatches, link_loads(placement))
    rows = [*rows, *link_loads(placement)]  # a link is a resource like a device (LinkCost has the same loads)
    if schedule is Schedule.PIPELINE:
        return max(r.load for r in rows)
    if schedule is Schedule.ONE_F_ONE_B:
        return max(r.load_fw + r.load_bw for r in rows)
    return max(r.load_fw for r in rows) + max(r.load_bw for r in rows)


def _stage_time_per_sample(placement: Placement, schedule: Schedule, model: CostModel | None,
                           microbatches: int | None, closed_form: bool = False,
                           weight_share: float | None = None) -> float:
    if microbatches is None:  # the steady state: every rank busy, PipeDream's max over ranks of FW + BW
        times = stage_times(placement, device_costs, model or CostModel(memory="overflow", require=frozenset()),
                            schedule=schedule.value)
        return steady_state(times)
    times, orders = stage_plan(placement, schedule, microbatches, model, weight_share)
    span = closed_form_makespan(times, orders) if closed_form else order_makespan(times, orders)
    return span / microbatches


def closed_form_time_per_sample(placement: Placement, schedule: Schedule | str, microbatches: int,
                                model: CostModel | None = None, weight_share: float | None = None) -> float:
    """``interleaved-1f1b`` / ``zb-h1`` / ``zbv``: the fill-work-drain bound per sample
    (:func:`placement_dsl.order_bounds.closed_form_makespan`): Megatron's bubble ``(p - 1) / (v m)`` and
    ZB-H1's ``(p - 1)(F + I - W)`` on equal stages, never above the simulated time per sample."""
    schedule = _schedule(schedule)
    if schedule.value not in STAGE_ORDERS:
        raise SpecError(f"closed_form_time_per_sample: schedule {schedule.value!r} has no rank orders; "
                        f"choose from {list(STAGE_ORDERS)}")
    return _stage_time_per_sample(placement, schedule, model, microbatches, True, weight_share)


def throughput_curve(placement: Placement, schedule: Schedule | str, microbatches: list[int] | tuple[int, ...],
                     model: CostModel | None = None) -> list[tuple[int, float]]:
    """``(n, time per sample)`` for each ``n`` in ``microbatches``: it falls toward the analytic value."""
    return [(n, simulate(placement, schedule, n, model).time_per_sample) for n in microbatches]


pass_units = _units  # the units the simulator runs: device passes and what each waits for

__all__ = ["RUN_SCHEDULES", "STAGE_ORDERS", "Schedule", "SimulationResult", "Task", "analytic_time_per_sample",
           "closed_form_time_per_sample", "schedule_stage_times", "simulate", "stage_plan", "throughput_curve"]
