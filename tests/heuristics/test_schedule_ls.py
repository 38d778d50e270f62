"""CPOP and the critical-chain local search (``cpop``, ``schedule-ls``): valid schedules, never worse than the
start, better than list scheduling where the chain can be shortened."""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.schedule_ls import ScheduleState, critical_chain, downward_rank
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
