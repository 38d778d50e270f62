"""Clusters: shorthands, validation, times, routes."""
from __future__ import annotations

import math

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.placement import Placement


def test_shorthands():
    c = Cluster.stages(3, memory=8.0, bandwidth=2.0)
    assert c.names == ("stage0", "stage1", "stage2") and c.memory.tolist() == [8.0] * 3
    assert c.transfer_scale.tolist() == [0.5] * 3 and c.homogeneous_groups() == [[0, 1, 2]]
    a = Cluster.accelerators(2, memory=4.0, cpus=2)
    assert a.host.tolist() == [False, False, True, True]
    assert a.transfer_scale.tolist() == [1.0, 1.0, 0.0, 0.0]  # host devices pay no transfers
    assert a.homogeneous_groups() == [[0, 1], [2, 3]]


@pytest.mark.parametrize("make", [lambda: Cluster.stages(0), lambda: Cluster.accelerators(0, cpus=0),
                                  lambda: Cluster([])])
def test_empty_clusters(make):
    with pytest.raises(SpecError):
        make()


@pytest.mark.parametrize("memory", [0.0, -1.0, math.nan])
def test_devices_with_no_memory(memory):
    with pytest.raises(SpecError, match=r"device 'g': memory"):
        Cluster([{"name": "g", "memory": memory}])


@pytest.mark.parametrize("field, value", [("speed", 0.0), ("bandwidth", -1.0), ("speed", math.inf)])
def test_bad_speed_and_bandwidth(field, value):
    with pytest.raises(SpecError, match=rf"device 'g': {field}"):
        Cluster([{"name": "g", field: value}])


def test_duplicate_devices_and_bad_links():
    with pytest.raises(SpecError, match="duplicate device name 'x'"):
        Cluster([Device(name="x"), Device(name="x")])
    with pytest.raises(SpecError, match="unknown device 'y'"):
        Cluster([Device(name="x")], [Link(src="x", dst="y", bandwidth=1.0)])
    with pytest.raises(SpecError, match="bandwidth"):
        Cluster([Device(name="x"), Device(name="y")], [{"src": "x", "dst": "y", "bandwidth": 0}])
    with pytest.raises(SpecError, match="unknown device 'q'"):
        Cluster.stages(2).device("q")


def test_times_per_kind_and_speed():
    g = Graph([Op(name="a", work={"gpu": 2.0, "cpu": 8.0}), Op(name="b", work={"cpu": 1.0})])
    c = Cluster([Device(name="g0", kind="gpu", speed=2.0), Device(name="c0", kind="cpu")])
    t = c.times(g)
    assert t.shape == (2, 2)
    assert t.tolist() == [[1.0, 8.0], [math.inf, 1.0]]


def test_unknown_kind_in_placement_is_a_violation():
    g = Graph([Op(name="a", work={"gpu": 1.0})])
    c = Cluster([Device(name="t0", kind="tpu")])
    ev = evaluate(Placement(g, c, [0]))
    assert not ev.valid
    assert any(v.check == "allowed" and "'a'" in v.message and "'tpu'" in v.message for v in ev.violations)


def test_route_bandwidth_full_mesh_without_links():
    c = Cluster([Device(name="a", bandwidth=4.0), Device(name="b", bandwidth=1.0)])
    assert c.route_bandwidth[0, 1] == c.route_bandwidth[1, 0] == 1.0


def test_route_bandwidth_multi_hop_is_bottleneck():
    c = Cluster([Device(name=n) for n in "ABDF"], [
        Link(src="A", dst="B", bandwidth=10.0), Link(src="B", dst="D", bandwidth=5.0),
        Link(src="D", dst="F", bandwidth=8.0), Link(src="A", dst="D", bandwidth=2.0)])
    bw = c.route_bandwidth
    i = c.index
    assert bw[i["A"], i["F"]] == 2.0  # the default route has the fewest hops: A->D->F (bottleneck 2)
    assert bw[i["A"], i["D"]] == 2.0  # a direct link is the channel
    assert bw[i["B"], i["F"]] == 5.0
    assert bw[i["F"], i["A"]] == 0.0  # unreachable
    # MOIRAI Fig. 3: 100 MB over A-B (10 MB/s) then B-D (5 MB/s) then D-F takes 20 s, on the declared route
    declared = Cluster(c.devices, c.links, routes={("A", "F"): ["A", "B", "D", "F"]})
    assert 100.0 / declared.route_bandwidth[i["A"], i["F"]] == 20.0


def test_dict_round_trip():
    c = Cluster([Device(name="a", kind="gpu", memory=3.0), Device(name="c", kind="cpu")],
                [Link(src="a", dst="c", bandwidth=2.0, latency=0.5)])
    assert Cluster.from_dict(c.to_dict()) == c
    assert c.route_latency[0, 1] == 0.5
    with pytest.raises(SpecError, match="'devices'"):
        Cluster.from_dict({})
    assert np.isinf(c.memory[1])


@pytest.mark.parametrize("devices, message", [
    (["acc0"], r"device #0: expected a mapping of its fields, got str"),
    (None, r"devices must be a list, got NoneType"),
    ("acc0", r"devices must be a list, got str"),
    ([{"name": "g", "memory": 1e300}], r"device 'g': memory: .*at most 1e\+18 \(use inf for unlimited\)"),
    ([{"name": "g", "bandwidth": 1e-300}], r"device 'g': bandwidth: .*must lie in"),
])
def test_devices_that_are_not_device_mappings(devices, message):
    with pytest.raises(SpecError, match=message):
        Cluster(devices)


def test_cluster_from_dict_needs_a_mapping():
    with pytest.raises(SpecError, match="cluster must be a mapping"):
        Cluster.from_dict(["acc0"])


@pytest.mark.parametrize("make, message", [
    (lambda: Cluster.accelerators(10**9), r"k: 1000000000 is out of range"),
    (lambda: Cluster.accelerators(4000, cpus=200), r"4200 devices, more than 4096"),
    (lambda: Cluster.stages(10**9), r"k: 1000000000 is out of range"),
    (lambda: Cluster.stages(2.7), r"k: 2\.7 is not a whole number"),
    (lambda: Cluster.hierarchical(10**5, 10**5, intra=1.0, inter=1.0), r"servers: 100000 is out of range"),
    (lambda: Cluster.hierarchical(100, 100, intra=1.0, inter=1.0), r"100 x 100 devices, more than 4096"),
])
def test_device_counts_no_cluster_has_are_refused_before_allocating(make, message):
    with pytest.raises(SpecError, match=message):
        make()


def test_device_constructor_raises_one_line_spec_errors():
    with pytest.raises(SpecError, match=r"^device 'g': bandwidth: .*finite number > 0, got inf$"):
        Device(name="g", bandwidth=math.inf)
    assert Cluster.stages(np.int64(2)).size == 2
