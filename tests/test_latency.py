"""Tarnawski et al. (NeurIPS 2020), Table 4 baselines scored by the latency cost model.

Greedy, max-load DP and human-expert splits of the latency inputs (memory-bound clusters:
600 MB or 2 GB per accelerator, 8 CPUs), evaluated with ``CostModel.named("latency")``
(the invocation model of §4). What is and is not reproduced is explained in docs/latency.md.
"""
from __future__ import annotations

import json

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel, evaluate
from placement_dsl.heuristics import run

LATENCY = "latency-inputs"
INPUTS = {
    "bert3": "OperatorGraphs/bert_l-3_inference.json",
    "bert24": "LayerGraphs/bert24_inference.json",
    "resnet50": "LayerGraphs/resnet50_inference.json",
    "inceptionv3": "LayerGraphs/inceptionv3_inference.json",
    "gnmt": "LayerGraphs/gnmt_inference.json",
}
# Table 4, "Greedy" column
GREEDY = {"bert3": 416.20, "bert24": 100.22, "resnet50": 4197.06, "gnmt": 268.50}


def sig4(x: float) -> float:
    return float(f"{x:.4g}")


def load(dnn_partitioning, name):
    from placement_dsl.io import load_workload

    return load_workload(dnn_partitioning / LATENCY / INPUTS[name])


def with_cpus(cluster: Cluster, cpus: int, accelerators: int | None = None) -> Cluster:
    k = int((~cluster.host).sum()) if accelerators is None else accelerators
    return Cluster.accelerators(k, memory=float(cluster.memory[~cluster.host][0]), cpus=cpus)


def fewest_cpus_dp(graph, cluster):
    """The max-load DP on the fewest CPUs that keep the optimum of the full cluster.

    The reference DP (Tarnawski et al.'s dnn-partitioning code) fills its table over
    (cpus, accelerators, ideal) and prefers "leave this device empty" on ties, so the
    split it backtracks uses the fewest CPUs that reach the optimal max-load.
    """
    model = CostModel.named("throughput")
    best = run("dp", graph, cluster, model=model).objective
    total = int(cluster.host.sum())
    for cpus in range(total + 1):
        result = run("dp", graph, with_cpus(cluster, cpus), model=model)
        if result.objective <= best * (1 + 1e-9):
            return cpus, result
    raise AssertionError("unreachable: the full cluster reaches its own optimum")


# ---------------------------------------------------------------------------- greedy
@pytest.mark.shared
@pytest.mark.parametrize("name", sorted(GREEDY))
def test_table4_greedy_latency(dnn_partitioning, name):
    w = load(dnn_partitioning, name)
    result = run("greedy", w.graph, w.cluster, model=CostModel.named("latency"))
    ev = evaluate(result.placement, "latency")
    assert ev.valid, ev.violations
    assert sig4(ev.objective) == sig4(GREEDY[name])


@pytest.mark.shared
def test_table4_greedy_inceptionv3_places_everything_on_accelerators(dnn_partitioning):
    # Table 4 gives 2485.24; the value depends on which topological order is fixed (the
    # reference code pops a stack of ready nodes, we take the smallest rank), so only the
    # properties the paper states are checked: a memory-feasible split with no CPU node.
    w = load(dnn_partitioning, "inceptionv3")
    result = run("greedy", w.graph, w.cluster, model=CostModel.named("latency"))
    ev = evaluate(result.placement, "latency")
    assert ev.valid, ev.violations
    assert not w.cluster.host[result.placement.assign].any()


# ---------------------------------------------------------------------------- max-load DP
@pytest.mark.shared
def test_table4_maxload_dp_bert24(dnn_partitioning):
    w = load(dnn_partitioning, "bert24")
    result = run("dp", w.graph, w.cluster, model=CostModel.named("throughput"))
    ev = evaluate(result.placement, "latency")
    assert ev.valid
    assert sig4(ev.objective) == sig4(108.03)
    cpus, fewest = fewest_cpus_dp(w.graph, w.cluster)  # the tie-break changes nothing here
    assert cpus == 0 and sig4(evaluate(fewest.placement, "latency").objective) == sig4(108.03)


@pytest.mark.shared
def test_table4_maxload_dp_bert3_needs_the_fewest_cpus_tie_break(dnn_partitioning):
    w = load(dnn_partitioning, "bert3")
    cpus, result = fewest_cpus_dp(w.graph, w.cluster)
    assert cpus == 1
    ev = evaluate(result.placement, "latency")
    assert ev.valid
    assert sig4(ev.objective) == sig4(415.90)
    # a max-load-optimal split spread over all 8 CPUs is far slower for one sample
    spread = run("dp", w.graph, w.cluster, model=CostModel.named("throughput"))
    assert spread.objective == pytest.approx(result.objective, rel=1e-9)
    assert evaluate(spread.placement, "latency").objective > 2 * ev.objective


# ---------------------------------------------------------------------------- expert
def expert_placement(dnn_partitioning, name):
    """The expert split on as many accelerators as it uses (6; the latency input may have fewer)."""
    from placement_dsl.io.dnn_partitioning import placement_from_split

    w = load(dnn_partitioning, name)
    split = json.loads((dnn_partitioning / "human-experts" / f"{name}_inference_expert.json").read_text())
    k = sum(1 for dev in split["fpgas"] if dev["nodes"])
    cluster = with_cpus(w.cluster, int(w.cluster.host.sum()), max(k, int((~w.cluster.host).sum())))
    return placement_from_split(w.graph, cluster, split)


def memory_ratio(ev) -> float:
    return max(r.memory_used / r.memory_capacity for r in ev.devices if r.kind != "cpu")


@pytest.mark.shared
@pytest.mark.parametrize("name, latency, valid", [("bert24", 111.94, True), ("gnmt", 293.40, False)])
def test_table4_expert_latency(dnn_partitioning, name, latency, valid):
    ev = evaluate(expert_placement(dnn_partitioning, name), "latency")
    assert sig4(ev.objective) == sig4(latency)
    assert ev.valid is valid
    if not valid:  # dagger: "a slight (between 20% and 34%) violation"; GNMT's is 19.99 %
        assert 1.19 <= memory_ratio(ev) <= 1.34


@pytest.mark.shared
@pytest.mark.parametrize("name", ["resnet50", "inceptionv3"])
def test_table4_expert_oom(dnn_partitioning, name):
    ev = evaluate(expert_placement(dnn_partitioning, name), "latency")
    assert not ev.valid and memory_ratio(ev) > 3  # "OOM": more than a factor 3
