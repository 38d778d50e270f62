"""A heuristic that searches as if a pin were not there (SliceGraph sees the devices of a kind alike) says so: its
answer off the pin claims no bound and no exactness, where an infinite objective used to stand as a proven bound
(certify's dp level then asserted a bound above a feasible objective). The DP over ideals honours pins
(tests/heuristics/test_dp_pins.py)."""
from __future__ import annotations

import math

import pytest

from placement_dsl import Memory, Pin, Placement, Problem, Throughput, zoo
from placement_dsl.heuristics import run


@pytest.fixture(scope="module")
def workload():
    return zoo.get("transformer-small")


def _pinned(workload, device):
    op = workload.graph.ops[workload.graph.n // 2].name
    return Problem(workload.graph, workload.cluster, Throughput(), [Memory(), Pin(op, device)]), op


@pytest.mark.parametrize("method", ["slicegraph"])
def test_an_answer_off_its_pin_claims_no_bound(workload, method):
    free = run(method, workload.graph, workload.cluster)
    op = workload.graph.ops[workload.graph.n // 2].name
    on = free.placement.cluster.names[int(free.placement.assign[workload.graph.index[op]])]
    other = next(d for d in workload.cluster.names if d != on and workload.cluster.device(d).kind ==
                 workload.cluster.device(on).kind)
    problem, _ = _pinned(workload, other)
    r = run(method, problem.graph, problem.cluster, model=problem.cost_model())
    assert not r.valid and problem.violations(r.placement)
    assert r.bound is None and r.exact_among is None
    assert f"pinned to {other!r}" in r.info["pins"] and "does not honour pins" in r.info["pins"]


def test_the_dp_keeps_a_pin_where_its_free_answer_did_not(workload):
    free = run("dp", workload.graph, workload.cluster)
    op = workload.graph.ops[workload.graph.n // 2].name
    on = free.placement.cluster.names[int(free.placement.assign[workload.graph.index[op]])]
    other = next(d for d in workload.cluster.names if d != on and workload.cluster.device(d).kind ==
                 workload.cluster.device(on).kind)
    problem, _ = _pinned(workload, other)
    r = run("dp", problem.graph, problem.cluster, model=problem.cost_model())
    assert r.valid and not problem.violations(r.placement) and "pins" not in r.info
    assert r.bound is not None and r.bound <= r.objective + 1e-9 and r.objective >= free.objective - 1e-9


def test_an_answer_on_its_pin_keeps_its_claim(workload):
    free = run("dp", workload.graph, workload.cluster)
    op = workload.graph.ops[workload.graph.n // 2].name
    on = free.placement.cluster.names[int(free.placement.assign[workload.graph.index[op]])]
    problem, _ = _pinned(workload, on)
    r = run("dp", problem.graph, problem.cluster, model=problem.cost_model())
    assert r.valid and "pins" not in r.info
    assert r.bound is not None and math.isfinite(r.bound) and r.bound <= r.objective + 1e-9


def test_the_stage_cut_bound_of_a_pinned_graph_is_finite_and_below_a_pinned_answer():
    """The stage cut read each op's time on the first stage, ``inf`` for an op pinned elsewhere: an infinite
    capacity in its flow graph (networkx raised, certify crashed past the dp level)."""
    from placement_dsl import Bottleneck, Cluster, DagOrder, Overflow
    from placement_dsl.bounds.local import stage_cut_bound
    from placement_dsl.graph import Graph, Op

    ops = [Op(name=f"v{i}", work=1.0 + (i % 3), out_bytes=2.0, param_bytes=1.0) for i in range(8)]
    graph = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(7)])
    stages = Cluster.stages(3, bandwidth=2.0)
    problem = Problem(graph, stages, Bottleneck(), [DagOrder(), Overflow(), Pin("v4", "stage1")])
    bound, _ = stage_cut_bound(problem.graph, stages, overflow=True)
    answer = Placement(problem.graph, stages, [0, 0, 0, 1, 1, 1, 2, 2])  # v4 on stage1, in DAG order
    assert not problem.violations(answer)
    assert math.isfinite(bound) and bound <= problem.evaluate(answer).objective + 1e-9
