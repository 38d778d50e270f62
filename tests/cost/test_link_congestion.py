"""Transfers over multi-hop routes: every hop's latency, the route's bottleneck, and ``Congestion("link")``
(transfers whose routes share a physical link take turns) in the cost model, list scheduling, the schedule
MILP and CP-SAT, against exhaustive search on tiny instances."""
from __future__ import annotations

import pytest

from placement_dsl import testing
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.constraints import Congestion, Pin
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Makespan
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.schedule import Schedule, check_schedule, list_schedule, transfer_durations
from placement_dsl.solve import solve
from placement_dsl.solvers import Status


def line(k: int, latency: float = 0.0, bandwidth: float = 1.0) -> Cluster:
    """``k`` devices on a line, a link each way between neighbours."""
    devices = [Device(name=f"d{i}", kind=f"d{i}") for i in range(k)]
    links = [Link(src=f"d{a}", dst=f"d{b}", bandwidth=bandwidth, latency=latency)
             for a in range(k) for b in range(k) if abs(a - b) == 1]
    return Cluster(devices, links)


def test_two_hops_arrive_after_one():
    # a (1 byte) on d0 -> b: on d1 it arrives at 1 + (1 + 1) = 3, on d2 it pays two hops of latency 1: 1 + (2 + 1) = 4
    g = Graph([Op(name="a", work=1, out_bytes=1), Op(name="b", work=1)], [("a", "b")])
    c = line(3, latency=1.0)
    assert transfer_durations(g, c, [0, 0], [0, 0], [1, 2]).tolist() == [2.0, 3.0]
    near, far = (evaluate(Placement(g, c, [0, d]), "makespan").objective for d in (1, 2))
    assert (near, far) == (4.0, 5.0)


def crossing(mode: str | None) -> Problem:
    """p on d0 sends 2 bytes to q on d2, r on d1 sends 2 bytes to s on d3: both routes cross link d1 -> d2."""
    ops = [Op(name="p", work=1, out_bytes=2), Op(name="r", work=1, out_bytes=2), Op(name="q", work=1),
           Op(name="s", work=1)]
    g = Graph(ops, [("p", "q"), ("r", "s")], name="crossing")
    c = Cluster([Device(name=f"d{i}") for i in range(4)],
                [Link(src=f"d{a}", dst=f"d{b}", bandwidth=1.0) for a in range(4) for b in range(4) if abs(a - b) == 1])
    pins = [Pin("p", "d0"), Pin("q", "d2"), Pin("r", "d1"), Pin("s", "d3")]
    return Problem(g, c, Makespan(), [*pins, Congestion(mode)])


@pytest.mark.parametrize("mode, makespan", [("port", 4.0), ("channel", 4.0), (None, 4.0), ("link", 6.0)])
def test_crossing_transfers_take_turns_on_their_shared_link(mode, makespan):
    problem = crossing(mode)
    p = Placement(problem.graph, problem.cluster, [0, 1, 2, 3])
    ev = evaluate(p, problem.cost_model())
    assert ev.valid and ev.objective == makespan
    overlapping = Schedule([0.0, 0.0, 3.0, 3.0], {(0, 2): 1.0, (1, 3): 1.0})
    bad = check_schedule(p, overlapping, problem.cost_model().congestion)[1]
    if mode == "link":
        assert len(bad) == 1 and bad[0].startswith("link 'd1'->'d2': transfers of op 'p' (d0->d2, [1, 3)) and op 'r'")
    else:
        assert bad == []


def tiny(mode: str) -> Problem:
    """Four ops on a line of three devices with a per-hop latency of 0.5: two producers feed two consumers."""
    ops = [Op(name="a", work={"d0": 1, "d1": 2, "d2": 4}, out_bytes=2),
           Op(name="b", work={"d0": 2, "d1": 1, "d2": 3}, out_bytes=1),
           Op(name="c", work={"d0": 4, "d1": 3, "d2": 1}),
           Op(name="e", work={"d0": 3, "d1": 4, "d2": 1})]
    g = Graph(ops, [("a", "c"), ("a", "e"), ("b", "e")], name="tiny")
    return Problem(g, line(3, latency=0.5), Makespan(), [Congestion(mode)])


def exhaustive(problem: Problem) -> float:
    """Every placement, each list-scheduled in every topological order: the least makespan the referee accepts."""
    return testing.scheduled_optimum(problem, valid_only=False)


def free_crossing(mode: str | None) -> Problem:
    """:func:`crossing` with every op free to move (5 off its own device, 1 on it) and a per-hop latency of 0.5:
    the shared link d1 -> d2 makes the optimum 6 under ``"link"``, 5 otherwise."""
    def op(name: str, home: int, out: float = 0.0) -> Op:
        return Op(name=name, work={f"d{i}": 1 if i == home else 5 for i in range(4)}, out_bytes=out)

    g = Graph([op("p", 0, 2), op("r", 1, 2), op("q", 2), op("s", 3)], [("p", "q"), ("r", "s")], name="crossing")
    return Problem(g, line(4, latency=0.5), Makespan(), [Congestion(mode)])


@pytest.mark.parametrize("make, mode, optimum", [(free_crossing, "link", 6.0), (free_crossing, "port", 5.0),
                                                 (tiny, "link", 5.0), (tiny, "none", 5.0)])
def test_schedule_milp_on_routes_is_the_exhaustive_optimum(make, mode, optimum):
    problem = make(mode)
    assert exhaustive(problem) == optimum
    result = solve(problem, "schedule", time_limit=20, gap=1e-9)
    assert result.status is Status.OPTIMAL
    assert result.objective == pytest.approx(optimum, rel=1e-6)
    assert check_schedule(result.placement, result.placement.schedule, mode)[1] == []
    assert testing.brute_force(problem)[0] >= optimum - 1e-9  # the referee's list schedules never beat the optimum


def test_cpsat_serializes_a_shared_link():
    from placement_dsl.cpsat import solve_schedule_cpsat

    problem = free_crossing("link")
    result = solve_schedule_cpsat(problem, time_limit=5)
    assert result.objective == pytest.approx(6.0)
    assert check_schedule(result.placement, result.placement.schedule, "link")[1] == []


def test_list_scheduling_books_every_link_of_the_route():
    problem = crossing("link")
    p = Placement(problem.graph, problem.cluster, [0, 1, 2, 3])
    s = list_schedule(p, "link")
    assert sorted(s.transfer_start.values()) == [1.0, 3.0]
    assert evaluate(p, CostModel.named("makespan", congestion="link")).objective == 6.0
