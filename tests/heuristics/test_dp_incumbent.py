"""The DP's first phase, DPL's sweep over the prefixes of the DFS order, starts from the best slicing of that order
onto the devices (in the cluster's order, and with the hosts first): without it, on accelerators and a CPU the
sweep walked every pair of prefixes (seconds at 2,000 ops); with it the same optimum is found."""
from __future__ import annotations

import math
import time

import pytest

from placement_dsl import zoo
from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import CostModel
from placement_dsl.heuristics import ideals, run
from placement_dsl.heuristics.ideals import search, setup, slicing_incumbent
from placement_dsl.progress import Recorder, reporting


def _graph():
    w = zoo.resnet(50)
    return w.graph, Cluster.accelerators(3, cpus=1)


@pytest.mark.parametrize("objective", ["throughput", "bottleneck"])
def test_dpl_starts_from_a_slicing_that_bounds_its_optimum(objective, monkeypatch):
    monkeypatch.setattr(ideals, "SLICING_NODES", 0)  # ResNet-50 is below the size where the slicing pays
    # beside one class of hosts DPL is probed along its order (test_dp_beside_host.py); the sweep and its slicing
    # incumbent serve the other clusters of several classes, tested here on this one
    monkeypatch.setattr(ideals.host_slicing, "applies", lambda *args: False)
    graph, cluster = _graph()
    model = CostModel.named(objective)
    su = setup(graph, cluster, model, False, True)
    bound = slicing_incumbent(su)
    dpl_opt = search(su, linearize=True, max_ideals=100_000, upper_bound=None)[0].value
    assert bound is not None and math.isfinite(bound)
    assert dpl_opt <= bound * (1 + 1e-9)  # a split of the prefixes: never below DPL's optimum
    with reporting(Recorder()) as rec:
        res = run("dp", graph, cluster, model=model)
    starts = [e.fields["incumbent"] for e in rec.of("dp") if e.fields.get("phase") == "dpl" and "incumbent" in e.fields]
    assert starts and math.isfinite(starts[0])  # DPL's sweep was pruned from the start
    plain = run("dp", graph, cluster, model=model, incumbent=False)
    assert res.objective == pytest.approx(plain.objective, rel=1e-9)
    assert res.bound == pytest.approx(plain.bound, rel=1e-9)


def test_no_slicing_incumbent_with_replicas():
    graph, cluster = _graph()
    su = setup(graph, cluster, CostModel(), True, True)
    assert slicing_incumbent(su) is None


def test_a_small_graph_starts_dpl_without_loading_the_slicer():
    graph, cluster = _graph()
    su = setup(graph, cluster, CostModel(), False, True)
    assert su.con.n_nodes < ideals.SLICING_NODES
    assert slicing_incumbent(su) is None


def test_a_stopped_slicing_still_gives_dpl_the_balanced_slicing_as_incumbent(monkeypatch):
    """Under load the slicing DP may pass its share of the time (cnn-10000 on 16 accelerators and a CPU: 2-11 s
    each); DPL's sweep then ran without an incumbent, walked every pair of prefixes and was stopped. The
    work-balanced slicing it falls back to is a split of the same prefixes, so its value bounds DPL's optimum."""
    from placement_dsl.heuristics import slice_kernels

    monkeypatch.setattr(ideals, "SLICING_NODES", 0)
    monkeypatch.setattr(slice_kernels, "CLOCK_STEPS", 1)  # the DP reads the clock at its first segment
    graph, cluster = _graph()
    su = setup(graph, cluster, CostModel(), False, True)
    stopped = slicing_incumbent(su, deadline=time.monotonic() - 1.0)
    full = slicing_incumbent(su)
    dpl_opt = search(su, linearize=True, max_ideals=100_000, upper_bound=None)[0].value
    assert stopped is not None and math.isfinite(stopped)
    assert dpl_opt <= full * (1 + 1e-9) and full <= stopped * (1 + 1e-9)


def test_a_dp_stopped_before_dpl_ends_returns_the_slicing_when_it_beats_the_fallback(monkeypatch):
    from placement_dsl.heuristics.fallback import fallback

    monkeypatch.setattr(ideals, "SLICING_NODES", 0)
    graph, cluster = _graph()[0], Cluster.accelerators(3, cpus=1, bandwidth=1e9)  # fast links: splitting pays
    su = setup(graph, cluster, CostModel(), False, True)
    value, slicing = ideals.slicing_split(su)
    plain = fallback("dp", graph, cluster, su.model, "phase", time.perf_counter())
    res = ideals._stopped_early(su, slicing, "phase", time.perf_counter())
    assert value < plain.objective  # 6.46 against the balanced fallback's 6.85
    assert res.objective == pytest.approx(value, rel=1e-9) and res.info["fallback"] == "slicing"
    assert res.bound is None and res.info["stopped"]
    assert ideals._stopped_early(su, None, "phase", time.perf_counter()).objective == plain.objective


def test_the_dp_s_dpl_run_on_a_chain_of_moderate_size_is_one_exact_sweep(monkeypatch):
    """Up to :data:`~placement_dsl.heuristics.ideals.DPL_SWEEP_NODES` supernodes the DPL run that gives the DP its
    incumbent is one sweep pruned by its start (ResNet-50 in Python: 7 runs and 0.45 s descending, 1 and 0.23 s),
    and the DP's optimum is the same."""
    seen = []
    real = ideals._search

    def spy(su, **kwargs):
        out = real(su, **kwargs)
        seen.append((kwargs["linearize"], kwargs.get("descend", True), out[0].runs))
        return out

    monkeypatch.setattr(ideals, "_search", spy)
    monkeypatch.setattr(ideals.host_slicing, "applies", lambda *args: False)  # DPL's sweep, not the host's probes
    graph, cluster = _graph()
    found = run("dp", graph, cluster)
    dpl = [s for s in seen if s[0]]
    assert dpl and all(not descend and runs == 1 for _, descend, runs in dpl)
    monkeypatch.setattr(ideals, "DPL_SWEEP_NODES", 0)
    assert run("dp", graph, cluster).objective == found.objective


def test_the_dp_s_own_run_on_a_small_lattice_is_one_exact_sweep(dnn_partitioning, monkeypatch):
    """Up to :data:`~placement_dsl.heuristics.ideals.DP_SWEEP_IDEALS` ideals the DP's run below DPL's split is one
    sweep pruned by it: ResNet-50 training's 242 ideals took 8 feasibility runs (0.26 s of CPU in Python), now 1
    (0.10 s); the optimum is the same."""
    from placement_dsl.io import load_workload

    w = load_workload(dnn_partitioning / "throughput-inputs" / "LayerGraphs" / "resnet50_training.json")
    found = run("dp", w.graph, w.cluster)
    assert found.info["ideals"] <= ideals.DP_SWEEP_IDEALS and found.info["runs"] == 1
    monkeypatch.setattr(ideals, "DP_SWEEP_IDEALS", 0)
    descended = run("dp", w.graph, w.cluster)
    assert descended.info["runs"] > 1 and descended.objective == found.objective
