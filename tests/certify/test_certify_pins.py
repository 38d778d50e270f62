"""A pin on an Archer MTPP: the levels that drop it (the DP over ideals, the stage-cut bound on identical stages) must
not pass off what they find as a bound. The DP ignoring the pin splits the ops its own way; the cost model scores
that split ``inf`` (the pinned op on a stage it may not run on), which is no lower bound."""
from __future__ import annotations

import math

import numpy as np
import pytest

from placement_dsl import Bottleneck, DagOrder, Overflow, Pin, Problem
from placement_dsl.certificate import LevelStatus
from placement_dsl.certify import certify
from placement_dsl.cluster import Cluster
from placement_dsl.heuristics import run
from placement_dsl.testing import random_graph


def _pinned(stage: str) -> Problem:
    graph = random_graph(np.random.default_rng(0), 10, density=0.3)
    cluster = Cluster.stages(3, memory=float(graph.param_bytes.sum()) / 2.2, bandwidth=2.0)
    return Problem(graph, cluster, Bottleneck(), [DagOrder(), Overflow(), Pin(graph.names[5], stage)])


@pytest.mark.parametrize("stage", ["stage0", "stage1", "stage2"])
def test_certify_a_pinned_mtpp(stage):
    problem = _pinned(stage)
    cert = certify(problem, budget=4)
    assert math.isfinite(cert.objective) and problem.is_valid(cert.placement)
    assert cert.bound <= cert.objective * (1 + 1e-9)
    rows = {r.level: r for r in cert.levels}
    assert rows["dp"].bound is None or rows["dp"].bound <= cert.objective * (1 + 1e-9)
    alone = {r.level: r for r in certify(problem, levels=("stage-cut",), gap=0.0, budget=2).levels}
    cut = alone["stage-cut"]  # over the placements that ignore the pin: finite, and held below every pinned answer
    assert cut.status is not LevelStatus.NOT_APPLICABLE
    assert cut.bound is None or (math.isfinite(cut.bound) and cut.bound <= cert.objective * (1 + 1e-9))


def test_a_dp_split_the_cost_model_prices_above_the_dp_proves_nothing():
    problem = _pinned("stage0")
    graph = Pin.apply_all(problem.find(Pin), problem.graph)  # the pin folded in, as certify's levels see it
    found = run("dp", graph, problem.cluster, model=problem.cost_model())
    assert found.objective == math.inf and found.info["dp_value"] < math.inf
    assert found.bound is None and found.exact_among is None and "no bound" in found.info["no_bound"]
