"""The spine bound of Tarnawski's latency: runs of cut ops, and the side branches between them priced.

An op comparable with every other (a *cut* op ``c_j``: an Inception module's concatenation, a residual block's add)
lies on the critical chain of every schedule. In the invocation model (§4, §4.1) each cut op runs in an invocation;
consecutive cut ops on one invocation form a *run*, and the run holds every op between them (invocations are
contiguous, whatever the split), so its memory and work count in full. The cut ops' invocations follow one another:
with ``X`` holding ``c_{j-1}`` and ``Y`` holding ``c_j``, the ops ``S_j`` between them go

* to ``X`` or ``Y`` (``A`` and ``B``): they add their time to those invocations and take their free memory;
* elsewhere (``M``): another accelerator's invocation or a host, which starts after ``X`` ends (every op of
  ``S_j`` descends from ``c_{j-1}``) and ends before ``Y`` starts. The ops of one chain of ``S_j`` run one after
  another there, costing their host time, or their accelerator time plus at least one read and one write
  (``rho``, the smallest tensors that can cross), so ``Y`` starts at least ``min(h(M_b), a(M_b) + rho)`` after
  ``X`` ends for every chain ``b``. A disjoint path ``b`` from ``c_{j-1}`` to ``c_j`` is priced op by op: its
  part in ``X`` is a prefix and its part in ``Y`` a suffix (an invocation is convex), and its middle runs on hosts
  and invocations that read the tensor before them (``c_{j-1}``'s for a middle from the path's first op, however
  large) and write their last op's, so a middle elsewhere within ``tau`` leaves at least the least work and memory of
  such a prefix and suffix to ``X`` and ``Y`` (an Inception module's long branch whose tensors are large at its
  ends).

So the latency is at least a shortest path over the cut ops: a run ``c_i .. c_{j-1}`` on a device class pays its
ops' work, a read ``min(out(c_{i-1}), sum_b min out(b))`` over disjoint paths ``b`` from ``c_{i-1}`` to ``c_i``
(every path enters the run through a tensor it reads) and a write alike at its end, and must fit; a cut op on a host
pays its host time; and between two of them a segment pays ``T_j(mu)``, the least over a bound ``tau`` on the chains'
parts elsewhere of ``tau`` plus the work the chains must move into ``X`` and ``Y`` (``a(b) - max(tau - rho,
tau / r_b)``, ``r_b`` the chain's least host slowdown) when that work's memory (its fractional knapsack) fits in
``mu``, the free memory of ``X`` and ``Y``. A segment between two cut ops is priced per kind of end (host or
accelerator) with the tensors its split makes the ends move beyond the runs' least crossing (a branch moved into the
run after a host cut reads the cut op's tensor, :mod:`.latency_spine_ends`). ``tau`` is taken on a grid, each
interval priced at its low end's ``tau`` and its high end's work (both monotone), and free memory is rounded up to a
grid, so every rounding lowers the bound. The DP carries the run's free memory left for the next segment (or that
the last cut op ran on a host).

It holds for any split (contiguous or not, any number of subgraphs) on a cluster without links, and it prices what
the path bounds leave out: a side branch that straddles a run boundary costs memory in a run, host time, or an
invocation's transfers.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..deadline import BudgetSpent, Deadline, slowdown
from ..evaluate import execution
from ..graph import Graph
from ..structure import disjoint_paths
from .latency_spine_ends import SIDES, EndPrices, least_moves, path_splits
from .makespan import comparable_cuts
from .memory_path import segment_data

MAX_OPS = 6000  # the cut ops' reachability matrix (n^2 booleans)
BUCKETS = 64  # free memory on a grid of capacity / BUCKETS (rounded up)
TAU_STEPS = 64  # the grid of a segment's bound on its chains' parts elsewhere
EXACT_PATH = 64  # a path between two cut ops whose middles elsewhere are priced op by op, at most (O(length^2))
PRICE_CELL = 1.5e-7  # seconds per chain and grid point of a segment's prices (_prices) at load 1, scaled by
# slowdown(): a 1,500-wide fan's segment (1,500 chains x 3,586 points) took 1.5-2.4 s at slowdown 3.3, twice per segment
ROOMS = np.array([0, 1, 2, 4, 8, 16, 32])  # an end's free memory, in grid points, rounded up to these (or unbounded)


def spine_bound(problem: Any, deadline: Deadline | None = None) -> tuple[float, str]:
    """The shortest path over the cut ops (module docstring), in cost-model units, and a note; ``0`` with the reason
    where it does not apply (no invocation model, links, a training graph, no cut op, too many ops).

    >>> from placement_dsl.graph import Graph, Op
    >>> from placement_dsl.cluster import Cluster
    >>> from placement_dsl.constraints import Memory
    >>> from placement_dsl.objectives import Latency
    >>> from placement_dsl.problem import Problem
    >>> ops = [Op(name=x, work={"accelerator": 1.0, "cpu": 10.0}, param_bytes=2.0, out_bytes=1.0) for x in "abc"]
    >>> g = Graph(ops, [("a", "b"), ("b", "c")])
    >>> spine_bound(Problem(g, Cluster.accelerators(2, memory=4.0, cpus=1), Latency(), [Memory()]))[0]
    5.0
    """
    g = problem.graph
    reason = _declined(problem)
    if reason:
        return 0.0, reason
    reach, cuts = comparable_cuts(g)
    if cuts.size == 0:
        return 0.0, "no op is comparable with all others"
    data = segment_data(problem)
    spine = Spine(g, reach, cuts, data, deadline)
    value = spine.shortest(deadline)
    return value, f"{cuts.size} cut ops, runs that fit and the side branches between them priced"


def _declined(problem: Any) -> str:
    g, c = problem.graph, problem.cluster
    if g.n == 0:
        return "empty graph"
    if execution(c) != "invocations" or c.links:
        return "Tarnawski's invocation model through host memory only"
    if g.is_training:
        return "counts an inference graph's memory"
    if g.n > MAX_OPS:
        return f"declined: {g.n} ops (the cut ops' reachability: at most {MAX_OPS})"
    return ""


class Spine:
    """The cut ops, their segments and the prices of the module docstring."""

    def __init__(self, graph: Graph, reach: np.ndarray, cuts: np.ndarray, data: dict[str, Any],
                 deadline: Deadline | None = None) -> None:
        self.g, self.cuts, self.data = graph, cuts, data
        k = cuts.size
        on = np.zeros(graph.n, dtype=bool)
        on[cuts] = True
        seg = reach[cuts].sum(axis=0)  # cut ops before each op: its segment S_j
        self.members = [np.flatnonzero(~on & (seg == j)) for j in range(k + 1)]
        self.mem = data["mem"]
        self.fast = np.where(np.isfinite(data["fastest"]), data["fastest"], 0.0)
        self.host = data["host"]
        scale = data["scale"]
        self.scale_min = float(scale.min()) if scale is not None and scale.size else 0.0
        out = graph.out_bytes.astype(float)
        self.paths = [self._disjoint(j) for j in range(k + 1)]
        self.crossing = np.zeros(k + 1)  # bytes a run boundary at segment j moves (read or write), j = 1 .. k - 1
        for j in range(1, k):
            mins = [out[p].min() if p.size else math.inf for p in self.paths[j]]
            self.crossing[j] = min(float(out[cuts[j - 1]]), float(sum(mins)) if mins else math.inf)
        cap = data["cap"]  # a class without a limit leaves the side branches' memory unpriced (a weaker bound)
        self.memory = bool(cap.size) and bool(np.isfinite(cap).all()) and float(cap.max()) > 0
        self.step = float(cap.max()) / BUCKETS if self.memory else math.inf
        self.table, self.deadline = [], deadline  # checked per segment and per kind and room of its ends
        for j in range(k + 1):
            if deadline is not None:
                deadline.check(f"the spine bound's segment {j} of {k + 1}")
            self.table.append(self._segment_table(j, out))

    # ------------------------------------------------------------------ segments
    def _disjoint(self, j: int) -> list[np.ndarray]:
        """Vertex-disjoint paths from ``c_{j-1}`` to ``c_j`` through ``S_j``, their interiors
        (:func:`~placement_dsl.structure.disjoint_paths`)."""
        k = self.cuts.size
        if j == 0 or j == k:
            return []
        inside = np.zeros(self.g.n, dtype=bool)
        inside[self.members[j]] = True
        return disjoint_paths(self.g, int(self.cuts[j - 1]), int(self.cuts[j]), inside)

    def _chains(self, j: int) -> list[np.ndarray]:
        """``S_j`` cut into chains (each op before the next): the disjoint paths, then greedy successor chains."""
        g, ops = self.g, self.members[j]
        left = np.zeros(g.n, dtype=bool)
        left[ops] = True
        chains = [p for p in self.paths[j] if p.size]
        for p in chains:
            left[p] = False
        for v in ops[np.argsort(g.rank[ops], kind="stable")].tolist():
            if not left[v]:
                continue
            chain = [v]
            left[v] = False
            while True:
                nxt = [w for w in g.successors(chain[-1]).tolist() if left[w]]
                if not nxt:
                    break
                chain.append(nxt[0])
                left[nxt[0]] = False
            chains.append(np.asarray(chain, dtype=np.int64))
        return chains

    def _segment_table(self, j: int, out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``T_j`` per kind of its ends (``[x, y]``: ``c_{j-1}`` / ``c_j`` on a host, 0, or an accelerator, 1), per
        room of each end (its free memory rounded up to the first of the returned grid points not below it, past them
        unbounded) and on the free-memory grid of both (index ``i``: ``i * step`` bytes; one entry without memory)."""
        size = 2 * BUCKETS + 4 if self.memory else 1
        none = np.zeros(0, dtype=np.int64)
        table = np.zeros((len(SIDES), len(SIDES), 1, 1, size))
        ops = self.members[j]
        if not ops.size:
            return table, none, none
        k = self.cuts.size
        read = 0.0 if j == 0 else float(min(out[ops].min(), out[self.cuts[j - 1]]))
        write = 0.0 if j == k else float(out[ops].min())
        chains = self._chains(j)
        rho = np.full(len(chains), self.scale_min * (read + write))
        paths = [b for b in self.paths[j] if b.size]  # the first chains: a path's part elsewhere reads a tensor of
        for i, b in enumerate(paths):  # the path (or c_{j-1}'s) and writes one of its own
            rho[i] = self.scale_min * (min(float(out[self.cuts[j - 1]]), float(out[b[:-1]].min(initial=math.inf)))
                                       + float(out[b].min()))
        splits = [self._splits(b, j, out) for b in paths]
        exact = [least_moves(x) if x is not None else (np.zeros(1),) * 3 for x in splits]
        taus, need, memneed = self._prices(chains, rho, [e for e, _, _ in exact])
        if taus.size < 2:  # nothing of the segment takes time: it costs nothing between the runs
            return table, none, none
        value = taus + need.sum(axis=0)  # linear between grid points (every chain's breakpoints are among them)
        whole = np.minimum(value[:-1], value[1:])  # any tau of an interval costs at least its ends' least
        moved, held = need[:, 1:].copy(), memneed[:, 1:].copy()  # per chain and interval [t0, t1): the least work
        for i, (costs, works, mems) in enumerate(exact):  # and memory moved (the knapsack's at t1, the paths' below it)
            at = np.searchsorted(costs, taus[1:], side="left") - 1  # the middles elsewhere faster than t1
            moved[i] = np.maximum(moved[i], works[at])
            held[i] = np.maximum(held[i], mems[at])
        cost = np.maximum(whole, taus[:-1] + moved.sum(axis=0))  # the interval's low end and least moves
        table[:] = self._fit(np.append(cost, value[-1]), np.append(held.sum(axis=0), 0.0), size)
        if not (0 < j < k and paths):
            return table, none, none
        # both ends hold a cut op: the tensors they move with the work, and each end's own room
        heavy = float(self.mem[np.concatenate(paths)].sum()) / self.step if self.memory else 0.0
        rooms = ROOMS[ROOMS < heavy]  # a room past every path's memory holds any split
        return np.maximum(table, self._ends(j, out, chains, rho, paths, splits, size, rooms)), rooms, rooms

    def _fit(self, cost: np.ndarray, held: np.ndarray, size: int) -> np.ndarray:
        """The least ``cost`` whose ``held`` memory fits (last axis), per point of the free-memory grid (a new last
        axis in its place)."""
        if not self.memory:
            return np.min(cost, axis=-1, keepdims=True)
        budget = self.step * np.arange(size) * (1 + 1e-9)
        out = np.empty((*cost.shape[:-1], size))
        for row, (c, h) in enumerate(zip(cost.reshape(-1, cost.shape[-1]), held.reshape(-1, held.shape[-1]))):
            order = np.argsort(h, kind="stable")  # the least cost among the memories up to each budget
            fit = np.searchsorted(h[order], budget, side="right")
            least = np.minimum.accumulate(c[order])
            out.reshape(-1, size)[row] = np.where(fit > 0, least[np.maximum(fit - 1, 0)], math.inf)
        return out

    def _ends(self, j: int, out: np.ndarray, chains: list[np.ndarray], rho: np.ndarray, paths: list[np.ndarray],
              splits: list[tuple[np.ndarray, ...] | None], size: int, rooms: np.ndarray) -> np.ndarray:
        """``T_j`` with the tensors its ends move beyond the runs' ``crossing`` (:mod:`.latency_spine_ends`), per
        kind of end and room of each (``rooms`` grid points, then unbounded: a path's prefix fits ``X``'s, its suffix
        ``Y``'s, and so do their least sums), on a grid reaching every path's time wholly elsewhere."""
        levels = np.append(rooms * self.step, math.inf)
        table = np.zeros((len(SIDES), len(SIDES), levels.size, levels.size, size))
        away = max([float(c.min()) for b, x in zip(paths, splits)  # the paths wholly elsewhere
                    if x is not None and (c := x[0][(x[3] == 0) & (x[4] == b.size)]).size], default=0.0)
        times = [np.sort(x[0][x[0] <= away]) for x in splits if x is not None]
        taus, need, memneed = self._prices(chains, rho, [t for t in times if t.size], least=away)
        if taus.size < 2:
            return table
        value = taus + need.sum(axis=0)
        low = np.append(np.minimum(value[:-1], value[1:]), value[-1])  # per interval, then tau past the grid
        start = np.append(taus[:-1], taus[-1])
        p = len(paths)
        rest = np.append(need[p:, 1:].sum(axis=0), 0.0)  # the other chains' least work and memory moved
        rest_mem = np.append(memneed[p:, 1:].sum(axis=0), 0.0)
        prices = EndPrices(paths, splits, float(out[self.cuts[j - 1]]), out, self.scale_min,
                           any(b.size == 0 for b in self.paths[j]))
        charged = self.scale_min * float(self.crossing[j])
        for x in SIDES:
            for y in SIDES:  # every room of both ends at once; a host end holds nothing: one room
                if self.deadline is not None:  # each pass prices every path (1,500 on a fan)
                    self.deadline.check(f"the spine bound's segment {j}, its ends' rooms")
                x_rooms, y_rooms = levels[:levels.size if x else 1], levels[:levels.size if y else 1]
                least, held, front, back = prices.at(x, y, taus, need[:p], memneed[:p], x_rooms, y_rooms)
                cost = np.maximum(low, start + rest + least - charged * (x + y))
                fits = (front <= x_rooms[:, None, None] * (1 + 1e-9)) & (back <= y_rooms[None, :, None] * (1 + 1e-9))
                table[x, y] = self._fit(np.where(fits, cost, math.inf), held + rest_mem, size)
        return table

    def _splits(self, b: np.ndarray, j: int, out: np.ndarray) -> tuple[np.ndarray, ...] | None:
        """A path ``b`` from ``c_{j-1}`` to ``c_j``: its splits into a prefix in ``X``, a middle elsewhere and a suffix
        in ``Y`` with their middles' least times (:func:`~.latency_spine_ends.path_splits`); ``None`` for paths longer
        than :data:`EXACT_PATH` ops, which move nothing more than the knapsack of :meth:`_prices` says."""
        if b.size > EXACT_PATH:
            return None
        return path_splits(b, float(out[self.cuts[j - 1]]), out, self.host, self.fast, self.mem, self.scale_min)

    def _prices(self, chains: list[np.ndarray], rho: np.ndarray, times: list[np.ndarray],
                least: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The grid of ``tau`` (from 0 to where nothing need move, with every chain's breakpoints and the paths'
        middles' ``times``, :func:`~.latency_spine_ends.least_moves`), and per chain and grid point the work it must move into the
        neighbouring runs and its least memory (fractional knapsack by memory per unit of work); ``rho`` is each
        chain's least transfer on another accelerator."""
        a = [self.fast[b] for b in chains]
        work = np.array([float(x.sum()) for x in a])
        slow = np.array([_slowdown(self.host[b], x) for b, x in zip(chains, a)])
        finite = np.isfinite(slow)
        hosted = np.full(work.size, math.inf)
        hosted[finite] = slow[finite] * work[finite]
        top = float(np.minimum(hosted, work + rho).max(initial=0.0))
        top = max([top, least] + [float(t[-1]) for t in times])  # every path wholly elsewhere: nothing moves
        with np.errstate(divide="ignore", invalid="ignore"):
            turn = np.where(finite & (slow > 1), rho * slow / (slow - 1), np.inf)  # where tau / r overtakes tau - rho
        taus = np.unique(np.concatenate((top * np.arange(TAU_STEPS + 1) / TAU_STEPS, turn, work + rho, hosted,
                                         *[_steps(t) for t in times])))
        taus = taus[(taus >= 0) & (taus <= top)]
        need_s = PRICE_CELL * work.size * taus.size * slowdown()  # whole-array passes, not stopped once begun
        if self.deadline is not None and need_s > self.deadline.left():
            raise BudgetSpent(f"the spine bound's prices of {work.size} chains on {taus.size} points need "
                              f"~{need_s:.1f} s, {self.deadline.left():.1f} s left")
        per = np.zeros((work.size, taus.size))
        per[finite] = taus[None, :] / slow[finite, None]
        allowed = np.maximum(taus[None, :] - rho[:, None], per)
        need = np.maximum(0.0, work[:, None] - allowed)  # chains x taus
        need[need <= 1e-9 * work[:, None]] = 0.0  # rounding past where nothing need move (its memory: none)
        memneed = np.zeros_like(need)
        for i, (b, x) in enumerate(zip(chains, a)):
            if self.deadline is not None:
                self.deadline.check("the spine bound's prices")
            keep = x > 0
            if not keep.any():
                continue
            per = self.mem[b][keep] / x[keep]
            order = np.argsort(per, kind="stable")
            cum_w = np.concatenate(([0.0], np.cumsum(x[keep][order])))
            cum_m = np.concatenate(([0.0], np.cumsum(self.mem[b][keep][order])))
            memneed[i] = np.interp(need[i], cum_w, cum_m)
        return taus, need, memneed

    # ------------------------------------------------------------------ the path over the cut ops
    def shortest(self, deadline: Deadline | None = None) -> float:
        """The DP over the cut ops: ``f[j][l]`` the least time until the invocation holding ``c_{j-1}`` ends, with
        ``l * step`` of its memory left for ``S_j``."""
        k, cuts, data = self.cuts.size, self.cuts, self.data
        width = BUCKETS + 2 if self.memory else 2  # state 0: c_{j-1} on a host (or none); a run's keep 1 and up
        f = np.full((k + 1, width), math.inf)
        f[0, 0] = 0.0
        times = data["times"]  # ops x serial classes, inf where not allowed
        classes = times.shape[1]
        cut_mem = np.concatenate(([0.0], np.cumsum(self.mem[cuts])))
        seg_mem = np.array([float(self.mem[s].sum()) for s in self.members])
        seg_mem_cum = np.concatenate(([0.0], np.cumsum(seg_mem)))
        work, banned = [], []
        for q in range(classes):
            t = times[:, q]
            per_cut = t[cuts]
            per_seg = np.array([float(t[s].sum()) if s.size else 0.0 for s in self.members])
            bad = np.concatenate(([0], np.cumsum(~np.isfinite(per_cut)))), \
                np.concatenate(([0], np.cumsum(~np.isfinite(per_seg))))
            work.append((np.concatenate(([0.0], np.cumsum(_finite(per_cut)))),
                         np.concatenate(([0.0], np.cumsum(_finite(per_seg))))))
            banned.append(bad)
        scale = data["scale"]
        for j in range(k):
            if deadline is not None:
                deadline.check(f"the spine bound at cut op {j} of {k}")
            row = f[j]
            live = np.flatnonzero(np.isfinite(row))
            if not live.size:
                continue
            host = float(self.host[cuts[j]])
            if math.isfinite(host):
                price = self._price(j, live, 0, np.zeros(1, dtype=np.int64))[:, 0]
                f[j + 1, 0] = min(f[j + 1, 0], float((row[live] + price).min()) + host)
            ends = np.arange(j + 1, k + 1)  # the run holds c_j .. c_{end-1} and the segments between them
            body = (cut_mem[ends] - cut_mem[j]) + (seg_mem_cum[ends] - seg_mem_cum[j + 1])
            for q in range(classes):
                (cw, sw), (bc, bs) = work[q], banned[q]
                ok = (bc[ends] - bc[j] == 0) & (bs[ends] - bs[j + 1] == 0)
                free = data["cap"][q] - body
                ok &= free >= -1e-9 * max(1.0, float(data["cap"][q]))
                if not ok.any():
                    continue
                e = ends[ok]
                s = 1.0 if scale is None else float(scale[q])
                cost = (cw[e] - cw[j]) + (sw[e] - sw[j + 1]) + s * self.crossing[e] * (e < k)
                if j > 0:
                    cost = cost + s * self.crossing[j]
                self._relax(f, j, live, e, cost, np.maximum(free[ok], 0.0))
        live = np.flatnonzero(np.isfinite(f[k]))
        if not live.size:
            return 0.0
        return float((f[k, live] + self._price(k, live, 0, np.zeros(1, dtype=np.int64))[:, 0]).min())

    def _price(self, j: int, live: np.ndarray, y: int, xs: np.ndarray) -> np.ndarray:
        """``T_j`` for the states ``live`` (``c_{j-1}`` on a host at state 0, else on a run with that much free memory)
        and ``c_j`` on a host (``y = 0``) or a run that gives the segment ``xs`` grid points of its memory."""
        table, x_rooms, y_rooms = self.table[j]
        side = (live > 0).astype(np.int64)
        a = np.where(side > 0, np.searchsorted(x_rooms, live, side="left"), 0)  # X's room holds its free memory
        b = np.searchsorted(y_rooms, xs, side="left") if y else np.zeros(xs.size, dtype=np.int64)
        at = np.minimum(live[:, None] + xs[None, :], table.shape[-1] - 1)
        return table[side[:, None], y, a[:, None], b[None, :], at]

    def _relax(self, f: np.ndarray, j: int, live: np.ndarray, ends: np.ndarray, cost: np.ndarray,
               free: np.ndarray) -> None:
        """Runs from ``c_j`` ending at ``ends`` (costs ``cost``, free memory ``free``) after the states ``live`` of
        ``f[j]``: the run gives ``x`` (a grid point, rounded up) of its free memory to the segment before it and keeps
        the rest."""
        row = f[j]
        if not self.memory:
            value = float((row[live] + self._price(j, live, 1, np.zeros(1, dtype=np.int64))[:, 0]).min())
            np.minimum.at(f[:, 1], ends, value + cost)
            return
        width = f.shape[1]
        most = np.ceil(free / self.step - 1e-9).astype(np.int64)  # x's grid points up to the free memory, rounded up
        xs = np.arange(int(most.max(initial=0)) + 1)
        before = (row[live][:, None] + self._price(j, live, 1, xs)).min(axis=0)
        can = most[:, None] >= xs[None, :]  # ends x xs
        kept = np.ceil((free[:, None] - xs[None, :] * self.step) / self.step - 1e-9).astype(np.int64) + 1
        kept = np.clip(kept, 1, width - 1)  # state 0 is a host's
        rows = np.broadcast_to(ends[:, None], can.shape)
        np.minimum.at(f, (rows[can], kept[can]), (cost[:, None] + before[None, :])[can])


def _steps(times: np.ndarray, most: int = 4 * TAU_STEPS) -> np.ndarray:
    """Grid points where a path's least moves change (its middles' distinct times), at most ``most`` of them."""
    out = np.unique(times)
    return out if out.size <= most else out[np.linspace(0, out.size - 1, most).astype(np.int64)]


def _finite(x: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(x), x, 0.0)


def _slowdown(host: np.ndarray, fast: np.ndarray) -> float:
    """The least ratio of host time to fastest time over a chain's ops (``inf`` without a host)."""
    keep = fast > 0
    if not keep.any():
        return math.inf
    ratio = host[keep] / fast[keep]
    return float(ratio.min()) if np.isfinite(ratio).any() else math.inf


def spine_or_nothing(problem: Any, deadline: Deadline | None = None) -> float:
    """:func:`spine_bound`'s value, ``0`` when its clock ran out."""
    try:
        return spine_bound(problem, deadline)[0]
    except BudgetSpent:
        return 0.0
