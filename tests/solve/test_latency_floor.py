"""A latency solve whose model is not built still answers the bound the model's run flows would carry.

Tarnawski's latency IP floors TotalLatency at the run-paths DP (:func:`run_path_bound`); a solve sized too large to
build the model answers the heuristics' best placement, and its bound is that DP within a share of the budget
(``stopped.paths_floor``), not only the closed forms (BERT-3 at 60 s: 406.3 where the closed forms prove 398.1).
"""
from __future__ import annotations

import pytest

from placement_dsl import solve as solve_module
from placement_dsl import stopped
from placement_dsl.bounds.single_sample import single_sample_bound
from placement_dsl.deadline import BudgetSpent, Deadline
from placement_dsl.formulations.latency import run_paths_floor
from placement_dsl.solve import solve
from tests.blocks.test_latency_side_inputs import side_chain


def too_large(*args, **kwargs):
    raise BudgetSpent("model too large for the time left")


def test_a_solve_without_its_model_answers_the_run_paths_floor(monkeypatch):
    """The cut-op spine proves 9.86 here on its own; without it the closed forms prove 5 and the floor 13."""
    from placement_dsl.bounds import single_sample

    p = side_chain()
    assert single_sample_bound(p)[0] == pytest.approx(9.8575)
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
