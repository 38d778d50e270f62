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
``mu``, the free memory of ``X`` and ``Y``. ``tau`` is taken on a grid, each interval priced at its low end's
``tau`` and its high end's work (both monotone), and free memory is rounded up to a grid, so every rounding lowers
the bound. The DP carries the run's free memory left for the next segment.

It holds for any split (contiguous or not, any number of subgraphs) on a cluster without links, and it prices what
the path bounds leave out: a side branch that straddles a run boundary costs memory in a run, host time, or an
invocation's transfers.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..deadline import BudgetSpent, Deadline
from ..evaluate import execution
from ..graph import Graph
from ..structure import disjoint_paths
from .makespan import comparable_cuts
from .memory_path import segment_data

MAX_OPS = 6000  # the cut ops' reachability matrix (n^2 booleans)
BUCKETS = 64  # free memory on a grid of capacity / BUCKETS (rounded up)
TAU_STEPS = 64  # the grid of a segment's bound on its chains' parts elsewhere
EXACT_PATH = 64  # a path between two cut ops whose middles elsewhere are priced op by op, at most (O(length^2))


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
        self.table = []
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

    def _segment_table(self, j: int, out: np.ndarray) -> np.ndarray:
        """``T_j`` on the free-memory grid (index ``i``: ``i * step`` bytes; one entry without memory)."""
        size = 2 * BUCKETS + 4 if self.memory else 1
        ops = self.members[j]
        if not ops.size:
            return np.zeros(size)
        k = self.cuts.size
        read = 0.0 if j == 0 else float(min(out[ops].min(), out[self.cuts[j - 1]]))
        write = 0.0 if j == k else float(out[ops].min())
        chains = self._chains(j)
        rho = np.full(len(chains), self.scale_min * (read + write))
        paths = [b for b in self.paths[j] if b.size]  # the first chains: a path's part elsewhere reads a tensor of
        for i, b in enumerate(paths):  # the path (or c_{j-1}'s) and writes one of its own
            rho[i] = self.scale_min * (min(float(out[self.cuts[j - 1]]), float(out[b[:-1]].min(initial=math.inf)))
                                       + float(out[b].min()))
        exact = [self._chain_moves(b, j, out) for b in paths]
        taus, need, memneed = self._prices(chains, rho, [e for e, _, _ in exact])
        if taus.size < 2:  # nothing of the segment takes time: it costs nothing between the runs
            return np.zeros(size)
        value = taus + need.sum(axis=0)  # linear between grid points (every chain's breakpoints are among them)
        whole = np.minimum(value[:-1], value[1:])  # any tau of an interval costs at least its ends' least
        moved, held = need[:, 1:].copy(), memneed[:, 1:].copy()  # per chain and interval [t0, t1): the least work
        for i, (costs, works, mems) in enumerate(exact):  # and memory moved (the knapsack's at t1, the paths' below it)
            at = np.searchsorted(costs, taus[1:], side="left") - 1  # the middles elsewhere faster than t1
            moved[i] = np.maximum(moved[i], works[at])
            held[i] = np.maximum(held[i], mems[at])
        cost = np.maximum(whole, taus[:-1] + moved.sum(axis=0))  # the interval's low end and least moves
        if not self.memory:
            return np.array([float(min(value[-1], cost.min()))])
        budget = self.step * np.arange(size)[:, None] * (1 + 1e-9)
        cost = np.where(held.sum(axis=0)[None] <= budget, cost[None], math.inf)
        return np.minimum(value[-1], cost.min(axis=1))

    def _chain_moves(self, b: np.ndarray, j: int, out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A path ``b`` from ``c_{j-1}`` to ``c_j``: the least work and memory its prefix in ``X`` and suffix in ``Y``
        hold when its middle ``b[s..e]`` between them runs elsewhere within ``tau``, as three arrays: the middles'
        least times elsewhere (sorted, the first 0: nothing elsewhere; only those that lower a least move, the last
        the whole path, moving nothing) and the least work and memory moved among the middles that take at most as
        long.

        The middle runs after ``X`` ends and before ``Y`` starts, op after op: on a host at its host time, or on an
        accelerator invocation, which reads the tensor before its first op there (``b[s-1]``'s, or ``c_{j-1}``'s) and
        writes its last op's before a host op or ``Y`` uses it (a DP over the two states; an invocation ended and
        another begun pays a write and a read more, never less). Paths longer than :data:`EXACT_PATH` ops move
        nothing more than the knapsack of :meth:`_prices` says."""
        n = b.size
        if n > EXACT_PATH:
            return np.zeros(1), np.zeros(1), np.zeros(1)
        s = self.scale_min
        h, a = self.host[b], self.fast[b]
        send = s * out[b]
        read = np.concatenate(([s * float(out[self.cuts[j - 1]])], send[:-1]))  # before op i: its predecessor's
        work = np.concatenate(([0.0], np.cumsum(a)))
        mem = np.concatenate(([0.0], np.cumsum(self.mem[b])))
        on_host = np.full(n, math.inf)  # per middle start s: its least time with the op at hand on a host ...
        on_acc = np.full(n, math.inf)  # ... or on an accelerator, its tensor not yet written
        costs, works, mems = [0.0], [float(work[-1])], [float(mem[-1])]
        for e in range(n):
            host = np.minimum(on_host, on_acc + (send[e - 1] if e else 0.0))
            acc = np.minimum(on_acc, on_host + read[e])
            host[e], acc[e] = 0.0, read[e]  # a middle starting at e
            on_host, on_acc = host + h[e], acc + a[e]
            costs.extend(np.minimum(on_host[:e + 1], on_acc[:e + 1] + send[e]).tolist())
            works.extend((work[:e + 1] + work[-1] - work[e + 1]).tolist())
            mems.extend((mem[:e + 1] + mem[-1] - mem[e + 1]).tolist())
        order = np.argsort(costs, kind="stable")
        costs = np.asarray(costs)[order]
        keep = np.isfinite(costs)
        costs = costs[keep]
        works = np.minimum.accumulate(np.asarray(works)[order][keep])
        mems = np.minimum.accumulate(np.asarray(mems)[order][keep])
        drop = np.ones(costs.size, dtype=bool)  # the middles that lower the least work or memory: the last moves none
        drop[1:] = (works[1:] < works[:-1]) | (mems[1:] < mems[:-1])
        return costs[drop], works[drop], mems[drop]

    def _prices(self, chains: list[np.ndarray], rho: np.ndarray,
                times: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The grid of ``tau`` (from 0 to where nothing need move, with every chain's breakpoints and the paths'
        middles' ``times``, :meth:`_chain_moves`), and per chain and grid point the work it must move into the
        neighbouring runs and its least memory (fractional knapsack by memory per unit of work); ``rho`` is each
        chain's least transfer on another accelerator."""
        a = [self.fast[b] for b in chains]
        work = np.array([float(x.sum()) for x in a])
        slow = np.array([_slowdown(self.host[b], x) for b, x in zip(chains, a)])
        finite = np.isfinite(slow)
        hosted = np.full(work.size, math.inf)
        hosted[finite] = slow[finite] * work[finite]
        top = float(np.minimum(hosted, work + rho).max(initial=0.0))
        top = max([top] + [float(t[-1]) for t in times])  # every path wholly elsewhere: nothing moves
        with np.errstate(divide="ignore", invalid="ignore"):
            turn = np.where(finite & (slow > 1), rho * slow / (slow - 1), np.inf)  # where tau / r overtakes tau - rho
        taus = np.unique(np.concatenate((top * np.arange(TAU_STEPS + 1) / TAU_STEPS, turn, work + rho, hosted,
                                         *[_steps(t) for t in times])))
        taus = taus[(taus >= 0) & (taus <= top)]
        per = np.zeros((work.size, taus.size))
        per[finite] = taus[None, :] / slow[finite, None]
        allowed = np.maximum(taus[None, :] - rho[:, None], per)
        need = np.maximum(0.0, work[:, None] - allowed)  # chains x taus
        memneed = np.zeros_like(need)
        for i, (b, x) in enumerate(zip(chains, a)):
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
        width = BUCKETS + 2 if self.memory else 1
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
            table = self.table[j]
            host = float(self.host[cuts[j]])
            if math.isfinite(host):
                f[j + 1, 0] = min(f[j + 1, 0], float((row[live] + table[live if self.memory else 0]).min()) + host)
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
                self._relax(f, row, live, table, e, cost, np.maximum(free[ok], 0.0))
        last = self.table[k]
        live = np.flatnonzero(np.isfinite(f[k]))
        if not live.size:
            return 0.0
        return float((f[k, live] + last[live if self.memory else 0]).min())

    def _relax(self, f: np.ndarray, row: np.ndarray, live: np.ndarray, table: np.ndarray, ends: np.ndarray,
               cost: np.ndarray, free: np.ndarray) -> None:
        """Runs ending at ``ends`` (costs ``cost``, free memory ``free``) after the states ``live`` of ``row``: the run
        gives ``x`` (a grid point, rounded up) of its free memory to the segment before it and keeps the rest."""
        if not self.memory:
            value = float((row[live] + table[0]).min())
            np.minimum.at(f[:, 0], ends, value + cost)
            return
        width = f.shape[1]
        most = np.ceil(free / self.step - 1e-9).astype(np.int64)  # x's grid points up to the free memory, rounded up
        xs = np.arange(int(most.max(initial=0)) + 1)
        before = (row[live][:, None] + table[np.minimum(live[:, None] + xs[None, :], table.size - 1)]).min(axis=0)
        can = most[:, None] >= xs[None, :]  # ends x xs
        kept = np.ceil((free[:, None] - xs[None, :] * self.step) / self.step - 1e-9).astype(np.int64) + 1
        kept = np.clip(kept, 0, width - 1)
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
