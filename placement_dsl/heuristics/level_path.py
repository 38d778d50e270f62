"""PipeDream's optimizer (Narayanan et al. 2019) as Tarnawski et al. ran it as a baseline: branchings contracted so
the graph becomes a path, then the exact path DP over the accelerators. The path's nodes are the topological levels
(ops of equal longest-path depth, so parallel branches merge); the DP is the slicing DP with cuts only between levels.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..cluster import Cluster
from ..errors import InfeasibleError
from ..evaluate import CostModel
from ..graph import Graph
from . import manifest
from .base import HeuristicResult, deadline_at
from .baselines import INF, max_load_model, pipeline_accelerators, scored_result
from .fallback import fallback
from .jit import njit
from .registry import heuristic
from .slicegraph import Slicer


@njit(cache=True)
def _depths(topo, pred_ptr, pred_idx):
    """Longest-path depth of every op from the sources."""
    depth = np.zeros(topo.size, dtype=np.int64)
    for v in topo:
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            depth[v] = max(depth[v], depth[pred_idx[e]] + 1)
    return depth


def level_path(graph: Graph, depth: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The graph contracted to a path of topological levels: an order by (depth, rank) and its level cuts.

    Ops at the same longest-path depth (parallel branches) become one path node; the path's
    edges join consecutive levels, and the only cuts allowed are between levels. ``depth``
    overrides the longest-path depths (e.g. a training graph's forward depths).
    """
    if depth is None:
        depth = _depths(graph.topo, graph.pred_ptr, graph.pred_idx)
    order = np.lexsort((graph.rank, depth))
    d = depth[order]
    cuts = np.r_[True, d[1:] != d[:-1], True]
    return order, cuts


@heuristic("pipedream", optimizes="max_load", options=manifest.Nothing)
def pipedream_path(graph: Graph, cluster: Cluster, *, model: CostModel | None = None,
                   seed: int | None = None, time_limit: float | None = None) -> HeuristicResult:
    """PipeDream's path DP on the graph contracted to its chain of levels, over the accelerators.

    A training graph's levels are those of its forward projection (Tarnawski App. B), each
    forward node carrying its backward ops, as PipeDream's profile of a layer does. The slicing
    DP stops at ``time_limit`` seconds: then :func:`.fallback.fallback`'s split (``info["stopped"]``).
    """
    start = time.perf_counter()
    at = deadline_at("pipedream", time_limit)
    slicer = Slicer(graph, cluster, max_load_model(model), devices=pipeline_accelerators(cluster))
    order, cuts = level_path(slicer.sliced, slicer.projection.depth)
    value, bounds = slicer.solve(order, boundaries=cuts, deadline=at)
    if math.isnan(value):  # NaN: the DP passed its deadline
        return fallback("pipedream", graph, cluster, model, "the level path's slicing DP", start)
    if value == INF:
        raise InfeasibleError(f"pipedream: no split of the level path of {graph.name!r} fits the "
                              f"accelerators' memory; add devices or use the 'bottleneck' (overflow) model")
    assign = slicer.placement(order, bounds).assign
    return scored_result("pipedream", graph, cluster, model, assign, start, path_nodes=int(cuts.sum()) - 1,
                         dp_value=value)


# ---------------------------------------------------------------------------- local search
