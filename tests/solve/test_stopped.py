"""A model searched to its time limit without a solution of its own still answers: the start it was given, else the
fallback split, with the search's bound where it proved more than the closed forms (placement_dsl.stopped)."""
from __future__ import annotations

import time

import pytest

from placement_dsl import solve as solve_module
from placement_dsl import testing
from placement_dsl.deadline import Deadline
from placement_dsl.placement import Placement
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
    assert result.status is Status.OPTIMAL and result.placement is not None  # the search's bound meets the start
    assert list(result.placement.assign) == list(start.assign) and result.objective == pytest.approx(optimum)
    assert result.found_by == "warm start" and "no solution" in result.message
    assert result.bound == pytest.approx(optimum) and result.gap == pytest.approx(0.0)


def test_a_search_without_a_solution_keeps_the_closed_form_bound_when_its_own_is_weaker(monkeypatch):
    problem, optimum = testing.contiguity_binds()
    monkeypatch.setattr(solve_module, "solve_model", _no_solution(1e-3))
    result = solve(problem, warm_start="greedy", time_limit=30)
    assert result.status is Status.TIME_LIMIT_FEASIBLE and problem.is_valid(result.placement)
    assert result.found_by == "warm start (greedy)" and result.objective >= optimum
    assert result.bound == pytest.approx(optimum, rel=1e-5)  # the cut stages prove the optimum 7.25 (the
    # one-device-or-cut closed form: 6.25), not the search's 0.001


def test_a_search_without_a_solution_or_a_start_answers_the_fallback_split(monkeypatch):
    problem, optimum = testing.chain()
    monkeypatch.setattr(solve_module, "solve_model", _no_solution(None))
    result = solve(problem, time_limit=30, warm_start="none")  # no start: the fallback split is what is left
    assert problem.is_valid(result.placement)
    assert result.found_by.startswith("fallback (") and 0 < result.bound <= optimum <= result.objective
    assert result.status is (Status.OPTIMAL if result.bound == pytest.approx(result.objective, rel=1e-9)
                             else Status.TIME_LIMIT_FEASIBLE)


def test_a_start_better_by_less_than_the_agreement_tolerance_is_the_answer():
    """The solver's answer and the start both lie in the formulation's class: the better of the two by the cost
    model answers, however small the difference (a start 2e-7 better used to lose to the solver's answer, within
    the tolerance two objectives of one placement agree to)."""
    from placement_dsl.formulations import get
    from placement_dsl.result import Result
    from placement_dsl.stopped import Stop

    problem, optimum = testing.chain()
    start = testing.brute_force(problem)[1]
    ev = problem.evaluate(start)
    other = Placement(problem.graph, problem.cluster, start.assign[::-1].copy())
    searched = Result(status=Status.TIME_LIMIT_FEASIBLE, placement=other, objective=ev.objective * (1 + 2e-7),
                      bound=optimum / 2, method="ip", solver="highs", formulation="throughput", start_accepted=True)
    answer = Stop(problem, get("throughput"), "ip", "highs", "latency-best", start, ev, "", 0.0).no_worse(searched, "")
    assert answer.placement is start and answer.objective == ev.objective
    assert answer.found_by == "warm start (latency-best)" and answer.bound == optimum / 2


def test_a_start_an_improving_search_made_keeps_the_floor_and_what_proved_it():
    """InceptionV3's solve without a model answered "bound 1173.51 by the run-paths DP" where the cut spine proved
    it: the stop rebuilt around the improved start kept the floor but not its source."""
    from placement_dsl.starts import Start
    from placement_dsl.stopped import Stop

    problem, _ = testing.contiguity_binds()
    placement = testing.brute_force(problem)[1]
    stop = Stop(problem, None, "ip", "highs", "auto", None, None, "", 0.0)
    stop.floor, stop.floor_source, stop.start_bound = 3.0, "the cut spine", 2.0
    better = stop.with_start(Start(placement, problem.evaluate(placement), method="latency-best"))
    assert (better.floor, better.floor_source, better.start_bound) == (3.0, "the cut spine", 2.0)
    assert better.start is placement


@pytest.mark.parametrize("seed", [3, 11])
def test_an_answer_whose_proven_bound_meets_it_is_optimal_though_the_model_was_not_built(monkeypatch, seed):
    """The DP over ideals proves its split optimal over the DP class (its bound meets its objective); a solve whose
    model is too large for the budget answers that start with that bound: optimal within the class, not stopped by
    its time limit at a gap of 0 (an 8,002-op tower: 2.6 s of a 30 s limit)."""
    import random

    from placement_dsl import stopped
    from placement_dsl.cluster import Cluster
    from placement_dsl.constraints import Contiguous, DagOrder
    from placement_dsl.deadline import BudgetSpent
    from placement_dsl.objectives import Throughput
    from placement_dsl.problem import Problem

    def too_large(*args, **kwargs):
        raise BudgetSpent("model too large for the time left")

    monkeypatch.setattr(solve_module, "check_fits", too_large)
    monkeypatch.setattr(stopped, "check_fits", too_large)
    graph = testing.structured_graph(random.Random(seed), "chain", 24)
    problem = Problem(graph, Cluster.accelerators(3), Throughput(), [Contiguous(), DagOrder()])
    result = solve(problem, formulation="chain", warm_start="dp", time_limit=30)
    assert "not built" in result.message or "too large" in result.message, result.message
    assert result.bound == pytest.approx(result.objective, rel=1e-9) and result.gap == pytest.approx(0.0)
    assert result.status is Status.OPTIMAL, result.message


def test_a_search_without_a_start_is_backed_by_the_fallback_split_built_before_its_model(monkeypatch):
    """A throughput IP of 217 ops onto 4 stages, 30 s at load 15: the solver found no incumbent by its deadline and
    the fallback split's child was stopped in the second left, so the command answered no placement at all."""
    from placement_dsl.deadline import BudgetSpent
    from placement_dsl.heuristics import fallback

    def spent(*args, **kwargs):
        raise BudgetSpent("skipped: the cheapest split needs ~2 s, 0.3 s left")

    def run(model, solver, options, start=None):  # the search takes the time: no split can be built after it
        monkeypatch.setattr(fallback, "scored_fallback", spent)
        return SolverOutcome(Status.TIME_LIMIT_NO_SOLUTION, None, None, False, solver)

    problem, optimum = testing.chain()
    monkeypatch.setattr(solve_module, "solve_model", run)
    result = solve(problem, time_limit=30, warm_start="none")
    assert result.placement is not None and problem.is_valid(result.placement)
    assert result.found_by.startswith("fallback (") and result.objective >= optimum


@pytest.mark.parametrize("objective", ["throughput", "latency"])
def test_a_start_that_finds_nothing_and_spends_the_budget_still_leaves_the_fallback_split(monkeypatch, objective):
    """The fallback split is in hand before the start runs: a start stopped with nothing at the deadline (the fan
    1 -> 1,500 -> 1 at load 15) leaves it as the answer, though no time is left to build it then."""
    from placement_dsl.heuristics import fallback
    problem, _ = testing.chain() if objective == "throughput" else testing.latency_diamond()
    monkeypatch.setattr(fallback, "EVALUATE_PER_OP", 0.05)  # the splits' estimate is a second: none fits a spent clock
    monkeypatch.setattr(fallback, "slowdown", lambda: 1.0)  # whatever the machine's load

    def spent(problem, spec, clock, share=None):  # the start runs to the deadline and finds nothing
        clock.at = time.monotonic() - 1.0
        return None, None, "warm start refused: no heuristic found a valid start", None, "auto", (), ()
    monkeypatch.setattr(solve_module, "first_start", spent)
    late = Deadline(0.2)  # and a caller whose clock is all but spent before the solve begins (the CLI's start-up)
    for result in (solve(problem, warm_start="auto", time_limit=30), solve(problem, warm_start="auto", deadline=late)):
        assert result.placement is not None and problem.is_valid(result.placement)
        assert result.status in (Status.TIME_LIMIT_FEASIBLE, Status.OPTIMAL)
        assert result.found_by.startswith("fallback (")
