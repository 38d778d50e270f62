"""Graph construction, arrays, CSR adjacency, topological order and every class of bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op, unique_pairs


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


@pytest.mark.parametrize("ops, edges, message", [
    (None, (), r"graph 'graph': ops must be a list, got NoneType"),
    ("abc", (), r"ops must be a list, got str"),
    ([{"name": "a"}], None, r"edges must be a list, got NoneType"),
    ([{"name": "a"}], 5, r"edges must be a list, got int"),
    (["a"], (), r"op #0: expected a mapping of its fields, got str"),
])
def test_ops_and_edges_that_are_not_lists(ops, edges, message):
    with pytest.raises(SpecError, match=message):
        Graph(ops, edges)


@pytest.mark.parametrize("edge", ["ab", b"ab", ("a", 1.5), ("a", None), (True, "b")])
def test_an_edge_is_a_pair_of_names_not_a_two_letter_string(edge):
    with pytest.raises(SpecError, match=r"edge #0"):
        Graph([Op(name="a"), Op(name="b")], [edge])


def test_integer_and_numpy_ends_name_ops():
    g = Graph([Op(name="1"), Op(name="2")], [(1, np.int64(2))])
    assert g.edges == (("1", "2"),)


@pytest.mark.parametrize("field, value, message", [
    ("work", 1e308, r"op 'bad': work: .*work\['\*'\] must be at most 1e\+18"),
    ("work", 10**400, r"op 'bad': work: .*integer of 401 digits"),
    ("out_bytes", 10**400, r"op 'bad': out_bytes: .*integer of 401 digits"),
    ("param_bytes", 2e18, r"op 'bad': param_bytes: .*at most"),
    ("work", {"cpu": "fast"}, r"op 'bad': work.*not a number|op 'bad': work.*number"),
    ("work", True, r"op 'bad': work"),
    ("out_bytes", True, r"op 'bad': out_bytes"),
    ("backward", "no", r"op 'bad': backward: .*true or false"),
    ("backward", 2, r"op 'bad': backward"),
])
def test_costs_out_of_range_name_the_op(field, value, message):
    with pytest.raises(SpecError, match=message):
        Graph([{"name": "ok"}, {"name": "bad", field: value}])


def test_totals_beyond_the_sane_range_name_the_largest_op():
    ops = [Op(name="a", work=6e17), Op(name="b", work=7e17)]
    with pytest.raises(SpecError, match=r"work\['\*'\] add up to 1\.3e\+18.* op 'b' with 7e\+17"):
        Graph(ops)
    with pytest.raises(SpecError, match=r"param_bytes \+ activation_bytes add up"):
        Graph([Op(name="a", param_bytes=6e17, activation_bytes=6e17)])
    assert Graph([Op(name="a", work=5e17), Op(name="b", work=5e17)]).n == 2


def test_op_constructor_raises_one_line_spec_errors():
    with pytest.raises(SpecError, match=r"^op 'a': work: .*finite number >= 0, got -1\.0$"):
        Op(name="a", work=-1.0)
    with pytest.raises(SpecError, match=r"^op 'a': param_bytes: .*at most 1e\+18, got inf|finite"):
        Op(name="a", param_bytes=math.inf)


def test_json_numbers_are_taken_without_the_general_check(spy):
    """Reading 20,000 ops: every float of an op (its work per kind, bytes) went through ``limits.amount``, its
    message text formatted first (``work['gpu']``), and the topological order stepped through numpy scalars. A float
    in range is taken as it is; anything else still gets the general check and its one-line error."""
    import placement_dsl.graph as graph_module

    calls = spy(graph_module, "amount")
    ops = [{"name": f"v{i}", "work": {"accelerator": 1.5, "cpu": 3.0}, "param_bytes": 2.0, "out_bytes": 1.0,
            "activation_bytes": 0.5} for i in range(50)]
    g = Graph(ops, [[f"v{i}", f"v{i + 1}"] for i in range(49)])
    assert calls == [] and g.topo.tolist() == list(range(50)) and g.work("cpu").sum() == 150.0
    with pytest.raises(SpecError, match=r"op 'v0': work: work\['cpu'\] must be a finite number >= 0, got -3.0"):
        Graph([{**ops[0], "work": {"cpu": -3.0}}])
    assert calls == [-3.0] and Graph([{"name": "a", "work": 2}]).work("gpu").tolist() == [2.0]


def test_longest_path_over_the_whole_graph_or_the_subgraph_ops_induce():
    g = diamond()  # a -> b -> d, a -> c -> d
    w = np.array([1.0, 2.0, 3.0, 4.0])
    assert g.longest(w) == 8.0  # a, c, d
    assert g.longest(w, np.array([1, 3])) == 6.0  # b, d
    assert g.longest(w, np.array([0, 3])) == 4.0  # a and d are joined through b or c only: no path of both


def test_last_first_order_goes_depth_first_and_leaves_a_cycle_counted_in_indeg():
    from placement_dsl.graph import last_first_order

    succ = [[1, 2], [3], [3], [], [5], [4]]  # a diamond 0 -> {1, 2} -> 3 and a cycle 4 <-> 5
    indeg = [0, 1, 1, 2, 1, 1]
    assert last_first_order(succ, indeg, [0]) == [0, 2, 1, 3]  # the successor made ready last is taken first
    assert indeg == [0, 0, 0, 0, 1, 1]  # the cycle's nodes keep a predecessor


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=30))
def test_unique_pairs_are_numpys_unique_rows(pairs):
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    rows = np.unique(np.stack([a, b], axis=1), axis=0) if pairs else np.empty((0, 2), dtype=np.int64)
    got = unique_pairs(a, b)
    assert got.dtype == np.int64 and got.shape == rows.shape and np.array_equal(got, rows)
