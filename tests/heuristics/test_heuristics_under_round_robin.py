"""Under interleaved 1F1B and ZB-H1 at m micro-batches every heuristic answers a split torch's orders run: a rank
count whose rounds split the micro-batches (3 ranks do not split 16: rounds of 5), one stage per device. An answer
they cannot run is folded (fold_ranks.fold, the mechanism ZBV's V uses) and scored by the cost model."""
from __future__ import annotations

import math

import pytest

from placement_dsl import zoo
from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import fold_ranks, run
from placement_dsl.pipeline_orders import runs
from placement_dsl.placement import Placement
from placement_dsl.simulate import analytic_time_per_sample, simulate
from placement_dsl.zoo.training import with_backward

WORKS = [2, 5, 1, 4, 3, 1, 2, 3, 2]
EDGES = [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (3, 5), (4, 6), (5, 6), (6, 7), (6, 8), (7, 8)]  # residual blocks


def branching() -> Graph:
    ops = [Op(name=f"l{i}", work=float(w), out_bytes=1.0, param_bytes=1.0) for i, w in enumerate(WORKS)]
    ops, edges = with_backward(ops, [(f"l{a}", f"l{b}") for a, b in EDGES])
    return Graph(ops, edges)


@pytest.mark.parametrize("schedule", ["interleaved-1f1b", "zb-h1"])
@pytest.mark.parametrize("method", ["dp", "slicegraph", "greedy"])
def test_an_answer_on_a_rank_count_the_orders_refuse_is_folded_onto_one_they_run(method, schedule):
    """On three devices the DP and SliceGraph split a branching training graph into 3 stages, which torch's orders
    refuse at m = 16 (infinite, 'not a multiple of its 5 rounds'). Folded, the answer runs on a count they accept,
    valid, the cost model's figure equal to the recurrence's and the simulator's."""
    g, m = branching(), 16
    model = CostModel.named(schedule, microbatches=m)
    found = run(method, g, Cluster.stages(3), model=model, time_limit=5)
    ev = evaluate(found.placement, model)
    assert ev.valid and math.isfinite(found.objective) and found.objective == ev.objective
    assert runs(schedule, len(set(found.placement.assign.tolist())), m)
    sim = simulate(found.placement, schedule, m).time_per_sample
    assert math.isclose(sim, found.objective, rel_tol=1e-9)
    assert math.isclose(analytic_time_per_sample(found.placement, schedule, microbatches=m), sim, rel_tol=1e-9)


def test_the_rank_counts_torchs_orders_run():
    assert [h for h in range(1, 10) if runs("zb-h1", h, 16)] == [1, 2, 4, 6, 7, 8, 9]
    assert all(runs("interleaved-1f1b", h) for h in range(1, 10))
    assert not runs("zbv", 3) and runs("zbv", 4, 5)


def test_an_answer_over_memory_under_the_v_is_folded_onto_one_that_fits():
    """Greedy's split of ResNet-50's training graph over 4 devices of 3 GB overfills one (3.89 GB) and was
    declined, although the DP finds splits the V folds within memory. Folded with the bytes over memory scored
    before the objective, the answer fits, valid, the cost model's figure."""
    model = CostModel.named("zbv", microbatches=8)
    found = run("greedy", zoo.get("resnet50-train").graph, Cluster.stages(4, memory=3e9), model=model, time_limit=20)
    ev = evaluate(found.placement, model)
    assert ev.valid and found.objective == ev.objective and "folded" in found.info


def test_a_split_whose_stages_do_not_divide_among_the_ranks_is_merged_into_one_that_does():
    """A chain of sixteen layers dealt round robin onto three devices: each layer is a stage of its own (the data
    flow leaves each device and comes back), 16 stages that do not split into 3 ranks, and the fold answered such a
    split (infinite). Its stages are merged, one fewer at a time, into a count the orders run."""
    n = 16
    chained = [(f"t{i}", f"t{i + 1}") for i in range(n - 1)]
    ops, edges = with_backward([Op(name=f"t{i}", work=1.0, out_bytes=1.0, param_bytes=1.0) for i in range(n)], chained)
    g, model = Graph(ops, edges), CostModel.named("interleaved-1f1b", microbatches=4)
    assign = [i % 3 for i in range(n)]
    placement = Placement(g, Cluster.stages(3), assign + assign[::-1])
    assert evaluate(placement, model).objective == math.inf
    folded = fold_ranks.fold(placement, model)
    ev = evaluate(folded, model)
    assert ev.valid and ev.objective == pytest.approx(simulate(folded, "interleaved-1f1b", 4).time_per_sample)
