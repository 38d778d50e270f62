"""DPL's cheap starts where no slicing bounds it (a backward pass, or a graph below the slicer's size): the DFS
order cut into 1..k work-balanced stages on the accelerators. The best of them, when near the capacity bound,
starts DPL's descending feasibility runs instead of the unpruned sweep over every pair of prefixes (ResNet-50
training: 15,753 pairs in Python, 2 s); the optimum found is the same."""
from __future__ import annotations

import pytest

from placement_dsl.evaluate import CostModel
from placement_dsl.heuristics import ideal_solve, ideals, run
from placement_dsl.heuristics.ideals import balanced_prefix_splits, search, setup
from placement_dsl.io import load_workload


@pytest.fixture(scope="module")
def training(dnn_partitioning):
    w = load_workload(dnn_partitioning / "throughput-inputs" / "LayerGraphs" / "resnet50_training.json")
    return w.graph, w.cluster  # 6 accelerators and a CPU


def test_balanced_prefix_splits_start_dpl_below_the_unpruned_sweep_s_pairs_with_the_same_optimum(training):
    graph, cluster = training
    su = setup(graph, cluster, CostModel(), False, True)
    starts = balanced_prefix_splits(su)
    assert len(starts) == 6 and all(sum(s[0].size for s in split) == su.con.n_nodes for split in starts)
    plain, plain_info = search(su, linearize=True, max_ideals=100_000, upper_bound=None)
    cut, cut_info = search(su, linearize=True, max_ideals=100_000, upper_bound=None, candidates=starts)
    assert cut.value == pytest.approx(plain.value, rel=1e-12)
    assert cut_info["runs"] > 1 and cut_info["pairs"] < plain_info["pairs"] / 2


def test_a_candidate_far_from_the_capacity_bound_is_not_taken(training, monkeypatch):
    monkeypatch.setattr(ideal_solve, "CANDIDATE_BAND", 0.0)  # every candidate too far: the unpruned sweep
    graph, cluster = training
    su = setup(graph, cluster, CostModel(), False, True)
    plain, plain_info = search(su, linearize=True, max_ideals=100_000, upper_bound=None)
    cut, cut_info = search(su, linearize=True, max_ideals=100_000, upper_bound=None,
                           candidates=balanced_prefix_splits(su))
    assert cut_info["runs"] == 1 and cut_info["pairs"] == plain_info["pairs"] and cut.value == plain.value


def test_no_candidates_with_replicas(training):
    graph, cluster = training
    assert balanced_prefix_splits(setup(graph, cluster, CostModel(), True, True)) == []


def test_the_dp_on_resnet50_training_starts_dpl_from_the_candidates(training, monkeypatch):
    calls = []
    real = ideals.balanced_prefix_splits
    monkeypatch.setattr(ideals, "balanced_prefix_splits", lambda su: calls.append(1) or real(su))
    res = run("dp", *training)
    assert calls
    assert res.objective == pytest.approx(78.6318125, rel=1e-9)  # Table 1's 78.63, as before
