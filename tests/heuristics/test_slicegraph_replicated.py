"""SliceGraph with replicated stages (Tarnawski App. C.2): the slicing DP also picks each stage's
replica count, is the cost model's value, and is brute force over the slicings of its order."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl import brute, testing
from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.slicegraph import Slicer
from placement_dsl.objectives import Throughput
from placement_dsl.problem import Problem
from placement_dsl.training_terms import Replicate

OVERLAPS = ("none", "half", "full")


@st.composite
def dags(draw, max_ops: int = 5) -> Graph:
    n = draw(st.integers(1, max_ops))
    ops = [Op(name=f"v{i}", work=draw(st.sampled_from([0, 1, 2, 4, 9])), out_bytes=draw(st.integers(0, 3)),
              param_bytes=draw(st.sampled_from([0, 0, 1, 2, 5]))) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if draw(st.integers(0, 2)) == 0]
    return Graph(ops, edges)


def _best_slicing_with_replicas(graph: Graph, cluster: Cluster, overlap: str, r: int) -> float:
    """Brute force over placements with up to ``r`` replicas per stage whose devices never go back along
    the graph's order: on identical devices every such placement relabels to a slicing with consecutive
    replicas at the same cost."""
    problem = Problem(graph, cluster, Throughput(overlap=overlap), [Replicate(r)])
    model = problem.cost_model()
    order = graph.topo
    best = np.inf
    for p in brute._replicated(problem, brute.placements(problem)):
        if (np.diff(p.assign[order]) >= 0).all():
            best = min(best, evaluate(p, model).objective)
    return best


def test_replicated_chain_takes_two_replicas():
    problem, optimum = testing.replicated_chain()
    plain = run("slicegraph", problem.graph, problem.cluster, model=problem.cost_model())
    ours = run("slicegraph", problem.graph, problem.cluster, model=problem.cost_model(), replication=True,
               max_replicas=3)
    assert plain.objective == 11.0 and not plain.placement.replicated
    assert ours.objective == pytest.approx(optimum) and ours.info["dp_value"] == pytest.approx(optimum)
    assert ours.placement.replicas.tolist() == [2, 1, 1] and problem.is_valid(ours.placement)
    capped = run("slicegraph", problem.graph, problem.cluster, model=problem.cost_model(), replication=True,
                 max_replicas=1)
    assert capped.objective == 11.0


@settings(max_examples=30, deadline=None)
@given(graph=dags(max_ops=4), k=st.integers(2, 3), overlap=st.sampled_from(OVERLAPS), r=st.integers(2, 3))
def test_slicing_with_replicas_is_brute_force_over_the_order(graph, k, overlap, r):
    r = min(r, k)
    cluster = Cluster.stages(k, bandwidth=2.0)
    model = CostModel(overlap=overlap)
    res = run("slicegraph", graph, cluster, model=model, replication=True, max_replicas=r)
    assert res.info["dp_value"] == pytest.approx(res.objective, rel=1e-9, abs=1e-12)
    assert res.placement.replicas.max() <= r
    assert Problem(graph, cluster, Throughput(overlap=overlap), [Replicate(r)]).is_valid(res.placement)
    assert res.objective == pytest.approx(_best_slicing_with_replicas(graph, cluster, overlap, r), rel=1e-9, abs=1e-12)
    assert res.objective <= run("slicegraph", graph, cluster, model=model).objective * (1 + 1e-12)


@settings(max_examples=20, deadline=None)
@given(graph=dags(), overlap=st.sampled_from(OVERLAPS))
def test_replicas_stay_in_their_class_and_off_hosts(graph, overlap):
    cluster = Cluster([{"name": "a0", "memory": 50.0}, {"name": "a1", "memory": 50.0, "bandwidth": 3.0},
                       {"name": "a2", "memory": 50.0, "bandwidth": 3.0}, {"name": "cpu", "kind": "cpu"}])
    model = CostModel(overlap=overlap)
    res = run("slicegraph", graph, cluster, model=model, replication=True)
    assert res.info["dp_value"] == pytest.approx(res.objective, rel=1e-9, abs=1e-12)
    for members in res.placement.replica_sets:
        assert len(members) == 1 or set(members) == {1, 2}  # a1 with a2; never a0 with a1, never the CPU


def test_slicer_refuses_a_bad_replica_cap():
    g = Graph([Op(name="a", work=1)])
    with pytest.raises(SpecError, match="max_replicas"):
        Slicer(g, Cluster.stages(2), max_replicas=0)
