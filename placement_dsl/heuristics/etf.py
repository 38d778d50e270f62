"""Earliest-time-first list scheduling: the baselines MOIRAI compares against (Zhang et al. §IV, Fig. 10, Table V).

* :func:`getf` (method ``"getf"``) — generalized earliest time first on related machines (Su et al.,
  MOIRAI's [33]): repeatedly the ready ``(op, device)`` pair that *finishes* first is scheduled
  (insertion-based, its input transfers booked on ports or channels as in
  :class:`~placement_dsl.schedule.ListScheduler`); ties by larger upward rank (HEFT's mean costs),
  then the lower device index. Su et al. first solve an LP that restricts each job to a group of
  machine speeds; here devices are unrelated (a time per op and device, not a speed), so every
  device the op may run on stays a candidate and the finish-time rule does the speed choice.
* :func:`m_sct` (method ``"m-sct"``) — Baechi's m-SCT (Jeon et al. 2020): ETF (the ready pair
  that *starts* first) with *favourite children*. An LP relaxation of the small-communication-time
  ILP (Hanen and Munier) picks them: variables ``x_e`` in [0, 1] per edge (1: the transfer is
  paid), start times ``s`` and the makespan ``w``; minimize ``w`` subject to
  ``s_i + p_i + c_e x_e <= s_j`` per edge ``e = (i, j)``, ``sum_j x_ij >= outdeg(i) - 1`` (at most
  one favourite child), ``sum_i x_ij >= indeg(j) - 1`` (at most one favourite parent) and
  ``s_i + p_i <= w``, with ``p`` and ``c`` the mean op and transfer times. An edge with
  ``x_e < 0.5`` makes ``j`` the favourite child of ``i``: communication would dominate, so
  ``j`` should follow ``i`` on its device. When the favourite child is ready it goes to its
  parent's device if it starts there no later than anywhere else (Baechi's condition), and the
  parent's device is *reserved* for it: another op is put there only if it finishes before the
  parent does, or if no other device may take it (Baechi's urgent ops). Rounding conflicts
  (two favourites of one parent) are resolved by the smaller ``x_e``, where Baechi keeps the
  last edge. Simplification: when the LP cannot be solved within its share of the time limit
  (or HiGHS is missing), the favourites are a greedy matching by decreasing transfer time
  (``info["favourites"]`` says which).

Both honour per-device memory (the packing witness of :mod:`.listsched`), op kinds, colocation
groups (:attr:`Graph.group_id`) and ``pins`` (op name -> device name). They optimize the makespan
with ``model.congestion`` and report the cost model's objective for ``model``. Past ``time_limit``
the ops left skip the comparison of devices (each takes the first device that admits it among its
group's, its favourite parent's and its inputs' devices): ``info["stopped"]``.
"""
from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Mapping

import numpy as np

from ..cluster import Cluster
from ..errors import InfeasibleError, SpecError
from ..evaluate import CostModel, MemoryMode
from ..graph import Graph
from ..lp import available, new_highs
from ..placement import Placement
from ..schedule import ListScheduler, upward_rank
from . import manifest
from .base import HeuristicResult, cut_at, deadline_at, expired, left, stopped
from .listsched import Packing, makespan_model, mean_costs, op_groups, schedule_result
from .registry import heuristic

LP_SHARE = 0.3  # share of the time limit the favourite-child LP may take
LP_EDGES = 200_000  # edges above which the LP is not built (greedy favourites)
ROUND = 0.5  # x_e below this: a favourite edge (Baechi's threshold)
TOL = 1e-9


# ---------------------------------------------------------------------------- favourite children
def favourite_lp(graph: Graph, p: np.ndarray, c: np.ndarray, seconds: float | None) -> np.ndarray | None:
    """The LP relaxation's ``x_e`` per edge (module docstring), or ``None`` when it is not solved in ``seconds``."""
    n, m = graph.n, graph.m
    if not available() or m > LP_EDGES or (seconds is not None and seconds <= 0):
        return None
    src, dst = graph.src.astype(np.int64), graph.dst.astype(np.int64)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    e, s, w = np.arange(m), m + np.arange(n), m + n  # column indices: x_e, s_v, w
    rows += [e, e, e]  # s_i - s_j + c_e x_e <= -p_i
    cols += [m + src, m + dst, e]
    vals += [np.ones(m), -np.ones(m), c]
    upper = [-p[src]]
    lower = [np.full(m, -np.inf)]
    r0 = m  # -sum_out x <= 1 - outdeg ; -sum_in x <= 1 - indeg
    outdeg, indeg = np.bincount(src, minlength=n), np.bincount(dst, minlength=n)
    rows += [r0 + src, r0 + n + dst]
    cols += [e, e]
    vals += [-np.ones(m), -np.ones(m)]
    upper += [1.0 - outdeg, 1.0 - indeg]
    lower += [np.full(2 * n, -np.inf)]
    r1 = r0 + 2 * n  # s_v - w <= -p_v
    rows += [r1 + np.arange(n), r1 + np.arange(n)]
    cols += [s, np.full(n, w)]
    vals += [np.ones(n), -np.ones(n)]
    upper += [-p]
    lower += [np.full(n, -np.inf)]
    row, col, val = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
    order = np.lexsort((row, col))
    row, col, val = row[order], col[order], val[order]
    start = np.searchsorted(col, np.arange(w + 2)).astype(np.int32)
    cost = np.zeros(w + 1)
    cost[w] = 1.0
    col_lower = np.zeros(w + 1)
    col_upper = np.concatenate([np.ones(m), np.full(n + 1, np.inf)])
    h = new_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    if seconds is not None:
        h.setOptionValue("time_limit", max(float(seconds), 0.01))
    h.passModel(w + 1, r1 + n, len(val), 1, 1, 0.0, cost, col_lower, col_upper, np.concatenate(lower),
                np.concatenate(upper), start, row.astype(np.int32), val, np.zeros(w + 1, dtype=np.int32))
    h.run()
    if str(h.getModelStatus()) != "HighsModelStatus.kOptimal":
        return None
    return np.asarray(h.getSolution().col_value[:m], dtype=float)


def favourites(graph: Graph, x: np.ndarray) -> np.ndarray:
    """Each op's favourite parent (``-1``: none): edges with ``x_e`` below :data:`ROUND`, smallest first, each
    parent and each child taken at most once."""
    parent, taken = np.full(graph.n, -1, dtype=np.int64), np.zeros(graph.n, dtype=bool)
    for k in np.argsort(x, kind="stable"):
        if x[k] >= ROUND:
            break
        i, j = int(graph.src[k]), int(graph.dst[k])
        if parent[j] < 0 and not taken[i]:
            parent[j], taken[i] = i, True
    return parent


def _favourite_parents(graph: Graph, mean_time: np.ndarray, comm: np.ndarray,
                       seconds: float | None) -> tuple[np.ndarray, str]:
    """Favourite parents from the LP, else from the greedy matching by decreasing transfer time."""
    c = comm[graph.src]
    x = favourite_lp(graph, mean_time, c, seconds)
    if x is not None:
        return favourites(graph, x), "lp"
    greedy = np.where(c > 0, 0.5 * ROUND * (1.0 - c / max(float(c.max(initial=0.0)), TOL)), 1.0)  # larger transfer: smaller x
    return favourites(graph, greedy), "greedy"


# ---------------------------------------------------------------------------- the list scheduler
class _ETF:
    """Ready ops, their candidate devices and cached finish times; schedules one ``(op, device)`` pair at a time."""

    def __init__(self, graph: Graph, cluster: Cluster, model: CostModel, pins: Mapping[str, str] | None):
        self.g, self.c = graph, cluster
        self.unit, packing = op_groups(graph, cluster, hard=model.memory is MemoryMode.HARD)
        self.packing = _pinned(graph, cluster, self.unit, packing, pins) if pins else packing
        mean_time, self.comm = mean_costs(graph, cluster)
        self.mean_time = mean_time
        self.rank = upward_rank(graph, mean_time, self.comm[graph.src])
        self.b = ListScheduler(graph, cluster, model.congestion)
        self.times = self.b.times
        self.preds = graph.predecessor_lists  # read only
        idx, ptr = graph.succ_idx.tolist(), graph.succ_ptr.tolist()
        self.succs = [idx[ptr[v]:ptr[v + 1]] for v in range(graph.n)]
        self.waiting = [len(p) for p in self.preds]
        self.ready = {v for v in range(graph.n) if not self.waiting[v]}
        self.key = (-self.rank).tolist()  # the ready ops by largest rank (ties: lower index), stale ones skipped:
        self.by_rank = [(self.key[v], v) for v in self.ready]  # past the limit, a scan of the ready set per op was
        heapq.heapify(self.by_rank)  # most of a cut GETF on a 20,000-task sheet (5.4 million keys)
        self.group_device = np.full(self.packing.size.size, -1, dtype=np.int64)
        self.cache: dict[int, dict[int, float]] = {}

    def devices(self, v: int) -> list[int]:
        u = self.unit[v]
        if self.group_device[u] >= 0:
            return [int(self.group_device[u])]
        return [d for d in range(self.c.size) if self.packing.room(u, d)]

    def finish(self, v: int, d: int) -> float:
        row = self.cache.setdefault(v, {})
        if d not in row:
            row[d] = self.b.finish_on(v, d)
        return row[d]

    def admits(self, v: int, d: int) -> bool:
        u = self.unit[v]
        return self.group_device[u] == d or self.packing.admits(u, d)

    def place(self, v: int, d: int) -> None:
        u = self.unit[v]
        if self.group_device[u] < 0:
            self.packing.take(u, d)
            self.group_device[u] = d
        touched = {d} | {self.b.device[w] for w in self.preds[v]}
        self.b.place(v, d)
        self.ready.discard(v)
        self.cache.pop(v, None)
        for w in list(self.cache):  # a cached finish stays right unless a timeline it read changed
            if any(self.b.device[x] in touched for x in self.preds[w]):
                del self.cache[w]
            else:
                for t in touched:
                    self.cache[w].pop(t, None)
        for w in self.succs[v]:
            self.waiting[w] -= 1
            if not self.waiting[w]:
                self.ready.add(w)
                heapq.heappush(self.by_rank, (self.key[w], w))

    def top(self) -> int:
        """The ready op of largest rank (ties: lower index)."""
        while self.by_rank[0][1] not in self.ready:
            heapq.heappop(self.by_rank)
        return self.by_rank[0][1]

    def stuck(self, v: int) -> InfeasibleError:
        caps = ", ".join(f"{n}={m:.6g}" for n, m in zip(self.c.names, self.packing.free))
        return InfeasibleError(f"op {self.g.names[v]!r} (with its colocation group) needs memory "
                               f"{self.packing.size[self.unit[v]]:.6g}; the devices it may run on have no room "
                               f"(free: {caps})")


def _pinned(graph: Graph, cluster: Cluster, unit: np.ndarray, packing: Packing,
            pins: Mapping[str, str]) -> Packing:
    """The packing state with each pinned op's group allowed only on its device."""
    allowed = packing.allowed.copy()
    for op, dev in pins.items():
        if op not in graph.index:
            raise SpecError(f"pins: unknown op {op!r}")
        if dev not in cluster.index:
            raise SpecError(f"pins: op {op!r} is pinned to unknown device {dev!r}; devices are {list(cluster.names)}")
        u, d = unit[graph.index[op]], cluster.index[dev]
        if not allowed[u, d]:
            raise InfeasibleError(f"pins: op {op!r} (with its colocation group) cannot run on device {dev!r}")
        allowed[u] = False
        allowed[u, d] = True
    return Packing(packing.size, allowed, packing.free)


Key = Callable[[_ETF, int, int, float], tuple]


def _run(method: str, graph: Graph, cluster: Cluster, model: CostModel | None, time_limit: float | None,
         pins: Mapping[str, str] | None, key: Key, favourite: np.ndarray | None = None,
         at: float | None = None, t0: float | None = None, **info: object) -> HeuristicResult:
    """Schedule the ready pair of least ``key(state, v, d, finish)`` until every op is placed (see the module)."""
    t0 = time.perf_counter() if t0 is None else t0
    at = cut_at(deadline_at(method, time_limit) if at is None else at, graph)  # the ops left placed, scored by then
    mk = makespan_model(model)
    s = _ETF(graph, cluster, mk, pins)
    cut = False
    while s.ready:
        if not cut and expired(at):
            cut = True
            s.cache.clear()  # no finish time is compared again: nothing cached to keep right
        v, d = _quick(s, favourite) if cut else _pick(s, key, favourite)
        s.place(v, d)
    placement = Placement(graph, cluster, np.array(s.b.device), source=method, schedule=s.b.schedule())
    result = schedule_result(method, placement, model, t0, **info)
    return stopped(result) if cut else result


def _pick(s: _ETF, key: Key, favourite: np.ndarray | None) -> tuple[int, int]:
    """The ready pair of least key whose device admits the op's group (memory kept packable for the rest)."""
    reserved = _reserved(s, favourite) if favourite is not None else {}
    pairs = []
    for v in s.ready:
        cands = s.devices(v)
        if not cands:
            raise s.stuck(v)
        finishes = {d: s.finish(v, d) for d in cands}
        if favourite is not None and favourite[v] >= 0:
            d = s.b.device[favourite[v]]
            if d in finishes and _start(s, v, d, finishes[d]) <= min(
                    _start(s, v, e, f) for e, f in finishes.items()) + TOL:
                finishes = {d: finishes[d]}
        free = {d: f for d, f in finishes.items() if d not in reserved or reserved[d] == v
                or f <= _start(s, reserved[d], d, s.finish(reserved[d], d)) + TOL}
        for d, f in (free or finishes).items():
            if math.isfinite(f):
                pairs.append((key(s, v, d, f), v, d))
    if not pairs:
        v = min(s.ready)
        raise InfeasibleError(f"op {s.g.names[v]!r} cannot run on any device it may use (its inputs cannot reach them)")
    pairs.sort()
    for _, v, d in pairs:
        if s.admits(v, d):
            return v, d
    return pairs[0][1], pairs[0][2]  # no packing known for the rest: greedy


def _reserved(s: _ETF, favourite: np.ndarray) -> dict[int, int]:
    """Device -> the ready favourite child (of largest rank) whose parent runs there and may follow it."""
    out: dict[int, int] = {}
    for v in sorted(s.ready, key=lambda w: (-s.rank[w], w)):
        u = int(favourite[v])
        if u >= 0 and s.b.device[u] in s.devices(v):
            out.setdefault(s.b.device[u], v)
    return out


def _start(s: _ETF, v: int, d: int, finish: float) -> float:
    return finish - float(s.times[v, d])


def _quick(s: _ETF, favourite: np.ndarray | None) -> tuple[int, int]:
    """Past the time limit: the ready op of largest rank on the first device that admits it (group's, favourite
    parent's, inputs', then any). The near devices are tried before every device's room is listed: listed for
    each op, the rooms were most of a GETF cut at once on GPT-3 of 20,111 ops onto 16 devices (11 s at load 16,
    past a 60 s command's limit)."""
    v = s.top()
    u = int(s.unit[v])
    if s.group_device[u] >= 0:
        return v, int(s.group_device[u])
    near = ([s.b.device[favourite[v]]] if favourite is not None and favourite[v] >= 0 else []) + \
        [s.b.device[w] for w in s.preds[v]]
    for d in dict.fromkeys(near):
        if d >= 0 and s.packing.room(u, d) and math.isfinite(s.times[v, d]) and s.admits(v, d):
            return v, d
    cands = s.devices(v)
    if not cands:
        raise s.stuck(v)
    for d in cands:
        if math.isfinite(s.times[v, d]) and s.admits(v, d):
            return v, d
    return v, next((d for d in cands if math.isfinite(s.times[v, d])), cands[0])


# ---------------------------------------------------------------------------- the methods
@heuristic("getf", optimizes="makespan", options=manifest.Pins)
def getf(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
         time_limit: float | None = None, pins: Mapping[str, str] | None = None) -> HeuristicResult:
    """GETF: the ready pair that finishes first, repeatedly (see the module docstring)."""
    return _run("getf", graph, cluster, model, time_limit, pins, lambda s, v, d, f: (f, -s.rank[v], d))


@heuristic("m-sct", optimizes="makespan", options=manifest.Pins)
def m_sct(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
          time_limit: float | None = None, pins: Mapping[str, str] | None = None) -> HeuristicResult:
    """Baechi's m-SCT: earliest start with favourite children from the LP (see the module docstring);
    ``info["favourites"]`` is ``"lp"`` or ``"greedy"`` and ``info["favourite_edges"]`` their number."""
    t0 = time.perf_counter()
    at = deadline_at("m-sct", time_limit)
    mean_time, comm = mean_costs(graph, cluster)
    budget = left(at)
    parent, how = _favourite_parents(graph, mean_time, comm, None if budget is None else budget * LP_SHARE)
    return _run("m-sct", graph, cluster, model, time_limit, pins,
                lambda s, v, d, f: (_start(s, v, d, f), -s.rank[v], f, d), favourite=parent, at=at, t0=t0,
                favourites=how, favourite_edges=int((parent >= 0).sum()))
