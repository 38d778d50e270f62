"""Model units and the template library: bytes in units of the largest capacity, a problem of no cost, hosts that
stream no overflow, the registry's names, and a placement's schedule as its warm start.
"""
from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest

from placement_dsl.blocks.base import BlockTemplate, Context
from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import Contiguous, Overflow
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Throughput
from placement_dsl.problem import Problem
from placement_dsl.testing import brute_force
from tests.blocks.helpers import accepting, by_name, proved_by_every_formulation, warm


# ---------------------------------------------------------------------------- model units and the library
def test_bytes_are_in_units_of_the_largest_capacity():
    # capacities 16e9 and 8e9 bytes (a host without a limit): bytes divide by 16e9, so the largest capacity is 1 and
    # an op of 4e9 parameter and 4e9 activation bytes is 0.5 (unscaled, rows would mix 1e9 with unit times)
    g = Graph([Op(name="a", work=1, param_bytes=4e9, activation_bytes=4e9), Op(name="b", work=1, param_bytes=2e9)],
              [("a", "b")])
    devs = [Device(name="big", memory=16e9), Device(name="small", memory=8e9),
            Device(name="cpu", kind="cpu", host=True)]
    ctx = Context(Problem(g, Cluster(devs), Throughput()))
    assert ctx.scale.memory == 16e9
    np.testing.assert_allclose(ctx.capacity, [1.0, 0.5, np.inf])
    np.testing.assert_allclose(ctx.mem, [0.5, 0.125])


def test_a_problem_with_no_cost_at_all_solves_to_zero():
    # no work and no bytes anywhere: the time unit falls back to 1 (a zero unit would divide every row by 0)
    g = Graph([Op(name="a", work=0, out_bytes=0), Op(name="b", work=0)], [("a", "b")])
    problem = Problem(g, Cluster.accelerators(2), Throughput(), [Contiguous()])
    assert Context(problem).scale.time == 1.0
    proved_by_every_formulation(problem, 0.0)


def test_a_host_streams_no_overflow():
    # soft memory: a (100 parameter bytes) runs in 1 on the CPU (a host of 1 byte, which pays no overflow) and in 1 on
    # the 1-byte accelerator, where its 99 bytes beyond memory stream at bandwidth 1: the CPU is the optimum, 1
    g = Graph([Op(name="a", work=1, param_bytes=100)])
    devs = [Device(name="acc", memory=1.0, bandwidth=1.0), Device(name="cpu", kind="cpu", host=True, memory=1.0)]
    problem = Problem(g, Cluster(devs), Throughput(), [Overflow()])
    best, placement = brute_force(problem)
    assert best == 1.0 and placement.mapping() == {"a": "cpu"}
    assert Context(problem).overflow_rate[1] == 0.0
    proved_by_every_formulation(problem, 1.0)


def test_a_registered_template_is_listed_by_its_block_name_and_a_nameless_one_refused():
    from placement_dsl.blocks.base import TEMPLATES, register

    class Named(BlockTemplate):
        name = "named_for_the_test"

    class Nameless(BlockTemplate):
        pass

    try:
        assert register(Named) is Named and TEMPLATES[Named] == "named_for_the_test"
        with pytest.raises(SpecError) as err:
            register(Nameless)
        assert str(err.value) == "template Nameless needs a block name" and Nameless not in TEMPLATES
    finally:
        TEMPLATES.pop(Named, None)


def test_the_schedule_a_placement_carries_is_its_warm_start():
    # a (1) and b (2) on one accelerator: list scheduling runs b first (higher upward rank); a placement that
    # carries "a at 0, b at 1" (valid, same makespan 3) starts the schedule MILP from that order, not the list one
    from placement_dsl.objectives import Makespan
    from placement_dsl.placement import Placement
    from placement_dsl.schedule import Schedule, list_schedule

    g = Graph([Op(name="a", work=1), Op(name="b", work=2)])
    problem = Problem(g, Cluster([Device(name="acc0", invocations=False)]), Makespan())  # one op at a time
    assert list_schedule(Placement(g, problem.cluster, [0, 0])).start.tolist() == [2.0, 0.0]
    carried = Placement(g, problem.cluster, [0, 0], schedule=Schedule(np.array([0.0, 1.0]), {}))
    c, values = warm(problem, "schedule", carried)
    assert c.objective_scale == 3.0  # model time unit: the total work on the one device
    assert (by_name(values, "S[a]"), by_name(values, "S[b]")) == (0.0, pytest.approx(1 / 3))
    assert by_name(values, "device_overlap.first[a,b]") == 1.0


def test_warm_start_on_a_routed_cluster_prices_each_pass_with_its_own_tensors():
    # training on two servers (inter-server bandwidth 1): forward fa (2) -> fb (2) sends 1 byte, backward gb (1) ->
    # ga (1) sends a 3-byte gradient; {fa, ga} | {fb, gb}. The backward routes cost 3, the forward ones 1, so the
    # warm start's objective is the cost model's only if each pass reads its own tensors' routes
    ops = [Op(name="fa", work=2, out_bytes=1, group="a"), Op(name="fb", work=2, out_bytes=1, group="b"),
           Op(name="gb", work=1, out_bytes=3, backward=True, group="b"),
           Op(name="ga", work=1, backward=True, group="a")]
    g = Graph(ops, [("fa", "fb"), ("fb", "gb"), ("gb", "ga")])
    problem = Problem(g, Cluster.hierarchical(2, 1, intra=10.0, inter=1.0), Throughput(), [Contiguous()])
    placement = problem.placement([0, 1, 1, 0])
    cost = problem.evaluate(placement).objective
    assert cost == 7.0  # each server: compute 3, the forward tensor 1 and the gradient 3 (no overlap)
    names = accepting(problem)
    for name in names:
        c, _ = warm(problem, name, placement)
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(cost), name
