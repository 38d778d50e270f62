"""solve() end to end on the tiny instances with known optima: every formulation the problem picks,
every native solver, warm starts of every kind, and the cost-model certificate."""
from __future__ import annotations

import json
import time
from types import SimpleNamespace

import numpy as np
import pytest

from placement_dsl import testing
from placement_dsl.constraints import DagOrder
from placement_dsl.errors import EvaluationMismatchError, SolverUnavailableError, SpecError
from placement_dsl.io import Workload, save_placement
from placement_dsl.objectives import Bottleneck
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem, Stages
from placement_dsl.result import Result, relative_gap
from placement_dsl.solve import check_agreement, solve
from placement_dsl.solvers import Status, available_solvers, backend

NATIVE = [s for s in ("highs", "scip") if s in available_solvers()]
PYOMO = [s for s in available_solvers() if s not in NATIVE]


@pytest.mark.parametrize("solver", NATIVE)
@pytest.mark.parametrize("name", sorted(testing.INSTANCES))
def test_known_optimum(name, solver):
    problem, optimum = testing.INSTANCES[name]()
    result = solve(problem, solver=solver, time_limit=20)
    assert result.status is Status.OPTIMAL, result.message
    assert result.objective == pytest.approx(optimum, rel=1e-9)
    assert result.evaluation.valid and problem.is_valid(result.placement)
    assert result.bound <= result.objective and result.gap <= 1e-4 + 1e-9
    assert result.placement.evaluate(problem.cost_model()).objective == pytest.approx(optimum)


@pytest.mark.parametrize("solver", PYOMO)
def test_pyomo_solver_by_name(solver):
    problem, optimum = testing.diamond()
    result = solve(problem, solver=solver, time_limit=20)
    assert result.status is Status.OPTIMAL and result.objective == pytest.approx(optimum)
    assert result.solver == solver


def test_result_to_dict_is_json_with_the_agreed_keys():
    problem, optimum = testing.chain()
    best = testing.brute_force(problem)[1]
    result = solve(problem, solver="highs", time_limit=10, warm_start=best, method="ip")
    data = json.loads(json.dumps(result.to_dict()))
    for key in ("objective", "bound", "gap", "status", "method", "solver", "seconds", "start_objective",
                "start_accepted", "formulation", "timings"):
        assert key in data
    assert data["status"] == "optimal" and data["method"] == "ip" and data["objective"] == optimum
    assert data["timings"]["total"] >= data["timings"]["solve"] > 0
    assert "optimal" in result.summary() and "device" in result.summary()


@pytest.mark.parametrize("solver", [s for s in NATIVE if backend(s).capabilities.mip_start])
def test_warm_start_from_placement_is_accepted(solver):
    problem, optimum = testing.fig2()
    start = testing.brute_force(problem)[1]
    result = solve(problem, solver=solver, time_limit=10, warm_start=start)
    assert result.start_accepted is True, result.message
    assert result.start_objective == pytest.approx(optimum)
    assert result.objective == pytest.approx(optimum)


def test_warm_start_from_heuristic_and_file(tmp_path):
    problem, optimum = testing.chain()
    by_name = solve(problem, solver="highs", time_limit=10, warm_start="greedy")
    assert by_name.start_objective is not None and by_name.start_objective >= optimum
    assert by_name.objective == pytest.approx(optimum) and by_name.start_accepted is True
    path = tmp_path / "start.json"
    save_placement(testing.brute_force(problem)[1], path, Workload(problem.graph, problem.cluster))
    from_file = solve(problem, solver="highs", time_limit=10, warm_start=str(path))
    assert from_file.start_accepted is True and from_file.start_objective == pytest.approx(optimum)
    with pytest.raises(SpecError, match="neither a heuristic"):
        solve(problem, solver="highs", time_limit=10, warm_start=str(tmp_path / "missing.json"))


def test_start_that_violates_the_formulation_is_refused():
    problem, optimum = testing.chain()
    backwards = Placement(problem.graph, problem.cluster, [1, 1, 0, 0])  # data flows stage1 -> stage0
    result = solve(problem, solver="highs", time_limit=10, warm_start=backwards)
    assert result.start_accepted is False and "warm start refused" in result.message
    assert result.objective == pytest.approx(optimum)


def test_evaluation_mismatch_is_raised(monkeypatch):
    import placement_dsl.compile as compile_module

    monkeypatch.setattr(compile_module.Compiled, "objective_scale", property(lambda self: 2.0 * self.scale.time))
    problem, _ = testing.diamond()
    with pytest.raises(EvaluationMismatchError, match=r"solver objective 16 .* cost model gives 8"):
        solve(problem, solver="highs", time_limit=10)


@pytest.mark.parametrize("status, cutoff, kept", [
    (Status.OPTIMAL, None, False), (Status.OPTIMAL, 17.5, True), (Status.OPTIMAL, 18.2, False),
    (Status.TIME_LIMIT_FEASIBLE, None, True)])
def test_an_answer_whose_objective_variable_has_slack(status, cutoff, kept):
    """Slack above the cost model is kept under a time limit or for an answer above the cutoff (HiGHS 1.16 calls
    such an answer optimal: nothing lies below the cutoff); an optimal claim with slack beyond the gap is an error."""
    compiled = SimpleNamespace(objective_scale=2.0, formulation=SimpleNamespace(name="chain"))
    outcome = SimpleNamespace(objective=9.05, status=status)  # 18.1 in the problem's units
    ev = SimpleNamespace(valid=True, objective=18.0, violations=[])
    notes: list[str] = []
    if kept:
        check_agreement(compiled, outcome, ev, "highs", notes, 1e-4, cutoff)
        assert notes == ["incumbent objective 18.1 was not tight; the cost model gives 18"]
    else:
        with pytest.raises(EvaluationMismatchError, match=r"solver objective 18.1 \(model 9.05 x scale 2\) but the "
                                                          r"cost model gives 18$"):
            check_agreement(compiled, outcome, ev, "highs", notes, 1e-4, cutoff)


def test_unknown_solver():
    problem, _ = testing.chain()
    with pytest.raises(SolverUnavailableError, match="no_such_solver"):
        solve(problem, solver="no_such_solver")


def test_gap_definition():
    assert relative_gap(4.0, 3.0) == 0.25
    assert relative_gap(None, 1.0) is None
    r = Result(Status.TIME_LIMIT_NO_SOLUTION, None, None, 2.0, "ip", "highs", "exact")
    assert r.gap is None and r.to_dict()["objective"] is None and "start_accepted" not in r.to_dict()


def _big_problem() -> Problem:
    graph = testing.random_graph(np.random.default_rng(7), 40, density=0.15)
    return Problem(graph, Stages(6), Bottleneck(), [DagOrder()])


@pytest.mark.parametrize("solver", NATIVE)
def test_time_limit_end_to_end(solver):
    problem = _big_problem()
    t0 = time.perf_counter()
    result = solve(problem, solver=solver, time_limit=1.0, warm_start="greedy")
    wall = time.perf_counter() - t0
    assert result.status is Status.TIME_LIMIT_FEASIBLE, result.message  # 1 s leaves the gap wide open
    assert result.timings.handoff + result.timings.solve < 1.0 + 0.5 + 0.3
    assert wall < result.timings.build + result.timings.start + 1.0 + 0.5 + 0.5
    assert result.objective <= result.start_objective + 1e-9
    assert result.bound is None or result.bound <= result.objective


# ---------------------------------------------------------------------------- relaxations and position windows
def test_relaxations_are_refused_with_a_pointer_to_certify():
    problem, _ = testing.chain()
    with pytest.raises(SpecError, match="lower bound.*certify"):
        solve(problem, formulation="superblock")


def test_windows_need_chain_and_a_warm_start():
    problem, _ = testing.accelerators_cpu()
    with pytest.raises(SpecError, match="'throughput' takes no options \\['windows'\\]"):
        solve(problem, formulation="throughput", warm_start="dp", options={"windows": True})
    with pytest.raises(SpecError, match="windows=True"):
        solve(problem, formulation="chain", warm_start="none", options={"windows": True})


def test_windowed_chain_certifies_the_dp_class():
    problem, optimum = testing.accelerators_cpu()
    result = solve(problem, formulation="chain", warm_start="dp", gap=0.01, time_limit=20)
    assert result.objective == pytest.approx(optimum)
    assert optimum / 1.01 - 1e-9 <= result.bound <= result.objective
    assert result.status is Status.OPTIMAL and result.gap <= 0.01 + 1e-9
    assert result.to_dict()["bound_scope"] == "dag-ordered contiguous placements (DP class)"
    assert result.found_by == "warm start (dp)" and result.start_accepted
    assert result.summary().splitlines()[-1].startswith("certificate: objective 4")


@pytest.mark.parametrize("bound", [None, 1e9])
def test_windowed_time_limit_keeps_the_start(monkeypatch, bound):
    """A time limit inside the windowed solve returns the start; the DP's own bound (exact over the contiguous
    class: 4) is reported where the solver proved none, or less (``min(T*, bound)`` = 4 / 1.01)."""
    import placement_dsl.solve as solve_module
    from placement_dsl.solvers import SolverOutcome

    def stopped(model, solver, options, start=None):
        assert start is None  # the windows cut the start off: it is never a MIP start
        return SolverOutcome(Status.TIME_LIMIT_NO_SOLUTION, None, bound, False, solver)

    monkeypatch.setattr(solve_module, "solve_model", stopped)
    problem, optimum = testing.accelerators_cpu()
    result = solve(problem, formulation="chain", warm_start="dp", gap=0.01, time_limit=30)
    assert result.status is Status.OPTIMAL  # the DP's bound meets its split: optimal over the class it covers
    assert result.objective == pytest.approx(optimum) and problem.is_valid(result.placement)
    assert result.found_by == "warm start (dp)"
    assert result.bound == pytest.approx(4.0) and "proven by the warm start's heuristic" in result.message


def test_windowed_real_time_limit_returns_the_start():
    """A millisecond is the whole call's budget: the DP's split, found beforehand, is the start it returns."""
    from placement_dsl.heuristics import run

    problem, optimum = testing.accelerators_cpu()
    split = run("dp", problem.graph, problem.cluster, model=problem.cost_model()).placement
    result = solve(problem, formulation="chain", warm_start=split, gap=0.01, time_limit=1e-3)
    assert result.placement is not None and result.objective <= optimum + 1e-9
    assert result.status in (Status.OPTIMAL, Status.TIME_LIMIT_FEASIBLE)
    assert result.bound is None or result.bound <= result.objective


def test_every_path_checks_the_problems_own_constraints():
    """A pin the cost model does not score: the windowed chain solve once returned 4.0 breaking it (optimum 10)."""
    from placement_dsl.constraints import Pin

    base, _ = testing.accelerators_cpu()
    problem = Problem(base.source_graph, base.cluster, base.objective, [*base.constraints, Pin("a", "cpu0")])
    best, _ = testing.brute_force(problem)
    assert best == pytest.approx(10.0)
    unpinned = testing.brute_force(base)[1]  # the DP now honours the pin: a start that breaks it is the unpinned optimum
    start = {op.name: base.cluster.names[int(d)] for op, d in zip(base.graph.ops, unpinned.assign, strict=True)}
    assert start["a"] != "cpu0"
    for formulation in ("chain", "throughput"):
        result = solve(problem, formulation=formulation, warm_start=start, gap=0.01, time_limit=20)
        assert problem.is_valid(result.placement), problem.violations(result.placement)
        assert result.objective == pytest.approx(best) and result.bound <= best + 1e-9
        assert result.start_accepted is False and "pinned to 'cpu0'" in result.message


def test_a_start_outside_the_formulation_is_refused_not_returned():
    """A valid split outside the chain class (non-contiguous, 6.5) must not become the chain's answer (7.25)."""
    from placement_dsl.constraints import Contiguous

    contiguous, optimum = testing.contiguity_binds()
    problem = testing.without(contiguous, Contiguous)
    best, start = testing.brute_force(problem)
    assert best == pytest.approx(6.5) and not contiguous.is_valid(start)
    result = solve(problem, formulation="chain", warm_start=start, options={"windows": False}, time_limit=20)
    assert result.objective == pytest.approx(optimum)  # the chain class's optimum, not the start's 6.5
    assert result.start_accepted is False and "start refused" in result.message


def test_a_start_outside_the_chain_class_sets_no_windows():
    """Windows at a non-contiguous start's 6.5 cut off every DP-class placement (their optimum is 7.25): the chain
    formulation answered the start with bound 6.4994 and status optimal over the DP class. It refuses such a start
    and answers its class's optimum."""
    from placement_dsl.constraints import Contiguous

    contiguous, optimum = testing.contiguity_binds()
    problem = testing.without(contiguous, Contiguous)
    start = testing.brute_force(problem)[1]
    result = solve(problem, formulation="chain", warm_start=start, time_limit=20)
    assert result.objective == pytest.approx(optimum) and contiguous.is_valid(result.placement)
    assert result.start_accepted is False and "outside the DP class" in result.message
    assert result.status is Status.OPTIMAL and result.bound == pytest.approx(optimum, rel=1e-4)
