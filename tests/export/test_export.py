"""Exports a pipeline runtime reads: exact outputs on small hand-checked graphs, refusals, round trips."""
from __future__ import annotations

import csv
import doctest
import io
import json
import re
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

import placement_dsl.export as export_package
from placement_dsl.cli import main
from placement_dsl.cluster import Cluster, Device
from placement_dsl.errors import SpecError
from placement_dsl.export import EXPORTERS, export, layer_stages, megatron, pytorch, reused_modules, write
from placement_dsl.export.pytorch import schedule_rows
from placement_dsl.graph import Graph, Op
from placement_dsl.io import Workload, save_workload
from placement_dsl.placement import Placement
from placement_dsl.viz import split_points

from .titan_rule import flattened, recorded


# ---------------------------------------------------------------------------- graphs as the importers make them
def _graph(rows: list[tuple[str, str | None]], residual: list[tuple[str, str]] = (), name: str = "g") -> Graph:
    """A chain of ops named by ``rows`` (name, module path) in execution order, plus ``residual`` edges."""
    ops = [Op(name=n, work=1.0, out_bytes=1.0, attrs={"module": m} if m else {}) for n, m in rows]
    edges = [(a, b) for (a, _), (b, _) in pairwise(rows)] + list(residual)
    return Graph(ops, edges, name=name)


def gpt_like(layers: int = 4) -> Graph:
    """A GPT-2 as the dynamo ONNX exporter names it: embedding, ``transformer.h.N`` blocks (each with a
    residual add at the block's own level and a Split of no module), final norm, LM head."""
    rows: list[tuple[str, str | None]] = [("view", "transformer"), ("wte", "transformer.wte")]
    residual = []
    for i in range(layers):
        before = rows[-1][0]
        rows += [(f"h{i}.ln", f"transformer.h.{i}.ln_1"), (f"h{i}.attn", f"transformer.h.{i}.attn.c_attn"),
                 (f"h{i}.split", None), (f"h{i}.proj", f"transformer.h.{i}.attn.c_proj"),
                 (f"h{i}.mlp", f"transformer.h.{i}.mlp.c_fc"), (f"h{i}.add", f"transformer.h.{i}")]
        residual.append((before, f"h{i}.add"))
    rows += [("ln_f", "transformer.ln_f"), ("view2", "transformer"), ("lm_head", "lm_head")]
    return _graph(rows, residual, "gpt")


def cnn_like(suffixed: bool = False) -> Graph:
    """A torchvision-style ResNet: a stem, basic blocks ``layer1.N`` whose one ``relu`` module is called twice
    (the ONNX exporter names the second call ``relu_1``), a classifier."""
    rows: list[tuple[str, str | None]] = [("conv1", "conv1"), ("relu", "relu")]
    residual = []
    for b in range(2):
        p = f"layer1.{b}"
        before = rows[-1][0]
        rows += [(f"{p}.c1", f"{p}.conv1"), (f"{p}.r1", f"{p}.relu"), (f"{p}.c2", f"{p}.conv2"),
                 (f"{p}.add", p), (f"{p}.r2", f"{p}.relu_1" if suffixed else f"{p}.relu")]
        residual.append((before, f"{p}.add"))
    rows += [("fc", "fc")]
    return _graph(rows, residual, "cnn")


def _cut(g: Graph, *firsts: str, cluster: Cluster | None = None) -> Placement:
    """Stages beginning at the ops ``firsts`` (in the graph's op order)."""
    assign, k = [], 0
    for name in g.names:
        k += name in firsts
        assign.append(k)
    return Placement(g, cluster or Cluster.stages(len(firsts) + 1), assign)


# ---------------------------------------------------------------------------- exact outputs
def test_gpt_like_in_every_format():
    p = _cut(gpt_like(), "h2.ln")  # embedding + h.0, h.1 | h.2, h.3 + head
    assert export(p, "torch-pipelining").data["split_spec"] == {"transformer.h.2": "beginning"}
    assert export(Placement(flattened(p.graph, "transformer", ("h",)), p.cluster, p.assign),
                  "torchtitan").data["module_fqns_per_model_part"] == [["wte", "h.0", "h.1"], ["h.2", "h.3", "ln_f",
                                                                                                "lm_head"]]
    mega = export(p, "megatron")
    assert mega.data["pipeline_model_parallel_layout"] == "Et*2|t*2L" and mega.data["uneven"] is None
    assert mega.text == "--pipeline-model-parallel-size 2 --num-layers 4 --pipeline-model-parallel-layout Et*2|t*2L\n"
    ds = export(p, "deepspeed").data
    assert ds["parts"] == [0, 3, 6] and ds["layers"][0] == "embedding" and ds["layers"][-1] == "head"
    assert export(p, "vllm").text == "2,2\n"
    assert export(p, "schedule-csv", microbatches=2, schedule="gpipe").text == "0F0,0F1,,,0B0,0B1\n,1F0,1F1,1B0,1B1\n"


def test_megatron_uneven_first_and_last_stages():
    p = _cut(gpt_like(6), "h1.ln", "h3.ln", "h5.ln")  # 1 | 2 | 2 | 1 layers
    data = export(p, "megatron").data
    assert data["pipeline_model_parallel_layout"] == "Et|t*2|t*2|tL"
    assert data["uneven"] == {"decoder_first_pipeline_num_layers": 1, "decoder_last_pipeline_num_layers": 1}
    assert export(p, "vllm").text == "1,2,2,1\n"


def test_cnn_like_split_between_blocks():
    p = _cut(cnn_like(), "layer1.1.c1")
    assert export(p, "torch-pipelining").data["split_spec"] == {"layer1.1": "beginning"}
    with pytest.raises(SpecError, match=r"stage 1 begins inside module 'layer1' \(depth 1\)"):
        export(p, "torch-pipelining", depth=1)  # at depth 1 the split cuts layer1
    with pytest.raises(SpecError, match=r"torchtitan: module 'layer1' runs on stages 0 and 1 .*a top-level module "
                                        r"the model calls, which holds 'layer1.1'"):  # a Sequential, kept whole
        export(Placement(recorded(p.graph), p.cluster, p.assign), "torchtitan")
    assert export(p, "vllm").text == "1,1\n" and export(p, "deepspeed").data["parts"] == [0, 2, 4]


def test_schedule_1f1b_rows_by_hand():
    assert schedule_rows(2, 3, "1f1b") == [["0F0", "0F1", "", "0B0", "0F2", "0B1", "", "0B2"],
                                           ["", "1F0", "1B0", "1F1", "1B1", "1F2", "1B2"]]


# ---------------------------------------------------------------------------- refusals
def test_non_contiguous_plan_is_refused():
    g = gpt_like(2)
    assign = [0] * g.n
    assign[g.index["h0.mlp"]] = 1
    with pytest.raises(SpecError, match=r"device 'stage0' holds stages \[0, 2\].*not contiguous"):
        export(Placement(g, Cluster.stages(2), assign), "torch-pipelining")


@pytest.mark.parametrize("source, remedy", [("polish", "made by polish; solve with --method dp"),
                                            ("dp", "made by dp; solve with --method slicegraph"),
                                            ("", r"\(solve with --method dp\)")])
def test_a_refused_plan_names_the_method_that_made_it_and_not_the_same_one_as_the_fix(source, remedy):
    """The hint said 'solve with --method dp' whatever made the split, dp's own included."""
    g = gpt_like(2)
    assign = [0] * g.n
    assign[g.index["h0.mlp"]] = 1
    with pytest.raises(SpecError, match=remedy):
        export(Placement(g, Cluster.stages(2), assign, source=source), "torch-pipelining")


def test_stages_listed_in_another_order_than_the_devices_are_one_run_each():
    """The first stage on the last device, and a module that reads nothing (a source, as a constant's op) on
    another: ordered by device index, the source ran first and left stage0 two runs ('holds stages [0, 2]')."""
    g = _graph([("a", "a"), ("b", "b"), ("c", "c"), ("d", "d")])
    g = Graph([*g.ops, Op(name="k", work=1.0, out_bytes=1.0, attrs={"module": "k"})], [*zip(g.names, g.names[1:]),
                                                                                        ("k", "d")], name="g")
    placement = Placement(g, Cluster.stages(2), [1, 1, 0, 0, 0])  # a b on stage1, then c d and the source k
    out = export(placement, "torch-pipelining")
    assert [[g.names[v] for v in s.ops] for s in export_package.stages_of(placement)] == [["a", "b"], ["c", "k", "d"]]
    assert "c" in out.text


@pytest.mark.parametrize("to", list(EXPORTERS))
def test_cpu_stage_is_refused_by_every_format(to: str):
    cluster = Cluster([Device(name="gpu0"), Device(name="cpu0", kind="cpu")])
    with pytest.raises(SpecError, match=r"stage 1 runs on cpu device 'cpu0'.*accelerators only"):
        export(_cut(gpt_like(), "h2.ln", cluster=cluster), to)


def test_replicated_stage_is_refused():
    g = gpt_like()
    assign = [0 if i < g.index["h2.ln"] else 1 for i in range(g.n)]
    p = Placement(g, Cluster.stages(3), assign, replicas={"stage1": ["stage1", "stage2"]})
    with pytest.raises(SpecError, match=r"stage 1 on 'stage1' is replicated on 2 devices"):
        export(p, "vllm")


def test_boundary_inside_a_block_is_refused_naming_it():
    p = _cut(gpt_like(), "h1.mlp")  # the residual add of transformer.h.1 reads h.0's output across the split
    with pytest.raises(SpecError, match=r"stage 1 begins at 'transformer.h.1.mlp.*inside module 'transformer.h.1'"):
        export(p, "torch-pipelining")
    with pytest.raises(SpecError, match=r"stage 1 begins inside module 'transformer.h.1' \(depth 3\)"):
        export(p, "torch-pipelining", depth=3)
    for to in ("megatron", "vllm", "deepspeed"):
        with pytest.raises(SpecError, match=rf"{to}: layer 'transformer.h.1' is cut between stages 0 and 1"):
            export(p, to)


def test_split_at_a_reused_module_is_refused():
    p = _cut(cnn_like(suffixed=True), "layer1.0.r2")  # after the block's add: the exporter's 'relu_1' call
    assert "layer1.0.relu_1" in reused_modules(p) and "layer1.0.relu" in reused_modules(p)
    with pytest.raises(SpecError, match=r"begins at 'layer1.0.relu_1', a module called more than once"):
        export(p, "torch-pipelining")
    g = _graph([("c1", "features.conv1"), ("a1", "features.act"), ("c2", "features.conv2"), ("a2", "features.act"),
                ("fc", "fc")])
    p = _cut(g, "a1")  # features.act is called twice (torch.export names both calls alike)
    assert reused_modules(p) == {"features.act"}
    # the same point of the program is the end of features.conv1, which the model calls once
    assert export(p, "torch-pipelining").data["split_spec"] == {"features.conv1": "end"}
    g = _graph([("c1", "features.conv"), ("a1", "features.act"), ("c2", "features.conv"), ("a2", "features.act"),
                ("fc", "fc")])
    p = _cut(g, "a1")  # no other name: the module before is called twice too
    with pytest.raises(SpecError, match=r"begins at 'features.act', a module called more than once"):
        export(p, "torch-pipelining")


def test_a_module_alone_between_ops_of_no_module_is_refused():
    """``body`` alone on stage 1, the root's own ops before and after it: its beginning and its end are the only
    points, one key of split_spec for two, which torch would build as 2 stages where 3 were planned."""
    g = _graph([("a", "pre"), ("r0", None), ("b", "body"), ("r1", None), ("c", "head")])
    with pytest.raises(SpecError, match=r"stage 1 is module 'body' alone, which would be split at both its "
                                        r"beginning and its end") as err:
        export(_cut(g, "b", "r1"), "torch-pipelining")
    assert "\n" not in str(err.value)


def test_stage_beginning_with_an_op_of_no_module_is_refused():
    # after c_attn's end, inside the block whose residual add reads the embedding: no runtime cuts there
    with pytest.raises(SpecError, match=r"stage 1 begins at 'transformer.h.0.attn.c_attn' inside module "
                                        r"'transformer.h.0', whose op 'h0.add'.*residual"):
        export(_cut(gpt_like(), "h0.split"), "torch-pipelining")
    g = _graph([("a", "enc"), ("b", None), ("c", None), ("d", "dec")])
    with pytest.raises(SpecError, match=r"stage 1 begins with op 'c', which belongs to no module, after op 'b' "
                                        r"of no module either"):
        export(_cut(g, "c"), "torch-pipelining")
    assert export(_cut(g, "b"), "torch-pipelining").data["split_spec"] == {"enc": "end"}


def test_graph_without_module_paths_is_refused_with_the_fix():
    g = Graph([Op(name="L00.attn", work=1.0), Op(name="L01.attn", work=1.0)], [("L00.attn", "L01.attn")], name="z")
    for to in ("torch-pipelining", "torchtitan"):
        with pytest.raises(SpecError, match=rf"{to}: graph 'z' has no module paths.*placement-dsl import"):
            export(_cut(g, "L01.attn"), to)


def test_embedding_off_the_first_stage_is_refused():
    with pytest.raises(SpecError, match=r"op 'wte' of the embedding runs on stage 1; megatron keeps the embedding"):
        export(_cut(gpt_like(), "wte"), "megatron")


def test_no_layer_list_is_refused_for_layer_runtimes():
    g = _graph([("a", "encoder"), ("b", "decoder")])
    with pytest.raises(SpecError, match=r"vllm: graph 'g' has no repeated layer list"):
        export(_cut(g, "b"), "vllm")


def test_unknown_format_and_bad_options():
    p = _cut(gpt_like(), "h2.ln")
    with pytest.raises(SpecError, match=r"export format 'onnx' is unknown"):
        export(p, "onnx")
    with pytest.raises(SpecError, match=r"schedule 'zb' is unknown"):
        export(p, "schedule-csv", schedule="zb")


# ---------------------------------------------------------------------------- round trips
def _layout_counts(layout: str) -> list[int]:
    stages = layout.split("|")
    return [sum(int(n or 1) for n in re.findall(r"t(?:\*(\d+))?", s)) for s in stages]


def test_round_trips():
    g = gpt_like(6)
    p = _cut(g, "h2.ln", "h3.ln")
    counts = list(layer_stages(p, "test").counts)
    assert counts == [2, 1, 3]
    assert _layout_counts(export(p, "megatron").data["pipeline_model_parallel_layout"]) == counts
    assert [int(c) for c in export(p, "vllm").text.strip().split(",")] == counts
    parts = export(p, "deepspeed").data["parts"]
    assert np.diff(parts).tolist() == [counts[0] + 1, counts[1], counts[2] + 1]
    spec = json.loads(export(p, "torch-pipelining").text)["split_spec"]
    firsts = [next(n for n in g.names if (g.ops[g.index[n]].attrs.get("module") or "").startswith(k)) for k in spec]
    assert _cut(g, *firsts) == p  # the split points give back the stages
    rows = list(csv.reader(io.StringIO(export(p, "schedule-csv", microbatches=3).text)))
    for r, row in enumerate(rows):
        acts = [a for a in row if a]
        assert sorted(acts) == sorted(f"{r}{k}{m}" for k in "FB" for m in range(3))


def test_show_splits_uses_the_same_stages():
    p = _cut(gpt_like(), "h2.ln")
    points = split_points(p, depth=3)
    assert list(points["split_spec"]) == list(export(p, "torch-pipelining", depth=3).data["split_spec"])


# ---------------------------------------------------------------------------- ONNX importer and command line
def test_onnx_module_paths_export(tmp_path: Path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from placement_dsl.io import onnx as onnx_io

    weights = [helper.make_tensor(f"w{i}", TensorProto.FLOAT, [4, 4], [0.0] * 16) for i in range(3)]
    nodes = [helper.make_node("Relu", ["x"], ["e"], name="/embed/Relu")]
    prev = "e"
    for i in range(3):
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"y{i}"], name=f"/h.{i}/MatMul"))
        prev = f"y{i}"
    nodes.append(helper.make_node("Relu", [prev], ["out"], name="/head/Relu"))
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 4])], weights)
    path = tmp_path / "tiny.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    w = onnx_io.load(path)
    assert [op.attrs.get("module") for op in w.graph.ops] == ["embed", "h.0", "h.1", "h.2", "head"]
    p = _cut(w.graph, "/h.1/MatMul")
    assert export(p, "vllm").text == "1,2\n"
    assert export(p, "torch-pipelining").data["split_spec"] == {"h.1": "beginning"}


def test_cli_export_writes_and_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    g = gpt_like()
    work = tmp_path / "gpt.json"
    save_workload(Workload(g, Cluster.stages(2), "native"), work)
    split = tmp_path / "split.json"
    split.write_text(json.dumps(_cut(g, "h2.ln").to_dict()))
    out = tmp_path / "layout.txt"
    assert main(["export", str(work), "--split", str(split), "--to", "vllm", "--out", str(out), "--json"]) == 0
    assert out.read_text() == "2,2\n"
    assert json.loads(capsys.readouterr().out)["data"]["VLLM_PP_LAYER_PARTITION"] == "2,2"
    split.write_text(json.dumps(_cut(g, "h1.mlp").to_dict()))
    bad = tmp_path / "bad.txt"
    assert main(["export", str(work), "--split", str(split), "--to", "megatron", "--out", str(bad)]) == 2
    assert "layer 'transformer.h.1' is cut" in capsys.readouterr().err and not bad.exists()
    csv_out = tmp_path / "s.csv"
    split.write_text(json.dumps(_cut(g, "h2.ln").to_dict()))
    assert main(["export", str(work), "--split", str(split), "--to", "schedule-csv", "--microbatches", "2",
                 "--schedule", "gpipe", "--out", str(csv_out)]) == 0
    assert csv_out.read_text() == "0F0,0F1,,,0B0,0B1\n,1F0,1F1,1B0,1B1\n"


def test_write_is_whole(tmp_path: Path):
    result = export(_cut(gpt_like(), "h2.ln"), "torch-pipelining")
    write(result, tmp_path / "parts.json")
    assert json.loads((tmp_path / "parts.json").read_text()) == result.data


def test_module_doctests():
    results = [doctest.testmod(module) for module in (export_package, megatron, pytorch)]
    assert all(r.failed == 0 for r in results) and sum(r.attempted for r in results) >= 3


# ---------------------------------------------------------------------------- exported models
DATA = Path(__file__).resolve().parents[1] / "data"


def _first_of(g: Graph, module: str) -> str:
    """The first op (in the exporter's order) inside ``module``."""
    return next(op.name for op in g.ops if (op.attrs.get("module") or "").startswith(module))


def test_gpt2_from_the_dynamo_exporter():
    pytest.importorskip("onnx")
    from placement_dsl.io import onnx as onnx_io

    g = onnx_io.load(DATA / "gpt2.onnx", batch=2, seq=64).graph  # Split ops of no module inside each block
    p = _cut(g, _first_of(g, "transformer.h.2"))
    assert export(p, "torch-pipelining").data["split_spec"] == {"transformer.h.2": "beginning"}
    with pytest.raises(SpecError, match=r"torchtitan: module 'transformer' runs on stages 0 and 1 .*which holds "
                                        r"'transformer.h'"):  # GPT-2 calls its wrapper; torchtitan keeps it whole
        export(p, "torchtitan")
    assert export(p, "megatron").data["pipeline_model_parallel_layout"] == "Et*2|t*2L"
    assert export(p, "vllm").text == "2,2\n"
    with pytest.raises(SpecError, match=r"op 'node_layer_norm_8' of the head runs on stage 0"):
        export(_cut(g, "node_linear"), "vllm")  # the final norm and the LM head split apart


def test_resnet_cut_inside_a_residual_block_is_refused():
    pytest.importorskip("onnx")
    from placement_dsl.io import onnx as onnx_io

    g = onnx_io.load(DATA / "resnet18.onnx", batch=4).graph
    block = "resnet.encoder.stages.1.layers.1"
    p = _cut(g, _first_of(g, f"{block}.layer.0.activation"))
    with pytest.raises(SpecError, match=rf"inside module '{re.escape(block)}', whose op .*Add"):
        export(p, "torch-pipelining")
    p = _cut(g, _first_of(g, "resnet.encoder.stages.2"))
    assert export(p, "torch-pipelining").data["split_spec"] == {"resnet.encoder.stages.2": "beginning"}
