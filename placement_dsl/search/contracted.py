"""Re-solves of a single-sample problem (latency, makespan) on a contracted graph, around an incumbent.

A model of the whole graph may be too large to build within a budget (the latency model grows with
ops times edges, the schedule model with the square of the ops). A *contracted step* keeps a model
small: the incumbent's ops, in a topological order that follows its schedule, are cut into intervals
(:func:`placement_dsl.coarsen.runs`) where consecutive ops share a device, and each interval becomes
one op (:func:`placement_dsl.coarsen.contract`); the coarse problem is solved by
:func:`~placement_dsl.solve.solve` warm-started by the incumbent mapped onto it, expanded back
(:meth:`~placement_dsl.coarsen.Coarsening.expand`), and kept only when the cost model on the full
graph finds it valid and better.

* The **coarse solve** (``free=None``): every interval may move, intervals of at most ``cap`` ops, the
  cap as small as the model's build and search for the step's time allow (:func:`placement_dsl.sizing.fitting_ops`).
* An **LNS step** (``free`` a window of ops): the window's ops stay single and free, every other
  interval is as long as the incumbent allows (one device, no transfer in or out but at its ends:
  :func:`crossing`) and pinned where the incumbent runs it.

Intervals of a topological order are convex, so a coarse placement is a placement of the whole graph
and a contiguous coarse placement expands to a contiguous one. A coarse model's bound is no bound for
the whole graph (it fixes which ops share a device): it is never reported as one.
"""
from __future__ import annotations

import heapq
import math
import time
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..coarsen import Coarsening, contract, runs
from ..constraints import Congestion, Contiguous, DagOrder, Memory, Overflow, Pin, Subgraphs
from ..cpsat import available
from ..errors import PlacementError
from ..evaluate import Objective
from ..formulations import get
from ..placement import Placement
from ..problem import Problem
from ..schedule import ListScheduler, Schedule
from ..sizing import build_seconds, fitting_ops
from ..solve import solve
from ..stopped import unread_bounds

KEPT = (Memory, Overflow, Contiguous, DagOrder, Subgraphs, Congestion)
"""Terms a coarse problem keeps as they are; colocation and allowed kinds are folded into the graph it contracts,
pins are moved onto the coarse ops; a problem with any other term is not contracted."""
FOLDED = ("Colocate", "AllowedKinds")
SEARCH_PER_BUILD = 10.0  # seconds of search a step's coarse model asks per second of its estimated build: the step's
# model is sized so that both fit its time. Sized by its build alone (a third of the step), a 12 s step of a 146-op
# transformer's latency picked a model of 74 ops, built in ~1 s and searched in 8 s idle, not within the step under
# load; the build and 10 times it leave ~50 ops
CPSAT_OPS = 60  # the coarse size of a makespan step with CP-SAT (its interval model is not sized by nonzeros)
CPSAT_WINDOW_OPS = 500  # the most coarse ops of a CP-SAT window step: the ops outside the window stay in runs of the
# incumbent's devices along its order, and on a 1,000-task sheet (3,116 ops, 5 devices) those runs left 1,915 coarse
# ops; CP-SAT's step took 15 s of a 60 s solve's 16 s of windows and answered 45.1 where its warm start held 26.0 (a
# hint the runs' merged transfers made slower, :func:`crossing`). Runs cut at transfers keep the hint's makespan, but
# CP-SAT did not improve it on more ops: a 5,057-op GPT's 733 coarse ops held 25.92 for a 15 s step, and at a limit
# of 800 its windows took 21.2 s of a 60 s solve, which answered 25.9337 where schedule-ls's rounds reached 25.9182
OVERSIZED = "the window's contraction keeps"  # how a step skipped for CPSAT_WINDOW_OPS says so: where the ops outside
# any window alone are more coarse ops than that; a window whose contraction passes it is shortened until it fits
CHILD = 2.5  # seconds a CP-SAT step's solve runs past its limit: its child process starts (OR-Tools' import), answers
EXPAND = 1e-3  # seconds per op of the full graph to expand the answer and score its schedules, where the caller has
# not measured them (``after``): 1 s at 1,137 ops (a sheet's steps took 13.4 s of 10 and 8.1 s of 5 at load 7, and its
# 60 s solve ended at 68.9 s), but 0.47 s at 5,057 (a GPT at load 4), where the 5.1 s it kept left the coarse step
# of a 23 s search 0.6 s, and the step was skipped


def sub_solver(problem: Problem) -> str:
    """CP-SAT for the makespan when OR-Tools is installed, else HiGHS."""
    return "cpsat" if problem.cost_model().objective is Objective.MAKESPAN and available() else "highs"


def order(problem: Problem, incumbent: Placement) -> list[int]:
    """A topological order of the ops that follows the incumbent's schedule (its starts; else the graph's own
    order): among the ops whose predecessors are all listed, the earliest start first."""
    g = problem.graph
    key = (np.asarray(incumbent.schedule.start, dtype=float) if incumbent.schedule is not None
           else np.zeros(g.n))
    rank = np.empty(g.n, dtype=np.int64)
    rank[g.topo] = np.arange(g.n)
    indeg = np.diff(g.pred_ptr).astype(np.int64)
    ready = [(float(key[v]), int(rank[v]), int(v)) for v in range(g.n) if indeg[v] == 0]
    heapq.heapify(ready)
    out: list[int] = []
    while ready:
        _, _, v = heapq.heappop(ready)
        out.append(v)
        for w in g.succ_idx[g.succ_ptr[v]:g.succ_ptr[v + 1]].tolist():
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(ready, (float(key[w]), int(rank[w]), int(w)))
    return out


def intervals(problem: Problem, incumbent: Placement, free: np.ndarray | None, target: int) -> list[list[int]]:
    """The intervals of a contracted step (see the module docstring): with ``free`` (a mask of ops), its ops single
    and the rest in maximal runs; without, runs of at most the smallest cap giving ``target`` intervals or fewer
    (intervals that ignore the incumbent's devices when its runs alone are more than ``target``)."""
    g = problem.graph
    seq, dev = order(problem, incumbent), np.asarray(incumbent.assign)
    if free is not None:
        begins, ends = crossing(problem, incumbent, free)
        return runs(g, seq, dev, free, g.n, begins, ends)
    single = np.zeros(g.n, dtype=bool)
    if len(runs(g, seq, dev, single, g.n)) > target:  # the incumbent changes devices too often: plain intervals
        dev = np.zeros(g.n, dtype=np.int64)
    lo, hi = 1, g.n
    while lo < hi:  # the smallest cap whose runs number at most target
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if len(runs(g, seq, dev, single, mid)) <= target else (mid + 1, hi)
    return runs(g, seq, dev, single, lo)


def crossing(problem: Problem, incumbent: Placement, free: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The ops that receive and those that send a tensor that may cost a transfer in a window step: on an edge whose
    ends the incumbent runs on two devices or that touches the window (``free``, a mask). A run of a window step
    begins at such a receiver and ends after such a sender, and its coarse op sends only such outputs
    (:func:`~placement_dsl.coarsen.contract`'s ``senders``): a run that takes an input or sends an output midway
    would wait for its inputs at its first op and hold its outputs to its last, and send every member's output to
    each consumer. On a 5,057-op GPT the incumbent's schedule on such a contraction lasted 99.5 where it lasted
    25.93, and CP-SAT started from that; on this one it lasts 25.92."""
    g, a = problem.graph, np.asarray(incumbent.assign)
    cross = (a[g.src] != a[g.dst]) | free[g.src] | free[g.dst]
    begins, ends = np.zeros(g.n, dtype=bool), np.zeros(g.n, dtype=bool)
    begins[g.dst[cross]] = True
    ends[g.src[cross]] = True
    return begins, ends


def mapped(incumbent: Placement, groups: list[list[int]]) -> np.ndarray:
    """The device of every interval: where the incumbent runs most of its ops (the first such device)."""
    a = np.asarray(incumbent.assign)
    return np.array([int(np.bincount(a[group]).argmax()) for group in groups], dtype=np.int64)


def coarse_problem(problem: Problem, coarsening: Coarsening, pinned: list[int], incumbent: Placement,
                   cluster: Cluster | None = None) -> Problem | None:
    """The problem on the coarse graph (on ``cluster``, default the problem's): the kept terms, the problem's pins on
    the coarse ops holding their ops, and the ``pinned`` coarse ops where the incumbent runs them; ``None`` when the
    problem has a term it cannot move."""
    terms = [t for t in problem.constraints if isinstance(t, KEPT)]
    if any(not isinstance(t, (*KEPT, Pin)) and type(t).__name__ not in FOLDED for t in problem.constraints):
        return None
    c, names, of = problem.cluster, coarsening.coarse.names, coarsening.of
    pins = {int(of[problem.graph.index[p.op]]): p.device for p in problem.find(Pin)}
    for k in pinned:  # a pinned interval is a run of the incumbent: one device
        pins.setdefault(k, c.names[int(incumbent.assign[coarsening.members[k][0]])])
    return Problem(coarsening.coarse, cluster or c, problem.objective,
                   [*terms, *(Pin(names[k], d) for k, d in sorted(pins.items()))])


def devices(problem: Problem, incumbent: Placement) -> list[int]:
    """The devices a step may use: the incumbent's, and one unused device of each class of interchangeable devices
    (any other unused one would be the same); every device on a cluster with links or routes."""
    c = problem.cluster
    if c.links or c.routes:
        return list(range(c.size))
    used = {int(d) for d in np.unique(incumbent.assign)}
    spare = {next(d for d in group if d not in used) for group in c.homogeneous_groups() if set(group) - used}
    return sorted(used | spare)


def sub_cluster(cluster: Cluster, keep: list[int]) -> Cluster:
    """The cluster of the devices ``keep`` (a cluster without links or routes)."""
    if len(keep) == cluster.size:
        return cluster
    data = cluster.to_dict()
    return Cluster.from_dict({"devices": [data["devices"][d] for d in keep]})


def step(problem: Problem, incumbent: Placement, free: list[int] | None, seconds: float,
         solver: str | None = None, target: int | None = None,
         after: float | None = None) -> tuple[Placement | None, dict[str, Any]]:
    """One contracted re-solve within ``seconds`` (the whole call): a placement of the full graph that the cost
    model finds valid and better than ``incumbent`` (else ``None``), and what happened (``info``). ``free``: the
    window's ops (in order), or ``None`` for the coarse solve. A coarse model whose estimated build and search
    (:data:`SEARCH_PER_BUILD` times the build) do not fit the time left is contracted further (fewer intervals, a
    shorter window) first, and a window whose CP-SAT model passes :data:`CPSAT_WINDOW_OPS` is shortened until it
    fits. ``after``: the seconds kept to expand the answer and score it (default :data:`EXPAND` per op), measured
    in ``info["expand_seconds"]``; ``info["free"]``: the window's ops the model held."""
    t0 = time.perf_counter()
    solver = solver or sub_solver(problem)
    after = EXPAND * problem.graph.n if after is None else after
    until = t0 + seconds - (CHILD if solver == "cpsat" else 0.0) - after  # the model's own time
    if target is None:
        target = CPSAT_OPS if solver == "cpsat" else fitting_ops(problem, get("auto", problem), until - t0,
                                                                 SEARCH_PER_BUILD)
    info: dict[str, Any] = {"ops": problem.graph.n, "target": target}
    made = _sized(problem, incumbent, free, target, until, solver)
    if isinstance(made, str):
        return None, {**info, "skipped": made}
    coarsening, small, start, keep, window = made
    info["coarse_ops"] = small.graph.n
    if free is not None:
        info["free"] = window
    left = until - time.perf_counter()
    if left < 1.0:
        return None, {**info, "skipped": "no time left for the coarse model"}
    try:
        with unread_bounds():  # a coarse model's bound is no bound for the whole graph: not priced
            result = solve(small, solver=solver, time_limit=left, warm_start=start, gap=1e-6)
    except PlacementError as err:
        return None, {**info, "skipped": str(err).splitlines()[0]}
    info.update(status=result.status.value, coarse_objective=result.objective,
                start_refused="warm start refused" in result.message)
    if result.placement is None:
        return None, info
    began = time.perf_counter()
    found = _better(problem, incumbent, coarsening, _on(problem.cluster, keep, result.placement))
    info["expand_seconds"] = time.perf_counter() - began
    return found, info


def _on(cluster: Cluster, keep: np.ndarray, placement: Placement) -> Placement:
    """A placement on the kept devices as one on ``cluster`` (its schedule's transfers renamed too)."""
    if placement.cluster is cluster:
        return placement
    schedule = placement.schedule
    if schedule is not None:
        schedule = Schedule(schedule.start, {(v, int(keep[d])): t for (v, d), t in schedule.transfer_start.items()})
    return Placement(placement.graph, cluster, keep[np.asarray(placement.assign)], placement.source,
                     schedule=schedule)


TRIES = 4  # contractions tried before a step gives up on a model too large for its time


def _sized(problem: Problem, incumbent: Placement, free: list[int] | None, target: int, until: float,
           solver: str) -> tuple[Coarsening, Problem, Placement, np.ndarray, int] | str:
    """The contraction, its problem (on the incumbent's devices and a spare of each class, :func:`devices`), the
    incumbent on it, the devices kept and the window's ops kept free, contracted until the model's estimated build
    and search (:data:`SEARCH_PER_BUILD` times it) fit the time left until ``until`` (``time.perf_counter()``), read
    after each contraction, which on a large graph takes time of its own; a CP-SAT window (whose model is not sized
    by its build) shortened until its contraction keeps at most :data:`CPSAT_WINDOW_OPS` ops (each op of the window
    is one coarse op at most: the excess, dropped from its end, brings it there or near); or why there is none."""
    window = None if free is None else list(free)
    keep = devices(problem, incumbent)
    cluster = sub_cluster(problem.cluster, keep)
    at = np.full(problem.cluster.size, -1, dtype=np.int64)
    at[keep] = np.arange(len(keep))
    for _ in range(TRIES):
        if (window is None and target < 2) or (window is not None and not window):
            return "no coarse model fits the time"
        if time.perf_counter() >= until:
            return "no time left for the coarse model"
        mask = None if window is None else _mask(problem.graph.n, window)
        groups = intervals(problem, incumbent, mask, target)
        while window is not None and solver == "cpsat" and len(groups) > CPSAT_WINDOW_OPS:  # a shorter window
            window = window[:len(window) - (len(groups) - CPSAT_WINDOW_OPS)]  # contracts it less, down to the runs
            if not window:  # of the ops outside it, which no window contracts
                return f"{OVERSIZED} {len(groups)} ops, more than CP-SAT searches in a step ({CPSAT_WINDOW_OPS})"
            if time.perf_counter() >= until:
                return "no time left for the coarse model"
            mask = _mask(problem.graph.n, window)
            groups = intervals(problem, incumbent, mask, target)
        try:
            coarsening = contract(problem.graph, groups,
                                  senders=None if mask is None else crossing(problem, incumbent, mask)[1])
            pinned = [] if mask is None else [k for k, group in enumerate(groups) if not mask[group[0]]]
            small = coarse_problem(problem, coarsening, pinned, incumbent, cluster)
        except PlacementError as err:
            return str(err).splitlines()[0]
        if small is None:
            return "a term the coarse problem cannot hold"
        need = 0.0 if solver == "cpsat" else build_seconds(small, get("auto", small)) * (1 + SEARCH_PER_BUILD)
        room = until - time.perf_counter()  # the contraction and its count took time: the clock, read again
        if need <= room:
            start = Placement(small.graph, small.cluster, at[mapped(incumbent, groups)], source="incumbent")
            return coarsening, small, start, np.asarray(keep, dtype=np.int64), 0 if window is None else len(window)
        if room <= 0:
            return "no time left for the coarse model"
        shrink = 0.9 * math.sqrt(room / need)
        if window is None:
            target = min(int(target * shrink), len(groups) - 1)
        else:
            window = window[:min(int(len(window) * shrink), len(window) - 1)]
    return "no coarse model fits the time"


def _mask(n: int, window: list[int]) -> np.ndarray:
    """The window's ops as a mask of the ``n`` ops."""
    mask = np.zeros(n, dtype=bool)
    mask[window] = True
    return mask


def _better(problem: Problem, incumbent: Placement, coarsening: Coarsening, coarse: Placement) -> Placement | None:
    """The expanded coarse placement (with the best of its schedules for the makespan) when the cost model finds it
    valid and better than the incumbent."""
    fine = coarsening.expand(coarse)
    candidates = [fine, Placement(fine.graph, fine.cluster, fine.assign, fine.source)]
    if coarse.schedule is not None and problem.cost_model().objective is Objective.MAKESPAN:
        candidates.append(_ordered(problem, coarsening, coarse, fine))
    best, value = None, problem.evaluate(incumbent).objective * (1 - 1e-9)
    for p in candidates:
        if p is None:
            continue
        ev = problem.evaluate(p)
        if ev.valid and not problem.violations(p) and ev.objective < value:
            best, value = p, ev.objective
    return best


def _ordered(problem: Problem, coarsening: Coarsening, coarse: Placement, fine: Placement) -> Placement | None:
    """``fine`` list-scheduled in the coarse schedule's order (coarse starts, then each group's run order)."""
    g, a = fine.graph, np.asarray(fine.assign)
    rank = {v: (float(coarse.schedule.start[k]), k, i) for k, group in enumerate(coarsening.members)
            for i, v in enumerate(group)}
    builder = ListScheduler(g, fine.cluster, problem.cost_model().congestion)
    try:
        for v in sorted(range(g.n), key=rank.__getitem__):
            builder.place(v, int(a[v]))
    except (PlacementError, KeyError, IndexError):
        return None
    return Placement(g, fine.cluster, a, fine.source, schedule=builder.schedule())


def remaining(deadline: float) -> float:
    """Seconds until ``deadline`` (``time.perf_counter()``), never below 0."""
    return max(0.0, deadline - time.perf_counter())


__all__ = ["coarse_problem", "crossing", "devices", "intervals", "mapped", "order", "remaining", "step", "sub_solver"]
