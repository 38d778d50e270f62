"""The chain split with the accelerators in other orders (heuristics/latency_chain.chain_orders): on heterogeneous
accelerators with links the order decides which accelerator holds each interval."""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl import Placement
from placement_dsl.errors import SpecError
from placement_dsl.heuristics import latency as latency_module
from placement_dsl.heuristics import run
from placement_dsl.heuristics.latency import DP_SHARE
from placement_dsl.heuristics.latency_chain import chain_orders, chain_split
from placement_dsl.presets import problem_for_method
from tests.solve.test_contiguous_makespan_start import _workload


@pytest.fixture(scope="module")
def problem():
    return problem_for_method(_workload(), objective="latency", method="ip")


def test_each_order_is_a_valid_contiguous_split_and_the_orders_differ(problem):
    g, c, m = problem.graph, problem.cluster, problem.cost_model()
    found = chain_orders(g, c, m, seed=3, count=5)
    assert len(found) == 5 and len({label for label, _ in found}) == 5
    assert "chain[0, 1, 2, 3]" not in {label for label, _ in found}  # the cluster's order is the chain split's own
    for _, assign in found:
        assert not problem.violations(Placement(g, c, assign))
    again = chain_orders(g, c, m, seed=3, count=5)
    assert [label for label, _ in again] == [label for label, _ in found]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(again, found, strict=True))
    assert len(chain_orders(g, c, m, seed=1, count=100)) == 23  # 4! orders but the cluster's


def test_an_order_names_the_cluster_accelerators(problem):
    g, c, m = problem.graph, problem.cluster, problem.cost_model()
    with pytest.raises(SpecError, match="not an order of the cluster's accelerators"):
        chain_split(g, c, m, accelerators=np.array([0, 1, 2]))
    first = chain_split(g, c, m, accelerators=np.array([0, 1, 2, 3]))
    free = chain_split(g, c, m)  # over the links' routes the chain weighs every order, the cluster's among them
    assert not problem.violations(Placement(g, c, first)) and not problem.violations(Placement(g, c, free))
    assert problem.evaluate(Placement(g, c, free)).objective < problem.evaluate(Placement(g, c, first)).objective


def test_the_max_load_splits_of_latency_best_take_a_share_of_its_time(problem, monkeypatch):
    """Given all the time left, DPL on 2,000 ops took 6.9 s of a 15 s call at load 7, and the search from the best
    start had what was left."""
    limits: dict[str, float] = {}
    real = latency_module.run_method

    def recording(method, *args, **kwargs):
        if method in ("dp", "dpl"):
            limits[method] = kwargs.get("time_limit")
        return real(method, *args, **kwargs)
    monkeypatch.setattr(latency_module, "run_method", recording)
    monkeypatch.setattr(latency_module, "can_fork", lambda: False)  # its candidates here, where they are recorded
    run("latency-best", problem.graph, problem.cluster, model=problem.cost_model(), time_limit=4.0)
    assert limits and all(limit <= DP_SHARE * 4.0 + 1e-9 for limit in limits.values())


def test_a_search_with_no_time_for_its_set_up_answers_its_best_start_unscored_by_the_rest(problem):
    """On linked devices the latency search is schedule-ls from the best start, which scored every start and set
    itself up before it read its clock: within latency-best at load 8 on 2,000 ops six scorings took 1 s past its
    limit, and the race it ran in ended first and lost the chain split it had found."""
    g, c, m = problem.graph, problem.cluster, problem.cost_model()
    starts = [(label, assign) for label, assign in chain_orders(g, c, m, seed=0, count=5)]
    found = run("latency-local-search", g, c, model=m, starts=starts, time_limit=0.0)
    assert found.info["search"].startswith("none from") and len(found.info["starts"]) == 1
    assert found.info.get("stopped") and not problem.violations(found.placement)
    roomy = run("latency-local-search", g, c, model=m, starts=starts, time_limit=2.0)
    assert len(roomy.info["starts"]) == 5 and roomy.info["search"].startswith("schedule-ls")
