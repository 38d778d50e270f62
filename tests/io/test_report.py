"""Text and JSON reports of a placement (placement_dsl.report): stage ranges that say what a stage holds,
op names rather than ids, the objective asked for, and the forward and backward loads of training objectives."""
from __future__ import annotations

from itertools import pairwise

from placement_dsl.cluster import Cluster
from placement_dsl.evaluate import evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.io.dnn_partitioning import graph_from_dict
from placement_dsl.placement import Placement
from placement_dsl.report import device_table, display_names, stage_lines, stage_ranges


def residual() -> Graph:
    """node1 -> node3 -> node2 -> node4 (declared in that order): a branch numbered after the ops it precedes."""
    names = ["node1", "node3", "node2", "node4"]
    return Graph([Op(name=n, work=1.0, out_bytes=1.0) for n in names], list(pairwise(names)), name="res")


def training() -> Graph:
    return Graph([Op(name="f1", work=2, out_bytes=1, group="1"), Op(name="f2", work=3, group="2"),
                  Op(name="b2", work=4, out_bytes=2, backward=True, group="2"),
                  Op(name="b1", work=6, backward=True, group="1")],
                 [("f1", "f2"), ("f2", "b2"), ("b2", "b1")])


# ---------------------------------------------------------------------------- stage ranges
def test_a_stage_numbered_out_of_order_gives_its_name_span():
    p = Placement(residual(), Cluster.stages(2), [0, 1, 1, 1])
    stage = stage_ranges(p)[1]
    assert (stage["ops"], stage["first"], stage["last"], stage["one_interval"]) == (3, "node3", "node4", True)
    # 'node3..node4' alone reads as two ops; the stage holds node2 too
    assert stage["by_name"] == {"lowest": "node2", "highest": "node4", "between": 3}
    line = stage_lines([stage])[1]
    assert "3 ops" in line and "node3..node4" in line and "by name node2..node4: holds 3 of the 3" in line


def test_a_stage_in_two_runs_is_noted_as_not_one_interval():
    p = Placement(residual(), Cluster.stages(2), [0, 1, 0, 1])  # node1, node2 | node3, node4 on a chain
    first, second = stage_ranges(p)
    assert not first["one_interval"] and first["ranges"] == [["node1", "node1"], ["node2", "node2"]]
    line = stage_lines([first])[1]
    assert "2 ops" in line and "node1..node2, not one interval: 2 runs node1, node2" in line
    assert "by_name" not in second  # node3..node4 is also its name span


def test_dnn_partitioning_stages_show_node_names_not_ids():
    data = {"nodes": [{"id": i, "name": name, "cpuLatency": 1, "fpgaLatency": 1, "size": 0}
                      for i, name in enumerate(["bert.embeddings.word_embeddings.weight", "Gather1", "MatMul7"])]
            + [{"id": 3, "cpuLatency": 1, "fpgaLatency": 1, "size": 0}],
            "edges": [{"sourceId": i, "destId": i + 1, "cost": 1} for i in range(3)]}
    g = graph_from_dict(data)
    assert g.names[0] == "0"  # the id stays the op's key (split files name nodes by id)
    assert display_names(g) == ["bert.embeddings.word_embeddings.weight", "Gather1", "MatMul7", "3"]
    # a node whose out-edges cost differently is subdivided; its artificial nodes are named from both ends
    data["edges"].append({"sourceId": 0, "destId": 2, "cost": 5})
    split = graph_from_dict(data)
    assert [n for n in display_names(split) if ">" in n] == ["bert.embeddings.word_embeddings.weight>Gather1",
                                                             "bert.embeddings.word_embeddings.weight>MatMul7"]
    p = Placement(g, Cluster.accelerators(2), [0, 0, 1, 1])
    assert [s["ranges"] for s in stage_ranges(p)] == [[["bert.embeddings.word_embeddings.weight", "Gather1"]],
                                                      [["MatMul7", "3"]]]


# ---------------------------------------------------------------------------- device table
def test_table_names_the_objective_asked_for():
    p = Placement(training(), Cluster.stages(2), [0, 1, 1, 0])
    for name in ("pipedream", "throughput", "gpipe"):
        assert f"objective ({name}): " in evaluate(p, name).table()


def test_a_problem_scores_and_names_its_objective_term():
    from placement_dsl.objectives import Bottleneck, PipeDream, Throughput
    from placement_dsl.problem import Problem

    p = Placement(training(), Cluster.stages(2), [0, 1, 1, 0])
    for term, name in ((PipeDream(), "pipedream"), (Throughput(), "throughput"), (Bottleneck(), "bottleneck")):
        assert f"objective ({name}): 11   " in Problem(p.graph, p.cluster, term).evaluate(p).table()


def test_training_tables_have_forward_and_backward_loads():
    p = Placement(training(), Cluster.stages(2), [0, 1, 1, 0])
    for name, objective in (("pipedream", 11.0), ("gpipe", 12.0)):
        rows = evaluate(p, name).table().splitlines()
        head = rows[0].split()
        assert "fw load ms" in rows[0] and "bw load ms" in rows[0]
        cells = [row.split() for row in rows[2:4]]
        # fw and bw are the last two columns: stage0 3 and 8, stage1 4 and 6 (tests/test_evaluate.py)
        assert [c[-2:] for c in cells] == [["3", "8"], ["4", "6"]], (head, cells)
        assert f"({name}): {objective:g}" in rows[4]


def test_inference_tables_keep_the_load_columns_alone():
    p = Placement(residual(), Cluster.stages(2), [0, 1, 1, 1])
    ev = evaluate(p, "throughput")
    assert "fw load ms" not in ev.table()
    assert "fw load ms" in device_table(ev.devices, passes=True)[0]
