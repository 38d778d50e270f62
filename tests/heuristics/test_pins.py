"""Every start heuristic of the single-sample family honours pins and colocation: a pinned op's only candidate is
its pin device (the problem's graph carries the pin, and the cluster's times allow it nowhere else)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from placement_dsl import testing
from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import Colocate, Memory, Pin
from placement_dsl.errors import PlacementError, SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.objectives import Latency, Makespan
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import Status
from placement_dsl.starts import auto_methods, resolve


def pinned_on_servers() -> Problem:
    """Five ops on two servers of two accelerators, v4 (last, after v0 and v3) pinned to s0g0: 240 valid placements,
    optimum 12.08; every heuristic used to place v4 elsewhere."""
    rows = [("v0", 2.26, 2.6, 1.1), ("v1", 5.26, 3.0, 0.6), ("v2", 2.03, 4.2, 0.0), ("v3", 3.03, 4.3, 5.5),
            ("v4", 1.38, 3.5, 2.2)]
    ops = [Op(name=n, work={"accelerator": w}, param_bytes=p, out_bytes=o) for n, w, p, o in rows]
    graph = Graph(ops, [("v0", "v1"), ("v0", "v3"), ("v0", "v4"), ("v1", "v2"), ("v1", "v3"), ("v3", "v4")])
    cluster = Cluster.hierarchical(2, 2, intra=4.0, inter=1.0, memory=12.0)
    return Problem(graph, cluster, Makespan(), [Memory(), Pin("v4", "s0g0")])


def test_the_pinned_seed_gets_a_valid_start_and_its_optimum():
    problem = pinned_on_servers()
    assert problem.cluster.times(problem.graph)[4].tolist() == [1.38, np.inf, np.inf, np.inf]
    start = resolve(problem, "auto")
    assert start.usable, start.refusal
    result = solve(problem, time_limit=30)
    assert result.status is Status.OPTIMAL and result.objective == pytest.approx(12.08), result.message
    assert "refused" not in result.message


def generated(seed: int, latency: bool) -> Problem:
    """A random 8-op DAG with one op pinned to the last accelerator and two ops colocated, on accelerators that run one op
    at a time (makespan) or on Tarnawski's accelerators and a CPU (latency)."""
    rng = random.Random(seed)
    graph = testing.structured_graph(rng, "random", 8, cpu=latency)
    if latency:
        cluster = Cluster.accelerators(2, cpus=1, bandwidth=2.0)
    else:
        cluster = Cluster([Device(name=f"d{i}", invocations=False, bandwidth=2.0) for i in range(3)])
    pinned = graph.names[rng.randrange(graph.n)]  # to the last accelerator (one-device puts no op on the host)
    device = next(d.name for d in reversed(cluster.devices) if not d.host)
    others = [n for n in graph.names if n != pinned]
    return Problem(graph, cluster, Latency(), [Pin(pinned, device), Colocate([rng.sample(others, 2)])])


CASES = [(seed, latency) for seed in (1, 2) for latency in (False, True)]


@pytest.mark.parametrize("seed, latency", CASES)
def test_every_start_heuristic_of_the_family_honours_pins_and_colocation(seed, latency):
    problem = generated(seed, latency)
    ran = []
    for method in auto_methods(problem):
        try:
            found = run(method, problem.graph, problem.cluster, model=problem.cost_model(), time_limit=5)
        except (PlacementError, SpecError):  # a method that declines this graph
            continue
        ran.append(method)
        assert not [v for v in problem.violations(found.placement) if v.startswith(("[allowed]", "[colocation]"))], \
            method
    assert len(ran) >= 3, ran
