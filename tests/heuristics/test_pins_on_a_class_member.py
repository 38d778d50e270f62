"""The slicers (SliceGraph, BRKGA, random) price a class of interchangeable devices by its first member's times; an
op pinned to another member read ``inf`` there, and they refused with "op ... may run on none of the devices" though
the pinned device runs it. They now see the class as able to run it (they search as if the pin were not there; an
answer off the pin says so, tests/heuristics/test_pins_not_honoured.py)."""
from __future__ import annotations

import math

import pytest

from placement_dsl import Cluster, Memory, Pin, Problem, Throughput
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.zoo.training import with_backward


@pytest.mark.parametrize("method", ["slicegraph", "brkga", "random", "pipedream"])
@pytest.mark.parametrize("training", [False, True])
def test_a_slicer_answers_with_an_op_pinned_to_a_later_member_of_its_class(method, training):
    ops = [Op(name=f"f{i}", work=1.0 + i % 3, out_bytes=1.0, param_bytes=1.0) for i in range(6)]
    edges = [(f"f{i}", f"f{i + 1}") for i in range(5)]
    g = Graph(*with_backward(ops, edges)) if training else Graph(ops, edges)
    c = Cluster.accelerators(3, memory=100.0, bandwidth=1.0)
    problem = Problem(g, c, Throughput(), [Memory(), Pin("f5", "acc2")])
    r = run(method, problem.graph, problem.cluster, model=problem.cost_model(), seed=0, time_limit=5)
    if r.valid:
        assert math.isfinite(r.objective) and r.objective == problem.evaluate(r.placement).objective
    else:
        assert "pins" in r.info and "pinned to 'acc2'" in r.info["pins"]
