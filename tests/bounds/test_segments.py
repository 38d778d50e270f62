"""The makespan's cut segments with the transfers a device pays to join one (bounds/segments.py)."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds.makespan import energy_makespan, route_path_makespan
from placement_dsl.bounds.segments import transfer_segment_bound
from placement_dsl.brute import brute_force
from placement_dsl.cluster import Cluster, Device
from placement_dsl.deadline import Deadline
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem
from tests.bounds import test_split_heads as cases


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


def three_branches() -> Problem:
    """``a -> {x, y, z} -> b`` of free tensors on two devices: ``a`` and ``b`` take 1, each branch 2 on d0 and 5
    on d1."""
    ops = [Op(name="a", work=1.0), Op(name="b", work=1.0)]
    ops += [Op(name=x, work={"d0": 2.0, "d1": 5.0}) for x in "xyz"]
    edges = [(u, v) for x in "xyz" for u, v in (("a", x), (x, "b"))]
    devices = [Device(name=f"d{i}", kind=f"d{i}", invocations=False) for i in range(2)]
    return Problem(Graph(ops, edges), Cluster(devices), Makespan())


def test_an_op_too_slow_for_the_segment_is_kept_off_that_device():
    # split fractionally, the branches fit in 30/7 (15/7 of them on d0, 6/7 on d1; the weight grid proves 4.2),
    # but a branch on d1 takes 5,
    # so a segment shorter than 5 runs all three on d0 (6): the segment is 5 and the makespan 7, the optimum
    p = three_branches()
    assert transfer_segment_bound(p)[0] == pytest.approx(7.0) == brute_force(p)[0]



def test_a_device_joins_only_through_a_tensor_the_segment_reads():
    # a -> {x, y} -> b: a's tensor takes 2 to move, x and y send free tensors to b only. x is fast on d0, y on d1,
    # but a device without a pays 2 to start either, more than the split saves: the segment is 1.5 on d0 (2.5 in
    # all, the optimum). Priced by the tensors that only b reads, a device joined for free (1.5)
    ops = [Op(name="a", work=0.5, out_bytes=2.0), Op(name="b", work=0.5),
           Op(name="x", work={"d0": 0.5, "d1": 1.0}), Op(name="y", work={"d0": 1.0, "d1": 0.5})]
    p = Problem(Graph(ops, [("a", "x"), ("a", "y"), ("x", "b"), ("y", "b")]), cases.mesh(2), Makespan())
    assert transfer_segment_bound(p)[0] == pytest.approx(2.5) == cases.exhaustive(p)


def test_a_device_joins_after_the_producer_of_the_tensor_it_reads():
    # a -> {x -> y, u, w} -> b on three devices, 0.5 each but w 1; only a's tensor costs (1). A device without a
    # starts at the earliest when x's free tensor is ready, 0.5 after a: with the work of 2.5 over three devices,
    # each of the two others paying 0.5, the segment is at least 7/6 (13/6 in all; the optimum is 2.5). Moves
    # priced without their producers' times let a device join at once: the segment's path, 1 (2 in all)
    ops = [Op(name=x, work=0.5, out_bytes=1.0 if x == "a" else 0.0) for x in "abxyu"] + [Op(name="w", work=1.0)]
    edges = [("a", "x"), ("x", "y"), ("a", "u"), ("a", "w"), ("y", "b"), ("u", "b"), ("w", "b")]
    p = Problem(Graph(ops, edges), cases.mesh(3), Makespan())
    assert transfer_segment_bound(p)[0] == pytest.approx(13 / 6)
    assert transfer_segment_bound(p)[0] <= cases.exhaustive(p) + 1e-9


def test_a_host_runs_its_share_side_by_side():
    # the three branches take 5 on the accelerator and 1 on the host, which runs them at once: the segment is 1 and
    # the makespan 3 (a and b take 1). Counted as run one at a time, the host's share would make the segment 3
    ops = [Op(name="a", work=1.0), Op(name="b", work=1.0)]
    ops += [Op(name=x, work={"accelerator": 5.0, "cpu": 1.0}) for x in "xyz"]
    edges = [(u, v) for x in "xyz" for u, v in (("a", x), (x, "b"))]
    p = Problem(Graph(ops, edges), Cluster.accelerators(1, cpus=1), Makespan())
    assert p.cluster.parallel.any()
    assert transfer_segment_bound(p)[0] == pytest.approx(3.0) == brute_force(p)[0]

@st.composite
def forks(draw):
    """``a -> branches -> b`` (1 to 4 branch ops, a branch of two in a chain sometimes) on 2-3 devices of unrelated
    times from 0.5 to 5, tensors of 0 to 4 bytes, and sometimes an edge carried by a MOIRAI flow op (no time,
    colocated with its producer, a transfer matrix of its own): at most 7 ops."""
    k, width = draw(st.integers(2, 3)), draw(st.integers(1, 4))
    chain = width <= 3 and draw(st.booleans())

    def op(name: str) -> Op:
        return Op(name=name, work={f"d{j}": draw(st.sampled_from([0.5, 1.0, 2.0, 3.0, 5.0])) for j in range(k)},
                  out_bytes=draw(st.sampled_from([0.0, 1.0, 2.0, 4.0])), group=name)

    ops = [op("a"), op("b")] + [op(f"x{i}") for i in range(width)]
    edges = [e for i in range(width) for e in (("a", f"x{i}"), (f"x{i}", "b"))]
    if chain:
        ops.append(op("y"))
        edges = [e for e in edges if e != ("x0", "b")] + [("x0", "y"), ("y", "b")]
    if len(ops) < 7 and draw(st.booleans()):
        u, v = edges.pop(draw(st.integers(0, len(edges) - 1)))
        matrix = [[0.0 if i == j else draw(st.sampled_from([0.5, 1.0, 3.0])) for j in range(k)] for i in range(k)]
        ops.append(Op(name="q", work=0.0, group=u, attrs={"transfer_time": matrix}))
        edges += [(u, "q"), ("q", v)]
    return Problem(Graph(ops, edges), cases.mesh(k), Makespan())


@given(forks())
@settings(max_examples=25, deadline=None)
def test_at_most_the_exhaustive_optimum_of_any_tiny_fork(problem):
    assert transfer_segment_bound(problem)[0] <= cases.exhaustive(problem) + 1e-9
