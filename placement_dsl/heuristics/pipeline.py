"""The ``pipeline`` method: the pipeline planner's exact DP (:mod:`.pipeline_dp`), pruned by the max-load of PipeDream's
hierarchical planner (:mod:`.pipedream_planner`), whose configurations lie in the DP's class."""
from __future__ import annotations

import time
from dataclasses import replace

from ..cluster import Cluster
from ..evaluate import CostModel, Objective, evaluate
from ..graph import Graph
from . import manifest
from .base import HeuristicResult, TimeLimitReached, deadline_at, dp_claim, expired, left
from .fallback import fallback
from .pipedream_planner import pipedream_planner
from .pipeline_dp import CLASS, check_pipeline_tables, plan
from .registry import heuristic


@heuristic("pipeline", optimizes="max_load", options=manifest.Pipeline)
def pipeline(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = None,
             replication: bool = False, upper_bound: float | None = None,
             max_replicas: int | None = None, time_limit: float | None = None) -> HeuristicResult:
    """Our pipeline planner: exact max-load (PipeDream's objective) over :data:`CLASS`.

    ``replication`` lets stages run on several devices (in a server, and segments over servers);
    without it the class has one device per stage. ``bound == objective`` (``exact_among`` the
    class) under a max-load model; under GPipe the
    max-load-optimal pipeline is returned without a bound. ``upper_bound`` prunes stages above
    it (default: the max-load of PipeDream's planner's configuration, which is in the class);
    a bound below the optimum only costs a second run. ``max_replicas`` caps a stage's replicas
    inside one server (servers may still replicate a segment). ``time_limit`` (seconds) is checked
    between phases (PipeDream's planner for the bound, the DP): past it, the planner's placement, or
    :func:`.fallback.fallback`'s, with ``info["stopped"]``.

    >>> from placement_dsl.graph import Graph, Op
    >>> g = Graph([Op(name="a", work=8.0, param_bytes=1.0), Op(name="b", work=2.0)], [("a", "b")])
    >>> r = pipeline(g, Cluster.stages(3), replication=True)  # one stage on three replicas: 10/3 + 2 (2/3) 1
    >>> round(r.objective, 4), r.placement.replicas.tolist(), r.bound == r.objective
    (4.6667, [3, 1, 1], True)
    """
    del seed
    start = time.perf_counter()
    at = deadline_at("pipeline", time_limit)
    model = CostModel() if model is None else model
    check_pipeline_tables(graph, cluster, replication)
    if upper_bound is None:  # PipeDream's configuration is in the class: its max-load prunes (a valid bound)
        first = pipedream_planner(graph, cluster, model=model, replication=replication, max_replicas=max_replicas,
                                  time_limit=left(at))
        if expired(at):
            return replace(first, method="pipeline", seconds=time.perf_counter() - start,
                           info={**first.info, "stopped": "time limit", "stopped_in": "PipeDream's planner (the bound)"})
        upper_bound = evaluate(first.placement, replace(model, objective=Objective.MAX_LOAD)).objective
    else:
        first = None
    try:
        placement, info = plan(graph, cluster, model, replication=replication, upper_bound=upper_bound,
                               max_replicas=max_replicas, deadline=at)
    except TimeLimitReached as err:  # the planner's configuration, else fallback's split
        if first is None:
            return fallback("pipeline", graph, cluster, model, "the DP over segments", start)
        return replace(first, method="pipeline", seconds=time.perf_counter() - start,
                       info={**first.info, "stopped": "time limit", "stopped_in": str(err)})
    ev = evaluate(placement, model)
    unseen = dp_claim(info["dp_value"], ev.objective)  # a link's load the planner does not see (a replica's route)
    exact = model.objective is Objective.MAX_LOAD and ev.valid and unseen is None
    if unseen is not None and model.objective is Objective.MAX_LOAD:
        info["bound"] = unseen
    if model.objective is not Objective.MAX_LOAD:
        info["optimized"] = "max_load"
    return HeuristicResult(method="pipeline", placement=placement, objective=ev.objective,
                           seconds=time.perf_counter() - start, bound=ev.objective if exact else None,
                           exact_among=CLASS if exact else None, evaluations=info["segment_runs"], info=info)
