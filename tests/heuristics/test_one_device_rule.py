"""The one rule of a one-device split (:func:`placement_dsl.heuristics.baselines.one_device_misfits`): a device
takes every op alone when it may run each of them and, where memory binds, holds their parameters and activations;
the one-device baseline, one-device-best and the fallback's one-device split pick among the same devices."""
from __future__ import annotations

import pytest

from placement_dsl.cluster import Cluster, Device
from placement_dsl.errors import InfeasibleError
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.baselines import one_device_misfits
from placement_dsl.heuristics.fallback import one_device_split


def three_devices() -> tuple[Graph, Cluster]:
    """Three ops (4 bytes in all, ``b`` the largest): ``small`` is the fastest but holds 3 bytes, ``npu`` runs
    ``b`` only, ``gpu`` takes them all."""
    ops = [Op(name="a", work={"accelerator": 2.0}, param_bytes=1.0),
           Op(name="b", work={"accelerator": 3.0, "npu": 1.0}, param_bytes=2.0),
           Op(name="c", work={"accelerator": 1.0}, param_bytes=1.0)]
    graph = Graph(ops, [("a", "b"), ("b", "c")])
    cluster = Cluster([Device(name="small", memory=3.0, speed=4.0), Device(name="npu", kind="npu", memory=100.0),
                       Device(name="gpu", memory=100.0)])
    return graph, cluster


def test_each_device_is_refused_for_its_reason_or_takes_every_op():
    graph, cluster = three_devices()
    assert one_device_misfits(graph, cluster) == [
        "'small' holds 3 < 4 needed (largest op 'b')", "'npu' cannot run op 'a' (kind 'npu')", None]
    assert one_device_misfits(graph, cluster, memory=False) == [None, "'npu' cannot run op 'a' (kind 'npu')", None]


def test_every_one_device_split_picks_a_device_the_rule_admits():
    graph, cluster = three_devices()
    gpu = cluster.names.index("gpu")
    assert set(one_device_split(graph, cluster).tolist()) == {gpu}
    best = run("one-device-best", graph, cluster, model=CostModel.named("makespan"))
    assert set(best.placement.assign.tolist()) == {gpu}
    assert set(run("one-device", graph, cluster).placement.assign.tolist()) == {gpu}


def test_no_device_taking_every_op_names_each_reason():
    graph, cluster = three_devices()
    cluster = Cluster([d for d in cluster.devices if d.name != "gpu"])
    with pytest.raises(InfeasibleError, match="'small' holds 3 < 4 needed.*'npu' cannot run op 'a'"):
        run("one-device-best", graph, cluster, model=CostModel.named("makespan"))
    with pytest.raises(InfeasibleError, match="no single device holds the graph"):
        one_device_split(graph, cluster)
