"""The resources a transfer holds under each congestion mode (one table for the referee and every scheduler)."""
from __future__ import annotations

import pytest

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.congestion import Resource, TransferResources
from placement_dsl.errors import SpecError


def line() -> Cluster:
    """d0 - d1 - d2 with links both ways and a link d2 -> d3 with no way back."""
    devices = [Device(name=f"d{i}") for i in range(4)]
    links = [Link(src=f"d{a}", dst=f"d{b}", bandwidth=1.0) for a, b in ((0, 1), (1, 0), (1, 2), (2, 1), (2, 3))]
    return Cluster(devices, links)


def test_each_mode_names_its_resources():
    c = line()
    assert TransferResources(c, "port")(0, 2) == (Resource("out", 0), Resource("in", 2))
    assert TransferResources(c, "channel")(0, 2) == (Resource("channel", 0, 2),)
    assert TransferResources(c, "link")(0, 2) == (Resource("link", 0), Resource("link", 2))  # d0->d1, d1->d2
    assert TransferResources(c, "none")(0, 2) == ()
    for mode in ("port", "channel", "link", "none"):
        assert TransferResources(c, mode)(1, 1) == ()  # no transfer on one device
    assert TransferResources(c, "link")(3, 0) == ()  # no route: nothing held (the transfer cannot run)


def test_transfers_contend_where_they_share_a_resource():
    c = line()
    link, port, channel = (TransferResources(c, m) for m in ("link", "port", "channel"))
    assert link.shared((0, 2), (1, 3)) and not port.shared((0, 2), (1, 3)) and not channel.shared((0, 2), (1, 3))
    assert port.shared((0, 2), (1, 2)) and not link.shared((0, 1), (1, 2))
    assert channel.shared((0, 2), (0, 2)) and not TransferResources(c, "none").shared((0, 2), (0, 2))


def test_all_lists_the_resources_a_transfer_may_hold_in_one_order():
    c = line()
    assert TransferResources(c, "port").all == (*(Resource("out", d) for d in range(4)),
                                               *(Resource("in", d) for d in range(4)))
    assert len(TransferResources(c, "channel").all) == 12
    assert TransferResources(c, "link").all == tuple(Resource("link", k) for k in range(5))
    assert [TransferResources(c, "link").name(r) for r in TransferResources(c, "link")(0, 3)] == \
        ["link 'd0'->'d1'", "link 'd1'->'d2'", "link 'd2'->'d3'"]


def test_an_unknown_mode_is_refused_by_name():
    with pytest.raises(SpecError, match="congestion mode 'bus'"):
        TransferResources(line(), "bus")
