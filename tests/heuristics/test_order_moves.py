"""The critical-chain search moves ops earlier in the order it list-schedules in (order moves), and starts from the
best schedule of its start's devices (its own, its mirror, the forward passes in their orders)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.heuristics import run
from placement_dsl.heuristics.mirror import justified
from placement_dsl.heuristics.schedule_moves import ScheduleState, descend, start_order

from .test_mirror import greedy_trap, layered, stop_the_descent

MODEL = CostModel.named("makespan")


def test_an_op_moved_earlier_in_the_order_shortens_a_fixed_assignments_list_schedule():
    """``y`` first books the one port late for ``x``'s tensor (16); ``x`` first ends at 12, on the same devices."""
    g, c, a = greedy_trap()
    state = ScheduleState(g, c, MODEL)
    first, b = state.schedule(a, [1, 0, 3, 2])  # y, x, w, u
    assert first[0] == pytest.approx(16.0)
    frozen = np.zeros(g.n, dtype=bool)  # no op may change its device
    found, best, _, (_, accepted), _ = descend(state, a.copy(), first, b, float("inf"), random.Random(0), frozen)
    assert (found == a).all() and accepted >= 1 and best[0] == pytest.approx(12.0)


def test_the_descent_starts_from_the_best_schedule_of_its_start(monkeypatch):
    """CPOP's assignment of a 3,065-op sheet list-schedules to 28.85 in its own start order and to 27.98 in its
    mirror's: a descent from the first had to gain 0.6 before any move counted (none did in 20 s). GETF's own
    schedule of a 15,838-op sheet is 155.04, its mirror 146.23."""
    seen = stop_the_descent(monkeypatch)
    sooner = 0
    for seed in range(6):
        g, c = layered(120, 4, seed)
        start = run("cpop", g, c, model=MODEL).placement
        state = ScheduleState(g, c, MODEL)
        own = sorted(range(g.n), key=lambda v: (start.schedule.start[v], int(g.rank[v])))
        forward, b = state.schedule(start.assign, own)
        mirror = justified(b)
        again, _ = state.schedule(start.assign, start_order(g, mirror))
        run("schedule-ls", g, c, model=MODEL, start=start, time_limit=5.0)
        best = min(forward[0], again[0], max(mirror.finish), evaluate(start, MODEL).objective)
        assert seen[-1] <= best * (1 + 1e-9)
        sooner += seen[-1] < forward[0] - 1e-9
    assert sooner  # the forward pass in the start's order is not the best of them somewhere
