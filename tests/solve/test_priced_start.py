"""A throughput solve whose model is large prices the cut-stages bound on its start before the build: a start it
proves within the gap is the answer, no model built; otherwise the answer's bound is never below it. An unknown
solver is refused before any of that work."""
from __future__ import annotations

from dataclasses import replace

import pytest

import placement_dsl.solve as solve_module
from placement_dsl import stopped
from placement_dsl.bounds.cut_stages import cut_stages_bound
from placement_dsl.brute import optimum as brute_optimum
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous
from placement_dsl.errors import SolverUnavailableError
from placement_dsl.objectives import Bottleneck
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import Status
from placement_dsl.testing import chain_graph


def _problem() -> tuple[Problem, float]:
    """Six ops of work 2 in a chain onto 3 stages, unit tensors: two each, the middle stage 4 + 2 = 6."""
    return Problem(chain_graph([2.0] * 6), Cluster.stages(3), Bottleneck(), [Contiguous()]), 6.0


def _large(monkeypatch: pytest.MonkeyPatch, limit: float) -> None:
    """The model's build counts as large for the time (a fifth of the solve's ``limit``), as at thousands of ops."""
    monkeypatch.setattr(stopped, "build_seconds", lambda problem, form, loaded=True, within=None: 0.2 * limit)


def _never(*args, **kwargs):
    raise AssertionError("not to be called")


def test_the_brute_force_optimum_is_the_balanced_split():
    problem, optimum = _problem()
    assert brute_optimum(problem) == pytest.approx(optimum)


def test_a_start_the_cut_stages_prove_is_answered_without_a_model(monkeypatch):
    problem, optimum = _problem()
    start = Placement(problem.graph, problem.cluster, [0, 0, 1, 1, 2, 2])
    _large(monkeypatch, 5.0)
    monkeypatch.setattr(solve_module, "compile", _never)  # no model is built
    result = solve(problem, time_limit=5.0, warm_start=start)
    assert result.status is Status.OPTIMAL and result.objective == pytest.approx(optimum)
    assert optimum * (1 - 1e-4) <= result.bound <= result.objective
    assert "not built" in result.message and "by the cut stages" in result.message, result.message
    assert result.start_accepted is None  # no solver was asked


def test_an_unknown_solver_is_refused_before_any_start_or_bound(monkeypatch):
    problem, _ = _problem()
    for name in ("held_split", "first_start"):
        monkeypatch.setattr(solve_module, name, _never)
    monkeypatch.setattr(stopped, "start_bound", _never)
    with pytest.raises(SolverUnavailableError, match="no_such_solver"):
        solve(problem, solver="no_such_solver", warm_start="greedy")


def test_a_model_stopped_early_answers_the_cut_stages_bound_priced_before_it(monkeypatch):
    problem, optimum = _problem()
    start = Placement(problem.graph, problem.cluster, [0, 0, 0, 0, 1, 2])  # 8 + 1 = 9: not proven
    real = solve_module.solve_model
    weak = []

    def stopped_early(model, solver, options, start=None):  # the search ends with half the model's bound
        outcome = real(model, solver, options, start=start)
        weak.append(0.5 * outcome.bound)
        return replace(outcome, status=Status.TIME_LIMIT_FEASIBLE, bound=weak[-1])

    _large(monkeypatch, 20.0)
    monkeypatch.setattr(solve_module, "solve_model", stopped_early)
    monkeypatch.setattr(stopped.cut_stages, "answer_bound", lambda problem, upper: None)  # none on the answer: the
    # bound is the one priced on the start
    result = solve(problem, time_limit=20.0, warm_start=start, gap=0.01)
    level, _ = cut_stages_bound(problem, 9.0)  # the `bounds` command's cut-stages level, to its precision
    assert weak and result.objective == pytest.approx(optimum)
    assert result.bound >= level * (1 - 2e-6)
    assert result.bound <= result.objective and result.status is Status.OPTIMAL  # within the solve's gap
