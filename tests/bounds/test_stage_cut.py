"""The stage-cut bound and the chain level on Archer's MTPP, against brute force on tiny graphs."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds.local import cheapest_stage, stage_cut_applies, stage_cut_bound
from placement_dsl.bounds.simple import simple_lower_bound
from placement_dsl.certify import certify
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import DagOrder, Overflow
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem, Stages
from placement_dsl.testing import optimum


@st.composite
def instances(draw: st.DrawFn) -> tuple[Graph, Cluster]:
    """Tiny DAGs whose transfers can outweigh their compute, on 1-3 identical stages (soft or no memory cap)."""
    n = draw(st.integers(2, 5))
    ops = [Op(name=f"v{i}", work=float(draw(st.integers(0, 6))), out_bytes=float(draw(st.integers(0, 8))),
              param_bytes=float(draw(st.integers(0, 3))), group=draw(st.sampled_from([None, None, None, "g"])))
           for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i, j in itertools.combinations(range(n), 2) if draw(st.booleans())]
    memory = draw(st.sampled_from([math.inf, 3.0]))
    return Graph(ops, edges), Stages(draw(st.integers(1, 3)), memory=memory, bandwidth=draw(st.sampled_from([1.0, 2.0])))


def _stage_load(graph: Graph, cluster: Cluster, members: set[int]) -> float:
    """The load of a device holding exactly ``members`` (its complement on a second device), by the cost model."""
    two = Stages(2, memory=cluster.devices[0].memory, bandwidth=cluster.devices[0].bandwidth)
    assign = np.array([0 if u in members else 1 for u in range(graph.n)], dtype=np.int64)
    ev = evaluate(Placement(graph, two, assign), CostModel.named("bottleneck"))
    return ev.devices[0].load


def _brute_cheapest(graph: Graph, cluster: Cluster, overflow: bool) -> float:
    """``max_v min_{S ∋ v} load(S)`` over every set keeping colocation groups whole (the overflow dropped
    unless ``overflow``)."""
    best = simple_lower_bound(graph, cluster)
    for v in range(graph.n):
        cheapest = math.inf
        for bits in range(1 << graph.n):
            members = {u for u in range(graph.n) if bits >> u & 1}
            if v not in members or any(len(set(g.tolist()) & members) not in (0, len(g)) for g in graph.groups):
                continue
            load = _stage_load(graph, cluster, members)
            if not overflow:
                mem = sum(graph.param_bytes[u] + graph.activation_bytes[u] for u in members)
                load -= max(mem - cluster.devices[0].memory, 0.0) / cluster.devices[0].bandwidth
            cheapest = min(cheapest, load)
        best = max(best, cheapest)
    return best


@given(instances())
@settings(max_examples=40)
def test_stage_cut_is_the_cheapest_stage_and_below_every_placement(inst: tuple[Graph, Cluster]) -> None:
    graph, cluster = inst
    bound, _ = stage_cut_bound(graph, cluster, overflow=True)
    plain, _ = stage_cut_bound(graph, cluster, overflow=False)
    problem = Problem(graph, cluster, Bottleneck(), [Overflow()])
    assert bound <= optimum(problem) * (1 + 1e-9) + 1e-9  # every placement, DAG-ordered or not
    assert plain == pytest.approx(_brute_cheapest(graph, cluster, overflow=False), rel=1e-9, abs=1e-9)
    assert bound >= plain - 1e-9
    if not math.isfinite(cluster.devices[0].memory):
        assert bound == pytest.approx(plain, rel=1e-9, abs=1e-9)


def test_stage_cut_binds_where_transfers_dominate() -> None:
    """b reads a's 6-byte tensor and writes 6 bytes to c: alone it costs 1 + 12; with a or c it saves one transfer
    for 5 of work; the cheapest stage holding b is {a, b, c} (11), far above Lemma 3.3 (5)."""
    g = Graph([Op(name="a", work=5, out_bytes=6), Op(name="b", work=1, out_bytes=6), Op(name="c", work=5)],
              [("a", "b"), ("b", "c")])
    c = Stages(3)
    bound, op = stage_cut_bound(g, c)
    assert simple_lower_bound(g, c) == 5.0
    assert bound == pytest.approx(11.0) and g.names[op] in ("a", "b", "c")
    witness = cheapest_stage(g, c, g.index["b"])
    assert evaluate(witness, CostModel.named("bottleneck")).devices[0].load == pytest.approx(11.0)
    assert optimum(Problem(g, c, Bottleneck(), [DagOrder()])) == pytest.approx(11.0)


def test_stage_cut_overflow_term() -> None:
    """A 10-byte op on a 4-byte stage streams 6 bytes at bandwidth 2: 3 more than its work, whatever shares its stage."""
    g = Graph([Op(name="a", work=2, param_bytes=10), Op(name="b", work=1)], [("a", "b")])
    c = Stages(2, memory=4.0, bandwidth=2.0)
    assert stage_cut_bound(g, c, overflow=False)[0] == pytest.approx(2.0)
    assert stage_cut_bound(g, c, overflow=True)[0] == pytest.approx(5.0)
    assert optimum(Problem(g, c, Bottleneck(), [Overflow()])) == pytest.approx(5.0)


def test_stage_cut_refuses_what_it_does_not_bound() -> None:
    g = Graph([Op(name="a", work=1)])
    assert "overlap" in stage_cut_applies(g, Stages(2), overlap="half")
    assert "identical" in stage_cut_applies(g, Cluster.accelerators(2, cpus=1))
    with pytest.raises(ValueError, match="identical"):
        stage_cut_bound(g, Cluster.accelerators(1, cpus=1))


def _mtpp(seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    n = 6
    ops = [Op(name=f"v{i}", work=float(rng.integers(1, 6)), out_bytes=float(rng.integers(0, 4))) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i, j in itertools.combinations(range(n), 2) if rng.random() < 0.4]
    return Problem(Graph(ops, edges), Stages(3), Bottleneck(), [DagOrder()])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_certify_stage_cut_and_chain_levels_on_the_mtpp(seed: int) -> None:
    """On identical stages the chain MIP bounds the DAG-ordered class itself: its bound reaches the brute-force
    optimum, and the stage-cut level never passes it."""
    problem = _mtpp(seed)
    best = optimum(problem)
    cert = certify(problem, budget=60, levels=("simple", "stage-cut", "chain"), gap=0.0, stop_at_gap=False)
    rows = {r.level: r for r in cert.levels}
    assert rows["chain"].scope is problem.placement_class() and rows["chain"].status.value == "optimal"
    assert rows["chain"].bound == pytest.approx(best, rel=1e-6)
    assert rows["stage-cut"].bound <= best + 1e-9
    assert cert.objective == pytest.approx(best, rel=1e-6) and cert.gap <= 1e-6


@pytest.mark.parametrize("seed", [3, 4])
def test_target_search_bisects_to_the_optimum(seed: int) -> None:
    """Each windowed round is a bound (never above brute force); its placements fit under its target; starting
    from a loose floor and ceiling the search closes on the optimum."""
    from placement_dsl.search.chain import target_search

    problem = _mtpp(seed)
    best = optimum(problem)
    bound, log, found = target_search(problem, 1.2 * best, 0.3 * best, 60)
    assert len(log) >= 2 and bound == pytest.approx(best, rel=1e-6)
    assert all(b is None or b <= best * (1 + 1e-9) for _, b, _ in log)
    assert all(problem.is_valid(p) and problem.evaluate(p).objective >= best * (1 - 1e-9) for p in found)
    assert any(ok and t < best for t, _, ok in log)  # a target below the optimum was proven empty


@settings(max_examples=25, deadline=None, derandomize=True)
@given(instances(), st.floats(0.5, 1.5))
def test_windowed_bound_with_its_cutoff_never_passes_brute_force(instance: tuple[Graph, Cluster], scale: float) -> None:
    """``min(T*, bound)`` of the windowed chain MIP (which prunes at ``T*``) is a bound at any target: a target below
    the optimum is proven, a target above it finds the optimum itself (the DAG-ordered class of identical stages)."""
    from placement_dsl.search.chain import windowed_bound

    graph, cluster = instance
    problem = Problem(graph, cluster, Bottleneck(), [DagOrder(), Overflow()])
    best = optimum(problem)
    if best <= 0:
        return
    target = best * scale
    bound, proven, placement = windowed_bound(problem, target, 20)
    assert proven and bound is not None and bound <= best * (1 + 1e-6)
    assert bound == pytest.approx(min(target, best), rel=1e-6)
    if placement is not None:
        assert problem.is_valid(placement) and problem.evaluate(placement).objective >= best * (1 - 1e-9)
