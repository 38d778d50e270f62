"""The common interface of the heuristics: a result type and a registry by method name."""
from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..cluster import Cluster
from ..errors import SpecError
from ..evaluate import CostModel, evaluate
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


# method name -> "module:function" (relative to this package); each function has the signature
#   fn(graph: Graph, cluster: Cluster, *, model: CostModel, seed: int | None, **options) -> HeuristicResult
METHODS: dict[str, str] = {
    "dp": "ideals:dp",
    "dpl": "ideals:dpl",
    "slicegraph": "slicegraph:slicegraph",
    "random": "orderings:random_orders",
    "brkga": "orderings:brkga",
    "mla": "orderings:mla",
    "mla-weighted": "orderings:mla_weighted",
    "greedy": "baselines:greedy",
    "local-search": "baselines:local_search",
    "pipedream": "baselines:pipedream_path",
    "one-device": "baselines:one_device",
    "list": "listsched:heft",
    "one-device-best": "listsched:one_device_best",
}


def resolve(method: str) -> Callable[..., HeuristicResult]:
    if method not in METHODS:
        raise SpecError(f"unknown heuristic {method!r}; choose from {sorted(METHODS)}")
    module, fn = METHODS[method].split(":")
    try:
        mod = importlib.import_module(f"{__package__}.{module}")
    except ModuleNotFoundError as err:
        raise SpecError(f"heuristic {method!r} is not available: {err}") from None
    return getattr(mod, fn)


def run(method: str, graph: Graph, cluster: Cluster, *, model: CostModel | None = None,
        seed: int | None = 0, **options: Any) -> HeuristicResult:
    """Run a heuristic by name and re-check its objective with the cost model."""
    model = model or CostModel()
    start = time.perf_counter()
    result = resolve(method)(graph, cluster, model=model, seed=seed, **options)
    check = evaluate(result.placement, model).objective
    if abs(check - result.objective) > 1e-6 * max(1.0, abs(check)):
        raise AssertionError(f"heuristic {method!r} reported {result.objective} but the cost model says {check}")
    if result.seconds == 0.0:
        object.__setattr__(result, "seconds", time.perf_counter() - start)
    return result
