"""Models exported by PyTorch's own ONNX exporters import, solve and show.

tests/data holds ``resnet18.onnx`` (Hugging Face's ``ResNetForImageClassification`` with
ResNet-18's configuration, TorchScript exporter, opset 13) and ``gpt2.onnx`` (``GPT2LMHeadModel``,
4 layers of width 256 with GPT-2's vocabulary and tied embeddings, the ``torch.export``-based
exporter, opset 18), and ``gpt_blocks.onnx`` (a GPT-style decoder of ``nn.TransformerEncoderLayer``
blocks, TorchScript exporter, opset 14: ``Constant`` nodes and ``Shape``/``Gather``/``Concat`` shape
arithmetic), made by scripts/export_onnx_fixtures.py with their weights as external data that is
not committed: the importer reads the graph and the initializers' shapes only.

The expectations are computed here from the ONNX protos themselves, not from the importer:
parameter bytes from each initializer's dims and type (an initializer read by several nodes
counted once, where the first node reading it sits), module names from the node names or
the parameter names.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import evaluate
from placement_dsl.heuristics import run
from placement_dsl.io import onnx as onnx_io
from placement_dsl.viz import gantt, split_points

DATA = Path(__file__).resolve().parents[1] / "data"
RESNET, GPT2, BLOCKS = DATA / "resnet18.onnx", DATA / "gpt2.onnx", DATA / "gpt_blocks.onnx"


def _proto(path: Path):
    return onnx.load(str(path), load_external_data=False)


def _init_bytes(init) -> int:
    return math.prod(init.dims) * onnx.helper.tensor_dtype_to_np_dtype(init.data_type).itemsize


def _first_readers(model) -> dict[str, str]:
    """Initializer -> name of the first node reading it, directly or through Identity nodes."""
    alias = {i.name: i.name for i in model.graph.initializer}
    first: dict[str, str] = {}
    for node in model.graph.node:
        if node.op_type == "Identity" and node.input[0] in alias:
            alias[node.output[0]] = alias[node.input[0]]
            continue
        for name in node.input:
            if name in alias:
                first.setdefault(alias[name], node.name)
    return first


def _two_stages(w) -> Cluster:
    """Two accelerators like the workload's first, on its links (PCIe): a transfer costs what it costs there."""
    acc = w.cluster.devices[0]
    return Cluster.stages(2, memory=acc.memory, bandwidth=acc.bandwidth)


def test_files_hold_shapes_not_weights():
    for path, weights in ((RESNET, 40e6), (GPT2, 40e6), (BLOCKS, 2e6)):
        model = _proto(path)
        external = [i for i in model.graph.initializer if i.data_location == onnx.TensorProto.EXTERNAL]
        assert path.stat().st_size < 400_000 and len(external) >= 20
        assert sum(_init_bytes(i) for i in external) > weights  # MBs of weights described, none stored
        assert not (path.parent / (path.name + ".data")).exists()


def test_torchscript_shape_arithmetic_is_evaluated():
    model = _proto(BLOCKS)
    types = Counter(n.op_type for n in model.graph.node)
    assert types["Constant"] > 100 and types["Shape"] > 10 and types["Concat"] > 10 and types["Gather"] > 10
    w = onnx_io.load(BLOCKS, batch=2, seq=32)  # the sequence length it was traced with
    assert w.meta["dims"] == {"batch": 2, "sequence": 32} and w.meta["unshaped_ops"] == 0 and not w.meta["estimated"]
    assert "note" not in w.meta and sum(op.param_bytes for op in w.graph.ops) == sum(
        _init_bytes(i) for i in model.graph.initializer)
    ops = {op.name: op for op in w.graph.ops}
    scores = ops["/h/layers.0/self_attn/MatMul_1"]  # Q K^T per head, after reshapes computed from shapes
    assert scores.attrs["shape"] == [2, 4, 32, 32] and scores.attrs["flops"] == 2 * 2 * 4 * 32 * 32 * 32
    # every product of the model, analytically: tokens T, width W, sequence S, vocabulary V, two layers
    T, W, S, V = 64, 128, 32, 1000
    per_layer = 2 * T * W * 3 * W + 2 * 2 * T * S * W + (2 * T * W * W + T * W) + 2 * 2 * T * W * 4 * W
    products = sum(op.attrs["flops"] for op in w.graph.ops if op.attrs["type"] in ("MatMul", "Gemm"))
    assert products == 2 * per_layer + 2 * T * W * V
    coarse = onnx_io.load(BLOCKS, batch=2, seq=32, granularity="layer", depth=3)
    assert list(coarse.graph.names) == ["wte", "h.layers.0", "h.layers.1", "ln_f", "lm_head"]
    # at another length the baked constants contradict the shapes: said, naming a reshape
    other = onnx_io.load(BLOCKS, batch=2, seq=64)
    assert "fixed at trace time" in other.meta["note"] and other.meta["resized"][0].startswith("/h/layers.0/")


def test_resnet18_memory_per_stage_is_its_initializers():
    model = _proto(RESNET)
    w = onnx_io.load(RESNET, batch=4)
    assert w.meta["dims"] == {"batch": 4} and w.meta["opset"] == {"ai.onnx": 13} and not w.meta["estimated"]
    assert w.graph.n == sum(n.op_type != "Identity" for n in model.graph.node)
    # module paths from TorchScript's name scopes: /resnet/encoder/stages.0/layers.0/layer/layer.1/convolution/Conv
    module = {op.name: op.attrs["module"] for op in w.graph.ops}
    assert module["/resnet/encoder/stages.0/layers.0/layer/layer.1/convolution/Conv"] == \
        "resnet.encoder.stages.0.layers.0.layer.1.convolution"
    assert module["/classifier/classifier.1/Gemm"] == "classifier.1"
    conv = w.graph.ops[w.graph.index["/resnet/embedder/embedder/convolution/Conv"]]
    assert conv.attrs["shape"] == [4, 64, 112, 112] and conv.attrs["flops"] == 2 * 4 * 64 * 112 * 112 * 3 * 49 + \
        4 * 64 * 112 * 112

    placement = run("dp", w.graph, _two_stages(w)).placement
    ev = evaluate(placement)
    assert ev.valid and [d.ops > 0 for d in ev.devices] == [True, True]
    owner = {name: placement.cluster.names[int(placement.assign[i])] for i, name in enumerate(w.graph.names)}
    expected = Counter()
    for init_name, reader in _first_readers(model).items():
        expected[owner[reader]] += _init_bytes(next(i for i in model.graph.initializer if i.name == init_name))
    activations = np.bincount(placement.assign, weights=w.graph.activation_bytes, minlength=2)
    for d, row in enumerate(ev.devices):
        assert row.memory_used - activations[d] == pytest.approx(expected[row.device], abs=0.5)
    assert sum(expected.values()) == sum(_init_bytes(i) for i in model.graph.initializer) == 46_738_848

    points = split_points(placement, depth=4)
    second = points["stages"][1]
    begins = module[second["first"]]  # the module of the first op on the second stage
    assert [s["device"] for s in points["stages"]] == ["stage0", "stage1"]
    if points["split_spec"]:  # the exporter's split point: the module at depth 4 where the second stage begins
        (cut, how), = points["split_spec"].items()
        assert how == "beginning" and cut == ".".join(begins.split(".")[:4]) == second["layers"][0]
    else:  # the split falls inside a module at depth 4 (a residual stage): the exporter refuses, saying why
        assert "torch-pipelining:" in points["warnings"][-1]
    assert begins.startswith(("resnet.encoder.stages.", "resnet.pooler", "classifier"))
    assert points["layers"][0] == "resnet.embedder.embedder.convolution" and points["layers"][-1] == "classifier.1"


def test_gpt2_tied_embedding_counted_once_and_layers_by_module():
    model = _proto(GPT2)
    w = onnx_io.load(GPT2, batch=2, seq=64, granularity="layer", depth=3)
    assert w.meta["dims"]["seq*batch"] == 128 and w.meta["opset"]["ai.onnx"] == 18
    assert list(w.graph.names) == ["transformer.wte", *(f"transformer.h.{i}" for i in range(4)), "transformer.ln_f",
                                   "lm_head"]
    total = sum(_init_bytes(i) for i in model.graph.initializer)
    assert sum(op.param_bytes for op in w.graph.ops) == total
    # the exporter names each parameter by its module path; the tied matrix is lm_head.weight, read first by the
    # token lookup, and the position table is summed into the embedding layer
    tied = next(i for i in model.graph.initializer if list(i.dims) == [50257, 256])
    assert tied.name == "lm_head.weight" and not any(i.name == "transformer.wte.weight" for i in model.graph.initializer)
    named = Counter()
    for init in model.graph.initializer:
        layer = ".".join(init.name.split(".")[:3])
        if init is tied or init.name.startswith("transformer.wpe."):
            layer = "transformer.wte"
        named[layer] += _init_bytes(init)
    constants = sum(_init_bytes(i) for i in model.graph.initializer if "." not in i.name)  # val_*: shapes, scalars
    assert constants < 1000
    for op in w.graph.ops:  # each layer holds its own parameters; the tied wte/lm_head matrix once, at its lookup
        assert named.get(op.name, 0) <= op.param_bytes <= named.get(op.name, 0) + constants, op.name
    vocab = _init_bytes(tied)
    wte = w.graph.ops[w.graph.index["transformer.wte"]]
    lm_head = w.graph.ops[w.graph.index["lm_head"]]
    assert wte.param_bytes >= vocab and lm_head.param_bytes < vocab
    # the head's matrix product: 2 * tokens * width * vocabulary
    assert lm_head.attrs["flops"] == pytest.approx(2 * 128 * 256 * 50257, rel=1e-6)

    placement = run("dp", w.graph, _two_stages(w)).placement
    points = split_points(placement)
    (cut, _), = points["split_spec"].items()
    assert cut in {f"transformer.h.{i}" for i in range(1, 4)} | {"transformer.ln_f", "lm_head"}
    ev = evaluate(placement)
    per_stage = np.bincount(placement.assign, weights=w.graph.param_bytes + w.graph.activation_bytes, minlength=2)
    assert [d.memory_used for d in ev.devices] == pytest.approx(per_stage.tolist())

    result = gantt.simulated(placement, microbatches=4)
    bars = gantt.bars(result)
    assert len(bars) == len(result.trace) == 2 * 4
    assert Counter((b["device"], b["microbatch"]) for b in bars) == {(d, m): 1 for d in ("stage0", "stage1")
                                                                      for m in range(4)}


@pytest.mark.parametrize("path, options, depth", [(RESNET, [], "4"), (GPT2, ["--seq", "32"], "3")])
def test_command_line_imports_solves_and_shows(tmp_path, capsys, path, options, depth):
    work, split = tmp_path / "w.json", tmp_path / "split.json"
    assert main(["import", str(path), "--out", str(work), "--batch", "2", *options, "--granularity", "layer",
                 "--depth", depth]) == 0
    capsys.readouterr()
    assert main(["solve", str(work), "--stages", "2", "--method", "dp", "--out", str(split), "--json"]) == 0
    solved = json.loads(capsys.readouterr().out)
    assert solved["status"] in ("feasible", "optimal") and all(isinstance(d["memory_bytes"], float)
                                                               for d in solved["devices"])
    assert sum(d["memory_bytes"] > 0 for d in solved["devices"]) >= 2
    assert main(["show", str(work), "--split", str(split), "--kind", "splits", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    layers = [op["name"] for op in json.loads(work.read_text())["graph"]["ops"]]  # module paths at this depth
    assert shown["layers"] == layers and len(shown["stages"]) >= 2
    if any(s["device"].startswith("cpu") for s in shown["stages"]):  # the default cluster's host CPU took a layer
        assert shown["split_spec"] == {} and "accelerators only" in shown["warnings"][-1]  # the exporter refuses
    else:
        assert len(shown["split_spec"]) == len(shown["stages"]) - 1 and set(shown["split_spec"]) <= set(layers[1:])
    svg = tmp_path / "gantt.svg"
    assert main(["show", str(work), "--split", str(split), "--kind", "gantt", "--out", str(svg), "--json"]) == 0
    drawn = json.loads(capsys.readouterr().out)
    used = sum(d["ops"] > 0 for d in solved["devices"])
    assert drawn["tasks"] == used * drawn["microbatches"] and svg.read_text().lstrip().startswith("<?xml")


# ---------------------------------------------------------------------------- what real exporters emit, one at a time
def test_torchscript_scopes_give_the_module_path():
    from onnx import helper

    node = helper.make_node("Conv", ["x", "w"], ["y"], name="/layer1/layer1.0/conv1/Conv")
    assert onnx_io.module_path(node) == "layer1.0.conv1"
    node = helper.make_node("Add", ["a", "b"], ["c"], name="/encoder/stages.0/layers.1/layer/layer.0/Add")
    assert onnx_io.module_path(node) == "encoder.stages.0.layers.1.layer.0"


@pytest.mark.parametrize("scopes, module", [
    ("['', 'transformer', 'transformer.h.0', 'transformer.h.0.attn', 'view_3']", "transformer.h.0.attn"),
    ("['', 'linear']", None),  # an op of the root module: the last scope is the op's own name
    ("['_empty_nn_module_stack_from_metadata_hook', 'sym_size_int_26']", None),
])
def test_dynamo_name_scopes_give_the_module_path(scopes, module):
    from onnx import helper

    node = helper.make_node("Relu", ["a"], ["b"], name="node_relu")
    node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=scopes)
    assert onnx_io.module_path(node) == module


def test_symbolic_dimension_expressions_are_evaluated():
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
    flat = helper.make_tensor_value_info("flat", TensorProto.FLOAT, ["seq*batch", 8])
    wide = helper.make_tensor_value_info("wide", TensorProto.FLOAT, ["seq + 1", "2*width // 4"])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["flat"])], "g", [x], [flat], value_info=[wide])
    model = helper.make_model(graph)
    fixed = onnx_io.fix_dimensions(model, batch=3, seq=5)
    assert fixed == {"batch": 3, "seq": 5, "seq*batch": 15, "seq + 1": 6}
    dims = [d.dim_value or d.dim_param for d in model.graph.value_info[0].type.tensor_type.shape.dim]
    assert dims == [6, "2*width // 4"]  # 'width' is open: left symbolic
    assert onnx_io.fix_dimensions(helper.make_model(graph), batch=3, seq=5, dims={"width": 6})["2*width // 4"] == 3
    with pytest.raises(SpecError, match="'widht'.* dimensions: \\['batch', 'seq', 'width'\\]"):
        onnx_io.fix_dimensions(helper.make_model(graph), batch=3, seq=5, dims={"widht": 6})  # a misspelt name: no
        # dimension is fixed by it, and 'width' would stay open without a word


def test_layers_take_in_parent_scope_and_unscoped_ops():
    from placement_dsl.graph import Graph, Op
    from placement_dsl.io.costs import layers

    def op(name, module):
        return Op(name=name, work=1.0, out_bytes=1.0, attrs={"module": module} if module else {})

    ops = [op("view", "model"), op("lookup", "model.wte"), op("add_pos", "model"), op("q", "model.h.0.attn"),
           op("split", None), op("attn", "model.h.0.attn"), op("res", "model.h.0"), op("mlp", "model.h.0.mlp"),
           op("res2", "model.h.0"), op("head", "lm_head")]
    edges = [("view", "lookup"), ("lookup", "add_pos"), ("add_pos", "q"), ("q", "split"), ("split", "attn"),
             ("attn", "res"), ("add_pos", "res"), ("res", "mlp"), ("mlp", "res2"), ("res", "res2"), ("res2", "head")]
    g = Graph(ops, edges)
    coarse = layers(g, depth=3)  # 'model' is the parent of model.wte and model.h: its ops join a neighbour
    assert list(coarse.names) == ["model.wte", "model.h.0", "lm_head"]
    assert coarse.ops[0].attrs["ops"] == 3 and coarse.ops[1].attrs["ops"] == 6
    fine = layers(g)  # residual sums join the latest producer's layer, the rewriter's split its producer's
    assert list(fine.names) == ["model.wte", "model.h.0.attn", "model.h.0.mlp", "lm_head"]


@pytest.mark.parametrize("opset", [11, 13])  # Unsqueeze's axes: an attribute before opset 13, an input after
def test_reshape_targets_computed_from_shapes(opset):
    """x (batch, seq, 12) -> (batch, seq, 3, 4) by a Shape/Gather/Div/Cast/Unsqueeze/Concat chain shape
    inference cannot follow (Cast and Div of shape values), then a MatMul on the result."""
    from onnx import TensorProto, helper, numpy_helper

    def const(name, values):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(values), name))

    def unsqueeze(src, out):
        if opset >= 13:
            return [const(out + "_axes", [0]), helper.make_node("Unsqueeze", [src, out + "_axes"], [out])]
        return [helper.make_node("Unsqueeze", [src], [out], axes=[0])]

    nodes = [helper.make_node("Shape", ["x"], ["shape"]), const("i0", 0), const("i1", 1), const("i2", 2),
             const("four", 4.0),
             helper.make_node("Gather", ["shape", "i0"], ["b"]), helper.make_node("Gather", ["shape", "i1"], ["s"]),
             helper.make_node("Gather", ["shape", "i2"], ["w"]), helper.make_node("Cast", ["w"], ["wf"], to=1),
             helper.make_node("Div", ["wf", "four"], ["hf"]), helper.make_node("Cast", ["hf"], ["h"], to=7),
             *unsqueeze("b", "ub"), *unsqueeze("s", "us"), *unsqueeze("h", "uh"), const("d", [4]),
             helper.make_node("Concat", ["ub", "us", "uh", "d"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["heads"], name="/attn/Reshape"),
             helper.make_node("MatMul", ["heads", "w4"], ["y"], name="/attn/MatMul")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 12])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.zeros((4, 5), np.float32), "w4")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    w = onnx_io.from_model(model, batch=2, seq=6)
    ops = {op.name: op for op in w.graph.ops}
    assert list(ops) == ["/attn/Reshape", "/attn/MatMul"] and w.meta["unshaped_ops"] == 0
    assert ops["/attn/Reshape"].attrs["shape"] == [2, 6, 3, 4] and ops["/attn/MatMul"].attrs["shape"] == [2, 6, 3, 5]
    assert ops["/attn/MatMul"].attrs["flops"] == 2 * (2 * 6 * 3 * 5) * 4 and ops["/attn/MatMul"].param_bytes == 80
