"""certify() on problems with replicated stages (Tarnawski App. C.2): every level's bound stays at or
below brute force over the placements with replicas, the DP's is exact over its class, and levels
that ignore replicas say so."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl import testing
from placement_dsl.bounds import simple_lower_bound
from placement_dsl.bounds.simple import replicated_lower_bound
from placement_dsl.certify import LevelStatus, certify
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, DagOrder
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Throughput
from placement_dsl.placement import PlacementClass
from placement_dsl.problem import Problem
from placement_dsl.testing import brute_force
from placement_dsl.training_terms import Replicate

OVERLAPS = ("none", "half", "full")


@st.composite
def dags(draw, max_ops: int = 4) -> Graph:
    n = draw(st.integers(1, max_ops))
    ops = [Op(name=f"v{i}", work=draw(st.sampled_from([0, 1, 2, 4, 9])), out_bytes=draw(st.integers(0, 3)),
              param_bytes=draw(st.sampled_from([0, 0, 1, 2, 5]))) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if draw(st.integers(0, 2)) == 0]
    return Graph(ops, edges)


clusters = st.sampled_from([Cluster.accelerators(3), Cluster.stages(3, bandwidth=2.0),
                            Cluster.accelerators(2, cpus=1)])


def test_replicated_simple_bound_on_the_replicated_chain():
    problem, optimum = testing.replicated_chain()
    g, c = problem.graph, problem.cluster
    assert simple_lower_bound(g, c) == 10.0 > optimum  # ignoring replicas it is no bound
    # a on 3 replicas: 10/3 + 2 * (2/3) * 2 (its own parameters at the fastest ring); b adds nothing
    assert replicated_lower_bound(g, c, 3) == pytest.approx(6.0)
    assert replicated_lower_bound(g, c, 2) == pytest.approx(7.0)
    assert replicated_lower_bound(g, c, 3, "full") == pytest.approx(11 / 3)  # overlapped: the sum, 11 / 3
    assert replicated_lower_bound(g, c, 1) == simple_lower_bound(g, c)


@settings(max_examples=20, deadline=None)
@given(graph=dags(), cluster=clusters, overlap=st.sampled_from(OVERLAPS), r=st.integers(2, 3),
       contiguous=st.booleans())
def test_simple_and_dp_bounds_never_exceed_brute_force(graph, cluster, overlap, r, contiguous):
    terms = [Contiguous()] if contiguous else []
    r = min(r, int((~cluster.host).sum()))
    problem = Problem(graph, cluster, Throughput(overlap=overlap), [*terms, Replicate(r)])
    optimum = brute_force(problem)[0]
    assert replicated_lower_bound(graph, cluster, r, overlap) <= optimum * (1 + 1e-9) + 1e-12
    cert = certify(problem, budget=30, levels=("simple", "dp"), stop_at_gap=False)
    assert cert.objective >= optimum * (1 - 1e-9) - 1e-12 and cert.bound <= optimum * (1 + 1e-9) + 1e-12
    dp_row = next(row for row in cert.levels if row.level == "dp")
    if dp_row.bound is not None:  # the DP class (DAG-ordered contiguous with replicas)
        ordered = Problem(graph, cluster, Throughput(overlap=overlap), [Contiguous(), DagOrder(), Replicate(r)])
        assert dp_row.scope is PlacementClass.DP and contiguous
        # the DP puts the CPU anywhere in the pipeline, DagOrder at its index: a subset of the DP class
        assert optimum * (1 - 1e-9) - 1e-12 <= dp_row.bound <= brute_force(ordered)[0] * (1 + 1e-9) + 1e-12


@settings(max_examples=25, deadline=None)
@given(graph=dags(), overlap=st.sampled_from(OVERLAPS), r=st.integers(2, 3))
def test_dp_with_replicas_is_brute_force_over_its_class(graph, overlap, r):
    cluster = Cluster.stages(3, bandwidth=2.0)
    problem = Problem(graph, cluster, Throughput(overlap=overlap), [Contiguous(), Replicate(r)])
    row = next(row for row in certify(problem, budget=30, levels=("dp",), stop_at_gap=False).levels if row.level == "dp")
    ordered = Problem(graph, cluster, Throughput(overlap=overlap), [Contiguous(), DagOrder(), Replicate(r)])
    assert row.status is LevelStatus.OPTIMAL
    assert row.bound == pytest.approx(brute_force(ordered)[0], rel=1e-9, abs=1e-12)


def test_dp_refuses_to_bound_when_replicas_may_leave_its_device_class():
    g = Graph([Op(name="a", work=10, param_bytes=2, out_bytes=1), Op(name="b", work=1)], [("a", "b")])
    mixed = Cluster([{"name": "fast", "memory": 10.0}, {"name": "slow0", "memory": 20.0},
                     {"name": "slow1", "memory": 20.0}])
    problem = Problem(g, mixed, Throughput(), [Contiguous(), Replicate(3)])
    row = next(row for row in certify(problem, budget=30, levels=("dp",)).levels if row.level == "dp")
    assert row.status is LevelStatus.NO_BOUND and row.bound is None and "kind" in row.message


def test_levels_that_ignore_replicas_read_not_applicable():
    problem, optimum = testing.replicated_chain()
    cert = certify(problem, budget=30, levels=("simple", "dp", "chain", "superblock"), stop_at_gap=False)
    rows = {row.level: row for row in cert.levels}
    assert rows["chain"].status is rows["superblock"].status is LevelStatus.NOT_APPLICABLE
    assert "Replicate" in rows["superblock"].message
    assert rows["simple"].bound == pytest.approx(6.0) and rows["dp"].bound == pytest.approx(optimum)
    assert cert.objective == pytest.approx(optimum) and cert.placement.replicated


@settings(max_examples=6, deadline=None)
@given(graph=dags(), overlap=st.sampled_from(OVERLAPS), contiguous=st.booleans())
def test_replicated_ip_dual_bound_never_exceeds_brute_force(graph, overlap, contiguous):
    terms = [Contiguous()] if contiguous else []
    problem = Problem(graph, Cluster.accelerators(3), Throughput(overlap=overlap), [*terms, Replicate(2)])
    optimum = brute_force(problem)[0]
    cert = certify(problem, budget=60, levels=("simple", "dp", "throughput"), stop_at_gap=False, gap=0.0)
    row = next(row for row in cert.levels if row.level == "throughput")
    assert row.bound is not None and row.bound <= optimum * (1 + 1e-6) + 1e-9
    assert cert.bound <= optimum * (1 + 1e-6) + 1e-9 and not math.isinf(cert.objective)


def test_replicated_ip_closes_the_gap_on_the_replicated_chain():
    problem, optimum = testing.replicated_chain()
    cert = certify(problem, budget=60, levels=("simple", "throughput"), gap=0.0)
    assert cert.objective == pytest.approx(optimum) and cert.bound == pytest.approx(optimum)
    assert cert.proved_by == "throughput"
