"""Which schedules run a placement's stages in a chain is one rule, :attr:`CostModel.chained_stages`: the cost model
prices a split whose stages form a cycle ``inf`` under exactly those, and local search keeps its descents acyclic
under exactly those (:func:`placement_dsl.heuristics.stage_order.needs_chain`)."""
from __future__ import annotations

import math

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import NAMED, CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.stage_order import needs_chain
from placement_dsl.placement import Placement
from placement_dsl.zoo.training import with_backward

CHAINED = {"interleaved-1f1b", "zb-h1", "zbv"}  # and gpipe with micro-batches


@pytest.mark.parametrize("microbatches", [None, 4])
@pytest.mark.parametrize("name", sorted(NAMED))
def test_a_split_whose_stages_form_a_cycle_is_inf_exactly_where_the_stages_chain(name, microbatches):
    ops, edges = with_backward([Op(name=f"l{i}", work=1.0, out_bytes=1.0) for i in range(3)],
                               [("l0", "l1"), ("l1", "l2")])
    p = Placement(Graph(ops, edges), Cluster.stages(2), [0, 1, 0] * 2)  # device 0 -> 1 -> 0: a cycle
    model = CostModel.named(name, microbatches=microbatches)
    chained = name in CHAINED or (name == "gpipe" and microbatches is not None)
    assert model.chained_stages is chained and needs_chain(model) is chained
    assert (evaluate(p, model).objective == math.inf) is chained
    assert not needs_chain(None)
