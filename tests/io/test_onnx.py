"""The ONNX importer on models built with ``onnx.helper``: a ResNet-style CNN and a GPT-style stack.

Both import, solve and show; sizes, parameters (a tied embedding counted once), FLOPs of a
convolution and a matrix product, module paths, layer granularity, symbolic dimensions,
external data, the command line, measured costs and the calibrated roofline are checked.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.heuristics import run
from placement_dsl.io import costs as cost_io
from placement_dsl.io import detect_format, load_workload, save_workload
from placement_dsl.io import onnx as onnx_io
from placement_dsl.zoo.costs import ACCELERATOR_ROOFLINE

OPSET = 20
NVLINK = 300e9 / 1e3  # bytes per ms: activations of this size would make PCIe the bottleneck of any split


# ---------------------------------------------------------------------------- model generators
class _Net:
    """Collects nodes and float32 initializers with PyTorch-like ``/scope/Op`` names."""

    def __init__(self, seed: int = 0):
        self.nodes: list = []
        self.inits: list = []
        self.rng = np.random.default_rng(seed)
        self.count = 0

    def weight(self, name: str, *shape: int) -> str:
        self.inits.append(numpy_helper.from_array(self.rng.standard_normal(shape).astype(np.float32), name))
        return name

    def const(self, name: str, values: list[int]) -> str:
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=np.int64), name))
        return name

    def node(self, op: str, inputs: list[str], scope: str, **attrs) -> str:
        self.count += 1
        out = f"t{self.count}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"/{scope}/{op}_{self.count}", **attrs))
        return out

    def model(self, inputs: list, output: str, out_shape: list, name: str) -> onnx.ModelProto:
        y = helper.make_tensor_value_info(output, TensorProto.FLOAT, out_shape)
        graph = helper.make_graph(self.nodes, name, inputs, [y], initializer=self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tests")
        onnx.checker.check_model(m)
        return m


def _conv_bn(net: _Net, x: str, scope: str, c_in: int, c_out: int, relu: bool = True) -> str:
    w = net.weight(f"{scope}.weight", c_out, c_in, 3, 3)
    y = net.node("Conv", [x, w], scope.replace(".", "/", 1) + "/conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    bn = [net.weight(f"{scope}.bn.{k}", c_out) for k in ("scale", "bias", "mean", "var")]
    y = net.node("BatchNormalization", [y, *bn], scope.replace(".", "/", 1) + "/bn")
    return net.node("Relu", [y], scope.replace(".", "/", 1) + "/relu") if relu else y


def resnet_model(blocks: int = 2, channels: int = 8, size: int = 16, classes: int = 10) -> onnx.ModelProto:
    """A ResNet-style CNN: a stem, ``blocks`` residual blocks (conv-bn-relu, conv-bn, skip add, relu),
    global average pooling and a classifier; the batch dimension is symbolic (``N``)."""
    net = _Net()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, size, size])
    y = _conv_bn(net, "x", "stem.0", 3, channels)
    for b in range(blocks):
        h = _conv_bn(net, y, f"layer.{b}.a", channels, channels)
        h = _conv_bn(net, h, f"layer.{b}.b", channels, channels, relu=False)
        y = net.node("Relu", [net.node("Add", [h, y], f"layer/layer.{b}/add")], f"layer/layer.{b}/out")
    pooled = net.node("Flatten", [net.node("GlobalAveragePool", [y], "pool")], "pool")
    out = net.node("Gemm", [pooled, net.weight("fc.weight", classes, channels), net.weight("fc.bias", classes)],
                   "fc", transB=1)
    return net.model([x], out, ["N", classes], "resnet")


def _attention(net: _Net, x: str, scope: str, hidden: int, heads: int) -> str:
    s = scope.replace(".", "/", 1)
    qkv = net.node("Add", [net.node("MatMul", [x, net.weight(f"{scope}.qkv.w", hidden, 3 * hidden)], f"{s}/qkv"),
                           net.weight(f"{scope}.qkv.b", 3 * hidden)], f"{s}/qkv")
    split = f"{scope}.split"
    q, k, v = (f"{split}.{c}" for c in "qkv")
    net.nodes.append(helper.make_node("Split", [qkv, net.const(f"{scope}.sizes", [hidden] * 3)], [q, k, v],
                                      name=f"/{s}/Split", axis=-1))
    shape = net.const(f"{scope}.heads", [0, 0, heads, hidden // heads])
    q, k, v = (net.node("Transpose", [net.node("Reshape", [t, shape], s)], s, perm=p)
               for t, p in ((q, [0, 2, 1, 3]), (k, [0, 2, 3, 1]), (v, [0, 2, 1, 3])))
    scores = net.node("Mul", [net.node("MatMul", [q, k], s), net.weight(f"{scope}.scale", 1)], s)
    ctx = net.node("MatMul", [net.node("Softmax", [scores], s, axis=-1), v], s)
    ctx = net.node("Reshape", [net.node("Transpose", [ctx], s, perm=[0, 2, 1, 3]),
                               net.const(f"{scope}.merge", [0, 0, hidden])], s)
    return net.node("MatMul", [ctx, net.weight(f"{scope}.proj", hidden, hidden)], f"{s}/proj")


def _block(net: _Net, x: str, b: int, hidden: int, heads: int) -> str:
    scope = f"h.{b}"
    ln = [net.weight(f"{scope}.ln{i}.{k}", hidden) for i in (1, 2) for k in ("g", "b")]
    x = net.node("Add", [x, _attention(net, net.node("LayerNormalization", [x, *ln[:2]], f"h.{b}/ln_1", axis=-1),
                                       f"{scope}.attn", hidden, heads)], f"h.{b}/res1")
    h = net.node("LayerNormalization", [x, *ln[2:]], f"h.{b}/ln_2", axis=-1)
    h = net.node("Gelu", [net.node("MatMul", [h, net.weight(f"{scope}.fc", hidden, 4 * hidden)], f"h.{b}/mlp/fc")],
                 f"h.{b}/mlp/act")
    h = net.node("MatMul", [h, net.weight(f"{scope}.proj", 4 * hidden, hidden)], f"h.{b}/mlp/proj")
    return net.node("Add", [x, h], f"h.{b}/res2")


def gpt_model(layers: int = 2, hidden: int = 16, heads: int = 2, vocab: int = 50, ctx: int = 32) -> onnx.ModelProto:
    """A GPT-style stack: token and position embeddings, ``layers`` pre-norm blocks (attention by
    MatMul/Softmax, GELU MLP, residual adds), a final LayerNorm and an LM head tied to the token
    embedding (one initializer read twice). Batch and sequence are symbolic (``batch``, ``seq``)."""
    net = _Net(1)
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
    pos = helper.make_tensor_value_info("pos", TensorProto.INT64, ["batch", "seq"])
    wte = net.weight("wte", vocab, hidden)
    x = net.node("Add", [net.node("Gather", [wte, "ids"], "wte"),
                         net.node("Gather", [net.weight("wpe", ctx, hidden), "pos"], "wpe")], "embed")
    for b in range(layers):
        x = _block(net, x, b, hidden, heads)
    x = net.node("LayerNormalization", [x, net.weight("ln_f.g", hidden), net.weight("ln_f.b", hidden)], "ln_f",
                 axis=-1)
    head = net.node("Transpose", [wte], "lm_head", perm=[1, 0])  # tied weights: folded, wte counted once
    out = net.node("MatMul", [x, head], "lm_head")
    return net.model([ids, pos], out, ["batch", "seq", vocab], "gpt")


def _init_bytes(model: onnx.ModelProto) -> int:
    return sum(numpy_helper.to_array(i).nbytes for i in model.graph.initializer)


# ---------------------------------------------------------------------------- import
def test_resnet_imports_with_shapes_params_and_flops():
    model = resnet_model(blocks=2, channels=8, size=16)
    w = onnx_io.from_model(model, name="resnet", batch=2)
    g = w.graph
    assert g.n == 3 + 2 * 7 + 3  # stem conv-bn-relu; per block conv-bn-relu, conv-bn, add, relu; pool, flatten, fc
    assert g.param_bytes.sum() == _init_bytes(resnet_model(blocks=2, channels=8, size=16))
    conv = g.ops[g.index["/stem/0/conv/Conv_1"]]
    assert conv.attrs["module"] == "stem.0.conv" and conv.attrs["type"] == "Conv"
    assert conv.attrs["shape"] == [2, 8, 16, 16] and conv.out_bytes == 2 * 8 * 16 * 16 * 4
    assert conv.attrs["flops"] == 2 * (2 * 8 * 16 * 16) * 3 * 3 * 3
    assert conv.work["accelerator"] == pytest.approx(ACCELERATOR_ROOFLINE.time_ms(conv.attrs["flops"],
                                                                                  conv.attrs["bytes_moved"]), rel=1e-5)
    adds = [op for op in g.ops if op.attrs["type"] == "Add"]
    assert all(len(g.predecessors(g.index[a.name])) == 2 for a in adds)  # the skip connections
    assert w.meta["dims"] == {"N": 2} and w.meta["estimated"] == {} and w.meta["unshaped_ops"] == 0
    assert {"accelerator", "cpu"} <= g.kinds


def test_batch_scales_activations_not_parameters():
    one = onnx_io.from_model(resnet_model(), batch=1).graph
    four = onnx_io.from_model(resnet_model(), batch=4).graph
    assert four.out_bytes.sum() == 4 * one.out_bytes.sum()
    assert four.param_bytes.sum() == one.param_bytes.sum()


def test_gpt_imports_tied_embedding_once_and_known_ops():
    model = gpt_model(layers=2)
    init = _init_bytes(model)
    w = onnx_io.from_model(model, name="gpt", batch=2, seq=8)
    g = w.graph
    assert g.param_bytes.sum() == init  # wte read by the embedding and (transposed) by the LM head: once
    assert w.meta["estimated"] == {} and w.meta["dims"] == {"batch": 2, "seq": 8}
    types = {op.attrs["type"] for op in g.ops}
    assert {"MatMul", "Softmax", "LayerNormalization", "Gelu", "Add", "Gather"} <= types
    assert "Transpose" in types and not any(op.name.startswith("/lm_head/Transpose") for op in g.ops)
    fc = next(op for op in g.ops if op.attrs.get("module") == "h.0.mlp.fc")
    assert fc.attrs["flops"] == 2 * (2 * 8 * 64) * 16
    scores = next(op for op in g.ops if op.attrs["type"] == "Softmax")
    assert scores.attrs["shape"] == [2, 2, 8, 8] and scores.attrs["module"] == "h.0.attn"


def test_layer_granularity_merges_modules_into_a_chain():
    w = onnx_io.from_model(gpt_model(layers=3), batch=1, seq=8, granularity="layer", depth=2)
    g = w.graph
    assert {"h.0", "h.1", "h.2", "embed", "ln_f", "lm_head"} <= set(g.names)
    blocks = [g.ops[g.index[f"h.{b}"]] for b in range(3)]
    assert all(b.attrs["ops"] > 10 for b in blocks) and blocks[0].attrs["types"]["MatMul"] == 6
    assert ("h.0", "h.1") in g.edges and ("h.1", "h.2") in g.edges
    assert g.ops[g.index["h.0"]].out_bytes == 8 * 16 * 4  # only the residual stream leaves a block
    ops = onnx_io.from_model(gpt_model(layers=3), batch=1, seq=8).graph
    assert g.param_bytes.sum() == ops.param_bytes.sum()
    assert sum(op.work["accelerator"] for op in g.ops) == pytest.approx(
        sum(op.work["accelerator"] for op in ops.ops), rel=1e-4)


def test_group_granularity_colocates_module_ops():
    g = onnx_io.from_model(gpt_model(layers=2), batch=1, seq=4, granularity="group", depth=2).graph
    assert {op.group for op in g.ops if op.attrs.get("module", "").startswith("h.1")} == {"h.1"}
    assert len(g.groups) >= 2


def test_torch_name_scope_metadata_gives_the_module():
    model = resnet_model(blocks=1)
    node = model.graph.node[0]
    node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value="['', 'features', 'features.0', 'conv2d']")
    assert onnx_io.module_path(node) == "features.0"
    plain = helper.make_node("Relu", ["a"], ["b"], name="relu_3")
    assert onnx_io.module_path(plain) is None
    plain.metadata_props.add(key="module", value="blocks.1.act")
    assert onnx_io.module_path(plain) == "blocks.1.act"


def test_open_symbolic_dimension_is_refused_with_the_fix():
    model = gpt_model()
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "tokens_in_flight"
    with pytest.raises(SpecError, match=r"'tokens_in_flight'.*--dim tokens_in_flight=N"):
        onnx_io.from_model(model, batch=1)
    w = onnx_io.from_model(gpt_model(), batch=1, dims={"seq": 4})
    assert w.meta["dims"] == {"batch": 1, "seq": 4}


def test_file_without_external_data_and_format_detection(tmp_path: Path):
    model = resnet_model()
    path = tmp_path / "net.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="net.weights", size_threshold=0)
    (tmp_path / "net.weights").unlink()  # the importer needs only the weights' shapes
    assert detect_format(path) == "onnx"
    w = load_workload(path, batch=2)
    assert w.graph.name == "net" and w.format == "onnx" and w.meta["path"] == str(path)
    assert w.graph.param_bytes.sum() == _init_bytes(resnet_model())
    save_workload(w, tmp_path / "net.json")
    assert load_workload(tmp_path / "net.json").graph == w.graph


def test_not_an_onnx_file_is_a_spec_error(tmp_path: Path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01 not a protobuf at all \xff" * 10)
    with pytest.raises(SpecError, match="not an ONNX model"):
        onnx_io.load(bad)
    with pytest.raises(SpecError, match="no such file"):
        onnx_io.load(tmp_path / "missing.onnx")


@pytest.mark.parametrize("model", [resnet_model(blocks=3, channels=64, size=56),
                                   gpt_model(layers=4, hidden=256, heads=4, vocab=1000, ctx=256)])
def test_imported_models_solve(model):
    w = onnx_io.from_model(model, batch=32, seq=128)
    res = run("dp", w.graph, Cluster.stages(3, bandwidth=NVLINK))
    one = run("dp", w.graph, Cluster.stages(1, bandwidth=NVLINK))
    assert len(set(res.placement.assign.tolist())) == 3 and math.isfinite(res.objective)
    assert res.objective < 0.5 * one.objective  # a real pipeline: three stages beat one by far


# ---------------------------------------------------------------------------- command line
def test_cli_import_solve_and_show(tmp_path: Path, capsys):
    src = tmp_path / "gpt.onnx"
    onnx.save_model(gpt_model(layers=2), str(src))
    out = tmp_path / "gpt.json"
    assert main(["import", str(src), "--out", str(out), "--batch", "2", "--seq", "8", "--granularity", "layer",
                 "--depth", "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["ops"] == load_workload(out).graph.n and summary["dims"] == {"batch": 2, "seq": 8}
    split = tmp_path / "split.json"
    assert main(["solve", str(out), "--method", "dp", "--stages", "2", "--out", str(split)]) == 0
    capsys.readouterr()
    dot = tmp_path / "gpt.dot"
    assert main(["show", str(out), "--split", str(split), "--stages", "2", "--out", str(dot)]) == 0
    assert "h.0" in dot.read_text() and "acc1" in dot.read_text()


def test_cli_import_errors_are_one_line(tmp_path: Path, capsys):
    assert main(["import", str(tmp_path / "none.onnx"), "--out", str(tmp_path / "w.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert main(["import", "no_such_module_here:make", "--out", str(tmp_path / "w.json")]) == 2


# ---------------------------------------------------------------------------- measured costs
def test_measured_costs_replace_and_calibrate(tmp_path: Path):
    w = onnx_io.from_model(resnet_model(), batch=8)
    g = w.graph
    convs = [op for op in g.ops if op.attrs["type"] == "Conv"]
    profile = tmp_path / "profile.csv"
    rows = [f"{op.name},accelerator,{3 * op.work['accelerator']:.9g}" for op in convs[:2]]
    profile.write_text("op,kind,ms\n" + "\n".join(rows) + "\n")
    measured = cost_io.read_costs(profile)
    new, fits = cost_io.apply_costs(g, measured)
    assert new.ops[new.index[convs[0].name]].work["accelerator"] == pytest.approx(3 * convs[0].work["accelerator"])
    assert fits["accelerator"].samples == 2
    assert new.ops[new.index[convs[3].name]].work["accelerator"] == pytest.approx(
        3 * convs[3].work["accelerator"], rel=1e-4)  # unmeasured convs: the calibrated roofline
    assert new.ops[new.index[convs[0].name]].work["cpu"] == convs[0].work["cpu"]  # other kinds untouched
    assert new.ops[new.index[convs[0].name]].attrs["measured"] == ["accelerator"]


def test_module_times_and_profile_formats(tmp_path: Path):
    g = onnx_io.from_model(gpt_model(layers=2), batch=1, seq=8).graph
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"h.1": {"accelerator": 2.0}}))
    new, _ = cost_io.apply_costs(g, cost_io.read_costs(path), calibrate_rest=False)
    inside = [op for op in new.ops if op.attrs.get("module", "").startswith("h.1")]
    assert sum(op.work["accelerator"] for op in inside) == pytest.approx(2.0, rel=1e-4)
    wide = tmp_path / "wide.csv"
    wide.write_text("name,accelerator,cpu\nln_f,0.5,4\n")
    assert cost_io.read_costs(wide) == {"ln_f": {"accelerator": 0.5, "cpu": 4.0}}
    us = tmp_path / "us.csv"
    us.write_text("op,us\nln_f,250\n")
    assert cost_io.read_costs(us) == {"ln_f": {"accelerator": 0.25}}
    typo = tmp_path / "typo.json"
    typo.write_text(json.dumps({"h.7": 1.0}))
    with pytest.raises(SpecError, match=r"unknown op.*'h.7'.*close"):
        cost_io.apply_costs(g, cost_io.read_costs(typo))


def test_cli_import_with_costs(tmp_path: Path, capsys):
    src = tmp_path / "net.onnx"
    onnx.save_model(resnet_model(), str(src))
    profile = tmp_path / "p.csv"
    profile.write_text("op,ms\nfc,1.5\n")  # a module path: the classifier's one op
    out = tmp_path / "w.json"
    assert main(["import", str(src), "--out", str(out), "--costs", str(profile)]) == 0
    g = load_workload(out).graph
    fc = next(op for op in g.ops if op.attrs.get("module") == "fc")
    assert fc.work["accelerator"] == 1.5 and fc.attrs["measured"] == ["accelerator"]
    assert "calibrated" in capsys.readouterr().out


# ---------------------------------------------------------------------------- PyTorch (where torch is installed)
def torch_gpt(batch: int = 2, seq: int = 8, layers: int = 2, hidden: int = 32):
    """A factory for ``import MODULE:FACTORY``: a GPT-style torch module (tied head) and its example input."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln = nn.LayerNorm(hidden)
            self.attn = nn.MultiheadAttention(hidden, 4, batch_first=True)
            self.fc, self.act, self.proj = nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            y = self.ln(x)
            x = x + self.attn(y, y, y, need_weights=False)[0]
            return x + self.proj(self.act(self.fc(x)))

    class GPT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(100, hidden)
            self.h = nn.ModuleList([Block() for _ in range(layers)])
            self.head = nn.Linear(hidden, 100, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, ids):
            x = self.emb(ids)
            for block in self.h:
                x = block(x)
            return self.head(x)

    return GPT(), (torch.zeros(batch, seq, dtype=torch.long),)


def test_torch_module_imports_on_meta_device():
    pytest.importorskip("torch")
    from placement_dsl.io import torch_export

    w = torch_export.load(f"{__name__}:torch_gpt", batch=4, seq=16)
    g = w.graph
    module = torch_gpt()[0]
    params = sum(p.numel() * p.element_size() for p in module.parameters())  # tied: listed once
    assert g.param_bytes.sum() == params and w.meta["dims"] == {"batch": 4, "seq": 16}
    assert all(op.attrs["nn_module_stack"] is not None for op in g.ops)
    fc = next(op for op in g.ops if op.attrs.get("module") == "h.0.fc")
    assert fc.attrs["type"] == "linear" and fc.attrs["flops"] == 2 * (4 * 16 * 128) * 32 + 4 * 16 * 128
    assert fc.attrs["nn_module_stack"][-1] == "h.0.fc" and "h.0" in fc.attrs["nn_module_stack"]
    sdpa = [op for op in g.ops if "scaled_dot_product" in op.attrs["type"]]
    assert len(sdpa) == 2 and all(op.attrs["flops"] > 0 for op in sdpa)
    coarse = torch_export.load(f"{__name__}:torch_gpt", batch=4, seq=16, granularity="layer", depth=2)
    assert {"h.0", "h.1", "emb", "head"} <= set(coarse.graph.names)
    assert run("dp", coarse.graph, Cluster.stages(2, bandwidth=NVLINK)).placement is not None


def test_torch_factory_errors_are_spec_errors():
    pytest.importorskip("torch")
    from placement_dsl.io import torch_export

    with pytest.raises(SpecError, match="cannot import module"):
        torch_export.load("no_such_module_here:make")
    with pytest.raises(SpecError, match="has no function"):
        torch_export.load(f"{__name__}:no_such_factory")
    with pytest.raises(SpecError, match="not MODULE:FACTORY"):
        torch_export.factory("just_a_name")


def torch_reads_tensor_data(batch: int = 1):
    """A factory computing its width from tensor data (as torchvision's RegNet does): fails on the meta device."""
    import torch
    from torch import nn

    width = int(torch.tensor([7.6]).round().item())
    return nn.Sequential(nn.Linear(width, width), nn.ReLU()), (torch.zeros(batch, width),)


def torch_raises(batch: int = 1):
    raise RuntimeError("no model here")


def test_a_factory_failing_on_the_meta_device_is_built_on_the_cpu_or_refused_in_one_line(tmp_path, capsys):
    pytest.importorskip("torch")
    from placement_dsl.io import torch_export

    w = torch_export.load(f"{__name__}:torch_reads_tensor_data", batch=3)
    assert w.graph.param_bytes.sum() == (8 * 8 + 8) * 4 and "meta device" in w.meta["note"]
    out = tmp_path / "w.json"
    assert main(["import", f"{__name__}:torch_raises", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "no model here" in err and "torch_raises" in err
    assert not out.exists()


# ---------------------------------------------------------------------------- malformed models
def _relu_pair(nodes=None, x_shape=(2, 3)) -> onnx.ModelProto:
    """``x -> A -> a -> B -> y`` (or the given nodes) with the declared input shape ``x_shape``."""
    nodes = nodes or [helper.make_node("Relu", ["x"], ["a"], name="A"), helper.make_node("Relu", ["a"], ["y"], name="B")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "pair", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


@pytest.mark.parametrize("model, message", [
    (lambda: _relu_pair([helper.make_node("Add", ["x", "b"], ["a"], name="A"),
                         helper.make_node("Relu", ["a"], ["b"], name="B"),
                         helper.make_node("Relu", ["b"], ["y"], name="C")]),
     r"graph 'bad' has a cycle: (A -> B -> A|B -> A -> B)"),
    (lambda: _relu_pair([helper.make_node("Add", ["x", "ghost"], ["a"], name="A"),
                         helper.make_node("Relu", ["a"], ["y"], name="B")]),
     r"ONNX node 'A' reads tensor 'ghost', which no node, graph input or initializer provides"),
    (lambda: _relu_pair(x_shape=(-5, 3)), r"ONNX tensor 'x' has the dimension -5"),
    (lambda: _relu_pair(x_shape=(2**62, 20)), r"ONNX tensor 'x' of shape \[4611686018427387904, 20\] holds 3\.69e\+20"),
])
def test_malformed_models_are_refused_naming_the_file_and_node(tmp_path: Path, model, message):
    path = tmp_path / "bad.onnx"
    onnx.save(model(), str(path))
    with pytest.raises(SpecError, match=rf"'{re.escape(str(path))}': {message}"):
        load_workload(path)


def test_names_that_are_not_utf8_are_refused(tmp_path: Path):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="Q"), helper.make_node("Relu", ["a"], ["y"], name="B")]
    data = _relu_pair(nodes).SerializeToString()
    assert data.count(b"Q") == 1
    path = tmp_path / "damaged.onnx"
    path.write_bytes(data.replace(b"Q", b"\x80"))  # protobuf reads the invalid UTF-8 name as bytes
    with pytest.raises(SpecError, match=r"damaged\.onnx': ONNX node #0 has the name or tensor b'\\x80'"):
        load_workload(path)


def test_nodes_out_of_order_keep_every_edge(tmp_path: Path):
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="B"), helper.make_node("Relu", ["x"], ["a"], name="A")]
    w = onnx_io.from_model(_relu_pair(nodes), name="unsorted")
    assert w.graph.edges == (("A", "B"),)


@pytest.mark.parametrize("length, propagated", [(4, True), (2**26, False)])
def test_long_1d_inputs_skip_onnx_data_propagation(monkeypatch, length, propagated):
    """ONNX data propagation treats a 1-D tensor as a shape, per element: an input of 2**26 floats ran out of
    6 GB in it. Such a model imports with plain shape inference."""
    seen = []
    infer_shapes = onnx.shape_inference.infer_shapes

    def spy(model, **options):
        seen.append(options.get("data_prop"))
        return infer_shapes(model, **{**options, "data_prop": False})

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", spy)
    nodes = [helper.make_node("Add", ["x", "x"], ["a"], name="A"), helper.make_node("Relu", ["a"], ["y"], name="B")]
    w = onnx_io.from_model(_relu_pair(nodes, x_shape=(length,)), name="long")
    assert seen and set(seen) == {propagated}
    assert w.graph.ops[0].attrs["shape"] == [length]


def _tied_head(copy: np.ndarray) -> onnx.ModelProto:
    """x [1, 3] @ ``val_1`` [3, 4] @ ``head.weight`` [4, 3]: ``val_1`` as the dynamo exporter folds a tied head's
    transpose of the embedding (``copy``: its values)."""
    weight = np.arange(12, dtype=np.float32).reshape(4, 3) / 7.0
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "val_1"], ["y"], name="/proj/MatMul"),
         helper.make_node("MatMul", ["y", "head.weight"], ["z"], name="/head/MatMul")], "tied",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(weight, "head.weight"), numpy_helper.from_array(copy, "val_1")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


@pytest.mark.parametrize("external", [False, True])
def test_a_folded_transpose_of_a_parameter_is_counted_as_that_parameter(tmp_path: Path, external: bool):
    """The dynamo exporter folded a tied head's transpose into a second initializer: the embedding was counted
    twice (42.7 kB where torch.export's import of the model said 29.8 kB). A weight of its own stays counted."""
    weight = np.arange(12, dtype=np.float32).reshape(4, 3) / 7.0
    for copy, counted in ((weight.T.copy(), 48.0), (weight.T[::-1].copy(), 96.0)):
        path = tmp_path / f"tied{counted:g}.onnx"
        onnx.save(_tied_head(copy), path, save_as_external_data=external, all_tensors_to_one_file=True,
                  location=f"{path.name}.data", size_threshold=0)
        assert sum(op.param_bytes for op in onnx_io.load(path).graph.ops) == counted
