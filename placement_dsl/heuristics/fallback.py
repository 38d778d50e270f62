"""What a heuristic returns when its time limit passes before it holds a placement, or holds only one the cost model
rejects: the best of three splits built in ``O(n + m)`` (greedy, one device, the work-balanced slicing of the
topological order). The methods call it; :func:`~.base.run` reaches it by name (:data:`.registry.FALLBACK`).

Each split costs evaluations of the cost model, which on a large single-sample schedule are not cheap (list
scheduling of every op): :func:`fallback_seconds` sizes them from the op count, and given a ``deadline`` the
fallback builds, cheapest first, only the splits whose estimate fits what is left of it."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..deadline import BudgetSpent, Deadline, call_within, slowdown
from ..errors import InfeasibleError, PlacementError
from ..evaluate import CostModel, evaluate
from ..graph import Graph
from ..placement import Placement
from ..problem import Problem, q_model
from . import jit, kernel_cache
from .base import STOPPED, HeuristicResult
from .baselines import greedy, one_device, one_device_misfits
from .slicegraph import Slicer

EVALUATE_PER_OP = 5e-5  # seconds per op of one evaluation at deadline.LOAD_MEASURED (scaled by slowdown()): a
# makespan schedule of 47,584 ops onto 5 devices (a 15,000-task MOIRAI sheet) took 5.0-7.5 s each at load 8-9 on
# 2 cores, its one-device split 42 s (7 evaluations); a value near the top is kept
MILLISECONDS = 0.1  # seconds: a split estimated to take at most this is built however little time is left


def evaluations(split: str, cluster: Cluster) -> int:
    """How many evaluations of the whole graph building ``split`` and checking it here takes: the slicing's own
    score, greedy's fill and score, one device's per class of identical devices and its score; one more each for
    the check that picks the best (not made where one split is built); none for ``"none"`` (a caller's scoring of a
    placement it holds)."""
    if split == "none":  # only the caller's checks
        return 0
    built = {"balanced": 1, "greedy": 2}.get(split, len(cluster.homogeneous_groups()) + 1)
    return built + 1


def fallback_seconds(graph: Graph, cluster: Cluster, split: str = "balanced", checks: int = 0) -> float:
    """Seconds to build ``split`` and check it, with ``checks`` more evaluations (a caller's scoring of the answer),
    on this machine as loaded now: :data:`EVALUATE_PER_OP` per op and evaluation."""
    return (evaluations(split, cluster) + checks) * EVALUATE_PER_OP * graph.n * slowdown()


def fallback(method: str, graph: Graph, cluster: Cluster, model: CostModel | None, phase: str,
             start: float | None = None, deadline: Deadline | None = None) -> HeuristicResult:
    """What ``method`` returns when its time limit passed in ``phase`` before it held a placement: the
    best of the greedy split (unless no memory binds and every op runs anywhere: then it is one device),
    the best single device and the work-balanced slicing of the topological order (each built in
    ``O(n + m)``), as ``method``'s result, with ``info["stopped"]`` and ``info["fallback"]`` naming the
    one taken. No proven bound. A split that cannot be built (a :class:`PlacementError`) is left out; where none can
    be, the first one's error is raised. With a ``deadline``, the splits are built cheapest first
    (:func:`fallback_seconds`) and one whose estimate does not fit what is left is not started (``info["skipped"]``
    says which and why); where none fits, :class:`BudgetSpent` says so. A ``deadline`` is a time limit of the kernels'
    (:func:`.kernel_cache.limited`): on a cold cache they run in Python while a background process compiles them,
    where compiling them here took 11-13 s before a 30 s solve of GPT-3's 217 ops (its held split) at load 7."""
    begun = time.perf_counter() if start is None else start
    model = model or CostModel()
    fills = np.isfinite(cluster.memory).any() or not np.isfinite(cluster.times(graph)).all()
    builds = {"greedy": lambda: [greedy(graph, cluster, model=model)],
              "one-device": lambda: [one_device(graph, cluster, model=model)],
              "balanced": lambda: _balanced(graph, cluster, model)}
    names = ["greedy", "one-device", "balanced"] if fills else ["one-device", "balanced"]
    if deadline is not None:
        names.sort(key=lambda name: evaluations(name, cluster))
    found, errors, skipped = [], [], []
    with kernel_cache.limited(method, None if deadline is None else deadline.left()):  # a cold cache: no compile here
        for name in names:
            need = 0.0 if deadline is None else fallback_seconds(graph, cluster, name)
            if deadline is not None and need > max(deadline.left(), MILLISECONDS):
                skipped.append(f"{name} (~{need:.1f} s for {graph.n} ops, {deadline.left():.1f} s left)")
                continue
            try:
                found += builds[name]()
            except PlacementError as err:
                errors.append(err)
    if not found:
        if errors:
            raise errors[0]
        raise BudgetSpent(f"{method}: no fallback split fits the time left: {'; '.join(skipped)}")
    best = found[0] if len(found) == 1 else min(found, key=lambda r: (not evaluate(r.placement, model).valid,
                                                                     r.objective))
    placement = Placement(graph, cluster, best.placement.assign, source=method)
    return HeuristicResult(method=method, placement=placement, objective=best.objective,
                           seconds=time.perf_counter() - begun, evaluations=sum(r.evaluations for r in found),
                           info={"stopped": STOPPED, "fallback": best.method, "stopped_in": phase,
                                 **({"skipped": skipped} if skipped else {})})


def one_device_closed_form(method: str, graph: Graph, cluster: Cluster, phase: str,
                           start: float | None = None) -> HeuristicResult | None:
    """Every op on the one device that holds the graph (every op allowed, its parameters and activations within the
    memory) and runs it soonest, its single-sample latency by the closed form, no schedule built: on a device that
    runs one thing at a time (ops or one invocation) the sum of the ops' times, on a parallel host the longest path
    of them; no transfer crosses devices. For a call whose time ran out before any split could be built and scored
    (a 15,000-task sheet under load), as ``method``'s result with ``info["stopped"]``; ``None`` where no device
    holds the graph."""
    begun = time.perf_counter() if start is None else start
    best = one_device_latency(graph, cluster)
    if best is None:
        return None
    placement = Placement(graph, cluster, np.full(graph.n, best[1]), source=method)
    return HeuristicResult(method=method, placement=placement, objective=best[0], seconds=time.perf_counter() - begun,
                           info={"stopped": STOPPED, "fallback": "one-device (closed form)", "stopped_in": phase})


def one_device_latency(graph: Graph, cluster: Cluster) -> tuple[float, int] | None:
    """The one device that holds the graph and runs it soonest, and its latency by the closed form of
    :func:`one_device_closed_form` (one sum or longest path per device): ``(latency, device)``, ``None`` where no
    device holds the graph."""
    times = cluster.times(graph)
    best: tuple[float, int] | None = None
    for d, why in enumerate(one_device_misfits(graph, cluster, times)):
        if why is not None:
            continue
        t = times[:, d]
        latency = graph.longest(t) if cluster.parallel[d] else float(np.sum(t))
        best = (latency, d) if best is None or latency < best[0] else best
    return best


def one_device_split(graph: Graph, cluster: Cluster) -> np.ndarray:
    """Every op on the device :func:`one_device_latency` picks (a split a caller scores by its cost model);
    :class:`~placement_dsl.errors.InfeasibleError` where no device holds the graph."""
    best = one_device_latency(graph, cluster)
    if best is None:
        raise InfeasibleError("no single device holds the graph (its memory, or an op it cannot run)")
    return np.full(graph.n, best[1], dtype=np.int64)


def scored_fallback(problem: Problem, deadline: Deadline, method: str, phase: str, here: bool = False
                    ) -> tuple[HeuristicResult, bool, Any]:
    """:func:`fallback` on ``problem``'s graph, cluster and cost model, and its placement scored as ``problem`` scores
    one (whether it is valid for its terms, and its evaluation: one evaluation, :data:`SCORING`), all within ``deadline``
    (:func:`sized_call`), the splits sized to leave the scoring its time (``here``: in this process, trusted to
    stop by those sizes). :class:`BudgetSpent` says why where even the cheapest split and its scoring do not fit,
    or the child was stopped."""
    g, c = problem.graph, problem.cluster
    need, scoring = fallback_seconds(g, c, "balanced", SCORING), SCORING * EVALUATE_PER_OP * g.n * slowdown()
    if here:  # in this process, the splits sized to the deadline: a child stopped at it leaves nothing it built
        return _scored(problem, deadline.at - scoring, method, phase)
    return sized_call(deadline, need, f"the cheapest split of {g.n} ops and its scoring", _scored, problem, deadline.at - scoring,
                      method, phase)


def sized_call(deadline: Deadline, need: float, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, estimated to take ``need`` seconds, within ``deadline``: in a child stopped at it
    (:func:`~placement_dsl.deadline.call_within`); here where it takes milliseconds (:data:`MILLISECONDS`) and the
    deadline is spent (a tiny graph's answer costs the promise nothing); refused (:class:`BudgetSpent`, saying
    ``what`` needs how long) where it fits neither."""
    left = deadline.left()
    if need > max(left, MILLISECONDS):
        raise BudgetSpent(f"skipped: {what} need ~{need:.1f} s, {left:.1f} s left")
    return fn(*args, **kwargs) if need > left else call_within(deadline, fn, *args, **kwargs)


SCORING = 1  # evaluations a problem scores a placement with (Problem.scored: its violations and evaluation at once)


def _scored(problem: Problem, until: float, method: str, phase: str) -> tuple[HeuristicResult, bool, Any]:
    now = time.monotonic()
    found = fallback(method, problem.graph, problem.cluster, q_model(problem), phase,
                     deadline=Deadline(max(until - now, 0.0), now))  # the splits chosen under the problem's q
    violations, ev = problem.scored(found.placement)
    return found, not violations, ev


def _balanced(graph: Graph, cluster: Cluster, model: CostModel) -> list[HeuristicResult]:
    """The work-balanced slicing of the graph's topological order onto the accelerators, if the cluster allows one.
    Its kernels not loaded yet run in Python (:func:`.jit.interpreted`), as :func:`spread_split`'s do: their loops
    are ``O(n + m)``, where loading numba and every kernel for them is not (a solve's held split of a makespan
    on 5,057 ops: 0.47 s in Python, 1.67 s with the load at load 5, 4.5 s of a 60 s solve at load 8, for a
    split whose searches load no kernel)."""
    try:
        with jit.interpreted():
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
