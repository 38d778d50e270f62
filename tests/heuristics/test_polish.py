"""Iterated local search from the DP's split (method ``polish``) for non-contiguous max-load splits."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from placement_dsl import testing
from placement_dsl.constraints import Contiguous
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.polish import polish
from placement_dsl.placement import Placement
from placement_dsl.testing import binds, optimum, structured_problem, structured_problems, without

SEEDS = range(30)


@settings(max_examples=15, deadline=None)
@given(structured_problems("contiguous"))
def test_polish_lies_between_the_optimum_and_its_start(problem):
    free = without(problem, Contiguous)
    model = free.cost_model()
    start = run("dp", free.graph, free.cluster, model=model).placement
    result = polish(free.graph, free.cluster, model=model, seed=0, start=start, kicks=20)
    assert free.is_valid(result.placement)
    assert result.objective == pytest.approx(evaluate(result.placement, model).objective)
    assert optimum(free) - 1e-9 <= result.objective <= evaluate(start, model).objective + 1e-9


def test_polish_finds_the_non_contiguous_optimum_where_contiguity_binds():
    """Where the best contiguous split is strictly worse, polish from the DP reaches the brute-force optimum."""
    binding = reached = 0
    for seed in SEEDS:
        problem = structured_problem(seed, "contiguous")
        if not binds(problem, Contiguous):
            continue
        free = without(problem, Contiguous)
        binding += 1
        value = run("polish", free.graph, free.cluster, model=free.cost_model(), seed=0).objective
        reached += abs(value - optimum(free)) <= 1e-9
    assert binding >= 8
    assert reached >= binding - 1


@pytest.mark.parametrize("instance", ["contiguity_binds", "dag_order_binds"])
def test_polish_keeps_the_structure_its_model_requires(instance):
    """Under a model requiring contiguity (or DAG order) polish's moves, which break it, are declined: the answer
    is the problem's valid optimum, not the better unstructured split (6.5 and 6.0 here)."""
    problem, best = getattr(testing, instance)()
    result = run("polish", problem.graph, problem.cluster, model=problem.cost_model(), seed=0, kicks=30,
                 time_limit=30.0)
    assert problem.is_valid(result.placement), problem.violations(result.placement)
    assert result.objective == pytest.approx(best)
    assert result.info["rejected"] >= 1


def test_polish_keeps_colocation_groups_together():
    ops = [Op(name=f"v{i}", work={"accelerator": 1.0 + i % 3, "cpu": 9.0}, out_bytes=0.5,
              group=f"g{i // 2}" if i < 6 else None) for i in range(10)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(9)] + [("v0", "v7"), ("v2", "v9")])
    from placement_dsl.cluster import Cluster

    cluster = Cluster.accelerators(3, cpus=1)
    result = run("polish", g, cluster, seed=1)
    for grp in g.groups:
        assert np.unique(result.placement.assign[grp]).size == 1


def test_polish_refuses_a_start_for_another_graph():
    problem = structured_problem(1, "contiguous")
    other = structured_problem(2, "contiguous")
    start = Placement(other.graph, other.cluster, np.zeros(other.graph.n, dtype=int))
    if other.graph.n == problem.graph.n:
        pytest.skip("same size")
    with pytest.raises(SpecError, match="places"):
        polish(problem.graph, problem.cluster, start=start)


def test_certify_dp_level_offers_the_polished_split_without_contiguity():
    from placement_dsl.certify import certify

    problem = structured_problem(1, "contiguous")
    free = without(problem, Contiguous)
    cert = certify(free, levels=("dp",), gap=0.0)
    assert cert.objective == pytest.approx(optimum(free)) and cert.objective < optimum(problem) - 1e-9
    assert free.is_valid(cert.placement)


def test_polish_starts_from_the_linearized_dp_where_the_dp_has_too_many_ideals():
    from placement_dsl import zoo
    from placement_dsl.presets import resize

    w = zoo.gpt3(layers=2, hidden=64, heads=16, vocab=256)  # 16 heads side by side: too many ideals for the DP
    cluster = resize(w.cluster, 8)
    with pytest.raises(Exception, match="ideals"):
        run("dp", w.graph, cluster)
    linear = run("dpl", w.graph, cluster)
    result = polish(w.graph, cluster, seed=0, kicks=5, time_limit=20.0)
    assert result.objective <= linear.objective * (1 + 1e-9)  # a greedy start stayed far above it
