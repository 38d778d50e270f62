"""CPOP and the critical-chain local search (``cpop``, ``schedule-ls``): valid schedules, never worse than the
start, better than list scheduling where the chain can be shortened."""
from __future__ import annotations

import time

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.schedule_ls import downward_rank
from placement_dsl.heuristics.schedule_moves import ScheduleState, critical_chain
from placement_dsl.placement import Placement
from placement_dsl.schedule import check_schedule

MODEL = CostModel.named("makespan")


def fork(width: int = 4) -> tuple[Graph, Cluster]:
    """``a -> b_i -> z``: a fast device and a slow one, cheap links; the branches should spread."""
    ops = [Op(name="a", work={"fast": 1.0, "slow": 2.0}, out_bytes=1.0),
           *(Op(name=f"b{i}", work={"fast": 2.0, "slow": 3.0}, out_bytes=1.0) for i in range(width)),
           Op(name="z", work={"fast": 1.0, "slow": 2.0})]
    edges = [("a", f"b{i}") for i in range(width)] + [(f"b{i}", "z") for i in range(width)]
    cluster = Cluster([Device(name="f", kind="fast"), Device(name="s", kind="slow")],
                      [Link(src="f", dst="s", bandwidth=10.0), Link(src="s", dst="f", bandwidth=10.0)])
    return Graph(ops, edges, name="fork"), cluster


def test_cpop_keeps_the_critical_path_on_its_fastest_device():
    g, c = fork()
    r = run("cpop", g, c, model=MODEL)
    assert r.info["path_device"] == "f"
    assert r.placement.assign[g.index["a"]] == r.placement.assign[g.index["z"]] == 0
    assert 1 <= r.info["path_ops"] <= 3  # one branch, not every equal branch


def test_downward_rank_is_the_longest_path_into_an_op():
    g, _ = fork(2)
    down = downward_rank(g, np.ones(g.n), np.zeros(g.m))
    assert down[g.index["a"]] == 0.0 and down[g.index["z"]] == 2.0


def test_the_critical_chain_follows_inputs_and_device_waits():
    g, c = fork()
    state = ScheduleState(g, c, MODEL)
    _, b = state.schedule(np.zeros(g.n, dtype=np.int64), g.topo.tolist())
    chain, blockers = critical_chain(state, b)
    assert chain[0] == g.index["z"] and chain[-1] == g.index["a"]
    assert len(blockers) == 3  # on one device the branches wait for each other


def test_local_search_spreads_the_branches_and_never_gets_worse():
    g, c = fork()
    single = Placement(g, c, np.zeros(g.n, dtype=np.int64))
    start = run("schedule-ls", g, c, model=MODEL, start=single, time_limit=0.0)
    assert start.objective == pytest.approx(10.0)  # 1 + 4 * 2 + 1 on one device
    r = run("schedule-ls", g, c, model=MODEL, start=single, time_limit=5.0)
    assert r.objective < 10.0 and r.info["moves"] >= 1 and len(set(r.placement.assign.tolist())) == 2
    assert check_schedule(r.placement, r.placement.schedule, "port") == (pytest.approx(r.objective), [])


def test_googlenet_local_search_beats_list_scheduling(shared_data):
    from placement_dsl.io import moirai

    pytest.importorskip("xlrd")
    w = moirai.load(shared_data / "moirai" / "GoogLeNet.xls")
    listed = run("list", w.graph, w.cluster, model=MODEL)
    r = run("schedule-ls", w.graph, w.cluster, model=MODEL, start="cpop", time_limit=5.0)
    assert r.objective < listed.objective and r.info["moves"] >= 1
    assert 0.8 < r.bound < r.objective  # the segment bound: 0.8209 ms


def test_a_stopped_search_on_a_large_graph_keeps_its_time_limit():
    """Past its limit the search computes no closed-form bound on a graph of more than BOUND_OPS ops: on a 1,137-op
    transformer it took 3 s after a 1 s limit (20 s for an "auto" start's 1 s share with the other searches)."""
    from placement_dsl.zoo import gpt3

    w = gpt3(None, layers=9, hidden=512, heads=8, seq_len=512, cluster="inter-server")
    single = Placement(w.graph, w.cluster, np.zeros(w.graph.n, dtype=np.int64))
    t0 = time.perf_counter()
    r = run("schedule-ls", w.graph, w.cluster, model=MODEL, start=single, time_limit=1.0)
    assert time.perf_counter() - t0 < 2.0 and r.info.get("stopped") and r.bound is None


def blocks(count: int, width: int = 4) -> tuple[Graph, Cluster]:
    """``count`` forks of :func:`fork` one after another, each joined by a cut op: identical segments."""
    ops, edges = [Op(name="c0", work={"fast": 1.0, "slow": 2.0}, out_bytes=1.0)], []
    for k in range(count):
        for i in range(width):
            ops.append(Op(name=f"b{k}_{i}", work={"fast": 2.0, "slow": 3.0}, out_bytes=1.0))
            edges += [(f"c{k}", f"b{k}_{i}"), (f"b{k}_{i}", f"c{k + 1}")]
        ops.append(Op(name=f"c{k + 1}", work={"fast": 1.0, "slow": 2.0}, out_bytes=1.0))
    return Graph(ops, edges, name="blocks"), fork()[1]


def test_identical_segments_are_searched_once_and_their_moves_compose():
    from placement_dsl.heuristics.segment_ls import improve_segments

    g, c = blocks(3)
    state = ScheduleState(g, c, MODEL)
    single = np.zeros(g.n, dtype=np.int64)
    before, _ = state.schedule(single, g.topo.tolist())
    assign, order, info = improve_segments(g, c, MODEL, single, g.topo.tolist(), time.perf_counter() + 5.0,
                                           state.unit)
    assert info["segments"] == 3 and info["distinct"] == 1 and info["improved"] == 1
    cuts = [g.index[f"c{k}"] for k in range(4)]
    assert (assign[cuts] == 0).all() and (assign == 1).sum() == 3 * int((assign[:6] == 1).sum()) > 0
    after, b = state.schedule(assign, order)
    assert after[0] < before[0] - 1.0  # each segment's span shrinks: 3 x (4 x 2) on one device before
    p = Placement(g, c, assign, schedule=b.schedule())
    assert check_schedule(p, p.schedule, "port") == (pytest.approx(after[0]), [])
