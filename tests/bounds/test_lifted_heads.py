"""Split heads lifted window by window (bounds/head_lift.py, cpsat_lift.py): each anchor's nearest ancestors scheduled
alone by CP-SAT from their heads, the proven least makespan the floor of the heads after it. Never above brute force
under any congestion, above the split heads where a run of ops must share the devices, and an over-priced lift (a
window's least head added back twice) is caught."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_dsl.bounds import head_lift
from placement_dsl.bounds.split_heads import split_bound
from placement_dsl.brute import brute_force
from placement_dsl.certificate import LevelStatus
from placement_dsl.certify import certify
from placement_dsl.constraints import Congestion
from placement_dsl.cpsat import available
from placement_dsl.cpsat_lift import lift_by, lifted_head_bound
from placement_dsl.deadline import Deadline
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem
from tests.bounds.forks import between_floor_and_optimum, fork_chains, serial, star

pytestmark = pytest.mark.skipif(not available(), reason="the windows are priced by CP-SAT (OR-Tools)")
TOL = 1e-6


def star_then_chain(tail: int = 2) -> Problem:
    """``a -> x0..x2 -> b -> c0 -> .. -> c{tail-1}`` on three serial devices with port congestion: ``a``, ``b`` and
    each ``c`` take 1, each ``x`` 4, tensors 1. The star's optimum is 8 alone (brute force: 10 with two ``c``)."""
    p = star(3, 4.0, 1.0, "port")
    ops = list(p.graph.ops) + [Op(name=f"c{i}", work=1.0, out_bytes=1.0) for i in range(tail)]
    edges = [*p.graph.edges, ("b", "c0"), *[(f"c{i}", f"c{i + 1}") for i in range(tail - 1)]]
    return Problem(Graph(ops, edges), p.cluster, Makespan(), [Congestion("port")])


def test_the_lift_carries_the_stars_schedule_to_the_ops_after_it():
    # the split heads price each op's cone with the other branches beside it at no cost (9); the window of b's four
    # ancestors, proven to end at 7 at the earliest, is the floor of b's head, and b's successors follow: 10, the
    # optimum, proven by the pass (the op named is the one whose lifted head, time and tail reach it)
    p = star_then_chain()
    value, note, complete = lifted_head_bound(p, Deadline(30.0), anchor_ops=5, stride=1)
    assert complete and "op 'b': its lifted head" in note
    assert value == pytest.approx(10.0) == brute_force(p)[0]
    assert split_bound(p)[0] == pytest.approx(9.0)


@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(fork_chains(), st.integers(2, 4))
def test_never_above_the_brute_force_optimum(problem, anchor_ops):
    # port, channel and no congestion; windows of 2-4 ancestors at every position: at most the optimum
    found = lifted_head_bound(problem, Deadline(30.0), anchor_ops=anchor_ops, stride=1)
    between_floor_and_optimum([problem], [found], split_bound, TOL)


def doubled(item):
    """The deliberate error, in the child: each window's least head, taken off its releases, added back twice."""
    real = head_lift.window_of

    def twice(*args):
        w = real(*args)
        return head_lift.Window(w.problem, w.release, w.tail, 2 * w.offset, w.ops, w.centre)

    head_lift.window_of = twice
    try:
        return lift_by(item)
    finally:
        head_lift.window_of = real


def test_an_over_priced_lift_is_caught():
    p = star_then_chain()
    sound = lifted_head_bound(p, Deadline(30.0), anchor_ops=5, stride=1)[0]
    over = lifted_head_bound(p, Deadline(30.0), anchor_ops=5, stride=1, by=doubled)[0]
    assert sound <= brute_force(p)[0] + TOL < over


def test_a_graph_too_large_or_a_clock_too_short_is_declined_at_once(monkeypatch):
    p = star_then_chain()
    t = Deadline(30.0)
    value, note, _ = lifted_head_bound(p, Deadline(2.0))
    assert value == 0.0 and note.startswith("declined: 2.0 s left") and t.elapsed() < 0.5
    monkeypatch.setattr("placement_dsl.cpsat_lift.MAX_OPS", 5)
    value, note, _ = lifted_head_bound(p, Deadline(30.0))
    assert value == 0.0 and note == "declined: 7 ops (the ancestor sets of at most 5 ops)"


def test_a_clock_too_short_for_a_window_at_every_op_spaces_the_anchors_out():
    # a chain of 300 ops after the star and windows asked at every position, 6 s: the pass spaces its anchors out to
    # what the clock affords and reaches the last op on time (at most the optimum: the star's 8, then the chain)
    p = star_then_chain(300)
    t = Deadline(6.0)
    value, note, complete = lifted_head_bound(p, t, anchor_ops=5, stride=1)
    assert t.elapsed() < 6.0 + 0.5
    assert complete and int(note.split(" by ")[1].split()[0]) < 100
    assert split_bound(p)[0] - TOL <= value <= 8.0 + 300 + TOL


def test_certify_runs_it():
    cert = certify(star_then_chain(), levels=("lifted-heads",), budget=30.0, stop_at_gap=False)
    row = next(r for r in cert.levels if r.level == "lifted-heads")
    assert row.status is LevelStatus.OPTIMAL and 9.0 <= row.bound <= 10.0 + TOL


def test_the_pass_keeps_the_split_heads_bound_the_devices_work_included():
    # a -> x0..x3 on two devices, nothing to move: the paths give 1 + 3, the devices' work 1 + 12 / 2 = 7, which the
    # split heads prove; the pass with no window (its anchors not priced) proves it too, from the same heads
    ops = [Op(name="a", work=1.0), *[Op(name=f"x{i}", work=3.0) for i in range(4)]]
    p = Problem(Graph(ops, [("a", f"x{i}") for i in range(4)]), serial(2), Makespan(), [Congestion("port")])
    state = head_lift.HeadLift(p)
    assert state.start()
    state.advance(p.graph.n)
    assert state.bound()[0] == pytest.approx(4.0)
    state.work()
    assert state.bound() == (pytest.approx(7.0), None) and split_bound(p)[0] == pytest.approx(7.0)
