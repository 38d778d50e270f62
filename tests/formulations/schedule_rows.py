"""Placements checked as starts of the schedule MILP, for its tests: a valid placement at a horizon of its own
makespan must satisfy every row of the model (``conformance.check_template_rows``)."""
from __future__ import annotations

from placement_dsl import testing
from placement_dsl.compile import compile
from placement_dsl.conformance import check_template_rows
from placement_dsl.formulations.schedule import hinted
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem


def broken_rows(problem: Problem, placement: Placement) -> list[str]:
    """The rows of ``problem``'s schedule model, at a horizon of ``placement``'s makespan, that ``placement`` breaks."""
    makespan = problem.evaluate(placement).objective
    return check_template_rows(compile(hinted(problem, makespan), "schedule"), placement)


def best_valid(problem: Problem) -> list[Placement]:
    """Every valid placement of a tiny ``problem`` (brute force), the best by the cost model first."""
    return sorted((p for p in testing.placements(problem) if problem.is_valid(p)),
                  key=lambda p: problem.evaluate(p).objective)
