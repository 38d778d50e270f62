"""A cluster whose links do not join every pair of devices: the pipeline heuristics answer a valid split (the cost
model refuses a tensor sent between devices with no route), searched within the devices that reach one another."""
from __future__ import annotations

import pytest

from placement_dsl import zoo
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.evaluate import CostModel, evaluate, unrouted
from placement_dsl.heuristics import run
from placement_dsl.heuristics.routable import groups

PIPELINES = ["dp", "dpl", "slicegraph", "brkga", "mla", "pipeline", "polish", "random"]


def _joined(pairs: list[tuple[str, str]], k: int = 3) -> Cluster:
    devices = [Device(name=f"a{i}", bandwidth=1e9) for i in range(k)]
    return Cluster(devices, [Link(src=s, dst=d, bandwidth=1e9) for s, d in pairs])


def test_groups_are_the_devices_that_reach_one_another():
    assert groups(_joined([("a0", "a1"), ("a1", "a0")])) == [[0, 1], [2]]
    assert groups(_joined([("a0", "a1"), ("a1", "a2"), ("a2", "a0")])) == [[0, 1, 2]]  # a ring: one group
    assert groups(Cluster.accelerators(3)) == [[0, 1, 2]]  # no links: through host memory


@pytest.mark.parametrize("method", PIPELINES)
def test_a_pipeline_heuristic_answers_a_valid_split_where_links_join_two_of_three_devices(method):
    """Links a0 <-> a1 only: the methods put a stage on a2 and sent its tensors where no link goes (exit 3 from the
    command line, while the MIP finds a valid split on a0 and a1)."""
    w = zoo.get("transformer-small")
    cluster = _joined([("a0", "a1"), ("a1", "a0")])
    model = CostModel()
    found = run(method, w.graph, cluster, model=model, time_limit=2.0)
    assert not unrouted(found.placement)
    assert evaluate(found.placement, model).valid
    assert found.objective == pytest.approx(evaluate(found.placement, model).objective)


def test_a_split_that_routes_is_kept_on_a_one_way_chain():
    """Links a0 -> a1 -> a2 only: every device is a group of its own, yet the DP's pipeline in the devices' order
    routes, and is kept whole (three stages), with its bound."""
    w = zoo.get("transformer-small")
    found = run("dp", w.graph, _joined([("a0", "a1"), ("a1", "a2")]), model=CostModel())
    assert not unrouted(found.placement) and len(set(found.placement.assign.tolist())) == 3
    assert found.bound is not None
