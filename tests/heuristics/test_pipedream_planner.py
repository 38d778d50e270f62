"""PipeDream's hierarchical planner (method ``pipedream-planner``): replicas only when asked."""
from __future__ import annotations

import pytest

from placement_dsl import testing
from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run


@pytest.mark.parametrize("instance", ["diamond_noncontiguous", "contiguity_binds"])
def test_without_replication_every_stage_has_one_device(instance):
    """A problem without Replicate forbids replicas: by default the planner plans with one device per stage."""
    problem, _ = testing.INSTANCES[instance]()
    result = run("pipedream-planner", problem.graph, problem.cluster, model=problem.cost_model())
    assert not result.placement.replicated and result.placement.replicas.max() == 1
    assert problem.is_valid(result.placement), problem.violations(result.placement)


def heavy_first() -> Graph:
    return Graph([Op(name="a", work=8.0, param_bytes=1.0), Op(name="b", work=2.0)], [("a", "b")])


def test_replication_when_asked_and_capped_by_max_replicas():
    """``replication=True`` keeps PipeDream's replicas (the heavy stage on all three devices); ``max_replicas`` caps
    them; without it the same graph gets one device per stage."""
    graph, cluster = heavy_first(), Cluster.stages(3)
    assert run("pipedream-planner", graph, cluster, replication=True).placement.replicas.tolist() == [3, 1, 1]
    capped = run("pipedream-planner", graph, cluster, replication=True, max_replicas=2).placement
    assert capped.replicas.max() == 2
    assert run("pipedream-planner", graph, cluster).placement.replicas.max() == 1


@pytest.mark.parametrize("ops", [3, 6])
def test_without_replication_on_two_servers_every_stage_has_one_device(ops):
    """Both levels plan one device per stage, with fewer layers than devices too (some then stay idle)."""
    work = [4.0, 1.0, 3.0, 2.0, 5.0, 1.0][:ops]
    graph, cluster = testing.chain_graph(work, out_bytes=0.5), Cluster.hierarchical(2, 2, intra=4.0, inter=0.5)
    result = run("pipedream-planner", graph, cluster)
    assert result.placement.replicas.max() == 1 and result.info["planner_estimate"] < float("inf")
    assert result.objective == pytest.approx(evaluate(result.placement).objective)
    assert result.objective < sum(work)  # a pipeline, not one device
