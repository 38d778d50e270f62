"""Warm starts of the block templates on the paths the known instances never reach: loads below one model unit,
ops on merged hosts read as their representative, routed and merged tensor cuts. Each start satisfies every row of
the model, prices its placement like the cost model, and carries the hand-computed values.
"""
from __future__ import annotations

import pyomo.environ as pyo
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import DagOrder
from placement_dsl.formulations.latency import hinted
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, Latency
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import brute_force
from tests.blocks.helpers import accepting, warm


# ---------------------------------------------------------------------------- loads below one unit
def test_warm_start_of_a_free_placement_has_a_zero_bottleneck():
    # ops with no work (reshapes): the time unit is the largest tensor (2 bytes at bandwidth 1); every op on one
    # stage moves nothing, so the bottleneck is 0 — not the 1 unit an epigraph started at 1 would claim
    g = Graph([Op(name="a", out_bytes=2), Op(name="b", out_bytes=1), Op(name="c")], [("a", "b"), ("b", "c")])
    problem = Problem(g, Cluster.stages(2), Bottleneck(), [])
    best, placement = brute_force(problem)
    assert best == 0.0
    for name in accepting(problem):
        c, _ = warm(problem, name, placement)
        assert c.objective_scale == pytest.approx(2.0), name
        assert pyo.value(c.objective) == 0.0, name


# ---------------------------------------------------------------------------- representatives
def test_warm_start_reads_an_op_on_a_merged_host_as_its_representative():
    # the latency IP merges the two unbounded CPUs into cpu0 (they are interchangeable): b on cpu1 is encoded as
    # x[b, cpu0] = 1, and cpu1 has no variables. a (acc 1) -> b (cpu 1): latency 1 + 1 (tensor) + 1 = 3
    ops = [Op(name="a", work={"accelerator": 1, "cpu": 5}, out_bytes=1), Op(name="b", work={"cpu": 1})]
    problem = Problem(Graph(ops, [("a", "b")]), Cluster.accelerators(1, cpus=2), Latency(), [])
    placement = problem.placement([0, 2])  # acc0, cpu1
    assert problem.evaluate(placement).objective == 3.0
    # b may not run on the accelerator: the run-flow rows skip it instead of writing 0 == 0
    r = solve(problem, formulation="latency", solver="highs", time_limit=20, gap=1e-9)
    assert (r.objective, r.bound) == (pytest.approx(3.0), pytest.approx(3.0))
    _, values = warm(hinted(problem, 3.0), "latency", placement)
    x = {v.name: value for v, value in values.items() if v.parent_component().local_name == "x"}
    assert x == {"assignment.x[a,acc0]": 1.0, "assignment.x[a,cpu0]": 0.0, "assignment.x[b,cpu0]": 1.0}


# ---------------------------------------------------------------------------- tensor cuts
def test_warm_start_on_a_routed_cluster_prices_each_route():
    # two servers of one accelerator each, inter-server bandwidth 1: a (work 2, tensor 1) -> b (work 2) split
    # costs 2 + 1 on each side (3); together 4. The reader and the writer each pay the route once
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    problem = Problem(g, Cluster.hierarchical(2, 1, intra=10.0, inter=1.0), Bottleneck(), [])
    best, placement = brute_force(problem)
    assert best == 3.0 and placement.mapping() == {"a": "s0g0", "b": "s1g0"}
    for name in accepting(problem):
        c, values = warm(problem, name, placement)
        # model time unit: max(2, 4 / 2) = 2, so the route costs 1 / 2
        routes = {v.name: x for v, x in values.items() if v.parent_component().local_name in ("recv", "send")}
        assert routes == {"tensor_cut.recv[a,s0g0]": 0.0, "tensor_cut.recv[a,s1g0]": 0.5,
                          "tensor_cut.send[a,s0g0]": 0.5, "tensor_cut.send[a,s1g0]": 0.0}, name
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(3.0), name


def test_warm_start_of_archers_merged_cut_counts_a_tensor_leaving_and_entering():
    # Archer's c[u, b] (DAG order, no full-duplex overlap) is 1 where tensor u enters *or* leaves block b:
    # a on stage0 writes its tensor (c = 1 there), b on stage1 reads it (c = 1 there). Load 2 + 1 on both: 3
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    problem = Problem(g, Cluster.stages(2), Bottleneck(), [DagOrder()])
    best, placement = brute_force(problem)
    assert best == 3.0
    c, values = warm(problem, "exact", placement)
    cut = {v.name: x for v, x in values.items() if v.parent_component().local_name == "cut"}
    assert cut == {"tensor_cut.cut[a,stage0]": 1.0, "tensor_cut.cut[a,stage1]": 1.0}
    assert pyo.value(c.objective) * c.objective_scale == pytest.approx(3.0)


