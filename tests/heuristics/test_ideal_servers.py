"""The DP over ideals on hierarchical clusters (Tarnawski App. C.3): server segments, then accelerators,
with every transfer at its route's bandwidth; exact over the DP class against brute force."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.ideal_servers import dp_servers
from placement_dsl.heuristics.pipeline import pipeline
from placement_dsl.objectives import Throughput
from placement_dsl.problem import Problem
from placement_dsl.testing import forward_ordered_optimum
from placement_dsl.training import TrainingMemorySpec


@st.composite
def graphs(draw, max_ops: int = 4) -> Graph:
    """Random DAGs; with ``training`` drawn, a mirrored backward pass colocated with its ops."""
    n = draw(st.integers(1, max_ops))
    training = draw(st.booleans())
    ops = [Op(name=f"v{i}", work=draw(st.sampled_from([0, 1, 2, 4])), out_bytes=draw(st.integers(0, 4)),
              param_bytes=draw(st.sampled_from([0, 1, 3])), group=f"v{i}" if training else None) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if draw(st.integers(0, 2)) == 0]
    if training:
        ops += [Op(name=f"v{i}~bw", work=draw(st.integers(0, 4)), out_bytes=draw(st.integers(0, 3)), backward=True,
                   group=f"v{i}") for i in range(n)]
        edges += [(f"{v}~bw", f"{u}~bw") for u, v in edges] + [(f"v{n - 1}", f"v{n - 1}~bw")]
    return Graph(ops, edges)


@settings(max_examples=60, deadline=None)
@given(graph=graphs(), servers=st.just(2), per=st.integers(1, 2), inter=st.sampled_from([0.5, 8.0]),
       memory=st.sampled_from([6.0, math.inf]), overlap=st.sampled_from(["none", "half", "full"]))
def test_dp_servers_is_brute_force_over_its_class(graph, servers, per, inter, memory, overlap):
    cluster = Cluster.hierarchical(servers, per, intra=2.0, inter=inter, memory=memory)
    problem = Problem(graph, cluster, Throughput(overlap=overlap))
    want = forward_ordered_optimum(problem)
    if not math.isfinite(want):
        return
    res = run("dp-servers", graph, cluster, model=problem.cost_model())
    assert res.bound == res.objective == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert res.info["dp_value"] == pytest.approx(res.objective, rel=1e-9, abs=1e-12)
    along = pipeline(graph, cluster, model=problem.cost_model()).objective  # exact along one order only
    assert res.objective <= along * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("inter, want", [(8.0, 4.5), (1.0, 8.0)])
def test_a_tensor_between_servers_moves_at_the_inter_bandwidth(inter, want):
    g = Graph([Op(name=n, work=4, out_bytes=4) for n in "ab"], [("a", "b")])
    res = dp_servers(g, Cluster.hierarchical(2, 1, intra=2.0, inter=inter))
    assert res.objective == res.info["dp_value"] == pytest.approx(want)


def test_a_tensor_sent_to_both_servers_pays_the_slowest_route_once():
    g = Graph([Op(name="a", work=6, out_bytes=4), Op(name="b", work=1), Op(name="c", work=6)],
              [("a", "b"), ("a", "c")])
    res = dp_servers(g, Cluster.hierarchical(2, 2, intra=4.0, inter=2.0))
    # a and b on server 0, c on server 1: a sends once at the inter route (4 / 2), c receives at inter
    assert res.objective == res.info["dp_value"] == pytest.approx(8.0)


def test_a_slow_link_between_servers_keeps_the_chain_on_one_server():
    g = Graph([Op(name=n, work=4, out_bytes=8) for n in "abc"], [("a", "b"), ("b", "c")])
    fast = dp_servers(g, Cluster.hierarchical(2, 2, intra=8.0, inter=8.0))
    slow = dp_servers(g, Cluster.hierarchical(2, 2, intra=8.0, inter=1.0))
    assert fast.objective == pytest.approx(6.0) and len(set(fast.placement.assign.tolist())) == 3
    assert slow.objective == pytest.approx(9.0) and slow.placement.cluster.servers[slow.placement.assign].max() == 0


@pytest.mark.parametrize("cluster, model, message", [
    (Cluster.stages(2), CostModel(), "no servers"),
    (Cluster.hierarchical(2, 1, intra=1.0, inter=1.0), CostModel(training_memory=TrainingMemorySpec("1f1b")),
     "memory per schedule"),
    (Cluster.hierarchical(2, 1, intra=1.0, inter=1.0), CostModel.named("bottleneck"), "overflow"),
])
def test_dp_servers_refuses_what_it_does_not_model(cluster, model, message):
    g = Graph([Op(name="a", work=1, group="a"), Op(name="a~bw", work=1, backward=True, group="a")], [("a", "a~bw")])
    with pytest.raises(SpecError, match=message):
        dp_servers(g, cluster, model=model)


@settings(max_examples=10, deadline=None)
@given(graph=graphs(max_ops=3))
def test_certify_bounds_the_dp_class_on_servers(graph):
    from placement_dsl.certify import certify
    from placement_dsl.constraints import Contiguous
    from placement_dsl.placement import PlacementClass

    cluster = Cluster.hierarchical(2, 2, intra=2.0, inter=0.5)
    problem = Problem(graph, cluster, Throughput(), [Contiguous()])
    row = next(r for r in certify(problem, budget=20, levels=("dp",), stop_at_gap=False).levels if r.level == "dp")
    assert row.scope is PlacementClass.DP and row.bound == pytest.approx(forward_ordered_optimum(problem), rel=1e-9, abs=1e-12)
