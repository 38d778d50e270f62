"""The pipeline planner: an exact DP for training pipelines with replication, servers and memory per schedule.

Class of placements (``exact_among`` :data:`CLASS`): the supernodes of the contracted forward
DAG (:func:`.contract.contract`, Tarnawski App. B) in one topological order — the DFS order of
DPL (§5.1.2) unless given — are cut into stages of consecutive positions. On a cluster of
``S`` servers of ``P`` identical devices (:meth:`~placement_dsl.cluster.Cluster.hierarchical`;
a flat cluster is one server) the stages form *segments*, one per group of ``m`` consecutive
servers: every server of the group runs the segment's pipeline, so each stage is replicated
``m`` times across servers and ``r`` times inside a server (``R = r m`` replicas,
App. C.2). This is the class of PipeDream's hierarchical planner (App. C.3; see
:mod:`.pipedream_planner`) along the same order, so its configurations are never better
under the cost model this DP minimizes exactly.

Recurrences (suffix form, so a stage knows how many stages follow it). For a segment
``[a, b)`` on ``m`` servers::

    H[x][p][q] = min over y > x, 1 <= r <= p of max(H[y][p - r][q - 1], load(x, y; a, b, r m, q))
    F[a][s]    = min over b > a, m <= s of max(F[b][s - m], min_q H_{a,b,m}[a][P][q])

with ``H[b][.][0] = 0``, ``F[n][0] = 0``, the answer ``min_s F[0][s]``. ``load`` is the cost
model's (:mod:`placement_dsl.evaluate`): compute plus transfers combined by the overlap mode,
divided by ``R``, plus the ring all-reduce ``2 (R-1)/R * param / B_ring`` (``B_ring`` = inter
if ``m > 1``); transfers inside the segment at the intra-server bandwidth, across segments at
the inter-server one (a flat cluster: the devices' bandwidth through host memory). Memory per
replica is hard: ``param + act`` of the stage, or per schedule
(:class:`~placement_dsl.training.TrainingMemorySpec`): 1F1B's ``q`` stages in flight are
why ``q`` is tracked, only then: ``F[a][s]`` becomes a vector over ``q`` (stages from ``a`` to the
end) and each segment's inner DP starts from the vector of what follows it, so ``q`` counts to
the pipeline's end across servers.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..deprecated import moved
from ..errors import InfeasibleError, SpecError
from ..evaluate import REL_TOL, CostModel, MemoryMode, Overlap
from ..graph import Graph
from ..pipeline_orders import ORDERS
from ..placement import Placement
from . import pipeline_kernels as K
from .base import TimeLimitReached, expired
from .contract import Contraction, contract
from .ideal_lattice import dfs_order

__getattr__ = moved(__name__, {"pipeline": "placement_dsl.heuristics.pipeline"})

CLASS = "pipelines along the DFS order with replicated stages and server segments"
_MODES = {Overlap.NONE: K.NONE, Overlap.HALF: K.HALF, Overlap.FULL: K.FULL}
_SPECS = {None: K.NO_SPEC, "1f1b": K.ONE_F_ONE_B, "gpipe": K.GPIPE}


# ---------------------------------------------------------------------------- the cluster as servers
@dataclass(frozen=True)
class Layout:
    """``servers`` x ``per_server`` identical devices (``devices[s, j]``), two bandwidths."""

    devices: np.ndarray
    intra: float
    inter: float

    @property
    def servers(self) -> int:
        return int(self.devices.shape[0])

    @property
    def per_server(self) -> int:
        return int(self.devices.shape[1])


def layout(cluster: Cluster) -> Layout:
    """The cluster as servers of identical devices; :class:`SpecError` naming what differs otherwise."""
    first = cluster.devices[0]
    odd = [d.name for d in cluster.devices if (d.kind, d.memory, d.speed, d.host) != (first.kind, first.memory,
                                                                                      first.speed, first.host)]
    if odd or first.host:
        raise SpecError(f"pipeline: needs identical accelerators; devices {odd or [first.name]} differ in kind, "
                        "memory or speed, or are host devices")
    if not cluster.routed:
        if len({d.bandwidth for d in cluster.devices}) > 1:
            raise SpecError("pipeline: the devices' bandwidths differ; give them one bandwidth")
        return Layout(np.arange(cluster.size)[None, :], first.bandwidth, first.bandwidth)
    server = cluster.servers
    sizes = np.bincount(server[server >= 0])
    if (server < 0).any() or len(set(sizes.tolist())) > 1 or (np.diff(server) < 0).any():
        raise SpecError(f"pipeline: servers must be consecutive in device order and of one size; sizes are "
                        f"{sizes.tolist()}")
    bw = cluster.route_bandwidth
    same = server[:, None] == server[None, :]
    off = ~np.eye(cluster.size, dtype=bool)
    levels = [np.unique(bw[mask]) for mask in (same & off, ~same)]
    if any(v.size > 1 for v in levels):
        raise SpecError(f"pipeline: needs one bandwidth inside servers and one between them, got "
                        f"{[v.tolist() for v in levels]}")
    intra = float(levels[0][0]) if levels[0].size else first.bandwidth
    inter = float(levels[1][0]) if levels[1].size else intra
    return Layout(np.arange(cluster.size).reshape(len(sizes), -1), intra, inter)


# ---------------------------------------------------------------------------- the chain of positions
@dataclass(frozen=True)
class Chain:
    """Per-position prefix sums and the tensors between positions (see :mod:`.pipeline_kernels`)."""

    order: np.ndarray  # position -> supernode
    comp: np.ndarray  # prefix sums: compute time (forward + backward), parameters, param + act, stashed act
    param: np.ndarray
    memnode: np.ndarray
    act: np.ndarray
    tensors: tuple[np.ndarray, ...]  # owner, bytes, forward, min consumer, max consumer, consumer count
    incidence: tuple[np.ndarray, ...]  # produced-by CSR, consumed-by CSR
    consumers: tuple[np.ndarray, np.ndarray]  # tensor -> sorted consumer positions (CSR)

    @property
    def n(self) -> int:
        return len(self.order)


def _prefix(values: np.ndarray) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(values)])


def _csr(keys: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, values[order].astype(np.int64)


MAX_PAIR_TABLE_BYTES = 4 * 2**30  # the chain DPs' tables over pairs of positions; beyond this they decline the graph


def check_pair_tables(method: str, positions: int, bytes_per_pair: int) -> None:
    """:class:`SpecError` before a chain DP allocates tables over all pairs of its ``positions`` when they pass
    :data:`MAX_PAIR_TABLE_BYTES` (a long chain: the DP over ideals or SliceGraph handle it in linear memory)."""
    check_tables(method, positions, float(positions) ** 2 * bytes_per_pair)


def check_tables(method: str, positions: int, need: float) -> None:
    """:class:`SpecError` when a chain DP's tables over ``positions`` take ``need`` bytes, above
    :data:`MAX_PAIR_TABLE_BYTES`."""
    if need > MAX_PAIR_TABLE_BYTES:
        raise SpecError(f"{method}: the graph's {positions} positions along its DFS order need {need / 2**30:.1f} GiB "
                        f"of tables over pairs of positions, above the limit of {MAX_PAIR_TABLE_BYTES / 2**30:.1f} GiB; "
                        "use method 'slicegraph' or 'dp', or coarsen the graph")


def pipeline_table_bytes(positions: int, lay: Layout) -> float:
    """The bytes the pipeline DP's tables take over ``positions``: on one server, :func:`.pipeline_kernels.segment_tables`'
    five tables over pairs of positions (kept) and the in and out times of the one segment (copies at the
    bandwidth), 56 bytes a pair; on several servers each segment's tables and inner DP besides, as
    ``24 (P + 1) + 48`` bytes a pair. The inner DP's own tables are ``O(positions * P)``."""
    per_pair = 7 * 8 if lay.servers == 1 else 24 * (lay.per_server + 1) + 48
    return float(positions) ** 2 * per_pair


def chain_data(con: Contraction, order: np.ndarray, cluster: Cluster) -> Chain:
    """Positions of ``order`` (supernodes) with their costs on the cluster's device kind."""
    g, d = con.graph, cluster.devices[0]
    pos_of_node = np.empty(con.n_nodes, dtype=np.int64)
    pos_of_node[order] = np.arange(len(order))
    pos = pos_of_node[con.image]
    work = g.work(d.kind) / d.speed
    if not np.isfinite(work).all():
        bad = [g.names[i] for i in np.flatnonzero(~np.isfinite(work))[:5]]
        raise SpecError(f"pipeline: ops {bad} cannot run on device kind {d.kind!r}")
    n = len(order)
    fw = ~g.backward

    def per_position(values: np.ndarray) -> np.ndarray:
        return _prefix(np.bincount(pos, weights=values, minlength=n))

    kept, flat, sizes = consumer_positions(g, pos, n)
    T = len(kept)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if T else np.zeros(0, np.int64)
    tensors = (pos[kept].astype(np.int64), g.out_bytes[kept].astype(float), fw[kept].astype(bool),
               flat[starts] if T else np.zeros(0, np.int64),
               flat[starts + sizes - 1] if T else np.zeros(0, np.int64), sizes)
    which = np.repeat(np.arange(T), sizes) if T else np.zeros(0, np.int64)
    incidence = (*_csr(tensors[0], np.arange(T), n), *_csr(flat.astype(np.int64), which, n))
    consumers = (np.concatenate([[0], np.cumsum(tensors[5])]).astype(np.int64), flat.astype(np.int64))
    return Chain(order, per_position(work), per_position(g.param_bytes),
                 per_position(g.param_bytes + g.activation_bytes),
                 per_position(np.where(fw, g.out_bytes + g.activation_bytes, 0.0)), tensors, incidence, consumers)


def consumer_positions(g: Graph, pos: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ops with output bytes consumed at another position (ascending), the consumers' distinct positions other
    than the producer's (ascending per op, concatenated) and their counts: whole-array steps over the edges, not a
    ``setdiff1d`` per op (3 s of the set-up at 2,000 ops on a loaded machine)."""
    counts = np.diff(g.succ_ptr)
    src = np.repeat(np.arange(g.n, dtype=np.int64), counts)
    at = pos[g.succ_idx].astype(np.int64)
    keep = (g.out_bytes[src] > 0) & (at != pos[src])
    pair = np.unique(src[keep] * np.int64(n) + at[keep])  # sorted by op, then by position
    ops, where = pair // n, pair % n
    kept, sizes = np.unique(ops, return_counts=True)
    return kept.astype(np.int64), where.astype(np.int64), sizes.astype(np.int64)


# ---------------------------------------------------------------------------- the DP
@dataclass
class _Planner:
    chain: Chain
    lay: Layout
    model: CostModel
    max_rep: int
    cap: float
    ub: float
    tables: dict[tuple[int, int], tuple[np.ndarray, ...]]
    replication: bool = True
    values: dict[tuple[int, int, int], float] = field(default_factory=dict)
    runs: int = 0
    base: tuple[np.ndarray, ...] | None = None
    kernel_at: float = math.inf  # the deadline the kernels read (solve's, while its DP runs)

    @property
    def track_q(self) -> int:
        """Stages the DP counts to the end (1F1B memory: ``k - s`` in flight), else 0."""
        spec = self.model.training_memory
        lay = self.lay
        return lay.per_server * lay.servers if spec is not None and spec.schedule == "1f1b" else 0

    def table(self, a: int, b: int) -> tuple[np.ndarray, ...]:
        """In time, out time, forward bytes in of the stages of segment ``[a, b)``: the chain's byte
        tables at the intra-server rate, plus the extra time of the bytes crossing the segment."""
        if (a, b) not in self.tables:
            c, lay = self.chain, self.lay
            if self.base is None:
                *base, done = K.segment_tables(0, c.n, *c.tensors[:5], c.tensors[5], *c.incidence, 1.0, 1.0, c.comp,
                                               self.ub, float(lay.per_server * lay.servers), self.kernel_at)
                if not done:
                    raise TimeLimitReached(f"pipeline: the time limit passed in the stages' transfer tables "
                                           f"({c.n} positions)")
                self.base = tuple(base)
            tin, tout, fin = (x[a:b + 1, a:b + 1] for x in self.base[:3])
            tin, tout = tin / lay.intra, tout / lay.intra
            if lay.inter != lay.intra:
                extra = 1.0 / lay.inter - 1.0 / lay.intra
                ein, eout = K.boundary_bytes(a, b, c.tensors[0], c.tensors[1], *c.consumers)
                tin, tout = tin + extra * ein, tout + extra * eout
            self.tables[a, b] = (np.ascontiguousarray(tin), np.ascontiguousarray(tout), np.ascontiguousarray(fin))
        return self.tables[a, b]

    def inner(self, a: int, b: int, m: int, init: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        c, lay, spec = self.chain, self.lay, self.model.training_memory
        init = np.zeros(1) if init is None else init
        self.runs += 1
        inv_ring = 1.0 / (lay.inter if m > 1 else lay.intra)
        *found, done = K.inner_dp(a, b, m, lay.per_server, self.track_q, c.comp, c.param, c.memnode, c.act,
                                  *self.table(a, b), _MODES[self.model.overlap], inv_ring, self.cap,
                                  _SPECS[None if spec is None else spec.schedule],
                                  1.0 if spec is None else spec.state_factor,
                                  0 if spec is None or spec.microbatches is None else int(spec.microbatches),
                                  bool(spec is not None and spec.recompute), self.max_rep, self.ub, init, self.kernel_at)
        if not done:
            raise TimeLimitReached(f"pipeline: the time limit passed in the DP of segment [{a}, {b})")
        return tuple(found)

    def segment_values(self, a: int, b: int, m: int, after: np.ndarray) -> np.ndarray:
        """Max-load of segment ``[a, b)`` on ``m`` servers followed by ``after`` (per stage count ``q``).

        Without stage counts a max chain splits: ``max(after, segment alone)``, the segment's value
        cached; with them the inner DP starts from ``after`` itself."""
        P = self.lay.per_server
        if not self.track_q:
            if (a, b, m) not in self.values:
                self.values[a, b, m] = float(self.inner(a, b, m)[0][0, P, 0])
            return np.maximum(after, self.values[a, b, m])
        return self.inner(a, b, m, after)[0][0, P]

    def solve(self, at: float | None = None) -> tuple[float, list[tuple[int, int, int, list[tuple[int, int, int]]]]]:
        """The outer DP over server segments: value and segments ``(a, b, m, stages)`` in pipeline order;
        :class:`~.base.TimeLimitReached` once ``time.monotonic()`` passes ``at`` (read before every segment)."""
        self.kernel_at = math.inf if at is None else float(at)  # the kernels read the clock too (a segment's DP and
        # its tables: 6 s at 5,089 positions)
        n, S, Q = self.chain.n, self.lay.servers, self.track_q + 1
        F = np.full((n + 1, S + 1, Q), math.inf)
        F[n, 0, 0] = 0.0
        choice: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
        for a in range(n - 1, -1, -1):
            for s in range(1, S + 1):
                if a > 0 and s >= S:
                    continue  # no server is left for what comes before a
                best_b, best_m = np.full(Q, -1), np.zeros(Q, dtype=np.int64)
                for m in range(1, (s if self.replication else 1) + 1):
                    for b in np.flatnonzero(np.isfinite(F[a + 1:, s - m]).any(axis=1)) + a + 1:
                        if expired(at):
                            raise TimeLimitReached(f"pipeline: the time limit passed in the DP over segments, at "
                                                   f"position {a} of {n}")
                        values = self.segment_values(a, int(b), m, F[b, s - m])
                        better = values < F[a, s]
                        F[a, s, better], best_b[better], best_m[better] = values[better], b, m
                choice[a, s] = (best_b, best_m)
        self.kernel_at = math.inf  # the read-back re-runs the chosen segments' DPs: the answer is found, keep it
        s, q = np.unravel_index(int(np.argmin(F[0])), F[0].shape)
        value = float(F[0, s, q])
        if not np.isfinite(value):
            return math.inf, []
        segments, a = [], 0
        while a < n:
            b, m = int(choice[a, s][0][q]), int(choice[a, s][1][q])
            stages, q_after = self.stages(a, b, m, F[b, s - m], q)
            segments.append((a, b, m, stages))
            a, s, q = b, s - m, q_after
        return value, segments

    def stages(self, a: int, b: int, m: int, after: np.ndarray | None = None,
               q: int | None = None) -> tuple[list[tuple[int, int, int]], int]:
        """Backtrack one segment from ``q`` stages to the end: stages ``(x, y, r)`` and the ``q`` after it."""
        H, back_y, back_r = self.inner(a, b, m, after if self.track_q else None)
        P = self.lay.per_server
        x, p, q = 0, P, (int(np.argmin(H[0, P])) if q is None or not self.track_q else q)
        out = []
        while x < b - a:
            y, r = int(back_y[x, p, q]), int(back_r[x, p, q])
            out.append((a + x, a + y, r))
            x, p, q = y, p - r, (q - 1 if self.track_q else 0)
        return out, q


def placement_of(con: Contraction, chain: Chain, lay: Layout, cluster: Cluster,
                 plan: list[tuple[int, int, int, list[tuple[int, int, int]]]], source: str) -> Placement:
    """Segments on consecutive server groups, stages on consecutive devices of each server of the group."""
    node_device = np.full(con.n_nodes, -1, dtype=np.int64)
    replicas: dict[str, list[str]] = {}
    server = 0
    for _, _, m, stages in plan:
        offset = 0
        for x, y, r in stages:
            group = [int(lay.devices[s, offset + i]) for s in range(server, server + m) for i in range(r)]
            node_device[chain.order[x:y]] = group[0]
            if len(group) > 1:
                replicas[cluster.names[group[0]]] = [cluster.names[d] for d in group]
            offset += r
        server += m
    return Placement(con.graph, cluster, con.lift(node_device), source=source, replicas=replicas or None)


def build_planner(graph: Graph, cluster: Cluster, model: CostModel, replication: bool, order: np.ndarray | None,
                  upper_bound: float | None, max_replicas: int | None = None, method: str = "pipeline",
                  tables: Callable[[int, Layout], float] = pipeline_table_bytes) -> tuple[Contraction, Chain, _Planner]:
    """The contraction, the chain and the DP of ``method``, refused (:func:`check_tables`) when the bytes its tables
    take over the chain's positions (``tables``) pass the limit."""
    if model.memory is not MemoryMode.HARD:
        raise SpecError("pipeline: memory must be hard (the DP checks capacity per replica); drop the overflow mode")
    if model.training_memory is not None and model.name in ORDERS and model.microbatches is not None:
        raise SpecError(f"pipeline: memory per schedule under {model.name!r} with microbatches={model.microbatches} "
                        "holds micro-batches as torch's order does, which this DP does not count (it counts 1F1B's "
                        "and GPipe's); use method 'dp'")
    lay = layout(cluster)
    con = _contracted(graph, cluster, replication)
    if order is None:
        order = dfs_order(con)
    per_server = min(lay.per_server, max_replicas or lay.per_server)
    check_tables(method, len(order), tables(len(order), lay))
    chain = chain_data(con, np.asarray(order, dtype=np.int64), cluster)
    ub = math.inf if upper_bound is None else upper_bound * (1 + 1e-9) + 1e-12
    planner = _Planner(chain, lay, model, per_server if replication else 1,
                       cluster.devices[0].memory * (1 + REL_TOL), ub, {}, replication)
    return con, chain, planner


def _contracted(graph: Graph, cluster: Cluster, replication: bool) -> Contraction:
    """The contracted forward DAG whose supernodes are the chain's positions."""
    kind = cluster.devices[0].kind  # a zero-work leaf's parameters would join its neighbour's all-reduce
    merge = not (replication and ((graph.work(kind) == 0.0) & (graph.param_bytes > 0)).any())
    return contract(graph, kinds={kind}, memory=cluster.devices[0].memory, merge_zero_cost=merge)


def check_pipeline_tables(graph: Graph, cluster: Cluster, replication: bool) -> None:
    """:func:`check_tables` of the pipeline DP before anything runs (the planner that gives its bound takes
    seconds at 20,000 ops): the graph is contracted only when its ops alone could pass the limit."""
    lay = layout(cluster)
    if pipeline_table_bytes(graph.n, lay) > MAX_PAIR_TABLE_BYTES:
        positions = _contracted(graph, cluster, replication).n_nodes
        check_tables("pipeline", positions, pipeline_table_bytes(positions, lay))


def plan(graph: Graph, cluster: Cluster, model: CostModel, *, replication: bool = True,
         order: np.ndarray | None = None, upper_bound: float | None = None,
         max_replicas: int | None = None, deadline: float | None = None) -> tuple[Placement, dict[str, Any]]:
    """The optimal placement of the class and the DP's facts (value, segments, stages, runs);
    :class:`~.base.TimeLimitReached` once ``time.monotonic()`` passes ``deadline``."""
    con, chain, planner = build_planner(graph, cluster, model, replication, order, upper_bound, max_replicas)
    value, segments = planner.solve(deadline)
    if not segments and upper_bound is not None:  # the bound was below the optimum: solve without it
        planner.ub, planner.tables, planner.base, planner.values = math.inf, {}, None, {}
        value, segments = planner.solve(deadline)
    if not segments:
        raise InfeasibleError(f"pipeline: no pipeline of graph {graph.name!r} along the order fits the cluster "
                              f"({cluster.size} devices of memory {cluster.devices[0].memory:.6g}); add devices or "
                              "memory, or count memory differently")
    full = segments
    placement = placement_of(con, chain, planner.lay, cluster, full, "pipeline")
    info = {"dp_value": value, "positions": chain.n, "segment_runs": planner.runs, "upper_bound": upper_bound,
            "segments": [{"positions": [a, b], "servers": m,
                          "stages": [{"positions": [x, y], "replicas_per_server": r} for x, y, r in st]}
                         for a, b, m, st in full]}
    return placement, info
