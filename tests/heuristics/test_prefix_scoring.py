"""A candidate of the critical-chain search is list-scheduled from a copy of its incumbent's prefix
(:class:`~placement_dsl.heuristics.schedule_moves.Prefix`): the same schedule, op for op and transfer for transfer,
as scheduling it from scratch, and given up only when it cannot be preferred to its incumbent."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel
from placement_dsl.heuristics.schedule_moves import TOL, Prefix, ScheduleState, better_schedule, moved_earlier
from placement_dsl.schedule import ListScheduler
from placement_dsl.testing import random_graph

from .test_mirror import layered

MODEL = CostModel.named("makespan")


def same(one: ListScheduler, other: ListScheduler) -> bool:
    return (one.device, one.start, one.finish, one.transfer_start) == \
        (other.device, other.start, other.finish, other.transfer_start)


def cases():
    for seed in range(8):
        rng = np.random.default_rng(seed)
        g = random_graph(rng, 60, 0.08)
        yield seed, g, Cluster.accelerators(3, bandwidth=1.0, cpus=int(seed % 2)), rng  # a CPU: a parallel host
    for seed in range(3):
        g, c = layered(150, 4, seed)
        yield seed, g, c, np.random.default_rng(seed)


@pytest.mark.parametrize("congestion", ["port", "channel", "link", "none"])
def test_a_move_scored_from_a_prefix_is_the_schedule_from_scratch(congestion):
    for seed, g, c, rng in cases():
        state = ScheduleState(g, c, replace(MODEL, congestion=congestion))
        assign, order = rng.integers(0, c.size, g.n), g.topo.tolist()
        for every in (1, 7, 32):
            prefix = Prefix(state.blank, assign, order, every)
            for _ in range(6):
                trial = assign.copy()
                ops = rng.choice(g.n, size=int(rng.integers(1, 5)), replace=False)
                trial[ops] = int(rng.integers(0, c.size))
                full, b = state.schedule(trial, order)
                part, p = state.score(prefix, trial, order, int(prefix.position[ops].min()), np.inf)
                assert full == part and same(b, p), (seed, every)


def test_an_op_moved_earlier_in_the_order_is_scored_from_its_new_place():
    for seed, g, c, rng in cases():
        state = ScheduleState(g, c, MODEL)
        assign, order = rng.integers(0, c.size, g.n), g.topo.tolist()
        prefix = Prefix(state.blank, assign, order, 5)
        preds = [g.predecessors(v).tolist() for v in range(g.n)]
        for v in rng.choice(g.n, size=8, replace=False).tolist():
            earliest = max((int(prefix.position[u]) + 1 for u in preds[v]), default=0)
            if earliest >= prefix.position[v]:
                continue
            to = int(rng.integers(earliest, prefix.position[v]))
            trial = moved_earlier(order, prefix.position, v, to)
            assert sorted(trial) == sorted(order) and trial.index(v) == to
            full, b = state.schedule(assign, trial)
            part, p = state.score(prefix, assign, trial, to, np.inf)
            assert full == part and same(b, p), seed


@pytest.mark.parametrize("mirror", [False, True])
def test_a_candidate_is_given_up_only_when_it_cannot_be_preferred(mirror):
    for seed, g, c, rng in cases():
        state = ScheduleState(g, c, MODEL, mirror=mirror)
        assign, order = rng.integers(0, c.size, g.n), g.topo.tolist()
        incumbent, _ = state.schedule(assign, order)
        prefix = state.prefix(assign, order)
        for _ in range(10):
            trial = assign.copy()
            ops = rng.choice(g.n, size=2, replace=False)
            trial[ops] = int(rng.integers(0, c.size))
            full, b = state.schedule(trial, order, incumbent[0])
            part, p = state.score(prefix, trial, order, int(prefix.position[ops].min()), incumbent[0])
            if p is None:
                assert not better_schedule(full, incumbent) and full[0] > incumbent[0] * (1 + TOL)
            else:
                assert full == part and same(b, p)
