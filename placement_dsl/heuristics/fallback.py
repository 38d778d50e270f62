"""What a heuristic returns when its time limit passes before it holds a placement, or holds only one the cost model
rejects: the best of three splits built in ``O(n + m)`` (greedy, one device, the work-balanced slicing of the
topological order). The methods call it; :func:`~.base.run` reaches it by name (:data:`.registry.FALLBACK`)."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import PlacementError
from ..evaluate import CostModel, evaluate
from ..graph import Graph
from ..placement import Placement
from . import jit, kernel_cache
from .base import STOPPED, HeuristicResult
from .baselines import greedy, one_device
from .slicegraph import Slicer


def fallback(method: str, graph: Graph, cluster: Cluster, model: CostModel | None, phase: str,
             start: float | None = None) -> HeuristicResult:
    """What ``method`` returns when its time limit passed in ``phase`` before it held a placement: the
    best of the greedy split (unless no memory binds and every op runs anywhere: then it is one device),
    the best single device and the work-balanced slicing of the topological order (each built in
    ``O(n + m)``), as ``method``'s result, with ``info["stopped"]`` and ``info["fallback"]`` naming the
    one taken. No proven bound. A split that cannot be built (a :class:`PlacementError`) is left out; where none can
    be, the first one's error is raised."""
    begun = time.perf_counter() if start is None else start
    model = model or CostModel()
    fills = np.isfinite(cluster.memory).any() or not np.isfinite(cluster.times(graph)).all()
    found, errors = [], []
    for fn in (greedy, one_device) if fills else (one_device,):
        try:
            found.append(fn(graph, cluster, model=model))
        except PlacementError as err:
            errors.append(err)
    found += _balanced(graph, cluster, model)
    if not found:
        raise errors[0]
    best = min(found, key=lambda r: (not evaluate(r.placement, model).valid, r.objective))
    placement = Placement(graph, cluster, best.placement.assign, source=method)
    return HeuristicResult(method=method, placement=placement, objective=best.objective,
                           seconds=time.perf_counter() - begun, evaluations=sum(r.evaluations for r in found),
                           info={"stopped": STOPPED, "fallback": best.method, "stopped_in": phase})


def _balanced(graph: Graph, cluster: Cluster, model: CostModel) -> list[HeuristicResult]:
    """The work-balanced slicing of the graph's topological order onto the accelerators, if the cluster allows one."""
    try:
        slicer = Slicer(graph, cluster, model, devices=_non_host(cluster))
        order = slicer.order(-graph.rank.astype(float))
        return [slicer.result("balanced", order, slicer.balanced_bounds(order), time.perf_counter(), 1)]
    except PlacementError:  # an op the accelerators cannot run
        return []


def spread_split(graph: Graph, cluster: Cluster, model: CostModel, seconds: float | None = None,
                 python: bool = False) -> Placement:
    """The work-balanced slicing of the graph's topological order (its projection's order where the graph is not
    its own), named ``"spread"`` (over the non-host devices, the hosts empty) beside a host, else ``"balanced"``
    (over every device); :class:`PlacementError` where the devices cannot run the ops. With ``seconds``, a time
    limit: on a cold kernel cache its kernels run in Python (``O(n + m)`` loops, milliseconds at 20,000 ops) while a
    background process compiles them, where compiling here took 6 s of a cold 60 s ``bounds``. ``python``: kernels
    not loaded yet run in Python whatever the cache (:func:`.jit.interpreted`): for a short call, loading numba and
    the kernels (1.2 s at load 7 on 20,000 ops) costs more than these loops."""
    host = np.asarray(cluster.host, dtype=bool)
    name = "spread" if host.any() else "balanced"
    with kernel_cache.limited(name, seconds), jit.interpreted(python):
        slicer = Slicer(graph, cluster, model)
        order = graph.topo.copy() if slicer.projection.identity else slicer.order(-graph.rank.astype(float))
        slicing = slicer.spread_bounds if host.any() else slicer.balanced_bounds
        return slicer.placement(order, slicing(order, slicer.allowed(order)), source=name)


def spread_applies(graph: Graph, cluster: Cluster, least_ops: int) -> bool:
    """Whether :func:`spread_split` is worth offering: the non-host devices hold the graph, and a host is beside
    them or the graph has ``least_ops`` ops or more. It needs no share that a loaded machine may eat (at load 16
    slicegraph was stopped with nothing), and at scale it is far better than greedy's fill: beside a slow host whose
    memory is not needed it is within 0.2 % of slicegraph's optimal slicing (81.46 against 81.36 on cnn-20000 onto
    64 accelerators, greedy's fill 189.75), and on GPT-3's 20,111 ops onto 4 stages it gives 268.19 where greedy
    gives 983.23 (a 5 s ``bounds`` answered greedy's)."""
    host = np.asarray(cluster.host, dtype=bool)
    caps = np.asarray(cluster.memory, dtype=float)[~host]
    if host.all() or float((graph.param_bytes + graph.activation_bytes).sum()) > float(caps.sum()):
        return False
    return bool(host.any()) or graph.n >= least_ops


def _non_host(cluster: Cluster) -> Any:
    acc = [d for d in range(cluster.size) if not cluster.host[d]]
    return acc or list(range(cluster.size))
