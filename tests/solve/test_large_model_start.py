"""A solve whose model is large for its time makes a start though none was asked for.

The throughput IP of a ResNet-152 (208 ops) onto 16 stages found no incumbent in 60 s without a
start, and a model too large to build answered with the balanced split; both now answer at
least as well as the heuristics.
"""
from __future__ import annotations

import time

import pytest

from placement_dsl import zoo
from placement_dsl.constraints import DagOrder
from placement_dsl.heuristics import run
from placement_dsl.objectives import Bottleneck
from placement_dsl.problem import Problem, Stages
from placement_dsl.solve import solve
from placement_dsl.solvers import available_solvers

pytestmark = pytest.mark.skipif("highs" not in available_solvers(), reason="needs HiGHS")
LIMIT = 8.0


def test_a_large_throughput_model_without_a_start_answers_at_least_as_well_as_the_heuristics() -> None:
    problem = Problem(zoo.resnet(152).graph, Stages(16), Bottleneck(), [DagOrder()])
    t0 = time.monotonic()
    result = solve(problem, time_limit=LIMIT)
    assert time.monotonic() - t0 <= LIMIT + 5
    assert result.placement is not None and result.found_by.startswith("warm start (auto")
    heuristic = run("slicegraph", problem.graph, problem.cluster, model=problem.cost_model())
    assert result.objective <= heuristic.objective * (1 + 1e-9)
    assert result.bound is None or result.bound <= result.objective * (1 + 1e-9)
