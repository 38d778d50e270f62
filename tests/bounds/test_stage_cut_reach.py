"""What the stage-cut bound can reach, from above: each op's part of a partition at the cut ops, and its device in a
valid placement, load at least its cheapest stage (checked against brute force), so pruning by them leaves the bound
as it was; on a transformer they put the bound below what the single wide ops suggest."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds.local import (
    ceilings,
    part_loads,
    problem_reach,
    segment_loads,
    single_loads,
    stage_cut_bound,
    upper_values,
)
from placement_dsl.constraints import DagOrder, Memory
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck
from placement_dsl.placement import Placement
from placement_dsl.presets import resize
from placement_dsl.problem import Problem, Stages


@st.composite
def small_graphs(draw):
    """DAGs of 2-7 ops (edges from lower to higher index), integer works and tensor sizes, some ops colocated."""
    n = draw(st.integers(2, 7))
    groups = [draw(st.sampled_from(["", "", "", "g", "h"])) for _ in range(n)]
    ops = [Op(name=f"v{i}", work=float(draw(st.integers(0, 5))), out_bytes=float(draw(st.integers(0, 4))),
              param_bytes=float(draw(st.integers(0, 3))), group=groups[i] or None) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if draw(st.integers(0, 2)) == 0]
    return Graph(ops, edges)


def cheapest(graph: Graph, stages, model: CostModel) -> np.ndarray:
    """Each op's cheapest stage by brute force: device 0 holds ``S`` (colocation groups whole; all of the graph
    too), device 1 the rest."""
    best = np.full(graph.n, np.inf)
    for bits in itertools.product((0, 1), repeat=graph.n):
        assign = np.array(bits, dtype=np.int64)
        if any(len(set(assign[graph.group_id == g].tolist())) > 1 for g in np.unique(graph.group_id)):
            continue
        if not assign.any():
            continue
        load = evaluate(Placement(graph, stages, 1 - assign), model).devices[0].load
        best[assign == 1] = np.minimum(best[assign == 1], load)
    return best


@settings(max_examples=40)
@given(small_graphs(), st.integers(3, 12))
def test_every_upper_value_is_at_least_the_ops_cheapest_stage(graph, memory):
    stages = Stages(2, memory=float(memory), bandwidth=2.0)
    model = CostModel.named("bottleneck")
    low = cheapest(graph, stages, model)
    for upper in (single_loads(graph, stages), segment_loads(graph, stages), upper_values(graph, stages)):
        assert np.all(upper >= low * (1 - 1e-9) - 1e-9)


@settings(max_examples=40)
@given(small_graphs())
def test_a_part_load_is_the_cost_models_load_of_that_part(graph):
    stages = Stages(2, memory=6.0, bandwidth=2.0)
    label = graph.group_id.copy()
    label[: graph.n // 2] = graph.group_id[0]  # the first half of the ops joins the first op's group
    for g in np.unique(graph.group_id):  # keep each group whole
        label[graph.group_id == g] = label[graph.group_id == g].min()
    loads = part_loads(graph, stages, label)
    for part in np.unique(label).tolist():
        assign = np.where(label == part, 0, 1).astype(np.int64)
        ev = evaluate(Placement(graph, stages, assign), CostModel.named("bottleneck"))
        assert loads[label == part] == pytest.approx(ev.devices[0].load, rel=1e-9, abs=1e-9)


@settings(max_examples=30)
@given(small_graphs(), st.data())
def test_pruning_by_a_placements_loads_leaves_the_bound_as_it_was(graph, data):
    stages = Stages(3)
    assign = np.array(data.draw(st.lists(st.integers(0, 2), min_size=graph.n, max_size=graph.n)), dtype=np.int64)
    for g in np.unique(graph.group_id):
        assign[graph.group_id == g] = assign[graph.group_id == g][0]
    placement = Placement(graph, stages, assign)
    plain = stage_cut_bound(graph, stages)[0]
    assert stage_cut_bound(graph, stages, ceiling=ceilings(placement))[0] == pytest.approx(plain, rel=1e-12)
    assert stage_cut_bound(graph, stages, beat=plain + 1.0)[0] <= plain  # what cannot beat it is not cut


def test_a_transformer_layer_is_a_cheaper_stage_than_its_wide_ops():
    # GPT-3's GELU ops each read and write a 4x-wide tensor: 18.35 alone, while a layer between its residual adds
    # loads 8.45; the stage-cut bound (7.10 on two layers at 16 stages) is below both, and the reach says so uncut
    from placement_dsl.zoo.gpt3 import gpt3

    w = gpt3(layers=2, hidden=1024, heads=16, vocab=8192)
    stages = resize(w.cluster, 16)
    problem = Problem(w.graph, stages, Bottleneck(), [Memory(), DagOrder()])
    alone, parts = single_loads(w.graph, stages), segment_loads(w.graph, stages)
    assert parts.max() < 0.5 * alone.max()
    reach = problem_reach(problem)
    assert reach == pytest.approx(max(float(np.minimum(alone, parts).max()), 0.0), rel=1e-12)
    assert stage_cut_bound(w.graph, stages)[0] <= reach
