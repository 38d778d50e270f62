"""Memory per schedule (blocks/training.py): the rows at a start are the cost model's memory, what the template
refuses, and the big-M that leaves a stage free to replicate or not.
"""
from __future__ import annotations

import itertools

import pyomo.environ as pyo
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.conformance import check_documented
from placement_dsl.evaluate import evaluate
from placement_dsl.formulations import get
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import brute_force
from tests.blocks.helpers import warm


def _chain(works, sizes):
    names = [f"v{i}" for i in range(len(works))]
    return Graph([Op(name=n, work=w, out_bytes=b) for n, w, b in zip(names, works, sizes)],
                 list(itertools.pairwise(names)))


# ---------------------------------------------------------------------------- blocks/training.py
def _training_memory_problem(spec, routed):
    """f0 -> f1 -> f2 (activations 3, 2, 1; tensors 2, 1; parameters 1 each) with mirrored backward ops, on four
    accelerators of memory 1000 (two servers of two when ``routed``) and, flat, a CPU of memory 1000 too."""
    from placement_dsl.objectives import PipeDream

    fw = [Op(name=f"f{i}", work={"accelerator": 2, "cpu": 6}, out_bytes=b, activation_bytes=a, param_bytes=1,
             group=f"c{i}") for i, (a, b) in enumerate(((3, 2), (2, 1), (1, 0)))]
    bw = [Op(name=f"b{i}", work={"accelerator": 4, "cpu": 12}, out_bytes=1, backward=True, group=f"c{i}")
          for i in range(3)]
    edges = [("f0", "f1"), ("f1", "f2"), ("f2", "b2"), ("b2", "b1"), ("b1", "b0")]
    cluster = (Cluster.hierarchical(2, 2, intra=4.0, inter=0.5, memory=1000.0) if routed
               else Cluster.accelerators(4, memory=1000.0, cpus=1, cpu_memory=1000.0))
    return Problem(Graph(fw + bw, edges), cluster, PipeDream(), [spec])


@pytest.mark.parametrize("routed", [False, True])
@pytest.mark.parametrize("schedule, microbatches, recompute", [("1f1b", None, False), ("1f1b", None, True),
                                                               ("gpipe", 3, False), ("gpipe", 2, True)])
def test_memory_rows_at_a_start_are_the_cost_models_memory(schedule, microbatches, recompute, routed):
    # each stage on its own device (f2's stage on the CPU when flat): at the start's values the left-hand side of
    # every device's capacity row is the memory the cost model charges that device, and every row holds
    from placement_dsl.training_terms import TrainingMemory

    spec = TrainingMemory(schedule, microbatches, recompute=recompute)
    problem = _training_memory_problem(spec, routed)
    last = 2 if routed else 4  # s1g0, or the CPU
    placement = Placement(problem.graph, problem.cluster, [0, 1, last, 0, 1, last])
    c, _ = warm(problem, "throughput", placement)
    rows = c.model.training_memory.capacity
    used = {r.device: r.memory_used for r in evaluate(placement, problem.cost_model()).devices}
    scale = c.varmap.context.scale.memory
    for name in (problem.cluster.names[d] for d in (0, 1, last)):
        assert pyo.value(rows[name].body) * scale == pytest.approx(used[name]), name
    assert used[problem.cluster.names[1]] > 0
    assert check_documented(c.model.training_memory) == []


def test_training_memory_template_refuses_what_it_cannot_write():
    from placement_dsl.blocks.training import TrainingMemoryCapacity
    from placement_dsl.errors import SpecError
    from placement_dsl.training import TrainingMemorySpec

    with pytest.raises(SpecError, match=r"^training_memory: the IP writes 1F1B's k - s micro-batches in flight; a "
                                        r"microbatches cap on it is not written \(drop microbatches, or use method "
                                        r"'pipeline'\)$"):
        TrainingMemoryCapacity(TrainingMemorySpec("1f1b", 2))
    assert TrainingMemoryCapacity(TrainingMemorySpec("gpipe", 2)).spec.microbatches == 2
    inference = Problem(_chain([4, 3], [1, 0]), Cluster.stages(2, memory=10.0), Throughput())
    with pytest.raises(SpecError, match=r"^training_memory: the graph has no backward pass$"):
        compile(inference, get("throughput").derive("with_training_memory", skeleton=lambda p: [
            *get("throughput").skeleton(p), TrainingMemoryCapacity()]))


def test_replicated_big_m_leaves_a_many_op_stage_free_to_replicate():
    # 40 unit ops, v0 broadcasting a 0.1-byte tensor to the rest, on four accelerators with up to four replicas:
    # all on one stage replicated four times gives 10 with no transfer; the row for one replica, inactive there,
    # must allow the stage's whole load (40) above the bottleneck, far more than any single op's work
    from placement_dsl.training_terms import Replicate

    ops = [Op(name=f"v{i}", work=1, out_bytes=0.1 if i == 0 else 0) for i in range(40)]
    problem = Problem(Graph(ops, [("v0", f"v{i}") for i in range(1, 40)]), Cluster.accelerators(4), Throughput(),
                      [Replicate(4)])
    r = solve(problem, formulation="throughput-replicated", solver="highs", time_limit=60)
    assert r.objective == pytest.approx(10.0) and r.bound == pytest.approx(10.0, rel=1e-4)


def test_replicated_big_m_leaves_a_parameter_heavy_stage_unreplicated():
    # 20 ops of work 1 and 100 parameter bytes on two accelerators: replicating would all-reduce far more than it
    # saves, so the best is 10 | 10 unreplicated; the rows for two replicas, inactive, must allow the stage's whole
    # all-reduce (20 x 100 bytes) above the bottleneck
    from placement_dsl.training_terms import Replicate

    ops = [Op(name=f"v{i}", work=1, param_bytes=100) for i in range(20)]
    problem = Problem(Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(19)]), Cluster.accelerators(2), Throughput(),
                      [Replicate(2)])
    r = solve(problem, formulation="throughput-replicated", solver="highs", time_limit=60)
    assert (r.objective, r.bound) == (10.0, pytest.approx(10.0)) and not r.placement.replicated


def test_a_stage_stashes_what_it_reads_from_a_producer_that_cannot_run_there():
    # p runs on the CPU only and sends 0.2 bytes to q on the accelerator (memory scale: the 0.5-byte accelerator):
    # 1F1B stashes those 0.2 bytes on q's stage, first of two, for two micro-batches: 0.4. The start (p alone on
    # the CPU, the second accelerator empty) holds every row; with 0.35 bytes nothing fits, with 0.45 it does;
    # every component is documented, the linearized stash and the reads non-negative
    from placement_dsl.objectives import PipeDream
    from placement_dsl.solvers import Status
    from placement_dsl.training_terms import TrainingMemory

    def problem(memory):
        ops = [Op(name="p", work={"cpu": 1}, out_bytes=0.2), Op(name="q", work={"accelerator": 1}, group="q"),
               Op(name="q~bw", work={"accelerator": 2}, backward=True, group="q")]
        return Problem(Graph(ops, [("p", "q"), ("q", "q~bw")]), Cluster.accelerators(2, memory=memory, cpus=1),
                       PipeDream(), [TrainingMemory("1f1b")])

    start = problem(0.5)
    c, values = warm(start, "throughput", Placement(start.graph, start.cluster, [2, 0, 0]))  # acc1 left empty
    blk = c.model.training_memory
    assert values[blk.reads["p", "acc0"]] * c.varmap.context.scale.memory == pytest.approx(0.2)
    assert all(v.lb == 0 for v in [*blk.reads.values(), *blk.stash.values()])
    assert all(v.is_binary() for v in blk.used.values())  # a half-used stage would halve its successors' stash
    assert check_documented(blk) == []
    assert solve(problem(0.35), formulation="throughput", time_limit=20).status is Status.INFEASIBLE
    tight = problem(0.45)
    assert solve(tight, formulation="throughput", time_limit=20).objective == brute_force(tight)[0]


def test_replicated_big_m_leaves_a_transfer_heavy_stage_free_to_replicate():
    # thirty CPU ops send a byte each to one accelerator op (work 1) on two accelerators, up to two replicas: the
    # stage reads 30, so alone it takes 31 and replicated 15.5. The row for one replica, inactive there, must
    # allow the stage's whole load above the bottleneck (31 - 15.5), far more than its work plus any one tensor
    from placement_dsl.training_terms import Replicate

    ops = [Op(name=f"p{i}", work={"cpu": 0.01}, out_bytes=1) for i in range(30)] + [Op(name="q", work={"accelerator": 1})]
    problem = Problem(Graph(ops, [(f"p{i}", "q") for i in range(30)]), Cluster.accelerators(2, cpus=1), Throughput(),
                      [Replicate(2)])
    r = solve(problem, formulation="throughput-replicated", solver="highs", time_limit=60)
    assert r.objective == pytest.approx(15.5) and r.bound == pytest.approx(15.5, rel=1e-4) and r.placement.replicated
