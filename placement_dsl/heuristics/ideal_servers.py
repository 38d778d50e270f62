"""The DP over ideals on a hierarchical cluster (Tarnawski et al. App. C.3): servers, then accelerators.

On a cluster of ``S`` servers of ``P`` accelerators (:meth:`~placement_dsl.cluster.Cluster.hierarchical`,
servers consecutive in pipeline order) a transfer is priced at the bandwidth of its route: ``intra``
inside a server, ``inter`` between servers (:func:`placement_dsl.replication.routed_transfers`). A
stage's cost therefore depends on which of its neighbours share its server, which a single DP over
ideals does not know. In a DAG-ordered split each server holds an ideal difference ``G = I \\ J``
(the devices are server-major), and each of its accelerators an ideal difference ``S = I' \\ J'``
with ``J ⊆ J' ⊆ I' ⊆ I``; knowing ``G`` prices every tensor of ``S``:

* received (producer outside ``S``): ``bytes / intra`` if the producer is in ``G``, else ``/ inter``;
* sent (producer in ``S``, a consumer outside): once, at the slowest route to its consumers —
  ``/ intra`` for consumers in ``G \\ S``, ``/ inter`` for consumers outside ``G``.

Two nested DPs follow (App. C.3's recurrence with the cost model's prices)::

    H(J, I)     = h_{J,I}[I][P],   h[I'][p] = min(h[I'][p-1], min_{J ⊆ J' ⊊ I'} max(h[J'][p-1], cost(I' \\ J' | G)))
    F[I][s]     = min(F[I][s-1], min_{J ⊊ I} max(F[J][s-1], H(J, I))),    answer F[V][S]

(empty accelerators and servers allowed). It is exact over the DP class (forward-contiguous,
DAG-ordered splits, colocation kept, hard memory) on a hierarchical cluster without replication or
memory per schedule. Every pair of ideals gets an inner DP over the ideals between them, so the
cost grows as the fourth power of the lattice (about ``N^4 P / 12`` steps for ``N`` ideals, :func:`sized_ideals`):
the DP takes the graphs whose ideals it can finish in the time left; :mod:`.pipeline_dp` covers larger ones along
the DFS order.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..cluster import Cluster
from ..errors import InfeasibleError, SpecError
from ..evaluate import REL_TOL, CostModel, MemoryMode, Objective, Overlap, evaluate
from ..graph import Graph
from ..placement import Placement
from ..structure import count_ideals
from . import ideal_kernels as K
from . import manifest
from .base import DP_CLASS, HeuristicResult, TimeLimitReached, deadline_at, dp_claim, expired, left
from .contract import contract
from .fallback import fallback
from .ideal_lattice import device_classes, ideal_lattice, node_costs, tensor_sets
from .pipeline_dp import layout
from .registry import heuristic

INF = math.inf
STEPS_PER_SECOND = 7e5  # inner-DP steps (N^4 P / 12) per CPU second: chains of 30-60 ops on 3 x 2 devices ran
# 0.75-1.0e6 at load 7 (ResNet-152's 221 ideals on 2 per server are 4e8 steps: about 10 minutes)
UNLIMITED_SECONDS = 600.0  # without a time limit, the DP takes the graphs it finishes in about this long


def sized_ideals(per_server: int, seconds: float | None) -> int:
    """The most ideals whose DP (about ``N^4 P / 12`` inner steps for ``N`` ideals and ``P`` accelerators per
    server: every pair of comparable ideals, an inner DP over the ideals between them) finishes in ``seconds``
    (``None``: :data:`UNLIMITED_SECONDS`) at :data:`STEPS_PER_SECOND`; at least 2 (the empty ideal and the graph).

    >>> sized_ideals(2, 10.0) < sized_ideals(2, 600.0) == sized_ideals(2, None)
    True
    """
    seconds = UNLIMITED_SECONDS if seconds is None else max(float(seconds), 0.0)
    return max(int((12.0 * STEPS_PER_SECOND * seconds / max(per_server, 1)) ** 0.25), 2)


def _as_ints(rows: np.ndarray) -> list[int]:
    """Bitset rows (uint64 words, little-endian) as Python integers."""
    return [int.from_bytes(r.tobytes(), "little") for r in rows]


class _Lattice:
    """The ideals as integer bitsets, their sums, the tensors and the route prices."""

    def __init__(self, graph: Graph, cluster: Cluster, model: CostModel, max_ideals: int | None,
                 deadline: float | None = None):
        first = cluster.devices[0]
        self.con = contract(graph, kinds={first.kind}, memory=first.memory, merge_zero_cost=False)
        lay = layout(cluster)
        cap = max_ideals if max_ideals is not None else sized_ideals(lay.devices.shape[1], left(deadline))
        why = "" if max_ideals is not None else \
            f" (the DP of more ideals takes longer than {UNLIMITED_SECONDS:.0f} s; give max_ideals to wait longer)"
        pred: list[list[int]] = [[] for _ in range(self.con.n_nodes)]
        for u, v in zip(self.con.src.tolist(), self.con.dst.tolist()):
            pred[v].append(u)
        counted = count_ideals(pred, cap=cap)[0]
        if counted > cap and max_ideals is None and deadline is not None:  # the time left is short: a stopped answer
            raise TimeLimitReached(f"the DP of more than {cap} ideals takes longer than the {left(deadline):.1f} s left")
        if counted > cap:
            raise SpecError(f"dp-servers: graph {graph.name!r} has more than max_ideals={cap} ideals "
                            f"({self.con.n_nodes} supernodes){why}; use method 'pipeline'")
        self.lat = ideal_lattice(self.con, cap, deadline)
        self.masks = _as_ints(self.lat.ideals)
        work, unsup, mem, _ = node_costs(self.con, device_classes(cluster)[:1])
        sums = K.ideal_sums(self.lat.ideals, np.column_stack([work[0], unsup[0], mem]))
        self.work, self.unsup, self.mem = sums[:, 0], np.rint(sums[:, 1]), sums[:, 2]
        tmask, towner, tcost, _, _ = tensor_sets(self.con)
        self.tensors = [(m, 1 << int(o), float(b)) for m, o, b in zip(_as_ints(tmask), towner, tcost)]
        self.servers, self.intra, self.inter = lay.devices, 1.0 / lay.intra, 1.0 / lay.inter
        self.cap = first.memory * (1 + REL_TOL)
        self.overlap = model.overlap

    def within(self, lo: int, hi: int) -> list[int]:
        """Ideals ``x`` with ``lo ⊆ x ⊆ hi`` (by id: sub-ideals first)."""
        a, b = self.masks[lo], self.masks[hi]
        return [x for x in range(lo, hi + 1) if self.masks[x] & a == a and self.masks[x] & ~b == 0]

    def cost(self, jp: int, ip: int, group: int) -> float:
        """Load of the stage ``I' \\ J'`` on an accelerator of the server holding ``group``."""
        if self.unsup[ip] != self.unsup[jp] or self.mem[ip] - self.mem[jp] > self.cap:
            return INF
        stage = self.masks[ip] & ~self.masks[jp]
        t_in = t_out = 0.0
        for nodes, owner, size in self.tensors:
            if not nodes & stage:
                continue
            if owner & stage:
                rate = max(self.intra if nodes & group & ~stage else 0.0, self.inter if nodes & ~group else 0.0)
                t_out += size * rate
            else:
                t_in += size * (self.intra if owner & group else self.inter)
        comp = self.work[ip] - self.work[jp]
        if self.overlap is Overlap.NONE:
            return comp + t_in + t_out
        if self.overlap is Overlap.HALF:
            return max(comp, t_in + t_out)
        return max(comp, t_in, t_out)


def _inner(lt: _Lattice, j: int, i: int, per: int) -> tuple[float, dict]:
    """Best split of the server segment ``I \\ J`` onto ``per`` accelerators, with back-links."""
    group = lt.masks[i] & ~lt.masks[j]
    ids = lt.within(j, i)
    h = {x: [INF] * (per + 1) for x in ids}
    back: dict[tuple[int, int], int] = {}
    h[j] = [0.0] * (per + 1)
    for x in ids[1:]:
        below = [y for y in ids if y != x and lt.masks[y] & ~lt.masks[x] == 0]
        costs = {y: lt.cost(y, x, group) for y in below}
        for p in range(1, per + 1):
            best, arg = h[x][p - 1], -1
            for y in below:
                cand = max(h[y][p - 1], costs[y])
                if cand < best:
                    best, arg = cand, y
            h[x][p] = best
            back[(x, p)] = arg
    return h[i][per], back


def _inner_stages(lt: _Lattice, j: int, i: int, per: int, back: dict) -> list[tuple[int, int]]:
    """The chosen accelerators' stages ``(J', I')`` of one server, in pipeline order (``None`` empty)."""
    out: list[tuple[int, int] | None] = []
    x, p = i, per
    while p > 0:
        y = back.get((x, p), -1) if x != j else -1
        out.append(None if y == -1 else (y, x))
        x = x if y == -1 else y
        p -= 1
    return out[::-1]


@heuristic("dp-servers", optimizes="max_load", options=manifest.DpServers)
def dp_servers(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
               max_ideals: int | None = None, time_limit: float | None = None) -> HeuristicResult:
    """The exact DP over ideals on a hierarchical cluster (Tarnawski App. C.3; module docstring).

    ``bound == objective`` over the DP class under a max-load model (PipeDream's ``max (FW + BW)``
    for training graphs, App. B's contraction); refuses replication, memory per schedule, soft
    memory and flat clusters (use ``dp`` there). A graph of more than ``max_ideals`` ideals is refused; ``None``:
    :func:`sized_ideals` of the time left, and a graph of more ideals than the DP finishes in it gets the answer of a
    DP stopped by the time limit. Past ``time_limit`` seconds (checked per ideal) :func:`.fallback.fallback`'s
    split, without a bound (``info["stopped"]``).

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name=n, work=4, out_bytes=8) for n in "abc"], [("a", "b"), ("b", "c")])
    >>> r = dp_servers(g, Cluster.hierarchical(2, 2, intra=8.0, inter=1.0))
    >>> r.objective, r.bound  # a | b c, both on server 0: c on server 1 would take 8 bytes at inter
    (9.0, 9.0)
    """
    del seed
    start = time.perf_counter()
    at = deadline_at("dp-servers", time_limit)
    model = model or CostModel()
    if not cluster.routed:
        raise SpecError("dp-servers: the cluster has no servers; use method 'dp' (Cluster.hierarchical for servers)")
    if model.memory is not MemoryMode.HARD or model.training_memory is not None:
        raise SpecError("dp-servers: counts hard memory of the ops only; for memory per schedule or overflow use "
                        "method 'pipeline'")
    try:
        lt = _Lattice(graph, cluster, model, max_ideals, at)
    except TimeLimitReached as err:
        return fallback("dp-servers", graph, cluster, model, str(err), start)
    S, P = lt.servers.shape
    N = lt.lat.count
    pairs = {}
    F = [[INF] * (S + 1) for _ in range(N)]
    F[0] = [0.0] * (S + 1)
    back = {}
    for i in range(1, N):
        if expired(at):
            return fallback("dp-servers", graph, cluster, model, f"the DP at ideal {i} of {N}", start)
        subs = [j for j in range(i) if lt.masks[j] & ~lt.masks[i] == 0]
        for s in range(1, S + 1):
            best, arg = F[i][s - 1], -1
            for j in subs:
                if F[j][s - 1] >= best:
                    continue
                if (j, i) not in pairs:
                    pairs[(j, i)] = _inner(lt, j, i, P)
                cand = max(F[j][s - 1], pairs[(j, i)][0])
                if cand < best:
                    best, arg = cand, j
            F[i][s], back[(i, s)] = best, arg
    if not math.isfinite(F[N - 1][S]):
        raise InfeasibleError(f"dp-servers: no contiguous split of graph {graph.name!r} fits the cluster's memory "
                              "respecting colocation; add devices or memory")
    node_device = np.full(lt.con.n_nodes, -1, dtype=np.int64)
    i, s = N - 1, S
    while i != 0:
        j = back[(i, s)]
        if j != -1:
            stages = _inner_stages(lt, j, i, P, pairs[(j, i)][1])
            for p, stage in enumerate(stages):
                if stage is not None:
                    nodes = lt.lat.nodes(stage[1])
                    node_device[np.setdiff1d(nodes, lt.lat.nodes(stage[0]))] = lt.servers[s - 1, p]
            i = j
        s -= 1
    placement = Placement(graph, cluster, lt.con.lift(node_device), source="dp-servers")
    objective = evaluate(placement, model).objective
    info = {"ideals": N, "pairs": len(pairs), "dp_value": float(F[N - 1][S])}
    unseen = dp_claim(info["dp_value"], objective) if model.objective is Objective.MAX_LOAD else None
    if unseen:
        info["no_bound"] = unseen
    bound = objective if model.objective is Objective.MAX_LOAD and not unseen else None
    return HeuristicResult(method="dp-servers", placement=placement, objective=objective,
                           seconds=time.perf_counter() - start, bound=bound,
                           exact_among=DP_CLASS if bound is not None else None, evaluations=len(pairs), info=info)
