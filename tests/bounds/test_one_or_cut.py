"""The one-device-or-cut bound: below every placement on tiny graphs, and the optimum where links are slow."""
from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds.one_or_cut import applies, one_or_cut_bound
from placement_dsl.certify import certify
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import DagOrder, Overflow
from placement_dsl.evaluate import Overlap
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, Throughput
from placement_dsl.problem import Problem, Stages
from placement_dsl.testing import optimum


@st.composite
def instances(draw: st.DrawFn) -> tuple[Graph, Cluster, str]:
    """Tiny DAGs whose transfers can outweigh their compute, on 1-3 identical stages, in every overlap mode."""
    n = draw(st.integers(1, 5))
    ops = [Op(name=f"v{i}", work=float(draw(st.integers(0, 6))), out_bytes=float(draw(st.sampled_from([0, 1, 3, 40]))),
              param_bytes=float(draw(st.integers(0, 3)))) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i, j in itertools.combinations(range(n), 2) if draw(st.booleans())]
    memory = draw(st.sampled_from([math.inf, 4.0, 9.0]))
    cluster = Stages(draw(st.integers(1, 3)), memory=memory, bandwidth=draw(st.sampled_from([1.0, 2.0])))
    return Graph(ops, edges), cluster, draw(st.sampled_from(["none", "half", "full"]))


@given(instances())
@settings(max_examples=60, deadline=None)
def test_the_bound_is_below_every_placement(inst: tuple[Graph, Cluster, str]) -> None:
    graph, cluster, overlap = inst
    hard = Problem(graph, cluster, Throughput(overlap=overlap))
    best = optimum(hard)
    if math.isfinite(best):
        assert one_or_cut_bound(graph, cluster, Overlap(overlap)) <= best * (1 + 1e-9) + 1e-9
    soft = Problem(graph, cluster, Bottleneck(overlap=overlap), [Overflow()])
    assert one_or_cut_bound(graph, cluster, Overlap(overlap), soft_memory=True) <= optimum(soft) * (1 + 1e-9) + 1e-9


def _slow_chain(n: int = 40) -> Graph:
    return Graph([Op(name=f"v{i}", work=1.0, out_bytes=1e6) for i in range(n)],
                 [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])


def test_on_slow_links_the_bound_is_one_devices_load_and_closes_the_gap():
    g = _slow_chain()
    # every cut moves a megabyte at a byte per time unit: one device computing 40 is the optimum
    assert one_or_cut_bound(g, Stages(4)) == pytest.approx(40.0)
    cert = certify(Problem(g, Stages(4), Bottleneck(), [DagOrder()]), budget=20)
    assert (cert.proved_by, cert.gap) == ("one-or-cut", 0.0)
    assert cert.objective == pytest.approx(40.0)


def test_without_a_fit_on_one_device_the_cheapest_cut_counts():
    g = _slow_chain(4)
    # hard memory 2 bytes and four ops of 1 byte: some device holds a proper subset, computing >= 1, moving 1e6
    heavy = Graph([op.model_copy(update={"param_bytes": 1.0}) for op in g.ops], list(zip(g.names[:-1], g.names[1:])))
    assert one_or_cut_bound(heavy, Stages(4, memory=2.0)) == pytest.approx(1.0 + 1e6)
    assert one_or_cut_bound(heavy, Stages(4, memory=2.0), Overlap.HALF) == pytest.approx(1e6)


def test_ops_joined_only_by_empty_tensors_may_be_split_for_free():
    g = Graph([Op(name="a", work=2.0, out_bytes=0.0), Op(name="b", work=2.0)], [("a", "b")])
    assert one_or_cut_bound(g, Stages(2)) == pytest.approx(2.0)  # Lemma 3.3's 4 / 2, no cut paid


def test_identical_non_host_devices_only():
    assert "identical non-host" in applies(_slow_chain(3), Cluster.accelerators(2, cpus=1))


def test_the_one_device_load_is_not_shaved_so_the_gap_closes_exactly():
    import numpy as np

    from placement_dsl.evaluate import CostModel, evaluate
    from placement_dsl.placement import Placement

    rng = np.random.default_rng(0)
    g = Graph([Op(name=f"v{i}", work=float(rng.random()), out_bytes=1e6) for i in range(200)],
              [(f"v{i}", f"v{i + 1}") for i in range(199)])
    one = evaluate(Placement(g, Stages(4), np.zeros(g.n, dtype=np.int64)), CostModel.named("throughput")).objective
    # a bound shaved by 1e-12 left a gap of 1e-12 that the bounds command (gap target 0) kept searching
    assert one_or_cut_bound(g, Stages(4)) == pytest.approx(one, rel=1e-14)
