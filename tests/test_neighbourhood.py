"""IP neighbourhood search (heuristics/neighbourhood.py): balls, device sets, pins kept, never worse, brute force."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, Pin
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.neighbourhood import _listed, _loads, _step, _Units, ip_neighbourhoods
from placement_dsl.objectives import Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.testing import optimum, structured_problems, without


def chain_problem(works: list[float], accelerators: int = 2, out_bytes: float = 1.0) -> Problem:
    ops = [Op(name=f"v{i}", work={"accelerator": w, "cpu": 10 * w}, out_bytes=out_bytes) for i, w in enumerate(works)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(len(works) - 1)])
    return Problem(g, Cluster.accelerators(accelerators, cpus=1), Throughput(), [])


def test_boundary_units_and_balls_on_a_chain():
    problem = chain_problem([1.0] * 10)
    units = _Units(problem)
    dev = np.array([0] * 5 + [1] * 5)
    assert units.boundary(dev).tolist() == [4, 5]
    assert units.ball([4, 5], 1, 64) == {3, 4, 5, 6}
    assert units.ball([4, 5], 2, 64) == {2, 3, 4, 5, 6, 7}
    assert units.ball([4], 3, 5) == {2, 3, 4, 5, 6}  # nearest first: 4, then 3 and 5, then 2 and 6
    assert units.ball([4, 9], 1, 4) == {3, 4, 5}  # the second seed's ball does not fit beside the first


def test_neighbourhoods_start_at_the_busiest_boundary_and_alternate_with_device_sets():
    problem = chain_problem([1.0] * 12, accelerators=3)
    units = _Units(problem)
    dev = np.array([0] * 4 + [1] * 4 + [2] * 4)
    loads = np.array([4.0, 4.5, 4.0, 0.0])  # device 1 busiest
    listed = list(_listed(units, dev, loads, 3))
    assert listed[0] == {3, 4, 5}  # around device 1's boundary units first (4 and 7), the first ball fills the cap
    assert next(_listed(units, dev, loads, 6)) == {3, 4, 5, 6, 7, 8}  # then the ball around 7
    assert listed[1] == {4, 5, 6, 7, 0, 1, 2, 3}  # the busiest with the next by load (device 0, the lower id)
    assert len(listed) == len(set(listed))
    assert all(set(range(4, 8)) <= free for free in listed[1::2][:6])  # device sets hold the busiest device


def test_a_step_keeps_every_unit_outside_the_neighbourhood():
    problem = chain_problem([8, 3, 3, 3, 1, 1])
    start = Placement(problem.graph, problem.cluster, [0, 0, 0, 1, 1, 1])
    found, optimal, bound = _step(problem, _Units(problem), start, frozenset({2, 3}), 10.0, "highs")
    assert optimal and bound is not None
    assert found.assign.tolist()[:2] == [0, 0] and found.assign.tolist()[4:] == [1, 1]
    assert problem.evaluate(found).objective < problem.evaluate(start).objective - 1e-9  # v2 moved over


def test_the_whole_graph_free_proves_the_brute_force_optimum():
    problem = chain_problem([8, 3, 3, 3, 2])
    start = Placement(problem.graph, problem.cluster, [0, 0, 0, 0, 0])
    found = ip_neighbourhoods(problem, start, time_limit=20, max_free=64)
    assert found.bound is not None and found.exact_among == "all placements"
    assert found.objective == pytest.approx(optimum(problem)) and found.bound <= found.objective + 1e-9
    assert found.info["improvements"] >= 1


def test_small_balls_stop_at_the_time_limit_and_never_get_worse():
    problem = chain_problem([5, 1, 1, 1, 1, 1, 1, 5], accelerators=4)
    start = Placement(problem.graph, problem.cluster, [0, 0, 1, 1, 2, 2, 3, 3])
    found = ip_neighbourhoods(problem, start, time_limit=3, step_limit=1, max_free=1)
    assert found.bound is None  # never all eight units at once (balls of one, at most three of four devices)
    assert problem.violations(found.placement) == []
    assert found.objective <= problem.evaluate(start).objective + 1e-9
    assert found.seconds < 3 + 2.0


@settings(max_examples=8, deadline=None)
@given(structured_problems("contiguous"))
def test_never_worse_than_the_start_and_exact_where_it_claims(problem):
    free = without(problem, Contiguous)
    start = run("greedy", free.graph, free.cluster, model=free.cost_model(), seed=0).placement
    if not free.is_valid(start):
        return
    found = ip_neighbourhoods(free, start, time_limit=8, step_limit=4)
    assert free.violations(found.placement) == []
    best = optimum(free)
    assert best - 1e-6 <= found.objective <= free.evaluate(start).objective + 1e-9
    if found.bound is not None:
        assert found.bound <= best + 1e-6 and found.objective == pytest.approx(best, rel=1e-4)


def test_loads_are_the_cost_models():
    problem = chain_problem([8, 3, 3])
    p = Placement(problem.graph, problem.cluster, [0, 1, 1])
    assert _loads(problem, p).tolist() == pytest.approx([8 + 1, 6 + 1, 0.0])


def test_refuses_an_invalid_start_and_bad_limits():
    problem = chain_problem([8, 3, 3, 3])
    pinned = Problem(problem.graph, problem.cluster, Throughput(), [Pin("v0", problem.cluster.names[0])])
    with pytest.raises(SpecError, match="start is invalid"):
        ip_neighbourhoods(pinned, Placement(problem.graph, problem.cluster, [1, 1, 1, 1]))
    good = Placement(problem.graph, problem.cluster, [0, 0, 0, 0])
    for bad in ({"time_limit": 0}, {"step_limit": -1}, {"max_free": 0}):
        with pytest.raises(SpecError, match="max_free"):
            ip_neighbourhoods(problem, good, **bad)
