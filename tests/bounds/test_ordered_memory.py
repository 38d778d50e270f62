"""The hosts' share of DAG-ordered placements under the accelerators' memory (``bounds.ordered_memory``): at most the
brute-force optimum with the hosts last or first, refused with hosts between accelerators, and on a chain whose
memory forces a suffix onto the CPU equal to the work of the shortest suffix that must go there."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from placement_dsl.certify import certify
from placement_dsl.cluster import Cluster, Device
from placement_dsl.constraints import DagOrder, Memory
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.ordered_memory import host_side, ordered_memory_bound
from placement_dsl.objectives import Bottleneck
from placement_dsl.problem import Problem
from placement_dsl.testing import brute_force, optimum


def _cluster(memory: float, hosts_last: bool = True) -> Cluster:
    acc = [Device(name=f"acc{i}", kind="accelerator", memory=memory, bandwidth=4.0) for i in range(2)]
    cpu = [Device(name="cpu0", kind="cpu", bandwidth=4.0, host=True)]
    return Cluster(acc + cpu if hosts_last else cpu + acc)


@st.composite
def problems(draw):
    n = draw(st.integers(3, 6))
    ops = [Op(name=f"v{i}", work={"accelerator": draw(st.integers(1, 5)) * 1.0, "cpu": draw(st.integers(1, 9)) * 1.0},
              out_bytes=draw(st.integers(0, 4)) * 1.0, activation_bytes=draw(st.integers(0, 4)) * 1.0)
           for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for j in range(1, n) for i in range(j) if draw(st.booleans())]
    cluster = _cluster(draw(st.sampled_from([2.0, 3.0, 5.0])), draw(st.booleans()))
    return Problem(Graph(ops, edges), cluster, Bottleneck(), [Memory(), DagOrder()])


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate])
@given(problems())
def test_never_above_the_dag_ordered_optimum(problem):
    bound = ordered_memory_bound(problem.graph, problem.cluster)
    assert bound is not None
    assert bound <= optimum(problem) * (1 + 1e-9) + 1e-9  # inf where no placement is valid


def test_a_chain_leaves_the_cpu_the_suffix_the_accelerators_cannot_hold():
    # memory 3 per op, 2 accelerators of 6: the accelerators hold at most the first 4 ops, the CPU the rest
    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": float(i + 1)}, activation_bytes=3.0) for i in range(6)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(5)])
    problem = Problem(g, _cluster(6.0), Bottleneck(), [Memory(), DagOrder()])
    assert ordered_memory_bound(g, problem.cluster) == pytest.approx(5.0 + 6.0)
    assert brute_force(problem)[0] == pytest.approx(11.0)  # and no placement does better
    cert = certify(problem, budget=20, levels=("simple", "capacity", "ordered-memory"), stop_at_gap=False)
    assert cert.proved_by == "ordered-memory" and cert.bound == pytest.approx(11.0)


def test_hosts_between_accelerators_are_refused():
    devices = [Device(name="acc0", kind="accelerator", memory=4.0), Device(name="cpu0", kind="cpu", host=True),
               Device(name="acc1", kind="accelerator", memory=4.0)]
    cluster = Cluster(devices)
    assert host_side(cluster) is None
    g = Graph([Op(name="a", work=1.0, activation_bytes=9.0)])
    assert ordered_memory_bound(g, cluster) is None
