"""Segment costs of a topological order (Archer et al. §4, Lemma 4.1, Alg. 4-5).

For a topological order ``pi`` and a segment ``[i, j)`` of positions, the MTPP stage cost
(Archer eq. 3) is ``f(i, j) = in + work + overflow + out`` with every tensor counted once.
With prefix sums for work and memory, only the IO needs care. Write ``p(u)`` for the
position of producer ``u``, ``c_1 < ... < c_d`` for its consumers' positions and ``s_u``
for its tensor size. Two point sets with weight ``s_u`` describe all tensors:

* *out-points* ``(p(u), c_d)``: ``u`` is an output of ``[i, j)`` iff ``i <= p(u) < j <= c_d``;
* *in-points* ``(c_{t-1}, c_t)`` for ``t = 1..d`` with ``c_0 = p(u)``: the segment's first
  consumer of ``u`` is ``c_t`` iff ``c_{t-1} < i <= c_t < j`` (Alg. 5's disjoint rectangles).

With ``Q(i, j) = sum of weights of points with i <= x < j <= y`` (a 2-D dominance count)
and ``L(b)`` the bytes live across boundary ``b`` (``p(u) < b <= c_d``)::

    out(i, j) = Q_out(i, j)
    in(i, j)  = L(i) - L(j) + Q_in(i, j)

``Q(., j)`` for one ``j`` is a reverse cumulative sum over the points alive at ``j``; going
from ``j`` to ``j + 1`` adds the points that start at ``x = j`` and drops those that end at
``y = j``, in ``O(deg)`` (:func:`advance`). The DP streams these columns instead of storing
the ``n x n`` table (:mod:`.slicegraph`); :meth:`SegmentCosts.table` builds the dense
table for O(1) queries only up to :data:`DENSE_LIMIT` ops (two float64 ``(n+1)^2``
arrays: 2 x 34 MB at the limit).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from ..cluster import Cluster
from ..errors import InfeasibleError, SpecError
from ..evaluate import CostModel, MemoryMode, Objective, Overlap
from ..graph import Graph

DENSE_LIMIT = 2048
OVERLAP_CODE = {Overlap.NONE: 0, Overlap.HALF: 1, Overlap.FULL: 2}

# Kernels are compiled with cache=True: the first compile of the fused DP takes seconds,
# and every process that imports the heuristics (tests, benchmarks, sweep workers) reuses it.


@numba.njit(cache=True, inline="always")
def stage_load(comp: float, tin: float, tout: float, overflow: float, overlap: int) -> float:
    """Archer eq. 3 (overlap 0) and Tarnawski App. C.1 variants (1: half, 2: full duplex)."""
    if overlap == 0:
        return comp + tin + tout + overflow
    if overlap == 1:
        return max(comp, tin + tout + overflow)
    return max(max(comp, tin), tout + overflow)


@numba.njit(cache=True)
def advance(j, v, pos, pred_ptr, pred_idx, outdeg, out_bytes, rem, lastseen, r_in, r_out, live):
    """Add op ``v`` at position ``j - 1``: update the alive points and ``live[j]`` (Alg. 5, streamed).

    ``rem[u]`` counts ``u``'s consumers not yet placed, ``lastseen[u]`` is the position of its
    latest placed consumer (or of ``u``); ``r_in[x]`` / ``r_out[x]`` hold the weight of the
    in-/out-points starting at ``x`` that are still alive.
    """
    x = j - 1
    live[j] = live[x]
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        u = pred_idx[e]
        s = out_bytes[u]
        r_in[lastseen[u]] -= s  # in-point (c_{t-1}, x) ends here
        lastseen[u] = x
        rem[u] -= 1
        if rem[u] > 0:
            r_in[x] += s  # in-point (x, c_{t+1}) starts
        else:
            r_out[pos[u]] -= s  # v was u's last consumer
            live[j] -= s
    lastseen[v] = x
    rem[v] = outdeg[v]
    if outdeg[v] > 0:
        s = out_bytes[v]
        r_in[x] += s
        r_out[x] += s
        live[j] += s


@dataclass(frozen=True)
class StageParams:
    """Per device class: op times, memory, transfer and overflow scales (pipeline order in ``cls``)."""

    times: np.ndarray  # (C, n) op running times on each device class
    memory: np.ndarray  # (C,) capacity
    tscale: np.ndarray  # (C,) time per byte crossing the boundary (0 on host devices)
    overflow: np.ndarray  # (C,) time per overflowing byte (0 unless MemoryMode.OVERFLOW on a non-host device)
    hard: np.ndarray  # (C,) memory is a hard constraint
    cls: np.ndarray  # (D,) class of each device, in pipeline order
    overlap: int


def stage_params(graph: Graph, cluster: Cluster, model: CostModel, devices: np.ndarray | None = None) -> StageParams:
    """Group the (chosen) devices into classes of interchangeable devices and tabulate their costs."""
    if model.objective is not Objective.MAX_LOAD:
        raise SpecError(f"segment costs: objective {model.objective.value!r} is not a max-load objective; "
                        "slicing optimizes max_d load(d) (CostModel.named('bottleneck' or 'throughput'))")
    devices = np.arange(cluster.size) if devices is None else np.asarray(devices, dtype=np.int64)
    keys: dict[tuple, int] = {}
    cls = np.empty(len(devices), dtype=np.int64)
    reps: list[int] = []
    for t, d in enumerate(devices):
        dev = cluster.devices[d]
        key = (dev.kind, dev.memory, dev.speed, dev.bandwidth, dev.host)
        if key not in keys:
            keys[key] = len(reps)
            reps.append(int(d))
        cls[t] = keys[key]
    times = cluster.times(graph)[:, reps].T.copy()
    host = cluster.host[reps]
    soft = model.memory is MemoryMode.OVERFLOW
    return StageParams(
        times=times,
        memory=cluster.memory[reps].copy(),
        tscale=cluster.transfer_scale[reps].copy(),
        overflow=np.where(soft & ~host, 1.0 / cluster.bandwidth[reps], 0.0),
        hard=np.full(len(reps), not soft),
        cls=cls,
        overlap=OVERLAP_CODE[model.overlap],
    )


def identical_stages(cluster: Cluster) -> bool:
    """True when every device is interchangeable (Archer's k identical stages)."""
    return len(cluster.homogeneous_groups()) == 1


class SegmentCosts:
    """Costs ``f(i, j)`` of the segments ``[i, j)`` of a topological order on one device class.

    Building takes ``O(n + m log m)`` (vectorized). :meth:`column` answers all ``f(., j)``
    in ``O(n + m)``; :meth:`table` gives the dense Lemma 4.1 table (O(1) queries) for
    ``n <= DENSE_LIMIT``; :meth:`cost` answers batches of segments with either.

    Examples
    --------
    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name="a", work=1, out_bytes=2), Op(name="b", work=3)], [("a", "b")])
    >>> sc = SegmentCosts(g, Cluster.stages(2), g.topo)
    >>> float(sc.cost(1, 2)), float(sc.cost(0, 1)), float(sc.cost(0, 2))
    (5.0, 3.0, 4.0)
    """

    def __init__(self, graph: Graph, cluster: Cluster, order: np.ndarray, model: CostModel | None = None,
                 device: int = 0):
        model = model or CostModel()
        order = np.asarray(order, dtype=np.int64)
        check_order(graph, order)
        self.graph, self.order, self.n = graph, order, graph.n
        pos = np.empty(graph.n, dtype=np.int64)
        pos[order] = np.arange(graph.n)
        self.pos = pos
        params = stage_params(graph, cluster, model, np.array([device]))
        self._tscale, self._ovf = float(params.tscale[0]), float(params.overflow[0])
        self._cap, self._hard, self._overlap = float(params.memory[0]), bool(params.hard[0]), params.overlap
        self.work = np.concatenate([[0.0], np.cumsum(params.times[0][order])])
        self.mem = np.concatenate([[0.0], np.cumsum((graph.param_bytes + graph.activation_bytes)[order])])
        self.in_points, self.out_points = tensor_points(graph, pos)
        self.live = live_bytes(self.out_points, graph.n)
        self._tables: tuple[np.ndarray, np.ndarray] | None = None

    # ------------------------------------------------------------------ queries
    def column(self, j: int) -> np.ndarray:
        """``f(i, j)`` for ``i = 0..j`` (``f(j, j) = 0``, the empty stage), in ``O(n + m)``."""
        if not 0 <= j <= self.n:
            raise SpecError(f"SegmentCosts.column: j={j} is outside 0..{self.n}")
        q = [self._column_q(pts, j) for pts in (self.in_points, self.out_points)]
        i = np.arange(j + 1)
        return self._load(i, np.full(j + 1, j), self.live[i] - self.live[j] + q[0], q[1])

    def table(self) -> np.ndarray:
        """The dense ``(n+1, n+1)`` table ``f[i, j]`` (``inf`` below the diagonal); ``n <= DENSE_LIMIT``."""
        if self.n > DENSE_LIMIT:
            raise SpecError(f"SegmentCosts.table: n={self.n} > DENSE_LIMIT={DENSE_LIMIT}; "
                            "use column(j) or the streaming DP for large graphs")
        if self._tables is None:
            self._tables = tuple(dominance_table(pts, self.n) for pts in (self.in_points, self.out_points))
        i, j = np.meshgrid(np.arange(self.n + 1), np.arange(self.n + 1), indexing="ij")
        q_in, q_out = self._tables
        f = self._load(i, j, self.live[i] - self.live[j] + q_in, q_out)
        return np.where(i <= j, f, np.inf)

    def cost(self, i: np.ndarray | int, j: np.ndarray | int) -> np.ndarray:
        """``f(i, j)`` for arrays of segment bounds ``0 <= i <= j <= n``."""
        i, j = np.broadcast_arrays(np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64))
        if np.any((i < 0) | (i > j) | (j > self.n)):
            raise SpecError(f"SegmentCosts.cost: need 0 <= i <= j <= {self.n} for every segment")
        if self.n <= DENSE_LIMIT:
            return self.table()[i, j]
        out = np.empty(i.shape)
        for jj in np.unique(j):
            sel = j == jj
            out[sel] = self.column(int(jj))[i[sel]]
        return out

    # ------------------------------------------------------------------ pieces
    def _column_q(self, pts: tuple[np.ndarray, np.ndarray, np.ndarray], j: int) -> np.ndarray:
        x, y, w = pts
        alive = (x < j) & (y >= j)
        per_x = np.bincount(x[alive], weights=w[alive], minlength=j + 1)[: j + 1]
        return np.cumsum(per_x[::-1])[::-1] - per_x[j]  # sum_{i <= x < j}

    def _load(self, i: np.ndarray, j: np.ndarray, tin: np.ndarray, tout: np.ndarray) -> np.ndarray:
        comp = self.work[j] - self.work[i]
        mem = self.mem[j] - self.mem[i]
        overflow = np.maximum(mem - self._cap, 0.0) * self._ovf
        ts = self._tscale
        if self._overlap == 0:
            f = comp + (tin + tout) * ts + overflow
        elif self._overlap == 1:
            f = np.maximum(comp, (tin + tout) * ts + overflow)
        else:
            f = np.maximum(np.maximum(comp, tin * ts), tout * ts + overflow)
        if self._hard:
            f = np.where(mem > self._cap * (1 + 1e-9), np.inf, f)
        return np.where(i == j, 0.0, f)


# ---------------------------------------------------------------------------- vectorized helpers
def check_order(graph: Graph, order: np.ndarray) -> None:
    """Raise unless ``order`` is a permutation of the ops in which every edge goes forward."""
    if order.shape != (graph.n,) or not np.array_equal(np.sort(order), np.arange(graph.n)):
        raise SpecError(f"order must be a permutation of the {graph.n} op indices of graph {graph.name!r}")
    pos = np.empty(graph.n, dtype=np.int64)
    pos[order] = np.arange(graph.n)
    back = np.flatnonzero(pos[graph.src] >= pos[graph.dst])
    if back.size:
        e = back[0]
        raise SpecError(f"order is not topological: edge {graph.names[graph.src[e]]!r} -> "
                        f"{graph.names[graph.dst[e]]!r} goes backward; use kahn(graph, priorities)")


def tensor_points(graph: Graph, pos: np.ndarray) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """In-points ``(c_{t-1}, c_t, s_u)`` and out-points ``(p(u), c_d, s_u)`` of every tensor."""
    if graph.m == 0:
        empty = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0))
        return empty, empty
    prod, cons = pos[graph.src], pos[graph.dst]
    srt = np.lexsort((cons, prod))
    prod, cons, w = prod[srt], cons[srt], graph.out_bytes[graph.src[srt]]
    first = np.r_[True, prod[1:] != prod[:-1]]
    prev = np.where(first, prod, np.r_[0, cons[:-1]])
    last = np.r_[prod[1:] != prod[:-1], True]
    return (prev, cons, w), (prod[last], cons[last], w[last])


def live_bytes(out_points: tuple[np.ndarray, ...], n: int) -> np.ndarray:
    """``L(b)`` for ``b = 0..n``: bytes produced before ``b`` and consumed at or after ``b``."""
    x, y, w = out_points
    diff = np.bincount(x + 1, weights=w, minlength=n + 2) - np.bincount(y + 1, weights=w, minlength=n + 2)
    return np.cumsum(diff)[: n + 1]


def dominance_table(points: tuple[np.ndarray, ...], n: int) -> np.ndarray:
    """Dense ``Q[i, j] = sum of w over points with i <= x < j <= y`` (zero where ``i >= j``)."""
    x, y, w = points
    grid = np.zeros((n + 1, n + 1))
    np.add.at(grid, (x, y), w)
    tail = np.cumsum(grid[:, ::-1], axis=1)[:, ::-1]  # S[x, j] = sum_{y >= j} W[x, y]
    before = np.vstack([np.zeros((1, n + 1)), np.cumsum(tail, axis=0)[:-1]])  # P[i, j] = sum_{x < i} S[x, j]
    q = np.diagonal(before)[None, :] - before  # P[j, j] - P[i, j]
    return np.where(np.arange(n + 1)[:, None] < np.arange(n + 1)[None, :], q, 0.0)


def require_allowed(graph: Graph, params: StageParams) -> None:
    """Every op must run on at least one device class, else no slicing exists."""
    bad = np.flatnonzero(~np.isfinite(params.times).any(axis=0) if params.times.size else [])
    if bad.size:
        raise InfeasibleError(f"op {graph.names[bad[0]]!r} may run on none of the devices; "
                              "give it a work entry for one of the device kinds")
