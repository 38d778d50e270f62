"""Iterated local search from a given split, for the max-load objective without contiguity.

:func:`polish` (method ``"polish"``) starts from a placement (by default the DP's contiguous
split), runs Tarnawski §6's best single-group move (:func:`.baselines.group_moves`: max load
first, the sum of squared loads to leave its plateaus) to a local optimum, then repeatedly
*kicks* the incumbent — a random connected block of colocation units (a breadth-first ball
around a random unit of the most loaded device) moves to another device — and descends again,
keeping the result when its max load is lower. A non-contiguous split that beats the DP's
often differs from it by a few blocks traded between neighbouring stages, which is what the
kicks try. Every answer is re-checked by the cost model (:func:`.baselines.scored_result`).

The moves ignore structure: where the cost model requires it (``contiguous``, ``dag_order`` or
``acyclic`` among its ``require``, as :class:`~placement_dsl.constraints.Contiguous` and
:class:`~placement_dsl.constraints.DagOrder` make it), a descent's result is kept only when the
cost model finds it valid, so the answer stays valid whenever the start is (at worst the start:
polish declines to move, ``info["rejected"]`` counting the descents it dropped).

:func:`packed_start` is the other start: where the packing bound (:mod:`..bounds.packing`)
binds, the units too slow for a host are spread over the accelerators as its least-makespan
packing says (GNMT inference: the 24.78 output layer beside a 6.89 LSTM layer), the others
join a neighbour's device, and polish balances the rest.
"""
from __future__ import annotations

import time

import numpy as np

from ..bounds.packing import heavy_packing
from ..cluster import Cluster
from ..errors import PlacementError, SpecError
from ..evaluate import CostModel, MemoryMode, device_costs, evaluate
from ..graph import Graph
from ..placement import Placement
from . import manifest
from .base import HeuristicResult, deadline_at, expired, kernel_deadline, left, run, stopped
from .baselines import group_arrays, group_moves, max_load_model, scored_result
from .registry import heuristic
from .segments import OVERLAP_CODE


def unit_neighbours(graph: Graph, gid: np.ndarray) -> list[np.ndarray]:
    """Units adjacent to each unit through an edge of the graph."""
    nG = int(gid.max()) + 1 if gid.size else 0
    adj: list[set[int]] = [set() for _ in range(nG)]
    for v in range(graph.n):
        for u in graph.successors(v):
            a, b = int(gid[v]), int(gid[u])
            if a != b:
                adj[a].add(b)
                adj[b].add(a)
    return [np.array(sorted(s), dtype=np.int64) for s in adj]


_unit_neighbours = unit_neighbours  # the former name, kept for one release


def _kick(dev_g: np.ndarray, adj: list[np.ndarray], gtime: np.ndarray, loads: np.ndarray,
          rng: np.random.Generator, max_block: int) -> np.ndarray:
    """A breadth-first block of same-device units around a unit of the busiest device, moved elsewhere."""
    out = dev_g.copy()
    busiest = int(np.argmax(loads))
    pool = np.flatnonzero(dev_g == busiest)
    if pool.size == 0:
        return out
    seed = int(rng.choice(pool))
    size = int(rng.integers(1, max_block + 1))
    block, frontier = [seed], [seed]
    seen = {seed}
    while frontier and len(block) < size:
        nxt = []
        for g in frontier:
            for h in adj[g]:
                h = int(h)
                if h not in seen and dev_g[h] == busiest and len(block) < size:
                    seen.add(h)
                    block.append(h)
                    nxt.append(h)
        frontier = nxt
    targets = [d for d in range(gtime.shape[1]) if d != busiest and np.isfinite(gtime[block, d]).all()]
    if targets:
        out[block] = int(rng.choice(targets))
    return out


def packed_start(graph: Graph, cluster: Cluster) -> Placement | None:
    """The packing bound's packing of the units a host cannot run in time, each other unit on the device
    of a placed predecessor (else successor, else its fastest device); ``None`` where nothing is packed."""
    found = heavy_packing(graph, cluster)
    if found is None:
        return None
    gtime = group_arrays(graph, cluster)[4]
    _, gid = np.unique(graph.group_id, return_inverse=True)
    dev_g = np.full(gtime.shape[0], -1, dtype=np.int64)
    acc = np.flatnonzero(~cluster.host)
    for d, units in zip(acc, found[1]):
        for g in units:
            dev_g[g] = d if np.isfinite(gtime[g, d]) else acc[int(np.argmin(gtime[g, acc]))]
    for order, near in ((graph.topo, graph.predecessors), (graph.topo[::-1], graph.successors)):
        for v in order:
            if dev_g[gid[v]] < 0:
                placed = [int(dev_g[gid[u]]) for u in near(v) if dev_g[gid[u]] >= 0]
                ok = [d for d in placed if np.isfinite(gtime[gid[v], d])]
                if ok:
                    dev_g[gid[v]] = ok[0]
    alone = dev_g < 0
    dev_g[alone] = np.argmin(gtime[alone], axis=1)
    return Placement(graph, cluster, dev_g[gid], source="packed")


SEARCH_SECONDS = 20.0  # polish's time limit when none is given
STRUCTURE = frozenset({"contiguous", "dag_order", "acyclic"})
"""Cost-model checks the moves do not respect: under one of them a descent's result must pass the cost model."""


def _default_start(graph: Graph, cluster: Cluster, ml: CostModel, at: float | None) -> Placement:
    """The DP's split; where it has none (too many ideals: a transformer's heads side by side), the linearized
    DP's; else a greedy fill. GPT-3 at 2,044 ops onto 16 stages: greedy's 91.3 against dpl's 12.9."""
    for method in ("dp", "dpl"):
        try:
            return run(method, graph, cluster, model=ml, time_limit=left(at)).placement
        except PlacementError:
            continue
    return run("greedy", graph, cluster, model=ml).placement


@heuristic("polish", optimizes="max_load", options=manifest.Polish)
def polish(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
           start: Placement | None = None, kicks: int = 300, max_block: int = 12,
           time_limit: float | None = None) -> HeuristicResult:
    """Iterated single-group local search from ``start`` (default: the DP's split, else the linearized DP's) on max
    load.

    ``kicks`` perturbations of at most ``max_block`` units each, within ``time_limit`` seconds
    (``None``: :data:`SEARCH_SECONDS`; the default start's DP and every descent included, the best so
    far then with ``info["stopped"]``); the answer is never worse than ``start``. Under a model that
    requires structure (:data:`STRUCTURE`) only results the model finds valid replace the incumbent.
    """
    t0 = time.perf_counter()
    at = deadline_at("polish", SEARCH_SECONDS if time_limit is None else time_limit)
    ml = max_load_model(model)
    if start is None:
        start = _default_start(graph, cluster, ml, at)
    if start.graph.n != graph.n:
        raise SpecError(f"polish: the start places {start.graph.n} ops but the graph has {graph.n}")
    times, gid, gmem_idx, gptr, gtime = group_arrays(graph, cluster)
    mem_op = graph.param_bytes + graph.activation_bytes
    gmem = np.bincount(gid, weights=mem_op)
    hard = ml.memory is MemoryMode.HARD
    ovf = np.where((ml.memory is MemoryMode.OVERFLOW) & ~cluster.host, 1.0 / cluster.bandwidth, 0.0)
    args = (gid, gptr, gmem_idx, gtime, gmem, times, mem_op, graph.pred_ptr, graph.pred_idx, graph.succ_ptr,
            graph.succ_idx, graph.out_bytes, cluster.memory, hard, cluster.transfer_scale, ovf,
            OVERLAP_CODE[ml.overlap], 100_000, kernel_deadline(at), np.zeros(0, dtype=bool))
    first = np.asarray(start.assign, dtype=np.int64).copy()
    structured = bool(ml.require & STRUCTURE)
    rejected = 0

    def keeps(assign: np.ndarray) -> bool:
        return not structured or evaluate(Placement(graph, cluster, assign), ml).valid

    dev, value, moves = group_moves(first.copy(), *args)  # the kernel moves units in place
    best, best_value = dev.copy(), value
    if not keeps(best):
        rejected += 1
        best, best_value = first, evaluate(Placement(graph, cluster, first), ml).objective
    rng = np.random.default_rng(seed)
    adj = unit_neighbours(graph, gid)
    tried = 0
    while tried < kicks and not expired(at):
        tried += 1
        dev_g = np.empty(gptr.size - 1, dtype=np.int64)
        dev_g[gid] = best
        loads = np.array([r.load for r in device_costs(Placement(graph, cluster, best), ml)])
        kicked = _kick(dev_g, adj, gtime, loads, rng, max_block)[gid]
        if hard and (np.bincount(kicked, weights=mem_op, minlength=cluster.size) > cluster.memory * (1 + 1e-9)).any():
            continue
        dev, value, m = group_moves(kicked, *args)
        moves += m
        if value < best_value * (1 - 1e-12):
            if keeps(dev):
                best, best_value = dev.copy(), value
            else:
                rejected += 1
    extra = {"rejected": rejected} if structured else {}
    result = scored_result("polish", graph, cluster, model, best, t0, kicks=tried, moves=moves, max_load=best_value,
                           **extra)
    return stopped(result) if tried < kicks and expired(at) else result

