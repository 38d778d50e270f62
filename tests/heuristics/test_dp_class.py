"""The DP over ideals is exact over its own class, contiguous splits whose quotient graph is acyclic (a chain of
ideals), and says so: a contiguous split whose quotient has a cycle may beat it, most easily beside a host CPU, which
pays no transfers. Checked by brute force on tiny graphs over heterogeneous clusters with a host."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster, Device
from placement_dsl.conformance import check_heuristic, class_optimum
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.base import DP_CLASS
from placement_dsl.objectives import Throughput
from placement_dsl.placement import PlacementClass
from placement_dsl.problem import Problem
from placement_dsl.testing import random_graph


def _beside_host() -> Problem:
    """Five ops, one accelerator and a host CPU: the host holds v1 and v4 (unrelated), whose split is contiguous with
    a quotient cycle (acc0 -> cpu0 -> acc0), 13.0; the best chain of ideals is 14.0."""
    ops = [Op(name="v0", work=5.0, out_bytes=3.0, param_bytes=4.0), Op(name="v1", work=4.0),
           Op(name="v2", work=5.0, out_bytes=2.0), Op(name="v3", work=5.0, out_bytes=1.0, param_bytes=2.0),
           Op(name="v4", work=4.0, out_bytes=2.0, param_bytes=1.0)]
    graph = Graph(ops, [("v0", "v3"), ("v1", "v2"), ("v1", "v3"), ("v3", "v4")])
    cluster = Cluster([Device(name="acc0", kind="accelerator"), Device(name="cpu0", kind="cpu")])
    return Problem(graph, cluster, Throughput(), [])


def test_the_dp_claims_its_own_class_not_every_contiguous_split():
    problem = _beside_host()
    found = run("dp", problem.graph, problem.cluster, model=problem.cost_model())
    contiguous = class_optimum(problem, PlacementClass.CONTIGUOUS)
    assert contiguous < found.objective  # 13 < 14: a cyclic quotient wins
    assert found.exact_among == DP_CLASS and found.bound == found.objective
    assert found.objective == class_optimum(problem, PlacementClass.DP)
    assert check_heuristic("dp", problem) == []


@st.composite
def hetero_problems(draw):
    """A random DAG of 3-6 ops on 1-2 accelerators of different speeds and bandwidths and a host CPU."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    graph = random_graph(rng, draw(st.integers(3, 6)), density=draw(st.sampled_from([0.2, 0.4, 0.6])))
    speeds = st.sampled_from([0.5, 1.0, 2.0])
    devices = [Device(name=f"acc{i}", kind="accelerator", speed=draw(speeds), bandwidth=draw(speeds))
               for i in range(draw(st.integers(1, 2)))]
    devices.append(Device(name="cpu0", kind="cpu", speed=draw(speeds)))
    return Problem(graph, Cluster(devices), Throughput(), [])


@settings(max_examples=60, deadline=None)
@given(problem=hetero_problems())
def test_no_placement_of_the_claimed_class_beats_the_dp(problem):
    assert check_heuristic("dp", problem) == []


def test_a_contiguous_solve_takes_the_dps_bound_only_where_its_class_is_the_dps():
    from placement_dsl.constraints import Contiguous, DagOrder
    from placement_dsl.solve import solve
    from placement_dsl.starts import one_order
    from placement_dsl.testing import chain_graph

    plain = _beside_host()
    problem = Problem(plain.graph, plain.cluster, Throughput(), [Contiguous()])
    assert not one_order(problem.graph)
    result = solve(problem, time_limit=30)
    assert result.bound <= class_optimum(problem, PlacementClass.CONTIGUOUS) * (1 + 1e-9)  # 13, not the DP's 14
    assert result.objective == class_optimum(problem, PlacementClass.CONTIGUOUS)
    ordered = Problem(plain.graph, plain.cluster, Throughput(), [Contiguous(), DagOrder()])
    assert solve(ordered, time_limit=30).objective == class_optimum(ordered, PlacementClass.DP)
    assert one_order(chain_graph([1, 2, 3]))  # a chain: every contiguous set an interval
