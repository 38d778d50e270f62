"""A latency or makespan solve whose model is too large for a short budget spends that budget, within it.

A 4 s solve of a 16-op DAG on a linked cluster answered its start after 0.2-0.9 s: the searches start only with
3 s left, the improving method stopped at its local optimum, and the rest of the time went unused. Now a coarse
solve runs from 2 s (all of the time where no window would follow it), and what the searches leave goes to
restarts of the improving method until the deadline (placement_dsl.stopped.tail)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from placement_dsl import stopped, testing
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Memory
from placement_dsl.deadline import BudgetSpent
from placement_dsl.objectives import Latency, Makespan
from placement_dsl.problem import Problem
from placement_dsl.search.anytime import COARSE_SHARE, MIN_STEP, SLACK, coarse_seconds, coarse_solver
from placement_dsl.solve import solve

LIMIT = 4.0


def _problem(objective, linked: bool) -> Problem:
    graph = testing.random_graph(np.random.default_rng(16), 30, density=0.1, name="short30")
    memory = 0.4 * float(graph.param_bytes.sum())  # no device holds everything: the split matters
    cluster = Cluster.hierarchical(2, 2, intra=4.0, inter=1.0, memory=memory) if linked else \
        Cluster.accelerators(3, memory=memory, bandwidth=2.0)
    return Problem(graph, cluster, objective, [Memory()])


@pytest.mark.parametrize("objective, linked", [(Makespan(), True), (Latency(), True), (Latency(), False)])
def test_a_model_too_large_for_a_short_budget_leaves_no_time_unused(monkeypatch, objective, linked):
    import placement_dsl.solve as solve_module

    def too_large(*args, **kwargs):
        raise BudgetSpent("model too large for the time left")

    monkeypatch.setattr(solve_module, "check_fits", too_large)
    problem = _problem(objective, linked)
    t0 = time.perf_counter()
    result = solve(problem, time_limit=LIMIT)
    wall = time.perf_counter() - t0
    assert LIMIT - stopped.RESERVE - 0.6 <= wall <= LIMIT + 0.5, (wall, result.timings, result.message)
    assert result.timings.restarts > 0 and "restarts to the deadline" in result.message
    assert result.placement is not None and problem.is_valid(result.placement)
    assert result.objective <= result.start_objective
    assert result.bound is None or result.bound <= result.objective


def test_a_short_search_gives_its_coarse_solve_the_time_no_window_could_use():
    """At 2.4 s the coarse solve's share (40 % less a second of slack) left it nothing; where no window step fits
    after the share, it gets all but the slack, and HiGHS where CP-SAT's child process would eat it."""
    assert coarse_seconds(2.4) == pytest.approx(2.4 - SLACK)
    assert coarse_seconds(60.0) == pytest.approx(COARSE_SHARE * 60.0 - SLACK)
    for left in np.linspace(MIN_STEP, 30.0, 57):
        assert MIN_STEP - SLACK <= coarse_seconds(left) <= left - SLACK
    assert coarse_solver("cpsat", 2.0) == "highs" and coarse_solver("cpsat", 20.0) == "cpsat"
    assert coarse_solver("highs", 2.0) == "highs"


def test_where_no_kick_is_valid_fresh_seeds_take_the_time_left(monkeypatch):
    """A contiguous or pinned problem may admit no kick: the restarts then end at once, and fresh-seed rounds of the
    improving method (here one that spends all it is given and finds nothing) hold the solve to its deadline."""
    import placement_dsl.solve as solve_module
    from placement_dsl.search import anytime

    def too_large(*args, **kwargs):
        raise BudgetSpent("model too large for the time left")

    def spends_all(problem, start, seconds, seed=0, method=None, **options):
        if method is None:
            time.sleep(seconds)
        return start

    monkeypatch.setattr(solve_module, "check_fits", too_large)
    monkeypatch.setattr(anytime, "step", lambda *args, **kwargs: (None, {}))
    monkeypatch.setattr(stopped, "improve", spends_all)
    monkeypatch.setattr(stopped, "restart", lambda problem, best, *args, **kwargs: best)  # no valid kick
    problem = _problem(Makespan(), True)
    t0 = time.perf_counter()
    result = solve(problem, time_limit=LIMIT)
    wall = time.perf_counter() - t0
    assert LIMIT - stopped.RESERVE - 0.6 <= wall <= LIMIT + 0.5, (wall, result.timings)
    assert result.timings.again > 0 and result.placement is not None and problem.is_valid(result.placement)
