"""GPipe's objective ``max_d FW_d + max_d BW_d`` minimized exactly along one order (Tarnawski §5.3, App. A).

The max-load DPs minimize PipeDream's ``max_d (FW_d + BW_d)``; App. A argues that its optimum is
near GPipe's (within about 6 % in the paper's experiments) and notes that the IP can optimize
GPipe's objective instead. Along the DFS order of the pipeline planner (:mod:`.pipeline_dp`), on
a flat cluster of identical devices and without replication, GPipe's optimum is found by a
threshold DP: for a bound ``theta`` on every stage's forward load,

    G(theta) = min over splits with FW(stage) <= theta of max_stage BW(stage)

is a min-max DP over positions; the answer is ``min over theta of theta + G(theta)``, where only
stage forward loads are candidate thresholds, taken in increasing order from the first feasible
one (found by bisection) until ``theta + G(inf)`` reaches the best value found.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..cluster import Cluster
from ..errors import InfeasibleError, SpecError
from ..evaluate import REL_TOL, CostModel, MemoryMode, Objective, combine_loads, evaluate
from ..graph import Graph
from ..pipeline_orders import ORDERS
from . import manifest
from . import pipeline_kernels as K
from .base import HeuristicResult, deadline_at, expired
from .contract import contract
from .fallback import fallback
from .ideal_lattice import dfs_order
from .jit import njit
from .pipeline_dp import chain_data, check_pair_tables, layout, placement_of
from .registry import heuristic

CLASS = "contiguous splits along the DFS order (one device per stage)"
INF = np.inf


@njit(cache=True)
def threshold_dp(theta, P, FW, BW, ok, comp_fw):
    """``(G(theta), back)``: least max backward load with every stage's forward load at most ``theta``."""
    n = FW.shape[0] - 1
    H = np.full((n + 1, P + 1), INF)
    back = np.full((n + 1, P + 1), -1, np.int64)
    H[n, :] = 0.0
    for x in range(n - 1, -1, -1):
        for y in range(x + 1, n + 1):
            if comp_fw[y] - comp_fw[x] > theta:
                break
            if not ok[x, y] or FW[x, y] > theta:
                continue
            for p in range(1, P + 1):
                cand = max(H[y, p - 1], BW[x, y])
                if cand < H[x, p]:
                    H[x, p], back[x, p] = cand, y
    return H[0, P], back


@njit(cache=True)
def best_threshold(thetas, P, FW, BW, ok, comp_fw):
    """The threshold minimizing ``theta + G(theta)`` over the sorted candidates, and its value."""
    floor = threshold_dp(INF, P, FW, BW, ok, comp_fw)[0]
    lo, hi = 0, thetas.shape[0] - 1  # the first feasible threshold, by bisection (feasibility is monotone)
    while lo < hi:
        mid = (lo + hi) // 2
        if threshold_dp(thetas[mid], P, FW, BW, ok, comp_fw)[0] < INF:
            hi = mid
        else:
            lo = mid + 1
    best, arg = INF, -1.0
    for theta in thetas[lo:]:
        if theta + floor >= best:
            break
        g = threshold_dp(theta, P, FW, BW, ok, comp_fw)[0]
        if theta + g < best:
            best, arg = theta + g, theta
    return best, arg


def _tables(graph: Graph, cluster: Cluster, model: CostModel):
    """Chain, per-stage FW and BW loads, memory feasibility, forward compute prefix sums."""
    lay = layout(cluster)
    if cluster.routed or lay.servers > 1:
        raise SpecError("gpipe-split: flat clusters only; on servers use method 'pipeline'")
    if model.memory is not MemoryMode.HARD:
        raise SpecError("gpipe-split: memory must be hard")
    spec = model.training_memory
    if spec is not None and (spec.schedule != "gpipe" or (model.name in ORDERS and model.microbatches is not None)):
        raise SpecError(f"gpipe-split: GPipe's memory is counted with schedule 'gpipe', not under {model.name!r}'s "
                        "order; use method 'dp'")
    d = cluster.devices[0]
    con = contract(graph, kinds={d.kind}, memory=d.memory)
    order = dfs_order(con)
    check_pair_tables("gpipe-split", len(order), 8 * 16)  # transfers, spans, FW, BW, feasibility per pair
    chain = chain_data(con, order, cluster)
    pos = np.empty(con.n_nodes, dtype=np.int64)
    pos[order] = np.arange(len(order))
    work = graph.work(d.kind) / d.speed
    comp_fw = np.concatenate([[0.0], np.cumsum(np.bincount(pos[con.image], weights=np.where(
        graph.backward, 0.0, work), minlength=chain.n))])
    tin, tout, fin, tin_fw, tout_fw = (t / (1.0 if i == 2 else d.bandwidth) for i, t in enumerate(
        K.segment_tables(0, chain.n, *chain.tensors[:5], chain.tensors[5], *chain.incidence, 1.0, 1.0,
                         chain.comp, math.inf, 1.0)[:5]))
    span = lambda prefix: prefix[None, :] - prefix[:, None]
    cf, cb = span(comp_fw), span(chain.comp) - span(comp_fw)
    FW = combine_loads(model.overlap, cf, tin_fw, tout_fw, 0.0)  # the overflow: none, memory is hard
    BW = combine_loads(model.overlap, cb, tin - tin_fw, tout - tout_fw, 0.0)
    cap = d.memory * (1 + REL_TOL)
    if spec is None:
        ok = span(chain.memnode) <= cap
    else:
        ok = spec.stage_bytes(span(chain.param), span(chain.act), fin, float(spec.microbatches)) <= cap
    upper = np.triu(np.ones_like(ok), 1).astype(bool)
    return con, chain, lay, FW, BW, ok & upper, comp_fw, follows_passes(graph, con.image, order)


def follows_passes(graph: Graph, image: np.ndarray, order: np.ndarray) -> bool:
    """Whether ``order`` (of the supernodes ops map to by ``image``) is one the graph's passes follow: every
    forward edge and every edge from the forward pass into the backward one goes to the same or a later
    supernode, every backward edge to the same or an earlier one (the backward pass mirrors the forward).

    Backward ops not colocated with forward ops get images of their own (:mod:`.contract`), which no edge ties
    to the forward supernodes; an order may then put them first, and its splits are not the class
    :data:`CLASS` stands for (one topological order of the contracted forward DAG)."""
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order))
    at = pos[image]
    su, sv = at[graph.src], at[graph.dst]
    bw_u, bw_v = graph.backward[graph.src], graph.backward[graph.dst]
    forward_ok = np.where(bw_u, True, su <= sv)  # forward -> forward, forward -> backward
    backward_ok = np.where(bw_u & bw_v, su >= sv, True)
    return bool(np.all(forward_ok & backward_ok))


@heuristic("gpipe-split", optimizes="gpipe", options=manifest.Nothing)
def gpipe_split(graph: Graph, cluster: Cluster, *, model: CostModel | None = None,
                seed: int | None = None, time_limit: float | None = None) -> HeuristicResult:
    """The GPipe-optimal split of :data:`CLASS` (module docstring); ``bound == objective`` there.

    Scored by ``model`` (default ``CostModel.named("gpipe")``); the search is exact for GPipe's
    steady state (no ``microbatches``), where the bound is given, when the order is one the graph's passes
    follow (:func:`follows_passes`; else ``info["order"]`` says why there is no claim). ``time_limit`` (seconds) is
    checked once the tables are built: past it, :func:`.fallback.fallback`'s split (``info["stopped"]``).
    """
    del seed
    start = time.perf_counter()
    at = deadline_at("gpipe-split", time_limit)
    model = CostModel.named("gpipe") if model is None else model
    con, chain, lay, FW, BW, ok, comp_fw, along = _tables(graph, cluster, model)
    if expired(at):
        return fallback("gpipe-split", graph, cluster, model, "the split's tables", start)
    thetas = np.unique(FW[ok])
    P = lay.per_server
    best, theta = best_threshold(thetas, P, FW, BW, ok, comp_fw)
    if not math.isfinite(best):
        raise InfeasibleError(f"gpipe-split: no split of graph {graph.name!r} along the order fits the cluster")
    back = threshold_dp(theta, P, FW, BW, ok, comp_fw)[1]
    stages, x, p = [], 0, P
    while x < chain.n:
        y = int(back[x, p])
        stages.append((x, y, 1))
        x, p = y, p - 1
    placement = placement_of(con, chain, lay, cluster, [(0, chain.n, 1, stages)], "gpipe-split")
    ev = evaluate(placement, model)
    exact = model.objective is Objective.GPIPE and model.microbatches is None and ev.valid and along
    return HeuristicResult(method="gpipe-split", placement=placement, objective=ev.objective,
                           seconds=time.perf_counter() - start, bound=ev.objective if exact else None,
                           exact_among=CLASS if exact else None, evaluations=len(thetas),
                           info={"dp_value": best, "threshold": theta, "stages": len(stages),
                                 **({} if along else {"order": "not one the graph's passes follow: no claim"})})
