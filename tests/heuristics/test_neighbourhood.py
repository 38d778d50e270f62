"""IP neighbourhood search (search/neighbourhood.py): balls, device sets, pins kept, never worse, brute force."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from placement_dsl.certificate import LevelStatus
from placement_dsl.certify import certify, default_levels
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, Pin
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.objectives import Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.search.neighbourhood import _free, _listed, _loads, _step, _Units, ip_neighbourhoods
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
    loads = np.array([4.0, 4.5, 4.0, 0.0])  # device 1 busiest, then 0 and 2 (lower id first), the CPU
    listed = list(_listed(loads))
    assert listed[:4] == [("ball", (1,)), ("devices", (1, 0)), ("ball", (2,)), ("devices", (1, 2))]
    assert [arg for kind, arg in listed if kind == "devices"][3:5] == [(1, 0, 2), (1, 0, 3)]
    assert len(listed) == 3 + 3 + 3
    assert _free(units, dev, loads, "ball", (1,), 3) == {3, 4, 5}  # around 4 first (device 1's), filling the cap
    assert _free(units, dev, loads, "ball", (1,), 6) == {3, 4, 5, 6, 7, 8}  # then around 7
    assert _free(units, dev, loads, "devices", (1, 2), 3) == set(range(4, 12))  # device sets are not capped
    assert _free(units, np.zeros(12, dtype=int), loads, "ball", (1,), 3) == set()  # no boundary, no ball


def test_a_local_optimum_of_every_listed_neighbourhood_ends_the_search_early():
    problem = chain_problem([1.0] * 24, accelerators=4)
    start = Placement(problem.graph, problem.cluster, np.repeat([0, 1, 2, 3], 6))
    found = ip_neighbourhoods(problem, start, time_limit=60, step_limit=5, max_free=8)
    assert found.info["local_optimum"] and found.bound is None  # balls of 8, device sets of at most 18 units
    assert found.info["improvements"] == 0 and found.seconds < 30
    assert found.objective == pytest.approx(problem.evaluate(start).objective)


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


@pytest.mark.parametrize("settles, cap", [(True, 40), (False, 8)])
def test_the_ball_cap_grows_after_settled_balls_and_shrinks_after_timed_out_ones(monkeypatch, settles, cap):
    import placement_dsl.search.neighbourhood as nb

    problem = chain_problem([1.0] * 24, accelerators=4)
    start = Placement(problem.graph, problem.cluster, np.repeat([0, 1, 2, 3], 6))
    monkeypatch.setattr(nb, "_step", lambda *args: (None, settles, None))  # nothing found; settled or timed out
    found = ip_neighbourhoods(problem, start, time_limit=2.0, max_free=40)
    assert found.info["free_cap"] == cap and found.info["steps"] >= 3
    assert found.info["local_optimum"] == settles and found.placement is start


def test_no_step_starts_that_cannot_end_by_the_time_limit(monkeypatch):
    import time

    import placement_dsl.search.neighbourhood as nb

    problem = chain_problem([1.0] * 24, accelerators=4)
    start = Placement(problem.graph, problem.cluster, np.repeat([0, 1, 2, 3], 6))

    def late(problem, units, incumbent, free, seconds, solver):  # every step runs 0.8 s past its limit
        time.sleep(seconds + 0.8)
        return None, False, None

    monkeypatch.setattr(nb, "_step", late)
    found = ip_neighbourhoods(problem, start, time_limit=4.0, step_limit=0.6)
    assert found.info["steps"] == 2 and found.seconds <= 4.0 + 0.1  # a third would end at 4.2 s


def test_certify_improves_the_best_split_by_neighbourhoods_and_proves_it_when_one_holds_every_unit():
    # 8 | 3 3 3 on two accelerators, the CPU 10x slower; the start {8, 3} | {3, 3} has max load 11. The
    # first neighbourhood (a ball around the busiest boundary) holds all four units: 9, proven
    g = Graph([Op(name=f"v{i}", work={"accelerator": w, "cpu": 10 * w}) for i, w in enumerate([8, 3, 3, 3])])
    problem = Problem(g, Cluster.accelerators(2, cpus=1), Throughput(), [])
    assert default_levels(problem)[-1] == "neighbourhoods"
    start = Placement(g, problem.cluster, [0, 0, 1, 1])
    cert = certify(problem, budget=30.0, levels=("neighbourhoods",), gap=0.0, start=start)
    (row,) = cert.levels
    assert row.status is LevelStatus.OPTIMAL and row.bound == 9.0
    assert (cert.objective, cert.bound, cert.found_by, cert.proved_by) == (9.0, 9.0, "ip-neighbourhoods", "neighbourhoods")
    assert problem.violations(cert.placement) == []
    # nothing to start from: the level proves no bound and makes up no placement; the certificate holds the split
    # every stopped heuristic falls back on
    cert = certify(problem, budget=30.0, levels=("neighbourhoods",), gap=0.0)
    assert cert.levels[0].status is LevelStatus.NO_BOUND and cert.found_by == "fallback"
