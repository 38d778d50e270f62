"""The pipeline planners at scale: PipeDream's planner reads its clock inside its level and keeps one row of its
tables on one server; the pipeline DP over segments stops at its deadline with the planner's configuration."""
from __future__ import annotations

import importlib
import time
import tracemalloc

import numpy as np
import pytest

from placement_dsl import testing
from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel
from placement_dsl.heuristics import jit, run
from placement_dsl.heuristics.base import TimeLimitReached
from placement_dsl.heuristics.pipedream_planner import NO_TABLE, level
from placement_dsl.heuristics.pipeline_dp import plan


def test_the_planner_s_level_stops_at_its_deadline():
    n = 50
    prefix, wp, cut = np.arange(n + 1, dtype=np.float64), np.zeros(n + 1), np.ones(n)
    lefts = np.zeros(1, np.int64)
    *_, stopped = level(NO_TABLE, prefix, wp, cut, 1.0, 4, lefts, 1, 0.0)  # a deadline long past
    assert stopped
    A, _, _, stopped = level(NO_TABLE, prefix, wp, cut, 1.0, 4, lefts, 1, np.inf)
    assert not stopped and A.shape == (1, n, 5)
    assert A[0, n - 1, 4] == pytest.approx(n / 4 + 2 * 1.0, rel=0.2)  # four stages of ~n/4, links included


def test_the_planner_on_one_server_keeps_tables_linear_in_the_chain():
    """One server needs row ``i = 0`` of ``A(i -> j, m)`` only: ``n x (M + 1)`` entries, not ``n x n x (M + 1)``
    (1.8 GB at a 2,000-op GPT-3 on 16 stages)."""
    g = testing.chain_graph([1.0 + (i % 7) for i in range(300)], out_bytes=0.5)
    with jit.interpreted():  # numpy's tables are traced in Python
        tracemalloc.start()
        try:
            r = run("pipedream-planner", g, Cluster.stages(4))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert r.placement.assign.max() == 3
    assert peak < 3 * 2**20, f"{peak / 2**20:.1f} MiB traced"


def test_the_pipeline_dp_over_segments_reads_its_clock():
    g = testing.chain_graph([1.0, 2.0, 3.0, 2.0, 1.0], out_bytes=0.5)
    with pytest.raises(TimeLimitReached):
        plan(g, Cluster.stages(2), CostModel(), deadline=time.monotonic() - 1.0)


def test_pipeline_stopped_in_its_dp_answers_the_planner_s_configuration(monkeypatch):
    def stopped(*args, **kwargs):
        raise TimeLimitReached("pipeline: the time limit passed in the DP over segments")

    g = testing.chain_graph([1.0, 2.0, 3.0, 2.0, 1.0], out_bytes=0.5)
    monkeypatch.setattr(importlib.import_module("placement_dsl.heuristics.pipeline"), "plan", stopped)
    r = run("pipeline", g, Cluster.stages(2), time_limit=30.0)
    assert r.info["stopped"] == "time limit" and "DP over segments" in r.info["stopped_in"]
    assert r.info["planner_estimate"] > 0  # PipeDream's planner's configuration
    r = run("pipeline", g, Cluster.stages(2), time_limit=30.0, upper_bound=100.0)
    assert r.info["stopped"] == "time limit" and "fallback" in r.info


def test_the_chain_s_consumer_positions_are_each_op_s_distinct_other_positions():
    """The pipeline planners' set-up lists, per op with output bytes, the other positions consuming it, in whole-array
    steps; the same as a set difference op by op (which took seconds at 2,000 ops)."""
    from placement_dsl.heuristics.pipeline_dp import consumer_positions

    rng = np.random.default_rng(5)
    for _ in range(30):
        g = testing.random_graph(rng, int(rng.integers(3, 40)), density=0.35)
        pos = rng.integers(0, max(1, g.n // 3), g.n)
        kept, flat, sizes = consumer_positions(g, pos, int(pos.max()) + 1)
        want = {int(u): np.setdiff1d(pos[g.successors(u)], [pos[u]]) for u in np.flatnonzero(g.out_bytes > 0)}
        want = {u: c for u, c in want.items() if c.size}
        assert kept.tolist() == sorted(want) and sizes.tolist() == [want[u].size for u in sorted(want)]
        assert flat.tolist() == [int(p) for u in sorted(want) for p in want[u]]
