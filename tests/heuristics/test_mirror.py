"""The mirror of a list schedule (backward list scheduling, :mod:`placement_dsl.heuristics.mirror`): valid for every
congestion mode and host, and what the critical-chain search scores an assignment by when it ends sooner."""
from __future__ import annotations

import random

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device, Link
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




def layered(n: int, k: int, seed: int) -> tuple[Graph, Cluster]:
    """A MOIRAI-style sheet: ``n`` tasks in random layers, each fed by one to three of the layer before, on ``k``
    devices of different speeds and link bandwidths."""
    rng = random.Random(seed)
    width, layers, t = max(2, int(n ** 0.5 / 2)), [], 0
    while t < n:
        w = min(n - t, rng.randint(1, width))
        layers.append(list(range(t, t + w)))
        t += w
    edges = set()
    for li in range(1, len(layers)):
        for j in layers[li]:
            for p in rng.sample(layers[li - 1], min(len(layers[li - 1]), rng.choice([1, 1, 2, 3]))):
                edges.add((p, j))
    speed = [rng.uniform(0.5, 2.5) for _ in range(k)]
    ops = [Op(name=f"t{i}", work={f"k{d}": rng.uniform(0.1, 1.0) * speed[d] for d in range(k)},
              out_bytes=rng.uniform(0.5, 3.0)) for i in range(n)]
    devices = [Device(name=f"d{d}", kind=f"k{d}") for d in range(k)]
    links = [Link(src=f"d{a}", dst=f"d{b}", bandwidth=rng.choice([2.0, 5.0, 10.0]))
             for a in range(k) for b in range(k) if a != b]
    return Graph(ops, [(f"t{a}", f"t{b}") for a, b in sorted(edges)], name="layered"), Cluster(devices, links)


def stop_the_descent(monkeypatch) -> list[float]:
    """``schedule-ls`` out of time before its first candidate (its descent and segment moves do nothing): the list
    of the objectives each descent was handed."""
    from placement_dsl.heuristics import schedule_ls

    seen: list[float] = []

    def stopped(state, assign, best, b, until, rng, **options):
        seen.append(best[0])
        return assign, best, b, (0, 0), False

    monkeypatch.setattr(schedule_ls, "descend", stopped)
    monkeypatch.setattr(schedule_ls, "improve_segments", lambda *args, **kwargs: None)
    return seen


def test_a_search_stopped_before_any_move_answers_its_starts_mirror_when_that_ends_sooner(monkeypatch):
    """On generated 1,000- to 5,000-task sheets the descent ran out of time far from a local optimum, so the mirror
    (which came only after one) never ran: the answer was CPOP's 28.224 where its mirror ends at 27.898."""
    from placement_dsl.evaluate import evaluate
    from placement_dsl.heuristics import run, schedule_ls

    stop_the_descent(monkeypatch)
    sooner = 0
    for seed in range(6):
        g, c = layered(120, 4, seed)
        start = run("cpop", g, c, model=MODEL).placement
        found = schedule_ls.schedule_local_search(g, c, model=MODEL, time_limit=5.0, start=start)
        before = evaluate(start, MODEL).objective
        order = sorted(range(g.n), key=lambda v: (start.schedule.start[v], int(g.rank[v])))
        mirror = max(justified(ScheduleState(g, c, MODEL).schedule(start.assign, order)[1]).finish)
        assert found.objective <= min(before, mirror) * (1 + 1e-9) and evaluate(found.placement, MODEL).valid
        sooner += found.objective < before * (1 - 1e-6)  # the mirror, or the forward pass in its order
    assert sooner >= 3
