"""heuristics.kernels.priority_order: the one topological heap sort (SliceGraph's and BRKGA's Alg. 3, the
contraction's smallest-first renumbering)."""
from __future__ import annotations

import networkx as nx
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from placement_dsl.heuristics import contract, slicegraph
from placement_dsl.heuristics.kernels import priority_order


def _csr(n, edges):
    src = np.array([u for u, _ in edges], dtype=np.int64)
    dst = np.array([v for _, v in edges], dtype=np.int64)
    return contract.successor_csr(n, src, dst), np.bincount(dst, minlength=n).astype(np.int64)


dags = st.integers(1, 9).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] < e[1]),
                         max_size=20, unique=True)))


@given(dags, st.data())
def test_the_highest_priority_ready_node_comes_first(dag, data):
    n, edges = dag
    prio = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)), dtype=np.float64)
    (ptr, idx), indeg = _csr(n, edges)
    g = nx.DiGraph(edges)
    g.add_nodes_from(range(n))
    expected = list(nx.lexicographical_topological_sort(g, key=lambda v: (-prio[v], v)))
    assert priority_order(prio, ptr, idx, indeg).tolist() == expected


@given(dags)
def test_smallest_first_is_the_priority_order_of_minus_the_index(dag):
    n, edges = dag
    (ptr, idx), _ = _csr(n, edges)
    g = nx.DiGraph(edges)
    g.add_nodes_from(range(n))
    assert contract.smallest_first_order(n, ptr, idx).tolist() == list(nx.lexicographical_topological_sort(g))


def test_a_cycle_leaves_its_nodes_out():
    (ptr, idx), indeg = _csr(4, [(0, 1), (1, 2), (2, 1), (2, 3)])
    assert priority_order(np.zeros(4), ptr, idx, indeg).tolist() == [0]
    assert contract.smallest_first_order(4, ptr, idx).tolist() == [0]


def test_slicegraph_sorts_with_the_shared_kernel():
    assert slicegraph._kahn.py_func is priority_order.py_func  # a kernel, or numba's dispatcher once compiled
