"""Pictures of a partition: the device-coloured graph (DOT, SVG, PNG), the Gantt chart, the bounds over time,
and split points by layer name. Each picture is rendered and its content checked."""
from __future__ import annotations

import json
import math
import shutil
from itertools import pairwise, takewhile
from pathlib import Path

import pytest

from placement_dsl import Boundaries
from placement_dsl.certify import LevelStatus
from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import DagOrder
from placement_dsl.export import export
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.io import Workload, save_workload
from placement_dsl.io.costs import layers
from placement_dsl.levels.base import LEVELS
from placement_dsl.objectives import Bottleneck
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.viz import bounds, gantt, graph, layout, split_lines, split_points
from placement_dsl.viz.common import pyplot

pytest.importorskip("matplotlib")
from matplotlib.colors import to_rgb

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def layered(blocks: int = 4, ops_per_block: int = 3) -> Graph:
    """A chain of ``blocks`` modules ``blocks.i`` of ``ops_per_block`` ops each, plus an embedding and a head."""
    ops = [Op(name="embed", work=1.0, out_bytes=4.0, attrs={"module": "embed"})]
    for b in range(blocks):
        ops += [Op(name=f"b{b}.{i}", work=1.0 + i, out_bytes=4.0, param_bytes=8.0,
                   attrs={"module": f"blocks.{b}.{['attn', 'mlp', 'norm'][i % 3]}"}) for i in range(ops_per_block)]
    ops.append(Op(name="head", work=2.0, attrs={"module": "head"}))
    return Graph(ops, [(a.name, b.name) for a, b in pairwise(ops)], name="layered")


@pytest.fixture
def placed() -> Placement:
    g = layered()
    return run("dp", g, Cluster.stages(3, bandwidth=100.0)).placement


@pytest.fixture
def no_graphviz(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)


# ---------------------------------------------------------------------------- graph
def test_dot_names_every_device_and_op(placed: Placement, tmp_path: Path):
    text = graph.to_dot(graph.build_view(placed))
    used = {placed.cluster.names[d] for d in set(placed.assign.tolist())}
    assert all(f'"{d} (accelerator)"' in text for d in used)
    assert all(f'"{name}' in text for name in placed.graph.names)
    assert text.count(" -> ") == placed.graph.m
    assert graph.render(placed, tmp_path / "p.dot") == "dot text"
    assert (tmp_path / "p.dot").read_text() == text


def test_svg_and_png_by_matplotlib(placed: Placement, tmp_path: Path, no_graphviz):
    assert graph.render(placed, tmp_path / "p.svg") == "matplotlib"
    svg = (tmp_path / "p.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert all(placed.cluster.names[d] in svg for d in set(placed.assign.tolist()))
    assert "embed" in svg and "head" in svg
    graph.render(placed, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes()[:8] == PNG_MAGIC


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")
def test_svg_by_graphviz(placed: Placement, tmp_path: Path):
    assert graph.render(placed, tmp_path / "p.svg") == "graphviz"
    assert "stage0" in (tmp_path / "p.svg").read_text()


def test_large_graphs_collapse_to_layers(placed: Placement):
    view = graph.build_view(placed, max_nodes=8)
    assert view.grouped_by == "module depth 2" and len(view.nodes) <= 8
    assert sum(n.ops for n in view.nodes) == placed.graph.n
    assert {n.label for n in view.nodes} >= {"embed", "head"}
    runs = graph.build_view(Placement(Graph([Op(name=f"o{i}", work=1.0) for i in range(30)],
                                            [(f"o{i}", f"o{i + 1}") for i in range(29)]), Cluster.stages(2),
                                      [0] * 15 + [1] * 15), max_nodes=5)
    assert runs.grouped_by == "runs of ops" and len(runs.nodes) <= 6


def branching(blocks: int = 20) -> Graph:
    """``blocks`` modules of a fork into two branches of two ops and a join: 6 ops each, 121 with the input."""
    ops, edges, last = [Op(name="input", work=1.0, out_bytes=1.0)], [], "input"
    for b in range(blocks):
        names = [f"m{b}.fork", f"m{b}.left.0", f"m{b}.left.1", f"m{b}.right.0", f"m{b}.right.1", f"m{b}.join"]
        ops += [Op(name=n, work=1.0, out_bytes=1.0) for n in names]
        edges += [(last, names[0]), (names[0], names[1]), (names[1], names[2]), (names[0], names[3]),
                  (names[3], names[4]), (names[2], names[5]), (names[4], names[5])]
        last = names[5]
    return Graph(ops, edges, name="branching")


def _drawn(fig) -> tuple[list, list[str], list]:
    """The boxes, their labels and the arrows of a graph picture."""
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    ax = fig.axes[0]
    return ([p for p in ax.patches if isinstance(p, FancyBboxPatch)], [t.get_text() for t in ax.texts],
            [p for p in ax.patches if isinstance(p, FancyArrowPatch)])


def test_a_graph_of_a_hundred_boxes_draws_every_box_and_label(tmp_path: Path, no_graphviz):
    g = branching()
    p = Placement(g, Cluster.stages(4), [min(i * 4 // g.n, 3) for i in range(g.n)])
    view = graph.build_view(p)
    assert view.grouped_by == "op" and len(view.nodes) == 121
    fig = graph.figure(view)
    boxes, texts, arrows = _drawn(fig)
    assert len(boxes) == 121 and sorted(texts) == sorted(g.names)
    assert {b.get_facecolor()[:3] for b in boxes} == {to_rgb(graph.device_colour(d)) for d in range(4)}
    # layered: a fork's two branches side by side, 81 layers folded into bands of MAX_ROWS
    assert len(arrows) == g.m
    box = dict(zip(texts, boxes))
    left, right = box["m0.left.0"], box["m0.right.0"]
    assert left.get_y() == right.get_y() and left.get_x() != right.get_x()
    width, height = fig.get_size_inches()
    assert height <= graph.BOX_INCHES[1] * (graph.MAX_ROWS + 1) + 2 and width < 40
    plt = pyplot()
    plt.close(fig)
    graph.render(p, tmp_path / "p.svg")
    svg = (tmp_path / "p.svg").read_text()
    assert all(f">{name}<" in svg for name in ("m0.fork", "m19.join", "m7.left.1"))


def test_a_collapsed_picture_says_so_and_labels_every_box():
    n = 400
    g = Graph([Op(name=f"op{i}", work=1.0, out_bytes=1.0) for i in range(n)], [(f"op{i}", f"op{i + 1}")
                                                                                for i in range(n - 1)])
    view = graph.build_view(Placement(g, Cluster.stages(2), [0] * 200 + [1] * 200))
    assert view.grouped_by == "runs of ops" and len(view.nodes) <= graph.MAX_NODES
    fig = graph.figure(view)
    boxes, texts, arrows = _drawn(fig)
    assert len(boxes) == len(view.nodes) == len(texts) and all(texts) and len(arrows) == len(view.nodes) - 1
    assert texts[0] == "op0 .. op3\n4 ops"
    notes = [t.get_text() for t in fig.texts]
    assert notes == [(f"collapsed: 400 ops drawn as {len(view.nodes)} boxes, grouped by runs of ops on each device "
                      "(--max-nodes N for more boxes, --depth D for another module depth)")]
    pyplot().close(fig)
    assert not graph.collapse_note(graph.build_view(Placement(g, Cluster.stages(2), [0] * 200 + [1] * 200), n))


def test_layout_of_a_cycle_between_groups_and_of_a_very_deep_graph():
    lay = layout.layered(3, [(0, 1), (1, 0), (1, 2)], [0, 1, 2])  # groups 0 and 1 feed each other
    assert lay.layer.tolist() == [0, 1, 2]
    n = 3000  # a chain: 3000 layers in bands of about sqrt(3000 * 2 * aspect) rows, not 75 bands of 40
    deep = layout.layered(n, [(i, i + 1) for i in range(n - 1)], list(range(n)), 40, aspect=3.0)
    assert deep.rows == math.ceil(math.sqrt(n * 2 * 3.0)) and deep.bands == math.ceil(n / deep.rows)


def test_boxes_show_op_names_not_ids():
    ops = [Op(name=str(i), work=1.0, out_bytes=1.0, attrs={"name": f"bert.layer.{i}.weight"}) for i in range(3)]
    g = Graph(ops, [("0", "1"), ("1", "2")])
    view = graph.build_view(Placement(g, Cluster.stages(2), [0, 0, 1]))
    assert [n.label for n in view.nodes] == ["bert.layer.0.weight", "bert.layer.1.weight", "bert.layer.2.weight"]
    assert graph.box_text(view.nodes[0]) == "bert.layer.0.weight"
    assert graph.box_text(graph.Node("model.encoder.layers.11.attention.output.dense", 0, 3, 1.0, 0)) == \
        "…11.attention.output.dense\n3 ops"


def test_unknown_picture_suffix_is_refused(placed: Placement, tmp_path: Path):
    with pytest.raises(Exception, match=r"\.dot.*\.png.*\.svg"):
        graph.render(placed, tmp_path / "p.pdf")


# ---------------------------------------------------------------------------- gantt
def test_gantt_has_one_bar_per_task(placed: Placement, tmp_path: Path):
    result = gantt.simulated(placed, microbatches=5)
    rows = gantt.bars(result)
    devices = len(set(placed.assign.tolist()))
    assert len(rows) == 5 * devices
    assert {r["microbatch"] for r in rows} == set(range(5)) and all(r["end"] >= r["start"] for r in rows)
    gantt.draw(result, tmp_path / "g.svg", placed.cluster.names)
    svg = (tmp_path / "g.svg").read_text()
    assert all(placed.cluster.names[d] in svg for d in set(placed.assign.tolist())) and "makespan" in svg


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_training_gantt_has_forward_and_backward_bars(schedule: str, tmp_path: Path):
    from placement_dsl.zoo.training import with_backward

    g = Graph(*with_backward(layered(3).ops, layered(3).edges), name="train")
    p = run("dp", g, Cluster.stages(2, bandwidth=100.0)).placement
    result = gantt.simulated(p, schedule, 4)
    rows = gantt.bars(result)
    assert len(rows) == 4 * 2 * 2 and {r["pass"] for r in rows} == {"forward", "backward"}
    gantt.draw(result, tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:8] == PNG_MAGIC


# ---------------------------------------------------------------------------- bounds
def test_bounds_over_time_are_recorded_and_drawn(tmp_path: Path):
    g = layered(3)
    cert, points = bounds.certify_over_time(Problem(g, Cluster.stages(2, bandwidth=100.0), Bottleneck(),
                                                    [DagOrder()]), budget=20, gap=0.0)
    ran = [r.level for r in cert.levels if r.status not in (LevelStatus.SKIPPED, LevelStatus.NOT_APPLICABLE)]
    free = len(list(takewhile(lambda level: LEVELS[level].free, ran)))  # the free levels run before the heuristics
    assert free and [p.level for p in points] == [*ran[:free], "start", *ran[free:]]  # a point after each level run
    lows = [p.lower for p in points]
    assert lows == sorted(lows) and all(p.lower <= p.upper * (1 + 1e-9) for p in points)
    assert points[-1].upper == pytest.approx(cert.objective) and points[-1].lower == pytest.approx(cert.bound)
    bounds.draw(points, tmp_path / "b.svg")
    svg = (tmp_path / "b.svg").read_text()
    assert "lower bound" in svg and "upper bound" in svg and points[-1].level in svg
    assert bounds.from_certificate(cert)[-1].lower == pytest.approx(cert.bound)


# ---------------------------------------------------------------------------- split points
def test_split_points_by_layer():
    g, cluster = layered(), Cluster.stages(3, bandwidth=100.0)
    placed = Placement(g, cluster, run("dp", Boundaries.modules(2).apply(g, cluster), cluster).placement.assign)
    pts = split_points(placed, depth=2)
    stages = pts["stages"]
    assert len(stages) == 3 and [s["device"] for s in stages] == ["stage0", "stage1", "stage2"]
    assert sum(s["ops"] for s in stages) == placed.graph.n
    assert pts["layers"][0] == "embed" and pts["layers"][-1] == "head"
    assert pts["split_spec"] == export(placed, "torch-pipelining", depth=2).data["split_spec"]  # the exporter's
    assert len(pts["split_spec"]) == 2 and set(pts["split_spec"].values()) == {"beginning"}
    assert pts["parts"] == export(placed, "deepspeed").data["parts"]  # the exporter's too
    text = "\n".join(split_lines(pts))
    assert "split_spec" in text and "parts" in text


def test_split_points_name_ops_by_their_source_names():
    ops = [Op(name=str(i), work=1.0, attrs={"name": f"enc.{i}.weight"}) for i in range(3)]
    points = split_points(Placement(Graph(ops, [("0", "1"), ("1", "2")]), Cluster.stages(2), [0, 0, 1]))
    assert points["split_spec"] == {} and "has no module paths" in points["warnings"][0]  # no module to split at
    assert "split_spec: none, the exporter refuses this plan" in "\n".join(split_lines(points))
    assert [(s["first"], s["last"]) for s in points["stages"]] == [("enc.0.weight", "enc.1.weight"),
                                                                   ("enc.2.weight", "enc.2.weight")]


def test_split_inside_a_layer_is_warned():
    g = layered(2)
    cut = [0] * 3 + [1] * (g.n - 3)  # embed and two ops of blocks.0 | the rest: blocks.0 is cut
    pts = split_points(Placement(g, Cluster.stages(2), cut), depth=2)
    assert pts["split_spec"] == {} and pts["warnings"][0] == "layer 'blocks.0' is cut between stages 0 and 1"
    assert "torch-pipelining: stage 1 begins inside module 'blocks.0'" in pts["warnings"][1]  # the exporter's reason
    deeper = split_points(Placement(g, Cluster.stages(2), cut))  # without a depth torch splits at the deeper module
    assert deeper["split_spec"] == {"blocks.0.norm": "beginning"}


def test_layer_graph_split_spec_names_modules():
    coarse = layers(layered(4), depth=2)
    p = run("dp", coarse, Cluster.stages(2, bandwidth=100.0)).placement
    pts = split_points(p)
    assert all(k.startswith(("blocks.", "head")) for k in pts["split_spec"]) and not pts["warnings"]


# ---------------------------------------------------------------------------- command line
def test_cli_show_every_kind(placed: Placement, tmp_path: Path, capsys, no_graphviz):
    path = tmp_path / "w.json"
    save_workload(Workload(placed.graph, placed.cluster), path)
    split = tmp_path / "split.json"
    split.write_text(json.dumps(placed.to_dict()))
    assert main(["show", str(path), "--split", str(split), "--out", str(tmp_path / "g.svg"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["drawn_by"] == "matplotlib"
    assert main(["show", str(path), "--split", str(split), "--kind", "gantt", "--microbatches", "3",
                 "--out", str(tmp_path / "gantt.png"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"] == 3 * 3
    assert main(["show", str(path), "--kind", "bounds", "--time-limit", "10", "--out", str(tmp_path / "b.png")]) == 0
    assert (tmp_path / "b.png").read_bytes()[:8] == PNG_MAGIC
    capsys.readouterr()
    assert main(["show", str(path), "--split", str(split), "--kind", "splits", "--depth", "2",
                 "--out", str(tmp_path / "s.json")]) == 0
    assert "split_spec" in capsys.readouterr().out
    assert json.loads((tmp_path / "s.json").read_text())["layers"][0] == "embed"


def test_cli_show_notes_a_collapsed_graph(tmp_path: Path, capsys):
    g = Graph([Op(name=f"op{i}", work=1.0) for i in range(300)], [(f"op{i}", f"op{i + 1}") for i in range(299)])
    placed = Placement(g, Cluster.stages(2), [0] * 150 + [1] * 150)
    save_workload(Workload(g, placed.cluster), tmp_path / "w.json")
    (tmp_path / "split.json").write_text(json.dumps(placed.to_dict()))
    argv = ["show", str(tmp_path / "w.json"), "--split", str(tmp_path / "split.json"), "--out", str(tmp_path / "g.dot")]
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["note"].startswith("collapsed: 300 ops drawn as ")
    assert main(argv) == 0
    assert "\ncollapsed: 300 ops drawn as " in capsys.readouterr().out


def test_cli_show_without_out_is_one_line_error(tmp_path: Path, capsys):
    assert main(["show", "zoo:transformer-small", "--kind", "gantt"]) == 2
    err = capsys.readouterr().err
    assert "--out FILE" in err and err.count("\n") <= 2
