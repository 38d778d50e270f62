"""Sums over every ideal walked level by level (placement_dsl/heuristics/ideal_walk.py): the same sums as a brute
force over the ideals, refused beyond the cap before it is reached, stopped at the deadline, and the memory bounds
computed with it load no compiled kernel (numba's import and cache cost a second of CPU a process)."""
from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.base import TimeLimitReached
from placement_dsl.heuristics.ideal_walk import ideal_sums_walked


def _graph(n: int, edges: list[tuple[int, int]], name: str = "g") -> Graph:
    return Graph([Op(name=f"v{i}", work=1.0) for i in range(n)], [(f"v{a}", f"v{b}") for a, b in edges], name=name)


def _brute(graph: Graph, values: np.ndarray) -> list[tuple[float, ...]]:
    rows = []
    for chosen in itertools.product([False, True], repeat=graph.n):
        inside = np.array(chosen)
        if all(inside[a] or not inside[b] for a, b in zip(graph.src.tolist(), graph.dst.tolist())):
            rows.append(tuple(values[inside].sum(axis=0).round(9)))
    return sorted(rows)


@st.composite
def dags(draw):
    n = draw(st.integers(1, 8))
    edges = [(i, j) for j in range(1, n) for i in range(j) if draw(st.integers(0, 3)) == 0]
    values = np.array([[draw(st.integers(0, 9)), draw(st.integers(0, 9))] for _ in range(n)], dtype=float)
    return _graph(n, edges), values


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(dags())
def test_one_row_per_ideal_with_its_sums(case):
    graph, values = case
    out = ideal_sums_walked(graph, values, cap=1000)
    assert sorted(tuple(r) for r in out.round(9)) == _brute(graph, values)


def test_a_wide_antichain_is_refused_before_its_ideals_are_walked():
    star = _graph(41, [(0, i) for i in range(1, 41)])  # 40 ops side by side: 2^40 + 1 ideals
    with pytest.raises(SpecError, match="more than 1000 ideals"):
        ideal_sums_walked(star, np.ones((41, 1)), cap=1000)


def test_parallel_chains_are_refused_by_their_count():
    chains = _graph(4 * 500, [(c * 500 + i, c * 500 + i + 1) for c in range(4) for i in range(499)])
    with pytest.raises(SpecError, match="more than 100000 ideals"):
        ideal_sums_walked(chains, np.ones((2000, 1)), cap=100_000)


def test_a_passed_deadline_stops_the_walk():
    chain = _graph(300, [(i, i + 1) for i in range(299)])
    with pytest.raises(TimeLimitReached, match="walking the ideals"):
        ideal_sums_walked(chain, np.ones((300, 1)), cap=1000, deadline=0.0)


def test_a_long_chain_is_walked_without_recursion():
    n = 20_000
    chain = _graph(n, [(i, i + 1) for i in range(n - 1)])
    out = ideal_sums_walked(chain, np.ones((n, 1)), cap=n + 1)
    assert out[:, 0].tolist() == list(range(n + 1))


def test_the_memory_bounds_load_no_compiled_kernel():
    """The host's share on 2,000 chained ops beside a CPU: the walk in Python, numba never imported (through the
    DP's lattice and its sums it loaded numba and the kernels' cache: a second of CPU before the bound)."""
    code = textwrap.dedent("""
        import sys
        from placement_dsl.cluster import Cluster
        from placement_dsl.constraints import Contiguous, DagOrder, Memory
        from placement_dsl.graph import Graph, Op
        from placement_dsl.heuristics.host_share import host_share_bound
        from placement_dsl.heuristics.ordered_memory import ordered_memory_bound
        from placement_dsl.objectives import Throughput
        from placement_dsl.problem import Problem
        n = 2000
        ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 1.0 + i % 7}, param_bytes=1e9) for i in range(n)]
        g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(n - 1)])
        cluster = Cluster.accelerators(2, memory=16e9, cpus=1)
        share = host_share_bound(Problem(g, cluster, Throughput(), [Memory(), Contiguous()]))
        ordered = ordered_memory_bound(g, cluster)
        assert share > 0 and ordered >= share, (share, ordered)
        print("numba" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
