"""The cost model's loads on hand-computed cases: a replicated training stage, overflow on the communication side
of an overlapped load, hosts, both passes' tensors, and the checks each named objective requires.
"""
from __future__ import annotations

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import DEFAULT_REQUIRE, CostModel, evaluate, invocation_latency
from placement_dsl.formulations import Kind, of_kind
from placement_dsl.graph import Graph, Op
from placement_dsl.placement import Placement

FORMULATIONS = of_kind(Kind.EXACT)


# ---------------------------------------------------------------------------- the cost model
def _two_stage_training() -> Graph:
    """f0 -> f1 -> b1 -> b0, f0/b0 and f1/b1 colocated; f0 holds 6 parameter bytes."""
    ops = [Op(name="f0", work=4, param_bytes=6, out_bytes=2, group="a"),
           Op(name="f1", work=3, out_bytes=2, group="b"),
           Op(name="b1", work=2, out_bytes=1, backward=True, group="b"),
           Op(name="b0", work=7, backward=True, group="a")]
    return Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "b0")])


def test_replicated_training_stage_splits_passes_and_mirrors_its_replica():
    # stage0 = {f0, b0} on stage0 and its replica stage1; stage3 = {f1, b1}; bandwidth 1 everywhere.
    # stage0: compute fw 4, bw 7; reads b1's tensor (bw 1); writes f0's (fw 2)
    #   load_fw = 4 + 2 = 6, load_bw = 7 + 1 = 8, load = 11 + 1 + 2 = 14
    #   sync = 2 * (2 - 1) / 2 * 6 / 1 = 6 (ring all-reduce of f0's parameters)
    #   replicated (overlap none): load_fw = 6 / 2 = 3, load_bw = 8 / 2 + 6 = 10, load = 14 / 2 + 6 = 13
    # stage3: compute fw 3, bw 2; reads f0's tensor (fw 2); writes b1's (bw 1): load 3 + 2 + 2 + 1 = 8
    p = Placement(_two_stage_training(), Cluster.stages(4), [0, 3, 3, 0], replicas=[2, 1, 1, 1])
    ev = evaluate(p, CostModel(require=frozenset()))
    s0, s1, s2, s3 = ev.devices
    for row in (s0, s1):  # the replica mirrors its stage's row
        assert (row.compute_fw, row.compute_bw, row.in_fw, row.in_bw, row.out_fw, row.out_bw) == (4, 7, 0, 1, 2, 0)
        assert (row.replicas, row.sync) == (2, pytest.approx(6.0))
        assert (row.load_fw, row.load_bw, row.load) == pytest.approx((3.0, 10.0, 13.0))
    assert (s2.load, s2.replicas, s2.ops) == (0.0, 1, 0)
    assert (s3.in_fw, s3.out_bw, s3.load_fw, s3.load_bw) == (2, 1, 5, 3)
    assert s3.load == pytest.approx(8.0) and s3.sync == 0.0
    assert ev.objective == pytest.approx(13.0)
    # overlapped communication: max(share, sync) instead of share + sync
    half = evaluate(p, CostModel(overlap="half", require=frozenset())).devices[0]
    # load_bw = max(7, 1) = 7 -> max(3.5, 6) = 6; load = max(11, 3) = 11 -> max(5.5, 6) = 6; load_fw = max(4, 2) / 2
    assert (half.load_fw, half.load_bw, half.load) == pytest.approx((2.0, 6.0, 6.0))


def test_overflow_is_part_of_the_communication_side_of_an_overlapped_load():
    # a (work 1, 5 parameter bytes, tensor 1) -> b (work 1) on two stages of memory 2, bandwidth 1:
    # stage0 overflows by 3 bytes = 3 time units, computes 1 and writes 1
    g = Graph([Op(name="a", work=1, param_bytes=5, out_bytes=1), Op(name="b", work=1)], [("a", "b")])
    p = Placement(g, Cluster.stages(2, memory=2.0), [0, 1])
    loads = {o: evaluate(p, CostModel.named("bottleneck", overlap=o)).devices[0].load for o in ("none", "half", "full")}
    assert loads == {"none": 1 + 1 + 3, "half": max(1, 1 + 3), "full": max(1, 0, 1 + 3)}
    # stage1 holds nothing and overflows nothing: its load is b's work plus reading a's tensor
    row = evaluate(p, "bottleneck").devices[1]
    assert (row.overflow, row.load) == (0.0, 2.0)


def test_host_devices_never_overflow_and_rows_carry_kind_and_op_count():
    # the CPU (a host) holds 5 parameter bytes in 1 byte of memory: hosts hold the model in RAM, no overflow;
    # the accelerator holds b (2 bytes in 1): overflow 1 / bandwidth 1
    g = Graph([Op(name="a", work=1, param_bytes=5, out_bytes=1), Op(name="b", work=1, param_bytes=2)], [("a", "b")])
    c = Cluster.accelerators(1, memory=1.0, cpus=1, cpu_memory=1.0)
    acc, cpu = evaluate(Placement(g, c, [1, 0]), "bottleneck").devices
    assert (cpu.kind, cpu.ops, cpu.overflow, cpu.load) == ("cpu", 1, 0.0, 1.0)
    assert (acc.kind, acc.ops, acc.overflow, acc.load) == ("accelerator", 1, 1.0, 1 + 1 + 1)


def test_training_load_adds_both_passes_outgoing_tensors():
    # without replication, overlap none: stage1 reads f0's tensor (forward, 2 bytes) and writes b1's (backward, 1)
    p = Placement(_two_stage_training(), Cluster.stages(2), [0, 1, 1, 0])
    s0, s1 = evaluate(p).devices
    assert (s0.out_fw, s0.in_bw, s0.load) == (2, 1, 4 + 7 + 2 + 1)
    assert (s1.in_fw, s1.out_bw, s1.load) == (2, 1, 3 + 2 + 2 + 1)


def test_named_models_require_the_checks_their_objective_scores():
    assert CostModel.named("throughput").require == DEFAULT_REQUIRE == {"allowed", "memory", "colocation"}
    assert CostModel.named("bottleneck").require == {"allowed", "colocation"}  # memory is a cost, not a limit
    assert CostModel.named("makespan").require == {"allowed", "memory", "colocation", "schedule"}
    assert CostModel.named("bottleneck", overlap="half").require == {"allowed", "colocation"}


def test_latency_violations_are_contiguity_checks_and_the_limit_is_optional():
    # a -> b -> c -> d -> e alternating over two stages: stage0 runs three subgraphs, stage1 two
    g = Graph([Op(name=n, work=1, out_bytes=1) for n in "abcde"], [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e")])
    p = Placement(g, Cluster.stages(2), [0, 1, 0, 1, 0])
    latency, finish, subgraphs, problems = invocation_latency(p)  # no model: no limit on subgraphs
    assert (latency, subgraphs, problems) == (13.0, {"stage0": 3, "stage1": 2}, [])
    assert finish["e"] == 13.0
    (v,) = invocation_latency(p, CostModel.named("latency", max_subgraphs=2))[3]
    assert v.check == "contiguous" and "'stage0' needs 3" in v.message
    ev = evaluate(p, CostModel.named("latency", max_subgraphs=2))
    assert [v.check for v in ev.violations if "max_subgraphs" in v.message] == ["contiguous"]
    # two invocations waiting on each other (a -> b, c -> d; stage0 {a, d}, stage1 {b, c}): a contiguity violation
    g2 = Graph([Op(name=n, work=1, out_bytes=1) for n in "abcd"], [("a", "b"), ("c", "d")])
    latency, finish, _, problems = invocation_latency(Placement(g2, Cluster.stages(2), [0, 1, 1, 0]))
    assert latency == float("inf") and finish == {}
    assert [v.check for v in problems] == ["contiguous"]
    assert problems[0].message.endswith("wait on each other, e.g. the cycle stage0#1 -> stage1#1")


