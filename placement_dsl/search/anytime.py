"""The single-sample search a solve runs when its model is too large for its budget: a coarse solve, then LNS.

:func:`contracted_lns` (methods ``"latency-lns"`` and ``"makespan-lns"``: one mechanism for both
objectives) improves an incumbent until a deadline by contracted steps
(:func:`placement_dsl.search.contracted.step`):

1. **the coarse solve** (:data:`COARSE_SHARE` of the time): the whole graph contracted to intervals of
   the incumbent's order that its model can be built and searched with, every interval free, solved by
   the objective's MIP (or CP-SAT for the makespan when OR-Tools is installed) warm-started by the
   incumbent; MOIRAI's fused chains (conv-bn-relu, ...) sit inside such intervals whenever the incumbent
   keeps them on one device;
2. **LNS over windows** of the incumbent's order: a window of ops stays fine and free, the rest is
   contracted and pinned where the incumbent runs it; windows slide with half overlap and double after
   a pass without improvement, then come at random; until the deadline, or, with ``patience``, until that
   many steps in a row found nothing (the caller has a better use for the time: on GPT-3 330M the windows
   found nothing in 181 s of a 300 s solve); a window whose CP-SAT model is larger than
   :data:`~.contracted.CPSAT_WINDOW_OPS` is shortened until it fits, and the search ends at once where the ops
   outside any window alone are more coarse ops than that.

Each step is kept only when the cost model on the full graph finds it valid and better, so the answer is
never worse than the start. No bound comes out of it: a contracted model's bound holds for its
contraction only. It is the one window search of the single-sample family: the former makespan LNS
(``"schedule-lns"``) forwards here (:func:`schedule_lns_options`).
"""
from __future__ import annotations

import random
import time
from dataclasses import replace
from typing import Any

from ..cluster import Cluster
from ..constraints import Contiguous, Memory, Subgraphs
from ..deadline import BudgetSpent, Deadline
from ..errors import SpecError
from ..evaluate import CostModel, MemoryMode, Objective, evaluate
from ..graph import Graph
from ..heuristics.base import HeuristicResult, TimeLimitReached, deadline_at
from ..heuristics.fallback import scored_fallback
from ..heuristics.registry import heuristic
from ..objectives import Latency
from ..placement import Placement
from ..problem import Problem
from ..schedule import list_schedule
from ..starts import resolve
from .contracted import CHILD, OVERSIZED, order, remaining, step, sub_solver
from .lns import makespan_problem, windows

COARSE_SHARE = 0.4  # of the time that the coarse solve gets
WINDOW = 24  # ops a window frees at first
STEP_SECONDS = 15.0  # a window's re-solve, at most
MIN_STEP = 2.0  # seconds below which no step starts
SLACK = 1.0  # seconds a step's solve may run past its limit (reading the answer back, the checks), kept free
SEARCH_SECONDS = 60.0  # the time limit when none is given
EXPAND_EVALS = 12.0  # a step's expansion and scores of its answer (:func:`~.contracted.step`'s ``after``), in
# evaluations of the start, until a step measures its own: 0.47 s where the start's took 0.05 s (a 5,057-op GPT),
# where the fixed 1 ms per op kept 5.1 s of each step and skipped the coarse step of a 23 s search


def coarse_seconds(left: float) -> float:
    """The coarse step's seconds of the ``left`` the search has: :data:`COARSE_SHARE` of them, or all but
    :data:`SLACK` where no window step (:data:`MIN_STEP` + :data:`SLACK`) would fit after that share (a short
    budget: at 2.4 s the share left the coarse step nothing)."""
    share = COARSE_SHARE * left - SLACK
    return share if left - share - SLACK >= MIN_STEP + SLACK else left - SLACK


def coarse_solver(solver: str, seconds: float) -> str:
    """The coarse step's solver: HiGHS where CP-SAT's child process (:data:`~.contracted.CHILD` to start and answer)
    would leave its model less than :data:`MIN_STEP` (transformer-small's 50 ops in 2.5 s: CP-SAT's step was
    skipped, HiGHS's coarse model of 10 ops reached 3.721 from the start's 4.328)."""
    return "highs" if solver == "cpsat" and seconds - CHILD < MIN_STEP else solver


def problem_of(graph: Graph, cluster: Cluster, model: CostModel) -> Problem:
    """The single-sample problem a cost model describes: latency (hard memory unless overflow; contiguity or the
    subgraph limit it requires) or the makespan (:func:`placement_dsl.search.lns.makespan_problem`)."""
    if model.objective is Objective.MAKESPAN:
        return makespan_problem(graph, cluster, model)
    if model.objective is not Objective.LATENCY:
        raise SpecError(f"contracted LNS searches latency and makespan; the cost model's objective is "
                        f"{model.objective.value!r}")
    terms: list[Any] = [Memory()] if model.memory is MemoryMode.HARD else []
    if "contiguous" in model.require:
        terms.append(Contiguous())
    if model.max_subgraphs:
        terms.append(Subgraphs(int(model.max_subgraphs)))
    return Problem(graph, cluster, Latency(), terms)


def search(problem: Problem, start: Placement, seconds: float, *, seed: int | None = 0, window: int = WINDOW,
           solver: str | None = None, coarse: bool = True, step_seconds: float = STEP_SECONDS,
           patience: int | None = None) -> tuple[Placement, dict[str, Any]]:
    """Improve ``start`` (valid for ``problem``) for ``seconds``: the coarse solve, then windows (see the module
    docstring) until ``patience`` window steps in a row find nothing (``None``: until the time is spent). The best
    placement and ``info`` (steps, improvements, seconds per phase, the coarse step's sizes, ``stalled``)."""
    t0 = time.perf_counter()
    deadline = t0 + seconds
    solver = solver or sub_solver(problem)
    began = time.perf_counter()
    incumbent, best = start, problem.evaluate(start).objective
    after = EXPAND_EVALS * (time.perf_counter() - began)  # a step's expansion and scores, till one is measured
    info: dict[str, Any] = {"start": best, "steps": 0, "improvements": 0, "coarse_seconds": 0.0, "lns_seconds": 0.0}
    if coarse and remaining(deadline) >= MIN_STEP:
        seconds_coarse = coarse_seconds(remaining(deadline))
        found, info["coarse"] = step(problem, incumbent, None, seconds_coarse, coarse_solver(solver, seconds_coarse),
                                     after=after)
        after = max(after, info["coarse"].get("expand_seconds", 0.0))
        info["steps"] += 1
        if found is not None:
            incumbent, best, info["improvements"] = found, problem.evaluate(found).objective, 1
        info["coarse_seconds"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    rng, size, sweep, idle = random.Random(seed), max(1, window), True, 0
    while remaining(deadline) >= MIN_STEP + SLACK and (patience is None or idle < patience):
        improved = False
        for free in windows(order(problem, incumbent), size, rng, sweep):
            seconds_left = remaining(deadline)
            if seconds_left < MIN_STEP + SLACK or (patience is not None and idle >= patience):
                break
            found, made = step(problem, incumbent, free, min(step_seconds, seconds_left - SLACK), solver, after=after)
            after = max(after, made.get("expand_seconds", 0.0))
            info["steps"] += 1
            idle += "skipped" not in made  # a step that built no model tells nothing of the neighbourhood
            if str(made.get("skipped", "")).startswith(OVERSIZED):  # every window's model is as large: the time
                info["oversized"] = made["skipped"]  # goes back to the caller (a solve's restarts of its improving
                return incumbent, {**info, "lns_seconds": time.perf_counter() - t1, "window": size,  # method)
                                   "objective": best, "stalled": True}
            if found is not None:
                incumbent, best, improved, idle = found, problem.evaluate(found).objective, True, 0
                info["improvements"] += 1
                break  # the order changed with the incumbent: windows anew
        if not improved:
            if size >= problem.graph.n:
                sweep = False
            size = min(2 * size, problem.graph.n)
    info.update(lns_seconds=time.perf_counter() - t1, window=size, objective=best,
                stalled=patience is not None and idle >= patience)
    return incumbent, info


def contracted_lns(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = 0,
                   time_limit: float | None = None, start: str | Placement = "auto", problem: Problem | None = None,
                   solver: str | None = None, window: int = WINDOW, coarse: bool = True,
                   step_seconds: float = STEP_SECONDS, patience: int | None = None) -> HeuristicResult:
    """The coarse solve, then LNS over windows, from ``start`` (a heuristic name, ``"auto"`` or a placement valid for
    the problem) within ``time_limit`` seconds (``None``: :data:`SEARCH_SECONDS`), start included. ``problem``: the
    problem to search (its pins and terms), else the one the cost model describes (:func:`problem_of`); ``solver``:
    the sub-solver (default CP-SAT for the makespan when installed, else HiGHS)."""
    t0 = time.perf_counter()
    deadline_at("contracted-lns", time_limit)
    seconds = SEARCH_SECONDS if time_limit is None else float(time_limit)
    deadline = Deadline(seconds)
    model = model or CostModel.named("latency")
    problem = problem or problem_of(graph, cluster, model)
    if isinstance(start, Placement):
        incumbent, replaced = start, {}
        if problem.violations(incumbent):
            raise SpecError(f"contracted LNS: the start is invalid for the problem ({problem.violations(incumbent)[0]})")
    else:
        incumbent, replaced = _start(problem, start, deadline)
    found, info = search(problem, incumbent, deadline.left(), seed=seed, window=window,
                         solver=solver, coarse=coarse, step_seconds=step_seconds, patience=patience)
    placement = Placement(graph, cluster, found.assign, "contracted-lns", schedule=found.schedule)
    return HeuristicResult(method="contracted-lns", placement=placement, objective=evaluate(placement, model).objective,
                           seconds=time.perf_counter() - t0, evaluations=info["steps"],
                           info={**info, **replaced, **({} if info["stalled"] else {"stopped": "time limit"})})


def _start(problem: Problem, spec: Any, deadline: Deadline) -> tuple[Placement, dict[str, Any]]:
    """The start ``spec`` names (a heuristic, ``"auto"``), run in half of ``deadline``, or all of it where the other
    half would hold no window step (a 20,000-task sheet at 15 s under load gave its list schedule 0.1 s, and no step
    ran in the 1.5 s kept for them). Where it found no valid placement there (its share spent under load), the
    cheapest split the methods fall back to (:func:`~placement_dsl.heuristics.fallback.scored_fallback`), built and
    scored in what is left, with ``info["start_refused"]`` saying why. A spent budget is no bad input: where even
    that split does not fit, :class:`~placement_dsl.heuristics.base.TimeLimitReached` says so."""
    half = deadline.left() / 2  # the search's, unless no step of it would fit there: then the start's too
    found = resolve(problem, spec, deadline=deadline, keep=half if half >= MIN_STEP + SLACK else 0.0)
    if found.usable:
        return found.placement, {}
    why = f"the start {spec!r} is refused ({found.refusal})"
    try:
        result, valid, _ = scored_fallback(problem, deadline, "contracted-lns", why)
    except BudgetSpent as err:
        raise TimeLimitReached(f"contracted LNS: no placement within the time limit: {why}; {err}") from None
    if not valid:
        raise TimeLimitReached(f"contracted LNS: no valid placement within the time limit: {why}, and the "
                               f"{result.info.get('fallback')} split is invalid for the problem")
    placement = result.placement
    if problem.cost_model().objective is Objective.MAKESPAN and placement.schedule is None:  # scored once here,
        placement = Placement(placement.graph, placement.cluster, placement.assign, placement.source,  # checked after
                              schedule=list_schedule(placement, problem.cost_model().congestion))
    return placement, {"start_refused": f"{why}; started from the {result.info.get('fallback')} split instead"}


@heuristic("latency-lns", optimizes="latency")
def latency_lns(graph: Graph, cluster: Cluster, **options: Any) -> HeuristicResult:
    """The coarse solve, then LNS over windows, for the latency (:func:`contracted_lns`)."""
    return _named("latency-lns", contracted_lns(graph, cluster, **options))


@heuristic("makespan-lns", optimizes="makespan")
def makespan_lns(graph: Graph, cluster: Cluster, **options: Any) -> HeuristicResult:
    """The coarse solve, then LNS over windows, for the makespan (:func:`contracted_lns`)."""
    return _named("makespan-lns", contracted_lns(graph, cluster, **{"model": CostModel.named("makespan"), **options}))


def schedule_lns_options(graph: Graph, cluster: Cluster, options: dict[str, Any]) -> HeuristicResult:
    """The deprecated ``"schedule-lns"``'s options on the contracted LNS for the makespan: ``window``, ``seed``,
    ``start`` (its default ``"list"``), ``solver`` and ``time_limit`` as they were; ``step_limit`` caps a window's
    re-solve (a step's model is built anew, so at least :data:`MIN_STEP` + 1 s); ``threads`` is not used (each
    step's solve runs on one)."""
    model = options.get("model") or CostModel.named("makespan")
    if model.objective is not Objective.MAKESPAN:
        raise SpecError(f"schedule-lns searches the makespan; the cost model's objective is {model.objective.value!r}")
    step_seconds = max(float(options.get("step_limit", STEP_SECONDS)), MIN_STEP + SLACK)
    found = contracted_lns(graph, cluster, model=model, seed=options.get("seed", 0),
                           time_limit=options.get("time_limit"), start=options.get("start", "list"),
                           solver=options.get("solver"), window=int(options.get("window", WINDOW)),
                           step_seconds=step_seconds)
    placement = found.placement
    if placement.schedule is None:  # the method always answered with its schedule
        placement = Placement(placement.graph, placement.cluster, placement.assign, placement.source,
                              schedule=list_schedule(placement, model.congestion))
        found = replace(found, placement=placement)
    return _named("schedule-lns", found)


def _named(method: str, result: HeuristicResult) -> HeuristicResult:
    placement = Placement(result.placement.graph, result.placement.cluster, result.placement.assign, method,
                          schedule=result.placement.schedule)
    return replace(result, method=method, placement=placement)

__all__ = ["coarse_seconds", "coarse_solver", "contracted_lns", "latency_lns", "makespan_lns", "problem_of", "schedule_lns_options", "search"]
