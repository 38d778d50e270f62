"""The makespan's cut segments with the transfers a device pays to join one (bounds/segments.py)."""
from __future__ import annotations

import math

import pytest

from placement_dsl.bounds.makespan import energy_makespan, route_path_makespan
from placement_dsl.bounds.segments import transfer_segment_bound
from placement_dsl.brute import brute_force
from placement_dsl.cluster import Cluster, Device
from placement_dsl.deadline import Deadline
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem


def serial(k: int, memory: float = math.inf) -> Cluster:
    """``k`` accelerators that run one op at a time (MOIRAI's devices; a cluster without links runs invocations)."""
    return Cluster([Device(name=f"acc{i}", memory=memory, invocations=False) for i in range(k)])


def fork(out: float) -> Problem:
    """``a -> {x, y} -> b``, 1 each, tensors of ``out`` bytes, on two devices of bandwidth 1."""
    ops = [Op(name=x, work=1.0, out_bytes=out) for x in "axyb"]
    return Problem(Graph(ops, [("a", "x"), ("a", "y"), ("x", "b"), ("y", "b")]), serial(2), Makespan())


def test_a_branch_that_cannot_pay_its_way_runs_beside_the_other():
    # moving x or y costs 10 in and 10 out, more than the 1 it saves: the segment is 2 on one device, 4 in all,
    # the optimum (the path says 3, the work over two devices 2)
    p = fork(10.0)
    assert route_path_makespan(p)[0] == pytest.approx(3.0) and energy_makespan(p)[0] < 4.0
    assert transfer_segment_bound(p)[0] == pytest.approx(4.0) == brute_force(p)[0]


def test_cheap_transfers_leave_the_path():
    # tensors of no size: x and y run side by side, the segment is the path's 1 and the makespan 3
    p = fork(0.0)
    assert transfer_segment_bound(p)[0] == pytest.approx(3.0) == brute_force(p)[0]


def test_stopped_by_its_clock():
    value, note = transfer_segment_bound(fork(10.0), Deadline(0.0))
    assert value == 0.0 and "budget spent" in note


def test_many_devices_keep_to_the_paths_without_enumerating_device_sets():
    # 2^12 device sets with their weight grids would take minutes; the segments fall back to their paths (3)
    p = Problem(fork(10.0).graph, serial(12), Makespan())
    assert transfer_segment_bound(p, Deadline(5.0))[0] == pytest.approx(3.0)
