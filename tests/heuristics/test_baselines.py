"""Baselines (Tarnawski et al. §6-7): greedy, local search, PipeDream path DP, one device."""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.baselines import contract
from placement_dsl.heuristics.level_path import level_path

METHODS = ["greedy", "local-search", "pipedream", "one-device"]


def grouped_graph(n: int = 30, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    ops = [Op(name=f"v{i}", work={"accelerator": float(rng.integers(1, 10)), "cpu": float(rng.integers(10, 40))},
              out_bytes=float(rng.integers(1, 8)), param_bytes=float(rng.integers(1, 6)),
              group=f"g{i // 3}" if i % 5 == 0 and i < n - 3 else None) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, min(n, i + 5)) if rng.random() < 0.4]
    edges += [(f"v{i}", f"v{i + 1}") for i in range(n - 1)]
    return Graph(ops, edges)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_valid_memory_feasible_colocated_placements(method, seed):
    g = grouped_graph(seed=seed)
    need = float((g.param_bytes + g.activation_bytes).sum())
    cluster = Cluster.accelerators(4, memory=need / 2.5, cpus=1)
    model = CostModel.named("throughput")
    result = run(method, g, cluster, model=model, seed=seed)
    ev = evaluate(result.placement, model)
    if method == "one-device":  # one accelerator cannot hold the model: reported, not hidden
        assert not ev.valid and any(v.check == "memory" for v in ev.violations)
        return
    assert ev.valid, ev.violations
    for grp in g.groups:
        assert np.unique(result.placement.assign[grp]).size == 1


def test_local_search_reaches_a_local_optimum_no_single_move_improves():
    g = grouped_graph(12, seed=4)
    cluster = Cluster.stages(3)
    model = CostModel()
    result = run("local-search", g, cluster, model=model, seed=0, restarts=3)
    best = result.objective
    for G in np.unique(g.group_id):
        members = np.flatnonzero(g.group_id == G)
        for d in range(cluster.size):
            assign = result.placement.assign.copy()
            assign[members] = d
            from placement_dsl.placement import Placement
            assert evaluate(Placement(g, cluster, assign), model).objective >= best - 1e-9


def test_greedy_fills_accelerators_in_order_then_the_cpu():
    ops = [Op(name=f"v{i}", work=1.0, param_bytes=1.0) for i in range(7)]
    g = Graph(ops, [(f"v{i}", f"v{i + 1}") for i in range(6)])
    result = run("greedy", g, Cluster.accelerators(2, memory=3.0, cpus=1))
    assert result.placement.assign.tolist() == [0, 0, 0, 1, 1, 1, 2]


def test_contract_merges_groups_and_the_cycles_they_create():
    ops = [Op(name="a", group="x"), Op(name="b"), Op(name="c", group="x"), Op(name="d")]
    g = Graph(ops, [("a", "b"), ("b", "c"), ("c", "d")])
    units = [sorted(g.names[i] for i in u) for u in contract(g)]
    assert units == [["a", "b", "c"], ["d"]]


def test_pipedream_cuts_only_between_levels():
    # diamond a -> (b, c) -> d: b and c share a level, so they are never split
    g = Graph([Op(name=c, work=1.0) for c in "abcd"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    _, cuts = level_path(g)
    assert cuts.tolist() == [True, True, False, True, True]
    result = run("pipedream", g, Cluster.stages(4))
    assert result.placement.device_of("b") == result.placement.device_of("c")


def test_one_device_picks_the_fastest_accelerator():
    g = Graph([Op(name="a", work={"slow": 5.0, "fast": 2.0})])
    cluster = Cluster([{"name": "s", "kind": "slow"}, {"name": "f", "kind": "fast"}])
    assert run("one-device", g, cluster).placement.device_of("a") == "f"


def test_pipedream_on_tarnawski_layer_graphs(dnn_partitioning):
    import json

    from placement_dsl.io.dnn_partitioning import cluster_from_dict, graph_from_dict

    data = json.loads((dnn_partitioning / "throughput-inputs/LayerGraphs/bert24_inference.json").read_text())
    g, c = graph_from_dict(data), cluster_from_dict(data)
    model = CostModel.named("throughput")
    # Tarnawski Table 1: PipeDream and the contiguous DP optimum are both 17.79 on bert24 inference
    assert run("pipedream", g, c, model=model).objective == pytest.approx(17.79, abs=0.01)
    assert run("slicegraph", g, c, model=model).objective == pytest.approx(17.79, abs=0.01)


def test_pipedream_on_a_training_graph_splits_its_forward_levels(dnn_partitioning):
    from placement_dsl.io import load_workload

    w = load_workload(dnn_partitioning / "throughput-inputs/LayerGraphs/bert24_training.json")
    r = run("pipedream", w.graph, w.cluster, model=CostModel.named("throughput"))
    for g in w.graph.groups:
        assert len(set(r.placement.assign[g].tolist())) == 1
    assert r.objective == pytest.approx(41.75, abs=0.01)  # Tarnawski Table 1: the DP optimum


def test_local_search_ends_no_worse_than_greedy_or_slicegraph_it_restarts_from_their_better_split():
    # from random splits alone a GPT-3 graph ended above greedy (2.60 against 1.91 here; 13,669 against 983 at
    # 20,111 ops): every tensor cut between random devices, and single moves do not rejoin them
    from placement_dsl import zoo

    w = zoo.gpt3(layers=1, hidden=256, heads=4, vocab=1024)
    found = run("local-search", w.graph, w.cluster, seed=0)
    assert evaluate(found.placement).valid
    assert found.objective <= min(run(m, w.graph, w.cluster).objective for m in ("greedy", "slicegraph")) + 1e-9
    random_only = run("local-search", w.graph, w.cluster, seed=0, seeded=False)  # Tarnawski §6's baseline
    assert evaluate(random_only.placement).valid and random_only.objective > found.objective
