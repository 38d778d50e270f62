"""Lower bounds and variable fixing against brute force on tiny graphs."""
from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_dsl.bounds.combinatorial import chain_bound, chain_data, position_windows
from placement_dsl.bounds.simple import simple_lower_bound
from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.placement import Placement


@st.composite
def instances(draw: st.DrawFn) -> tuple[Graph, Cluster]:
    n = draw(st.integers(2, 5))
    k = draw(st.integers(1, 2))
    cpus = draw(st.integers(0, 1)) if k < 3 else 0
    slow = draw(st.sampled_from([2.0, 10.0]))
    ops = []
    for i in range(n):
        acc = draw(st.integers(0, 6))
        ops.append(Op(
            name=f"v{i}", work={"accelerator": float(acc), "cpu": slow * acc},
            out_bytes=float(draw(st.integers(0, 3))), param_bytes=float(draw(st.integers(0, 2))),
            backward=draw(st.booleans()) if i >= n // 2 else False,
            group=draw(st.sampled_from([None, None, "g"])),
        ))
    edges = [(f"v{i}", f"v{j}") for i, j in itertools.combinations(range(n), 2) if draw(st.booleans())]
    memory = draw(st.sampled_from([math.inf, 4.0]))
    return Graph(ops, edges), Cluster.accelerators(k, memory=memory, cpus=cpus)


def _device_order(p: Placement) -> list[int] | None:
    """A pipeline order of the devices if the forward quotient graph is acyclic, else None."""
    g = p.graph
    fw = ~g.backward[g.src] & ~g.backward[g.dst]
    du, dv = p.assign[g.src[fw]], p.assign[g.dst[fw]]
    q = nx.DiGraph()
    q.add_nodes_from(range(p.cluster.size))
    q.add_edges_from((int(a), int(b)) for a, b in zip(du, dv) if a != b)
    if not nx.is_directed_acyclic_graph(q):
        return None
    return list(nx.lexicographical_topological_sort(q))


def _dag_ordered(graph: Graph, cluster: Cluster):
    """Every valid DAG-ordered placement with its objective and a pipeline order."""
    for assign in itertools.product(range(cluster.size), repeat=graph.n):
        p = Placement(graph, cluster, list(assign))
        order = _device_order(p)
        if order is None:
            continue
        ev = evaluate(p)
        if ev.valid:
            yield p, ev.objective, order


@given(instances())
def test_chain_bound_below_dag_ordered_optimum(inst: tuple[Graph, Cluster]) -> None:
    graph, cluster = inst
    best = min((obj for _, obj, _ in _dag_ordered(graph, cluster)), default=math.inf)
    bound = chain_bound(graph, cluster)
    assert simple_lower_bound(graph, cluster) <= bound + 1e-9
    assert bound <= best + 1e-9


@given(instances())
def test_windows_admit_every_placement_within_target(inst: tuple[Graph, Cluster]) -> None:
    graph, cluster = inst
    data = chain_data(graph, cluster)
    acc = [int(i) for i in np.flatnonzero(~cluster.host)]
    for p, obj, order in _dag_ordered(graph, cluster):
        allowed, cpu_ok = position_windows(graph, cluster, obj, data)
        acc_order = [d for d in order if d in acc]
        for gid, dev in zip(data.group, p.assign):
            if cluster.host[dev]:
                gap = sum(1 for d in order[: order.index(dev)] if d in acc) + 1
                assert cpu_ok[gid, gap - 1], (p.assign, gid, gap)
            else:
                assert allowed[gid, acc_order.index(dev)], (p.assign, gid, dev)


def test_chain_bound_on_a_chain() -> None:
    g = Graph([Op(name=f"v{i}", work=w) for i, w in enumerate([1.0, 1.0, 4.0, 1.0, 1.0])],
              [(f"v{i}", f"v{i + 1}") for i in range(4)])
    c = Cluster.stages(2)
    # v2 must share a stage with both its ancestors (6) or its descendants (6)
    assert chain_bound(g, c) == pytest.approx(6.0)
    allowed, _ = position_windows(g, c, 5.9)
    assert not allowed.any(axis=1).all()


def test_chain_data_contracts_groups_and_counts_cpu_slack() -> None:
    ops = [Op(name="a", work={"accelerator": 1.0, "cpu": 10.0}, group="x"),
           Op(name="b", work={"accelerator": 2.0, "cpu": 20.0}),
           Op(name="c", work={"accelerator": 3.0, "cpu": 30.0}, group="x", backward=True)]
    g = Graph(ops, [("a", "b"), ("b", "c")])
    d = chain_data(g, Cluster.accelerators(2, cpus=1))
    assert d.size == 2 and d.k == 2 and d.l == 1
    assert d.rho == pytest.approx(0.1)
    assert len(d.chain_edges) == 1  # b -> c is a backward edge: not part of the chain
    assert sorted(d.work) == [2.0, 4.0]


@pytest.fixture
def shallow_stack():
    """Python's recursion limit 300 frames above the caller: a bound that recurses once per op fails on any graph
    much larger than that, whatever its size."""
    import inspect
    import sys

    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack(0)) + 300)
    yield
    sys.setrecursionlimit(saved)


def _long_chain(n: int) -> Graph:
    ops = [Op(name=f"v{i}", work={"accelerator": 1 + i % 7, "cpu": 50 + i % 5}, out_bytes=1 + i % 3) for i in range(n)]
    return Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(n - 1)], name=f"chain{n}")


def _wide(n: int) -> Graph:
    mid = [Op(name=f"w{i}", work={"accelerator": 1 + i % 5, "cpu": 400 + i % 9}, out_bytes=1) for i in range(n - 2)]
    edges = [("s", m.name) for m in mid] + [(m.name, "t") for m in mid]
    return Graph([Op(name="s", work=1, out_bytes=1), *mid, Op(name="t", work=1)], edges, name=f"wide{n}")


@pytest.mark.parametrize("graph", [_long_chain(20_000), _wide(2_000)], ids=["chain-20k", "wide-2k"])
def test_closed_form_bounds_recurse_no_deeper_than_a_constant(graph, shallow_stack):
    # the packing bound's search for a bin's items went one Python frame per item: a 2,000-op profile raised
    # RecursionError in `placement-dsl bounds`; every closed-form bound now runs within a constant depth
    from placement_dsl.bounds import local
    from placement_dsl.bounds.latency import critical_path_bound
    from placement_dsl.bounds.makespan import critical_path_bound as makespan_path_bound
    from placement_dsl.bounds.packing import heavy_packing, packing_bound
    from placement_dsl.bounds.pigeonhole import pigeonhole_bound
    from placement_dsl.constraints import Contiguous
    from placement_dsl.objectives import Latency, Throughput
    from placement_dsl.problem import Problem

    cluster = Cluster.accelerators(4, cpus=1)
    simple = simple_lower_bound(graph, cluster)
    packing = packing_bound(graph, cluster, budget=20_000)
    assert packing >= pigeonhole_bound(graph, cluster) - 1e-9
    heavy = heavy_packing(graph, cluster, budget=20_000)
    assert heavy is not None and heavy[0] == packing  # the packing bound, and bins of the units it says must spread
    units = np.concatenate([np.zeros(0, np.int64), *heavy[1]])
    assert len(np.unique(units)) == len(units)  # each unit in one bin
    assert chain_bound(graph, cluster) >= simple - 1e-9 and simple > 0  # the chain bound is at least the simple one
    assert critical_path_bound(Problem(graph, cluster, Latency()))[0] > 0
    assert makespan_path_bound(graph, cluster) > 0
    contiguous = Problem(graph, Cluster.accelerators(4), Throughput(), [Contiguous()])
    if local.problem_applies(contiguous) is None:
        assert local.problem_bound(contiguous)[0] > 0
