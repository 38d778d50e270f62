"""SliceGraph: segment costs (Archer Lemma 4.1), the slicing DP (Alg. 1), Kahn (Alg. 3), Thm 4.3 / Lemma B.2."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.errors import InfeasibleError, SpecError
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.segments import SegmentCosts
from placement_dsl.heuristics.slicegraph import Slicer, kahn, slicegraph
from placement_dsl.placement import Placement

BOTTLENECK = CostModel.named("bottleneck")


@st.composite
def small_graphs(draw, max_n: int = 7) -> Graph:
    n = draw(st.integers(1, max_n))
    ops = [Op(name=f"v{i}", work=draw(st.integers(0, 9)), out_bytes=draw(st.integers(0, 6)),
              param_bytes=draw(st.integers(0, 5))) for i in range(n)]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=12)) if pairs else []
    return Graph(ops, [(f"v{i}", f"v{j}") for i, j in chosen])


def _sliced(graph: Graph, cluster: Cluster, order: np.ndarray, cuts: tuple[int, ...]) -> Placement:
    bounds = (0, *cuts, graph.n)
    assign = np.empty(graph.n, dtype=np.int64)
    for t in range(len(bounds) - 1):
        assign[order[bounds[t]:bounds[t + 1]]] = t
    return Placement(graph, cluster, assign)


def brute_force(graph: Graph, cluster: Cluster, order: np.ndarray, model: CostModel) -> float:
    """Best of all stars-and-bars cuts of ``order`` into ``cluster.size`` stages, by the cost model."""
    k = cluster.size
    return min(evaluate(_sliced(graph, cluster, order, cuts), model).objective
               for cuts in itertools.combinations_with_replacement(range(graph.n + 1), k - 1))


@given(small_graphs(), st.integers(1, 3), st.sampled_from([2.0, 6.0, float("inf")]),
       st.sampled_from(["none", "half", "full"]), st.randoms(use_true_random=False))
def test_dp_equals_brute_force(graph, k, memory, overlap, rnd):
    cluster = Cluster.stages(k, memory=memory, bandwidth=2.0)
    model = CostModel.named("bottleneck", overlap=overlap)
    order = kahn(graph, np.array([rnd.random() for _ in range(graph.n)]))
    result = slicegraph(graph, cluster, model=model, order=order)
    assert result.objective == pytest.approx(brute_force(graph, cluster, order, model), rel=1e-9, abs=1e-12)
    assert result.objective == pytest.approx(result.info["dp_value"], rel=1e-9, abs=1e-12)


@given(small_graphs(), st.integers(2, 3))
def test_dp_hard_memory_equals_brute_force_over_valid_slicings(graph, k):
    cluster = Cluster.stages(k, memory=8.0)
    model = CostModel.named("throughput")
    order = graph.topo
    valid = [evaluate(_sliced(graph, cluster, order, c), model)
             for c in itertools.combinations_with_replacement(range(graph.n + 1), k - 1)]
    valid = [e.objective for e in valid if e.valid]
    if not valid:
        with pytest.raises(InfeasibleError):
            slicegraph(graph, cluster, model=model)
        return
    result = slicegraph(graph, cluster, model=model)
    assert evaluate(result.placement, model).valid
    assert result.objective == pytest.approx(min(valid))


@given(small_graphs(max_n=9), st.data())
def test_segment_costs_equal_the_cost_model(graph, data):
    cluster = Cluster.stages(3, memory=4.0, bandwidth=0.5)
    order = kahn(graph, np.array(data.draw(st.lists(st.floats(0, 1), min_size=graph.n, max_size=graph.n))))
    costs = SegmentCosts(graph, cluster, order, BOTTLENECK)
    i = data.draw(st.integers(0, graph.n))
    j = data.draw(st.integers(i, graph.n))
    load = evaluate(_sliced(graph, cluster, order, (i, j)), BOTTLENECK).devices[1].load
    assert costs.cost(i, j) == pytest.approx(load, abs=1e-12)
    assert costs.column(j)[i] == pytest.approx(load, abs=1e-12)


def test_segment_table_matches_columns():
    rng = np.random.default_rng(3)
    n = 40
    ops = [Op(name=f"v{i}", work=float(rng.random()), out_bytes=float(rng.integers(0, 5))) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, min(n, i + 6)) if rng.random() < 0.4]
    g = Graph(ops, edges)
    costs = SegmentCosts(g, Cluster.stages(4), g.topo)
    table = costs.table()
    for j in range(n + 1):
        np.testing.assert_allclose(table[: j + 1, j], costs.column(j), atol=1e-12)
    assert np.isinf(table[5, 4]) and table[7, 7] == 0.0


def test_kahn_reproduces_topological_order_and_breaks_ties_by_priority():
    g = Graph([Op(name=c) for c in "abcd"], [("a", "d"), ("b", "d"), ("c", "d")])
    assert kahn(g, -g.rank.astype(float)).tolist() == g.topo.tolist()
    assert kahn(g, np.array([0.1, 0.3, 0.2, 0.9])).tolist() == [1, 2, 0, 3]
    with pytest.raises(SpecError):
        kahn(g, np.zeros(3))


def lemma_b2_graph(k: int, eps: float = 0.01) -> Graph:
    """Archer Lemma B.2: k heavy ops (1 - eps), k light ops (eps), one edge (1, k+1) of size 10k."""
    heavy = [Op(name=f"h{i}", work=1 - eps, out_bytes=10 * k if i == 1 else 0) for i in range(1, k + 1)]
    light = [Op(name=f"l{i}", work=eps) for i in range(k + 1, 2 * k + 1)]
    return Graph(heavy + light, [("h1", f"l{k + 1}")])


@pytest.mark.parametrize("k", [2, 3, 5])
def test_lemma_b2_worst_order_costs_k_opt_and_theorem_4_3_priorities_reach_opt(k):
    g = lemma_b2_graph(k)
    cluster = Cluster.stages(k)
    idx = g.index
    worst = [idx[f"h{i}"] for i in range(1, k + 1)] + [idx[f"l{i}"] for i in range(2 * k, k, -1)]
    assert slicegraph(g, cluster, order=np.array(worst)).objective == pytest.approx(k)
    # Theorem 4.3: priority k - (block index) for the optimal blocks {i, k+i}
    prio = np.empty(g.n)
    for i in range(1, k + 1):
        prio[idx[f"h{i}"]] = prio[idx[f"l{k + i}"]] = k - i
    best = slicegraph(g, cluster, priorities=prio)
    assert best.objective == pytest.approx(1.0)
    assert evaluate(best.placement, CostModel()).valid


def test_slicer_respects_colocation_groups():
    ops = [Op(name=f"v{i}", work=1.0, group="g" if i in (1, 4) else None) for i in range(6)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(5)])
    result = run("slicegraph", g, Cluster.stages(3))
    assert result.placement.device_of("v1") == result.placement.device_of("v4")
    assert evaluate(result.placement).valid


def test_heterogeneous_devices_slice_with_their_own_costs():
    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 10.0}, out_bytes=1.0) for i in range(8)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(7)])
    cluster = Cluster.accelerators(2, cpus=1)
    order = g.topo
    assert slicegraph(g, cluster).objective == pytest.approx(brute_force(g, cluster, order, CostModel()))


def test_cutoff_returns_inf_above_and_the_optimum_below():
    g = lemma_b2_graph(4)
    slicer = Slicer(g, Cluster.stages(4), BOTTLENECK)
    value, _ = slicer.solve(g.topo)
    assert slicer.solve(g.topo, cutoff=value * 0.99)[0] == float("inf")
    assert slicer.solve(g.topo, cutoff=value)[0] == pytest.approx(value)


def test_slicegraph_rejects_a_non_topological_order():
    g = Graph([Op(name="a"), Op(name="b")], [("a", "b")])
    with pytest.raises(SpecError, match="not topological"):
        slicegraph(g, Cluster.stages(2), order=np.array([1, 0]))


@pytest.mark.slow
def test_large_graph_streams_without_a_dense_table():
    rng = np.random.default_rng(0)
    n = 5000
    src = np.arange(n - 1)
    extra = rng.integers(0, n - 10, 3000)
    edges = list(zip(src, src + 1)) + list(zip(extra, extra + rng.integers(2, 10, extra.size)))
    g = Graph([Op(name=str(i), work=float(rng.random()), out_bytes=1.0) for i in range(n)],
              [(str(a), str(b)) for a, b in edges])
    result = run("slicegraph", g, Cluster.stages(16))
    assert result.objective >= g.work("*").sum() / 16


PAPER_DP = {"bert24": 41.75, "resnet50": 78.63, "gnmt": 107.00, "inceptionv3": 122.76}  # Tarnawski Table 1, dp


@pytest.mark.parametrize("name", sorted(PAPER_DP))
def test_training_graphs_slice_their_forward_projection_close_to_the_dp(dnn_partitioning, name):
    from placement_dsl.io import load_workload
    w = load_workload(dnn_partitioning / f"throughput-inputs/LayerGraphs/{name}_training.json")
    r = slicegraph(w.graph, w.cluster)
    assert r.placement.graph is w.graph
    assert r.objective == pytest.approx(r.info["dp_value"], rel=1e-9)  # the projection's costs are exact
    assert PAPER_DP[name] * (1 - 1e-3) <= r.objective <= PAPER_DP[name] * 1.02


def test_training_graph_keeps_forward_and_backward_partners_together():
    from placement_dsl import zoo
    w = zoo.get("transformer-small-train")
    r = slicegraph(w.graph, w.cluster)
    assign = r.placement.assign
    for g in w.graph.groups:
        assert len(set(assign[g].tolist())) == 1
    assert evaluate(r.placement, CostModel()).objective == pytest.approx(r.info["dp_value"])


@st.composite
def graphs_with_cpu_only_and_accelerator_only_ops(draw) -> Graph:
    n = draw(st.integers(2, 6))
    kinds = [draw(st.sampled_from(["both", "accelerator", "cpu"])) for _ in range(n)]
    work = {"both": {"accelerator": 2.0, "cpu": 5.0}, "accelerator": {"accelerator": 3.0}, "cpu": {"cpu": 1.0}}
    ops = [Op(name=f"v{i}", work=work[kinds[i]], out_bytes=draw(st.integers(0, 4))) for i in range(n)]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=8))
    return Graph(ops, [(f"v{i}", f"v{j}") for i, j in chosen])


@given(graphs_with_cpu_only_and_accelerator_only_ops(), st.randoms(use_true_random=False))
def test_dp_equals_brute_force_when_some_ops_cannot_run_on_a_device_kind(graph, rnd):
    """A segment's work on a kind is finite iff it has no op that kind cannot run (no inf - inf)."""
    cluster = Cluster.accelerators(2, cpus=1, bandwidth=2.0)
    model = CostModel.named("throughput")
    order = kahn(graph, np.array([rnd.random() for _ in range(graph.n)]))
    best = brute_force(graph, cluster, order, model)
    if not np.isfinite(best):
        return
    result = slicegraph(graph, cluster, model=model, order=order)
    assert result.objective == pytest.approx(best, rel=1e-9, abs=1e-12)
    costs = SegmentCosts(graph, cluster, order, model, device=2)  # the CPU: inf where it cannot run an op
    for j in range(graph.n + 1):
        column = costs.column(j)
        for i in range(j):
            expected = evaluate(_single(graph, cluster, order[i:j]), model).devices[2].load
            if np.isinf(expected):
                assert np.isinf(column[i])
            else:
                assert column[i] == pytest.approx(expected, rel=1e-9, abs=1e-12)


def _single(graph: Graph, cluster: Cluster, members: np.ndarray):
    assign = np.zeros(graph.n, dtype=np.int64)
    assign[members] = 2
    return Placement(graph, cluster, assign)


def test_operator_graph_with_a_host_cpu_slices_close_to_the_dp(dnn_partitioning):
    """Along the graph's own order every cut of BERT's operator graph pays for the weights (source ops) read
    past it, so the best slicing was one accelerator (49.35 against the DP's 27.92); the DFS order DPL
    slices keeps each weight beside its reader."""
    from placement_dsl.io import load_workload
    w = load_workload(dnn_partitioning / "throughput-inputs/OperatorGraphs/bert_l-3_inference.json")
    assert w.cluster.host.any()
    sliced, exact = slicegraph(w.graph, w.cluster), run("dp", w.graph, w.cluster)
    assert len(set(sliced.placement.assign.tolist())) > 1
    assert exact.objective <= sliced.objective <= exact.objective * 1.03


def test_beside_a_slow_host_the_dp_s_cutoff_is_the_slicing_over_the_accelerators(monkeypatch):
    """The work-balanced slicing gives a slow host CPU its share of the ops, so its cost was the DP's cutoff and
    every segment stayed alive (31 s against 1.6 s on 20,000 ops onto 64 accelerators and a CPU); the balanced
    slicing over the accelerators, the host left empty, is the tighter cutoff."""
    from placement_dsl.heuristics import slice_kernels as sk

    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 30.0}) for i in range(12)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(11)])
    cluster = Cluster.accelerators(3, cpus=1)
    slicer = Slicer(g, cluster)
    order = g.topo.copy()
    allowed = slicer.allowed(order)
    assert slicer.spread_bounds(order, allowed).tolist() == [0, 4, 8, 12, 12]
    assert slicer.spread_value(order, allowed) == pytest.approx(4.0)
    assert slicer.balanced_value(order, allowed) == pytest.approx(90.0)  # 3 ops on the CPU
    cutoffs = []
    real = sk.slice_dp

    def recording(*args):
        cutoffs.append(args[-4])
        return real(*args)
    monkeypatch.setattr(sk, "slice_dp", recording)
    value, _ = slicer.solve(order)
    assert value == pytest.approx(4.0) and cutoffs[0] <= 4.0 + 1e-9


def test_a_stopped_slicing_beside_a_slow_host_returns_the_slicing_over_the_accelerators(monkeypatch):
    from placement_dsl.heuristics import slice_kernels as sk

    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 30.0}) for i in range(12)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(11)])
    slicer = Slicer(g, Cluster.accelerators(3, cpus=1))
    monkeypatch.setattr(sk, "slice_dp", lambda *args: (float("nan"), None, np.ones(4, dtype=np.int64)))
    value, bounds = slicer.solve(g.topo.copy())
    assert np.isnan(value) and bounds.tolist() == [0, 4, 8, 12, 12]  # not the balanced [0, 3, 6, 9, 12]: 90 on the CPU
