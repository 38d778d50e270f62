"""Routes of a cluster: the links a transfer between two devices crosses, their latency and bottleneck."""
import math

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device, Link, Route
from placement_dsl.errors import SpecError


def line(k=4, latency=1.0, bandwidth=1.0):
    """``k`` devices on a line, a link each way between neighbours."""
    devices = [Device(name=f"d{i}") for i in range(k)]
    links = [Link(src=f"d{a}", dst=f"d{b}", bandwidth=bandwidth, latency=latency)
             for a in range(k) for b in range(k) if abs(a - b) == 1]
    return Cluster(devices, links)


def test_a_route_pays_every_hop_latency():
    c = line()
    assert c.route_latency[0, 1] == 1.0
    assert c.route_latency[0, 2] == 2.0  # d0 -> d1 -> d2: two hops of latency 1
    assert c.route_latency[0, 3] == 3.0
    assert [(lk.src, lk.dst) for lk in c.route("d0", "d2")] == [("d0", "d1"), ("d1", "d2")]
    assert c.route_links[0][0] == ()


def test_default_route_fewest_hops_then_widest_then_fastest():
    devices = [Device(name=n) for n in "abcde"]
    links = [Link(src="a", dst="e", bandwidth=3.0, latency=0.1), Link(src="e", dst="d", bandwidth=2.0, latency=0.5),
             Link(src="a", dst="b", bandwidth=1.0), Link(src="b", dst="d", bandwidth=1.0),
             Link(src="a", dst="c", bandwidth=3.0), Link(src="c", dst="d", bandwidth=2.0, latency=0.5)]
    c = Cluster(devices, links)
    assert c.route_links[0][3] == (4, 5)  # two hops every way: bottleneck 2 beats 1; latency 0.5 beats 0.6
    assert c.route_bandwidth[0, 3] == 2.0 and c.route_latency[0, 3] == 0.5
    assert c.route_links[0][2] == (4,)  # the direct link
    assert c.route_links[3][0] is None and c.route_bandwidth[3, 0] == 0.0  # unreachable


def test_declared_routes_win_and_round_trip():
    c = line()
    ring = Cluster(c.devices, [*c.links, Link(src="d0", dst="d2", bandwidth=4.0, latency=5.0)],
                   routes={("d0", "d2"): ["d0", "d1", "d2"]})
    assert ring.route_latency[0, 2] == 2.0 and ring.route_bandwidth[0, 2] == 1.0
    assert Cluster(ring.devices, ring.links).route_latency[0, 2] == 5.0  # without it: the direct link
    back = Cluster.from_dict(ring.to_dict())
    assert back == ring and back.route_links == ring.route_links
    assert ring.to_dict()["routes"] == [{"src": "d0", "dst": "d2", "path": ["d0", "d1", "d2"]}]
    same = Cluster(ring.devices, ring.links, [Route(src="d0", dst="d2", path=("d0", "d1", "d2"))])
    assert same == ring
    assert Cluster(ring.devices, ring.links) != ring


@pytest.mark.parametrize("routes, message", [
    ({("d0", "d2"): ["d0", "d9", "d2"]}, r"route 'd0' -> 'd2' names unknown device 'd9'"),
    ({("d0", "d2"): ["d0", "d2"]}, r"route 'd0' -> 'd2': hop 'd0' -> 'd2' is not a link of the cluster"),
    ({("d0", "d2"): ["d1", "d2"]}, r"route 'd0'.*path \['d1', 'd2'\] must start at 'd0' and end at 'd2'"),
    ({("d0", "d2"): ["d0", "d1"]}, r"route 'd0'.*must start at 'd0' and end at 'd2'"),
    ({("d0", "d0"): ["d0"]}, r"route 'd0'.*joins a device to itself"),
    ({("d0", "d2"): "d0d1d2"}, r"route 'd0' -> 'd2': path must be a list of device names"),
    ({"d0": ["d0", "d1"]}, r"routes key 'd0' must be a \(src, dst\) pair"),
    ([{"src": "d0", "dst": "d2", "path": ["d0", "d1", "d2"]}] * 2, r"route 'd0' -> 'd2' is declared twice"),
    ({("d0", "d2"): ["d0", "d1", "d0", "d1", "d2"]}, r"route 'd0' -> 'd2'.*passes device 'd0' twice"),
    ("d0", r"routes must be a list, got str"),
])
def test_bad_routes_are_named(routes, message):
    c = line()
    with pytest.raises(SpecError, match=message):
        Cluster(c.devices, c.links, routes)


@pytest.mark.parametrize("link, message", [
    ({"src": "d0", "dst": "d1", "bandwidth": -1.0}, r"link 'd0'.*bandwidth must be > 0, got -1.0"),
    ({"src": "d0", "dst": "d1", "bandwidth": math.nan}, r"link 'd0'.*bandwidth must be > 0, got nan"),
    ({"src": "d0", "dst": "d1", "bandwidth": 1.0, "latency": -2.0}, r"link 'd0'.*latency .*>= 0, got -2.0"),
    ({"src": "d0", "dst": "d1", "bandwidth": 1.0, "latency": math.nan}, r"link 'd0'.*latency .*>= 0, got nan"),
])
def test_bad_links_are_named(link, message):
    with pytest.raises(SpecError, match=message):
        Cluster([Device(name="d0"), Device(name="d1")], [link])


@pytest.mark.parametrize("links, message", [
    ([Link(src="d0", dst="d1", bandwidth=2.0), Link(src="d0", dst="d1", bandwidth=7.0)],
     r"link 'd0' -> 'd1' is declared twice; keep one"),
    ([{"src": "d1", "dst": "d1", "bandwidth": 1.0}], r"link 'd1' -> 'd1': .*same device"),
    ([{"src": "d0", "dst": "d1", "bandwidth": True}], r"link 'd0' -> 'd1': bandwidth: .*number, got True"),
    ([{"src": "d0", "dst": "d1", "bandwidth": 1.0, "latency": False}], r"link 'd0' -> 'd1': latency: .*got False"),
])
def test_links_that_would_be_read_one_way_silently_are_refused(links, message):
    """Two links one way (the transfers would take one of them unasked), a link from a device to itself, and a
    boolean where a number goes (``true`` read as 1)."""
    with pytest.raises(SpecError, match=message):
        Cluster([Device(name="d0"), Device(name="d1")], links)


@pytest.mark.parametrize("field", ["memory", "speed", "bandwidth"])
def test_a_boolean_is_no_device_number(field):
    with pytest.raises(SpecError, match=rf"device 'd0': {field}: .*number, got True"):
        Cluster([{"name": "d0", field: True}])


def test_a_device_without_a_name_is_named_by_its_position():
    with pytest.raises(SpecError, match=r"^device #1 has no 'name'"):
        Cluster([{"name": "d0"}, {"kind": "cpu"}])


def test_without_links_transfers_go_through_host_memory():
    c = Cluster([Device(name="a", bandwidth=4.0), Device(name="b", bandwidth=2.0)])
    assert c.route_bandwidth[0, 1] == 2.0 and c.route_latency[0, 1] == 0.0
    assert c.route("a", "b") == [] and c.route_links[0][1] is None


def test_hierarchical_routes_are_the_direct_links():
    c = Cluster.hierarchical(2, 2, intra=10.0, inter=1.0)
    assert all(len(c.route_links[a][b]) == 1 for a in range(4) for b in range(4) if a != b)
    assert np.array_equal(c.route_bandwidth[0], [math.inf, 10.0, 1.0, 1.0])


def test_reconfigured_cluster_keeps_the_routes_of_its_devices():
    from placement_dsl.cli.workloads import reconfigure

    c = line()
    host_links = [Link(src="d1", dst="h", bandwidth=1.0), Link(src="h", dst="d1", bandwidth=1.0)]
    declared = Cluster([*c.devices, Device(name="h", kind="cpu")], [*c.links, *host_links],
                       {("d0", "d2"): ["d0", "d1", "d2"], ("d0", "h"): ["d0", "d1", "h"]})
    again = reconfigure(declared, memory=8.0, cpus=0)  # the host goes, with its links and its route
    assert [r.path for r in again.routes] == [("d0", "d1", "d2")] and "h" not in again.index


def test_a_bad_link_is_named_by_both_ends():
    with pytest.raises(SpecError, match=r"^link 'd0' -> 'd1': latency: latency must be a finite number >= 0, got -1.0$"):
        Cluster([Device(name="d0"), Device(name="d1")], [{"src": "d0", "dst": "d1", "bandwidth": 1.0, "latency": -1.0}])
