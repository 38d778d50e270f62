"""latency-best where the cluster's devices run one op at a time (links and routes, MOIRAI §III): the list schedulers
(HEFT, CPOP) are among its candidates, their own schedules kept, so it answers no worse than HEFT; on invocation
clusters and under contiguity they are not offered (their interleaved splits are invalid there). Before, on a
generated DAG of 2,000 ops with links, latency-best answered 2,180.0 (the chain split) and latency-lns 731.0
(HEFT's schedule, its start)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.evaluate import CostModel, evaluate, execution
from placement_dsl.graph import Graph
from placement_dsl.heuristics import latency_passes, run
from placement_dsl.heuristics.latency_passes import applies
from placement_dsl.placement import Placement

from ..solve.sheets import recent_dag
from .test_latency_chain_routes import hetero_line

LATENCY = CostModel.named("latency")


def _linked(accelerators: int = 4) -> Cluster:
    """Accelerators of unlike speeds on a ring of links, a CPU host linked to the first: a one-op-at-a-time cluster."""
    names = [f"g{k}" for k in range(accelerators)]
    devices = [Device(name=n, memory=1e4, speed=(1.0, 1.5, 0.7, 1.2)[k % 4], bandwidth=8.0)
               for k, n in enumerate(names)] + [Device(name="h", kind="cpu", host=True)]
    pairs = list(zip(names, names[1:] + names[:1])) + [("g0", "h")]
    links = [Link(src=a, dst=b, bandwidth=8.0, latency=0.01) for x, y in pairs for a, b in ((x, y), (y, x))]
    return Cluster(devices, links)


def _layered(seed: int, n: int = 150) -> Graph:
    return recent_dag(n, seed, "v", (1.0, 50.0), (0.1, 4.0), f"layered{seed}")


@pytest.mark.parametrize("seed", [0, 1])
def test_latency_best_offers_the_list_schedulers_and_answers_no_worse_than_heft(seed):
    g, cluster = _layered(seed), _linked()
    assert execution(cluster) == "ops"
    heft = run("list", g, cluster, model=LATENCY)
    found = run("latency-best", g, cluster, model=LATENCY, time_limit=8.0)
    rows = {c["method"]: c for c in found.info["candidates"]}
    assert {"list", "cpop"} <= set(rows)
    assert rows["list"]["latency"] == pytest.approx(heft.objective)  # scored with its own schedule
    assert found.objective <= heft.objective * (1 + 1e-9)
    assert evaluate(found.placement, LATENCY).objective == pytest.approx(found.objective)


def test_the_list_schedulers_are_not_offered_on_invocations_or_under_contiguity():
    invocations = Cluster.accelerators(4, memory=1e4, cpus=1)
    assert execution(invocations) == "invocations" and not applies(invocations, LATENCY)
    assert applies(_linked(), LATENCY)
    assert not applies(_linked(), replace(LATENCY, require=LATENCY.require | {"contiguous"}))
    assert not applies(_linked(), replace(LATENCY, max_subgraphs=1))
    found = run("latency-best", _layered(0, 40), invocations, model=LATENCY, time_limit=5.0)
    assert not {"list", "cpop"} & {c["method"] for c in found.info["candidates"]}


def test_a_pass_that_does_not_fit_the_time_left_is_not_run_and_the_others_are(monkeypatch):
    monkeypatch.setattr(latency_passes, "pass_wall", lambda graph, cluster, methods: dict.fromkeys(methods, 1e6))
    found = run("latency-best", _layered(0, 60), _linked(), model=LATENCY, time_limit=5.0)
    rows = {c["method"]: c for c in found.info["candidates"]}
    assert "estimated" in rows["list"]["error"] and "latency" in rows["greedy"]
    assert evaluate(found.placement, LATENCY).valid


def test_the_search_descends_from_more_than_the_best_start():
    """A transformer onto accelerators of speeds 2, 1 and 0.5, too small to hold it alone, with links and a host:
    the whole graph on the host is the best start (1.557; every max-load split is it) and a local
    optimum of schedule-ls, which searched from it alone. From HEFT's split (3.271) it reaches 1.218: the search now
    descends from the next best different starts too, and keeps the best."""
    problem = hetero_line()
    g, cluster = problem.graph, problem.cluster
    host = np.full(g.n, 3)
    heft = run("list", g, cluster, model=LATENCY).placement.assign
    assert evaluate(Placement(g, cluster, host), LATENCY).objective < evaluate(Placement(g, cluster, heft),
                                                                               LATENCY).objective
    found = run("latency-local-search", g, cluster, model=LATENCY, starts=[("host", host), ("list", heft)])
    assert found.valid and found.objective < 0.8 * evaluate(Placement(g, cluster, host), LATENCY).objective
