"""Placements: constructors, views, validation, dict round trip."""
from __future__ import annotations

import math

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.placement import Placement


@pytest.fixture
def chain() -> Graph:
    return Graph([Op(name=n, work=1.0) for n in "abcd"], [("a", "b"), ("b", "c"), ("c", "d")], name="chain")


def test_from_mapping_and_views(chain):
    c = Cluster.stages(3)
    p = Placement.from_mapping(chain, c, {"a": "stage0", "b": "stage0", "c": "stage2", "d": "stage2"})
    assert p.assign.tolist() == [0, 0, 2, 2]
    assert p.device_of("c") == "stage2" and p.ops_on("stage1") == [] and p.ops_on("stage0") == ["a", "b"]
    assert [m.tolist() for m in p.members()] == [[0, 1], [], [2, 3]]
    assert p.used_devices() == ["stage0", "stage2"]
    assert p.split_points() == [2]
    assert p.mapping() == {"a": "stage0", "b": "stage0", "c": "stage2", "d": "stage2"}
    with pytest.raises(ValueError):
        p.assign[0] = 1


def test_from_groups(chain):
    c = Cluster.stages(2)
    p = Placement.from_groups(chain, c, {"stage0": ["a"], "stage1": ["b", "c", "d"]})
    assert p.assign.tolist() == [0, 1, 1, 1]
    with pytest.raises(SpecError, match="op 'a' on two devices"):
        Placement.from_groups(chain, c, {"stage0": ["a"], "stage1": ["a", "b", "c", "d"]})


@pytest.mark.parametrize("mapping, message", [
    ({"a": "stage0", "b": "stage0", "c": "stage0"}, r"1 op\(s\) unplaced, e.g. \['d'\]"),
    ({"a": "stage0", "b": "stage0", "c": "stage0", "d": "gpu9"}, "unknown device 'gpu9'"),
    ({"a": "stage0", "b": "stage0", "c": "stage0", "d": "stage0", "zz": "stage0"}, "unknown op 'zz'"),
])
def test_bad_mappings(chain, mapping, message):
    with pytest.raises(SpecError, match=message):
        Placement.from_mapping(chain, Cluster.stages(2), mapping)


@pytest.mark.parametrize("assign, message", [([0, 0, 0], "needs 4 device indices"),
                                             (np.array([0, 0, 5, 0]), r"op 'c' has device index 5; valid"),
                                             ([0, -1, 0, 0], "op 'b'"), ([0.5, 0, 0, 0], "device index")])
def test_bad_arrays(chain, assign, message):
    with pytest.raises(SpecError, match=message):
        Placement(chain, Cluster.stages(2), assign)


def test_dict_round_trip_and_equality(chain):
    c = Cluster.stages(2)
    p = Placement(chain, c, np.array([0, 0, 1, 1]), source="test")
    q = Placement.from_dict(chain, c, p.to_dict())
    assert q == p and q.source == "test" and hash(q) == hash(p)
    assert p != Placement(chain, c, [0, 1, 1, 1])
    with pytest.raises(SpecError, match="not a placement file"):
        Placement.from_dict(chain, c, {"format": "other"})
    with pytest.raises(SpecError, match="'assignment'"):
        Placement.from_dict(chain, c, {})


def test_with_cluster_and_evaluate(chain):
    p = Placement(chain, Cluster.stages(2), [0, 0, 1, 1])
    q = p.with_cluster(Cluster.stages(2, bandwidth=2.0))
    assert q.assign.tolist() == p.assign.tolist() and q.cluster != p.cluster
    assert evaluate(p).objective == 2.0  # no tensors: each stage works 2
    assert "4 ops on 2/2 devices" in repr(p)


def test_placement_evaluate_and_table_are_deprecated(chain):
    """The cost model sits above placements: Placement.evaluate/table forward to evaluate() with a warning."""
    p = Placement(chain, Cluster.stages(2), [0, 0, 1, 1])
    with pytest.warns(DeprecationWarning, match=r"placement_dsl\.evaluate\(placement, model\)"):
        assert p.evaluate().objective == 2.0
    with pytest.warns(DeprecationWarning, match=r"\.table\(\)") as caught:
        assert "objective (max_load): 2" in p.table()
    assert caught[0].filename == __file__  # the warning points at the caller


def test_op_times_are_the_clusters_times_at_the_assignment_and_read_only():
    g = Graph([Op(name="a", work={"accelerator": 2.0, "cpu": 6.0}), Op(name="b", work={"accelerator": 1.0})],
              [("a", "b")])
    c = Cluster([Device(name="x", speed=2.0), Device(name="h", kind="cpu")])
    p = Placement(g, c, [1, 1])
    assert p.op_times.tolist() == [6.0, math.inf]  # b has no time on a CPU
    assert Placement(g, c, [0, 0]).op_times.tolist() == [1.0, 0.5]
    with pytest.raises(ValueError):
        p.op_times[0] = 0.0
