"""Annealing a segment's devices and list order together (:mod:`placement_dsl.heuristics.segment_anneal`): it leaves
the local optimum GETF's schedule is for the critical-chain descent on a transformer's attention, never returns a
longer span than it was given, is deterministic for a seed, and hands a schedule to segments of its shape."""
from __future__ import annotations

import time

import numpy as np
import pytest

from placement_dsl.constraints import Congestion, Memory
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph
from placement_dsl.heuristics import run, segment_anneal, segment_ls
from placement_dsl.heuristics.schedule_moves import ScheduleState
from placement_dsl.objectives import Makespan
from placement_dsl.problem import Problem
from placement_dsl.zoo import gpt3


@pytest.fixture(scope="module")
def attention():
    """Two layers of GPT-3 330M (hidden 1024, 16 heads, 2,048 tokens: 420 ops) on MOIRAI's intra-server GPUs (two
    V100, two P100) with port congestion, and GETF's schedule of it: as on the whole 330M, each attention segment
    keeps one V100 busy all its span, and no move of the critical-chain descent shortens it."""
    w = gpt3(None, layers=2, hidden=1024, heads=16, seq_len=2048, cluster="intra-server")
    problem = Problem(w.graph, w.cluster, Makespan(), [Memory(), Congestion("port")])
    return problem, run("getf", problem.graph, problem.cluster, model=problem.cost_model())


def _segment(problem, placement):
    """The largest segment of ``placement`` (an attention block)."""
    state = ScheduleState(problem.graph, problem.cluster, problem.cost_model())
    parts = segment_ls.segments(problem.graph, placement.assign, _start_order(problem, placement), state.unit)
    return max(parts, key=lambda p: p.graph.n)


def _start_order(problem, placement):
    g = problem.graph
    return sorted(range(g.n), key=lambda v: (placement.schedule.start[v], int(g.rank[v])))


def test_the_search_by_segments_gets_below_getf_where_its_descent_alone_finds_nothing(attention):
    """Without the annealing the search by segments stalls in its first round with no segment shortened (and
    returns no candidate); with it, GETF's attention segment is shortened and the whole graph with it."""
    problem, getf = attention
    g, c, model = problem.graph, problem.cluster, problem.cost_model()
    state = ScheduleState(g, c, model)
    new, order, info = segment_ls.improve_segments(g, c, model, getf.placement.assign,
                                                   _start_order(problem, getf.placement), time.perf_counter() + 20.0,
                                                   state.unit)
    assert info["annealed"] > 0 and info["improved"] == 1 and new is not None
    makespan, _ = state.schedule(new, order)
    assert makespan[0] < getf.objective - 0.5 * info["segment_gain"]


def test_schedule_ls_from_getf_anneals_and_stays_valid(attention):
    problem, getf = attention
    found = run("schedule-ls", problem.graph, problem.cluster, model=problem.cost_model(), start=getf.placement,
                time_limit=12.0)
    assert found.info["segments"]["annealed"] > 0
    assert found.objective < getf.objective
    assert problem.evaluate(found.placement).objective == pytest.approx(found.objective)
    assert not problem.violations(found.placement)


def test_annealing_shortens_getfs_attention_segment_and_is_deterministic(attention):
    problem, getf = attention
    seg = _segment(problem, getf.placement)
    local = getf.placement.assign[seg.ops]
    runs = [segment_anneal.anneal(seg.graph, seg.movable, problem.cluster, problem.cost_model(), local,
                                  list(range(seg.graph.n)), time.perf_counter() + 120.0, seed=3, steps=1500)
            for _ in range(2)]
    (devices, order, span, first, steps), again = runs
    assert steps == 1501
    assert span < first * (1 - 2e-3)
    assert np.array_equal(devices, again[0]) and order == again[1] and span == again[2]
    assert np.array_equal(devices[~seg.movable], local[~seg.movable])  # held nodes stay
    state = ScheduleState(seg.graph, problem.cluster, problem.cost_model(), hard=False)
    assert state.schedule(devices, order)[0][0] == pytest.approx(span)  # the order given back schedules it


def test_annealing_never_returns_a_longer_span(attention):
    problem, getf = attention
    seg = _segment(problem, getf.placement)
    local = getf.placement.assign[seg.ops]
    _, _, span, first, steps = segment_anneal.anneal(seg.graph, seg.movable, problem.cluster, problem.cost_model(),
                                                     local, list(range(seg.graph.n)), time.perf_counter() + 60.0,
                                                     seed=0, steps=30)
    assert steps <= 31 and span <= first


def test_layers_whose_times_differ_share_one_shape_and_their_schedules():
    """Two layers whose op times differ (profiling noise) are two searches but one shape: a schedule of the first,
    transplanted, puts each op of the second where its counterpart ran, in the counterpart's place of the order."""
    w = gpt3(None, layers=2, hidden=256, heads=4, seq_len=256, cluster="intra-server")
    g0 = w.graph
    ops = [op.model_copy(update={"work": {k: t * (1.0 + 0.05 * np.sin(i)) for k, t in op.work.items()}})
           for i, op in enumerate(g0.ops)]
    g = Graph(ops, [(g0.names[u], g0.names[v]) for u, v in zip(g0.src, g0.dst)], name="noisy")
    state = ScheduleState(g, w.cluster, CostModel.named("makespan"))
    assign = np.zeros(g.n, dtype=np.int64)
    parts = sorted((p for p in segment_ls.segments(g, assign, g.topo.tolist(), state.unit) if p.graph.n > 20),
                   key=lambda p: int(p.ops[-1]))
    one, two = parts[:2]
    assert one.key != two.key
    canon = [segment_anneal.canonical(p.graph, p.ops, p.fed, g.rank) for p in (one, two)]
    assert segment_anneal.shape(one.graph, canon[0], one.movable, assign[one.ops]) == \
        segment_anneal.shape(two.graph, canon[1], two.movable, assign[two.ops])
    devices = np.where(one.movable, np.arange(one.graph.n) % 4, 0)
    order = one.graph.topo.tolist()
    moved, moved_order = segment_anneal.transplant(devices, order, canon[0], canon[1])
    name = {two.graph.names[k].replace("L01", "L00"): k for k in range(two.graph.n)}
    for k in range(one.graph.n):
        assert moved[name[one.graph.names[k]]] == devices[k]
    assert [two.graph.names[k].replace("L01", "L00") for k in moved_order] == [one.graph.names[k] for k in order]
    position = {v: i for i, v in enumerate(moved_order)}
    assert all(position[u] < position[v] for u, v in zip(two.graph.src.tolist(), two.graph.dst.tolist()))
