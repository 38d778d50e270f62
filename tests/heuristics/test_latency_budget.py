"""latency-best under a time limit: every candidate runs under the call's clock, stopped by force at it, so a
candidate that checks no clock cannot hold the call; the answer is the best valid candidate scored by then."""
from __future__ import annotations

import time

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import fallback, latency, run

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


def test_no_candidate_in_time_answers_the_one_device_closed_form(monkeypatch):
    """Where the estimate says no split can be built and scored in time (a 15,000-task sheet under load), the answer
    is every op on the device that holds the graph soonest, scored by the closed form, stopped by the time limit."""
    monkeypatch.setattr(fallback, "EVALUATE_PER_OP", 1e3)  # every evaluation estimated far past the limit
    for cluster in (Cluster.accelerators(2, cpus=1), Cluster.accelerators(0, cpus=1)):
        g = chain()
        res = run("latency-best", g, cluster, model=LATENCY_MODEL, time_limit=1.0)
        ev = evaluate(res.placement, LATENCY_MODEL)
        assert ev.valid and res.objective == pytest.approx(ev.objective)
        assert len(set(res.placement.assign.tolist())) == 1 and res.info["stopped"] == "time limit"


def test_each_candidate_is_scored_once(monkeypatch):
    """greedy's candidate and the local search's come scored by the run that found them; only the splits found as
    bare assignments (one device, chain, spine, DP, DPL) are scored by latency-best, and the search scores its own
    answer."""
    calls = []
    real = latency.evaluate
    monkeypatch.setattr(latency, "evaluate", lambda *a, **k: calls.append(1) or real(*a, **k))
    res = latency.latency_best(chain(), Cluster.accelerators(2, cpus=1), model=LATENCY_MODEL)
    bare = [c for c in res.info["candidates"] if c["method"] in ("one-device", "chain", "spine", "dp", "dpl")
            and "latency" in c]
    assert len(calls) <= len(bare) + 1


def test_the_max_load_start_leaves_its_fallback_and_the_descents_their_time(monkeypatch):
    """The latency local search's DPL start runs to the limit it is given and then builds its fallback (stubbed: 0.5 s
    past it, the DP above its ideals as on 20,000 ops): given all the time left it ended the search past its limit."""
    from placement_dsl.errors import SpecError
    from placement_dsl.heuristics import latency_starts

    real = latency_starts.run_method

    def stub(name, *args, time_limit=None, **kwargs):
        if name == "dp":
            raise SpecError("dp: more ideals than max_ideals")
        if name == "dpl":
            time.sleep(time_limit + 0.5)
        return real(name, *args, time_limit=time_limit, **kwargs)
    monkeypatch.setattr(latency_starts, "run_method", stub)
    g, cluster = chain(), Cluster.accelerators(2, cpus=1)
    began = time.monotonic()
    res = run("latency-local-search", g, cluster, model=LATENCY_MODEL, time_limit=3.0)
    assert time.monotonic() - began < 3.25
    assert [s["start"] for s in res.info["starts"]] == ["greedy", "dpl"]  # both starts descended
    assert evaluate(res.placement, LATENCY_MODEL).valid
