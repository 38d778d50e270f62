"""Windows of the makespan scheduled alone by CP-SAT, the split heads and tails their releases and tails
(bounds/windows.py, cpsat_segments.py): never above brute force under any congestion, above the split heads where
the ops share the devices, and an over-priced window (its heads and tails counted twice) is caught."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_dsl.bounds import windows
from placement_dsl.bounds.split_heads import split_bound
from placement_dsl.brute import brute_force
from placement_dsl.certificate import LevelStatus
from placement_dsl.certify import certify
from placement_dsl.constraints import Congestion
from placement_dsl.cpsat import available
from placement_dsl.cpsat_segments import schedule_window_bound, schedule_window_bounds
from placement_dsl.deadline import Deadline
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem
from tests.bounds.forks import between_floor_and_optimum, fork_chains, star

pytestmark = pytest.mark.skipif(not available(), reason="the windows are priced by CP-SAT (OR-Tools)")
TOL = 1e-6


def test_the_whole_star_is_priced_exactly():
    # a [0,1] on d0 sends to d1 [1,2], then d2 [2,3] (one port); x0 [1,5] on d0, x1 [2,6], x2 [3,7]; b on d2 takes x0
    # [5,6] and x1 [6,7] through its port and runs [7,8]: 8, the optimum, where the split heads price each op's
    # neighbourhood with the other branches in parallel at no cost: 7
    p = star(3, 4.0, 1.0, "port")
    value, note, complete = schedule_window_bound(p, Deadline(30.0))
    assert complete and note.startswith("the whole graph")
    assert value == pytest.approx(8.0) == brute_force(p)[0]
    assert split_bound(p)[0] < 8.0 - 0.5


@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(fork_chains(), min_size=8, max_size=8))
def test_never_above_the_brute_force_optimum(problems):
    # port, channel and no congestion; brute force list-schedules every placement: at least the optimum
    between_floor_and_optimum(problems, schedule_window_bounds(problems, Deadline(60.0)), split_bound, TOL)


def test_windows_around_the_critical_ops_of_a_larger_graph(monkeypatch):
    # windows of 4 of the star's 5 ops: the whole graph is not priced, the windows are, each with its heads and tails
    # (the bound is at least the split heads', at most the optimum)
    monkeypatch.setattr(windows, "WINDOW_OPS", 4)
    monkeypatch.setattr(windows, "WHOLE_OPS", 3)
    p = star(3, 4.0, 1.0, "port")
    path, found, reason = windows.window_problems(p)
    assert not reason and len(found) >= 1 and all(w.centre is not None and w.ops == 4 for w in found)
    value, note, _ = schedule_window_bound(p, Deadline(30.0))
    assert "around the most critical ops" in note and path - TOL <= value <= 8.0 + TOL


def double_counted(monkeypatch) -> None:
    """The deliberate error: each window's least head and tail, taken off its releases and tails, are added back
    twice."""
    real = windows.window_of

    def twice(*args):
        w = real(*args)
        return windows.Window(w.problem, w.release, w.tail, 2 * w.offset, w.ops, w.centre)

    monkeypatch.setattr(windows, "window_of", twice)


def test_an_over_priced_window_is_caught(monkeypatch):
    # two chained stars: the second star's ops start after the first's, so its window's heads are far from 0
    p = star(3, 4.0, 1.0, "port")
    ops = list(p.graph.ops) + [Op(name=f"{o.name}2", work=o.work, out_bytes=o.out_bytes) for o in p.graph.ops]
    edges = [*p.graph.edges, *[(f"{u}2", f"{v}2") for u, v in p.graph.edges], ("b", "a2")]
    chained = Problem(Graph(ops, edges), p.cluster, Makespan(), [Congestion("port")])
    monkeypatch.setattr(windows, "WINDOW_OPS", 5)  # windows around the second star's ops: heads of 8 and more
    monkeypatch.setattr(windows, "WHOLE_OPS", 4)
    sound = schedule_window_bound(chained, Deadline(30.0))[0]
    double_counted(monkeypatch)
    over = schedule_window_bound(chained, Deadline(30.0))[0]
    assert sound <= 16.0 + TOL < over  # 16: each star's optimum 8, one after the other on one device


def test_a_short_clock_keeps_the_split_heads_and_starts_no_child():
    # a second leaves no time for CP-SAT's child (its import alone took 3-6 s under load): the heads' path, at once
    p = star(3, 4.0, 1.0, "port")
    value, note, complete = schedule_window_bound(p, Deadline(1.0))
    assert not complete and "0 priced" in note and value == pytest.approx(split_bound(p)[0])


def test_certify_runs_it_and_declines_a_graph_too_large(monkeypatch):
    cert = certify(star(3, 4.0, 1.0, "port"), levels=("window-schedules",), budget=30.0, stop_at_gap=False)
    row = next(r for r in cert.levels if r.level == "window-schedules")
    assert row.bound == pytest.approx(8.0) and row.status is LevelStatus.OPTIMAL
    monkeypatch.setattr(windows, "MAX_OPS", 3)
    cert = certify(star(3, 4.0, 1.0, "port"), levels=("window-schedules",), budget=30.0, stop_at_gap=False)
    row = next(r for r in cert.levels if r.level == "window-schedules")
    assert row.status is LevelStatus.SKIPPED and "declined: 5 ops" in row.message
