"""The pigeonhole bound (bounds/pigeonhole.py) against brute force on tiny graphs, with the packing bound
(bounds/packing.py) on the same structured draws."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.bounds.packing import packing_bound
from placement_dsl.bounds.pigeonhole import pigeonhole_bound
from placement_dsl.bounds.simple import simple_lower_bound
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Throughput
from placement_dsl.problem import Problem
from placement_dsl.testing import optimum, structured_problems, without


def layers(works: list[float], cpu_factor: float, tensor: float = 0.0, groups: bool = False) -> Graph:
    """A chain of layers; with ``groups`` consecutive pairs must share a device."""
    ops = [Op(name=f"v{i}", work={"accelerator": w, "cpu": w * cpu_factor}, out_bytes=tensor,
              group=f"g{i // 2}" if groups else None) for i, w in enumerate(works)]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(len(works) - 1)])


@pytest.mark.parametrize("bound", [pigeonhole_bound, packing_bound], ids=["pigeonhole", "packing"])
@settings(max_examples=60, deadline=None)
@given(problem=structured_problems("contiguous"))
def test_never_above_the_brute_force_optimum(bound, problem):
    # the pigeonhole bound and the packing bound that dominates it (tests/test_packing.py), over every placement
    free = without(problem, Contiguous)
    assert bound(free.graph, free.cluster) <= optimum(free) + 1e-9


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([1.0, 2.0, 3.0, 5.0]), min_size=3, max_size=6), st.sampled_from([1.5, 3.0, 10.0]),
       st.sampled_from([0.0, 0.5]), st.integers(1, 2), st.booleans())
def test_never_above_the_optimum_on_layers_with_a_cpu(works, cpu_factor, tensor, accelerators, groups):
    problem = Problem(layers(works, cpu_factor, tensor, groups), Cluster.accelerators(accelerators, cpus=1), Throughput(), [])
    assert pigeonhole_bound(problem.graph, problem.cluster) <= optimum(problem) + 1e-9


def test_binds_where_lemma_3_3_does_not():
    """Five equal layers, two accelerators, a CPU ten times slower: three layers share one accelerator."""
    problem = Problem(layers([2.0] * 5, 10.0), Cluster.accelerators(2, cpus=1), Throughput(), [])
    bound = pigeonhole_bound(problem.graph, problem.cluster)
    assert bound == pytest.approx(6.0) == pytest.approx(optimum(problem))
    assert simple_lower_bound(problem.graph, problem.cluster) < bound


def test_a_cpu_fast_enough_releases_the_layers_at_its_time():
    """With the CPU only 1.5 times slower, at T = 3 any layer may sit on it: the bound stops at 3 (optimum 4)."""
    problem = Problem(layers([2.0] * 5, 1.5), Cluster.accelerators(2, cpus=1), Throughput(), [])
    assert pigeonhole_bound(problem.graph, problem.cluster) == pytest.approx(3.0)
    assert optimum(problem) == pytest.approx(4.0)


def test_groups_are_units():
    """Six layers in three colocated pairs on two accelerators: one accelerator runs two pairs."""
    problem = Problem(layers([1.0] * 6, 10.0, groups=True), Cluster.accelerators(2, cpus=1), Throughput(), [])
    assert pigeonhole_bound(problem.graph, problem.cluster) == pytest.approx(4.0) == pytest.approx(optimum(problem))


def test_certify_simple_level_carries_the_pigeonhole_bound():
    from placement_dsl.certify import certify

    problem = Problem(layers([2.0] * 5, 10.0), Cluster.accelerators(2, cpus=1), Throughput(), [])
    cert = certify(problem, levels=("simple",), gap=0.0)
    row = next(r for r in cert.levels if r.level == "simple")
    assert row.bound == pytest.approx(6.0) and row.bound <= cert.objective + 1e-9
