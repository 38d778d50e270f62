"""The path, work and segment bounds of a makespan keep a colocation class on one device (bounds/makespan.py,
bounds/segments.py): a MOIRAI flow op runs where its producer does, so the tensor it carries moves from there, not
from wherever the move is free. At most the exhaustive optimum where classes and flow ops bind."""
from __future__ import annotations

import pytest
from hypothesis import given, settings

from placement_dsl.bounds.makespan import energy_makespan, route_path_makespan
from placement_dsl.bounds.segments import transfer_segment_bound
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem
from tests.bounds import test_split_heads as cases


def flow() -> Problem:
    """``u -> q -> v`` on two devices: ``u`` (no bytes) takes 1 on d0 and 5 on d1, ``v`` 5 on d0 and 1 on d1, and
    ``q`` is a flow op colocated with ``u`` whose tensor takes 10 between them."""
    ops = [Op(name="u", work={"d0": 1.0, "d1": 5.0}, out_bytes=0.0, group="u"),
           Op(name="q", work=0.0, group="u", attrs={"transfer_time": [[0.0, 10.0], [10.0, 0.0]]}),
           Op(name="v", work={"d0": 5.0, "d1": 1.0}, out_bytes=0.0)]
    return Problem(Graph(ops, [("u", "q"), ("q", "v")]), cases.mesh(2), Makespan())


def test_a_flow_op_moves_its_tensor_from_its_producers_device():
    # u is fast on d0, v on d1, and the flow between them costs 10: both on one device (6) is the optimum. With the
    # flow op free to follow v (u's tensor has no bytes), the longest path read 1 + 0 + 1 = 2
    p = flow()
    assert route_path_makespan(p)[0] == pytest.approx(6.0) == cases.exhaustive(p)


def test_a_segment_joins_a_device_only_through_a_tensor_another_class_reads():
    # a -> {x, y} -> b, each edge carried by a flow op colocated with its producer (tensors of 10), the branch ops
    # of no bytes: a device that runs a branch alone pays 10 in and 10 out, so the segment is one device's work (2)
    # and the makespan 4 (a and b 1 each); the branch ops' free tensors let a device join at no cost (3)
    ops = [Op(name=x, work=1.0, out_bytes=0.0, group=x) for x in "axyb"]
    edges = []
    for u, v in [("a", "x"), ("a", "y"), ("x", "b"), ("y", "b")]:
        ops.append(Op(name=f"{u}{v}", work=0.0, group=u, attrs={"transfer_time": [[0.0, 10.0], [10.0, 0.0]]}))
        edges += [(u, f"{u}{v}"), (f"{u}{v}", v)]
    p = Problem(Graph(ops, edges), cases.mesh(2), Makespan())
    assert transfer_segment_bound(p)[0] == pytest.approx(4.0) == cases.exhaustive(p)


COLOCATED = [i for i, p in enumerate(cases.CASES) if len(set(p.graph.group_id.tolist())) < p.graph.n]


@pytest.mark.parametrize("i", COLOCATED)
def test_at_most_the_exhaustive_optimum_where_classes_bind(i):
    p, best = cases.CASES[i], cases.optimum(i)
    assert route_path_makespan(p)[0] <= best + 1e-9
    assert energy_makespan(p)[0] <= best + 1e-9
    assert transfer_segment_bound(p)[0] <= best + 1e-9


@given(cases.schedules())
@settings(max_examples=40, deadline=None)
def test_at_most_the_exhaustive_optimum_of_any_tiny_schedule(problem):
    best = cases.exhaustive(problem)
    assert max(route_path_makespan(problem)[0], energy_makespan(problem)[0],
               transfer_segment_bound(problem)[0]) <= best + 1e-9
