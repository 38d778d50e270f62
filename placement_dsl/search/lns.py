"""Large-neighbourhood search for the makespan (MOIRAI's schedule, Zhang et al. eq. 4-8).

:func:`schedule_lns` (method ``"schedule-lns"``) starts from a placement that carries its
schedule (list scheduling by default) and repeatedly frees a *window* of ops — consecutive
colocation units in the incumbent's start order — while every other unit keeps its device.
The window is re-solved, warm-started with the incumbent so a step never gets worse, either by
CP-SAT (:mod:`placement_dsl.cpsat`: one model built once, the other units fixed by assumptions,
the whole search in a child process) or by the ``schedule`` MILP on the problem with the other
units pinned (:class:`~placement_dsl.constraints.Pin`, :func:`~placement_dsl.search.pin.resolve_free`). Each step re-optimizes the whole
schedule (every op's and transfer's start), not only the window's. Windows slide over the
schedule with half overlap; after a pass without improvement they grow, then random windows
follow. A window holding every unit that is solved to optimality proves the optimum and ends
the search (``bound`` and ``exact_among`` are then set). Every accepted answer is certified by
the cost model.
"""
from __future__ import annotations

import math
import random
import time
from typing import Any

from ..cluster import Cluster
from ..constraints import Congestion, Memory
from ..cpsat import available, build, from_data, isolated, to_data
from ..deadline import BudgetSpent, Deadline
from ..errors import EvaluationMismatchError, SpecError
from ..evaluate import CostModel, MemoryMode, Objective, evaluate
from ..graph import Graph
from ..heuristics.base import HeuristicResult, deadline_at
from ..heuristics.registry import heuristic
from ..objectives import Makespan
from ..placement import Placement
from ..problem import Problem
from ..schedule import check_schedule, list_schedule
from ..solvers.base import Status
from ..starts import resolve
from . import ScheduleLns
from .pin import resolve_free

MAX_WINDOW = 200  # units a window never exceeds


def makespan_problem(graph: Graph, cluster: Cluster, model: CostModel) -> Problem:
    """The makespan problem a cost model describes: hard memory unless overflow, its congestion."""
    terms = [Memory()] if model.memory is MemoryMode.HARD else []
    return Problem(graph, cluster, Makespan(), [*terms, Congestion(model.congestion.value)])


def _units_by_start(placement: Placement) -> list[int]:
    """Colocation units (their representatives) by their first op's start."""
    g, start = placement.graph, placement.schedule.start
    first: dict[int, float] = {}
    for v in range(g.n):
        u = int(g.group_id[v])
        first[u] = min(first.get(u, math.inf), float(start[v]))
    return sorted(first, key=lambda u: (first[u], u))


class _Steps:
    """Re-solves a window: CP-SAT on one model built once (the other units fixed by assumptions; run it in a
    child process, :func:`~placement_dsl.cpsat.isolated`), or the ``schedule`` MILP with the other units pinned."""

    def __init__(self, problem: Problem, incumbent: Placement, solver: str, threads: int):
        self.problem, self.solver, self.threads = problem, solver, threads
        self.model = None
        if solver == "cpsat":
            self.model = build(problem, incumbent)[0]

    def __call__(self, incumbent: Placement, free: set[int], seconds: float) -> tuple[Placement | None, bool]:
        """A placement (with its schedule) no worse than the incumbent with units outside ``free`` fixed, and
        whether it is proven optimal for the window."""
        if self.model is None:
            result = resolve_free(self.problem, incumbent, free, "schedule", seconds=seconds, solver=self.solver,
                                  threads=self.threads)
            return result.placement, result.status is Status.OPTIMAL and (result.gap or 0.0) <= 1e-9
        g = self.problem.graph
        self.model.hint(incumbent, incumbent.schedule)
        self.model.fix({r: int(incumbent.assign[r]) for r in {int(u) for u in g.group_id} - free})
        solver, _, status = self.model.solve(seconds, self.threads)
        exact = status is Status.OPTIMAL and self.model.scale.exact
        return (self.model.read(solver) if status.has_solution else None), exact


def windows(units: list[int], size: int, rng: random.Random, sweep: bool) -> list[list[int]]:
    """Sliding windows of ``size`` consecutive units (ops, colocation units) with half overlap (``sweep``), else
    one random window."""
    size = max(1, min(size, len(units)))
    if not sweep:
        lo = rng.randrange(0, len(units) - size + 1)
        return [units[lo:lo + size]]
    stride = max(1, size // 2)
    return [units[lo:lo + size] for lo in range(0, max(len(units) - size, 0) + 1, stride)]


SEARCH_SECONDS = 60.0  # schedule-lns's time limit when none is given


def _default_solver() -> str:
    return "cpsat" if available() else "highs"


@heuristic("schedule-lns", optimizes="makespan", options=ScheduleLns)
def schedule_lns(graph: Graph, cluster: Cluster, *, model: CostModel | None = None, seed: int | None = 0,
                 window: int = 16, step_limit: float = 5.0, time_limit: float | None = None,
                 solver: str | None = None, start: str | Placement = "list", threads: int = 1) -> HeuristicResult:
    """Large-neighbourhood search over windows of ops (see the module docstring).

    Parameters
    ----------
    window
        Units freed per step at first (doubled after a pass without improvement, up to
        :data:`MAX_WINDOW`).
    step_limit, time_limit
        Seconds per step and in all (``None``: :data:`SEARCH_SECONDS`), the start's heuristic
        included; a step is not begun with half a second or less left. ``info["stopped"]`` unless
        one window held every unit (proven optimal).
    solver
        ``"cpsat"`` (default when OR-Tools is installed; the search then runs in a child process)
        or a MILP solver (``"highs"``, ``"scip"``).
    start
        A heuristic name or a placement (with its schedule, else list-scheduled).
    """
    t0 = time.perf_counter()
    deadline_at("schedule-lns", time_limit)
    time_limit = SEARCH_SECONDS if time_limit is None else float(time_limit)
    model = model or CostModel.named("makespan")
    problem = makespan_problem(graph, cluster, model)
    incumbent = _start(problem, start, time_limit)
    solver = solver or _default_solver()
    params = {"seed": seed, "window": window, "step_limit": step_limit, "solver": solver, "threads": threads,
              "deadline": time.monotonic() + time_limit - (time.perf_counter() - t0)}  # the child's clock too
    try:
        found = isolated(_search, problem, to_data(incumbent), params, until=params["deadline"]) \
            if solver == "cpsat" else _search(problem, to_data(incumbent), params)
    except BudgetSpent:  # the search's model outgrew the budget before its first step: the start stands
        found = {**to_data(incumbent), "steps": 0, "improvements": 0, "window": window, "proven": False}
    incumbent = from_data(problem, found, "schedule-lns")
    ev = evaluate(incumbent, model)
    proven = found["proven"] and model.objective is Objective.MAKESPAN  # one window held every unit
    return HeuristicResult(method="schedule-lns", placement=incumbent, objective=ev.objective,
                           evaluations=found["steps"], seconds=time.perf_counter() - t0,
                           bound=ev.objective if proven else None, exact_among="all placements" if proven else None,
                           info={"makespan": problem.evaluate(incumbent).objective, "steps": found["steps"],
                                 "improvements": found["improvements"], "solver": solver, "window": found["window"],
                                 "proven_optimal": found["proven"], **({} if found["proven"] else {"stopped": "time limit"})})


def _search(problem: Problem, start: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The search loop (in a child process for CP-SAT): the best placement found, as plain data."""
    incumbent = from_data(problem, start, "schedule-lns")
    best = problem.evaluate(incumbent).objective
    rng, size, steps, better, sweep = random.Random(params["seed"]), params["window"], 0, 0, True
    step = _Steps(problem, incumbent, params["solver"], params["threads"])
    while time.monotonic() < params["deadline"]:
        improved = False
        for free in windows(_units_by_start(incumbent), size, rng, sweep):
            left = params["deadline"] - time.monotonic()
            if left <= 0.5:
                break
            found, proven = step(incumbent, set(free), min(params["step_limit"], left))
            steps += 1
            objective = math.inf if found is None else _certified(problem, found)
            if objective < best * (1 - 1e-9):
                incumbent, best, improved, better = _rebase(problem, found), objective, True, better + 1
            if proven and len(free) >= len(_units_by_start(incumbent)):
                return {**to_data(incumbent), "steps": steps, "improvements": better, "window": size, "proven": True}
        if not improved:
            if size >= min(MAX_WINDOW, len(_units_by_start(incumbent))):
                sweep = False
            size = min(2 * size, MAX_WINDOW)
    return {**to_data(incumbent), "steps": steps, "improvements": better, "window": size, "proven": False}


def _certified(problem: Problem, placement: Placement) -> float:
    """The cost model's makespan of a step's answer; an invalid answer is a bug in the model, never kept."""
    ev = problem.evaluate(placement)
    if not ev.valid:
        raise EvaluationMismatchError(f"schedule-lns: a step returned a schedule the cost model rejects "
                                      f"({'; '.join(v.message for v in ev.violations[:3])})")
    return ev.objective


def _rebase(problem: Problem, placement: Placement) -> Placement:
    return Placement(problem.graph, problem.cluster, placement.assign, "schedule-lns", schedule=placement.schedule)


def _start(problem: Problem, start: Any, time_limit: float | None = None) -> Placement:
    """The starting placement (:func:`placement_dsl.starts.resolve`) with a schedule valid for the problem."""
    # a named start leaves half the budget to the search (the whole budget went to it before)
    found = resolve(problem, start, deadline=None if time_limit is None else Deadline(time_limit),
                    keep=0.0 if time_limit is None else time_limit / 2)
    if not found.usable:
        why = found.refusal.removeprefix("warm start refused: ")
        raise SpecError(f"schedule-lns: the start {start if isinstance(start, str) else 'placement'} is refused ({why})")
    placement = found.placement
    congestion = problem.cost_model().congestion
    schedule = placement.schedule
    if schedule is None or check_schedule(placement, schedule, congestion)[1]:
        schedule = list_schedule(placement, congestion)
    return Placement(problem.graph, problem.cluster, placement.assign, "schedule-lns", schedule=schedule)
