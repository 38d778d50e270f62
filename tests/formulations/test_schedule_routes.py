"""The schedule MILP against the cost model on routed clusters (hierarchical servers, multi-hop routes), under every
congestion mode: the model keeps every schedule the cost model accepts (a valid placement's own schedule is a
feasible start at a horizon of its own makespan) and its optimum is no worse than brute force."""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from placement_dsl import testing
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.compile import compile
from placement_dsl.conformance import check_template_rows
from placement_dsl.constraints import Congestion, Contiguous, Memory
from placement_dsl.formulations.schedule import hinted
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import Status
from tests.formulations.schedule_rows import best_valid, broken_rows

MODES = ("port", "channel", "link", "none")


def broadcast_on_servers() -> Problem:
    """v0 feeds v1, v2 (then v3) and v4 on two servers of two accelerators (2 bytes per time unit inside a
    server, 1 between): with v0 on s0g0, v2 and v3 on s0g1, v1 on s1g0 and v4 on s1g1, v0's out-port sends to
    s0g1, then s1g0, then s1g1, so v4's input arrives after the latest start v2 could have (makespan 11.17)."""
    acc = [(5.85, 7.9, 0.5), (4.07, 0.2, 4.8), (2.08, 5.3, 5.1), (2.99, 1.7, 0.8), (3.69, 7.2, 2.3)]
    ops = [Op(name=f"v{i}", work=w, param_bytes=p, out_bytes=o) for i, (w, p, o) in enumerate(acc)]
    graph = Graph(ops, [("v0", "v1"), ("v0", "v2"), ("v0", "v4"), ("v2", "v3")], name="broadcast")
    return Problem(graph, Cluster.hierarchical(2, 2, intra=2.0, inter=1.0, memory=8.0), Latency(),
                   [Memory(), Contiguous()])


def placed(problem: Problem, where: dict[str, str]) -> Placement:
    g, c = problem.graph, problem.cluster
    return Placement(g, c, np.array([c.index[where[name]] for name in g.names]))


def test_a_broadcast_whose_last_transfer_waits_for_its_port_is_solved_and_accepted_as_a_start():
    problem = broadcast_on_servers()
    best = placed(problem, {"v0": "s0g0", "v1": "s1g0", "v2": "s0g1", "v3": "s0g1", "v4": "s1g1"})
    assert problem.evaluate(best).objective == pytest.approx(11.17) and problem.is_valid(best)
    assert check_template_rows(compile(hinted(problem, 11.17), "schedule"), best) == []
    for start in ("auto", best):
        result = solve(problem, time_limit=30, warm_start=start)
        assert result.status is Status.OPTIMAL and result.objective == pytest.approx(11.17), result.message
    assert exhaustive(problem) == pytest.approx(11.17)


# ---------------------------------------------------------------------------- generated instances
def line(k: int, bandwidth: float, latency: float) -> Cluster:
    """``k`` accelerators on a line, links both ways: a transfer between the ends takes every hop's link."""
    devices = [Device(name=f"d{i}", memory=math.inf, invocations=False) for i in range(k)]
    links = [Link(src=f"d{a}", dst=f"d{b}", bandwidth=bandwidth, latency=latency)
             for a in range(k) for b in (a - 1, a + 1) if 0 <= b < k]
    return Cluster(devices, links)


def tiny(seed: int, mode: str) -> Problem:
    """A random DAG of five ops (v0 feeding several more often than not) on two servers or on a line of three devices."""
    rng = random.Random(seed)
    ops = [Op(name=f"v{i}", work=round(rng.uniform(0.5, 6), 2), out_bytes=round(rng.uniform(0, 4), 1))
           for i in range(5)]
    edges = {(f"v{rng.randrange(j)}", f"v{j}") for j in range(1, 5)}
    edges |= {(f"v{i}", f"v{j}") for j in range(1, 5) for i in range(j) if rng.random() < (0.6 if i == 0 else 0.2)}
    if rng.random() < 0.5:
        cluster = Cluster.hierarchical(2, 2, intra=rng.choice([2.0, 4.0]), inter=rng.choice([0.5, 1.0]))
    else:
        cluster = line(3, rng.choice([1.0, 2.0]), rng.choice([0.0, 0.4]))
    return Problem(Graph(ops, sorted(edges), name=f"tiny{seed}"), cluster, Latency(), [Congestion(mode)])


def exhaustive(problem: Problem) -> float:
    """Every valid placement list-scheduled in every topological order: the least makespan the referee accepts."""
    return testing.scheduled_optimum(problem)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10**6), mode=st.sampled_from(MODES))
@example(seed=619869, mode="port")  # a producer's transfers queued on its out-port beyond a sibling's latest start
@example(seed=971512, mode="port")
@example(seed=436396, mode="port")
def test_the_schedule_milp_keeps_what_the_cost_model_accepts_on_routed_clusters(seed, mode):
    problem = tiny(seed, mode)
    ranked = best_valid(problem)
    for placement in ranked[:3]:  # each a feasible start at a horizon of its own makespan
        assert broken_rows(problem, placement) == []
    result = solve(problem, "schedule", time_limit=60, gap=1e-9)
    assert result.status is Status.OPTIMAL, result.message
    assert result.objective <= problem.evaluate(ranked[0]).objective * (1 + 1e-6)  # brute force, list-scheduled
    assert result.evaluation.valid and result.evaluation.objective == pytest.approx(result.objective, rel=1e-9)
