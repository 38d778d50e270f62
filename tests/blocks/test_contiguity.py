"""Contiguity of the forward and the backward pass, in every formulation: where it binds, what a warm start marks
as reached, and the passes held separately.
"""
from __future__ import annotations

import pyomo.environ as pyo
import pytest

from placement_dsl.blocks import TensorCut
from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.constraints import Contiguous
from placement_dsl.errors import SpecError
from placement_dsl.formulations import get
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, GPipe, Throughput
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import brute_force, without
from tests.blocks.helpers import accepting, asymmetric_training_problem, proved_by_every_formulation, warm, whole


# ---------------------------------------------------------------------------- contiguity of the backward pass
def _backward_contiguity_problem(objective, cpu: bool = False) -> Problem:
    """f (1) -> b1 (2) -> b2 (4) -> b3 (2), b1..b3 backward, no tensors, two stages: {f, b1, b3} | {b2} balances at 5
    but leaves stage0's backward part and comes back; contiguous, the best is {f, b1} | {b2, b3} = 6 (throughput).
    ``cpu``: an accelerator and a CPU, f runs on the accelerator only."""
    ops = [Op(name="f", work={"accelerator": 1.0} if cpu else 1), Op(name="b1", work=2, backward=True),
           Op(name="b2", work=4, backward=True), Op(name="b3", work=2, backward=True)]
    g = Graph(ops, [("f", "b1"), ("b1", "b2"), ("b2", "b3")])
    return Problem(g, Cluster.accelerators(1, cpus=1) if cpu else Cluster.stages(2), objective, [Contiguous()])


def _contiguity_binds(problem, best, loose):
    """Contiguity lifts the brute-force optimum from ``loose`` to ``best``, which every formulation proves."""
    assert brute_force(problem)[0] == best and brute_force(without(problem, Contiguous))[0] == loose
    proved_by_every_formulation(problem, best)


@pytest.mark.parametrize("objective, best", [(Throughput(), 6.0), (GPipe(), 7.0)], ids=["throughput", "gpipe"])
def test_backward_contiguity_binds_in_every_formulation(objective, best):
    _contiguity_binds(_backward_contiguity_problem(objective), best, 5.0)


def test_contiguity_warm_start_marks_what_each_op_reaches():
    # the contiguous optimum {b2, b3} | {f, b1} (the backward pass flows back to stage0, as the chain model lays it
    # out): z[v, d, p] = 1 iff an op of (d, p) is reachable from v, v included
    problem = _backward_contiguity_problem(Throughput())
    placement = problem.placement([1, 1, 0, 0])
    assert problem.is_valid(placement) and problem.evaluate(placement).objective == 6.0
    for name in accepting(problem):
        c, values = warm(problem, name, placement)
        z = {v.name.split("z[")[1].rstrip("]"): x for v, x in values.items()
             if v.parent_component().local_name == "z"}
        if not z:  # the chain formulation orders the stages instead
            continue
        assert z["f,stage1,forward"] == 1 and z["b1,stage1,forward"] == 0, name
        assert z["f,stage1,backward"] == z["b1,stage1,backward"] == 1 and z["b2,stage1,backward"] == 0, name
        assert z["f,stage0,backward"] == z["b3,stage0,backward"] == 1 and z["b3,stage0,forward"] == 0, name
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(6.0), name


def _pass_crossing_problem(grouped: bool) -> Problem:
    """f1 -> b -> f2 with b a backward op feeding a forward one: a device holding f1 and f2 leaves its forward set
    through b and comes back, whether or not b sits on it too.

    ``grouped=False``: works 2, 3, 1, no tensors: {f1, f2} | {b} balances at 3 but is not contiguous; contiguous,
    {f1} | {b, f2} = 4. ``grouped=True``: f1 and b colocated, 10-byte tensors, works 1: one stage (3) is not
    contiguous either; the best split {f1, b} | {f2} pays 1 + 1 + 10 = 12 on stage0."""
    if grouped:
        ops = [Op(name="f1", work=1, out_bytes=10, group="g"), Op(name="b", work=1, out_bytes=10, backward=True,
                                                                   group="g"), Op(name="f2", work=1)]
    else:
        ops = [Op(name="f1", work=2), Op(name="b", work=3, backward=True), Op(name="f2", work=1)]
    return Problem(Graph(ops, [("f1", "b"), ("b", "f2")]), Cluster.stages(2), Throughput(), [Contiguous()])


@pytest.mark.parametrize("grouped, best", [(False, 4.0), (True, 12.0)])
def test_a_forward_set_left_through_a_backward_op_is_not_contiguous(grouped, best):
    _contiguity_binds(_pass_crossing_problem(grouped), best, 3.0)


def test_contiguity_holds_per_pass_not_for_both_passes_at_once():
    # the training split {f0, b0} | {f1, b1} of the asymmetric problem: each pass is contiguous on each stage, but
    # f0 -> f1 -> b1 -> b0 leaves stage0 and comes back, so one set over both passes would refuse it (one stage: 16)
    problem = asymmetric_training_problem(GPipe())
    problem = Problem(problem.graph, problem.cluster, problem.objective, [Contiguous()])
    assert brute_force(problem)[0] == 14.0
    proved_by_every_formulation(problem, 14.0)


def test_chain_refuses_a_forward_op_that_reads_a_backward_one():
    # its answer on this graph broke contiguity (solve's re-check refused it): the DP class mirrors the backward
    # ops on the forward chain, which a gradient feeding a forward op does not follow
    problem = _pass_crossing_problem(False)
    reason = get("chain").accepts(problem)
    assert reason is not None and reason.startswith("formulation 'chain': forward op 'f2' reads backward op 'b', ")
    with pytest.raises(SpecError, match="forward op 'f2' reads backward op 'b'"):
        solve(problem, formulation="chain")


def test_backward_contiguity_holds_on_a_device_no_forward_op_may_use():
    # f runs on the accelerator only; the CPU takes backward ops. {f, b2} | {b1, b3} balances at 5 but the CPU's
    # backward part is left through the accelerator and re-entered; contiguous, the best is 6
    _contiguity_binds(_backward_contiguity_problem(Throughput(), cpu=True), 6.0, 5.0)


def test_chain_refuses_templates_of_cluster_order_by_name():
    # the chain orders slots (Y), not devices: a template that asks for y(v, b) (here Archer's cut) is refused
    from placement_dsl.blocks.chain import AncestorCuts, ChainAssignment, ChainOrder, CpuGaps

    with_y = get("chain").derive("chain_with_archers_cut", skeleton=lambda p: [
        CpuGaps(), ChainAssignment(), ChainOrder(), TensorCut(form="archer"), AncestorCuts()])
    g = Graph([Op(name="u", work=1, out_bytes=1), Op(name="v", work=1)], [("u", "v")])
    with pytest.raises(SpecError, match=whole(
            "chain formulation: y (device b or earlier in cluster order) is undefined; the chain's order is over "
            "slots (Y), so templates of cluster order (dag_order, Archer's cut) do not apply")):
        compile(Problem(g, Cluster.stages(2), Bottleneck()), with_y)


