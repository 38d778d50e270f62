"""MOIRAI at its scale: the GPT-3 operator graphs, the Table III clusters, the makespan bounds, and the
coarsen -> list -> LNS -> expand pipeline on a small GPT."""
from __future__ import annotations

import numpy as np
import pytest

from placement_dsl.bounds.makespan import critical_path_bound, makespan_bounds, path_bound, work_bound
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.coarsen import coarsen
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.search.lns import makespan_problem
from placement_dsl.zoo.gpt3 import gpt3
from placement_dsl.zoo.gpus import GBPS, GPU_ROOFLINES, moirai_cluster


# ---------------------------------------------------------------------------- zoo
def test_gpt3_has_43_plus_10_per_head_kernels_per_layer_and_330m_is_moirais_size():
    small = gpt3(None, layers=2, hidden=64, heads=4, seq_len=16)
    assert small.graph.n == 2 * (43 + 10 * 4) + 14
    kinds = {"matmul", "add", "slice", "view", "softmax", "where", "reducemean", "sqrt", "tanh"}
    assert kinds <= {op.attrs["type"] for op in small.graph.ops}
    assert all(set(op.work) == set(GPU_ROOFLINES) for op in small.graph.ops)
    big = gpt3("330M", seq_len=64)
    assert big.graph.n - 14 == 24 * 203 == 4872  # MOIRAI Table IV's 330M operator count
    assert big.meta["parameters"] == pytest.approx(407e6, rel=0.01)  # 350M GPT-3 Medium + an untied LM head


def test_gpt3_times_follow_each_gpus_roofline():
    w = gpt3(None, layers=1, hidden=256, heads=4, seq_len=512)
    g = w.graph
    qkv = g.ops[g.index["L00.attn.qkv"]]
    flops = 2.0 * 512 * 256 * 768
    for kind, roof in GPU_ROOFLINES.items():
        assert qkv.work[kind] >= 1e3 * flops / roof.peak_flops * (1 - 1e-5)
    assert qkv.work["p4"] > qkv.work["v100"]  # 5.5 vs 15.7 TFLOP/s
    assert g.ops[g.index["L00.attn.h0.q"]].work["v100"] == 0.0  # a slice is a view


def test_gpt3_rejects_bad_sizes_and_clusters():
    with pytest.raises(SpecError, match="unknown size '7B'"):
        gpt3("7B")
    with pytest.raises(SpecError, match="multiple of heads"):
        gpt3(None, layers=1, hidden=100, heads=3)
    with pytest.raises(SpecError, match="not GPU models"):
        gpt3(None, layers=1, hidden=64, heads=4, seq_len=8, cluster=Cluster.accelerators(2))
    with pytest.raises(SpecError, match="unknown scenario"):
        moirai_cluster("cloud")


def test_table_iii_clusters_have_directed_measured_bandwidths():
    inter, intra = moirai_cluster("inter-server"), moirai_cluster("intra-server")
    assert [d.kind for d in inter.devices] == ["2080ti", "t4", "p4", "3060ti"]
    assert inter.memory.tolist() == [11 * 2**30, 16 * 2**30, 8 * 2**30, 8 * 2**30]
    assert inter.route_bandwidth[0, 1] == pytest.approx(44.26 * GBPS)  # A -> B
    assert inter.route_bandwidth[1, 0] == pytest.approx(42.39 * GBPS)  # B -> A
    assert intra.route_bandwidth[0, 1] == pytest.approx(1170.04 * GBPS)
    assert intra.route_bandwidth[3, 2] == pytest.approx(581.35 * GBPS)


def test_fusion_merges_the_layer_norm_tail_gelu_biases_and_the_scaled_mask():
    report = coarsen(gpt3(None, layers=2, hidden=64, heads=4, seq_len=16).graph).report()
    assert report["ops"] - report["coarse_ops"] == 2 * (19 + 4) + 4  # per layer 19 + one per head; ln_f's tail 4
    assert report["fused"] == {"elementwise": 15, "matmul-add": 8}


# ---------------------------------------------------------------------------- bounds
def _two_devices(a_to_b: float = 1.0) -> Cluster:
    return Cluster([Device(name="x", kind="x"), Device(name="y", kind="y")],
                   [Link(src="x", dst="y", bandwidth=a_to_b), Link(src="y", dst="x", bandwidth=a_to_b)])


def test_path_bound_pays_a_transfer_to_switch_devices():
    g = Graph([Op(name="a", work={"x": 1.0, "y": 5.0}, out_bytes=10.0), Op(name="b", work={"x": 5.0, "y": 1.0})],
              [("a", "b")])
    assert critical_path_bound(g, _two_devices()) == 2.0
    assert path_bound(g, _two_devices()) == 6.0  # stay on one device (1 + 5) beats 1 + 10 + 1
    assert path_bound(g, _two_devices(a_to_b=10.0)) == 3.0  # 1 + 1 + 1


def test_work_bound_is_the_lp_value_on_unrelated_devices():
    g = Graph([Op(name=n, work={"x": 1.0, "y": 4.0}) for n in "ab"], [])
    assert work_bound(g, _two_devices()) == pytest.approx(1.6)  # 8/5 of the work on x, 2/5 on y
    assert makespan_bounds(g, _two_devices())["bound"] == pytest.approx(1.6)


def test_segment_bound_makes_parallel_branches_share_the_devices():
    g = Graph([Op(name=n, work=w) for n, w in (("a", 1.0), ("b", 2.0), ("c", 2.0), ("d", 1.0))],
              [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    one = Cluster.accelerators(1)
    assert critical_path_bound(g, one) == 4.0
    assert makespan_bounds(g, one)["segments"] == 6.0 == makespan_bounds(g, one)["bound"]  # b and c share it
    assert makespan_bounds(g, Cluster.accelerators(2))["segments"] == 4.0


def test_bounds_never_exceed_a_schedule_found(shared_data):
    from placement_dsl.io import moirai

    pytest.importorskip("xlrd")
    w = moirai.load(shared_data / "moirai" / "example-1.xls")
    bounds = makespan_bounds(w.graph, w.cluster)
    assert bounds["path"] >= bounds["critical_path"] and bounds["bound"] <= 30.0  # the proven optimum


# ---------------------------------------------------------------------------- the pipeline
def test_coarse_lns_expands_to_a_valid_schedule_no_worse_than_list_on_a_small_gpt():
    pytest.importorskip("ortools")
    w = gpt3(None, layers=1, hidden=256, heads=4, seq_len=256, cluster="intra-server")
    model = CostModel.named("makespan")
    fused = coarsen(w.graph)
    listed = run("list", fused.coarse, w.cluster, model=model)
    lns = run("schedule-lns", fused.coarse, w.cluster, model=model, start=listed.placement, time_limit=8.0)
    ours = makespan_problem(w.graph, w.cluster, model).evaluate(fused.expand(lns.placement))
    assert ours.valid and ours.objective == pytest.approx(lns.objective)
    assert ours.objective <= listed.objective * (1 + 1e-9)
    assert ours.objective >= makespan_bounds(w.graph, w.cluster)["bound"] * (1 - 1e-9)
    assert np.array_equal(fused.expand(lns.placement).assign[fused.members[0][0]],
                          lns.placement.assign[0])


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["inter-server", "intra-server"])
def test_a_six_layer_gpt_beats_list_scheduling_on_both_table_iii_clusters(scenario):
    w = gpt3(None, layers=6, hidden=1024, heads=16, cluster=scenario)
    model = CostModel.named("makespan")
    listed = run("list", w.graph, w.cluster, model=model)
    fused = coarsen(w.graph)
    first = min((run(m, fused.coarse, w.cluster, model=model) for m in ("list", "cpop")), key=lambda r: r.objective)
    coarse = run("schedule-ls", fused.coarse, w.cluster, model=model, start=first.placement, time_limit=20.0)
    start = min((fused.expand(coarse.placement), listed.placement), key=lambda p: model_value(w, model, p))
    ours = run("schedule-ls", w.graph, w.cluster, model=model, start=start, time_limit=30.0)
    assert ours.objective < listed.objective
    assert ours.objective >= makespan_bounds(w.graph, w.cluster)["bound"]


def model_value(w, model, placement):
    return makespan_problem(w.graph, w.cluster, model).evaluate(placement).objective
