"""A model searched to its time limit without a solution of its own still answers: the start it was given, else the
fallback split, with the search's bound where it proved more than the closed forms (placement_dsl.stopped)."""
from __future__ import annotations

import pytest

from placement_dsl import solve as solve_module
from placement_dsl import testing
from placement_dsl.solve import solve
from placement_dsl.solvers import SolverOutcome, Status


def _no_solution(bound):
    def run(model, solver, options, start=None):  # a solver that takes no start, or refused it
        return SolverOutcome(Status.TIME_LIMIT_NO_SOLUTION, None, bound, False, solver)
    return run


def test_a_search_without_a_solution_answers_the_start_with_the_search_s_bound(monkeypatch):
    problem, optimum = testing.contiguity_binds()
    start = testing.brute_force(problem)[1]
    monkeypatch.setattr(solve_module, "solve_model", _no_solution(1e9))  # proves every placement at least the start's
    result = solve(problem, warm_start=start, time_limit=30)
    assert result.status is Status.TIME_LIMIT_FEASIBLE and result.placement is not None
    assert list(result.placement.assign) == list(start.assign) and result.objective == pytest.approx(optimum)
    assert result.found_by == "warm start" and "no solution" in result.message
    assert result.bound == pytest.approx(optimum) and result.gap == pytest.approx(0.0)


def test_a_search_without_a_solution_keeps_the_closed_form_bound_when_its_own_is_weaker(monkeypatch):
    problem, optimum = testing.contiguity_binds()
    monkeypatch.setattr(solve_module, "solve_model", _no_solution(1e-3))
    result = solve(problem, warm_start="greedy", time_limit=30)
    assert result.status is Status.TIME_LIMIT_FEASIBLE and problem.is_valid(result.placement)
    assert result.found_by == "warm start (greedy)" and result.objective >= optimum
    assert result.bound == pytest.approx(6.25)  # the one-device-or-cut closed form, not the search's 0.001


def test_a_search_without_a_solution_or_a_start_answers_the_fallback_split(monkeypatch):
    problem, optimum = testing.chain()
    monkeypatch.setattr(solve_module, "solve_model", _no_solution(None))
    result = solve(problem, time_limit=30)
    assert result.status is Status.TIME_LIMIT_FEASIBLE and problem.is_valid(result.placement)
    assert result.found_by.startswith("fallback (") and 0 < result.bound <= optimum <= result.objective
