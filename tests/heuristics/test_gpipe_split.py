"""GPipe-optimal splits along one order (:mod:`placement_dsl.heuristics.gpipe_split`): what it claims exact.

Its claim covers the splits of one topological order of the contracted forward DAG. Backward ops not
colocated with their forward ops get supernodes of their own that no edge ties to the forward pass, so
the order may put the whole backward pass first; splits along it are then no longer that class, and the
method must not claim exactness for them. Brute force (:mod:`placement_dsl.brute`) is the referee.
"""
from __future__ import annotations

import pytest

from placement_dsl import testing
from placement_dsl.brute import optimum
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Colocate, Contiguous
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.objectives import GPipe
from placement_dsl.problem import Problem
from placement_dsl.zoo.training import with_backward


def test_no_exactness_claim_along_an_order_the_passes_do_not_follow():
    problem, best = testing.training_gpipe()  # backward ops not colocated with their forward ops
    res = run("gpipe-split", problem.graph, problem.cluster, model=problem.cost_model())
    assert optimum(problem) == pytest.approx(best)
    assert res.objective > best  # the split along its order (16) is not the contiguous optimum (14)
    assert res.bound is None and res.exact_among is None
    assert "order" in res.info


def test_exact_when_backward_ops_sit_with_their_forward_ops():
    base, best = testing.training_gpipe()
    pairs = Colocate([[f"f{i}", f"g{i}"] for i in range(3)])
    problem = Problem(base.source_graph, base.cluster, base.objective, [*base.constraints, pairs])
    res = run("gpipe-split", problem.graph, problem.cluster, model=problem.cost_model())
    assert problem.violations(res.placement) == []
    assert res.bound == res.objective == pytest.approx(optimum(problem)) == pytest.approx(best)
    assert "order" not in res.info


@pytest.mark.parametrize("overlap", ["none", "half", "full"])
def test_exact_under_every_overlap_where_transfers_weigh(overlap):
    """A training chain whose tensors cost as much as its layers: under every overlap its stage loads are the cost
    model's (combine_loads), so its exact claim meets brute force."""
    ops, edges = with_backward([Op(name=f"l{i}", work=float(w), out_bytes=3.0) for i, w in enumerate([2, 1, 3, 1])],
                               [(f"l{i}", f"l{i + 1}") for i in range(3)])
    problem = Problem(Graph(ops, edges), Cluster.accelerators(3), GPipe(overlap=overlap), [Contiguous()])
    res = run("gpipe-split", problem.graph, problem.cluster, model=problem.cost_model())
    assert problem.violations(res.placement) == []
    assert res.bound == res.objective == pytest.approx(optimum(problem))
