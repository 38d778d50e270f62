"""latency-best's list-scheduling candidates, and the latency local search, where the cluster's devices run one op at
a time.

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

import time
from collections.abc import Callable

import numpy as np

from ..cluster import Cluster
from ..deadline import BudgetSpent
from ..evaluate import CostModel, evaluate, execution
from ..graph import Graph
from ..placement import Placement
from .base import HeuristicResult, left, stopped
from .base import run as run_method
from .fallback import fallback_seconds
from .pass_costs import pass_wall

PASSES = ("list", "cpop")  # HEFT first: the better of the two on every generated DAG measured (731.0 and 855.7 at 2k)


def applies(cluster: Cluster, model: CostModel) -> bool:
    """Whether list-scheduling splits are latency-best candidates: devices that run one op at a time, and no
    contiguity or subgraph limit (Tarnawski's ``q``) that their interleaved splits would break."""
    return execution(cluster) == "ops" and "contiguous" not in model.require and not model.max_subgraphs


def passes(graph: Graph, cluster: Cluster, model: CostModel, at: float | None
           ) -> list[tuple[str, Callable[[], HeuristicResult]]]:
    """The list-scheduling candidates (:data:`PASSES`) as ``(method, call)`` where they :func:`applies`, none else.
    A call whose estimated wall seconds (:func:`~.pass_costs.pass_wall`, the estimate a race sizes them by) do not
    fit what is left until ``at`` (``time.monotonic()``) raises :class:`~placement_dsl.deadline.BudgetSpent` without
    running: the cheaper candidates after it keep the time."""
    if not applies(cluster, model):
        return []

    def call(method: str) -> HeuristicResult:
        need, rest = (0.0 if at is None else pass_wall(graph, cluster, [method])[method]), left(at)
        if rest is not None and need > rest:
            raise BudgetSpent(f"{method}: ~{need:.1f} s estimated for {graph.n} ops, {rest:.1f} s left")
        return run_method(method, graph, cluster, model=model)

    return [(method, lambda method=method: call(method)) for method in PASSES]


def ops_search(graph: Graph, cluster: Cluster, model: CostModel | None, lat: CostModel,
               begin: list[tuple[str, np.ndarray]], seed: int | None, at: float | None, t0: float) -> HeuristicResult:
    """The latency local search where the cost model's single-sample referee schedules ops one at a time over the
    cluster's routes (:func:`~placement_dsl.evaluate.execution` ``"ops"``: a cluster with links whose devices do not
    run invocations). There the invocation kernel's latency, which moves every tensor through host memory at each
    device's bandwidth, is not the cost model's; the search is schedule-ls, which scores every move by the referee's
    list schedule over the routes, from the start the cost model scores best (valid first), then, while time is left,
    from the next best of different splits (:data:`SEARCH_STARTS` in all), the best answer kept. The best start alone
    was a trap: a transformer of 38 layers onto accelerators of speeds 2, 1 and 0.5 with links and a host was best all
    on the host (1.557, every max-load split and the chain's when it priced transfers through host memory), where
    schedule-ls from HEFT's split (3.271) reaches 1.218 in 0.3 s (the chain over routes,
    :mod:`.latency_chain_routes`, is now the optimum there, 0.703)."""
    scored = []  # each start scored while the time left holds a scoring and the search's set-up (the first always:
    for label, assign, *schedule in begin:  # latency-best passes its best first; six scorings of 2,000 ops took 1 s
        if scored and at is not None and left(at) < fallback_seconds(graph, cluster, "none", 1 + SCHEDULE_SET_UP):
            break  # (at load 8); each start with its own schedule where it came with one
        start = Placement(graph, cluster, np.asarray(assign), source=label, schedule=schedule[0] if schedule else None)
        scored.append((evaluate(start, lat), label, start))
    log = [{"start": lab, "latency": float(e.objective)} for e, lab, _ in scored]
    ranked: list[tuple[str, Placement]] = []
    for _, label, start in sorted(scored, key=lambda s: (not s[0].valid, s[0].objective)):
        if len(ranked) < SEARCH_STARTS and not any(np.array_equal(start.assign, p.assign) for _, p in ranked):
            ranked.append((label, start))
    label, start = ranked[0]
    if at is not None and left(at) < fallback_seconds(graph, cluster, "none", SCHEDULE_SET_UP):  # it would overrun
        placement = Placement(graph, cluster, start.assign, source="latency-local-search", schedule=start.schedule)
        ev = evaluate(placement, model or lat)
        return stopped(HeuristicResult(method="latency-local-search", placement=placement, objective=ev.objective,
                                       valid=ev.valid, seconds=time.perf_counter() - t0,
                                       info={"optimizes": "latency", "starts": log, "search": f"none from {label}: "
                                             "less time left than schedule-ls's set-up"}))
    best, searched, evaluations, ran_out = None, [], 0, False
    for k, (label, start) in enumerate(ranked):  # the next start only once a search ended at its local optimum
        if k and at is not None and left(at) < fallback_seconds(graph, cluster, "none", 1 + SCHEDULE_SET_UP):
            break
        found = run_method("schedule-ls", graph, cluster, model=lat, seed=seed, time_limit=left(at), start=start)
        evaluations, ran_out = evaluations + found.evaluations, bool(found.info.get("stopped"))
        searched.append(f"{label} ({found.objective:.6g})")
        key = (not found.valid, found.objective)
        if best is None or key < best[0]:
            best = key, found
        if ran_out:
            break
    found = best[1]
    placement = Placement(graph, cluster, found.placement.assign, source="latency-local-search",
                          schedule=found.placement.schedule)
    ev = evaluate(placement, model or lat)
    result = HeuristicResult(method="latency-local-search", placement=placement, objective=ev.objective,
                             valid=ev.valid, seconds=time.perf_counter() - t0, evaluations=evaluations,
                             info={"optimizes": "latency", "starts": log,
                                   "search": f"schedule-ls from {', '.join(searched)}",
                                   "moves": found.info.get("moves", 0)})
    return stopped(result) if ran_out else result

SEARCH_STARTS = 6  # different start splits schedule-ls descends from at most, the best first, each from the time left
# (three until the chain over routes ranked among the first: on a 24-op ResNet onto three linked accelerators and a
# CPU the descents from the chain, HEFT's and CPOP's splits all ended at 2.011, those from greedy's (2.889) and the
# max-load DP's (19.68) at 1.834 and 1.767; a search that stalls on a small graph ends in a second or two)

SCHEDULE_SET_UP = 4  # evaluations' worth of schedule-ls's set-up before it first reads its clock (its state, the
# start's list schedule and its mirror): with less left, latency-best's search from its best start overran a race's
# share at load 8 (a 10 s solve of 2,000 ops: its chain split's 2,180.0 found, the race ended before it returned)
