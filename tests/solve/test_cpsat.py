"""CP-SAT as a backend of solve(problem, solver="cpsat"): one Result, solve's checks, start and deadline;
the old entry points are deprecated wrappers of it."""
from __future__ import annotations

import pytest

from placement_dsl import cpsat, testing
from placement_dsl.errors import SpecError
from placement_dsl.result import Result
from placement_dsl.solve import solve
from placement_dsl.solvers import Status

needs_ortools = pytest.mark.skipif(not cpsat.available(), reason="ortools is not installed")


@needs_ortools
def test_solve_with_cpsat_returns_solves_certified_result():
    problem, optimum = testing.makespan_fork()
    result = solve(problem, solver="cpsat", time_limit=30, warm_start="list")
    assert isinstance(result, Result) and result.solver == "cpsat" and result.formulation == "cpsat"
    assert result.status is Status.OPTIMAL and result.objective == pytest.approx(optimum)
    assert result.evaluation.valid and problem.is_valid(result.placement)
    assert result.start_objective is not None and result.timings.total > 0


@needs_ortools
def test_cpsat_starts_from_auto_by_default_and_labels_the_heuristic():
    problem, optimum = testing.makespan_join()
    result = solve(problem, solver="cpsat", time_limit=30)
    assert result.start_objective is not None and result.objective == pytest.approx(optimum)
    assert result.found_by == "solver" or result.found_by.startswith("warm start (auto: ")


def stopped_status(result) -> Status:
    """The status of an answer its deadline stopped: optimal where its proven bound meets it, else time-limited."""
    met = result.bound is not None and result.bound >= result.objective - 1e-9 * max(1.0, abs(result.objective))
    return Status.OPTIMAL if met else Status.TIME_LIMIT_FEASIBLE


def test_cpsat_refuses_another_objective_and_another_formulation_before_any_work():
    problem, _ = testing.chain()
    with pytest.raises(SpecError, match="solver 'cpsat' minimizes the makespan"):
        solve(problem, solver="cpsat", time_limit=5)
    makespan, _ = testing.makespan_fork()
    with pytest.raises(SpecError, match="formulation 'throughput' is not it"):
        solve(makespan, "throughput", solver="cpsat", time_limit=5)
    with pytest.raises(SpecError, match="windows"):
        solve(makespan, solver="cpsat", time_limit=5, options={"windows": True})
    with pytest.raises(SpecError, match="gap"):
        solve(makespan, solver="cpsat", time_limit=5, gap=2.0)  # solve's own argument checks apply


def test_a_spent_budget_answers_the_start_without_starting_cpsat(monkeypatch):
    from placement_dsl.deadline import Deadline

    monkeypatch.setattr(cpsat, "solve_model", lambda *a, **k: pytest.fail("CP-SAT started without a budget"))
    monkeypatch.setattr(cpsat, "available", lambda: True)
    problem, _ = testing.makespan_fork()
    result = solve(problem, solver="cpsat", warm_start="list", deadline=Deadline(1.5))
    assert result.status is stopped_status(result) and result.formulation == "cpsat"
    assert result.placement is not None and "budget spent before the CP-SAT search" in result.message


@pytest.mark.parametrize("call", ["solve_schedule", "solve_schedule_cpsat"])
def test_the_old_entry_points_are_deprecated_wrappers_of_solve(monkeypatch, call):
    import placement_dsl.solve as solve_module

    seen = []
    monkeypatch.setattr(solve_module, "solve", lambda *a, **k: seen.append((a[1:], k)) or "result")
    problem, _ = testing.makespan_fork()
    kw = {"solver": "cpsat"} if call == "solve_schedule" else {}
    with pytest.warns(DeprecationWarning, match="use placement_dsl.solve.solve"):
        answer = getattr(cpsat, call)(problem, time_limit=7, **kw)
    assert answer == "result"
    (args, options), = seen
    assert args == ("schedule",) and options["solver"] == "cpsat" and options["time_limit"] == 7


def test_a_child_process_past_its_deadline_is_stopped_and_the_caller_told():
    # a CP-SAT build that outgrows its budget once kept 'schedule-lns' 38 s past a 20 s limit: the child is
    # stopped a grace after the caller's deadline, whatever it is doing
    import time

    from placement_dsl.cpsat import ISOLATED_GRACE, isolated
    from placement_dsl.deadline import BudgetSpent

    t0 = time.monotonic()
    with pytest.raises(BudgetSpent, match="stopped"):
        isolated(time.sleep, 120, until=t0 + 0.5)
    assert time.monotonic() - t0 < 0.5 + ISOLATED_GRACE + 20  # spawning the child on a busy machine included
    assert isolated(abs, -3, until=time.monotonic() + 60) == 3


@needs_ortools
def test_a_cpsat_child_past_its_deadline_leaves_the_start_as_the_answer(monkeypatch):
    # the child's BudgetSpent was mapped to a status that does not exist (AttributeError: an internal error)
    from placement_dsl.deadline import BudgetSpent

    def too_slow(*args, **kwargs):
        raise BudgetSpent("the child outran its deadline")

    monkeypatch.setattr(cpsat, "isolated", too_slow)
    problem, _ = testing.makespan_fork()
    result = solve(problem, solver="cpsat", time_limit=10, warm_start="list")
    assert result.status is stopped_status(result) and result.found_by.startswith("warm start")
    assert result.objective == pytest.approx(result.start_objective)
