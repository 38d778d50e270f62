"""Importers and exporters: native JSON round trips, dnn-partitioning, PipeDream, MOIRAI, detection, errors."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.io import (
    Workload,
    detect_format,
    load_placement,
    load_workload,
    pipedream,
    save_placement,
    save_workload,
)
from placement_dsl.io.dnn_partitioning import cluster_from_dict as dp_cluster_from_dict
from placement_dsl.io.workload import graph_to_dict, workload_from_dict, workload_to_dict
from placement_dsl.placement import Placement


# ---------------------------------------------------------------------------- native
def rich_workload() -> Workload:
    ops = [Op(name="x", work={"gpu": 1.5, "cpu": 4.0}, param_bytes=3, out_bytes=2.25, activation_bytes=1, group="g",
              attrs={"desc": "conv", "shape": [1, 2]}),
           Op(name="y", work=0.5, backward=True, group="g"), Op(name="z", work={"cpu": 2.0})]
    graph = Graph(ops, [("x", "y"), ("x", "z")], name="rich")
    cluster = Cluster([Device(name="g0", kind="gpu", memory=8.0, speed=2.0, bandwidth=3.0),
                       Device(name="c0", kind="cpu")], [Link(src="g0", dst="c0", bandwidth=5.0, latency=0.1)])
    return Workload(graph, cluster, "native", {"note": "round trip", "k": 2})


def test_native_workload_round_trip(tmp_path):
    w = rich_workload()
    path = tmp_path / "w.json"
    save_workload(w, path)
    back = load_workload(path)
    assert back.graph == w.graph and back.graph.name == "rich" and back.cluster == w.cluster
    assert back.meta == w.meta and back.format == "native"
    assert workload_to_dict(back) == workload_to_dict(w)  # exact, field by field
    assert math.isinf(back.cluster.memory[1])


def test_native_bare_graph_and_placement_round_trip(tmp_path):
    w = rich_workload()
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph_to_dict(w.graph)))
    assert load_workload(path).graph == w.graph
    p = Placement(w.graph, w.cluster, [0, 0, 1], source="hand")
    save_placement(p, tmp_path / "p.json", w, objective=1.25)
    q = load_placement(tmp_path / "p.json", w)
    assert q == p and q.source == "hand"
    assert json.loads((tmp_path / "p.json").read_text())["objective"] == 1.25


def _no_constant(name: str) -> None:
    raise ValueError(f"non-standard JSON constant {name}")


def test_unlimited_amounts_are_written_as_standard_json(tmp_path):
    """An unbounded device's memory and a link of unlimited bandwidth are ``null``, which a strict parser reads and
    the reader takes as unlimited; files holding Python's ``Infinity`` (as earlier versions wrote) still read."""
    w = rich_workload()
    cluster = Cluster(w.cluster.devices, [Link(src="g0", dst="c0", bandwidth=math.inf)])
    w = Workload(w.graph, cluster, "native", {"budget": math.inf})
    path = tmp_path / "w.json"
    save_workload(w, path)
    data = json.loads(path.read_text(), parse_constant=_no_constant)
    assert data["cluster"]["devices"][1]["memory"] is None and data["cluster"]["links"][0]["bandwidth"] is None
    back = load_workload(path)
    assert back.cluster == cluster and math.isinf(back.cluster.memory[1])
    old = tmp_path / "old.json"
    old.write_text(json.dumps(workload_to_dict(w)))  # Python's default writer: Infinity
    assert "Infinity" in old.read_text() and load_workload(old).cluster == cluster
    pair = Graph([Op(name="a", work=1.0, param_bytes=2.0, out_bytes=1.0), Op(name="b", work=2.0)], [("a", "b")])
    dp = Workload(pair, Cluster.accelerators(2, cpus=1), "native")
    save_workload(dp, tmp_path / "dp.json", format="dnn-partitioning")
    data = json.loads((tmp_path / "dp.json").read_text(), parse_constant=_no_constant)
    assert "maxSizePerFPGA" not in data and math.isinf(load_workload(tmp_path / "dp.json").cluster.memory[0])
    assert math.isinf(dp_cluster_from_dict({**data, "maxSizePerFPGA": None}).memory[0])


@pytest.mark.parametrize("data, message", [
    ({"format": "placement_dsl.workload", "version": 7, "graph": {}}, "unsupported version 7"),
    ({"format": "placement_dsl.graph"}, "'ops' list"),
    ({"format": "placement_dsl.workload", "graph": {"format": "nope", "ops": []}}, "expected format"),
])
def test_native_invalid(data, message):
    with pytest.raises(SpecError, match=message):
        workload_from_dict(data)


def test_writing_is_atomic(tmp_path):
    path = tmp_path / "w.json"
    save_workload(rich_workload(), path)
    before = path.read_text()
    bad = Workload(rich_workload().graph, rich_workload().cluster, "native", {"oops": object()})
    with pytest.raises(TypeError):
        save_workload(bad, path)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.json"]
    with pytest.raises(SpecError, match="cannot write format"):
        save_workload(rich_workload(), tmp_path / "w.txt")


# ---------------------------------------------------------------------------- errors & detection
def test_unreadable_and_invalid_files(tmp_path):
    with pytest.raises(SpecError, match="cannot read"):
        load_workload(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{ not json")
    with pytest.raises(SpecError, match="not valid JSON"):
        load_workload(tmp_path / "bad.json", format="native")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(SpecError, match="JSON object"):
        load_workload(tmp_path / "list.json", format="native")
    (tmp_path / "what.txt").write_text("hello\n")
    with pytest.raises(SpecError, match="cannot tell the format"):
        load_workload(tmp_path / "what.txt")
    with pytest.raises(SpecError, match="unknown format 'tflite'"):
        load_workload(tmp_path / "what.txt", format="tflite")
    with pytest.raises(SpecError, match="is not an ONNX model"):  # a named format that does not parse
        load_workload(tmp_path / "what.txt", format="onnx")
    with pytest.raises(SpecError, match="not a placement file"):
        load_placement(_write(tmp_path / "p.json", {"x": 1}), rich_workload())
    bare = {"assignment": {op.name: "s0" for op in rich_workload().graph.ops}}  # native but for its format line
    with pytest.raises(SpecError, match="has no 'format' field; .*'format': 'placement_dsl.placement'"):
        load_placement(_write(tmp_path / "bare.json", bare), rich_workload())
    with pytest.raises(SpecError, match="has 'format': 'other'"):
        load_placement(_write(tmp_path / "other.json", {**bare, "format": "other"}), rich_workload())


def _write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


def test_detect_format(tmp_path):
    assert detect_format(tmp_path / "a.xls") == "moirai"
    assert detect_format(_write(tmp_path / "n.json", workload_to_dict(rich_workload()))) == "native"
    assert detect_format(_write(tmp_path / "d.json", {"maxFPGAs": 2, "nodes": []})) == "dnn-partitioning"
    (tmp_path / "g.txt").write_text(PROFILE)
    assert detect_format(tmp_path / "g.txt") == "pipedream"


# ---------------------------------------------------------------------------- dnn-partitioning
def dnn_input(costs: tuple[float, float] = (3.0, 3.0)) -> dict:
    node = {"supportedOnFpga": 1, "isBackwardNode": 0}
    return {
        "maxSizePerFPGA": 10.0, "maxFPGAs": 2, "maxCPUs": 1,
        "nodes": [{"id": 1, "cpuLatency": 5.0, "fpgaLatency": 1.0, "size": 4.0, "colorClass": 1, **node},
                  {"id": 2, "cpuLatency": 6.0, "fpgaLatency": 2.0, "size": 3.0, "colorClass": 2, **node},
                  {"id": 3, "cpuLatency": 1.0, "fpgaLatency": 0.0, "size": 0.0, "colorClass": 3,
                   **node, "supportedOnFpga": 0}],
        "edges": [{"sourceId": 1, "destId": 2, "cost": costs[0]}, {"sourceId": 1, "destId": 3, "cost": costs[1]},
                  {"sourceId": 2, "destId": 3, "cost": 1.0}],
    }


def test_dnn_partitioning_import_export_both_ways(tmp_path):
    path = _write(tmp_path / "model.json", dnn_input())
    w = load_workload(path)
    assert w.format == "dnn-partitioning" and w.graph.name == "model"
    assert w.graph.out_bytes.tolist() == [3.0, 1.0, 0.0]
    assert w.graph.work("cpu").tolist() == [5.0, 6.0, 1.0] and math.isinf(w.graph.work("accelerator")[2])
    assert [d.name for d in w.cluster.devices] == ["acc0", "acc1", "cpu0"] and w.cluster.memory[0] == 10.0
    save_workload(w, tmp_path / "again.json", format="dnn-partitioning")
    back = load_workload(tmp_path / "again.json")
    assert back.cluster == w.cluster
    assert [op.work for op in back.graph.ops] == [op.work for op in w.graph.ops]
    assert back.graph.edges == w.graph.edges and np.array_equal(back.graph.out_bytes, w.graph.out_bytes)


def test_dnn_partitioning_split_files(tmp_path):
    w = load_workload(_write(tmp_path / "model.json", dnn_input()))
    split = _write(tmp_path / "split.json", {"fpgas": [{"nodes": [1]}, {"nodes": [2]}], "cpus": [{"nodes": [3]}]})
    p = load_placement(split, w)
    assert p.mapping() == {"1": "acc0", "2": "acc1", "3": "cpu0"}
    ev = evaluate(p)  # acc0: 1 + out 3; acc1: in 3 + 2 + out 1; cpu: 1
    assert ev.objective == 6.0
    save_placement(p, tmp_path / "out.json", w)
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["maxLoad"] == 6.0 and [f["nodes"] for f in data["fpgas"]] == [[1], [2]]
    assert load_placement(tmp_path / "out.json", w) == p
    bad = _write(tmp_path / "twice.json", {"fpgas": [{"nodes": [1]}, {"nodes": [1, 2, 3]}]})
    with pytest.raises(SpecError, match="node '1' twice"):
        load_placement(bad, w)
    many = _write(tmp_path / "many.json", {"fpgas": [{"nodes": []}, {"nodes": []}, {"nodes": [1, 2, 3]}]})
    with pytest.raises(SpecError, match="cluster has 2"):
        load_placement(many, w)


def test_dnn_partitioning_non_uniform_costs_are_subdivided(tmp_path):
    w = load_workload(_write(tmp_path / "model.json", dnn_input(costs=(3.0, 5.0))))
    g = w.graph
    assert {"1>2", "1>3"} <= set(g.names) and g.out_bytes[g.index["1"]] == 0.0
    assert g.out_bytes[g.index["1>2"]] == 3.0 and g.out_bytes[g.index["1>3"]] == 5.0
    assert g.group_id[g.index["1>2"]] == g.group_id[g.index["1"]] == g.group_id[g.index["1>3"]]
    p = load_placement(_write(tmp_path / "s.json", {"fpgas": [{"nodes": [1]}, {"nodes": [2]}],
                                                    "cpus": [{"nodes": [3]}]}), w)
    assert p.device_of("1>3") == "acc0"
    rows = evaluate(p).devices
    assert rows[0].transfer_out == 8.0  # each edge's own cost leaves the source accelerator
    save_placement(p, tmp_path / "back.json", w)
    assert [f["nodes"] for f in json.loads((tmp_path / "back.json").read_text())["fpgas"]] == [[1], [2]]


@pytest.mark.parametrize("change, message", [
    (lambda d: d["edges"].append({"sourceId": 1, "destId": 99, "cost": 1}), "unknown node '99'"),
    (lambda d: d["nodes"][0].update(cpuLatency=-1), "node 1: cpuLatency"),
    (lambda d: d["nodes"][1].pop("cpuLatency"), "node 2: missing field 'cpuLatency'"),
    (lambda d: d.pop("nodes"), "'nodes' list"),
])
def test_dnn_partitioning_invalid(tmp_path, change, message):
    data = dnn_input()
    change(data)
    with pytest.raises(SpecError, match=message):
        load_workload(_write(tmp_path / "m.json", data), format="dnn-partitioning")



@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(edges=[1, 2]), r"edges\[0\] = 1 is malformed"),
    (lambda d: d.update(edges=5), r"'edges' is malformed"),
    (lambda d: d.update(maxFPGAs="two"), r"maxFPGAs: 'two' is not a whole number"),
    (lambda d: d.update(maxFPGAs=None), r"maxFPGAs: None is not a whole number"),
    (lambda d: d.update(maxFPGAs=2.7), r"maxFPGAs: 2\.7 is not a whole number"),
    (lambda d: d.update(maxFPGAs=10**9), r"maxFPGAs: 1000000000 is out of range"),
    (lambda d: d.update(maxCPUs=-1), r"maxCPUs: -1 is out of range"),
    (lambda d: d.update(maxSizePerFPGA="big"), r"maxSizePerFPGA: 'big' is not a number"),
    (lambda d: d.update(maxSizePerFPGA=-10), r"maxSizePerFPGA: -10 must be a finite number >= 0"),
    (lambda d: d.update(maxSizePerFPGA=0), r"maxSizePerFPGA: 0 must be > 0"),
    (lambda d: d["nodes"][0].update(supportedOnFpga="yes"), r"node 1: supportedOnFpga must be 0 or 1"),
    (lambda d: d["nodes"][0].update(isBackwardNode="no"), r"node 1: isBackwardNode must be 0 or 1"),
    (lambda d: d["nodes"][0].update(id=[1]), r"nodes\[0\]\.id must be an integer or a string id"),
    (lambda d: d["edges"][0].update(sourceId=None), r"edges\[0\]\.sourceId must be an integer or a string id"),
    (lambda d: d["nodes"][0].update(cpuLatency=1e308), r"node 1: cpuLatency: 1e\+308 is beyond 1e\+18"),
    (lambda d: d["nodes"][0].update(size=10**400), r"node 1: size: an integer of 401 digits"),
])
def test_dnn_partitioning_wrong_types_and_values_name_the_file_and_field(tmp_path, change, message):
    data = dnn_input()
    change(data)
    path = _write(tmp_path / "m.json", data)
    with pytest.raises(SpecError, match=rf"^'{re.escape(str(path))}': .*{message}"):
        load_workload(path)


def test_dnn_partitioning_maxfpgas_of_a_billion_is_refused_before_allocating(tmp_path):
    data = dnn_input()
    data["maxFPGAs"] = 10**9
    with pytest.raises(SpecError, match="maxFPGAs"):
        dp_cluster_from_dict(data)
    assert dp_cluster_from_dict({**data, "maxFPGAs": 2.0}).size == 3


@pytest.mark.parametrize("split, message", [
    ({"fpgas": [1, 2]}, r"split: fpgas\[0\] = 1 must be a mapping"),
    ({"fpgas": {"a": 1}}, r"split: 'fpgas' must be a list"),
    ({"fpgas": [{"nodes": 5}]}, r"split: fpgas\[0\]\.nodes must be a list of node ids, got 5"),
    ({"cpus": [{"nodes": [[3]]}]}, r"split: cpus\[0\]\.nodes must be an integer or a string id"),
    ({"format": "placement_dsl.placement", "assignment": ["1"]}, r"'assignment' must map op names"),
    ({"format": "placement_dsl.placement", "assignment": {"1": 0}}, r"op '1' on 0, which is not a device name"),
])
def test_malformed_split_files_name_the_file_and_field(tmp_path, split, message):
    w = load_workload(_write(tmp_path / "model.json", dnn_input()))
    path = _write(tmp_path / "split.json", split)
    with pytest.raises(SpecError, match=rf"^'{re.escape(str(path))}': .*{message}"):
        load_placement(path, w)


@pytest.mark.parametrize("graph, message", [
    ({"ops": "abc"}, r"ops must be a list, got str"),
    ({"ops": [{"name": "a"}, {"name": "b"}], "edges": 5}, r"edges must be a list, got int"),
    ({"ops": [{"name": "a"}, {"name": "b"}], "edges": ["ab"]}, r"edge #0: expected a \(src, dst\) pair, got 'ab'"),
    ({"ops": [{"name": "a", "work": 10**400}]}, r"op 'a': work: .*integer of 401 digits"),
])
def test_native_malformed_graphs_name_the_file_and_item(tmp_path, graph, message):
    path = _write(tmp_path / "w.json", {"format": "placement_dsl.workload", "version": 1, "graph": graph})
    with pytest.raises(SpecError, match=rf"^'{re.escape(str(path))}': .*{message}"):
        load_workload(path)


def test_native_devices_that_are_names_not_mappings(tmp_path):
    data = {"graph": {"ops": [{"name": "a"}]}, "cluster": {"devices": ["acc0"]}}
    with pytest.raises(SpecError, match=r"w\.json': device #0: expected a mapping of its fields, got str"):
        load_workload(_write(tmp_path / "w.json", data))


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "[" * 100 + "]" * 100])
def test_deeply_nested_json_is_refused(tmp_path, text):
    path = tmp_path / "deep.json"
    path.write_text('{"graph": ' + text + "}")
    with pytest.raises(SpecError, match=r"deep\.json'.*(cannot hold|nested more than 64 levels)"):
        load_workload(path)


def test_json_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "bom.json"
    path.write_text(json.dumps(workload_to_dict(rich_workload())), encoding="utf-8-sig")
    assert detect_format(path) == "native"
    assert load_workload(path).graph == rich_workload().graph
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"fpgas": [{"nodes": ["x", "y", "z"]}]}), encoding="utf-8-sig")
    w = Workload(Graph([Op(name="x"), Op(name="y"), Op(name="z")]), Cluster.accelerators(1), "dnn-partitioning")
    assert load_placement(split, w).used_devices() == ["acc0"]

@pytest.mark.shared
def test_dnn_partitioning_shared_round_trip(dnn_partitioning, tmp_path):
    w = load_workload(dnn_partitioning / "throughput-inputs" / "LayerGraphs" / "gnmt_training.json")
    p = load_placement(dnn_partitioning / "human-experts" / "gnmt_training_expert.json", w)
    save_placement(p, tmp_path / "split.json", w)
    assert load_placement(tmp_path / "split.json", w) == p
    save_workload(w, tmp_path / "w.json")
    assert load_workload(tmp_path / "w.json").graph == w.graph


# ---------------------------------------------------------------------------- PipeDream
PROFILE = """node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=8.0, parameter_size=0.000
node2 -- Linear(4, 4) -- forward_compute_time=2.000, backward_compute_time=3.000, activation_size=[4.0; 2.0], parameter_size=16.000
node3 -- ReLU -- forward_compute_time=0.500, backward_compute_time=0.250, activation_size=6.0, parameter_size=0.000

\tnode1 -- node2
\tnode2 -- node3
"""


def test_pipedream_small_profile(tmp_path):
    path = tmp_path / "toy.txt"
    path.write_text(PROFILE)
    w = load_workload(path, stages=2, bandwidth=2.0, memory=100.0)
    g = w.graph
    assert w.format == "pipedream" and g.names == ("node1", "node2", "node3") and g.edges == (
        ("node1", "node2"), ("node2", "node3"))
    assert g.work("*").tolist() == [0.0, 2.0, 0.5] and g.out_bytes.tolist() == [8.0, 6.0, 6.0]
    assert g.param_bytes.tolist() == [0.0, 16.0, 0.0] and g.ops[1].attrs["desc"] == "Linear(4, 4)"
    assert w.cluster == Cluster.stages(2, memory=100.0, bandwidth=2.0)
    p = Placement(g, w.cluster, [0, 1, 1])
    assert evaluate(p).objective == 8.0 / 2.0 + 2.5



def test_pipedream_profile_with_a_byte_order_mark(tmp_path):
    path = tmp_path / "graph.txt"
    path.write_text(PROFILE, encoding="utf-8-sig")
    assert detect_format(path) == "pipedream"
    assert load_workload(path).graph.names == ("node1", "node2", "node3")

def test_pipedream_defaults_and_training(tmp_path):
    path = tmp_path / "toy.txt"
    path.write_text(PROFILE)
    w = pipedream.load(path, training=True)
    assert w.cluster.size == 4 and w.cluster.bandwidth[0] == pipedream.DEFAULT_BANDWIDTH
    assert w.cluster.memory[0] == pipedream.DEFAULT_MEMORY
    g = w.graph
    assert g.n == 6 and g.is_training and g.backward.sum() == 3
    bw = "node2" + pipedream.BACKWARD_SUFFIX
    assert g.work("*")[g.index[bw]] == 3.0 and g.param_bytes[g.index[bw]] == 0.0
    assert ("node3", "node3~bw") in g.edges and ("node3~bw", "node2~bw") in g.edges
    assert g.group_id[g.index["node2"]] == g.group_id[g.index[bw]]
    p = Placement(g, w.cluster, [0, 1, 1, 0, 1, 1])
    assert evaluate(p, "pipedream").valid


@pytest.mark.parametrize("text, message", [
    ("node1 -- A -- forward_compute_time=x, backward_compute_time=0, activation_size=1, parameter_size=0\n",
     r"line 1: forward_compute_time='x'"),
    (PROFILE + "garbage here\n", "line 7: expected"),
    ("node1 -- A -- forward_compute_time=1, backward_compute_time=0, activation_size=1\n", "line 1: missing"),
    ("node1 -- A -- forward_compute_time=-1, backward_compute_time=0, activation_size=1, parameter_size=0\n",
     "line 1: forward_compute_time='-1'"),
    ("\n\n", "no node lines"),
    (PROFILE + "\tnode3 -- node9\n", "unknown op 'node9'"),
])
def test_pipedream_bad_lines(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    with pytest.raises(SpecError, match=message):
        pipedream.load(path)


@pytest.mark.shared
@pytest.mark.parametrize("model, n", [("alexnet", 23), ("gnmt", 48), ("resnet50", 177), ("vgg16", 41)])
def test_pipedream_shared_profiles(shared_data, model, n):
    path = shared_data / "pipedream-profiles" / f"{model}.txt"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    w = load_workload(path)
    assert w.graph.n == n and w.graph.work("*").sum() > 0 and w.graph.param_bytes.sum() > 0
    t = load_workload(path, training=True)
    assert t.graph.n == 2 * n and t.graph.m == 2 * w.graph.m + sum(
        1 for i in range(n) if w.graph.successors(i).size == 0)


# ---------------------------------------------------------------------------- MOIRAI
@pytest.fixture
def moirai_dir(shared_data):
    pytest.importorskip("xlrd")
    path = shared_data / "moirai"
    if not path.is_dir():
        pytest.skip("../shared/data/moirai is absent")
    return path



@pytest.mark.shared
def test_moirai_sheet_cells_are_named_by_the_sheet_they_are_read_from(moirai_dir):
    """A bad cell's error names the file, the sheet (a workbook may hold several), the row and the column."""
    import xlrd

    from placement_dsl.io.moirai import read_sheet

    sheet, headers, _ = read_sheet(moirai_dir / "example-1.xls")
    assert sheet in xlrd.open_workbook(str(moirai_dir / "example-1.xls")).sheet_names() and "task" in headers


@pytest.mark.shared
@pytest.mark.parametrize("damage", ["truncate-half", "truncate-header", "flip-directory", "flip-stream"])
def test_moirai_damaged_sheets_name_the_file(moirai_dir, tmp_path, damage):
    data = bytearray((moirai_dir / "example-1.xls").read_bytes())  # a copy in tmp_path, never in the repository
    if damage == "truncate-half":
        data = data[: len(data) // 2]
    elif damage == "truncate-header":
        data = data[:300]
    elif damage == "flip-directory":  # the sector allocation table of the compound document
        data[76:80] = b"\xff\xfe\xff\xff"
    else:  # the workbook stream's first record
        data[512:520] = b"\xff" * 8
    path = tmp_path / "damaged.xls"
    path.write_bytes(data)
    with pytest.raises(SpecError, match=rf"'{re.escape(str(path))}'"):
        load_workload(path)

@pytest.mark.shared
def test_moirai_example(moirai_dir):
    from placement_dsl.io.moirai import transfer_time

    w = load_workload(moirai_dir / "example-1.xls")
    g, c = w.graph, w.cluster
    assert w.format == "moirai" and c.names == ("d0", "d1", "d2") and c.memory.tolist() == [14.0, 14.0, 16.0]
    assert g.ops[g.index["1"]].work == {"d0": 8.0, "d1": 9.0, "d2": 7.0} and g.param_bytes[g.index["1"]] == 5.0
    assert c.times(g)[g.index["1"]].tolist() == [8.0, 9.0, 7.0]
    assert ("14", "16") in g.edges and ("16", "19") in g.edges and ("17", "23") in g.edges
    assert g.group_id[g.index["16"]] == g.group_id[g.index["14"]]
    T = transfer_time(g, c)  # task 14's flows 16 and 17 have different, non-proportional times
    assert T[g.index["16"]].tolist() == [[0, 1, 2], [1, 0, 4], [2, 4, 0]]
    assert T[g.index["17"]].tolist() == [[0, 3, 2], [3, 0, 3], [2, 3, 0]]
    assert w.meta["flows"] == 13 and w.meta["transfer_fit_error"] > 0.1


@pytest.mark.shared
def test_moirai_googlenet_fit(moirai_dir):
    from placement_dsl.io.moirai import transfer_time

    w = load_workload(moirai_dir / "GoogLeNet.xls")
    g, c = w.graph, w.cluster
    assert c.size == 4 and w.meta["transfer_fit_error"] < 1e-3
    flows = [i for i, op in enumerate(g.ops) if op.attrs.get("moirai") == "communication"]
    exact = transfer_time(g, c)[flows]
    fitted = g.out_bytes[flows, None, None] * np.where(np.eye(4, dtype=bool), 0.0, 1.0 / c.route_bandwidth)
    assert np.abs(exact - fitted).max() <= w.meta["transfer_fit_error"] * exact.max() * (1 + 1e-9)


def test_moirai_rejects_options_and_missing_xlrd(tmp_path, monkeypatch):
    from placement_dsl.io import moirai

    with pytest.raises(SpecError, match="no options"):
        moirai.load(tmp_path / "x.xls", stages=3)
    import builtins

    real = builtins.__import__

    def fake(name, *args, **kwargs):
        if name == "xlrd":
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(SpecError, match=r"pip install placement_dsl\[moirai\]"):
        moirai.load(tmp_path / "x.xls")


def test_moirai_build_errors():
    from placement_dsl.io.moirai import build

    headers = ["task", "c_task", "dir_succ", "dir_succ_add", "p0", "p1", "pc00", "pc01", "pc10", "pc11", "mi", "m0",
               "m1"]
    rows = [[0.0, "", "1", "1", 0.0, 0.0, "", "", "", "", 0.0, 4.0, 5.0],
            [1.0, "2", "3", "2,3", 1.0, 2.0, 0.0, 1.5, 2.5, 0.0, 1.0, "", ""],
            [3.0, "", "", "", 1.0, 1.0, "", "", "", "", 0.0, "", ""]]
    g, c, err = build(headers, rows, "tiny")
    assert g.edges == (("0", "1"), ("1", "2"), ("2", "3")) and err == pytest.approx(0.0)
    assert c.route_bandwidth[0, 1] == pytest.approx(2.5 / 1.5) and g.out_bytes[g.index["2"]] == 2.5
    with pytest.raises(SpecError, match="missing"):
        build(headers[:-1], rows, "tiny")
    bad = [list(r) for r in rows]
    bad[1][7] = "1.5,2"
    with pytest.raises(SpecError, match="row 3, pc01: 2 times"):
        build(headers, bad, "tiny")
    bad = [list(r) for r in rows]
    bad[0][11] = 0.0
    with pytest.raises(SpecError, match="device d0 has memory m0=0.0"):
        build(headers, bad, "tiny")


# ---------------------------------------------------------------------------- strict JSON, keys, training
def test_strict_encoder_writes_standard_json():
    from enum import Enum

    from placement_dsl.io.common import dumps_strict

    class Colour(Enum):
        RED = "red"

    data = {"order": np.arange(3), "scalar": np.float64(2.5), "count": np.int64(4), "colour": Colour.RED,
            "inf": math.inf, "nan": np.float64("nan"), "nested": [{"x": np.array([1.0, np.inf])}],
            np.int64(7): frozenset({2, 1})}

    def refuse(name):
        raise ValueError(name)

    back = json.loads(dumps_strict(data), parse_constant=refuse)
    assert back == {"order": [0, 1, 2], "scalar": 2.5, "count": 4, "colour": "red", "inf": None, "nan": None,
                    "nested": [{"x": [1.0, None]}], "7": [1, 2]}
    with pytest.raises(TypeError, match="object"):
        dumps_strict({"oops": object()})


def test_json_without_expected_keys_names_each_format(tmp_path):
    path = _write(tmp_path / "w.json", {"a": 1})
    with pytest.raises(SpecError) as err:
        load_workload(path)
    text = str(err.value)
    assert "['a']" in text and "'graph'" in text and "'nodes'" in text and "--format" in text and "w.json" in text
    with pytest.raises(SpecError, match="'nodes' list.*--format native"):
        load_workload(path, format="dnn-partitioning")
    with pytest.raises(SpecError, match="malformed"):
        load_workload(_write(tmp_path / "d.json", {"nodes": [1, 2], "edges": []}), format="dnn-partitioning")


def test_empty_and_binary_files(tmp_path):
    (tmp_path / "empty.json").write_text("  \n")
    with pytest.raises(SpecError, match="is empty"):
        load_workload(tmp_path / "empty.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00{")
    with pytest.raises(SpecError, match="not a text file"):
        load_workload(tmp_path / "bin.json", format="native")


def test_bare_graph_without_header_loads(tmp_path):
    path = _write(tmp_path / "g.json", {"ops": [{"name": "a", "work": 1}, {"name": "b", "work": 2}],
                                        "edges": [["a", "b"]]})
    assert load_workload(path).graph.n == 2


def test_training_option_derives_the_backward_pass(tmp_path):
    path = _write(tmp_path / "g.json", {"ops": [{"name": "a", "work": 1, "out_bytes": 3}, {"name": "b", "work": 2}],
                                        "edges": [["a", "b"]]})
    w = load_workload(path, training=True)
    assert w.graph.is_training and w.graph.n == 4 and w.meta["training"] is True
    assert load_workload(path).graph.is_training is False
    (tmp_path / "g.txt").write_text(PROFILE)
    assert load_workload(tmp_path / "g.txt", training=True).graph.is_training
    with pytest.raises(SpecError, match="no reader options"):
        load_workload(path, stages=3)
