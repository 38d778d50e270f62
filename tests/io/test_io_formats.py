"""The importers' registry: each format registers its reader with its suffixes and sniffer; detection,
load_workload and the command line's --format read the registry, so a new format is one module."""
from __future__ import annotations

import json

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.io import Workload, detect_format, formats, load_workload


@pytest.fixture
def scratch(monkeypatch):
    """The registry as it is, restored after the test."""
    monkeypatch.setattr(formats, "IMPORTERS", dict(formats.load()))
    return formats


def test_the_package_formats_are_registered():
    table = formats.load()
    assert {"native", "dnn-partitioning", "pipedream", "moirai", "onnx"} <= set(formats.names())
    assert "torch" in table and "torch" not in formats.names()  # a factory name, not a file format
    assert table["moirai"].suffixes == (".xls", ".xlsx") and table["pipedream"].training
    assert [i.name for i in formats.models(spec=False)] == ["onnx"]
    assert [i.name for i in formats.models(spec=True)] == ["torch"]


def test_json_of_no_known_format_is_read_as_native_last(tmp_path):
    tagged = tmp_path / "t.json"
    tagged.write_text(json.dumps({"format": "placement_dsl.workload", "nodes": []}))
    other = tmp_path / "o.json"
    other.write_text(json.dumps({"ops": []}))
    assert detect_format(tagged) == "native" and detect_format(other) == "native"
    text = tmp_path / "x.txt"
    text.write_text("hello\n")
    with pytest.raises(SpecError, match=r"cannot tell the format of .*x\.txt.*'pipedream'"):
        detect_format(text)


def _lines(path, **options):
    """``a b`` lines: an edge from a to b, every op of unit work."""
    pairs = [line.split() for line in path.read_text().splitlines() if line.strip()]
    names = sorted({n for p in pairs for n in p})
    graph = Graph([Op(name=n, work=1.0, out_bytes=1.0) for n in names], [tuple(p) for p in pairs])
    return Workload(graph, Cluster.stages(options.get("stages", 2)), "edge-lines")


def test_a_registered_format_is_detected_read_and_offered_by_the_cli(scratch, tmp_path):
    from placement_dsl.cli import build_parser

    formats.importer("edge-lines", suffixes=(".edges",), sniff=lambda head: 0.5 * head.startswith("#edges"))(_lines)
    by_suffix = tmp_path / "g.edges"
    by_suffix.write_text("a b\nb c\n")
    by_content = tmp_path / "g.txt"
    by_content.write_text("#edges\n")
    assert detect_format(by_suffix) == "edge-lines" and detect_format(by_content) == "edge-lines"
    w = load_workload(by_suffix, stages=3, training=True)
    assert w.graph.n == 6 and w.graph.is_training and w.cluster.size == 3  # training derived by load_workload
    args = build_parser().parse_args(["solve", str(by_suffix), "--format", "edge-lines", "--method", "greedy"])
    assert args.format == "edge-lines"


def test_a_format_name_taken_by_another_reader_is_refused(scratch):
    with pytest.raises(SpecError, match="'onnx' is already registered by placement_dsl.io.onnx.load"):
        formats.importer("onnx", suffixes=(".onnx",))(_lines)
    with pytest.raises(SpecError, match="suffixes"):
        formats.importer("x", suffixes=".x")
    with pytest.raises(SpecError, match=r"unknown format 'nope'; choose from \[.*'native'"):
        load_workload("whatever.json", format="nope")


def test_the_old_tuple_still_reads_with_a_warning():
    from placement_dsl.io import workload

    with pytest.warns(DeprecationWarning, match="FORMATS is deprecated"):
        names = workload.FORMATS
    assert names == tuple(formats.names())
