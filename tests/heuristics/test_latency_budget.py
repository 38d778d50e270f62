"""latency-best under a time limit: every candidate runs under the call's clock, stopped by force at it, so a
candidate that checks no clock cannot hold the call; the answer is the best valid candidate scored by then."""
from __future__ import annotations

import time

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import latency, run

LATENCY_MODEL = CostModel.named("latency")
SLOW = 30.0  # seconds a stubbed candidate takes, far past the limits below


def chain(n: int = 12) -> Graph:
    ops = [Op(name=f"v{i}", work=float(1 + i % 3), out_bytes=1.0) for i in range(n)]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])


def slowed(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The baseline ``method`` of latency-best made to take :data:`SLOW` seconds, checking no clock."""
    real = latency.run_method

    def stub(name, *args, **kwargs):
        if name == method:
            time.sleep(SLOW)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(latency, "run_method", stub)


def test_a_candidate_that_checks_no_clock_is_stopped_and_the_earlier_ones_answer(monkeypatch):
    slowed("dp", monkeypatch)
    g, cluster = chain(), Cluster.accelerators(2, cpus=1)
    res = run("latency-best", g, cluster, model=LATENCY_MODEL, time_limit=2.0)
    methods = [c["method"] for c in res.info["candidates"]]
    assert "greedy" in methods and "dp" not in methods  # the DP was stopped; greedy's split was kept
    assert res.info["stopped"] == "time limit"
    assert evaluate(res.placement, LATENCY_MODEL).valid


def test_no_candidate_by_the_limit_falls_back_to_a_split_built_in_linear_time(monkeypatch):
    slowed("greedy", monkeypatch)
    g, cluster = chain(), Cluster.accelerators(2, cpus=1)
    res = run("latency-best", g, cluster, model=LATENCY_MODEL, time_limit=1.0)
    assert res.info["stopped"] == "time limit" and "fallback" in res.info
    assert evaluate(res.placement, LATENCY_MODEL).valid


def test_where_greedys_split_cannot_be_scored_in_time_the_cheapest_split_goes_first(monkeypatch):
    slowed("greedy", monkeypatch)
    monkeypatch.setattr(latency, "fallback_seconds",  # greedy's split is estimated past the limit, nothing else is
                        lambda graph, cluster, split="balanced", checks=0: 1e6 if split == "greedy" else 0.0)
    g, cluster = chain(), Cluster.accelerators(2, cpus=1)
    res = run("latency-best", g, cluster, model=LATENCY_MODEL, time_limit=2.0)
    methods = [c["method"] for c in res.info["candidates"]]
    assert methods[0].startswith("fallback:") and "greedy" not in methods
    assert res.info["stopped"] == "time limit" and evaluate(res.placement, LATENCY_MODEL).valid
