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

from dataclasses import dataclass

import numpy as np

from ..cluster import Cluster
from ..errors import InfeasibleError, SpecError
from ..evaluate import CostModel, MemoryMode, Objective, Overlap
from ..graph import Graph, Op
from .contract import Contraction, contract
from .jit import njit

DENSE_LIMIT = 2048
TENSOR_FIRST = 1e300  # priority of a tensor carrier: Kahn places it right after its host
OVERLAP_CODE = {Overlap.NONE: 0, Overlap.HALF: 1, Overlap.FULL: 2}

# Kernels are compiled with cache=True: the first compile of the fused DP takes seconds,
# and every process that imports the heuristics (tests, benchmarks, sweep workers) reuses it.


@njit(cache=True, inline="always")
def stage_load(comp: float, tin: float, tout: float, overflow: float, overlap: int) -> float:
    """Archer eq. 3 (overlap 0) and Tarnawski App. C.1 variants (1: half, 2: full duplex)."""
    if overlap == 0:
        return comp + tin + tout + overflow
    if overlap == 1:
        return max(comp, tin + tout + overflow)
    return max(max(comp, tin), tout + overflow)


@njit(cache=True)
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
    every = cluster.times(graph)
    times = every[:, reps].T.copy()
    for c in range(len(reps)):  # a pinned op runs on one member of its class: the slicer sees the class alike
        pinned = ~np.isfinite(times[c])
        if pinned.any():
            times[c, pinned] = every[np.ix_(pinned, devices[cls == c])].min(axis=1)
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
        times = params.times[0][order]
        finite = np.isfinite(times)  # ops the device cannot run are counted apart: inf - inf is nan
        self.work = np.concatenate([[0.0], np.cumsum(np.where(finite, times, 0.0))])
        self.blocked = np.concatenate([[0], np.cumsum(~finite)])
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
        comp = np.where(self.blocked[j] > self.blocked[i], np.inf, self.work[j] - self.work[i])
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


def require_allowed(graph: Graph, params: StageParams, cluster: Cluster | None = None,
                    devices: np.ndarray | None = None) -> None:
    """Every op must run on at least one device class sliced onto, else no slicing exists. The error names the
    devices sliced onto when they are not the whole ``cluster`` and the others that could run the op."""
    bad = np.flatnonzero(~np.isfinite(params.times).any(axis=0) if params.times.size else [])
    if not bad.size:
        return
    op = graph.names[bad[0]]
    if cluster is None or devices is None or len(devices) == cluster.size:
        raise InfeasibleError(f"op {op!r} may run on none of the devices; give it a work entry for one of the "
                              "device kinds")
    sliced = [cluster.names[d] for d in devices]
    runs = np.isfinite(cluster.times(graph)[bad[0]])
    others = [cluster.names[d] for d in np.flatnonzero(runs).tolist() if d not in set(devices.tolist())]
    where = f"; it runs on {others}, which this method leaves out" if others else ""
    raise InfeasibleError(f"op {op!r} may run on none of the devices this method slices onto {sliced}{where}; "
                          "use a method that places ops on every device (dp, greedy), or give it a work entry "
                          "for one of their kinds")


# ---------------------------------------------------------------------------- training graphs
@dataclass(frozen=True)
class Projection:
    """What a slicer cuts: the graph itself, or a training graph's forward projection (Tarnawski App. B).

    ``graph`` is the graph that is sliced; ``image`` maps every original op to its node there.
    For a training graph, :func:`forward_projection` builds it from the contraction; otherwise
    it is the original graph and ``image`` is the identity.
    """

    graph: Graph
    image: np.ndarray  # (n_original,) node of every original op
    carrier: np.ndarray  # (graph.n,) True for zero-work nodes that only carry an extra tensor of their host
    depth: np.ndarray | None = None  # forward-DAG depth per node (carriers: their host's), None = graph's own

    @property
    def identity(self) -> bool:
        return self.image.size == self.graph.n and not self.carrier.any() and self.depth is None

    def priorities(self, priorities: np.ndarray) -> np.ndarray:
        """Node priorities from op priorities: a node's highest member's; carriers go first when ready."""
        if self.identity:
            return priorities
        prio = np.full(self.graph.n, -np.inf)
        np.maximum.at(prio, self.image, priorities)
        prio[self.carrier] = TENSOR_FIRST
        return prio

    def lift(self, assign: np.ndarray) -> np.ndarray:
        """Op -> device from node -> device."""
        return np.asarray(assign)[self.image]


def forward_projection(graph: Graph, cluster: Cluster) -> Projection:
    """The graph to slice: a training graph's forward supernode DAG, each node carrying its backward ops.

    Slicing one topological order of a training graph puts a forward op and its colocated
    backward partner at the two ends of the order, so a colocation group spans nearly all of
    it. Instead, as the DP over ideals does (Tarnawski App. B, §5.3), :func:`.contract.contract`
    maps every op to a forward supernode; a node's work and memory are its members' sums
    (forward + backward), so a stage's load is ``FW + BW``. Tensors: the tensor of op ``u``
    touches the nodes ``N = {image(u)} ∪ image(succ(u))`` and, cut, costs its size once on
    every stage touching ``N`` (out on the producer's stage, in on the others). The projected
    graph gives it to ``min(N)``, the first of them in every order, with edges to the rest of
    ``N`` (extra order constraints, never a wrong cost); tensors with the same ``N`` are summed,
    and a node's second and further tensors hang on zero-work *carriers* colocated with it.
    With full-duplex overlap (in and out on separate links) a backward tensor's out is charged
    as an in: the slicing's value is then approximate, the reported objective is exact.
    """
    if not graph.is_training:
        return Projection(graph, np.arange(graph.n), np.zeros(graph.n, bool))
    kinds = sorted({d.kind for d in cluster.devices})
    con = contract(graph, kinds=kinds, memory=float(min(d.memory for d in cluster.devices)))
    ops, edges, image, carrier, depth = _projected_ops(graph, con, kinds)
    projected = Graph(ops, edges, name=f"{graph.name} (forward projection)")
    return Projection(projected, image, np.asarray(carrier, bool), np.asarray(depth, np.int64))


def _node_tensors(graph: Graph, con: Contraction) -> list[list[tuple[tuple[int, ...], float]]]:
    """Per node ``h``: the tensors it hosts, as (other nodes touched, bytes), summed per node set."""
    img = con.image
    agg: dict[tuple[int, ...], float] = {}
    for u in np.flatnonzero(graph.out_bytes > 0):
        nodes = tuple(sorted(set(img[graph.successors(u)].tolist()) | {int(img[u])}))
        if len(nodes) > 1:
            agg[nodes] = agg.get(nodes, 0.0) + float(graph.out_bytes[u])
    hosted: list[list[tuple[tuple[int, ...], float]]] = [[] for _ in range(con.n_nodes)]
    for nodes, size in sorted(agg.items()):
        hosted[nodes[0]].append((nodes[1:], size))
    return hosted


def _projected_ops(graph: Graph, con: Contraction, kinds: list[str]):
    """Ops and edges of the projected graph (each node followed by its carriers), in node order."""
    n = con.n_nodes
    work = {k: np.bincount(con.image, weights=graph.work(k), minlength=n) for k in kinds}
    param = np.bincount(con.image, weights=graph.param_bytes, minlength=n)
    act = np.bincount(con.image, weights=graph.activation_bytes, minlength=n)
    fw_depth = np.zeros(n, dtype=np.int64)
    for a, b in sorted(zip(con.src.tolist(), con.dst.tolist())):  # src < dst: a topological sweep
        fw_depth[b] = max(fw_depth[b], fw_depth[a] + 1)
    name = [f"node{x}" for x in range(n)]
    ops, edges, carrier, depth = [], [], [], []
    index = np.empty(n, dtype=np.int64)
    for x, tensors in enumerate(_node_tensors(graph, con)):
        allowed = {k: float(w[x]) for k, w in work.items() if np.isfinite(w[x])}
        if not allowed:
            raise InfeasibleError(f"ops {[graph.names[i] for i in con.members(x)][:4]} must share a device but "
                                  f"no device kind runs all of them; give them work on a common kind")
        index[x] = len(ops)
        first = tensors[0] if tensors else ((), 0.0)
        ops.append(Op(name=name[x], work=allowed, param_bytes=float(param[x]), activation_bytes=float(act[x]),
                      out_bytes=first[1], group=name[x]))
        carrier.append(False)
        depth.append(fw_depth[x])
        edges += [(name[x], name[y]) for y in first[0]]
        for t, (others, size) in enumerate(tensors[1:]):
            c = f"{name[x]}.t{t}"
            ops.append(Op(name=c, work={k: 0.0 for k in allowed}, out_bytes=size, group=name[x]))
            carrier.append(True)
            depth.append(fw_depth[x])
            edges += [(name[x], c)] + [(c, name[y]) for y in others]
    edges += [(name[a], name[b]) for a, b in zip(con.src.tolist(), con.dst.tolist())]
    return ops, list(dict.fromkeys(edges)), index[con.image], carrier, depth
