"""A weight the dynamo ONNX exporter folds once per call of its module counts once; equal weights of distinct modules
count once each.

``torch.onnx.export(..., dynamo=True)`` of a ``Linear`` ``l`` called four times writes its transposed weight as four
initializers ``val_0``, ``val_2``, ``val_4``, ``val_6`` of equal values, each read by one call's ``MatMul`` under the
name scope ``l``; the model's parameters were counted four times (78,592 B against 29,440 B for an embedding, the
weight and its bias). Four distinct, untrained ``Linear`` modules ``ls.0`` ... ``ls.3`` holding equal values are
written alike but for their scopes, and are four parameters. The files are written by hand as that exporter writes
them (its scopes and names): the exporter itself takes tens of seconds."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placement_dsl.io import onnx as onnx_io

D = 8
WEIGHT = (np.arange(D * D, dtype=np.float32).reshape(D, D) / 17.0).T.copy()  # l.weight's transpose, as folded


def _calls(path, modules: list[str], outside: bool = True) -> None:
    """``x`` through one ``MatMul`` per entry of ``modules`` (the module each runs in), each reading its own copy of
    :data:`WEIGHT`, with a ``Relu`` of the root between two calls where ``outside``."""
    nodes, inits, h = [], [], "x"
    for k, module in enumerate(modules):
        inits.append(numpy_helper.from_array(WEIGHT, f"val_{2 * k}"))
        mm = helper.make_node("MatMul", [h, f"val_{2 * k}"], [f"val_{2 * k + 1}"], name=f"node_MatMul_{2 * k + 1}")
        mm.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(["", module, f"linear_{k}"]))
        nodes.append(mm)
        h = f"val_{2 * k + 1}"
        if outside:
            relu = helper.make_node("Relu", [h], [f"relu_{k}"], name=f"node_relu_{k}")
            relu.metadata_props.add(key="pkg.torch.onnx.name_scopes", value=repr(["", f"relu_{k}"]))
            nodes.append(relu)
            h = f"relu_{k}"
    graph = helper.make_graph(nodes, "calls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, D])],
                              [helper.make_tensor_value_info(h, TensorProto.FLOAT, [2, D])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))


@pytest.mark.parametrize("modules, outside, copies", [
    (["l"] * 4, True, 1),  # one module called four times: one weight
    (["ls.0", "ls.1", "ls.2", "ls.3"], True, 4),  # four modules, equal values (untrained copies): four weights
    (["l", "l"], False, 2),  # one call of one module reading two equal tensors: two weights
])
def test_a_weight_folded_once_per_call_counts_once(tmp_path, modules, outside, copies):
    path = tmp_path / "calls.onnx"
    _calls(path, modules, outside)
    g = onnx_io.load(path).graph
    assert sum(op.param_bytes for op in g.ops) == copies * WEIGHT.nbytes


def test_copies_of_unequal_values_in_one_module_count_each(tmp_path):
    """The same module read two initializers of one shape and different values in two calls: two weights (a module
    may index its own parameter list by call)."""
    path = tmp_path / "calls.onnx"
    _calls(path, ["l", "l"])
    model = onnx.load(str(path))
    model.graph.initializer[1].CopyFrom(numpy_helper.from_array(WEIGHT[::-1].copy(), "val_2"))
    onnx.save(model, str(path))
    assert sum(op.param_bytes for op in onnx_io.load(path).graph.ops) == 2 * WEIGHT.nbytes
