"""The workload zoo: every model builds into a valid workload, training variants mirror their
forward graphs, the cost model's formulas hold, and the committed JSON files never drift."""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from placement_dsl import SpecError, zoo
from placement_dsl.io.workload import load_workload, workload_to_dict

MODELS_DIR = Path(__file__).resolve().parents[2] / "models"
NAMES = zoo.names()


def _generate_module():
    spec = importlib.util.spec_from_file_location("models_generate", MODELS_DIR / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built() -> dict:
    return {name: zoo.get(name) for name in NAMES}


# ---------------------------------------------------------------------------- every model
@pytest.mark.parametrize("name", NAMES)
def test_model_is_a_valid_dag_with_positive_work_on_both_kinds(built, name):
    w = built[name]
    g = w.graph
    assert g.name == name
    assert nx.is_directed_acyclic_graph(g.to_networkx())
    assert {"accelerator", "cpu"} <= g.kinds
    for kind in ("accelerator", "cpu"):
        work = g.work(kind)
        assert np.isfinite(work).all() and (work > 0).all(), f"{name}: an op has no {kind} time"
    assert g.out_bytes.sum() > 0
    assert w.meta["training"] is g.is_training


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith("regal")])
def test_dnn_models_run_faster_on_the_accelerator_and_fit_the_default_cluster(built, name):
    w = built[name]
    assert zoo.total_work(w, "cpu") > zoo.total_work(w, "accelerator") > 0
    need = w.graph.param_bytes.sum() + w.graph.activation_bytes.sum()
    assert need <= w.cluster.memory.sum()
    assert any(d.kind == "cpu" for d in w.cluster.devices)


def test_registry_has_the_required_models_and_sizes(built):
    required = {"transformer-small", "bert-base-layers", "bert-large-ops", "resnet50", "inception-v3-ish",
                "gnmt-ish", "regal-0"}
    assert required <= set(NAMES)
    assert 50 <= built["transformer-small"].graph.n <= 100
    assert 200 <= built["bert-large-ops"].graph.n <= 600
    assert all(n + zoo.TRAIN_SUFFIX in NAMES for n in ("transformer-small", "resnet50", "gnmt-ish"))


def test_unknown_names_and_any_regal_seed(built):
    assert zoo.get("regal-17").graph.name == "regal-17"
    assert zoo.get("regal-2-train").graph.is_training
    with pytest.raises(SpecError, match="unknown model 'nope'"):
        zoo.get("nope")


# ---------------------------------------------------------------------------- training variants
@pytest.mark.parametrize("name", [n for n in NAMES if n.endswith(zoo.TRAIN_SUFFIX)])
def test_training_variant_mirrors_its_forward_graph(built, name):
    fwd = built[name[: -len(zoo.TRAIN_SUFFIX)]].graph
    g = built[name].graph
    assert g.n == 2 * fwd.n and int(g.backward.sum()) == fwd.n
    edges = set(g.edges)
    for op in fwd.ops:
        grad = g.ops[g.index[op.name + ".grad"]]
        assert grad.backward and grad.group == op.name == g.ops[g.index[op.name]].group
        assert grad.work["accelerator"] == pytest.approx(2 * op.work["accelerator"], rel=1e-5)
        assert grad.param_bytes == op.param_bytes
        assert (op.name, op.name + ".grad") in edges
    for u, v in fwd.edges:
        assert (v + ".grad", u + ".grad") in edges
    assert len(g.groups) == fwd.n and all(len(grp) == 2 for grp in g.groups)
    assert g.m == 2 * fwd.m + fwd.n


# ---------------------------------------------------------------------------- cost model
def test_roofline_takes_the_slower_of_compute_and_memory():
    r = zoo.Roofline("x", peak_flops=1e12, mem_bandwidth=1e9)
    assert r.time_ms(2e9, 1e6) == pytest.approx(2.0)  # compute bound: 2e9 / 1e12 s
    assert r.time_ms(1e6, 3e9) == pytest.approx(3000.0)  # memory bound: 3e9 / 1e9 s


def test_matmul_and_conv_counts():
    mm = zoo.matmul(8, 16, 32)
    assert mm.flops == 2 * 8 * 16 * 32
    assert mm.param_bytes == 4 * (16 * 32 + 32) and mm.out_bytes == 4 * 8 * 32
    cost, side = zoo.conv(2, 224, 3, 64, 7, 7, 2)
    assert side == 112
    assert cost.flops == 2 * 2 * 112 * 112 * 64 * 3 * 49 + 3 * 2 * 112 * 112 * 64
    assert zoo.conv(1, 35, 288, 384, 3, 3, 2, same=False)[1] == 17


def test_operator_and_layer_granularity_agree_on_totals():
    kw = {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 16, "batch": 2, "vocab": 100}
    ops = zoo.transformer(granularity="operator", **kw)
    layers = zoo.transformer(granularity="layer", **kw)
    assert (ops.graph.n, layers.graph.n) == (2 + 12 * 2, 2 + 2 * 2)
    for kind in ("accelerator", "cpu"):
        assert zoo.total_work(ops, kind) == pytest.approx(zoo.total_work(layers, kind), rel=1e-5)
    assert ops.graph.param_bytes.sum() == layers.graph.param_bytes.sum()


def test_resnet50_and_inception_have_their_published_parameter_counts(built):
    resnet = built["resnet50"].graph.param_bytes.sum() / zoo.BYTES_PER_ELEMENT
    inception = built["inception-v3-ish"].graph.param_bytes.sum() / zoo.BYTES_PER_ELEMENT
    assert resnet == pytest.approx(25.6e6, rel=0.02)
    assert inception == pytest.approx(23.8e6, rel=0.03)  # without the auxiliary head


def test_skip_connections_and_branches(built):
    resnet = built["resnet50"].graph
    assert set(resnet.predecessors(resnet.index["s1.b1.add"])) == {resnet.index["s1.b1.conv3"],
                                                                  resnet.index["s1.b0.add"]}
    inc = built["inception-v3-ish"].graph
    assert len(inc.predecessors(inc.index["m0a.concat"])) == 4
    assert len(inc.predecessors(inc.index["m9e.concat"])) == 6  # two forked branches


def test_regal_follows_the_recipe():
    w = zoo.regal(5, n=80, model="erdos_renyi")
    g = w.graph
    size = g.out_bytes
    assert g.n == 80 and w.meta["params"]["model"] == "erdos_renyi"
    assert abs(size.mean() - zoo.REGAL_TENSOR_MEAN) < 4 * zoo.REGAL_TENSOR_STD / math.sqrt(80)
    inputs = np.array([size[g.predecessors(v)].sum() for v in range(g.n)])
    fraction = (g.work("accelerator") - size - inputs) / size.sum()
    assert (fraction >= -1e-6).all() and 0.03 < fraction.mean() < 0.13  # E|N(0, 0.1)| = 0.08
    assert all(50 <= zoo.regal(s).graph.n <= 200 for s in range(5))
    assert {zoo.regal(s).meta["params"]["model"] for s in range(12)} == set(zoo.REGAL_MODELS)


# ---------------------------------------------------------------------------- validation
@pytest.mark.parametrize("call, match", [
    (lambda: zoo.transformer(layers=0), "layers must be an integer >= 1, got 0"),
    (lambda: zoo.transformer(hidden=100, heads=3), "multiple of heads"),
    (lambda: zoo.transformer(granularity="kernel"), "granularity must be one of"),
    (lambda: zoo.resnet(depth=34), "depth must be one of"),
    (lambda: zoo.inception(image=32), "image must be >= 75"),
    (lambda: zoo.gnmt(enc_layers=1), "enc_layers must be >= 2"),
    (lambda: zoo.gnmt(batch=2.5), "batch must be an integer"),
    (lambda: zoo.regal(-1), "seed must be an integer >= 0"),
    (lambda: zoo.regal(0, model="grid"), "model must be one of"),
])
def test_nonsense_parameters_raise_spec_errors(call, match):
    with pytest.raises(SpecError, match=match):
        call()


# ---------------------------------------------------------------------------- files and determinism
def test_generation_is_deterministic():
    first = json.dumps(workload_to_dict(zoo.get("regal-1-train")))
    assert json.dumps(workload_to_dict(zoo.get("regal-1-train"))) == first
    assert zoo.regal(3).graph == zoo.regal(3).graph and zoo.regal(3).graph != zoo.regal(4).graph


def test_committed_json_files_equal_a_fresh_build():
    generate = _generate_module()
    assert generate.stale(MODELS_DIR) == [], "run python models/generate.py and commit models/*.json"
    extra = {p.stem for p in MODELS_DIR.glob("*.json")} - set(NAMES)
    assert not extra, f"models/ has files for unregistered models: {sorted(extra)}"


def test_committed_files_load_back_to_the_same_workload(built):
    w = load_workload(MODELS_DIR / "gnmt-ish-train.json")
    assert w.graph == built["gnmt-ish-train"].graph and w.cluster == built["gnmt-ish-train"].cluster
