"""The data the latency blocks share: bounds from the data, subgraph levels, warm schedules, run arcs.

Numpy only: everything here is computed once per model from the scaled :class:`~.base.Context`
(times in model units) and read by the templates of :mod:`.latency` and :mod:`.latency_cuts`.

* :class:`Bounds` — the horizon ``H`` (a known latency, else :func:`serial_bound`) and each op's
  *head* / *tail* (longest path of fastest running times into / out of it): the big-Ms of
  Tarnawski et al.'s Lemma 4.1 linearization, and variable bounds.
* :func:`levels` — the cost model's cut of an accelerator's ops into contiguous subgraphs (§4.1).
* :func:`warm_times` — a placement's invocation schedule: the values of every latency block.
* :func:`run_arcs` — the arcs of the run flows along a longest path, with their costs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..constraints import Contiguous, DagOrder, Memory
from ..deadline import BudgetSpent, Deadline
from ..evaluate import CostModel, evaluate
from .base import Context, Warm
from .latency_side import fractional_price, knapsack_price, outside, side_price
from .latency_side import marked as _marked

Slot = tuple[int, int]  # (accelerator index, subgraph number 1..q)


@dataclass(frozen=True)
class Bounds:
    """Times derived from the data (model units) that bound every considered schedule."""

    horizon: float      # H: no considered solution is slower (a known latency, or the serial bound)
    fastest: np.ndarray  # least running time of each op over the devices it may use
    head: np.ndarray     # longest path of fastest times ending at the op, the op included
    tail: np.ndarray     # longest path of fastest times after the op, the op excluded


def serial_bound(ctx: Context) -> float:
    """Every invocation run one after another, each op on its slowest allowed device, every tensor moved
    to each consumer: no placement's latency exceeds this (model units)."""
    g = ctx.graph
    slowest = np.where(ctx.unit_allowed[ctx.unit], ctx.work, 0.0).max(axis=1, initial=0.0)
    degree = np.bincount(g.src, minlength=g.n)
    return float(slowest.sum() + (ctx.comm.max(axis=1, initial=0.0) * (1 + degree)).sum())


def bounds(ctx: Context, horizon: float | None) -> Bounds:
    """The shared :class:`Bounds` for ``horizon`` (cost-model units; ``None``: the serial bound)."""
    return ctx.view(f"latency_bounds:{horizon!r}", lambda: _bounds(ctx, horizon))


def _bounds(ctx: Context, horizon: float | None) -> Bounds:
    g = ctx.graph
    serial = serial_bound(ctx)
    H = serial if horizon is None else min(serial, horizon / ctx.scale.time)
    H = H * (1 + 1e-9) + 1e-9  # the start that set H stays inside
    allowed = ctx.unit_allowed[ctx.unit]
    fastest = np.where(allowed, ctx.work, np.inf).min(axis=1, initial=np.inf)
    fastest = np.where(np.isfinite(fastest), fastest, 0.0)
    head, tail = fastest.copy(), np.zeros(g.n)
    for v in g.topo.tolist():
        preds = g.predecessors(v)
        head[v] += head[preds].max(initial=0.0)
    for v in g.topo[::-1].tolist():
        succ = g.successors(v)
        if succ.size:
            tail[v] = (fastest[succ] + tail[succ]).max()
    # an op's output is in host memory when its slot ends, and a slot may end at H whatever its ops' tails (the
    # op's successors may share the slot): H, not H - tail, bounds every op's Latency_v
    return Bounds(H, fastest, head, tail)


def accelerators(ctx: Context) -> list[int]:
    """Non-host devices some op may run on."""
    return [d for d in range(ctx.D) if not ctx.cluster.host[d] and ctx.unit_allowed[:, d].any()]


def levels(ctx: Context, assign: np.ndarray, acc: list[int]) -> np.ndarray:
    """``(n, len(acc))``: the subgraph level of each op for each accelerator (§4.1).

    ``level_a(v) = max(1, max_u level_a(u) + [u not on a])`` for ``v`` on ``a``, else
    ``max_u level_a(u)`` (0 without predecessors): the cost model's cut into contiguous subgraphs.
    """
    g = ctx.graph
    col = {a: i for i, a in enumerate(acc)}
    out = np.zeros((g.n, len(acc)), dtype=np.int64)
    for v in g.topo.tolist():
        preds = g.predecessors(v)
        if preds.size:
            out[v] = out[preds].max(axis=0)
        i = col.get(int(assign[v]))
        if i is not None:
            back = [out[u, i] + 1 for u in preds.tolist() if assign[u] != assign[v]]
            out[v, i] = max([1, int(out[v, i]), *back])
    return out


def merged_hosts(ctx: Context) -> np.ndarray:
    """``rep[d]``: the device whose variables stand for ``d``.

    Identical hosts with unbounded memory are one device to the invocation model (Fig. 3's
    index 0: host ops never wait for a core), so their ops go to the first of them — unless
    contiguity, DAG order or a pin tells them apart.
    """
    rep = np.arange(ctx.D)
    problem = ctx.problem
    if problem.has(Contiguous) or problem.has(DagOrder):
        return rep
    pinned = set(ctx.pins.values())
    for group in ctx.cluster.homogeneous_groups():
        if (ctx.cluster.host[group[0]] and not pinned & set(group)
                and all(math.isinf(ctx.capacity[d]) for d in group)):
            rep[group] = group[0]
    return rep


def first_use_order(ctx: Context, assign: np.ndarray) -> tuple[str, ...]:
    """Devices by the first unit (in index order) they hold, unused devices last: :class:`DeviceOrder`'s order
    under which ``assign`` breaks no symmetry row."""
    first = np.full(ctx.D, ctx.n, dtype=np.int64)
    np.minimum.at(first, np.asarray(assign)[ctx.units], np.arange(ctx.units.size))
    return tuple(ctx.devices[d] for d in sorted(range(ctx.D), key=lambda d: (first[d], d)))


# ---------------------------------------------------------------------------- warm schedule
@dataclass(frozen=True)
class WarmTimes:
    """A placement's invocation schedule in model units (the values of the latency blocks)."""

    level: np.ndarray  # (n, accelerators) subgraph levels
    ready: np.ndarray  # (n,) output in host memory (the cost model's finish times)
    done: np.ndarray   # (n,) end of the op's own computation (within its slot on an accelerator)
    start: dict[Slot, float]
    finish: dict[Slot, float]


def warm_times(ctx: Context, warm: Warm, q: int) -> WarmTimes:
    """The cost model's schedule of ``warm.assign``, cached per placement."""
    key = ("latency_warm", q)
    cached = ctx.views.get(key)
    if cached is not None and cached[0] is warm:
        return cached[1]
    times = _warm_times(ctx, warm.assign, q)
    ctx.views[key] = (warm, times)
    return times


def _warm_times(ctx: Context, assign: np.ndarray, q: int) -> WarmTimes:
    g, acc = ctx.graph, accelerators(ctx)
    lev = levels(ctx, assign, acc)
    ev = evaluate(ctx.problem.placement(assign), CostModel.named("latency"))
    late = 2 * bounds(ctx, None).horizon  # no schedule: values that violate the rows, finitely
    ready = np.array([ev.finish_times.get(name, math.inf) for name in g.names]) / ctx.scale.time
    ready = np.where(np.isfinite(ready), ready, late)
    done = ready.copy()
    start, finish = {}, {}
    for i, a in enumerate(acc):
        prev = 0.0
        for j in range(1, q + 1):
            ops = np.flatnonzero((assign == a) & (lev[:, i] == j))
            if ops.size == 0:
                start[a, j] = finish[a, j] = prev
                continue
            tin, tout = _slot_transfers(ctx, assign, lev[:, i], a, j)
            finish[a, j] = float(ready[ops].max())
            start[a, j] = finish[a, j] - tin - tout - float(ctx.work[ops, a].sum())
            order = ops[np.argsort(g.rank[ops])]
            done[order] = start[a, j] + tin + np.cumsum(ctx.work[order, a])
            prev = finish[a, j]
    return WarmTimes(lev, ready, done, start, finish)


def _slot_transfers(ctx: Context, assign: np.ndarray, level: np.ndarray, a: int, j: int) -> tuple[float, float]:
    """In and out time of slot ``(a, j)``: each tensor once per slot boundary."""
    g = ctx.graph
    inside = (assign == a) & (level == j)
    cross = inside[g.src] != inside[g.dst]
    tin = np.unique(g.src[cross & inside[g.dst]])
    tout = np.unique(g.src[cross & inside[g.src]])
    return float(ctx.comm[tin, a].sum()), float(ctx.comm[tout, a].sum())


def reach(ctx: Context, assign: np.ndarray) -> np.ndarray:
    """``(n, D)``: some op of device ``d`` is reachable from ``v`` (``v`` included): Lemma 4.1's ``z``."""
    g = ctx.graph
    out = np.zeros((g.n, ctx.D), dtype=bool)
    out[np.arange(g.n), assign] = True
    for v in g.topo[::-1].tolist():
        succ = g.successors(v)
        if succ.size:
            out[v] |= out[succ].any(axis=0)
    return out


def fresh_memory(ctx: Context, seq: tuple[int, ...] | list[int]) -> np.ndarray:
    """Per op of ``seq``: the memory of its colocation group the first time ``seq`` meets the group, else 0.

    A group shares one device, so the devices holding ``seq``'s ops hold at least the sum."""
    group = ctx.graph.group_id
    total = np.bincount(group, weights=ctx.mem, minlength=ctx.n)
    seen: set[int] = set()
    out = np.zeros(len(seq))
    for k, v in enumerate(seq):
        if int(group[v]) not in seen:
            seen.add(int(group[v]))
            out[k] = total[group[v]]
    return out


def memory_segments(ctx: Context, bd: Bounds, M: float) -> list[tuple[tuple[int, ...], int]]:
    """``(segment, R)``: each longest path, its shortest prefixes and suffixes whose memory (with their colocation
    groups, :func:`fresh_memory`) exceeds ``k M``, with ``R = ceil(memory / M) >= 2`` accelerators the segment
    needs when it stays off the hosts."""
    out: dict[tuple[int, ...], int] = {}
    for p in longest_paths(ctx, bd):
        for part in (p, p[::-1]):
            total = np.cumsum(fresh_memory(ctx, part)) / M
            for k in range(1, math.ceil(total[-1] - 1e-9)):
                j = int(np.searchsorted(total, k + 1e-9, side="right"))
                seg = part[:j + 1] if part is p else part[:j + 1][::-1]
                out[seg] = math.ceil(total[j] - 1e-9)
            out[p] = math.ceil(total[-1] - 1e-9)
    return [(seg, need) for seg, need in out.items() if need >= 2]


def longest_paths(ctx: Context, bd: Bounds, trim: bool = True) -> list[tuple[int, ...]]:
    """The distinct longest paths of fastest times through each op (ties to the lower index); ``trim``: cut to
    the first and last op that takes memory."""
    g = ctx.graph
    heavy = np.bincount(g.group_id, weights=ctx.mem, minlength=g.n)
    chains = _Chains(ctx, bd)
    out = {}
    for v in chains.distinct():
        path = chains.path(v)
        keep = [i for i, w in enumerate(path) if heavy[ctx.graph.group_id[w]] > 0 or not trim]
        if keep:
            out[tuple(path[keep[0]:keep[-1] + 1])] = None
    return [p for p in out if len(p) > 1]


class _Chains:
    """The path through each op ``v``: its chain of heaviest-head predecessors back to a source, then its chain of
    heaviest-tail successors on to a sink. Many ops share one path (every op of a long chain lies on it), so paths
    are told apart by a polynomial hash of their sequences, summed along the two chains (O(n)), and only the
    distinct ones are walked: walking every op's path was O(n * path length), minutes on 20,000 ops."""

    MOD, BASE = (1 << 61) - 1, 1_000_003

    def __init__(self, ctx: Context, bd: Bounds):
        g = ctx.graph
        self.back = {v: int(p[np.argmax(bd.head[p])]) for v in range(g.n) if (p := g.predecessors(v)).size}
        self.ahead = {v: int(s[np.argmax(bd.fastest[s] + bd.tail[s])]) for v in range(g.n)
                      if (s := g.successors(v)).size}
        fast = bd.fastest.tolist()
        n, mod, base = g.n, self.MOD, self.BASE
        power = [1] * (n + 1)
        for i in range(n):
            power[i + 1] = power[i] * base % mod
        hb, lb, sb = [0] * n, [0] * n, [0.0] * n  # the chain back from v, v last
        ha, la, sa = [0] * n, [0] * n, [0.0] * n  # the chain on from v, v first
        order = g.topo.tolist()
        for v in order:
            u = self.back.get(v)
            hb[v] = ((hb[u] * base if u is not None else 0) + v + 1) % mod
            lb[v], sb[v] = (lb[u] if u is not None else 0) + 1, (sb[u] if u is not None else 0.0) + fast[v]
        for v in reversed(order):
            w = self.ahead.get(v)
            la[v] = (la[w] if w is not None else 0) + 1
            ha[v] = ((v + 1) * power[la[v] - 1] + (ha[w] if w is not None else 0)) % mod
            sa[v] = fast[v] + (sa[w] if w is not None else 0.0)
        self.key, self.length, self.total = [], [], []
        for v in range(n):
            w = self.ahead.get(v)
            rest, size = (ha[w], la[w]) if w is not None else (0, 0)
            self.key.append(((hb[v] * power[size] + rest) % mod, lb[v] + size))
            self.length.append(lb[v] + size)
            self.total.append(sb[v] + (sa[w] if w is not None else 0.0))

    def distinct(self) -> list[int]:
        """One op of each distinct path, the first by index."""
        seen: dict[tuple[int, int], int] = {}
        for v, key in enumerate(self.key):
            seen.setdefault(key, v)
        return list(seen.values())

    def path(self, v: int) -> list[int]:
        path, u = [v], v
        while u in self.back:
            u = self.back[u]
            path.append(u)
        path.reverse()
        u = v
        while u in self.ahead:
            u = self.ahead[u]
            path.append(u)
        return path


def capacity_bound(ctx: Context, acc: list[int]) -> float:
    """The most memory one accelerator holds: its capacity under a :class:`Memory` term, else unbounded."""
    if not acc or not ctx.problem.has(Memory):
        return math.inf
    return float(ctx.capacity[acc].max())


def critical_paths(ctx: Context, bd: Bounds, count: int) -> list[tuple[int, ...]]:
    """The ``count`` longest of :func:`longest_paths` (by fastest running times), walking only the paths whose
    running time (summed along their chains) ties or beats the ``count``-th."""
    chains = _Chains(ctx, bd)
    ops = [v for v in chains.distinct() if chains.length[v] > 1]
    if not ops:
        return []
    totals = sorted((chains.total[v] for v in ops), reverse=True)
    floor = totals[min(count, len(totals)) - 1]
    near = [v for v in ops if chains.total[v] >= floor - 1e-9 * max(1.0, abs(floor))]
    paths = list(dict.fromkeys(tuple(chains.path(v)) for v in near))
    return sorted(paths, key=lambda p: (-float(bd.fastest[list(p)].sum()), p))[:count]


FLOOR_PATHS = 3  # longest paths the run-paths DP cuts, the same as the LP's flows (their arcs are shared)


def run_path_bound(ctx: Context, horizon: float | None, contiguous: bool, paths: int = FLOOR_PATHS,
                   deadline: Deadline | None = None) -> float:
    """The DP over each of the ``paths`` longest paths' runs (:func:`run_arcs`): the cheapest way to cut
    the path into accelerator runs and host ops, at least the latency of every placement whose slots
    hold ``contiguous`` bodies (one subgraph per accelerator) or any (model units; 0 without accelerators).

    Each placement cuts a longest path ``P`` into maximal runs on one accelerator and ops on hosts;
    the slots ``P`` visits run one after another, each at least its arc's cost, so the latency is at
    least the cost of that path through the arcs, and at least the cheapest one. This is
    :class:`~.latency_cuts.RunFlows`'s flow solved exactly, computed once per model.

    With a ``deadline``, the paths whose arcs are not done by it are left out (the maximum over the
    others is still a bound; ``0.0`` if none is done), and nothing is stored for the model.
    """
    def build() -> float:
        acc = accelerators(ctx)
        if not acc:
            return 0.0
        best = 0.0
        for p in critical_paths(ctx, bounds(ctx, horizon), paths):
            dist = np.full(len(p) + 1, np.inf)
            dist[0] = 0.0
            try:
                found = run_arcs(ctx, p, acc, contiguous, deadline)
            except BudgetSpent:
                if best <= 0 and not (deadline is not None and deadline.expired()):
                    raise  # declined by its size before any path was priced: no bound, not a zero one
                break
            arcs = sorted(((i if i >= 0 else -i - 1, j, c) for (i, j), c in found.items()))
            for s, j, c in arcs:  # arcs go forward, sorted by their start: one pass is the DP
                dist[j] = min(dist[j], dist[s] + c)
            best = max(best, float(dist[-1]) if np.isfinite(dist[-1]) else 0.0)
        return best
    if deadline is not None:
        return build()
    return ctx.view(f"latency_run_paths:{horizon!r}:{contiguous}:{paths}", build)


def descendants(ctx: Context) -> np.ndarray:
    """``(n, n)`` booleans: ``out[u, v]`` iff ``v`` is reachable from ``u`` (``u`` included), computed once per model."""
    def build() -> np.ndarray:
        g = ctx.graph
        out = np.eye(g.n, dtype=bool)
        for v in g.topo[::-1].tolist():
            succ = g.successors(v)
            if succ.size:
                out[v] |= out[succ].any(axis=0)
        return out
    return ctx.view("latency_descendants", build)


def run_arcs(ctx: Context, p: tuple[int, ...], acc: list[int], contiguous: bool,
             deadline: Deadline | None = None) -> dict[tuple[int, int], float]:
    """:func:`_run_arcs`, computed once per model and path (the flows and the run-paths floor share them);
    :class:`~placement_dsl.deadline.BudgetSpent` when ``deadline`` passes before they are all priced."""
    return ctx.view(f"latency_run_arcs:{p}:{tuple(acc)}:{contiguous}",
                    lambda: _run_arcs(ctx, p, acc, contiguous, deadline))


def _run_arcs(ctx: Context, p: tuple[int, ...], acc: list[int], contiguous: bool,
              deadline: Deadline | None = None) -> dict[tuple[int, int], float]:
    """Arcs of :class:`~.latency_cuts.RunFlows` on path ``p`` with their costs (model units).

    ``(i, j)``: ``p[i..j-1]`` on one accelerator. Its *body* are the ops its slot must hold: the
    run and, ``contiguous`` (one subgraph per accelerator, Lemma 4.1), every op on a path between
    two of its ops (``desc(p[i]) & anc(p[j-1])``) with their colocation groups; its memory holds
    the groups of the body. With several slots per accelerator a colocated op shares the run's
    device, not its slot: its memory counts, its reads and writes are not the run's. Cost: the body's least running times (the run's only, unless
    ``contiguous``), the read of ``p[i-1]``'s and the write of ``p[j-1]``'s tensor at the
    boundaries, and the body's other reads and writes (:func:`~.latency_side.side_price`). ``(-i-1, i+1)``:
    ``p[i]`` on a host. Colocated neighbours are never separated by a run's end.
    """
    m, g = len(p), ctx.graph
    M = capacity_bound(ctx, acc)
    fits = M * (1 + 1e-9)  # a body fits up to this (in floats 1 - 5/6 < 1/6: a side op filling the room exactly)
    _size_arcs(ctx, p, fits, contiguous)
    t_acc = np.where(ctx.unit_allowed[ctx.unit][:, acc], ctx.work[:, acc], np.inf).min(axis=1)
    hosts = np.flatnonzero(ctx.cluster.host)
    t_host = np.where(ctx.unit_allowed[ctx.unit][:, hosts], ctx.work[:, hosts], np.inf).min(axis=1, initial=np.inf)
    c = ctx.comm[:, acc].min(axis=1)
    gmem = np.bincount(g.group_id, weights=ctx.mem, minlength=ctx.n)
    gid = np.asarray(g.group_id, dtype=np.int64)  # a group's id is an op index
    grouped = bool((gid != np.arange(ctx.n)).any())  # else each op is its own group
    reach = descendants(ctx) if contiguous else None
    glued = [k > 0 and ctx.unit[p[k]] == ctx.unit[p[k - 1]] for k in range(m)] + [False]
    on_path, on_acc = np.zeros(ctx.n, dtype=bool), np.isfinite(t_acc)
    on_path[list(p)] = True
    at = np.full(ctx.n, -1, dtype=np.int64)  # each op's position on the path, -1 off it
    at[list(p)] = np.arange(m)
    arcs: dict[tuple[int, int], float] = {}
    for i in range(m):
        if deadline is not None:
            deadline.check(f"the run arcs from position {i} of a {m}-op path")
        if np.isfinite(t_host[p[i]]):
            arcs[-i - 1, i + 1] = float(t_host[p[i]])
        for j in range(i + 1, m + 1) if not glued[i] else ():
            run = np.zeros(ctx.n, dtype=bool)
            run[list(p[i:j])] = True
            body = run | (reach[p[i]] & reach[:, p[j - 1]]) if reach is not None else run.copy()
            device = body | _marked(gid, gid[body])[gid] if grouped else body  # colocated: on the run's device
            if contiguous:  # one slot per accelerator: the groups share the run's slot too
                body = device
            groups = _marked(gid, gid[device]) if grouped else device
            work, held = float(t_acc[body if contiguous else run].sum()), float(gmem[groups].sum())
            if held > fits or not np.isfinite(work):
                break
            if glued[j] or (contiguous and bool(((at[body] >= 0) & ((at[body] < i) | (at[body] >= j))).any())):
                continue
            ends = (float(c[p[i - 1]]) if i else 0.0) + (float(c[p[j - 1]]) if j < m else 0.0)
            prev, last = (p[i - 1] if i else -1), (p[j - 1] if j < m else -1)
            after = p[j] if j < m else -1
            arcs[i, j] = work + ends + side_price(ctx, body, on_path, prev, last, c, on_acc, fits - held,
                                                   outside(reach, prev, after))
    return arcs


# array cells the run arcs may touch (each arc's body is a few O(n) vectors; ``contiguous`` adds the (n, n)
# reachability): above, the arcs are declined at once instead of taking hours (a 20,000-op chain: 10^12 cells)
MAX_ARC_CELLS = 2e9
MAX_REACH_CELLS = 1e8  # the reachability matrix's booleans (100 MB: 10,000 ops)


def arc_cells(ctx: Context, p: tuple[int, ...], fits: float) -> float:
    """Array cells :func:`_run_arcs` touches on path ``p``, estimated in ``O(m log m)`` without building an arc:
    a run from ``p[i]`` ends by the first ``j`` whose path ops alone hold more memory than ``fits`` (its body
    holds at least their groups), and each arc costs ``O(n)``."""
    mem = np.concatenate(([0.0], np.cumsum(np.asarray(ctx.mem, dtype=float)[list(p)])))
    ends = np.searchsorted(mem, mem[:-1] + fits, side="right") if np.isfinite(fits) else np.full(len(p), len(p) + 1)
    runs = np.minimum(ends, len(p) + 1) - np.arange(1, len(p) + 1)
    return float(np.maximum(runs, 1).sum()) * ctx.n


def _size_arcs(ctx: Context, p: tuple[int, ...], fits: float, contiguous: bool) -> None:
    """Raise :class:`~placement_dsl.deadline.BudgetSpent` when the run arcs of ``p`` are too large to price."""
    cells = arc_cells(ctx, p, fits)
    if cells > MAX_ARC_CELLS:
        raise BudgetSpent(f"declined: the run arcs of a {len(p)}-op path over {ctx.n} ops would touch about "
                          f"{cells:.2g} array cells (at most {MAX_ARC_CELLS:.0e})")
    if contiguous and float(ctx.n) ** 2 > MAX_REACH_CELLS:
        raise BudgetSpent(f"declined: the run arcs of a contiguous split need the reachability of {ctx.n} ops, "
                          f"{float(ctx.n) ** 2:.2g} booleans (at most {MAX_REACH_CELLS:.0e})")


_priced = knapsack_price  # the former name, kept for one release
_fractional = fractional_price  # the former name, kept for one release
