"""A GPT-2-style model exported to ONNX by torch (the TorchScript exporter, offline), imported with its module paths,
split between blocks by the DP, and the split run by torch.distributed.pipelining as the unsplit model."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_onnx_gpt_split_is_accepted_by_torch_and_reproduces_the_output(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    from torch.distributed.pipelining import SplitPoint, pipeline

    from placement_dsl.boundaries import Boundaries
    from placement_dsl.cluster import Cluster
    from placement_dsl.evaluate import CostModel
    from placement_dsl.export import export
    from placement_dsl.heuristics import run
    from placement_dsl.io import onnx as onnx_io
    from placement_dsl.placement import Placement

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import run_pipeline as rp
    finally:
        sys.path.remove(str(ROOT / "examples"))
    torch.manual_seed(0)
    model, (x,) = rp.make_gpt(2, quick=True)
    path = tmp_path / "gpt.onnx"
    torch.onnx.export(model, (x,), str(path), dynamo=False)
    graph = onnx_io.load(path).graph
    assert any(str(op.attrs.get("module") or "").startswith("h.3.") for op in graph.ops)
    cluster = Cluster.accelerators(2, bandwidth=1e9)  # roofline work of a tiny model: transfers must not dominate
    term = Boundaries.modules(2)
    term.validate(graph, cluster)
    found = run("dp", term.apply(graph, cluster), cluster, model=CostModel.named("throughput"))
    placement = Placement(graph, cluster, found.placement.assign)
    spec = export(placement, "torch-pipelining").data["split_spec"]
    (point,) = spec
    assert point.startswith("h.") and point in dict(model.named_modules())
    pipe = pipeline(model, (x,), split_spec={point: SplitPoint.BEGINNING})
    assert pipe.num_stages == 2
    with torch.no_grad():
        h = pipe.get_stage_module(0)(x)
        y = pipe.get_stage_module(1)(*(h if isinstance(h, tuple) else (h,)))
        y = y[0] if isinstance(y, tuple) else y
        assert torch.allclose(y, model(x), rtol=1e-5, atol=1e-6)
