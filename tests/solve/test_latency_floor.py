"""A latency solve whose model is not built still answers the bound the model's run flows would carry.

Tarnawski's latency IP floors TotalLatency at the run-paths DP (:func:`run_path_bound`); a solve sized too large to
build the model answers the heuristics' best placement, and its bound is that DP within a share of the budget
(``stopped.paths_floor``), not only the closed forms (BERT-3 at 60 s: 406.3 where the closed forms prove 398.1).
"""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from placement_dsl import solve as solve_module
from placement_dsl import stopped
from placement_dsl.bounds.single_sample import single_sample_bound
from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.deadline import BudgetSpent, Deadline
from placement_dsl.formulations.latency import hinted, latency_floor, run_paths_floor
from placement_dsl.graph import Graph
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers.base import Status
from placement_dsl.testing import host_op
from tests.blocks.test_latency_side_inputs import side_chain, skip_chain_block


def too_large(*args, **kwargs):
    raise BudgetSpent("model too large for the time left")


def test_a_solve_without_its_model_answers_the_run_paths_floor(monkeypatch):
    """The cut-op spine proves the optimum, 14, here on its own (its side path priced op by op with the tensors its
    runs move); without it the closed forms prove 5 and the floor 13."""
    from placement_dsl.bounds import single_sample

    p = side_chain()
    assert single_sample_bound(p)[0] == pytest.approx(14.0)
    monkeypatch.setattr(single_sample, "spine_or_nothing", lambda problem, clock: 0.0)
    assert single_sample_bound(p)[0] == pytest.approx(5.0)  # the closed forms alone
    monkeypatch.setattr(solve_module, "check_fits", too_large)
    monkeypatch.setattr(stopped, "check_fits", too_large)
    result = solve(p, time_limit=10)
    assert "model too large" in result.message and "bound 13 by the run-paths DP" in result.message
    assert result.objective == pytest.approx(14.0) and result.bound == pytest.approx(13.0)


def test_the_run_paths_floor_is_none_where_it_does_not_apply_or_runs_out_of_time():
    p = side_chain()
    assert run_paths_floor(p, Deadline(10.0)) == pytest.approx(13.0)
    assert run_paths_floor(p, Deadline(0.0)) is None  # no path priced: no bound, not a zero one


def parallel_work() -> Problem:
    """``s -> w0..w3 -> t`` on one accelerator and a slow CPU: the four ``w`` share the accelerator (or take 50 on
    the CPU), so the accelerator's work bounds the latency (6) above the longest path and its runs (4)."""
    ops = [host_op("s", 1, 1, out=1)] + [host_op(f"w{i}", 2, 50, out=1) for i in range(4)] + [host_op("t", 1, 1, out=0)]
    g = Graph(ops, [("s", f"w{i}") for i in range(4)] + [(f"w{i}", "t") for i in range(4)])
    return Problem(g, Cluster.accelerators(1, cpus=1), Latency())


def total_latency(compiled) -> float:
    """TotalLatency's lower bound in the compiled latency model, in cost-model units."""
    import pyomo.environ as pyo

    found = [v for v in compiled.model.component_objects(pyo.Var, descend_into=True) if v.local_name == "total"]
    return found[0].lb * compiled.objective_scale


def test_the_latency_ip_starts_its_total_latency_at_the_combinatorial_floor():
    p = parallel_work()
    floor = latency_floor(p, Deadline(10.0))[0]
    assert floor == pytest.approx(6.0) and run_paths_floor(p, Deadline(10.0)) == pytest.approx(4.0)
    assert total_latency(compile(hinted(p, 20.0), "latency")) == pytest.approx(4.0)
    assert total_latency(compile(hinted(p, 20.0, (), floor), "latency")) == pytest.approx(6.0)


def test_a_latency_solve_reports_at_least_the_floor_whatever_the_solver_proved(monkeypatch):
    """The solve gives the floor to its model and, when the solver stops with a weaker bound (here none), to its
    answer."""
    p = parallel_work()
    seen = {}
    real = solve_module.solve_model

    def stopped_early(model, *args, **kwargs):
        outcome = real(model, *args, **kwargs)
        seen["total"] = total_latency(SimpleNamespace(model=model, objective_scale=1.0))
        return replace(outcome, status=Status.TIME_LIMIT_FEASIBLE, bound=None)

    monkeypatch.setattr(solve_module, "solve_model", stopped_early)
    result = solve(p, formulation="latency", time_limit=30)
    assert result.objective == pytest.approx(10.0)
    scale = compile(hinted(p, 20.0), "latency").objective_scale  # the model's unit of time
    assert seen["total"] * scale == pytest.approx(6.0)  # the model the solver got starts at the floor
    assert result.bound >= latency_floor(p, Deadline(10.0))[0] - 1e-6


def test_a_start_that_meets_the_floor_is_optimal_without_a_search(monkeypatch):
    """The floor of a residual block's skip chain is its optimum, 8: the start that reaches it is the answer, optimal,
    and no model is built."""
    def no_model(*args, **kwargs):
        raise AssertionError("a model was built though the start meets the floor")

    monkeypatch.setattr(solve_module, "compile", no_model)
    result = solve(skip_chain_block(), time_limit=30)
    assert result.status is Status.OPTIMAL and result.objective == pytest.approx(8.0) == result.bound
    assert "meets the floor" in result.message
