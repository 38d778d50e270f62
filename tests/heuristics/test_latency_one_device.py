"""latency-best offers the one device that holds the graph as an ordinary candidate: its split by the closed form
(one sum or longest path per device), its latency by the cost model, like every other candidate's."""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.fallback import one_device_latency, one_device_split
from placement_dsl.placement import Placement

LATENCY = CostModel.named("latency")


def _heavy_tensors(n: int = 12) -> Graph:
    """A chain whose tensors cost far more to move than its ops to run: every split across devices loses."""
    ops = [Op(name=f"v{i}", work=1.0, out_bytes=1e3, param_bytes=1.0) for i in range(n)]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_latency_best_lists_one_device_scored_by_the_cost_model_and_answers_no_worse(seed):
    rng = np.random.default_rng(seed)
    g = _heavy_tensors(int(rng.integers(8, 16)))
    cluster = Cluster.accelerators(3, memory=1e6, cpus=1)
    found = run("latency-best", g, cluster, model=LATENCY, max_evaluations=500, restarts=1, time_limit=60.0)
    cand = next(c for c in found.info["candidates"] if c["method"] == "one-device")
    one = evaluate(Placement(g, cluster, one_device_split(g, cluster)), LATENCY)
    assert cand["valid"] and cand["latency"] == pytest.approx(one.objective)  # the referee's score, not the closed form's
    assert found.objective <= one.objective * (1 + 1e-9)


def test_no_device_holding_the_graph_is_a_candidate_with_its_reason():
    g = _heavy_tensors(6)
    cluster = Cluster.accelerators(2, memory=3.0, cpus=0)  # six parameters of 1 byte on devices of 3 bytes
    assert one_device_latency(g, cluster) is None
    found = run("latency-best", g, cluster, model=LATENCY, max_evaluations=200, restarts=1, time_limit=60.0)
    cand = next(c for c in found.info["candidates"] if c["method"] == "one-device")
    assert "no single device holds the graph" in cand["error"]
