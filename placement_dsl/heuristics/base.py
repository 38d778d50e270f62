"""The common interface of the heuristics: a result type, :func:`run` by method name (:mod:`.registry`), time limits."""
from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..cluster import Cluster
from ..deadline import scoring_seconds
from ..deprecated import moved
from ..errors import InfeasibleError, PlacementError, SpecError
from ..evaluate import CostModel, Objective, evaluate, execution, unrouted
from ..graph import Graph
from ..pipeline_orders import FOLDS, ORDERS
from ..placement import Placement
from ..schedule import list_schedule
from ..task_shift import task_shift
from . import fold_ranks, kernel_cache, registry, routable

_moved = moved(__name__, {"fallback": "placement_dsl.heuristics.fallback"})


@dataclass(frozen=True)
class HeuristicResult:
    """A heuristic's placement with its cost-model objective.

    ``bound`` is a proven lower bound where the method proves one (the DP over ideals is
    exact among its class, :data:`DP_CLASS`: ``bound == objective`` with ``exact_among`` saying over
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
    valid: bool | None = None  # the cost model's verdict on the placement where :func:`run` made one (else unknown)


DP_CLASS = "dag-ordered contiguous"
"""What the DPs over ideals are exact among (``exact_among``): contiguous splits whose quotient graph is acyclic, a
chain of ideals (Tarnawski et al. Fact 5.2) in some order of the devices. A contiguous split whose quotient has a
cycle (two devices that each send the other a tensor) lies outside it and may be better: a host CPU holding two
unrelated ops, say."""


def dp_claim(value: float, objective: float) -> str | None:
    """Why a DP's split certifies nothing (``None`` where it may): the cost model does not reproduce the DP's value
    (a term the DP does not see, e.g. a pin or a link's load, prices the split above it)."""
    if math.isfinite(objective) and math.isclose(objective, value, rel_tol=1e-7, abs_tol=1e-12):
        return None
    return (f"no bound: the cost model scores the DP's split {objective:.6g}, the DP's own loads {value:.6g} (a term "
            "the DP does not see, such as a pin or a link's load, prices it)")


def __getattr__(name: str) -> Any:
    """``METHODS`` and ``OPTIMIZES``, the old tables, read from the registry (deprecated)."""
    if name in ("METHODS", "OPTIMIZES"):
        warnings.warn(f"placement_dsl.heuristics.base.{name} is deprecated; use placement_dsl.heuristics.registry",
                      DeprecationWarning, stacklevel=2)
        table = registry.load()
        if name == "METHODS":
            return {h.name: h.where for h in table.values()}
        return {h.name: h.optimizes for h in table.values()}
    return _moved(name)


def methods_for(objective: str) -> list[str]:
    """The methods that search for ``objective`` (e.g. ``"max_load"``): its own, and those that take the model's."""
    return registry.methods_for(objective)


def resolve(method: str) -> Callable[..., HeuristicResult]:
    """The function of the registered method ``method`` (:class:`SpecError` naming the choices when unknown)."""
    return registry.get(method).fn


def run(method: str, graph: Graph, cluster: Cluster, *, model: CostModel | None = None,
        seed: int | None = 0, time_limit: float | None = None, **options: Any) -> HeuristicResult:
    """Run a heuristic by name and re-check its objective with the cost model.

    ``time_limit`` (seconds of wall clock from this call, ``None``: none) is passed to the
    method, which returns its best placement so far when it runs out (``info["stopped"]``). Under a limit, kernels
    whose numba cache is cold run in Python while a background process compiles them (:mod:`.kernel_cache`).
    ``options`` are checked against the method's declared ones (:mod:`.manifest`): an unknown or invalid
    one is a :class:`SpecError` naming the method and the option.

    On a cluster whose links leave a pair of devices without a route, an answer that sends a tensor across such a
    pair (which the cost model refuses) is replaced by the best valid one of the method run within each group of
    devices that reach one another (:mod:`.routable`), the groups sharing the time the method's own run left of
    half the limit; its bound, which holds for the group only, is dropped. Where no group's answer is valid the
    method's own is returned, its unrouted tensors named by the cost model.
    """
    model = model or CostModel()
    registry.get(method).refuse(model.objective.value)  # before the method's module loads
    if model.task_overhead and not model.message_latency:
        return _with_task_overhead(method, graph, cluster, model, seed, time_limit, options)
    parts = routable.groups(cluster)
    if len(parts) == 1:
        return _run(method, graph, cluster, model, seed, time_limit, options)
    at = deadline_at(method, time_limit)
    try:
        first = _run(method, graph, cluster, model, seed, None if time_limit is None else time_limit / 2, options)
    except InfeasibleError as err:  # e.g. a list schedule whose ops' inputs reach no device by the routes
        found = _within_groups(method, None, parts, model, seed, at, options, (graph, cluster, str(err)))
        if found is None:
            raise
        return found
    if not unrouted(first.placement):
        return first
    return _within_groups(method, first, parts, model, seed, at, options)


def _with_task_overhead(method: str, graph: Graph, cluster: Cluster, model: CostModel, seed: int | None,
                        time_limit: float | None, options: dict[str, Any]) -> HeuristicResult:
    """:func:`run` under a runtime's fixed time per pass (``model.task_overhead``, ``t``), which the searches leave
    out: where it shifts every valid split's objective alike (:func:`~placement_dsl.task_shift.task_shift`), the
    search runs without it, the answer is priced with it and a bound rises by the shift (by ``t`` where the passes
    per device are not one number, and the answer is not claimed exact). Elsewhere the term moves the best split
    and is refused."""
    shift = task_shift(model, graph, cluster, bool(options.get("replication")))
    if shift.refusal:
        raise SpecError(f"{method}: {shift.refusal}; search without it and evaluate the answer with it")
    found = run(method, graph, cluster, model=replace(model, task_overhead=0.0), seed=seed, time_limit=time_limit,
                **options)
    objective = evaluate(found.placement, model).objective
    uniform = shift.exact is not None and not found.placement.replicated
    return replace(found, objective=objective, bound=shift.raised(found.bound, uniform),
                   exact_among=found.exact_among if uniform else None,
                   info={**found.info, "task_overhead": f"{shift.per_pass:g} per pass, priced as the same "
                                                        f"{shift.passes if uniform else 'one or two'} passes on "
                                                        "every device holding ops"})


def _within_groups(method: str, first: HeuristicResult | None, parts: list[list[int]], model: CostModel,
                   seed: int | None, at: float | None, options: dict[str, Any],
                   failed: tuple[Graph, Cluster, str] | None = None) -> HeuristicResult | None:
    """The best valid answer of ``method`` run on each group's cluster (:func:`.routable.sub_cluster`) until ``at``,
    on the whole cluster; ``first`` (the method's own answer, unrouted) where none is valid. ``first`` is ``None``
    where the method found no answer on the whole cluster: ``failed`` holds its graph, cluster and why, and
    ``None`` is returned where no group's answer is valid either."""
    g, c = (first.placement.graph, first.placement.cluster) if first is not None else failed[:2]
    best: tuple[float, HeuristicResult] | None = None
    for i, members in enumerate(parts):
        limit = None if at is None else left(at) / (len(parts) - i)
        try:
            found = _run(method, g, routable.sub_cluster(c, members), model, seed, limit, options)
        except PlacementError:  # the group cannot run an op, hold the graph, or take an option naming another device
            continue
        placement = found.placement.with_cluster(c)
        ev = evaluate(placement, model)
        if ev.valid and (best is None or ev.objective < best[0]):
            names = [c.names[d] for d in members]
            why = (f"{method} found no split of the whole cluster ({failed[2]})" if first is None else
                   f"{method}'s split sent a tensor between devices with no route ({_first_unrouted(first.placement)})")
            info = {**found.info, "routes": f"{why}; searched within {names}"}
            best = ev.objective, replace(found, placement=placement, objective=ev.objective, bound=None,
                                         exact_among=None, info=info)
    return first if best is None else best[1]


def _first_unrouted(placement: Placement) -> str:
    """The first unrouted tensor of ``placement`` as the cost model says it."""
    return next((v.message for v in unrouted(placement)), "")


def _run(method: str, graph: Graph, cluster: Cluster, model: CostModel, seed: int | None,
         time_limit: float | None, options: dict[str, Any]) -> HeuristicResult:
    """:func:`run` on one cluster."""
    if model.task_overhead or model.message_latency:
        raise SpecError(f"{method}: the cost model's task_overhead ({model.task_overhead}) and message_latency "
                        f"({model.message_latency}) are priced by the evaluator and the simulator only; search "
                        "without them and evaluate the answer with them")
    start = time.perf_counter()
    at = deadline_at(method, time_limit)
    options = registry.get(method).check(options)
    fn = resolve(method)
    with kernel_cache.limited(method, time_limit):  # a cold kernel cache: Python, not a minute compiling
        try:
            result = fn(graph, cluster, model=model, seed=seed, time_limit=own_limit(time_limit, graph, model),
                        **options)
        except InfeasibleError as err:  # one stage per device does not fit; v per rank may (folded below)
            if (model.virtual or 1) == 1 or model.name in FOLDS:
                raise
            result = HeuristicResult(method, Placement(graph, cluster, np.zeros(graph.n, dtype=np.int64)), math.inf,
                                     time.perf_counter() - start, info={"infeasible": str(err)})
        result = _scheduled(result, model)
        verdict = evaluate(result.placement, model)
        if not verdict.valid and result.info.get("stopped") == STOPPED:  # the fallback's slicing runs kernels too
            result, verdict = _valid_when_stopped(method, result, verdict, model, start)
    if model.name in ORDERS and not verdict.valid:
        result, verdict = _folded(method, result, verdict, model, at)
    check = verdict.objective
    result = replace(result, valid=verdict.valid)  # a caller need not score it again (latency-best's candidates)
    if not verdict.valid:
        result = _declined(method, _off_pin(method, result), verdict)
    if abs(check - result.objective) > 1e-6 * max(1.0, abs(check)):
        raise AssertionError(f"heuristic {method!r} reported {result.objective} but the cost model says {check}")
    if result.seconds == 0.0:
        object.__setattr__(result, "seconds", time.perf_counter() - start)
    if model.objective is Objective.LATENCY:
        result = _latency_verdict(method, result, check)
    if model.name in ORDERS and (model.microbatches is not None or model.name in FOLDS or (model.virtual or 1) > 1):
        result = replace(result, bound=None, exact_among=None)  # the bubble of torch's orders, a rank's two devices
        # (ZBV) or its v stages: no max-load method is exact for it (objectives.Interleaved1F1B)
    return result


def _scheduled(result: HeuristicResult, model: CostModel) -> HeuristicResult:
    """A single-sample answer on devices that run one op at a time, without the schedule the cost model would list
    for it (greedy's, one device's), with that schedule: its re-check here costs the same (a list schedule, then
    its check), and every later scoring of the answer (a command's report) only checks it, where each built it anew
    (a list schedule of 63,874 ops: 0.5-1.2 s of CPU)."""
    placement = result.placement
    if model.objective not in (Objective.LATENCY, Objective.MAKESPAN) or placement.schedule is not None \
            or placement.replicated:
        return result
    try:
        if execution(placement.cluster) != "ops":  # invocations: the placement fixes the schedule
            return result
        schedule = list_schedule(placement, model.congestion)
    except SpecError:  # an op on a device that cannot run it, a tensor without a route: the re-check names it
        return result
    return replace(result, placement=Placement(placement.graph, placement.cluster, placement.assign,
                                               placement.source, schedule=schedule))


def _off_pin(method: str, result: HeuristicResult) -> HeuristicResult:
    """An answer placing a pinned op (``graph.pinned``) off its device: the method searched as if the pin were not
    there (the DP over ideals and SliceGraph see devices by kind), so its bound and exactness hold for the unpinned
    graph, not for this one. Both are dropped and ``info["pins"]`` says so, rather than an infinite objective
    standing as a proven bound."""
    placement = result.placement
    names = placement.cluster.names
    off = [(placement.graph.ops[i].name, dev, names[int(placement.assign[i])])
           for i, dev in placement.graph.pinned.items() if names[int(placement.assign[i])] != dev]
    if not off:
        return result
    op, dev, on = off[0]
    note = (f"{method} does not honour pins: op {op!r} pinned to {dev!r} is on {on!r}"
            f"{f' (and {len(off) - 1} more)' if len(off) > 1 else ''}; no bound is claimed")
    return replace(result, bound=None, exact_among=None, info={**result.info, "pins": note})


def _valid_when_stopped(method: str, result: HeuristicResult, verdict: Any, model: CostModel,
                        start: float) -> tuple[HeuristicResult, Any]:
    """A method stopped at its time limit may hold a split it has not checked (SliceGraph's work-balanced slicing
    when its DP did not end, which can overfill a device's memory): the cost model rejects it, and the method's
    answer becomes the split the methods fall back to when stopped before they hold one (:data:`.registry.FALLBACK`,
    one mechanism for both), unless that one is invalid too."""
    why = "; ".join(v.message for v in verdict.binding[:1])
    phase = f"{result.info.get('stopped_in', 'the search')}; its split was invalid ({why})"
    g, c = result.placement.graph, result.placement.cluster
    try:
        found = registry.fallback()(method, g, c, model, phase, start)
    except PlacementError:  # no split could be built
        return result, verdict
    checked = evaluate(found.placement, model)
    return (found, checked) if checked.valid else (result, verdict)


def _declined(method: str, result: HeuristicResult, verdict: Any) -> HeuristicResult:
    """An answer the cost model rejects, said to be none: ``info["declined"]`` names the first violation (a finite
    objective, e.g. a device's memory overfilled under the ranks' stashes, is no answer either)."""
    if "declined" in result.info:
        return result
    why = next((v.message for v in verdict.violations if v.counts(verdict.model.require)), "invalid")
    return replace(result, info={**result.info, "declined": f"{method} found no valid split: {why}"})


def _folded(method: str, result: HeuristicResult, verdict: Any, model: CostModel,
            at: float | None) -> tuple[HeuristicResult, Any]:
    """Under torch's orders (:data:`~placement_dsl.pipeline_orders.ORDERS`), an invalid answer made into a split the
    orders run (:func:`.fold_ranks.fold`: the V's fold under ZBV; one stage per device, a rank count whose rounds split
    the micro-batches under the round-robin orders; ``v`` stages per rank where the model asks ``virtual=v``), with the cost model's verdict on it. It replaces the answer when
    it is valid or the answer had no time at all (the orders could not run it); else the answer is kept, and where no
    split exists ``info["declined"]`` says why in one line.

    A method stopped by its limit leaves the fold no time: the fold makes its first :func:`fold_scores` scores
    whatever the deadline, and where the fold of the method's split is still invalid, the split the methods fall back
    to (:data:`.registry.FALLBACK`) is folded in its place."""
    least = fold_scores(result.placement.graph.n)
    placement = fold_ranks.fold(result.placement, model, at, least)
    if result.info.get("stopped") == STOPPED and (placement is None or not evaluate(placement, model).valid):
        placement = _fallback_folded(method, result, model, at, least) or placement
    size = result.placement.cluster.size
    if placement is None:
        need = "the V needs an even number of stages, at least 2" if model.name in FOLDS else \
            f"the orders need a rank count whose rounds split microbatches={model.microbatches}"
        what = "one stage per device"
        if (model.virtual or 1) > 1 and model.name not in FOLDS:
            what = f"{model.virtual} stages per rank"
            need = f"{need}, at least 2 ranks, and as many stages as the graph has forward ops (with their gradients)"
        why = f"{model.name}: no split of {what} runs on the cluster's {size} device(s); {need}"
        return replace(result, info={**result.info, "declined": why}), verdict
    ev = evaluate(placement, model)
    if not ev.valid and math.isfinite(verdict.objective):
        return result, verdict
    ranks = len(set(placement.assign.tolist()))
    onto = "the V's ranks" if model.name in FOLDS else \
        f"{ranks} ranks, {model.virtual} stages each" if (model.virtual or 1) > 1 else f"{ranks} ranks, a stage each"
    info = {**result.info, "folded": f"{method}'s answer folded onto {onto} (it was {result.objective})"}
    return replace(result, placement=placement, objective=ev.objective, info=info), ev


FOLD_SCORES = 200  # the cost model's scores a fold makes past the deadline at most (the V of a 76-op transformer
# on 3 accelerators and a CPU, from one device's split: valid and as good as without a limit after 30)
FOLD_SECONDS = 2.0  # ... and at most this many seconds of them, by scoring_seconds: two folds within limit + 5 s


def fold_scores(ops: int) -> int:
    """The scores of the cost model a fold of ``ops`` ops makes whatever the deadline (:func:`_folded`):
    :data:`FOLD_SCORES`, fewer where they would take more than :data:`FOLD_SECONDS` on this machine as loaded now."""
    return min(FOLD_SCORES, int(FOLD_SECONDS / max(scoring_seconds(ops, False), 1e-9)))


def _fallback_folded(method: str, result: HeuristicResult, model: CostModel, at: float | None,
                     least: int) -> Placement | None:
    """The fold of the split a stopped method falls back to (:data:`.registry.FALLBACK`), if it is valid."""
    g, c = result.placement.graph, result.placement.cluster
    try:
        found = registry.fallback()(method, g, c, model, str(result.info.get("stopped_in", "the search")))
    except PlacementError:  # no split could be built
        return None
    placement = fold_ranks.fold(found.placement, model, at, least)
    return placement if placement is not None and evaluate(placement, model).valid else None


# ---------------------------------------------------------------------------- time limits
STOPPED = "time limit"
"""``info["stopped"]`` of a result a method returned because its time limit passed."""


class TimeLimitReached(PlacementError):
    """A heuristic's time limit passed before it held any placement (and it has no fallback to build)."""


class ColdKernels(TimeLimitReached):
    """The time limit passed while a kernel ran in Python because numba's cache was cold: a background process
    compiles it (:mod:`.kernel_cache`), and a caller with time left may run the method again once that compile has
    ended (:func:`.kernel_cache.wait_compiled`), compiled."""


def deadline_at(method: str, time_limit: float | None) -> float | None:
    """The ``time.monotonic()`` at which ``time_limit`` seconds from now end (``None``: no limit).

    Raises :class:`SpecError` unless ``time_limit`` is ``None`` or a number of seconds ``>= 0``.
    """
    if time_limit is None:
        return None
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit >= 0:
        raise SpecError(f"{method}: time_limit must be a number of seconds >= 0 or None, got {time_limit!r}")
    return time.monotonic() + float(time_limit)


def own_limit(time_limit: float | None, graph: Graph, model: CostModel) -> float | None:
    """A method's own share of :func:`run`'s ``time_limit``: less the re-check of its answer by the cost model that
    follows it (:func:`~placement_dsl.deadline.scoring_seconds`), at most half of it. A list schedule of a
    20,000-task sheet given the whole limit was re-checked past it (18.1 s for a 15 s command, load 5.6)."""
    if time_limit is None:
        return None
    single = model.objective in (Objective.LATENCY, Objective.MAKESPAN)
    return time_limit - min(scoring_seconds(graph.n, single), 0.5 * time_limit)


def cut_at(at: float | None, graph: Graph) -> float | None:
    """When a list schedule of ``graph`` bounded by ``at`` stops comparing devices: early enough that the ops left
    are placed and its schedule scored by ``at`` (:func:`~placement_dsl.deadline.scoring_seconds`, at most half
    of what is left now)."""
    if at is None:
        return None
    return at - min(scoring_seconds(graph.n, True), 0.5 * max(at - time.monotonic(), 0.0))


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


def _latency_verdict(method: str, result: HeuristicResult, latency: float) -> HeuristicResult:
    """Under a latency model: what the method optimized and its split's latency; no bound unless it searched latency.

    A max-load method (the DP over ideals, SliceGraph, ...) returns the best split for its own
    objective, which Tarnawski §7 scores for latency as a baseline: being exact among
    contiguous splits for max-load says nothing about latency.
    """
    goal = result.info.get("optimizes", registry.optimizes(method, "not latency"))
    info = {**result.info, "optimizes": goal, "latency": latency}
    if goal in ("latency", "cost_model"):
        return replace(result, info=info)
    return replace(result, info=info, bound=None, exact_among=None)
