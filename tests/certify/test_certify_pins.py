"""A pin on an Archer MTPP: the levels that drop it (the stage-cut bound on identical stages) must not pass off what
they find as a bound over the pinned problem; the DP over ideals keeps the pin."""
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


def test_the_dp_keeps_the_pin_and_its_value_is_the_cost_models():
    """The DP placed the pinned op's stage on the first device of its class, which the cost model scores ``inf`` and
    which proved nothing; it now keeps the pin (tests/heuristics/test_dp_pins.py) and its value is the split's."""
    problem = _pinned("stage0")
    graph = Pin.apply_all(problem.find(Pin), problem.graph)  # the pin folded in, as certify's levels see it
    found = run("dp", graph, problem.cluster, model=problem.cost_model())
    assert math.isfinite(found.objective) and found.info["dp_value"] == pytest.approx(found.objective)
    assert problem.cluster.names[int(found.placement.assign[5])] == "stage0"
    assert found.bound is not None and found.bound <= found.objective * (1 + 1e-9) and "pins" not in found.info
