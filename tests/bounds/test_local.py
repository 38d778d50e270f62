"""The stage-cut bound (bounds/local.py): colocation groups kept whole, single loads, the floor it starts from,
activation memory in the overflow, and the problem-level entry and what it refuses by name.
"""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.bounds import local
from placement_dsl.bounds.local import cheapest_stage, single_loads, stage_cut_applies, stage_cut_bound
from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import Overflow
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, Latency
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem, Stages
from placement_dsl.testing import optimum

TWO = Cluster.accelerators(2, cpus=1)


# ---------------------------------------------------------------------------- bounds/local.py


def test_stage_cut_keeps_a_colocation_group_whole():
    # a, b, c (work 1, 1, 4) must share a stage, so every stage holding one of them costs 6, the optimum.
    # Lemma 3.3 gives 4 (the largest op; half the sum is 3). The search skips an op whose smallest stage
    # cannot beat the bound so far: that stage is its group (6), not the op alone (1, 1, 4 <= 4: all skipped)
    graph = Graph([Op(name=n, work=w, group="g") for n, w in (("a", 1.0), ("b", 1.0), ("c", 4.0))])
    assert single_loads(graph, Stages(2)).tolist() == [6.0, 6.0, 6.0]
    bound, op = stage_cut_bound(graph, Stages(2))
    assert bound == pytest.approx(6.0, rel=1e-9) and op == 0
    assert optimum(Problem(graph, Stages(2), Bottleneck(), [])) == 6.0


def test_single_loads_are_the_cost_models_load_of_each_ops_smallest_stage():
    # a (2) -> b (3) -> c (1), {b, c} colocated, on stages of 4 bytes at bandwidth 2 (0.5 per byte crossing);
    # a writes 1 byte to b, b 0.5 to c, c 4 bytes to no one. a alone: 2 + 0.5 (its tensor leaves) + its
    # overflow (3 + 2 - 4) / 2 = 0.5: 3; {b, c}: 4 + 0.5 (a's tensor enters; b's stays inside, c's has no
    # reader), memory 1 + 1 = 2 within the 4 bytes: 4.5
    graph = Graph([Op(name="a", work=2.0, out_bytes=1.0, param_bytes=3.0, activation_bytes=2.0),
                   Op(name="b", work=3.0, out_bytes=0.5, param_bytes=1.0, group="g"),
                   Op(name="c", work=1.0, out_bytes=4.0, activation_bytes=1.0, group="g")], [("a", "b"), ("b", "c")])
    stages = Stages(2, memory=4.0, bandwidth=2.0)
    loads = single_loads(graph, stages)
    assert loads.tolist() == [3.0, 4.5, 4.5]
    for v, members in ((0, [0]), (1, [1, 2]), (2, [1, 2])):
        assign = np.array([0 if u in members else 1 for u in range(graph.n)], dtype=np.int64)
        ev = evaluate(Placement(graph, stages, assign), CostModel.named("bottleneck"))
        assert ev.devices[0].load == loads[v]


def test_stage_cut_refuses_hosts_routes_and_unlike_devices_by_name():
    graph = Graph([Op(name="a", work=1.0)])
    why = "the stage-cut bound needs identical non-host devices without routes"
    assert stage_cut_applies(graph, Cluster.accelerators(2, cpus=1)) == why  # a host beside the accelerators
    assert stage_cut_applies(graph, Cluster.accelerators(0, cpus=2)) == why  # alike, but hosts
    assert stage_cut_applies(graph, Cluster.hierarchical(1, 2, intra=10.0, inter=1.0)) == why  # alike, but routed
    assert stage_cut_applies(graph, Cluster([Device(name="fast", speed=2.0), Device(name="slow")])) == why
    assert stage_cut_applies(graph, Stages(2)) is None


def test_stage_cut_starts_from_the_floor_it_is_given():
    # the transfer case bounds 11 from Lemma 3.3's 5; a floor of 20 leaves no op to cut, a floor of 0 lets the two
    # unit ops (Lemma 3.3: 1) be cut: 1 shaved by the relative SAFETY, not Lemma 3.3's own 1
    graph = Graph([Op(name="a", work=5, out_bytes=6), Op(name="b", work=1, out_bytes=6), Op(name="c", work=5)],
                  [("a", "b"), ("b", "c")])
    assert stage_cut_bound(graph, Stages(3), floor=20.0) == (20.0, None)
    two = Graph([Op(name="a", work=1.0), Op(name="b", work=1.0)])
    assert stage_cut_bound(two, Stages(2), floor=0.0) == (1.0 - 1e-12, 0)
    assert stage_cut_bound(two, Stages(2)) == (1.0, None)


def test_stage_cut_counts_activation_memory_in_the_overflow():
    # as test_stage_cut.py's overflow case with activations: 10 bytes on a 4-byte stage stream 6 at bandwidth 2
    graph = Graph([Op(name="a", work=2.0, activation_bytes=10.0), Op(name="b", work=1.0)], [("a", "b")])
    stages = Stages(2, memory=4.0, bandwidth=2.0)
    assert stage_cut_bound(graph, stages, overflow=True)[0] == pytest.approx(5.0, rel=1e-9)
    assert stage_cut_bound(graph, stages)[0] == 2.0  # by default the overflow is not counted: Lemma 3.3's 2
    assert optimum(Problem(graph, stages, Bottleneck(), [Overflow()])) == 5.0


def test_cheapest_stage_puts_the_rest_on_the_second_stage():
    # a (5) and b (1), no edge: the cheapest stage holding b is {b}; a goes to stage 1
    graph = Graph([Op(name="a", work=5.0), Op(name="b", work=1.0)])
    assert cheapest_stage(graph, Stages(2), 1).assign.tolist() == [1, 0]


def test_cheapest_stage_is_the_cut_without_memory():
    # a (1, 10 parameter bytes) writes 2 bytes to b (1): {b} costs 1 + 2, {a, b} costs 2, whatever a's
    # parameters (the lam = 0 cut; with them counted, 2 + 10 would send a away)
    graph = Graph([Op(name="a", work=1.0, param_bytes=10.0, out_bytes=2.0), Op(name="b", work=1.0)], [("a", "b")])
    assert cheapest_stage(graph, Stages(2), 1).assign.tolist() == [0, 0]


def test_stage_cut_problem_entry_names_its_op_or_lemma_3_3():
    # test_stage_cut.py's transfer case: b alone reads and writes 6 bytes (13), so it is cut first: 11
    graph = Graph([Op(name="a", work=5, out_bytes=6), Op(name="b", work=1, out_bytes=6), Op(name="c", work=5)],
                  [("a", "b"), ("b", "c")])
    problem = Problem(graph, Stages(3), Bottleneck(), [])
    assert local.problem_applies(problem) is None
    assert local.problem_bound(problem) == (pytest.approx(11.0, rel=1e-9), "the cheapest stage holding 'b'")
    # two unit ops without edges: no stage beats Lemma 3.3's 1
    two = Problem(Graph([Op(name="a", work=1.0), Op(name="b", work=1.0)]), Stages(2), Bottleneck(), [])
    assert local.problem_bound(two) == (1.0, "Lemma 3.3: no op's cheapest stage beats it")


def test_stage_cut_problem_entry_counts_overflow_only_when_streamed():
    # 10 parameter bytes on a 4-byte stage at bandwidth 2: 2 + 3 when the overflow streams, 2 under a hard cap
    graph = Graph([Op(name="a", work=2.0, param_bytes=10.0), Op(name="b", work=1.0)], [("a", "b")])
    stages = Stages(2, memory=4.0, bandwidth=2.0)
    streamed = local.problem_bound(Problem(graph, stages, Bottleneck(), [Overflow()]))
    assert streamed == (pytest.approx(5.0, rel=1e-9), "the cheapest stage holding 'a'")
    assert local.problem_bound(Problem(graph, stages, Bottleneck(), []))[0] == 2.0


def test_stage_cut_problem_entry_refuses_other_objectives_and_overlap():
    graph = Graph([Op(name="a", work=1.0)])
    assert local.problem_applies(Problem(graph, Stages(2), Latency(), [])) == (
        "the stage-cut bound bounds a max load, not 'latency'")
    assert local.problem_applies(Problem(graph, Stages(2), Bottleneck(overlap="half"), [])) == (
        "the stage-cut bound sums compute and transfers; overlap 'half' takes their maximum")


def test_stage_cut_names_the_first_of_equal_ops():
    # three unit ops, then two copies of the transfer case (a 5 -> b 1 -> c 5, 6-byte tensors) on 7 stages:
    # Lemma 3.3 gives 5 (half the sum 25 / 7 is less); the two b's read and write 12 bytes (13 alone), are cut
    # first, and cost 11 with their a and c; the first of the tie, b0 (op 4), is named, as on every machine
    # (NumPy's default sort may order the tie either way)
    ops = [Op(name=f"x{i}", work=1.0) for i in range(3)]
    edges = []
    for i in range(2):
        ops += [Op(name=f"a{i}", work=5, out_bytes=6), Op(name=f"b{i}", work=1, out_bytes=6), Op(name=f"c{i}", work=5)]
        edges += [(f"a{i}", f"b{i}"), (f"b{i}", f"c{i}")]
    assert stage_cut_bound(Graph(ops, edges), Stages(7)) == (pytest.approx(11.0, rel=1e-9), 4)

