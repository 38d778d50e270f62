"""The critical-chain moves of a list schedule on heterogeneous devices, shared by the searches that make them
(:mod:`.schedule_ls` on the whole graph, :mod:`.segment_ls` segment by segment): the search's state (units, memory,
neighbours, list scheduling of an assignment in an order), the critical chain and its blockers, balls of ops around
one op, and the first-improvement descent over them (:mod:`.schedule_ls`'s docstring, steps 1-4)."""
from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator

import numpy as np

from ..cluster import Cluster
from ..congestion import Congestion
from ..errors import SpecError
from ..evaluate import CostModel, MemoryMode
from ..graph import Graph
from ..schedule import ListScheduler
from .listsched import op_groups
from .mirror import justified

RADII = (0, 1, 2, 4, 8, 16, 32, 64)
HUB = 4  # a ball never grows into an op with more neighbours (a split or a concat of many heads)
TOL = 1e-9
MIRROR_SLACK = 0.15  # relative: with ``mirror``, a candidate whose forward list schedule ends within this of its
# incumbent's is mirrored (heuristics/mirror.py); the forward pass of CP-SAT's optimal assignment of an 80-task sheet
# ends 10 % later than its mirror


class ScheduleState:
    """The graph's units, memory and neighbours, and list scheduling of an assignment in a given order."""

    def __init__(self, graph: Graph, cluster: Cluster, model: CostModel, hard: bool | None = None,
                 mirror: bool = False):
        self.g, self.c, self.congestion, self.mirror = graph, cluster, Congestion(model.congestion), mirror
        hard = model.memory is MemoryMode.HARD if hard is None else hard
        self.unit, packing = op_groups(graph, cluster, hard=hard)
        self.size, self.allowed, self.capacity = packing.size, packing.allowed, packing.free.copy()
        self.members = [np.flatnonzero(self.unit == u) for u in range(self.size.size)]
        self.preds = [graph.predecessors(v).tolist() for v in range(graph.n)]
        self.near = [sorted(set(self.preds[v]) | set(graph.successors(v).tolist())) for v in range(graph.n)]
        self.blank = ListScheduler(graph, cluster, self.congestion)  # every candidate's scheduler starts as its copy

    def schedule(self, assign: np.ndarray, order: list[int], against: float = math.inf
                 ) -> tuple[tuple[float, float], ListScheduler | None]:
        """``(makespan, sum of finish times)`` and the scheduler state of ``assign`` list-scheduled in ``order``
        (``inf`` if it cannot run); with ``mirror``, improved forward and backward (:func:`.mirror.justified`) when
        it ends within :data:`MIRROR_SLACK` of ``against`` (a candidate's incumbent: the mirror costs a few list
        schedules, and one far behind is rarely saved by it)."""
        return self._placed(self.blank.fresh(), assign, order, against)

    def prefix(self, b: ListScheduler, order: list[int]) -> Prefix:
        """The schedule ``b`` holds with copies of its prefixes in ``order`` (:class:`Prefix`) to score moves from."""
        return Prefix(b, order, max(MIN_EVERY, -(-len(order) // CHECKPOINTS)), self.preds)

    def score(self, prefix: Prefix, assign: np.ndarray, order: list[int], first: int, against: float
              ) -> tuple[tuple[float, float], ListScheduler | None]:
        """``(makespan, sum of finish times)`` and the scheduler of ``assign`` run as ``prefix``'s incumbent before
        position ``first`` of ``order`` (where neither it nor ``order`` differs from the incumbent's) and
        list-scheduled in ``order`` from there (:class:`Prefix`); mirrored as :meth:`schedule` does; given up (``inf``,
        no scheduler) as soon as an op ends too late for :func:`better_schedule` to prefer it to a schedule ending at
        ``against`` (mirrored too: past the mirror's slack)."""
        b = prefix.resume(first)
        return self._placed(b, assign, order[first:], against, against * (1 + (MIRROR_SLACK if self.mirror else TOL)))

    def _placed(self, b: ListScheduler, assign: np.ndarray, order: list[int], against: float, limit: float = math.inf
                ) -> tuple[tuple[float, float], ListScheduler | None]:
        try:
            for v in order:
                if b.place(v, int(assign[v])) > limit:
                    return (math.inf, math.inf), None
        except SpecError:
            return (math.inf, math.inf), None
        end = max(b.finish, default=0.0)
        if self.mirror and end <= against * (1 + MIRROR_SLACK):
            b = justified(b)
            end = max(b.finish, default=0.0)
        return (end, math.fsum(b.finish)), b

    def used(self, assign: np.ndarray) -> np.ndarray:
        return np.bincount(assign[[int(m[0]) for m in self.members]], weights=self.size, minlength=self.c.size)


_State = ScheduleState  # the former name, kept for one release


CHECKPOINTS = 16  # copies of an incumbent's scheduler along its order (a move resumes the last one before it)
MIN_EVERY = 32  # ops at least between two copies


class Prefix:
    """An incumbent schedule (a scheduler holding it: a list schedule, its mirror, or any valid schedule replayed) and
    an order of its ops (its start order), with a copy of it replayed every ``every`` ops of the order
    (:meth:`~placement_dsl.schedule.ListScheduler.copy`). A candidate that changes neither the devices nor the order of
    the ops before position ``k`` is scheduled as the incumbent up to ``k`` (each op and its input transfers booked
    when the incumbent runs them) and list-scheduled from ``k`` on (:meth:`resume`, from the last copy at or before
    ``k``): the ops before ``k`` keep their devices and inputs, so nothing after them changes their times, and a move
    costs the ops from its first on (45 % of the order on average on a 3,065-op sheet). The incumbent itself is kept
    exactly: a start's own schedule (GETF's 155.04 on a 15,838-op sheet, its mirror's 146.23) is no longer scored by
    its forward list schedule in its start order (155.34 and 151.60)."""

    def __init__(self, incumbent: ListScheduler, order: list[int], every: int, preds: list[list[int]]):
        self.incumbent, self.order, self.every, self.preds = incumbent, order, every, preds
        self.position = np.empty(len(order), dtype=np.int64)
        self.position[order] = np.arange(len(order))
        self.copies: list[ListScheduler] = []
        b = incumbent.fresh()
        for i, v in enumerate(order):
            if i % every == 0:
                self.copies.append(b.copy())
            self.replay(b, v)

    def replay(self, b: ListScheduler, v: int) -> None:
        """Book ``v`` in ``b`` as the incumbent runs it, with its input transfers not booked yet."""
        inc, d = self.incumbent, self.incumbent.device[v]
        for u in self.preds[v]:
            if inc.device[u] != d and (u, d) not in b.transfer_start:
                b.book_transfer(u, d, inc.transfer_start[(u, d)])
        b.book(v, d, inc.start[v])

    def resume(self, first: int) -> ListScheduler:
        """A scheduler holding the incumbent's ops before position ``first`` of the order, to go on from there."""
        k = min(first // self.every, len(self.copies) - 1)
        b = self.copies[k].copy()
        for v in self.order[k * self.every:first]:
            self.replay(b, v)
        return b


def moved_earlier(order: list[int], position: np.ndarray, v: int, to: int) -> list[int]:
    """``order`` with ``v`` taken out and put back at position ``to`` (before where it was)."""
    p = int(position[v])
    return order[:to] + [v] + order[to:p] + order[p + 1:]


def start_order(g: Graph, b: ListScheduler) -> list[int]:
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


def device_ball(state: ScheduleState, v: int, radius: int, assign: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ops within ``radius`` hops of ``v`` through ops on ``v``'s device, with their colocation groups."""
    d, ball, frontier = assign[v], {v}, [v]
    for _ in range(radius):
        frontier = [w for u in frontier for w in state.near[u]
                    if assign[w] == d and w not in ball and len(state.near[w]) <= HUB]
        ball.update(frontier)
    units = sorted({int(state.unit[w]) for w in ball})
    return np.concatenate([state.members[u] for u in units]), np.array(units)


def _moves(state: _State, b: ListScheduler, assign: np.ndarray, rng: random.Random, position: np.ndarray
           ) -> Iterator[tuple[np.ndarray, int, int]]:
    """Candidate moves ``(ops, device, to)``: ``ops`` to ``device`` (``to`` is -1): blockers, then ops of the chain
    next to a transfer (first to the device across it), then the rest of the chain, each by growing radius; then the
    order moves (:func:`order_moves`: the op ``ops[0]`` to position ``to`` of the order, its device kept)."""
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
            yield from ((ops, d, -1) for ops, d in _balls(state, v, assign, used, devices))
    yield from order_moves(state, chain, assign, position, rng)  # last: first, they cost large sheets their moves


def order_moves(state: _State, chain: list[int], assign: np.ndarray, position: np.ndarray, rng: random.Random
                ) -> Iterator[tuple[np.ndarray, int, int]]:
    """Each op of the critical chain (``chain``, last first) moved earlier in the list scheduler's order, its device
    kept: just before the op it waited for on its device (its blocker), and as early as its inputs let it (right
    after the last of them), where that is earlier than it is. Placed earlier, it takes its device's gap and books
    its input transfers' ports before the ops it passed: the order a fixed assignment is list-scheduled in decides
    its makespan (CP-SAT schedules the assignments of wide sheets 13 % shorter than their list schedules)."""
    moves = []
    for i, v in enumerate(chain):
        p = int(position[v])
        earliest = max((int(position[u]) + 1 for u in state.preds[v]), default=0)
        waited = chain[i + 1] if i + 1 < len(chain) and chain[i + 1] not in state.preds[v] else None
        targets = {earliest} | ({int(position[waited])} if waited is not None else set())
        moves += [(np.array([v]), int(assign[v]), t) for t in sorted(targets) if earliest <= t < p]
    rng.shuffle(moves)
    yield from moves


def _balls(state: _State, v: int, assign: np.ndarray, used: np.ndarray,
           devices: list[int]) -> Iterator[tuple[np.ndarray, int]]:
    tried: set[tuple[int, ...]] = set()
    for radius in RADII:
        ops, units = device_ball(state, v, radius, assign)
        key = tuple(units.tolist())
        if key in tried:
            continue
        tried.add(key)
        need = float(state.size[units].sum())
        for d in devices:
            if d != assign[v] and state.allowed[units, d].all() and used[d] + need <= state.capacity[d] * (1 + 1e-9):
                yield ops, d


def descend(state: _State, assign: np.ndarray, best: tuple[float, float], b: ListScheduler, until: float,
            rng: random.Random, movable: np.ndarray | None = None, budget: int | None = None
            ) -> tuple[np.ndarray, tuple[float, float], ListScheduler, tuple[int, int], bool]:
    """First-improvement descent over the critical chain's moves (module docstring, 2-3) from ``assign`` (its makespan
    ``best`` and scheduler ``b``) until ``until`` (:func:`time.perf_counter`) or ``budget`` candidates (default no
    limit), moving only ``movable`` ops (default all) to other devices (any op earlier in the order): the best devices, their makespan and scheduler, ``(candidates
    tried, moves accepted)``, and whether a local optimum was reached."""
    evaluations = accepted = 0
    while time.perf_counter() < until and (budget is None or evaluations < budget):
        order, improved = start_order(state.g, b), False
        prefix = state.prefix(b, order)
        for ops, d, to in _moves(state, b, assign, rng, prefix.position):
            if time.perf_counter() >= until or (budget is not None and evaluations >= budget):
                return assign, best, b, (evaluations, accepted), False
            if to >= 0:  # an order move: the devices stay
                trial, tried, first = assign, moved_earlier(order, prefix.position, int(ops[0]), to), to
            elif movable is not None and not movable[ops].all():
                continue
            else:
                trial, tried, first = assign.copy(), order, int(prefix.position[ops].min())
                trial[ops] = d
            makespan, tb = state.score(prefix, trial, tried, first, best[0])
            evaluations += 1
            if better_schedule(makespan, best):
                assign, best, b, improved, accepted = trial, makespan, tb, True, accepted + 1
                break
        if not improved:
            return assign, best, b, (evaluations, accepted), time.perf_counter() < until
    return assign, best, b, (evaluations, accepted), False


def better_schedule(one: tuple[float, float], other: tuple[float, float]) -> bool:
    """A smaller makespan, or the same makespan with a smaller sum of finish times (progress on a plateau)."""
    if one[0] < other[0] * (1 - TOL):
        return True
    return one[0] <= other[0] * (1 + TOL) and one[1] < other[1] * (1 - TOL)


_ball, _better, _start_order = device_ball, better_schedule, start_order  # the former names, kept for one release
