"""Under zbv every heuristic answers a split the V folds (an even number of stages, one device each, the devices in a
data-flow order) or declines: an answer it cannot fold is folded (fold_ranks.fold) and scored by the cost model."""
from __future__ import annotations

import math

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import fold_ranks, run
from placement_dsl.placement import Placement
from placement_dsl.simulate import simulate
from placement_dsl.zoo import transformer
from placement_dsl.zoo.training import with_backward

WORKS = [2, 5, 1, 4, 3, 1, 2, 3]
EDGES = [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (3, 5), (4, 6), (5, 6), (6, 7)]  # two diamonds in a row


def two_diamonds() -> Graph:
    ops = [Op(name=f"l{i}", work=float(w), out_bytes=1.0, param_bytes=1.0) for i, w in enumerate(WORKS)]
    ops, edges = with_backward(ops, [(f"l{a}", f"l{b}") for a, b in EDGES])
    return Graph(ops, edges)


@pytest.mark.parametrize(("method", "devices"), [
    ("pipedream-planner", 3), ("pipedream-planner", 4), ("local-search", 3), ("local-search", 4), ("polish", 3),
    ("slicegraph", 3), ("greedy", 3), ("greedy", 4)])
def test_a_heuristics_answer_the_v_cannot_fold_is_folded(method, devices):
    """On two diamonds, each of these answered a split the V cannot fold (3 stages on 3 devices, or a device's ops on
    both sides of another's): infinite. Folded, the answer is finite, valid, the cost model's and the simulator's.
    (polish runs to its end: stopped within a second or so it still holds its finite start.)"""
    g, m = two_diamonds(), 8
    model = CostModel.named("zbv", microbatches=m)
    found = run(method, g, Cluster.stages(devices), model=model, time_limit=20 if method == "polish" else 2)
    ev = evaluate(found.placement, model)
    assert ev.valid and math.isfinite(found.objective) and found.objective == ev.objective
    assert "folded" in found.info and found.bound is None
    assert found.objective == pytest.approx(simulate(found.placement, "zbv", m).time_per_sample)


def test_one_device_declines():
    """The V needs at least two stages, one device each: on one device no split folds; the answer says so."""
    found = run("greedy", two_diamonds(), Cluster.stages(1), model=CostModel.named("zbv"), time_limit=2)
    assert found.objective == math.inf and "at least 2" in found.info["declined"]


def test_a_device_on_both_sides_of_another_is_cut_into_runs():
    """Layers 0 1 2 3 of a chain on devices 0 1 1 0: device 0's ops reach each other through device 1 (a cycle). Along
    the data flow that is the runs 0 | 1 2 | 3, stage k on a device of its own, and the V folds them."""
    ops, edges = with_backward([Op(name=f"l{i}", work=1.0, param_bytes=1.0) for i in range(4)],
                               [(f"l{i}", f"l{i + 1}") for i in range(3)])
    g, model = Graph(ops, edges), CostModel.named("zbv")
    p = Placement(g, Cluster.stages(4), [0, 1, 1, 0] + [0, 1, 1, 0])
    assert evaluate(p, model).objective == math.inf
    folded = fold_ranks.fold(p, model)
    assert evaluate(folded, model).valid
    stage = folded.assign[:4].tolist()
    assert len(set(stage)) == 4 and stage[0] == 0 and stage[1] == 1


def test_group_nodes_number_the_colocation_groups_topologically():
    """Listed d c b a along the chain a -> b -> c -> d, the groups (each op with its gradient) are numbered a b c d."""
    ops, edges = with_backward([Op(name=n, work=1.0) for n in "dcba"], [("a", "b"), ("b", "c"), ("c", "d")])
    nodes = fold_ranks.group_nodes(Graph(ops, edges))
    assert nodes.n_nodes == 4 and nodes.image[:4].tolist() == [3, 2, 1, 0]
    assert sorted(zip(nodes.src.tolist(), nodes.dst.tolist())) == [(0, 1), (1, 2), (2, 3)]
    assert np.array_equal(nodes.image[4:], nodes.image[:4][::-1])


def test_a_fold_past_its_deadline_scores_one_evened_split(monkeypatch):
    """Three stages on four devices: past the deadline the fold scores the last two stages merged (always there) and
    the rebalance's start, not every way to make the count even (a 10,000-op graph spent seconds per score)."""
    g, model = two_diamonds(), CostModel.named("zbv")
    calls = []
    real = fold_ranks.evaluate
    monkeypatch.setattr(fold_ranks, "evaluate", lambda p, m: calls.append(1) or real(p, m))
    p = Placement(g, Cluster.stages(4), [0, 0, 0, 1, 1, 1, 2, 2] + [2, 2, 1, 1, 1, 0, 0, 0])
    folded = fold_ranks.fold(p, model, deadline=0.0)
    assert len(calls) == 2 and evaluate(folded, model).valid


@pytest.mark.parametrize("method", ["brkga", "random"])
def test_a_method_stopped_by_its_limit_answers_a_fold_that_fits(method):
    """A transformer block on three accelerators whose memory binds and a CPU: stopped at once, the method holds no
    split the V folds, and the fold had no time left, so one device's split folded unbalanced overfilled an
    accelerator (no answer on a feasible problem). The fold makes its first scores whatever the deadline: the answer
    is valid and the cost model's."""
    g = transformer(layers=1, hidden=64, heads=2, seq_len=16, batch=2, vocab=100, granularity="operator",
                    training=True).graph
    cluster = Cluster.accelerators(3, memory=sum(o.param_bytes + o.activation_bytes for o in g.ops) / 2.5, cpus=1)
    model = CostModel.named("zbv", microbatches=4)
    found = run(method, g, cluster, model=model, time_limit=0)
    ev = evaluate(found.placement, model)
    assert ev.valid and found.objective == ev.objective and "folded" in found.info
