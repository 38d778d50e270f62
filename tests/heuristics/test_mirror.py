"""The mirror of a list schedule (backward list scheduling, :mod:`placement_dsl.heuristics.mirror`): valid for every
congestion mode and host, and what the critical-chain search scores an assignment by when it ends sooner."""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.mirror import justified, mirrored
from placement_dsl.heuristics.schedule_moves import ScheduleState
from placement_dsl.placement import Placement
from placement_dsl.schedule import ListScheduler, check_schedule, list_schedule
from placement_dsl.testing import random_graph

MODEL = CostModel.named("makespan")


def greedy_trap() -> tuple[Graph, Cluster, np.ndarray]:
    """``x`` (1) and ``y`` (4) on one device feed ``u`` (4) and ``w`` (5) on the other, one port each way: HEFT's
    upward rank runs ``y`` first (10 > 8), so ``x``'s tensor, wanted by both, leaves late; 16 forward, 12 with ``x``
    first."""
    ops = [Op(name="x", work=1.0, out_bytes=2.0), Op(name="y", work=4.0, out_bytes=2.0),
           Op(name="u", work=4.0), Op(name="w", work=5.0, out_bytes=1.0)]
    g = Graph(ops, [("x", "u"), ("x", "w"), ("y", "u")], name="trap")
    return g, Cluster.accelerators(2, bandwidth=1.0), np.array([1, 1, 0, 0])


def forward_scheduler(g: Graph, c: Cluster, assign: np.ndarray, congestion: str) -> ListScheduler:
    """The list schedule of ``assign`` (HEFT's order) replayed in a scheduler."""
    schedule = list_schedule(Placement(g, c, assign), congestion)
    b = ListScheduler(g, c, congestion)
    for v in sorted(range(g.n), key=lambda u: (schedule.start[u], int(g.rank[u]))):
        b.place(v, int(assign[v]))
    return b


def test_the_mirror_beats_a_greedy_forward_list_schedule():
    g, c, a = greedy_trap()
    forward = forward_scheduler(g, c, a, "port")
    assert max(forward.finish) == pytest.approx(16.0)
    back = mirrored(forward)
    makespan, errors = check_schedule(Placement(g, c, a), back.schedule(), "port")
    assert not errors and makespan == pytest.approx(12.0) == max(back.finish)
    assert justified(forward).finish == back.finish  # a second mirroring ends no sooner


def test_the_search_scores_an_assignment_by_its_mirror_when_that_ends_sooner():
    g, c, a = greedy_trap()
    forward = list_schedule(Placement(g, c, a), "port")
    order = sorted(range(g.n), key=lambda v: (forward.start[v], v))  # y first
    assert ScheduleState(g, c, MODEL, mirror=True).schedule(a, order)[0][0] == pytest.approx(12.0)
    assert ScheduleState(g, c, MODEL).schedule(a, order)[0][0] == pytest.approx(16.0)  # the forward pass only


@pytest.mark.parametrize("congestion", ["port", "channel", "link", "none"])
def test_mirrored_schedules_are_valid_and_never_end_later(congestion):
    for seed in range(60):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 9))
        g = random_graph(rng, n, 0.4)
        if seed % 3 == 0:  # ops of no time (a MOIRAI sheet's communication ops): they hold no device
            g = g.replace(ops=[op.model_copy(update={"work": {k: 0.0 for k in op.work}}) if i % 2 else op for i, op in enumerate(g.ops)])
        c = Cluster.accelerators(2, bandwidth=1.0, cpus=int(seed % 2))  # a CPU: a parallel host
        a = rng.integers(0, c.size, n)
        forward = forward_scheduler(g, c, a, congestion)
        back = mirrored(forward)
        makespan, errors = check_schedule(Placement(g, c, a), back.schedule(), congestion)
        assert not errors, (seed, errors)
        assert makespan == pytest.approx(max(back.finish, default=0.0))
        assert makespan <= max(forward.finish, default=0.0) * (1 + 1e-9)  # never later
        carried = mirrored(forward, carried=True)  # another order: valid, not always sooner
        makespan, errors = check_schedule(Placement(g, c, a), carried.schedule(), congestion)
        assert not errors and makespan == pytest.approx(max(carried.finish, default=0.0)), (seed, errors)
        assert max(justified(forward).finish, default=0.0) <= min(max(back.finish, default=0.0), makespan) + 1e-9
