"""Graph construction, arrays, CSR adjacency, topological order and every class of bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op


def diamond() -> Graph:
    ops = [Op(name=n, work={"accelerator": w, "cpu": 2 * w}, out_bytes=b, param_bytes=p)
           for n, w, b, p in [("a", 1, 4, 10), ("b", 2, 3, 0), ("c", 3, 2, 5), ("d", 4, 0, 1)]]
    return Graph(ops, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d"), ("a", "b")], name="diamond")


def test_construction_and_arrays():
    g = diamond()
    assert (g.n, g.m) == (4, 4)  # the duplicate edge is merged
    assert g.names == ("a", "b", "c", "d")
    np.testing.assert_array_equal(g.out_bytes, [4, 3, 2, 0])
    np.testing.assert_array_equal(g.param_bytes, [10, 0, 5, 1])
    np.testing.assert_array_equal(g.work("cpu"), [2, 4, 6, 8])
    assert g.work("fpga").tolist() == [math.inf] * 4  # unknown kind: not allowed
    assert g.kinds == {"accelerator", "cpu"}
    assert not g.is_training
    with pytest.raises(ValueError):
        g.out_bytes[0] = 1.0  # immutable arrays


def test_default_kind_and_scalar_work():
    g = Graph([Op(name="a", work=2.5), Op(name="b", work={"*": 1.0, "cpu": 7.0})])
    assert g.work("anything").tolist() == [2.5, 1.0]
    assert g.work("cpu").tolist() == [2.5, 7.0]


def test_csr_matches_edges():
    g = diamond()
    for i in range(g.n):
        assert sorted(g.successors(i).tolist()) == sorted(int(v) for u, v in zip(g.src, g.dst) if u == i)
        assert sorted(g.predecessors(i).tolist()) == sorted(int(u) for u, v in zip(g.src, g.dst) if v == i)
    assert g.succ_ptr[-1] == g.m and g.pred_ptr[-1] == g.m


def test_topological_order_and_rank():
    g = diamond()
    assert sorted(g.topo.tolist()) == list(range(g.n))
    assert all(g.rank[u] < g.rank[v] for u, v in zip(g.src, g.dst))
    assert np.array_equal(g.rank[g.topo], np.arange(g.n))


@given(st.integers(2, 12), st.data())
def test_random_dags_topo(n, data):
    edges = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    edges = [(f"v{min(u, v)}", f"v{max(u, v)}") for u, v in edges if u != v]
    g = Graph([Op(name=f"v{i}") for i in range(n)], edges)
    assert all(g.rank[u] < g.rank[v] for u, v in zip(g.src, g.dst))
    assert g.m == len(set(edges))
    nxg = g.to_networkx()
    assert set(nxg.edges) == set(edges) and nxg.number_of_nodes() == n


def test_groups_and_training_flags():
    g = Graph([Op(name="f", group="x"), Op(name="b", backward=True, group="x"), Op(name="c")], [("f", "b")])
    assert g.is_training
    assert [sorted(grp.tolist()) for grp in g.groups] == [[0, 1]]
    assert g.group_id[0] == g.group_id[1] != g.group_id[2]


def test_replace_and_equality():
    g = diamond()
    assert g.replace() == g
    h = g.replace(edges=[("a", "b")])
    assert h != g and h.m == 1


def test_cycle_is_printed():
    with pytest.raises(SpecError, match=r"cycle: (b -> c -> d -> b|c -> d -> b -> c|d -> b -> c -> d)"):
        Graph([Op(name=n) for n in "abcd"], [("a", "b"), ("b", "c"), ("c", "d"), ("d", "b")])


def test_self_loop():
    with pytest.raises(SpecError, match="self-loop on op 'a'"):
        Graph([Op(name="a")], [("a", "a")])


def test_dangling_edge_names_the_op():
    with pytest.raises(SpecError, match=r"edge 'a' -> 'zz' names unknown op 'zz'"):
        Graph([Op(name="a")], [("a", "zz")])


def test_duplicate_ids():
    with pytest.raises(SpecError, match="duplicate op name 'a'"):
        Graph([Op(name="a"), {"name": "a"}])


@pytest.mark.parametrize("field, value", [
    ("work", -1.0), ("work", math.nan), ("work", math.inf), ("out_bytes", -2.0),
    ("param_bytes", math.nan), ("activation_bytes", math.inf), ("work", {"cpu": -3.0}),
])
def test_bad_costs_name_the_op(field, value):
    with pytest.raises(SpecError, match=rf"op 'bad': {field}"):
        Graph([{"name": "ok"}, {"name": "bad", field: value}])


def test_empty_graph():
    with pytest.raises(SpecError, match="no ops"):
        Graph([], [])


@pytest.mark.parametrize("edge, message", [(("a",), "edge #0"), ({"from": "a"}, "'src' and 'dst'"), (3, "edge #0")])
def test_malformed_edges(edge, message):
    with pytest.raises(SpecError, match=message):
        Graph([Op(name="a"), Op(name="b")], [edge])


def test_malformed_op():
    with pytest.raises(SpecError, match="op #1"):
        Graph([Op(name="a"), 5])
    with pytest.raises(SpecError, match="op 'x': colour"):
        Graph([{"name": "x", "colour": 3}])
