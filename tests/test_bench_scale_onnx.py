"""The scale bench's ONNX models (``--onnx vit-b16 gpt2-small``), written small: each imports from its file, without
its weights' values, to the workload of the model loaded whole with its shapes inferred on it, every op shaped and
costed by its formula, and the weights counted once (GPT-2's head reads the token embedding, transposed, that its
first ``Gather`` reads)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper

from placement_dsl.io import load_workload
from placement_dsl.io import onnx as onnx_io
from placement_dsl.io.onnx_file import SMALL, read

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SMALL_SIZES = {"vit-b16": {"hidden": 96, "layers": 2, "mlp": 384, "tokens": 17, "patch": 56, "classes": 10},
               "gpt2-small": {"hidden": 96, "layers": 2, "heads": 4, "vocab": 1000, "context": 64, "seq": 16}}


@pytest.mark.parametrize("name", list(SMALL_SIZES))
def test_the_bench_models_import_from_the_file_as_loaded_whole(name, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.delitem(sys.modules, "common", raising=False)
    import bench_scale as bench

    path = tmp_path / f"{name}.onnx"
    write, _ = bench.MODELS[name]
    write(path, **SMALL_SIZES[name])
    light, skipped = read(path)
    assert skipped > SMALL  # the largest weights were seeked over
    a = load_workload(path)
    monkeypatch.setattr(onnx_io, "weightless", lambda model: model)  # as before: shapes inferred with the weights
    b = onnx_io.from_model(onnx.load(str(path)), name=name)
    assert [op.model_dump() for op in a.graph.ops] == [op.model_dump() for op in b.graph.ops]
    assert a.graph.edges == b.graph.edges
    assert a.meta["unshaped_ops"] == 0 and a.meta["estimated"] == {}
    weights = sum(math.prod(t.dims) * helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
                  for t in light.graph.initializer)
    assert sum(op.param_bytes for op in a.graph.ops) == weights == bench.weight_bytes(path)
