"""Sizes of models before they are built, so that a budget can refuse one it cannot hold.

The module sits above the formulations it sizes (it reads them, they never read it) and below
:func:`~placement_dsl.solve.solve` and the certificates, which call :func:`check_fits` before a build.

The estimates are counts of constraint-matrix nonzeros from the problem's shape (ops ``n``,
edges ``m``, devices ``D``, accelerators ``A``, subgraphs per accelerator ``q``), fitted to the
project's formulations on the reference workloads (``benchmarks/bench_budget.py`` prints the
build times they predict); each family of models (schedule, latency, the placement MIPs) turns them into seconds by
its own start-up and rate in CPU seconds, times the machine's contention (:func:`build_seconds`).

==================  ===========================  ===========================================
formulation         nonzeros                     measured
==================  ===========================  ===========================================
latency (Fig. 3/4)  ``3.5 n m A min(q, 6)``       bert24 32 ops: 30k; gnmt 96: 163k; bert_l-3
                                                 235: 667k (q = 1); bert24, any q: 158k
schedule            ``12 (n + m) D``             the disjunctive pairs: ``P`` ops and ``Q``
                    ``+ 4 D P + 10 R Q``         transfers that precedence leaves unordered
                                                 (:func:`unordered_pairs`), ``R`` the
                                                 contended resources (:func:`resources`);
                                                 MOIRAI example-1 27 ops: 3.0k, GoogLeNet
                                                 307: 117k, generated GPT 137: 400k, ResNet
                                                 100: 29k; generated sheets of 34 to 1,661
                                                 ops: 1.0-1.6 times the count; seconds by
                                                 its own rate (:data:`SCHEDULE_PER_NONZERO`)
others              ``9 (n + m) D``              bert_l-3 training 600 ops: throughput 34k,
                                                 exact 12k, without contiguity 10k; GPT-3
                                                 826 ops: throughput 65k
==================  ===========================  ===========================================
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .blocks.schedule_data import SLACK, longest_paths
from .congestion import TransferResources
from .constraints import congestion_of
from .deadline import (
    MIN_SEARCH,
    PLACEMENT_NONZEROS,
    BudgetSpent,
    Deadline,
    contention,
    model_cpu,
)
from .formulations import get
from .formulations.latency import LatencyFormulation, subgraphs_per_accelerator
from .formulations.schedule import ScheduleFormulation, horizon_of
from .schedule import transfer_durations

__all__ = ["Build", "build_seconds", "build_times", "check_fits", "estimate_nonzeros", "fitting_ops", "resources", "unordered_pairs"]

SMALL_BUILD = 1.0  # seconds of estimated build on an idle machine within which a model is searched whatever the ratio
# ``per_build`` asks: a MILP of a few ops is solved in less (8 ops on a line of 4 devices: estimated 0.45 s under
# load, built in 0.12 s and proved optimal in 0.45 s in all, it was refused under a 10 s limit for want of 20 times
# its build); a model's size, not the machine's load, makes it small


def estimate_nonzeros(problem: Any, formulation: Any, within: float | None = None) -> float:
    """The nonzeros of ``formulation``'s model of ``problem`` (a registered formulation object), estimated.

    Counting the schedule model's unordered pairs (:func:`unordered_pairs`) is itself ``O(n^2)``: 5 s at 18,164 ops
    under load, twice before a ``bounds`` of 15 s ran its first level. With ``within`` (seconds) a model whose part
    without the pairs already takes longer to build (:func:`build_seconds`) is not counted further: that part, a
    lower bound, is returned, which is enough to refuse the model in that time."""
    n, m = problem.graph.n, problem.graph.m
    if not isinstance(formulation, ScheduleFormulation):
        return _nonzeros(problem, formulation, n, m)
    least = _nonzeros(problem, formulation, n, m, (0.0, 0.0))
    if within is not None and _seconds(formulation, least) > within:
        return least
    return _nonzeros(problem, formulation, n, m, unordered_pairs(problem.graph, problem.cluster, horizon_of(problem)))


PER_EDGE, PER_OP_PAIR, PER_TASK_PAIR = 12.0, 4.0, 10.0  # the schedule model's nonzeros: per op or edge and device,
# per unordered pair of ops and device (its disjunction on that device), per unordered pair of transfers and
# contended resource (MOIRAI eq. 8's disjunction); 1.2-2.7 times the models measured (module docstring): the time
# windows of the horizon order some pairs the estimate counts


def _nonzeros(problem: Any, formulation: Any, n: float, m: float, pairs: tuple[float, float] | None = None) -> float:
    """The estimate of :func:`estimate_nonzeros` for a graph of ``n`` ops and ``m`` edges on the problem's cluster;
    for the schedule model, ``pairs`` are its unordered pairs of ops and of transfers (:func:`unordered_pairs`;
    ``None``: every pair, for a graph not at hand)."""
    D = problem.cluster.size
    A = max(int((~problem.cluster.host).sum()), 1)
    if isinstance(formulation, LatencyFormulation):  # by the model written: both take the one single-sample objective
        q = subgraphs_per_accelerator(problem)
        return 3.5 * n * max(m, 1) * A * min(max(q, 1), 6)
    if isinstance(formulation, ScheduleFormulation):
        ops, tasks = pairs if pairs is not None else (n * (n - 1) / 2, n * (n - 1) / 2)
        return PER_EDGE * (n + m) * D + PER_OP_PAIR * D * ops + PER_TASK_PAIR * resources(problem) * tasks
    return PLACEMENT_NONZEROS * (n + m) * D


def resources(problem: Any) -> int:
    """The resources transfers contend for in the schedule model, by the problem's congestion mode
    (:attr:`TransferResources.all <placement_dsl.congestion.TransferResources.all>`): two ports per device, a channel
    per ordered pair of devices, the links of the routes, or none."""
    return len(TransferResources(problem.cluster, congestion_of(problem.constraints)).all)


CLOSURE_OPS = 20_000  # the most ops whose precedence closure (n^2 bits) unordered_pairs computes
_POPCOUNT = np.array([b.bit_count() for b in range(256)], dtype=np.uint8)


def unordered_pairs(graph: Any, cluster: Any, horizon: float | None = None) -> tuple[float, float]:
    """The pairs the schedule model separates, at most, as :class:`~placement_dsl.blocks.schedule_data.ScheduleData`
    finds them: ops that neither precedence nor their time windows within ``horizon`` order (``None``: no window
    orders them), and transfer tasks that take time (one per producer whose consumers form one colocation unit,
    else at most one per device) of which neither ends, with all its consumers, before the other's producer starts,
    nor by its window before the other's begins. From the transitive closure as bitsets, the windows from the
    fastest and slowest times; every pair on a graph of more than :data:`CLOSURE_OPS` ops."""
    n, devices = graph.n, cluster.size
    if n > CLOSURE_OPS:
        return n * (n - 1) / 2, devices * devices * n * (n - 1) / 2
    own = np.zeros((n, (n + 7) // 8), dtype=np.uint8)  # own[u]: u alone (not np.eye: n^2 bytes, 330 MB at 18k ops)
    own[np.arange(n), np.arange(n) // 8] = 1 << (np.arange(n) % 8)
    after = np.zeros_like(own)  # after[u]: the ops a path from u reaches, u excluded
    for u in graph.topo[::-1].tolist():
        for v in graph.successors(u).tolist():
            after[u] |= after[v] | own[v]
    times = cluster.times(graph)
    fastest = np.where(np.isfinite(times), times, np.inf).min(axis=1, initial=np.inf)
    fastest = np.where(np.isfinite(fastest), fastest, 0.0)
    slowest = np.where(np.isfinite(times), times, 0.0).max(axis=1, initial=0.0)
    head, tail = longest_paths(graph, fastest)
    end = (np.inf if horizon is None else horizon * (1 + SLACK) + SLACK) - tail  # an op runs within
    # [head, end + slowest - fastest], the horizon widened as the model widens it
    ops = _unordered(after, (slowest > 0).astype(np.int64), head, end - fastest + slowest)  # ops that take time
    unit = np.asarray(graph.group_id)
    pairs = np.array([(a, b) for a in range(devices) for b in range(devices) if a != b], dtype=np.int64).reshape(-1, 2)
    moved = transfer_durations(graph, cluster, np.repeat(np.arange(n), len(pairs)), np.tile(pairs[:, 0], n),
                               np.tile(pairs[:, 1], n)).reshape(n, len(pairs))
    longest = np.where(np.isfinite(moved), moved, 0.0).max(axis=1, initial=0.0)
    tasks, late = np.zeros(n, dtype=np.int64), np.full(n, np.inf)
    behind = np.zeros_like(own)  # behind[u]: the ops that every consumer of u's task reaches or is
    for u in range(n):
        out = [int(v) for v in graph.successors(u).tolist() if unit[v] != unit[u]]
        if out and longest[u] > 0:  # a transfer of no time contends for nothing
            tasks[u] = 1 if len({int(unit[v]) for v in out}) == 1 else devices
            behind[u] = np.bitwise_and.reduce(after[out] | own[out], axis=0)
            latest = [float(end[v] - fastest[v]) for v in out]  # a task per device waits for the consumers there
            late[u] = (min(latest) if tasks[u] == 1 else max(latest)) + longest[u]
    return ops, _unordered(behind, tasks, head + fastest, late)


def _unordered(ordered: np.ndarray, weight: np.ndarray, first: np.ndarray, last: np.ndarray,
               rows: int = 512) -> float:
    """The pairs of items (each ``weight`` times: ops, or a producer's transfer tasks) whose windows ``(first,
    last)`` overlap and that the bitsets ``ordered`` (row ``u``: the items after ``u``) do not order; an item's own
    copies are a pair each."""
    n = len(weight)
    count = float((weight * (weight - 1)).sum()) / 2
    for i in range(0, n, rows):
        r = slice(i, min(i + rows, n))
        meet = (first[r, None] < last[None, :]) & (first[None, :] < last[r, None])
        meet[np.arange(r.stop - i), np.arange(i, r.stop)] = False
        for t in np.unique(weight[weight > 0]).tolist():  # weights in bits, one value at a time
            mask = meet & (weight == t)[None, :]
            w = weight[r].astype(float)
            both = np.packbits(mask, axis=1, bitorder="little")
            count += t * float((w * _ones(both)).sum()) / 2  # every overlapping pair, from both sides
            count -= t * float((w * _ones(both & ordered[r])).sum())  # ... less those precedence orders
    return count


def _ones(bits: np.ndarray, rows: int = 1024) -> np.ndarray:
    """The set bits of each row of ``bits`` (bytes), counted ``rows`` rows at a time (the table's lookups are bytes)."""
    return np.concatenate([_POPCOUNT[bits[i:i + rows]].sum(axis=1, dtype=np.int64)
                           for i in range(0, len(bits), rows)]) if len(bits) else np.zeros(0, dtype=np.int64)


def fitting_ops(problem: Any, formulation: Any, seconds: float, per_build: float = 0.0) -> int:
    """The most ops a coarsening of ``problem``'s graph may keep so that ``formulation``'s model of it builds, and is
    searched ``per_build`` times its build, in ``seconds`` (its edges taken in proportion to its ops, at least one per
    op but the first); 0 when not even two ops fit."""
    form = get(formulation, problem)
    n, m = problem.graph.n, problem.graph.m
    per = max(m / max(n, 1), 1.0)

    def fits(k: int) -> bool:
        return _seconds(form, _nonzeros(problem, form, k, per * (k - 1))) * (1 + per_build) <= seconds

    if not fits(2):
        return 0
    lo, hi = 2, max(n, 2)
    while lo < hi:  # the largest k in [lo, hi] that fits
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


SCHEDULE_START = 0.03  # CPU seconds of a schedule model's build, extraction and hand-off whatever its size (a first
# model of 93 nonzeros in a process: 0.01 s built, 0.015 s handed to HiGHS)
SCHEDULE_PER_NONZERO = 9e-6  # CPU seconds per estimated nonzero of the schedule model, built (its pair orders written
# as big-M rows by the templates) and extracted: refitted when the rows stopped being Pyomo disjuncts transformed by
# gdp.bigm, on generated layered MOIRAI sheets of 107, 343, 596 and 897 ops (3 and 4 devices; 16.6k to 854k nonzeros
# estimated; benchmarks/bench_model_sizing.py at load 3.7-5.5): 5.5e-6 to 1.12e-5 (0.09, 1.2, 4.7 and 9.6 s, against
# 0.35, 4.9, 15.5 and 33.4 s with the disjuncts); with the start-up, 0.80 to 1.95 times their CPU time. The former
# rate, 3.7e-5, was 3.3 to 7 times them, and a 20 s solve of a 506-op GPT refused its model (~64 s estimated, 11 CPU s
# built). The machine's load is the contention's (:func:`~placement_dsl.deadline.contention`), not this rate's: the
# first estimate at the rate of the other models (1.3e-4 s per nonzero, for one other job per core) was 6 times a
# 141-op sheet's build on an idle machine, and the model was refused


LATENCY_START = 0.05  # CPU seconds of a latency model's build and extraction whatever its size
LATENCY_PER_NONZERO = 2.5e-6  # CPU seconds per estimated nonzero of the latency model (Tarnawski Fig. 3 / Fig. 4),
# built and extracted: refitted (rows no longer named, read by Pyomo's LinearRepnVisitor in one walk, the cyclic
# collector paused) on generated invocation graphs of 12 to 140 ops (2 to 4 accelerators beside a CPU), 0.05 to 1.24 s
# (0.06 to 1.89 s before), 2.6e-6 to 3.5e-5 per estimated nonzero (the estimate grows faster than the model: 0.6 to 4
# times its count); with the start-up, 0.69 to 1.07 times their CPU time (benchmarks/bench_model_sizing.py). The
# former rate, 4.5e-6, was 0.98-1.8 times them; the first, the placement MIPs' 1.3e-4 s for one other job per core,
# was 20 to 77 times these builds idle, and models that fit were refused


class Build(NamedTuple):
    """A model's build, estimated from one count of its nonzeros (:func:`build_times`)."""
    seconds: float  # to build and extract it on this machine as loaded now
    idle: float  # ... on an idle machine
    nonzeros: float  # its estimated nonzeros (a lower bound where the count stopped, ``seconds`` above ``within``)


def build_times(problem: Any, formulation: Any, within: float | None = None) -> Build:
    """``formulation``'s model of ``problem``: its nonzeros counted once (:func:`estimate_nonzeros`; with ``within``
    seconds, not further than needed to tell that it takes longer) and its build's seconds loaded and idle."""
    nonzeros = estimate_nonzeros(problem, formulation, within)
    return Build(_seconds(formulation, nonzeros), _seconds(formulation, nonzeros, loaded=False), nonzeros)


def build_seconds(problem: Any, formulation: Any, loaded: bool = True, within: float | None = None) -> float:
    """Seconds to build and extract ``formulation``'s model of ``problem``, estimated on this machine as loaded now
    (``loaded=False``: idle). With ``within`` (seconds), an estimate above it may be a lower bound of the model's
    (:func:`estimate_nonzeros`), found without counting what would take long to count."""
    build = build_times(problem, formulation, within)
    return build.seconds if loaded else build.idle


def _seconds(form: Any, nonzeros: float, loaded: bool = True) -> float:
    """Seconds to build and extract a model of ``nonzeros`` (estimated) of formulation ``form``: its start-up and rate
    in CPU seconds (the schedule model's :data:`SCHEDULE_START`, :data:`SCHEDULE_PER_NONZERO`; the latency model's
    :data:`LATENCY_START`, :data:`LATENCY_PER_NONZERO`; the placement MIPs'
    :func:`~placement_dsl.deadline.model_cpu`) times the
    machine's :func:`~placement_dsl.deadline.contention`."""
    if isinstance(form, ScheduleFormulation):
        cpu = SCHEDULE_START + SCHEDULE_PER_NONZERO * nonzeros
    elif isinstance(form, LatencyFormulation):
        cpu = LATENCY_START + LATENCY_PER_NONZERO * nonzeros
    else:
        cpu = model_cpu(nonzeros)
    return cpu * (contention() if loaded else 1.0)


def check_fits(problem: Any, formulation: Any, deadline: Deadline, seconds: float | None = None,
               per_build: float = 0.0) -> None:
    """Raise :class:`~placement_dsl.deadline.BudgetSpent` ("model too large for the time left") when building
    ``formulation``'s model of ``problem`` and a useful search cannot fit into ``seconds`` (at most what is left of
    ``deadline``): a search of :data:`MIN_SEARCH`, or of ``per_build`` times the estimated build where that is more
    (a model the caller would rather not build than search too briefly: "too large to be searched"; not asked of a
    build within :data:`SMALL_BUILD` on an idle machine)."""
    form = get(formulation, problem)
    left = deadline.clip(seconds)
    need, idle, nonzeros = build_times(problem, form, left)  # counted once, and only as far as ``left`` needs
    if need + MIN_SEARCH > left:
        raise BudgetSpent(f"model too large for the time left: the {form.name!r} model has "
                          f"{'at least ' if need > left else ''}~{nonzeros:,.0f} nonzeros, ~{need:.0f} s to build, "
                          f"{left:.1f} s left; not built")
    if idle > SMALL_BUILD and need * (1 + per_build) > left:
        raise BudgetSpent(f"model too large to be searched in the time left: the {form.name!r} model takes "
                          f"~{need:.1f} s to build, {left:.1f} s left (it is searched {per_build:g} times its "
                          "build); not built")
