"""A candidate of the critical-chain search runs as its incumbent before the first op it changes and is list-scheduled
from there, resumed from a copy of the incumbent's prefix (:class:`~placement_dsl.heuristics.schedule_moves.Prefix`):
the same schedule, op for op and transfer for transfer, as replaying that prefix and list-scheduling the rest from
scratch; given up only when it cannot be preferred to its incumbent."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel
from placement_dsl.heuristics.mirror import justified
from placement_dsl.heuristics.schedule_moves import TOL, Prefix, ScheduleState, moved_earlier, start_order
from placement_dsl.schedule import ListScheduler
from placement_dsl.testing import random_graph

from .test_mirror import layered

MODEL = CostModel.named("makespan")


def same(one: ListScheduler, other: ListScheduler) -> bool:
    return (one.device, one.start, one.finish, one.transfer_start) == \
        (other.device, other.start, other.finish, other.transfer_start)


def from_scratch(incumbent: ListScheduler, order: list[int], assign: np.ndarray, first: int) -> ListScheduler:
    """``order[:first]`` booked as ``incumbent`` runs them (with their input transfers), the rest list-scheduled."""
    g, b = incumbent.graph, incumbent.fresh()
    for v in order[:first]:
        d = incumbent.device[v]
        for u in g.predecessors(v).tolist():
            if incumbent.device[u] != d and (u, d) not in b.transfer_start:
                b.book_transfer(u, d, incumbent.transfer_start[(u, d)])
        b.book(v, d, incumbent.start[v])
    for v in order[first:]:
        b.place(v, int(assign[v]))
    return b


def incumbent_of(state: ScheduleState, assign: np.ndarray, order: list[int]) -> tuple[ListScheduler, list[int]]:
    """A schedule the forward pass does not reproduce (the mirror of ``assign``'s list schedule) and its start order."""
    b = justified(state.schedule(assign, order)[1])
    return b, start_order(b.graph, b)


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
        assign = rng.integers(0, c.size, g.n)
        incumbent, order = incumbent_of(state, assign, g.topo.tolist())
        for every in (1, 7, 32):
            prefix = Prefix(incumbent, order, every, state.preds)
            assert same(prefix.resume(g.n), incumbent)  # the incumbent itself, exactly
            for _ in range(6):
                trial = assign.copy()
                ops = rng.choice(g.n, size=int(rng.integers(1, 5)), replace=False)
                trial[ops] = int(rng.integers(0, c.size))
                first = int(prefix.position[ops].min())
                b = from_scratch(incumbent, order, trial, first)
                part, p = state.score(prefix, trial, order, first, np.inf)
                assert part[0] == max(b.finish) and same(b, p), (seed, every)


def test_an_op_moved_earlier_in_the_order_is_scored_from_its_new_place():
    for seed, g, c, rng in cases():
        state = ScheduleState(g, c, MODEL)
        assign = rng.integers(0, c.size, g.n)
        incumbent, order = incumbent_of(state, assign, g.topo.tolist())
        prefix = Prefix(incumbent, order, 5, state.preds)
        preds = [g.predecessors(v).tolist() for v in range(g.n)]
        for v in rng.choice(g.n, size=8, replace=False).tolist():
            earliest = max((int(prefix.position[u]) + 1 for u in preds[v]), default=0)
            if earliest >= prefix.position[v]:
                continue
            to = int(rng.integers(earliest, prefix.position[v]))
            trial = moved_earlier(order, prefix.position, v, to)
            assert sorted(trial) == sorted(order) and trial.index(v) == to
            b = from_scratch(incumbent, trial, assign, to)
            part, p = state.score(prefix, assign, trial, to, np.inf)
            assert part[0] == max(b.finish) and same(b, p), seed


@pytest.mark.parametrize("mirror", [False, True])
def test_a_candidate_is_given_up_only_when_it_cannot_be_preferred(mirror):
    for seed, g, c, rng in cases():
        state = ScheduleState(g, c, MODEL, mirror=mirror)
        assign = rng.integers(0, c.size, g.n)
        b, order = incumbent_of(ScheduleState(g, c, MODEL), assign, g.topo.tolist())
        incumbent = (max(b.finish), sum(b.finish))
        prefix = state.prefix(b, order)
        for _ in range(10):
            trial = assign.copy()
            ops = rng.choice(g.n, size=2, replace=False)
            trial[ops] = int(rng.integers(0, c.size))
            first = int(prefix.position[ops].min())
            full = from_scratch(b, order, trial, first)
            if mirror and max(full.finish) <= incumbent[0] * 1.15:
                full = justified(full)
            part, p = state.score(prefix, trial, order, first, incumbent[0])
            if p is None:
                assert max(full.finish) > incumbent[0] * (1 + TOL)
            else:
                assert part[0] == max(p.finish) and same(full, p)
