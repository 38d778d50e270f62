"""The DP over ideals with memory per schedule (1F1B's k - s micro-batches, GPipe's m, recomputation):
exact over its class (forward-contiguous DAG-ordered splits on identical accelerators), checked
against brute force on tiny training graphs."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.errors import InfeasibleError, SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.ideals import dp
from placement_dsl.heuristics.pipeline import pipeline
from placement_dsl.objectives import Throughput
from placement_dsl.problem import Problem
from placement_dsl.testing import forward_ordered_optimum
from placement_dsl.training import TrainingMemorySpec
from placement_dsl.training_terms import TrainingMemory


@st.composite
def training_graphs(draw, max_ops: int = 4) -> Graph:
    """Random forward DAGs with a mirrored backward pass, each op colocated with its gradient."""
    n = draw(st.integers(1, max_ops))
    ops = [Op(name=f"v{i}", work=draw(st.sampled_from([0, 1, 2, 4])), out_bytes=draw(st.integers(0, 3)),
              param_bytes=draw(st.sampled_from([0, 1, 2])), group=f"v{i}") for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if draw(st.integers(0, 2)) == 0]
    ops += [Op(name=f"v{i}~bw", work=draw(st.integers(0, 4)), out_bytes=draw(st.integers(0, 2)), backward=True,
               group=f"v{i}") for i in range(n)]
    edges += [(f"{v}~bw", f"{u}~bw") for u, v in edges] + [(f"v{n - 1}", f"v{n - 1}~bw")]
    return Graph(ops, edges)


memories = st.builds(
    TrainingMemory,
    schedule=st.sampled_from(["1f1b", "gpipe"]), microbatches=st.sampled_from([2, 3]),
    optimizer_bytes=st.just(4.0), weight_bytes=st.just(2.0), recompute=st.booleans())


@settings(max_examples=60, deadline=None)
@given(graph=training_graphs(), memory=memories, cap=st.sampled_from([8.0, 12.0, 20.0, 40.0]),
       overlap=st.sampled_from(["none", "half", "full"]), k=st.integers(2, 3))
def test_dp_with_memory_per_schedule_is_brute_force_over_its_class(graph, memory, cap, overlap, k):
    cluster = Cluster.stages(k, memory=cap, bandwidth=2.0)
    problem = Problem(graph, cluster, Throughput(overlap=overlap), [memory])
    want = forward_ordered_optimum(problem)
    try:
        res = dp(graph, cluster, model=problem.cost_model())
    except InfeasibleError:
        assert want == math.inf
        return
    assert problem.is_valid(res.placement) and res.bound == res.objective
    assert res.objective == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert res.info["dp_value"] == pytest.approx(res.objective, rel=1e-9, abs=1e-12)
    try:  # the pipeline planner is exact along one order only
        along = pipeline(graph, cluster, model=problem.cost_model()).objective
    except InfeasibleError:
        return
    assert res.objective <= along * (1 + 1e-9) + 1e-12


def test_the_first_stage_stashes_one_micro_batch_per_stage_to_the_end():
    """``a``'s 4-byte activation is stashed ``k - s`` times on the first stage: 3 stages need 12 bytes of 10,
    so 1F1B pipelines {a, b} then {c} over 2 stages; GPipe with 2 micro-batches stashes 2 everywhere and takes all 3."""
    ops = [Op(name=n, work=2, out_bytes=o, group=n) for n, o in (("a", 4), ("b", 1), ("c", 1))]
    ops += [Op(name=f"{n}~bw", work=2, backward=True, group=n) for n in "abc"]
    g = Graph(ops, [("a", "b"), ("b", "c"), ("c", "c~bw"), ("c~bw", "b~bw"), ("b~bw", "a~bw")])
    cluster = Cluster.stages(3, memory=10.0, bandwidth=100.0)
    plain = dp(g, cluster, model=CostModel())
    one_f = CostModel(training_memory=TrainingMemorySpec("1f1b"))
    gpipe = CostModel(training_memory=TrainingMemorySpec("gpipe", microbatches=2))
    ours, flushed = dp(g, cluster, model=one_f), dp(g, cluster, model=gpipe)
    assert len(set(plain.placement.assign.tolist())) == 3 and not evaluate(plain.placement, one_f).valid
    assert len(set(ours.placement.assign.tolist())) == 2 and evaluate(ours.placement, one_f).valid
    assert ours.objective == pytest.approx(8.01) and plain.objective == pytest.approx(4.05)
    assert flushed.objective == pytest.approx(plain.objective) and evaluate(flushed.placement, gpipe).valid
    assert [r.memory_used for r in evaluate(flushed.placement, gpipe).devices] == [8.0, 10.0, 4.0]


@pytest.mark.parametrize("cluster, options, message", [
    (Cluster.hierarchical(2, 2, intra=4.0, inter=1.0), {}, "routes transfers"),
    (Cluster.accelerators(2, cpus=1), {}, "host devices"),
    (Cluster.stages(3), {"replication": True}, "replicated stages"),
])
def test_memory_per_schedule_refuses_what_it_does_not_model(cluster, options, message):
    g = Graph([Op(name="a", work=1, group="a"), Op(name="a~bw", work=1, backward=True, group="a")], [("a", "a~bw")])
    with pytest.raises(SpecError, match=message):
        dp(g, cluster, model=CostModel(training_memory=TrainingMemorySpec("1f1b")), **options)


def test_the_stash_holds_forward_tensors_only():
    """The 1F1B chain of ``testing.training_memory_1f1b`` over the DP's class: 14, brute force. A stage stashes
    the forward tensors it keeps for its backward pass; counting the backward ones too (the gradients
    b3 -> b2 -> ...) fills the 12-byte devices early and gives 17."""
    from placement_dsl.testing import training_memory_1f1b

    problem, _ = training_memory_1f1b()
    res = dp(problem.graph, problem.cluster, model=problem.cost_model())
    assert res.objective == forward_ordered_optimum(problem) == 14.0
    assert problem.is_valid(res.placement)
