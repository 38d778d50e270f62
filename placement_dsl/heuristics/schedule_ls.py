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
searches the assignment and schedules every candidate by insertion-based list scheduling
(:class:`~placement_dsl.schedule.ListScheduler`) in the incumbent's start order, about a tenth
of a second per candidate on 4,000 ops:

1. the incumbent's *critical chain*: from the op that ends last, back through what made each
   start when it did — its latest input (the producer, or the transfer carrying it), or, when it
   waited for its device, the op that ran there just before (a *blocker*);
2. moves: a blocker, then an op of the chain next to a transfer (first to the device across it),
   then any op of the chain, together with the ops within ``r`` hops of it on
   the same device (``r`` in :data:`RADII`: one op, a chain, a head of attention, a branch; never
   through a hub of more than :data:`HUB` neighbours, so a head's ball stops at its split and
   concat) and their colocation groups, to each other device that may run and hold them;
3. first improvement: a candidate whose makespan is less, or equal with a smaller sum of finish
   times (progress across a plateau of equal makespans), becomes the incumbent and the chain is
   recomputed; when no move of the chain improves, the search stops (a local optimum)
   or the time limit ends it.

Before the whole graph's chain, for at most :data:`SEGMENT_SHARE` of the time, the same descent (with kicks) runs on
each segment between two cut ops as a graph of its own, identical segments once (:mod:`.segment_ls`): a candidate
there costs the segment's ops, not the graph's.

Every answer is a list schedule, valid by construction, and certified by the cost model.
"""
from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator

import numpy as np

from ..bounds.makespan import makespan_bounds
from ..cluster import Cluster
from ..errors import SpecError
from ..evaluate import CostModel, MemoryMode, Objective, evaluate
from ..graph import Graph
from ..placement import Placement
from ..schedule import Congestion, ListScheduler, priority_order, upward_rank
from . import manifest
from .base import HeuristicResult, deadline_at, left, run
from .listsched import _choose, _groups, mean_costs
from .registry import heuristic

RADII = (0, 1, 2, 4, 8, 16, 32, 64)
HUB = 4  # a ball never grows into an op with more neighbours (a split or a concat of many heads)
TOL = 1e-9


class ScheduleState:
    """The graph's units, memory and neighbours, and list scheduling of an assignment in a given order."""

    def __init__(self, graph: Graph, cluster: Cluster, model: CostModel, hard: bool | None = None):
        self.g, self.c, self.congestion = graph, cluster, Congestion(model.congestion)
        hard = model.memory is MemoryMode.HARD if hard is None else hard
        self.unit, packing = _groups(graph, cluster, hard=hard)
        self.size, self.allowed, self.capacity = packing.size, packing.allowed, packing.free.copy()
        self.members = [np.flatnonzero(self.unit == u) for u in range(self.size.size)]
        self.preds = [graph.predecessors(v).tolist() for v in range(graph.n)]
        self.near = [sorted(set(self.preds[v]) | set(graph.successors(v).tolist())) for v in range(graph.n)]

    def schedule(self, assign: np.ndarray, order: list[int]) -> tuple[tuple[float, float], ListScheduler | None]:
        """``(makespan, sum of finish times)`` and the scheduler state of ``assign`` list-scheduled in ``order``
        (``inf`` if it cannot run)."""
        b = ListScheduler(self.g, self.c, self.congestion)
        try:
            for v in order:
                b.place(v, int(assign[v]))
        except SpecError:
            return (math.inf, math.inf), None
        return (max(b.finish, default=0.0), math.fsum(b.finish)), b

    def used(self, assign: np.ndarray) -> np.ndarray:
        return np.bincount(assign[[int(m[0]) for m in self.members]], weights=self.size, minlength=self.c.size)


_State = ScheduleState  # the former name, kept for one release


def _start_order(g: Graph, b: ListScheduler) -> list[int]:
    """Ops by start time, ties in topological order (a topological order: an op starts after its inputs end)."""
    return sorted(range(g.n), key=lambda v: (b.start[v], int(g.rank[v])))


def critical_chain(state: _State, b: ListScheduler) -> tuple[list[int], list[int]]:
    """The critical chain's ops (last first) and its blockers (ops its members waited for on their device)."""
    by_device: dict[int, dict[float, int]] = {}
    for v in range(state.g.n):
        if b.finish[v] > b.start[v]:
            by_device.setdefault(b.device[v], {})[round(b.finish[v], 9)] = v
    v, chain, blockers, seen = int(np.argmax(b.finish)), [], [], set()
    while v not in seen:
        seen.add(v)
        chain.append(v)
        d, s = b.device[v], b.start[v]
        ready = [(_arrival(b, u, d), u) for u in state.preds[v]]
        t, u = max(ready, default=(-math.inf, -1))
        if u >= 0 and t >= s - TOL * max(1.0, s):
            v = u
            continue
        prev = by_device.get(d, {}).get(round(s, 9))
        if prev is None:
            break
        blockers.append(prev)
        v = prev
    return chain, blockers


_critical = critical_chain  # the former name, kept for one release


def _arrival(b: ListScheduler, u: int, d: int) -> float:
    """When ``u``'s output is on device ``d``: its end there, else the end of the transfer carrying it."""
    a = b.device[u]
    if a == d or (u, d) not in b.transfer_start:
        return b.finish[u]
    return b.transfer_start[(u, d)] + b.duration(u, a, d)


def _ball(state: _State, v: int, radius: int, assign: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ops within ``radius`` hops of ``v`` through ops on ``v``'s device, with their colocation groups."""
    d, ball, frontier = assign[v], {v}, [v]
    for _ in range(radius):
        frontier = [w for u in frontier for w in state.near[u]
                    if assign[w] == d and w not in ball and len(state.near[w]) <= HUB]
        ball.update(frontier)
    units = sorted({int(state.unit[w]) for w in ball})
    return np.concatenate([state.members[u] for u in units]), np.array(units)


def _moves(state: _State, b: ListScheduler, assign: np.ndarray, rng: random.Random) -> Iterator[tuple[np.ndarray, int]]:
    """Candidate moves ``(ops, device)``: blockers, then ops of the chain next to a transfer (first to the device
    across it), then the rest of the chain; each by growing radius."""
    chain, blockers = _critical(state, b)
    across: dict[int, list[int]] = {}
    for i, v in enumerate(chain):
        across[v] = [int(assign[w]) for w in chain[max(0, i - 1):i + 2] if assign[w] != assign[v]]
    tiers = [list(dict.fromkeys(blockers)), [v for v in chain if across[v]], chain]
    used, seen = state.used(assign), set()
    for tier in tiers:
        rng.shuffle(tier)
        for v in tier:
            if v in seen:
                continue
            seen.add(v)
            devices = list(dict.fromkeys(across.get(v, []) + rng.sample(range(state.c.size), state.c.size)))
            yield from _balls(state, v, assign, used, devices)


def _balls(state: _State, v: int, assign: np.ndarray, used: np.ndarray,
           devices: list[int]) -> Iterator[tuple[np.ndarray, int]]:
    tried: set[tuple[int, ...]] = set()
    for radius in RADII:
        ops, units = _ball(state, v, radius, assign)
        key = tuple(units.tolist())
        if key in tried:
            continue
        tried.add(key)
        need = float(state.size[units].sum())
        for d in devices:
            if d != assign[v] and state.allowed[units, d].all() and used[d] + need <= state.capacity[d] * (1 + 1e-9):
                yield ops, d


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
    """CPOP list scheduling (see the module docstring): one pass, ``time_limit`` has nothing to cut short."""
    t0 = time.perf_counter()
    deadline_at("cpop", time_limit)
    model = model or CostModel.named("makespan")
    unit, packing = _groups(graph, cluster, hard=model.memory is MemoryMode.HARD)
    mean_time, comm = mean_costs(graph, cluster)
    rank = upward_rank(graph, mean_time, comm[graph.src]) + downward_rank(graph, mean_time, comm[graph.src])
    on_path = _critical_path(graph, rank)
    times = cluster.times(graph)
    path_time = np.where(np.isfinite(times[on_path]), times[on_path], np.inf).sum(axis=0)
    fastest = int(np.argmin(path_time))
    builder = ListScheduler(graph, cluster, Congestion(model.congestion))
    device = np.full(packing.size.size, -1, dtype=np.int64)
    for v in priority_order(graph, rank):
        u = unit[v]
        if device[u] < 0:
            keep = on_path[v] and packing.room(u, fastest) and packing.admits(u, fastest)
            device[u] = fastest if keep else _choose(builder, packing, v, u)
            packing.take(u, int(device[u]))
        builder.place(v, int(device[u]))
    placement = Placement(graph, cluster, device[unit], "cpop", schedule=builder.schedule())
    ev = evaluate(placement, model)
    return HeuristicResult(method="cpop", placement=placement, objective=ev.objective, evaluations=1,
                           seconds=time.perf_counter() - t0,
                           info={"makespan": ev.objective, "path_device": cluster.names[fastest],
                                 "path_ops": int(on_path.sum())})


SEARCH_SECONDS = 60.0  # schedule-ls's time limit when none is given
BOUND_OPS = 500  # past its time limit schedule-ls computes the closed-form bound only up to this many ops


def descend(state: _State, assign: np.ndarray, best: tuple[float, float], b: ListScheduler, until: float,
            rng: random.Random, movable: np.ndarray | None = None
            ) -> tuple[np.ndarray, tuple[float, float], ListScheduler, tuple[int, int], bool]:
    """First-improvement descent over the critical chain's moves (module docstring, 2-3) from ``assign`` (its makespan
    ``best`` and scheduler ``b``) until ``until`` (:func:`time.perf_counter`), moving only ``movable`` ops (default
    all): the best devices, their makespan and scheduler, ``(candidates tried, moves accepted)``, and whether a
    local optimum was reached."""
    evaluations = accepted = 0
    while time.perf_counter() < until:
        order, improved = _start_order(state.g, b), False
        for ops, d in _moves(state, b, assign, rng):
            if time.perf_counter() >= until:
                break
            if movable is not None and not movable[ops].all():
                continue
            trial = assign.copy()
            trial[ops] = d
            makespan, tb = state.schedule(trial, order)
            evaluations += 1
            if _better(makespan, best):
                assign, best, b, improved, accepted = trial, makespan, tb, True, accepted + 1
                break
        if not improved:
            return assign, best, b, (evaluations, accepted), time.perf_counter() < until
    return assign, best, b, (evaluations, accepted), False


SEGMENT_SHARE = 0.5  # of schedule-ls's time, the most its search segment by segment takes before the whole graph's


def _segments_first(state: _State, model: CostModel, assign: np.ndarray, b: ListScheduler, until: float,
                    seed: int | None) -> tuple[np.ndarray, tuple[float, float], ListScheduler] | None:
    """The incumbent searched segment by segment (:mod:`.segment_ls`) until ``until``, then list-scheduled whole in
    the segments' orders: its devices, makespan and scheduler, or ``None`` (no segment improved, or it cannot be
    scheduled)."""
    from .segment_ls import improve_segments

    if time.perf_counter() >= until:
        return None
    found = improve_segments(state.g, state.c, model, assign, _start_order(state.g, b), until, state.unit,
                             seed=seed or 0)
    if found is None:
        return None
    new, order, _ = found
    makespan, nb = state.schedule(new, order)
    return None if nb is None else (new, makespan, nb)


def _better(one: tuple[float, float], other: tuple[float, float]) -> bool:
    """A smaller makespan, or the same makespan with a smaller sum of finish times (progress on a plateau)."""
    if one[0] < other[0] * (1 - TOL):
        return True
    return one[0] <= other[0] * (1 + TOL) and one[1] < other[1] * (1 - TOL)


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
    state = _State(graph, cluster, model)
    first = start if isinstance(start, Placement) else run(start, graph, cluster, model=model,
                                                           time_limit=left(at)).placement
    assign = first.assign.copy()
    order = (list(graph.topo.tolist()) if first.schedule is None else
             sorted(range(graph.n), key=lambda v: (first.schedule.start[v], int(graph.rank[v]))))
    best, b = state.schedule(assign, order)
    if b is None:
        raise SpecError("schedule-ls: the start placement cannot be scheduled (an op on a device that cannot run it)")
    own = evaluate(first, model)
    if own.valid and own.objective < best[0]:  # the start's own schedule is better: a move must not be worse
        best = (own.objective, math.inf)
    rng, evaluations, accepted, local_optimum, found = random.Random(seed), 1, 0, False, None
    segmented = _segments_first(state, model, assign, b, t0 + SEGMENT_SHARE * time_limit, seed)
    if segmented is not None and _better(segmented[1], best):
        assign, best, b, found = segmented[0], segmented[1], segmented[2], segmented[2]
        accepted += 1
    evaluations += 1 if segmented is not None else 0
    assign, best, b, more, local_optimum = descend(state, assign, best, b, t0 + time_limit, rng)
    evaluations += more[0]
    accepted += more[1]
    found = b if more[1] else found
    placement = (Placement(graph, cluster, assign, "schedule-ls", schedule=found.schedule()) if found is not None
                 else Placement(graph, cluster, assign, "schedule-ls", schedule=first.schedule if own.valid and
                                own.objective <= best[0] else b.schedule()))
    ev = evaluate(placement, model)
    info = {"makespan": ev.objective, "moves": accepted, "local_optimum": local_optimum}
    if not local_optimum:
        info["stopped"] = "time limit"
    cheap = local_optimum or graph.n <= BOUND_OPS or time.perf_counter() - t0 < time_limit  # not past the limit
    # on large graphs: 3 s on a 1,137-op transformer, 20 s of a 1 s limit with the searches of an "auto" start
    serial = not (cluster.parallel.any() or cluster.invocation.any())  # the closed forms run every device serially
    bound = makespan_bounds(graph, cluster)["bound"] if model.objective is Objective.MAKESPAN and cheap and serial \
        else None
    return HeuristicResult(method="schedule-ls", placement=placement, objective=ev.objective, evaluations=evaluations,
                           seconds=time.perf_counter() - t0, bound=bound, info=info)
