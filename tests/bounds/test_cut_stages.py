"""The cut-stages bound: never above the best contiguous (or DAG-ordered) placement, by enumeration on small graphs;
the cut ops in O(n + m) agree with the reachability definition; GPT-3's inner stages pay their residual tensors."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from placement_dsl.bounds.cut_stages import applies, cut_ops, cut_stages_bound
from placement_dsl.bounds.makespan import comparable_cuts
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, DagOrder
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem


def _graph(n: int, seed: int) -> Graph:
    """A chain with random skip edges (residual-like) and random works and tensor sizes."""
    rng = np.random.default_rng(seed)
    edges = {(i, i + 1) for i in range(n - 1)}
    edges |= {(int(a), int(a) + int(rng.integers(2, 4))) for a in rng.integers(0, n, size=n // 2)}
    edges = {(a, b) for a, b in edges if b < n}
    ops = [Op(name=f"v{i}", work=float(rng.integers(1, 6)), out_bytes=float(rng.integers(0, 4))) for i in range(n)]
    return Graph(ops, [(f"v{a}", f"v{b}") for a, b in sorted(edges)])


def _best(problem: Problem) -> float:
    best = np.inf
    for assign in itertools.product(range(problem.cluster.size), repeat=problem.graph.n):
        p = Placement(problem.graph, problem.cluster, np.array(assign))
        if problem.is_valid(p):
            best = min(best, problem.evaluate(p).objective)
    return best


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("term", [Contiguous, DagOrder])
def test_the_bound_never_exceeds_the_best_structured_placement(seed, term):
    g = _graph(7, seed)
    problem = Problem(g, Cluster.stages(2 + seed % 2, bandwidth=0.5 + seed % 3), Bottleneck(), [term()])
    assert applies(problem) is None
    best = _best(problem)
    bound, _ = cut_stages_bound(problem, best)
    assert bound is None or bound <= best * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_the_cut_ops_are_the_ops_comparable_with_all_others(seed):
    g = _graph(30, seed)
    _, cuts = comparable_cuts(g)
    assert sorted(cut_ops(g).tolist()) == sorted(cuts.tolist())


def test_inner_stages_of_a_transformer_pay_their_residual_tensors():
    from placement_dsl import zoo
    from placement_dsl.presets import resize

    w = zoo.gpt3(layers=4, hidden=256, heads=4, vocab=1024)
    cluster = resize(w.cluster, 4)
    problem = Problem(w.graph, cluster, Bottleneck(), [DagOrder()])
    work = float(cluster.times(w.graph)[:, 0].sum())
    bound, note = cut_stages_bound(problem, work)
    assert bound is not None and bound > 1.02 * work / 4, note  # W / k misses the tensors
