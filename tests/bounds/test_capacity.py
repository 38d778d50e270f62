"""The capacity bounds (speed and memory): below every placement on tiny graphs with a slow host CPU, and above
Lemma 3.3 where the CPU is slow or the accelerators' memory is short."""
from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds.capacity import capacity_bound, memory_bound, speed_bound
from placement_dsl.bounds.simple import simple_lower_bound
from placement_dsl.cluster import Cluster
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Throughput
from placement_dsl.problem import Problem
from placement_dsl.testing import optimum


@st.composite
def instances(draw: st.DrawFn) -> tuple[Graph, Cluster]:
    n = draw(st.integers(1, 5))
    ops = []
    for i in range(n):
        acc = float(draw(st.integers(0, 6)))
        ops.append(Op(name=f"v{i}", work={"accelerator": acc, "cpu": acc * draw(st.sampled_from([1, 3, 20]))},
                      out_bytes=float(draw(st.integers(0, 3))), param_bytes=float(draw(st.integers(0, 4)))))
    edges = [(f"v{i}", f"v{j}") for i, j in itertools.combinations(range(n), 2) if draw(st.booleans())]
    cluster = Cluster.accelerators(draw(st.integers(1, 3)), memory=draw(st.sampled_from([math.inf, 3.0, 6.0])),
                                   cpus=draw(st.integers(0, 1)))
    return Graph(ops, edges), cluster


@given(instances())
@settings(max_examples=60, deadline=None)
def test_the_capacity_bounds_are_below_every_placement(inst: tuple[Graph, Cluster]) -> None:
    graph, cluster = inst
    best = optimum(Problem(graph, cluster, Throughput()))
    if math.isfinite(best):
        assert capacity_bound(graph, cluster) <= best * (1 + 1e-9) + 1e-9


def test_a_slow_cpu_counts_for_the_work_it_can_do():
    g = Graph([Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 20.0}) for i in range(41)])
    c = Cluster.accelerators(2, cpus=1)
    assert simple_lower_bound(g, c) == pytest.approx(41 / 3)
    assert speed_bound(g, c) == pytest.approx(41 / 2.05)  # the CPU is a twentieth of a device


def test_what_the_accelerators_cannot_hold_runs_on_the_cpu():
    # 10 ops of 1 byte each, two accelerators of 3 bytes: at least 4 bytes on the CPU, the cheapest 4 ops there
    g = Graph([Op(name=f"v{i}", work={"accelerator": 0.1, "cpu": float(i + 1)}, param_bytes=1.0) for i in range(10)])
    c = Cluster.accelerators(2, memory=3.0, cpus=1)
    assert memory_bound(g, c) == pytest.approx(1 + 2 + 3 + 4)
    assert capacity_bound(g, c) == pytest.approx(10.0)
    assert memory_bound(g, Cluster.accelerators(2, memory=5.0, cpus=1)) == 0.0  # everything fits
