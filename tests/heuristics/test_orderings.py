"""Order search for SliceGraph: random-T, BRKGA (Archer Alg. 2), MLA."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from placement_dsl.bounds.simple import simple_lower_bound
from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.orderings import BrkgaConfig, brkga, topo_keys
from placement_dsl.heuristics.slicegraph import Slicer, kahn

MODEL = CostModel.named("bottleneck")


def branchy(n: int = 40, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    ops = [Op(name=f"v{i}", work=float(rng.integers(1, 20)), out_bytes=float(rng.integers(1, 30)),
              param_bytes=float(rng.integers(0, 10))) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, min(n, i + 8)) if rng.random() < 0.25]
    return Graph(ops, edges)


def test_topo_keys_reproduce_the_topological_order():
    g = branchy()
    assert kahn(g, topo_keys(g)).tolist() == g.topo.tolist()


@pytest.mark.parametrize("method", ["random", "brkga", "mla", "mla-weighted"])
def test_methods_are_deterministic_and_checked_by_the_cost_model(method):
    g, c = branchy(), Cluster.stages(4, memory=60.0)
    a = run(method, g, c, model=MODEL, seed=7, evaluations=150)
    b = run(method, g, c, model=MODEL, seed=7, evaluations=150)
    assert np.array_equal(a.placement.assign, b.placement.assign) and a.objective == b.objective
    assert a.evaluations == 150
    assert a.objective >= simple_lower_bound(g, c) - 1e-9
    assert evaluate(a.placement, MODEL).objective == pytest.approx(a.objective)


def test_brkga_is_never_worse_than_its_initial_population():
    g, c = branchy(60, seed=2), Cluster.stages(6, memory=80.0)
    slicer = Slicer(g, c, MODEL)
    rng = np.random.default_rng(11)
    initial = rng.random((5, g.n))
    initial_values = [slicer.solve(slicer.order(x))[0] for x in initial]
    result = brkga(g, c, model=MODEL, seed=3, evaluations=400, population=20, initial=initial)
    assert result.objective <= min(initial_values) + 1e-9
    history = result.info["history"]
    assert history[0] == pytest.approx(min(initial_values + [history[0]]))
    assert all(b <= a for a, b in itertools.pairwise(history))


def test_brkga_improves_on_its_seed_and_random_finds_the_lemma_b2_optimum():
    g, c = branchy(50, seed=5), Cluster.stages(5)
    seeded = brkga(g, c, model=MODEL, seed=0, evaluations=20, population=20)  # the first generation only
    searched = brkga(g, c, model=MODEL, seed=0, evaluations=600, population=20)
    assert searched.objective < seeded.objective - 1e-9  # the evolution, not the seeding, finds something better
    # Lemma B.2 graph: heavy i with light k+i, only (1, k+1) joined by a huge tensor
    k = 3
    ops = [Op(name=f"h{i}", work=0.99, out_bytes=30.0 if i == 1 else 0) for i in range(1, k + 1)]
    ops += [Op(name=f"l{i}", work=0.01) for i in range(k + 1, 2 * k + 1)]
    lb2 = Graph(ops, [("h1", f"l{k + 1}")])
    assert run("random", lb2, Cluster.stages(k), seed=0, evaluations=200).objective == pytest.approx(1.0)


def test_options_are_validated():
    with pytest.raises(SpecError, match="evaluations"):
        BrkgaConfig(evaluations=0)
    with pytest.raises(SpecError, match="rho"):
        BrkgaConfig(rho=0.2)
    with pytest.raises(SpecError, match="exceed"):
        BrkgaConfig(elite=0.7, mutants=0.5)
    g = branchy(10)
    with pytest.raises(SpecError, match="initial"):
        brkga(g, Cluster.stages(2), initial=np.zeros((2, 3)))


@pytest.mark.slow
def test_brkga_ten_thousand_evaluations_on_a_thousand_ops_stays_under_a_minute():
    g = branchy(1000, seed=9)
    result = run("brkga", g, Cluster.stages(16, memory=1000.0), model=MODEL, seed=0, evaluations=10_000)
    assert result.seconds < 60 and result.evaluations == 10_000


def test_brkga_on_a_training_graph_decodes_through_the_forward_projection(dnn_partitioning):
    from placement_dsl.io import load_workload

    w = load_workload(dnn_partitioning / "throughput-inputs/LayerGraphs/resnet50_training.json")
    sliced = run("slicegraph", w.graph, w.cluster)
    r = brkga(w.graph, w.cluster, seed=0, evaluations=200, population=20)
    assert r.placement.graph is w.graph
    assert r.objective <= sliced.objective + 1e-9
    assert r.objective <= 78.63 * 1.02  # Tarnawski Table 1, dp


def test_brkga_decodes_nothing_but_its_first_row_after_its_time_limit():
    # a whole first population past the limit could take minutes on a large graph: only the first row (the
    # graph's own order) is decoded
    g, c = branchy(50, seed=5), Cluster.stages(5)
    stopped = brkga(g, c, model=MODEL, seed=0, evaluations=600, population=20, time_limit=0.0)
    first = brkga(g, c, model=MODEL, seed=0, evaluations=1, population=20)  # the first row only
    assert stopped.evaluations == 1 and len(stopped.info["history"]) == 1 and stopped.objective == first.objective
    assert stopped.info["stopped"] == "time limit" and "stopped" not in first.info
    assert brkga(g, c, model=MODEL, seed=0, evaluations=600, population=20, time_limit=60).evaluations == 600
    with pytest.raises(SpecError, match=r"brkga: time_limit must be a number of seconds >= 0 or None, got -1"):
        brkga(g, c, model=MODEL, time_limit=-1)


@pytest.mark.parametrize("method", ["brkga", "random"])
def test_the_best_order_is_sliced_once_not_again_for_the_report_or_the_answer(method, monkeypatch):
    # one slicing of GPT-3's 20,111 ops onto 4 stages takes seconds: BRKGA sliced its best order again for each
    # generation's report and once more for its answer, whatever the time left (7.7 s past a 60 s limit)
    g, c = branchy(60, seed=2), Cluster.stages(6, memory=80.0)
    sliced = []
    real = Slicer.slice

    def counted(self, order, *args, **kwargs):
        sliced.append(order.tolist())
        return real(self, order, *args, **kwargs)

    monkeypatch.setattr(Slicer, "slice", counted)
    result = run(method, g, c, model=MODEL, seed=3, evaluations=120)
    assert len(sliced) == result.evaluations == 120
    assert result.info["order"].tolist() in sliced
    assert evaluate(result.placement, MODEL).objective == pytest.approx(result.objective)


@pytest.mark.parametrize("method", ["mla", "mla-weighted"])
def test_mla_leaves_its_final_slicing_time_within_the_limit(monkeypatch, method):
    """The arrangement search stops early enough for the best order's slicing (each slicing made to take 0.2 s, and
    cut, as Slicer.solve says, when its deadline passes first): searching to the limit, the last slicing was cut and
    the work-balanced split returned."""
    import time

    real = Slicer.solve

    def slow(self, order, cutoff=np.inf, boundaries=None, deadline=None):
        time.sleep(0.2)
        if deadline is not None and time.monotonic() >= deadline:
            return np.nan, self.balanced_bounds(order)
        return real(self, order, cutoff, boundaries, deadline)
    monkeypatch.setattr(Slicer, "solve", slow)
    g, c = branchy(40, seed=3), Cluster.stages(4, memory=60.0)
    began = time.monotonic()
    result = run(method, g, c, model=MODEL, seed=1, evaluations=10**7, time_limit=2.0)
    assert time.monotonic() - began < 2.5
    assert "dp_value" in result.info and "stopped_in" not in result.info, result.info
    assert result.objective == pytest.approx(result.info["dp_value"])
    assert result.evaluations > 1  # the search ran
