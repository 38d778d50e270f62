"""The packing bound (bounds/packing.py) against brute force: its bin search, and the bound on tiny graphs."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds.packing import FEASIBLE, INFEASIBLE, UNKNOWN, BinCompletion, cheap_bound, packing_bound
from placement_dsl.bounds.pigeonhole import pigeonhole_bound
from placement_dsl.bounds.simple import simple_lower_bound
from placement_dsl.cluster import Cluster
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Throughput
from placement_dsl.problem import Problem
from placement_dsl.testing import optimum


def layers(works: list[float], cpu_factor: float = 10.0, tensor: float = 0.0) -> Graph:
    ops = [Op(name=f"v{i}", work={"accelerator": w, "cpu": w * cpu_factor}, out_bytes=tensor)
           for i, w in enumerate(works)]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(len(works) - 1)])


def makespan(w: list[float], K: int) -> float:
    """The least makespan of ``w`` on ``K`` machines, over every assignment."""
    return min(max(np.bincount(a, weights=w, minlength=K)) for a in itertools.product(range(K), repeat=len(w)))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from([1.0, 2.0, 3.0, 4.0, 5.0, 7.0]), min_size=1, max_size=7), st.integers(1, 3),
       st.sampled_from([0.9, 1.0, 1.1, 1.3]))
def test_bin_completion_decides_like_brute_force(w, K, scale):
    """Duplicates exercise the twin rule, scales around the optimum the maximal sets and the waste cut."""
    w = sorted(w, reverse=True)
    best = makespan(w, K)
    C = best * scale
    verdict = BinCompletion(np.array(w), K, C, 10**6).run()
    assert verdict == (FEASIBLE if C >= best else INFEASIBLE)


def test_a_spent_budget_answers_unknown():
    assert BinCompletion(np.array([5.0, 4.0, 3.0, 3.0, 3.0]), 2, 9.5, 0).run() == UNKNOWN


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from([1.0, 2.0, 3.0, 5.0]), min_size=2, max_size=7), st.integers(1, 3))
def test_cheap_bound_is_below_the_least_makespan(w, K):
    w = np.array(sorted(w, reverse=True))
    assert cheap_bound(w, K) <= makespan(list(w), K) + 1e-9


# the brute-force check on structured draws is shared with the pigeonhole bound (tests/test_pigeonhole.py)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([1.0, 2.0, 3.0, 5.0, 8.0]), min_size=3, max_size=6), st.sampled_from([1.5, 3.0, 10.0]),
       st.sampled_from([0.0, 0.5]), st.integers(1, 2))
def test_never_above_the_optimum_on_layers_with_a_cpu(works, cpu_factor, tensor, accelerators):
    problem = Problem(layers(works, cpu_factor, tensor), Cluster.accelerators(accelerators, cpus=1), Throughput(), [])
    bound = packing_bound(problem.graph, problem.cluster)
    assert pigeonhole_bound(problem.graph, problem.cluster) <= bound + 1e-9
    assert bound <= optimum(problem) + 1e-9


def test_binds_where_pigeonhole_and_lemma_3_3_do_not():
    """Layers 8, 3, 3, 3 on two accelerators and a CPU ten times slower: {8} | {3, 3, 3} (mean 8.5)."""
    problem = Problem(layers([8.0, 3.0, 3.0, 3.0]), Cluster.accelerators(2, cpus=1), Throughput(), [])
    bound = packing_bound(problem.graph, problem.cluster)
    assert bound == pytest.approx(9.0) == pytest.approx(optimum(problem))
    assert max(pigeonhole_bound(problem.graph, problem.cluster), simple_lower_bound(problem.graph, problem.cluster)) < 8.5


def test_a_cpu_fast_enough_takes_the_small_layers():
    """With the CPU 2.5 times slower a 3 may run there at T >= 7.5: {8} | {3, 3} | CPU {3} gives 8 < 9."""
    problem = Problem(layers([8.0, 3.0, 3.0, 3.0], 2.5), Cluster.accelerators(2, cpus=1), Throughput(), [])
    assert packing_bound(problem.graph, problem.cluster) == pytest.approx(8.0) == pytest.approx(optimum(problem))


def test_a_search_cut_short_keeps_the_cheap_bound():
    problem = Problem(layers([8.0, 3.0, 3.0, 3.0]), Cluster.accelerators(2, cpus=1), Throughput(), [])
    assert packing_bound(problem.graph, problem.cluster, budget=0) == pytest.approx(8.5)


def test_certify_simple_level_carries_the_packing_bound():
    from placement_dsl.certify import certify

    problem = Problem(layers([8.0, 3.0, 3.0, 3.0]), Cluster.accelerators(2, cpus=1), Throughput(), [])
    cert = certify(problem, levels=("simple",), gap=0.0)
    row = next(r for r in cert.levels if r.level == "simple")
    assert row.bound == pytest.approx(9.0) and "packing" in row.message


def test_gnmt_inference_layers_24_78_and_6_89_share_an_accelerator(dnn_partitioning):
    """Tarnawski's GNMT inference: 31.669 from packing, where the throughput IP's dual bound stalls at 31.19."""
    from placement_dsl.io import load_workload
    from placement_dsl.presets import problem_for_method

    path = dnn_partitioning / "throughput-inputs" / "LayerGraphs" / "gnmt_inference.json"
    problem = problem_for_method(load_workload(path), method="ip-noncontig")
    bound = packing_bound(problem.graph, problem.cluster)
    assert bound == pytest.approx(24.782 + 6.887, rel=1e-8)
    assert bound <= 31.69  # the split polish finds


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([1.0, 2.0, 3.0, 5.0, 8.0]), min_size=1, max_size=9), st.integers(1, 3))
def test_heavy_packing_spreads_exactly_the_units_a_host_cannot_run(works, accelerators):
    from placement_dsl.bounds.packing import heavy_packing
    from placement_dsl.bounds.pigeonhole import unit_times

    graph, cluster = layers(works), Cluster.accelerators(accelerators, cpus=1)
    T, bins = heavy_packing(graph, cluster)
    a, h = unit_times(graph, cluster)
    assert T == packing_bound(graph, cluster) and len(bins) <= accelerators
    units = np.concatenate(bins) if bins else np.array([], dtype=int)
    assert sorted(units.tolist()) == np.flatnonzero(h > T).tolist()  # each unit too slow for the CPU, once
    assert max((a[b].sum() for b in bins), default=0.0) <= makespan(list(a[h > T]), accelerators) + 1e-9


def test_packed_start_places_the_packing_and_polish_keeps_it_valid():
    from placement_dsl.heuristics import run
    from placement_dsl.heuristics.polish import packed_start

    problem = Problem(layers([8.0, 3.0, 3.0, 3.0]), Cluster.accelerators(2, cpus=1), Throughput(), [])
    start = packed_start(problem.graph, problem.cluster)
    assert start.source == "packed" and problem.is_valid(start)
    assert problem.evaluate(start).objective == pytest.approx(9.0) == pytest.approx(optimum(problem))
    assert start.assign[0] != start.assign[1] and len(set(start.assign[1:].tolist())) == 1
    polished = run("polish", problem.graph, problem.cluster, model=problem.cost_model(), start=start)
    assert polished.objective == pytest.approx(9.0)


def test_packed_start_is_none_without_accelerators():
    from placement_dsl.heuristics.polish import packed_start

    assert packed_start(layers([1.0, 2.0]), Cluster.accelerators(0, cpus=2)) is None


def test_certify_starts_from_a_given_placement():
    from placement_dsl.certify import certify
    from placement_dsl.placement import Placement

    problem = Problem(layers([8.0, 3.0, 3.0, 3.0]), Cluster.accelerators(2, cpus=1), Throughput(), [])
    start = Placement(problem.graph, problem.cluster, [0, 1, 1, 1], source="mine")
    cert = certify(problem, levels=("simple",), gap=0.0, start=start)
    assert (cert.objective, cert.found_by) == (pytest.approx(9.0), "mine") and cert.gap <= 1e-6


def test_gnmt_inference_polish_from_the_packing_reaches_the_paper(dnn_partitioning):
    """Polish from the packed start: 31.6873, which the paper prints as 31.68 (the DP's split polishes to 31.96)."""
    from placement_dsl.heuristics import run
    from placement_dsl.heuristics.polish import packed_start
    from placement_dsl.io import load_workload
    from placement_dsl.presets import problem_for_method

    path = dnn_partitioning / "throughput-inputs" / "LayerGraphs" / "gnmt_inference.json"
    problem = problem_for_method(load_workload(path), method="ip-noncontig")
    result = run("polish", problem.graph, problem.cluster, model=problem.cost_model(),
                 start=packed_start(problem.graph, problem.cluster), seed=0)
    assert problem.violations(result.placement) == []
    assert result.objective < 31.69 and (result.objective - packing_bound(problem.graph, problem.cluster)) < 0.02


@pytest.mark.slow
def test_certify_proves_gnmt_inference_within_a_percent(dnn_partitioning):
    """Default non-contiguous levels: the packing bound and polish from the packing certify 31.6873 / 31.669."""
    from placement_dsl.certify import certify
    from placement_dsl.io import load_workload
    from placement_dsl.presets import problem_for_method

    path = dnn_partitioning / "throughput-inputs" / "LayerGraphs" / "gnmt_inference.json"
    problem = problem_for_method(load_workload(path), method="ip-noncontig")
    cert = certify(problem, budget=60)
    assert problem.violations(cert.placement) == []
    assert cert.proved_by == "simple" and cert.found_by == "polish-packed"
    assert cert.objective < 31.69 and cert.gap <= 0.001


def test_a_bin_of_thousands_of_items_is_searched_without_recursion():
    # the search for a bin's items went one Python frame per item: 2,000 unit items filling two bins of
    # 1,000 raised RecursionError (a 2,000-op profile hit it through `placement-dsl bounds`)
    search = BinCompletion(np.ones(2000), 2, 1000.0, 10**6)
    assert search.run() == FEASIBLE and search.bins == [1000.0, 1000.0]
    assert [len(m) for m in search.members] == [1000, 1000]



def test_the_intervals_the_cheap_bound_refutes_are_bisected_past_not_scanned(monkeypatch):
    """2,000 ops whose host times 0.1 … 200 are all distinct, on 8 accelerators: the cheap bound refutes
    the first ~1,300 intervals. They cost O(log n) cheap bounds, not one each (one each is O(n^2): 30 s
    CPU at 20,000 ops), and the bound starts where a scan of them would: at the first one not refuted."""
    from placement_dsl.bounds import packing

    works = np.random.default_rng(3).uniform(1.0, 2.0, 2000)
    hosts = 0.1 * np.arange(1, 2001)
    graph = Graph([Op(name=f"v{i}", work={"accelerator": float(w), "cpu": float(h)})
                   for i, (w, h) in enumerate(zip(works, hosts))], [(f"v{i}", f"v{i + 1}") for i in range(1999)])
    cluster = Cluster.accelerators(8, cpus=1)
    first = next(i for i in range(hosts.size)
                 if cheap_bound(np.sort(works[hosts > (hosts[i - 1] if i else -np.inf)])[::-1].copy(), 8) < hosts[i])
    assert first > 1000
    calls = []
    real = packing.cheap_bound
    monkeypatch.setattr(packing, "cheap_bound", lambda w, K: calls.append(w.size) or real(w, K))
    bound = packing_bound(graph, cluster)
    assert len(calls) < 50
    assert hosts[first - 1] <= bound < hosts[first] + 1e-9
