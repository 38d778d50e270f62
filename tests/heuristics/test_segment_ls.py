"""The search segment by segment (:mod:`placement_dsl.heuristics.segment_ls`): it runs in rounds and ends when its
segments stall, handing the rest of its time back; a segment it shortens is kept in the whole graph's candidate."""
from __future__ import annotations

import time

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run, segment_ls
from placement_dsl.heuristics.schedule_moves import ScheduleState
from placement_dsl.placement import Placement

MODEL = CostModel.named("makespan")


def blocks(count: int, slow: float, width: int = 4) -> tuple[Graph, Cluster]:
    """``count`` forks ``c_k -> b_k_i -> c_k+1`` one after another (identical segments between the cut ops ``c``),
    on a fast device and one ``slow`` times slower per op (2 on the fast one)."""
    ops, edges = [Op(name="c0", work={"fast": 1.0, "slow": slow / 2}, out_bytes=1.0)], []
    for k in range(count):
        for i in range(width):
            ops.append(Op(name=f"b{k}_{i}", work={"fast": 2.0, "slow": slow}, out_bytes=1.0))
            edges += [(f"c{k}", f"b{k}_{i}"), (f"b{k}_{i}", f"c{k + 1}")]
        ops.append(Op(name=f"c{k + 1}", work={"fast": 1.0, "slow": slow / 2}, out_bytes=1.0))
    cluster = Cluster([Device(name="f", kind="fast"), Device(name="s", kind="slow")],
                      [Link(src="f", dst="s", bandwidth=10.0), Link(src="s", dst="f", bandwidth=10.0)])
    return Graph(ops, edges, name="blocks"), cluster


def test_where_no_segment_can_improve_the_search_ends_after_one_round():
    """The slow device runs an op in 100 where the fast one waits at most 8 for all four: one device is optimal in
    every segment, and the search stops after its first round, well within the candidates of one round per segment,
    however long it was given (it used to search each segment until its kicks went stale)."""
    g, c = blocks(3, slow=100.0)
    state = ScheduleState(g, c, MODEL)
    single = np.zeros(g.n, dtype=np.int64)
    new, order, info = segment_ls.improve_segments(g, c, MODEL, single, g.topo.tolist(), time.perf_counter() + 60.0,
                                                   state.unit)
    assert new is None and order is None
    assert info["distinct"] == 1 and info["rounds"] == 1 and info["stalled"] and info["improved"] == 0
    assert info["candidates"] <= segment_ls.ROUND


def test_a_shortened_segment_is_kept_and_the_search_stops_once_it_stalls():
    g, c = blocks(3, slow=3.0)
    state = ScheduleState(g, c, MODEL)
    single = np.zeros(g.n, dtype=np.int64)
    before, _ = state.schedule(single, g.topo.tolist())
    new, order, info = segment_ls.improve_segments(g, c, MODEL, single, g.topo.tolist(), time.perf_counter() + 60.0,
                                                   state.unit)
    assert info["improved"] == 1 and info["stalled"] and 2 <= info["rounds"] <= 3
    assert info["candidates"] <= info["rounds"] * segment_ls.ROUND
    after, _ = state.schedule(new, order)
    assert after[0] < before[0] - 1.0 and (new == 1).sum() == 3 * int((new[:6] == 1).sum()) > 0


def test_schedule_ls_keeps_the_segments_candidate_and_reports_the_rounds():
    g, c = blocks(3, slow=3.0)
    single = Placement(g, c, np.zeros(g.n, dtype=np.int64))
    r = run("schedule-ls", g, c, model=MODEL, start=single, time_limit=30.0)
    done = r.info["segments"]
    assert done["improved"] == 1 and done["stalled"] and done["seconds"] < 15.0  # not half of its 30 s
    assert r.objective < 3 * 8 + 4 - 1.0 and r.info["moves"] >= 1


@pytest.mark.parametrize("slow", [3.0, 100.0])
def test_the_search_by_segments_is_deterministic(slow):
    g, c = blocks(3, slow=slow)
    state = ScheduleState(g, c, MODEL)
    single = np.zeros(g.n, dtype=np.int64)
    one, two = (segment_ls.improve_segments(g, c, MODEL, single, g.topo.tolist(), time.perf_counter() + 60.0,
                                            state.unit) for _ in range(2))
    assert one[2] == two[2] and (one[0] is None) == (two[0] is None)
