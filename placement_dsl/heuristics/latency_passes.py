"""latency-best's list-scheduling candidates where the cluster's devices run one op at a time.

Where the cluster has links (MOIRAI §III; :func:`~placement_dsl.evaluate.execution` ``"ops"``), the single-sample
latency is a list schedule over the routes, not Tarnawski's invocations, and the splits built for invocations (greedy,
the chain, the DPs over ideals) keep each device's ops in few runs where a schedule interleaves them. There the list
schedulers (HEFT, :mod:`.listsched`; CPOP, :mod:`.schedule_ls`) are the constructions that win: on a generated DAG of
2,000 ops onto four accelerators with links and a host, HEFT's schedule is 731.0 in 0.6 s where the chain split is
2,180.0 and greedy's 2,798.2. Their splits need not be contiguous, so they are offered only where the cost model
requires neither contiguity nor a subgraph limit; on invocation clusters their interleaved splits have cyclic
invocations (infinite latency), so they are not offered there.
"""
from __future__ import annotations

from collections.abc import Callable

from ..cluster import Cluster
from ..deadline import BudgetSpent
from ..evaluate import CostModel, execution
from ..graph import Graph
from .base import HeuristicResult, left
from .base import run as run_method
from .fallback import fallback_seconds

PASSES = ("list", "cpop")  # HEFT first: the better of the two on every generated DAG measured (731.0 and 855.7 at 2k)
PASS_EVALUATIONS = 3  # evaluations' worth of one pass (each op tried on every device, each tensor booked on its
# route), by fallback_seconds' sizing: HEFT took 0.56 s wall on 2,000 ops and 1.56 s on 5,000 at load 9.4, where
# that sizing gives one evaluation 0.24 and 0.59 s


def applies(cluster: Cluster, model: CostModel) -> bool:
    """Whether list-scheduling splits are latency-best candidates: devices that run one op at a time, and no
    contiguity or subgraph limit (Tarnawski's ``q``) that their interleaved splits would break."""
    return execution(cluster) == "ops" and "contiguous" not in model.require and not model.max_subgraphs


def pass_seconds(graph: Graph, cluster: Cluster) -> float:
    """Wall seconds one pass is estimated to take on ``graph`` here as loaded now (:data:`PASS_EVALUATIONS`)."""
    return fallback_seconds(graph, cluster, "none", PASS_EVALUATIONS)


def passes(graph: Graph, cluster: Cluster, model: CostModel, at: float | None
           ) -> list[tuple[str, Callable[[], HeuristicResult]]]:
    """The list-scheduling candidates (:data:`PASSES`) as ``(method, call)`` where they :func:`applies`, none else.
    A call whose :func:`pass_seconds` do not fit what is left until ``at`` (``time.monotonic()``) raises
    :class:`~placement_dsl.deadline.BudgetSpent` without running: the cheaper candidates after it keep the time."""
    if not applies(cluster, model):
        return []

    def call(method: str) -> HeuristicResult:
        need, rest = pass_seconds(graph, cluster), left(at)
        if rest is not None and need > rest:
            raise BudgetSpent(f"{method}: ~{need:.1f} s estimated for {graph.n} ops, {rest:.1f} s left")
        return run_method(method, graph, cluster, model=model)

    return [(method, lambda method=method: call(method)) for method in PASSES]
