"""Subgraphs(q) in the schedule MILP, the formulation a cluster with links routes the latency to: at most ``q``
contiguous subgraphs per accelerator (Tarnawski Fig. 4's levels), as the cost model counts them. On generated tiny
graphs its optimum is the exhaustive one over the placements the limit admits, its answer valid and its bound no
higher; every valid placement's warm values satisfy the limit's rows."""
from __future__ import annotations

import random

import pytest

from placement_dsl import testing
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.constraints import Subgraphs
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import Status
from tests.formulations.schedule_rows import best_valid, broken_rows


def linked(seed: int, q: int) -> Problem:
    """A random DAG of five ops whose works favour alternating devices (so the limit tends to bind) on two
    accelerators joined by links both ways."""
    rng = random.Random(seed)
    ops = [Op(name=f"v{i}", work={"a": round(rng.uniform(0.5, 4), 2) * (1 if i % 2 else 3),
                                  "b": round(rng.uniform(0.5, 4), 2) * (3 if i % 2 else 1)},
              out_bytes=round(rng.uniform(0, 1), 1)) for i in range(5)]
    edges = {(f"v{j - 1}", f"v{j}") for j in range(1, 5)}
    edges |= {(f"v{i}", f"v{j}") for j in range(2, 5) for i in range(j - 1) if rng.random() < 0.25}
    devices = [Device(name="g0", kind="a", invocations=False), Device(name="g1", kind="b", invocations=False)]
    links = [Link(src="g0", dst="g1", bandwidth=2.0), Link(src="g1", dst="g0", bandwidth=2.0)]
    return Problem(Graph(ops, sorted(edges), name=f"alt{seed}"), Cluster(devices, links), Latency(), [Subgraphs(q)])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("q", [1, 2])
def test_the_schedule_milp_limits_the_subgraphs_per_accelerator_as_brute_force_does(seed, q):
    problem = linked(seed, q)
    best = testing.scheduled_optimum(problem)
    unlimited = testing.scheduled_optimum(Problem(problem.graph, problem.cluster, Latency(), []))
    for placement in best_valid(problem)[:3]:  # each a feasible start at a horizon of its own makespan
        assert broken_rows(problem, placement) == []
    result = solve(problem, "schedule", time_limit=60, gap=1e-9)
    assert result.status is Status.OPTIMAL, result.message
    assert problem.is_valid(result.placement)
    assert result.objective == pytest.approx(best, rel=1e-6), (best, unlimited)
    assert result.bound <= best * (1 + 1e-6)


def test_the_limit_binds_on_some_generated_instance():
    """The instances above are not all ones where the limit changes nothing."""
    bound = [seed for seed in range(4) if testing.scheduled_optimum(linked(seed, 1)) >
             testing.scheduled_optimum(Problem(linked(seed, 1).graph, linked(seed, 1).cluster, Latency(), [])) + 1e-9]
    assert bound
