"""The host's share of a contiguous placement whose accelerators' memory binds (placement_dsl/heuristics/host_share.py).

Six ops of 10 GB in a chain onto two accelerators of 16 GB and one CPU: the accelerators hold at most 32 GB, and a
contiguous placement puts the CPU anywhere in the pipeline, so the accelerators may hold a prefix and a suffix. The
CPU's work is 50 for the two end ops and 1 for the four between: it must run at least 104 - (50 + 1 + 50) = 3, the
optimum 4 (the two ends on the accelerators); hosts last (DAG order) would claim 104 - 52 = 52, which a contiguous
placement beats.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, Memory
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.host_share import applies, host_share_bound, most_held
from placement_dsl.objectives import Throughput
from placement_dsl.problem import Problem
from placement_dsl.solvers import available_solvers

CPU_WORK = [50.0, 1.0, 1.0, 1.0, 1.0, 50.0]


def _problem(constraints=None) -> Problem:
    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": w}, param_bytes=10e9) for i, w in enumerate(CPU_WORK)]
    graph = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(len(ops) - 1)])
    return Problem(graph, Cluster.accelerators(2, memory=16e9, cpus=1), Throughput(),
                   [Memory(), Contiguous()] if constraints is None else constraints)


def test_the_host_runs_what_a_prefix_and_a_suffix_within_the_accelerators_memory_leave():
    problem = _problem()
    bound = host_share_bound(problem)
    assert bound == pytest.approx(3.0, rel=1e-8) and bound <= 3.0
    dp = run("dp", problem.graph, problem.cluster, model=problem.cost_model())
    assert dp.objective == pytest.approx(4.0) and bound <= dp.objective


def test_the_bound_applies_to_contiguous_max_loads_under_hard_memory_with_one_host_only():
    assert applies(_problem())
    assert not applies(_problem([Memory()]))  # any placement: the host's ops need not be convex
    assert host_share_bound(_problem([Memory()])) is None


def test_most_held_matches_brute_force_over_pairs_of_ideals():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 12))
        mem, t = rng.uniform(0, 5, n), rng.uniform(0, 5, n)
        total_mem, total_t, C = float(mem.sum()) + 1.0, float(t.sum()) + 2.0, float(rng.uniform(0, 12))
        best = max([0.0] + [t[i] + total_t - t[j] for i in range(n) for j in range(n)
                            if mem[i] + total_mem - mem[j] <= C])
        assert most_held(mem, t, total_mem, total_t, C) == pytest.approx(best)


@pytest.mark.skipif("highs" not in available_solvers(), reason="needs HiGHS")
def test_a_stopped_throughput_solve_reports_the_host_s_share(monkeypatch):
    import placement_dsl.solve as solve_module
    from placement_dsl.deadline import BudgetSpent
    from placement_dsl.solve import solve

    def too_large(*args, **kwargs):
        raise BudgetSpent("model too large for the time left")

    monkeypatch.setattr(solve_module, "check_fits", too_large)
    t0 = time.monotonic()
    result = solve(_problem(), warm_start="greedy", time_limit=8.0)
    assert time.monotonic() - t0 <= 8.0 + 5
    assert result.bound == pytest.approx(3.0, rel=1e-8) and "host's share" in result.message
    assert result.bound <= result.objective


def test_a_model_too_large_to_build_proves_the_host_s_share_before_its_start(monkeypatch):
    """On 20,000 ops at load 12 the bound, computed after a start that had taken its share, had too little time
    left: 6,454.6 was reported of 34,023.3. It now comes first, in at most FLOOR_KEPT of the time."""
    import placement_dsl.solve as solve_module
    from placement_dsl import stopped
    from placement_dsl.deadline import BudgetSpent
    from placement_dsl.heuristics import host_share
    from placement_dsl.solve import solve
    from placement_dsl.starts import Start

    order = []
    bound = host_share.host_share_bound

    def bounding(*args, **kwargs):
        order.append("bound")
        return bound(*args, **kwargs)

    def greedy_start(problem, spec, **kwargs):  # the DP's start would prove 4 itself: the floor shows under greedy's
        order.append("start")
        found = run("greedy", problem.graph, problem.cluster, model=problem.cost_model())
        return Start(found.placement, problem.evaluate(found.placement), method="greedy")

    def too_large(*args, **kwargs):
        raise BudgetSpent("model too large for the time left")

    monkeypatch.setattr(host_share, "host_share_bound", bounding)
    monkeypatch.setattr(stopped, "resolve", greedy_start)
    monkeypatch.setattr(stopped, "build_seconds", lambda problem, form, loaded=True: 1e6)
    monkeypatch.setattr(solve_module, "check_fits", too_large)
    result = solve(_problem(), time_limit=8.0)
    assert order[:2] == ["bound", "start"] and order.count("bound") == 1
    assert result.bound == pytest.approx(3.0, rel=1e-8) and "host's share" in result.message
