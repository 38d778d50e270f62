"""Critical-chain local search for schedules on heterogeneous devices (method ``"schedule-ls"``), and CPOP.

:func:`cpop` (method ``"cpop"``) is Topcuoglu et al.'s (2002) Critical-Path-On-a-Processor list
scheduling: ops by decreasing ``upward + downward`` rank (mean costs), the ops of one critical
path (walked from the top-ranked source along top-ranked successors) on the one device that
runs them fastest, every other op
where it finishes first (insertion-based and memory-aware, as HEFT in
:mod:`~placement_dsl.heuristics.listsched`). On a transformer it keeps the chain of large
matmuls on one fast device and spreads the attention heads, where HEFT may split the chain.

For graphs too large for one MILP or CP-SAT model (MOIRAI's GPT-3 at thousands of ops, where a
CP-SAT window over the whole model finds nothing in its step), :func:`schedule_local_search`
searches the assignment and the order; a candidate runs as the incumbent before the first op it changes and is
list-scheduled by insertion (:class:`~placement_dsl.schedule.ListScheduler`) in the incumbent's start order from
there, resumed from a copy of the incumbent's prefix (:class:`.schedule_moves.Prefix`: 7 ms a candidate on 3,065 ops
where list-scheduling it whole took 20):

1. the incumbent's *critical chain*: from the op that ends last, back through what made each
   start when it did — its latest input (the producer, or the transfer carrying it), or, when it
   waited for its device, the op that ran there just before (a *blocker*);
2. moves: a blocker, then an op of the chain next to a transfer (first to the device across it),
   then any op of the chain, together with the ops within ``r`` hops of it on
   the same device (``r`` in :data:`RADII`: one op, a chain, a head of attention, a branch; never
   through a hub of more than :data:`HUB` neighbours, so a head's ball stops at its split and
   concat) and their colocation groups, to each other device that may run and hold them; last, each op of the chain
   earlier in the order, its device kept (:func:`.schedule_moves.order_moves`: before its blocker, or right after
   its last input);
3. from the local optimum of step 4, the descent again with each candidate scored by its list schedule improved
   forward and backward too (:func:`.mirror.justified`: the assignment list-scheduled again in reversed time, two
   orders, while that ends sooner): the forward pass alone books ports greedily from the start and hid assignments
   whose good schedule it never builds (a generated 60-task sheet of wide layers: local optimum 1.769 forward, 1.380
   after the mirrored descent; CP-SAT: 1.257). Mirroring every candidate from the start cost a 300-task sheet its
   moves (7.372 -> 7.753 in 20 s): a candidate costs three to five list schedules, so it comes last;
4. first improvement: a candidate whose makespan is less, or equal with a smaller sum of finish
   times (progress across a plateau of equal makespans), becomes the incumbent and the chain is
   recomputed; when no move of the chain improves, the search stops (a local optimum)
   or the time limit ends it.

The descent starts from the best schedule of the start's devices: the start's own, its mirror, the forward list
schedules in the start's order and in the mirror's (CPOP's devices on a 3,065-op sheet: 28.22, 27.90, 28.85, 27.98;
from the forward pass in its order no move was accepted in 20 s, as each had to beat the start's own 28.22), and a
candidate runs as its incumbent up to the first op it changes (:class:`.schedule_moves.Prefix`). The start's list schedule is mirrored once before any move (:func:`.mirror.justified`, a fraction of a second), and
answered when the search ends without beating it: on 1,000- to 5,000-task sheets the descent runs out of time far
from the local optimum that step 3 waits for (a generated 1,000-task sheet: CPOP's 28.224, its mirror 27.898).

Before the whole graph's chain, for at most :data:`SEGMENT_SHARE` of the time, the same descent (with kicks) runs on
each segment between two cut ops as a graph of its own, identical segments once (:mod:`.segment_ls`): a candidate
there costs the segment's ops, not the graph's. It runs in rounds and ends when its segments stall, handing the rest
of its share to the whole graph's chain.

Every answer is a list schedule, valid by construction, and certified by the cost model.
"""
from __future__ import annotations

import math
import random
import time
from typing import Any

import numpy as np

from ..bounds.makespan import makespan_bounds
from ..cluster import Cluster
from ..congestion import Congestion
from ..errors import SpecError
from ..evaluate import CostModel, MemoryMode, Objective, evaluate
from ..graph import Graph
from ..placement import Placement
from ..schedule import ListScheduler, upward_rank
from . import manifest
from .base import HeuristicResult, cut_at, deadline_at, left, run, stopped
from .listsched import earliest_finish_device, list_walk, mean_costs, op_groups
from .mirror import ROUNDS, justified, left_justified
from .registry import heuristic
from .schedule_moves import TOL, ScheduleState, better_schedule, descend, start_order
from .segment_ls import improve_segments


def downward_rank(graph: Graph, time: np.ndarray, edge_comm: np.ndarray) -> np.ndarray:
    """``down(v) = max_u (down(u) + time(u) + comm(u, v))`` over predecessors ``u`` (0 for sources)."""
    down = np.zeros(graph.n)
    comm = np.asarray(edge_comm, dtype=float)
    into: list[list[int]] = [[] for _ in range(graph.n)]
    for k, v in enumerate(graph.dst.tolist()):
        into[v].append(k)
    src, t = graph.src.tolist(), np.asarray(time, dtype=float)
    for v in graph.topo.tolist():
        down[v] = max((down[src[k]] + t[src[k]] + comm[k] for k in into[v]), default=0.0)
    return down


def _critical_path(graph: Graph, rank: np.ndarray) -> np.ndarray:
    """One path of largest rank sum: from the source of largest rank, each time the successor of largest rank
    (ties: the lowest index), as CPOP walks it; symmetric branches (equal heads) stay off the path."""
    on = np.zeros(graph.n, dtype=bool)
    sources = [v for v in range(graph.n) if graph.predecessors(v).size == 0]
    v = max(sources, key=lambda u: (rank[u], -u), default=None)
    while v is not None:
        on[v] = True
        succ = graph.successors(v).tolist()
        v = max(succ, key=lambda u: (rank[u], -u)) if succ else None
    return on


@heuristic("cpop", optimizes="makespan", options=manifest.Nothing)
def cpop(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
         time_limit: float | None = None) -> HeuristicResult:
    """CPOP list scheduling (see the module docstring). Past ``time_limit`` seconds, less the time to place the ops
    left and score the schedule (:func:`~.base.cut_at`), the ops left stop comparing devices: each goes to the
    critical path's device, else to the previous op's, where it is admitted (``info["stopped"]``)."""
    t0 = time.perf_counter()
    at = cut_at(deadline_at("cpop", time_limit), graph)
    model = model or CostModel.named("makespan")
    unit, packing = op_groups(graph, cluster, hard=model.memory is MemoryMode.HARD)
    mean_time, comm = mean_costs(graph, cluster)
    rank = upward_rank(graph, mean_time, comm[graph.src]) + downward_rank(graph, mean_time, comm[graph.src])
    on_path = _critical_path(graph, rank)
    times = cluster.times(graph)
    path_time = np.where(np.isfinite(times[on_path]), times[on_path], np.inf).sum(axis=0)
    fastest = int(np.argmin(path_time))

    def choose(builder: ListScheduler, v: int, u: int, cut: bool, last: int) -> int:
        near = [d for d in ((fastest, last) if cut else (fastest,) if on_path[v] else ()) if d >= 0]
        d = next((d for d in near if packing.room(u, d) and packing.admits(u, d)), -1)
        return d if d >= 0 else earliest_finish_device(builder, packing, v, u)

    assign, schedule, cut = list_walk(graph, cluster, Congestion(model.congestion), unit, packing, rank, at, choose)
    placement = Placement(graph, cluster, assign, "cpop", schedule=schedule)
    ev = evaluate(placement, model)
    result = HeuristicResult(method="cpop", placement=placement, objective=ev.objective, evaluations=1,
                             seconds=time.perf_counter() - t0,
                             info={"makespan": ev.objective, "path_device": cluster.names[fastest],
                                   "path_ops": int(on_path.sum())})
    return stopped(result) if cut else result


SEARCH_SECONDS = 60.0  # schedule-ls's time limit when none is given
BOUND_OPS = 500  # past its time limit schedule-ls computes the closed-form bound only up to this many ops


MIRROR_SHARE = 0.3  # of the time left at the forward local optimum, the most the mirrored descent takes: given all of
# it, MOIRAI's GoogLeNet spent 10 s more of a 60 s solve in its start race and ended at 1.35661 where it had 1.31258.
# At this share, 60 s solves with and without the mirrored descent side by side (3 each, load 3-9): GoogLeNet 1.3532
# and 1.3551, GPT-3 330M inter-server 213.899 both, intra-server 143.376 and 143.394, 300- and 1,000-task sheets
# 10.048 and 10.002, 28.224 both, a sheet of 60 wide layers 1.447 and 1.698: kept
SEGMENT_SHARE = 0.5  # of schedule-ls's time, the most its search segment by segment takes before the whole graph's


def _segments_first(state: ScheduleState, model: CostModel, assign: np.ndarray, b: ListScheduler, until: float,
                    seed: int | None, info: dict) -> tuple[np.ndarray, tuple[float, float], ListScheduler] | None:
    """The incumbent searched segment by segment (:mod:`.segment_ls`) until ``until`` or until its segments stall,
    then list-scheduled whole in the segments' orders: its devices, makespan and scheduler, or ``None`` (no segment
    improved, or it cannot be scheduled); what the segments' search did goes in ``info``."""
    if time.perf_counter() >= until:
        return None
    t0 = time.perf_counter()
    found = improve_segments(state.g, state.c, model, assign, start_order(state.g, b), until, state.unit,
                             seed=seed or 0)
    if found is None:
        return None
    new, order, done = found
    info["segments"] = {**done, "seconds": time.perf_counter() - t0}
    if new is None:
        return None
    makespan, nb = state.schedule(new, order)
    return None if nb is None else (new, makespan, nb)


def _mirrored_descent(state: ScheduleState, assign: np.ndarray, best: tuple[float, float], b: ListScheduler,
                      found: ListScheduler | None, until: float, rng: random.Random) -> tuple:
    """The descent again from its local optimum, every candidate scored by its mirror too (step 3): the incumbent
    re-scored, then :func:`~.schedule_moves.descend`; its devices, makespan, scheduler, the scheduler to answer
    with (``found``), ``(candidates, moves)`` and whether it ended at a local optimum."""
    state.mirror = True
    span, nb = state.schedule(assign, start_order(state.g, b))
    taken = int(nb is not None and better_schedule(span, best))
    if taken:
        best, b, found = span, nb, nb
    now = time.perf_counter()
    assign, best, b, more, local_optimum = descend(state, assign, best, b, now + MIRROR_SHARE * (until - now), rng)
    return assign, best, b, b if more[1] else found, (more[0] + 1, more[1] + taken), local_optimum


def _starts(state: ScheduleState, first: Placement, own: Any, mirrored_start: ListScheduler | None
            ) -> list[ListScheduler]:
    """Schedules of the start's devices besides its forward list schedule in its start order: its own schedule (when
    valid), its mirror and the forward list schedule in the mirror's start order."""
    out = []
    if own.valid and first.schedule is not None:
        starts = {v: float(t) for v, t in enumerate(first.schedule.start)}
        try:
            out.append(left_justified(state.blank.fresh(), first.assign, starts, dict(first.schedule.transfer_start)))
        except KeyError:  # a transfer the cost model's schedule does not hold (a device it times as free of them)
            pass
    if mirrored_start is not None:
        out.append(mirrored_start)
        nb = state.schedule(first.assign, start_order(state.g, mirrored_start))[1]
        out += [] if nb is None else [nb]
    return out


@heuristic("schedule-ls", optimizes="makespan", options=manifest.ScheduleStart)
def schedule_local_search(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = 0,
                          time_limit: float | None = None, start: str | Placement = "list") -> HeuristicResult:
    """Critical-chain local search from ``start`` (a heuristic name or a placement) for ``time_limit`` seconds
    (``None``: :data:`SEARCH_SECONDS`), the start's heuristic included; ``info["stopped"]`` when it ran out.

    The makespan is never worse than the start's: its own schedule when it carries a valid one,
    else its list schedule in start order. ``bound`` is the closed-form makespan bound
    (:func:`~placement_dsl.bounds.makespan.makespan_bounds`), past the time limit only on graphs of up
    to :data:`BOUND_OPS` ops; ``info`` reports the accepted moves and whether a local optimum was reached.
    """
    t0 = time.perf_counter()
    at = deadline_at("schedule-ls", SEARCH_SECONDS if time_limit is None else time_limit)
    time_limit = SEARCH_SECONDS if time_limit is None else float(time_limit)
    model = model or CostModel.named("makespan")
    state = ScheduleState(graph, cluster, model)
    first = start if isinstance(start, Placement) else run(start, graph, cluster, model=model,
                                                           time_limit=left(at)).placement
    assign = first.assign.copy()
    order = (list(graph.topo.tolist()) if first.schedule is None else
             sorted(range(graph.n), key=lambda v: (first.schedule.start[v], int(graph.rank[v]))))
    one = time.perf_counter()
    best, b = state.schedule(assign, order)
    one = time.perf_counter() - one  # a list schedule's seconds: a mirroring costs one, justified() ROUNDS at most
    if b is None:
        raise SpecError("schedule-ls: the start placement cannot be scheduled (an op on a device that cannot run it)")
    own = evaluate(first, model)  # the answer when the search ends above it
    rng, evaluations, accepted, local_optimum, found, report = random.Random(seed), 1, 0, False, None, {}
    mirrored_start = justified(b) if t0 + time_limit - time.perf_counter() > 2 * ROUNDS * one else None  # step 0
    for nb in _starts(state, first, own, mirrored_start):  # the descent starts from the best schedule of the start
        again = (max(nb.finish, default=0.0), math.fsum(nb.finish))
        evaluations += 1
        if better_schedule(again, best):
            best, b = again, nb
    segmented = _segments_first(state, model, assign, b, t0 + SEGMENT_SHARE * time_limit, seed, report)
    if segmented is not None and better_schedule(segmented[1], best):
        assign, best, b, found = segmented[0], segmented[1], segmented[2], segmented[2]
        accepted += 1
    evaluations += 1 if segmented is not None else 0
    assign, best, b, more, local_optimum = descend(state, assign, best, b, t0 + time_limit, rng)
    evaluations += more[0]
    accepted += more[1]
    found = b if more[1] else found
    if local_optimum and time.perf_counter() < t0 + time_limit:  # step 3: the forward local optimum, mirrored
        assign, best, b, found, more, local_optimum = _mirrored_descent(state, assign, best, b, found, t0 + time_limit,
                                                                        rng)
        evaluations += more[0]
        accepted += more[1]
    if mirrored_start is not None and max(mirrored_start.finish) < best[0] * (1 - TOL):  # the search did not beat it
        assign, found = np.asarray(mirrored_start.device, dtype=np.int64), mirrored_start
        best, report["mirrored_start"] = (max(mirrored_start.finish), math.fsum(mirrored_start.finish)), True
    placement = (Placement(graph, cluster, assign, "schedule-ls", schedule=found.schedule()) if found is not None
                 else Placement(graph, cluster, assign, "schedule-ls", schedule=first.schedule if own.valid and
                                own.objective <= best[0] else b.schedule()))
    ev = evaluate(placement, model)
    kept = own.valid and (not ev.valid or own.objective < ev.objective)  # the referee's word, not the list schedule's:
    if kept:  # on invocation devices a move the list schedule liked can score worse (a 4-op trap: 16 -> 18)
        placement, ev = Placement(graph, cluster, first.assign, "schedule-ls", schedule=first.schedule), own
    info = {"makespan": ev.objective, "moves": 0 if kept else accepted, "local_optimum": local_optimum, **report}
    if kept:
        info["kept_start"] = True
    if not local_optimum:
        info["stopped"] = "time limit"
    cheap = local_optimum or graph.n <= BOUND_OPS or time.perf_counter() - t0 < time_limit  # not past the limit
    # on large graphs: 3 s on a 1,137-op transformer, 20 s of a 1 s limit with the searches of an "auto" start
    serial = not (cluster.parallel.any() or cluster.invocation.any())  # the closed forms run every device serially
    bound = makespan_bounds(graph, cluster)["bound"] if model.objective is Objective.MAKESPAN and cheap and serial \
        else None
    return HeuristicResult(method="schedule-ls", placement=placement, objective=ev.objective, evaluations=evaluations,
                           seconds=time.perf_counter() - t0, bound=bound, info=info)


__all__ = ["SEARCH_SECONDS", "ScheduleState", "cpop", "downward_rank", "schedule_local_search"]
