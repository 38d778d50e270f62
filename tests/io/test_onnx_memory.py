"""The ONNX import holds the model's structure, never its weights: its memory is bounded by the weights.

A model of four 2048 x 2048 float32 matrices (64 MiB inline) is imported in a fresh process;
the resident memory the import adds is its peak (``VmHWM``) less that before it. Reading the file with
``onnx.load`` and running shape inference on it held four to seven copies of the weights.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

from placement_dsl.errors import SpecError
from placement_dsl.io import load_workload
from placement_dsl.io import onnx as onnx_io
from placement_dsl.io.onnx_file import SMALL, read, weightless

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the peak from /proc")
WIDTH, LAYERS = 2048, 4
WEIGHTS = LAYERS * WIDTH * WIDTH * 4  # bytes


def _model(width: int = WIDTH, layers: int = LAYERS) -> onnx.ModelProto:
    """``layers`` MatMul + Relu on a (batch, width) input, the weights inline; one weight as typed float_data."""
    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        w = rng.standard_normal((width, width), dtype=np.float32)
        init = numpy_helper.from_array(w, f"w{i}")
        if i == 0:  # the typed field, not raw_data
            init = helper.make_tensor(f"w{i}", TensorProto.FLOAT, [width, width], w.ravel().tolist())
        inits.append(init)
        nodes += [helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=f"/l{i}/MatMul"),
                  helper.make_node("Relu", [f"m{i}"], [f"r{i}"], name=f"/l{i}/Relu")]
        x = f"r{i}"
    inits.append(numpy_helper.from_array(np.array([1, width], dtype=np.int64), "shape"))
    nodes.append(helper.make_node("Reshape", [x, "shape"], ["y"], name="/out/Reshape"))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("onnx") / "mlp.onnx"
    onnx.save(_model(), str(path))
    return path


# the child's own peak (VmHWM): getrusage's ru_maxrss starts from the parent's at the fork and survives exec
CHILD = """
import json, sys
import onnx
from placement_dsl.io import onnx as onnx_io

def peak():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))

mode, path = sys.argv[1:]
model = onnx.load(path) if mode == "model" else None
base = peak()
w = onnx_io.load(path) if mode == "file" else onnx_io.from_model(model, name="mlp")
print(json.dumps({"grown": peak() - base, "ops": w.graph.n, "params": sum(op.param_bytes for op in w.graph.ops)}))
"""


def _import_in_child(mode: str, path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}, check=True, timeout=300)
    return json.loads(out.stdout)


def test_importing_a_file_reads_its_structure_not_its_weights(big: Path) -> None:
    got = _import_in_child("file", big)
    assert got["ops"] == 2 * LAYERS + 1 and got["params"] == WEIGHTS + 16
    assert got["grown"] < 0.25 * WEIGHTS, f"the import grew by {got['grown'] / WEIGHTS:.2f}x the weights"


def test_importing_a_loaded_model_infers_shapes_without_copying_its_weights(big: Path) -> None:
    got = _import_in_child("model", big)
    assert got["ops"] == 2 * LAYERS + 1 and got["params"] == WEIGHTS + 16
    assert got["grown"] < 0.25 * WEIGHTS, f"the import grew by {got['grown'] / WEIGHTS:.2f}x the weights"


def test_the_file_read_without_weights_keeps_every_name_shape_and_type(tmp_path: Path) -> None:
    model = _model(width=256, layers=3)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    light, skipped = read(path)
    assert skipped >= 3 * 256 * 256 * 4
    assert list(light.graph.node) == list(model.graph.node)
    assert [(t.name, list(t.dims), t.data_type) for t in light.graph.initializer] == \
        [(t.name, list(t.dims), t.data_type) for t in model.graph.initializer]
    kept = {t.name: t for t in light.graph.initializer}
    assert all(kept[f"w{i}"].data_location == TensorProto.EXTERNAL and not kept[f"w{i}"].raw_data
               and not kept[f"w{i}"].float_data for i in range(3))
    assert list(numpy_helper.to_array(kept["shape"])) == [1, 256]  # small values stay: shapes fold from them
    assert light.ByteSize() < SMALL and weightless(model).ByteSize() < SMALL
    a, b = load_workload(path).graph, onnx_io.from_model(model, name="m").graph
    assert [op.model_dump() for op in a.ops] == [op.model_dump() for op in b.ops] and a.edges == b.edges


def test_a_truncated_file_is_refused_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "cut.onnx"
    data = _model(width=256, layers=2).SerializeToString()
    path.write_bytes(data[:math.floor(len(data) * 0.6)])
    with pytest.raises(SpecError, match=r"cut\.onnx.*is not an ONNX model.*(past its end|ends)"):
        load_workload(path)
