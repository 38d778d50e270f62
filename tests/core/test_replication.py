"""Replicated stages (Tarnawski App. C.2) and hierarchical clusters (App. C.3): placements, the cost
model, the DP over ideals, the pipeline planner, PipeDream's planner and the simulator agree."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.ideals import dp, dpl
from placement_dsl.heuristics.pipedream_planner import pipedream_planner
from placement_dsl.heuristics.pipeline import pipeline
from placement_dsl.heuristics.pipeline_dp import layout
from placement_dsl.placement import Placement
from placement_dsl.replication import ALLREDUCE_FACTOR, set_bandwidth
from placement_dsl.simulate import analytic_time_per_sample, simulate

OVERLAPS = ("none", "half", "full")


def chain(works: list[float], params: list[float], out: float = 1.0, training: bool = False) -> Graph:
    ops = [Op(name=f"v{i}", work=w, param_bytes=p, out_bytes=out, group=f"v{i}" if training else None)
           for i, (w, p) in enumerate(zip(works, params))]
    edges = [(f"v{i}", f"v{i + 1}") for i in range(len(ops) - 1)]
    if training:
        ops += [Op(name=f"v{i}~bw", work=2 * w, out_bytes=out, backward=True, group=f"v{i}")
                for i, w in enumerate(works)]
        edges += [(f"v{len(works) - 1}", f"v{len(works) - 1}~bw")]
        edges += [(f"v{i + 1}~bw", f"v{i}~bw") for i in range(len(works) - 1)]
    return Graph(ops, edges)


@st.composite
def dags(draw, max_ops: int = 7, training: bool = False) -> Graph:
    """Random DAGs of accelerator ops; with ``training`` mirrored backward ops colocated with their op."""
    n = draw(st.integers(1, max_ops))
    ops = [Op(name=f"v{i}", work=draw(st.sampled_from([0, 1, 2, 3, 5, 8])), out_bytes=draw(st.integers(0, 4)),
              param_bytes=draw(st.sampled_from([0, 0, 1, 3, 6])), group=f"v{i}" if training else None)
           for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if draw(st.integers(0, 2)) == 0]
    if training:
        ops += [Op(name=f"v{i}~bw", work=draw(st.integers(0, 6)), out_bytes=draw(st.integers(0, 3)), backward=True,
                   group=f"v{i}") for i in range(n)]
        edges += [(f"{v}~bw", f"{u}~bw") for u, v in edges] + [(f"v{n - 1}", f"v{n - 1}~bw")]
    return Graph(ops, edges)


# ---------------------------------------------------------------------------- placements
def test_replicas_by_count_by_names_and_round_trip():
    g = chain([4, 3], [10, 4])
    c = Cluster.stages(4)
    p = Placement(g, c, [0, 2], replicas=[2, 1, 1, 1])
    q = Placement(g, c, [0, 2], replicas={"stage0": ["stage0", "stage1"]})
    assert p == q and p.replicas.tolist() == [2, 1, 1, 1] and p != Placement(g, c, [0, 2])
    back = Placement.from_dict(g, c, p.to_dict())
    assert back == p and p.to_dict()["replicas"] == {"stage0": ["stage0", "stage1"]}


@pytest.mark.parametrize("replicas, message", [
    ({"stage0": ["stage0", "stage2"]}, "device 'stage2' holds ops"),
    ([2, 1, 1, 1, 1], "one count per device"),
    ({"stage1": 2}, "holds no ops"),
    ({"stage0": 0}, "count must be a whole number >= 1"),
    ({"stage2": 3}, "the cluster has 4 devices"),
    ({"stage0": ["stage0", "stage9"]}, "unknown devices"),
    ({"nowhere": 2}, "unknown device 'nowhere'"),
])
def test_invalid_replicas_are_named(replicas, message):
    with pytest.raises(SpecError, match=message):
        Placement(chain([4, 3], [10, 4]), Cluster.stages(4), [0, 2], replicas=replicas)


def test_replica_shared_by_two_stages_is_refused():
    with pytest.raises(SpecError, match="replicates both"):
        Placement(chain([4, 3], [10, 4]), Cluster.stages(4), [0, 1],
                  replicas={"stage0": ["stage0", "stage2"], "stage1": ["stage1", "stage2"]})


# ---------------------------------------------------------------------------- the cost model
@pytest.mark.parametrize("overlap", OVERLAPS)
def test_replicated_load_is_share_plus_ring_allreduce(overlap):
    g = chain([4, 3], [10, 4], out=2.0)
    p = Placement(g, Cluster.stages(4, bandwidth=1.0), [0, 3], replicas=[3, 1, 1, 1])
    row = evaluate(p, CostModel(overlap=overlap)).devices[0]
    sync = ALLREDUCE_FACTOR * (3 - 1) / 3 * 10 / 1.0
    base = {"none": 4 + 2, "half": max(4, 2), "full": max(4, 0, 2)}[overlap]
    expect = base / 3 + sync if overlap == "none" else max(base / 3, sync)
    assert row.replicas == 3 and row.sync == pytest.approx(sync) and row.load == pytest.approx(expect)
    assert [r.load for r in evaluate(p, CostModel(overlap=overlap)).devices[:3]] == pytest.approx([expect] * 3)


def test_hierarchical_cluster_routes_transfers_by_level():
    c = Cluster.hierarchical(2, 2, intra=10.0, inter=1.0, memory=100.0)
    assert c.names == ("s0g0", "s0g1", "s1g0", "s1g1") and c.routed and not Cluster.stages(2).routed
    assert c.servers.tolist() == [0, 0, 1, 1] and Cluster.from_dict(c.to_dict()) == c
    g = chain([4, 3], [10, 4], out=2.0)
    inside, across = Placement(g, c, [0, 1]), Placement(g, c, [0, 2])
    assert [evaluate(inside).devices[i].transfer_in for i in (1,)] == [pytest.approx(0.2)]
    assert evaluate(across).devices[2].transfer_in == pytest.approx(2.0)
    assert evaluate(across).devices[0].transfer_out == pytest.approx(2.0)


def test_replicas_pair_with_their_server_and_sync_over_the_slowest_ring_link():
    c = Cluster.hierarchical(2, 2, intra=10.0, inter=1.0)
    bw = c.route_bandwidth
    assert set_bandwidth([0, 2], [1, 3], bw) == 10.0  # every replica has a partner in its server
    assert set_bandwidth([0, 2], [1], bw) == 1.0  # the s1 replica must cross
    p = Placement(chain([4, 3], [10, 4], out=2.0), c, [0, 1],
                  replicas={"s0g0": ["s0g0", "s1g0"], "s0g1": ["s0g1", "s1g1"]})
    rows = evaluate(p).devices
    assert rows[0].sync == pytest.approx(2 * 0.5 * 10 / 1.0) and rows[1].transfer_in == pytest.approx(0.2)


def test_cluster_hierarchical_errors():
    with pytest.raises(SpecError, match="servers >= 1"):
        Cluster.hierarchical(0, 2, intra=1.0, inter=1.0)
    with pytest.raises(SpecError, match="inter bandwidth"):
        Cluster.hierarchical(2, 2, intra=1.0, inter=0.0)


# ---------------------------------------------------------------------------- the DPs
@settings(max_examples=25, deadline=None)
@given(graph=dags(), overlap=st.sampled_from(OVERLAPS))
def test_pipeline_dp_on_a_flat_cluster_is_dpl_with_replication(graph, overlap):
    model = CostModel(overlap=overlap)
    cluster = Cluster.stages(3, bandwidth=2.0)
    ours = pipeline(graph, cluster, model=model, upper_bound=math.inf, replication=True)
    line = dpl(graph, cluster, model=model, replication=True)
    assert ours.objective == pytest.approx(ours.info["dp_value"]) == pytest.approx(ours.bound)
    assert ours.objective == pytest.approx(line.objective)
    assert ours.objective >= dp(graph, cluster, model=model, replication=True).objective - 1e-9


@settings(max_examples=25, deadline=None)
@given(graph=st.one_of(dags(), dags(max_ops=4, training=True)), servers=st.integers(1, 3), per=st.integers(1, 3),
       overlap=st.sampled_from(OVERLAPS))
def test_pipeline_dp_is_the_cost_model_and_never_worse_than_pipedream(graph, servers, per, overlap):
    model = CostModel(overlap=overlap)
    cluster = Cluster.hierarchical(servers, per, intra=4.0, inter=0.5)
    ours = pipeline(graph, cluster, model=model, replication=True)
    theirs = pipedream_planner(graph, cluster, model=model, replication=True)
    assert ours.info["dp_value"] == pytest.approx(ours.objective)
    assert ours.objective <= theirs.objective * (1 + 1e-9) + 1e-12
    assert evaluate(ours.placement, model).valid


def test_pipeline_uses_both_levels_and_refuses_what_it_cannot_model():
    g = chain([8, 8, 8, 8], [1, 1, 1, 1], out=1.0, training=True)
    c = Cluster.hierarchical(2, 2, intra=100.0, inter=0.1)
    r = run("pipeline", g, c, model=CostModel.named("pipedream"))
    assert r.bound == r.objective and layout(c).inter == 0.1
    assert len(r.info["segments"]) >= 1 and r.placement.cluster is c
    with pytest.raises(SpecError, match="not a sum over ideals"):
        dp(g, c)
    with pytest.raises(SpecError, match="identical accelerators"):
        pipeline(g, Cluster.accelerators(2, cpus=1))


def test_server_level_replication_is_found_when_the_model_is_sparse():
    g = chain([50, 50], [0.0, 0.0], out=0.001, training=True)
    c = Cluster.hierarchical(2, 1, intra=1.0, inter=1.0)
    r = pipeline(g, c, model=CostModel.named("pipedream"), replication=True)
    assert r.placement.replicas.max() == 2  # no weights to sync: plain data parallelism wins


# ---------------------------------------------------------------------------- the simulator
@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_simulator_matches_replicated_and_routed_placements(schedule):
    g = chain([6, 2, 3, 1], [5, 1, 1, 1], out=1.0, training=True)
    c = Cluster.hierarchical(2, 2, intra=4.0, inter=1.0)
    p = pipeline(g, c, model=CostModel.named("pipedream"), replication=True).placement
    want = analytic_time_per_sample(p, schedule)
    got = [simulate(p, schedule, n).time_per_sample for n in (50, 400)]
    assert abs(got[1] - want) <= abs(got[0] - want) + 1e-9 and got[1] == pytest.approx(want, rel=0.02)


def test_replicated_dp_placement_fills_distinct_devices():
    g = chain([10, 1], [2, 2])
    r = dp(g, Cluster.accelerators(3), replication=True)
    sets = [m for m in r.placement.replica_sets if len(m) > 1]
    assert sets and all(np.bincount(r.placement.assign, minlength=3)[list(m[1:])].sum() == 0 for m in sets)


# ---------------------------------------------------------------------------- the IP (App. C.2)
def _ip_problem(graph: Graph, overlap: str, r: int = 3):
    from placement_dsl.constraints import Contiguous, Memory
    from placement_dsl.objectives import Throughput
    from placement_dsl.problem import Problem
    from placement_dsl.training_terms import Replicate

    return Problem(graph, Cluster.accelerators(3), Throughput(overlap=overlap), [Memory(), Contiguous(), Replicate(r)])


@settings(max_examples=8, deadline=None)
@given(graph=dags(max_ops=4), overlap=st.sampled_from(OVERLAPS))
def test_replicated_ip_meets_the_dp_and_takes_its_warm_start(graph, overlap):
    from placement_dsl.solve import solve

    problem = _ip_problem(graph, overlap)
    best = dp(graph, problem.cluster, model=problem.cost_model(), replication=True)
    result = solve(problem, formulation="throughput-replicated", time_limit=30, warm_start=best.placement)
    assert result.objective == pytest.approx(best.objective, rel=1e-6, abs=1e-9)
    assert evaluate(result.placement, problem.cost_model()).objective == pytest.approx(result.objective, rel=1e-6)


def test_plain_throughput_names_the_replicate_term_it_cannot_write():
    from placement_dsl.formulations import get

    problem = _ip_problem(chain([4, 3], [1, 1]), "none")
    assert "no rule for term Replicate" in get("throughput").accepts(problem)
    assert get("throughput-replicated").accepts(problem) is None


@settings(max_examples=6, deadline=None)
@given(graph=dags(max_ops=5), overlap=st.sampled_from(OVERLAPS))
def test_throughput_ip_routes_transfers_like_the_cost_model(graph, overlap):
    from placement_dsl.constraints import Contiguous
    from placement_dsl.objectives import Throughput
    from placement_dsl.problem import Problem
    from placement_dsl.solve import solve
    from placement_dsl.testing import brute_force

    problem = Problem(graph, Cluster.hierarchical(2, 2, intra=4.0, inter=0.5), Throughput(overlap=overlap),
                      [Contiguous()])
    result = solve(problem, formulation="throughput", time_limit=60, warm_start="pipeline")
    assert result.objective == pytest.approx(brute_force(problem)[0], rel=1e-6, abs=1e-9)


def test_replicas_need_a_replicate_term():
    from placement_dsl.objectives import Throughput
    from placement_dsl.problem import Problem
    from placement_dsl.training_terms import Replicate

    g = chain([4, 3], [1, 1])
    p = Placement(g, Cluster.stages(3), [0, 2], replicas=[2, 1, 1])
    assert "[replicas]" in " ".join(Problem(g, Cluster.stages(3), Throughput()).violations(p))
    assert Problem(g, Cluster.stages(3), Throughput(), [Replicate(2)]).is_valid(p)
