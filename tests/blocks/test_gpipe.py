"""The GPipe objective's templates: an inference graph's GPipe objective is its max load with the overflow, and a
training optimum that overflows charges the overflow to the forward pass only (numbers worked out in the comments).
"""
from __future__ import annotations

import pyomo.environ as pyo
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Overflow
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import GPipe
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import brute_force
from tests.blocks.helpers import accepting, by_name, proved_by_every_formulation, warm


# ---------------------------------------------------------------------------- GPipe
def test_gpipe_on_an_inference_graph_is_the_max_load_with_its_overflow():
    # no backward pass: max FW + max BW = the max load, overflow included. a (work 3, 4 parameter bytes) ->
    # b (2) -> c (2), unit tensors, on 2 stages of memory 2 (bandwidth 1): {a} | {b, c} costs
    # max(3 + 1 + 2 (overflow), 4 + 1) = 6; {a, b} | {c} 5 + 1 + 2 = 8; {a, c} | {b} 5 + 2 + 2 = 9; one stage
    # 7 + 2 = 9. bw_bottleneck bounds nothing and must stay at 0 (its domain)
    g = Graph([Op(name="a", work=3, param_bytes=4, out_bytes=1), Op(name="b", work=2, out_bytes=1),
               Op(name="c", work=2)], [("a", "b"), ("b", "c")])
    problem = Problem(g, Cluster.stages(2, memory=2.0), GPipe(), [Overflow()])
    best, placement = brute_force(problem)
    where = placement.mapping()
    assert best == 6.0 and where["b"] == where["c"] != where["a"]
    for name in accepting(problem):
        r = solve(problem, formulation=name, solver="highs", time_limit=20, gap=1e-9)
        assert (r.objective, r.bound) == (pytest.approx(6.0), pytest.approx(6.0)), name
        c, values = warm(problem, name, placement)
        # model time unit: max(largest op 3, total work 7 / 2 stages) = 3.5
        assert c.objective_scale == pytest.approx(3.5)
        assert by_name(values, "fw_bottleneck") == pytest.approx(6.0 / 3.5), name
        assert by_name(values, "bw_bottleneck") == 0.0, name
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(6.0), name


def _training_overflow_problem() -> Problem:
    # forward f0 -> f1 (work 4, 3 parameter bytes, tensor 1 each), backward b1 -> b0 (work 1, tensor 1);
    # f0/b0 and f1/b1 colocated; stages of memory 2 and bandwidth 1 may overflow
    ops = [Op(name="f0", work=4, param_bytes=3, out_bytes=1, group="s"),
           Op(name="f1", work=4, param_bytes=3, out_bytes=1, group="t"),
           Op(name="b1", work=1, out_bytes=1, backward=True, group="t"),
           Op(name="b0", work=1, backward=True, group="s")]
    g = Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "b0")])
    return Problem(g, Cluster.stages(2, memory=2.0), GPipe(), [Overflow()])


def test_training_gpipe_warm_start_charges_the_overflow_to_the_forward_pass_only():
    # split {f0, b0} | {f1, b1}: each stage overflows 3 - 2 = 1 byte = 1 time unit, charged to the forward pass:
    #   FW = 4 (compute) + 1 (f0's tensor) + 1 (overflow) = 6 on both; BW = 1 (compute) + 1 (b1's tensor) = 2
    #   GPipe: 6 + 2 = 8. One stage: FW 8 + (6 - 2) = 12, BW 2: 14
    problem = _training_overflow_problem()
    best, placement = brute_force(problem)
    assert best == 8.0
    ev = problem.evaluate(placement)
    assert [(row.overflow, row.load_fw, row.load_bw) for row in ev.devices] == [(1.0, 6.0, 2.0), (1.0, 6.0, 2.0)]
    for name in accepting(problem):
        c, values = warm(problem, name, placement)
        # model time unit: max(largest op 4, total work 10 / 2) = 5; BW = 2 / 5 is below one unit
        assert c.objective_scale == pytest.approx(5.0)
        assert by_name(values, "fw_bottleneck") == pytest.approx(6.0 / 5.0), name
        assert by_name(values, "bw_bottleneck") == pytest.approx(2.0 / 5.0), name
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(8.0), name


def test_training_gpipe_solves_with_the_overflow_in_the_forward_pass():
    # the problem of the warm-start test above, solved: 8 (without the forward overflow the model would say 6)
    problem = _training_overflow_problem()
    proved_by_every_formulation(problem, 8.0)
