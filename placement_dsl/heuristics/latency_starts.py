"""The latency local search's default start splits (Tarnawski §7): greedy's and the max-load DP's, the latter
under a time limit that leaves the search its share."""
from __future__ import annotations

import numpy as np

from ..cluster import Cluster
from ..deadline import stop_margin
from ..errors import InfeasibleError, SpecError
from ..evaluate import CostModel
from ..graph import Graph
from .base import expired, left
from .base import run as run_method
from .baselines import max_load_model


def maxload_start(graph: Graph, cluster: Cluster, model: CostModel | None,
                  dp_max_ideals: int = 5000, deadline: float | None = None) -> tuple[str, np.ndarray] | None:
    """The max-load DP split (Tarnawski §5.1.1, the §7 baseline); DPL's when the graph has more ideals. Each
    gets :func:`start_limit` of what is left until ``deadline`` (``time.monotonic()``)."""
    ml = max_load_model(model)
    try:
        return "dp", run_method("dp", graph, cluster, model=ml, max_ideals=dp_max_ideals,
                                time_limit=start_limit(graph, deadline)).placement.assign
    except (SpecError, InfeasibleError):
        pass
    try:
        return "dpl", run_method("dpl", graph, cluster, model=ml,
                                 time_limit=start_limit(graph, deadline)).placement.assign
    except (SpecError, InfeasibleError):
        return None


START_SHARE = 0.5  # of the time left, the max-load start's; the rest is the descents' from it and the greedy split


def start_limit(graph: Graph, deadline: float | None) -> float | None:
    """The time limit of the max-load start: :data:`START_SHARE` of what is left until ``deadline``, less what the
    DP does after its own limit (:func:`~placement_dsl.deadline.stop_margin`: its fallback split, built and scored).
    Given all the time left, DPL on a ResNet of 20,000 ops onto 4 stages ran to the limit, then built its fallback
    (0.87 s), and the search ended 2.0 s past a 10 s limit at load 6.5 with no time for its descents."""
    rest = left(deadline)
    if rest is None:
        return None
    share = START_SHARE * rest
    return max(share - stop_margin(share, graph.n), 0.0)


def default_starts(graph: Graph, cluster: Cluster, model: CostModel, dp_max_ideals: int,
                   deadline: float | None = None) -> list[tuple[str, np.ndarray]]:
    """Tarnawski §7's start splits: greedy's, and the max-load DP's (:func:`maxload_start`) unless the time is up."""
    out = [("greedy", run_method("greedy", graph, cluster, model=model).placement.assign)]
    if expired(deadline):
        return out
    split = maxload_start(graph, cluster, model, dp_max_ideals, deadline)
    return out + ([split] if split is not None else [])
