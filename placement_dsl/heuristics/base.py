"""The common interface of the heuristics: a result type and a registry by method name."""
from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..errors import PlacementError, SpecError
from ..evaluate import CostModel, Objective, evaluate
from ..graph import Graph
from ..placement import Placement


@dataclass(frozen=True)
class HeuristicResult:
    """A heuristic's placement with its cost-model objective.

    ``bound`` is a proven lower bound where the method proves one (the DP over ideals is
    exact among contiguous splits: ``bound == objective`` with ``exact_among`` saying over
    which class), else ``None``.
    """

    method: str
    placement: Placement
    objective: float
    seconds: float
    bound: float | None = None
    exact_among: str | None = None
    evaluations: int = 0
    info: dict[str, Any] = field(default_factory=dict)


# method name -> "module:function" (relative to this package, or absolute for a method of a layer above it,
# imported only when the method is run); each function has the signature
#   fn(graph: Graph, cluster: Cluster, *, model: CostModel, seed: int | None, time_limit: float | None,
#      **options) -> HeuristicResult
# and, given a time limit, returns its best placement so far when it runs out (see deadline_at()).
METHODS: dict[str, str] = {
    "dp": "ideals:dp",
    "dpl": "ideals:dpl",
    "dp-servers": "ideal_servers:dp_servers",
    "slicegraph": "slicegraph:slicegraph",
    "random": "orderings:random_orders",
    "brkga": "orderings:brkga",
    "mla": "orderings:mla",
    "mla-weighted": "orderings:mla_weighted",
    "greedy": "baselines:greedy",
    "local-search": "baselines:local_search",
    "polish": "polish:polish",
    "pipedream": "baselines:pipedream_path",
    "pipedream-planner": "pipedream_planner:pipedream_planner",
    "pipeline": "pipeline_dp:pipeline",
    "gpipe-split": "gpipe_split:gpipe_split",
    "one-device": "baselines:one_device",
    "latency-local-search": "latency:latency_local_search",
    "latency-best": "latency:latency_best",
    "list": "listsched:heft",
    "one-device-best": "listsched:one_device_best",
    "schedule-lns": "placement_dsl.search.lns:schedule_lns",  # a search over CP-SAT / MILP re-solves
    "schedule-ls": "schedule_ls:schedule_local_search",
    "cpop": "schedule_ls:cpop",
}


# What each method minimizes when it searches ("memory_fill": greedy looks at memory only;
# "cost_model": picks by the model it is given). Under a latency model the max-load methods
# return their own optimum, which Tarnawski §7 scores as a baseline: run() says so in ``info``.
OPTIMIZES: dict[str, str] = {
    **dict.fromkeys(("dp", "dpl", "dp-servers", "slicegraph", "random", "brkga", "mla", "mla-weighted", "pipedream",
                     "pipeline", "pipedream-planner", "polish"), "max_load"), "gpipe-split": "gpipe",
    "greedy": "memory_fill", "one-device": "cost_model", "local-search": "cost_model",
    "latency-local-search": "latency", "latency-best": "latency",
    **dict.fromkeys(("list", "one-device-best", "schedule-lns", "schedule-ls", "cpop"), "makespan"),
}


def methods_for(objective: str) -> list[str]:
    """The methods that search for ``objective`` (e.g. ``"max_load"``): its own, and those that take the model's."""
    return [m for m in METHODS if OPTIMIZES.get(m) in (objective, "cost_model", "memory_fill")]


def resolve(method: str) -> Callable[..., HeuristicResult]:
    if method not in METHODS:
        raise SpecError(f"unknown heuristic {method!r}; choose from {sorted(METHODS)}")
    module, fn = METHODS[method].split(":")
    try:
        mod = importlib.import_module(module if module.startswith("placement_dsl.") else f"{__package__}.{module}")
    except ModuleNotFoundError as err:
        raise SpecError(f"heuristic {method!r} is not available: {err}") from None
    return getattr(mod, fn)


def run(method: str, graph: Graph, cluster: Cluster, *, model: CostModel | None = None,
        seed: int | None = 0, time_limit: float | None = None, **options: Any) -> HeuristicResult:
    """Run a heuristic by name and re-check its objective with the cost model.

    ``time_limit`` (seconds of wall clock from this call, ``None``: none) is passed to the
    method, which returns its best placement so far when it runs out (``info["stopped"]``).
    """
    model = model or CostModel()
    start = time.perf_counter()
    fn = resolve(method)
    result = fn(graph, cluster, model=model, seed=seed, time_limit=time_limit, **options)
    check = evaluate(result.placement, model).objective
    if abs(check - result.objective) > 1e-6 * max(1.0, abs(check)):
        raise AssertionError(f"heuristic {method!r} reported {result.objective} but the cost model says {check}")
    if result.seconds == 0.0:
        object.__setattr__(result, "seconds", time.perf_counter() - start)
    if model.objective is Objective.LATENCY:
        result = _latency_verdict(method, result, check)
    return result


# ---------------------------------------------------------------------------- time limits
STOPPED = "time limit"
"""``info["stopped"]`` of a result a method returned because its time limit passed."""


class TimeLimitReached(PlacementError):
    """A heuristic's time limit passed before it held any placement (and it has no fallback to build)."""


def deadline_at(method: str, time_limit: float | None) -> float | None:
    """The ``time.monotonic()`` at which ``time_limit`` seconds from now end (``None``: no limit).

    Raises :class:`SpecError` unless ``time_limit`` is ``None`` or a number of seconds ``>= 0``.
    """
    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit >= 0:
        raise SpecError(f"{method}: time_limit must be a number of seconds >= 0 or None, got {time_limit!r}")
    return time.monotonic() + float(time_limit)


def expired(at: float | None) -> bool:
    """Whether the deadline ``at`` (from :func:`deadline_at`) has passed."""
    return at is not None and time.monotonic() >= at


def left(at: float | None) -> float | None:
    """Seconds left until the deadline ``at`` (``None``: no limit), never below 0."""
    return None if at is None else max(0.0, at - time.monotonic())


def kernel_deadline(at: float | None) -> float:
    """The deadline as a numba kernel takes it: a float, ``inf`` for none."""
    return math.inf if at is None else float(at)


def stopped(result: HeuristicResult, **info: Any) -> HeuristicResult:
    """``result`` marked as returned at its time limit (``info["stopped"]``), with ``info`` added."""
    return replace(result, info={**result.info, **info, "stopped": STOPPED})


def fallback(method: str, graph: Graph, cluster: Cluster, model: CostModel | None, phase: str,
             start: float | None = None) -> HeuristicResult:
    """What ``method`` returns when its time limit passed in ``phase`` before it held a placement: the
    best of the greedy split (unless no memory binds and every op runs anywhere: then it is one device),
    the best single device and the work-balanced slicing of the topological order (each built in
    ``O(n + m)``), as ``method``'s result, with ``info["stopped"]`` and ``info["fallback"]`` naming the
    one taken. No proven bound."""
    from .baselines import greedy, one_device

    begun = time.perf_counter() if start is None else start
    model = model or CostModel()
    fills = np.isfinite(cluster.memory).any() or not np.isfinite(cluster.times(graph)).all()
    found = [fn(graph, cluster, model=model) for fn in ((greedy, one_device) if fills else (one_device,))]
    found += _balanced(graph, cluster, model)
    best = min(found, key=lambda r: (not evaluate(r.placement, model).valid, r.objective))
    placement = Placement(graph, cluster, best.placement.assign, source=method)
    return HeuristicResult(method=method, placement=placement, objective=best.objective,
                           seconds=time.perf_counter() - begun, evaluations=sum(r.evaluations for r in found),
                           info={"stopped": STOPPED, "fallback": best.method, "stopped_in": phase})


def _latency_verdict(method: str, result: HeuristicResult, latency: float) -> HeuristicResult:
    """Under a latency model: what the method optimized and its split's latency; no bound unless it searched latency.

    A max-load method (the DP over ideals, SliceGraph, ...) returns the best split for its own
    objective, which Tarnawski §7 scores for latency as a baseline: being exact among
    contiguous splits for max-load says nothing about latency.
    """
    goal = result.info.get("optimizes", OPTIMIZES.get(method, "not latency"))
    info = {**result.info, "optimizes": goal, "latency": latency}
    if goal in ("latency", "cost_model"):
        return replace(result, info=info)
    return replace(result, info=info, bound=None, exact_among=None)


def _balanced(graph: Graph, cluster: Cluster, model: CostModel) -> list[HeuristicResult]:
    """The work-balanced slicing of the graph's topological order onto the accelerators, if the cluster allows one."""
    from .slicegraph import Slicer

    try:
        slicer = Slicer(graph, cluster, model, devices=_non_host(cluster))
        order = slicer.order(-graph.rank.astype(float))
        return [slicer.result("balanced", order, slicer.balanced_bounds(order), time.perf_counter(), 1)]
    except PlacementError:  # an op the accelerators cannot run
        return []


def _non_host(cluster: Cluster) -> Any:
    acc = [d for d in range(cluster.size) if not cluster.host[d]]
    return acc or list(range(cluster.size))
