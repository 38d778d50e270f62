"""Writing the dnn-partitioning format: a file that reads back to the same problem, or a one-line refusal
naming what the format cannot express (and no file)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement_dsl.cluster import Cluster, Device
from placement_dsl.evaluate import evaluate
from placement_dsl.graph import Graph, Op
from placement_dsl.io import load_workload, save_workload
from placement_dsl.placement import Placement
from placement_dsl.testing import run_cli
from placement_dsl.workload import Workload


def _graph(cpu: bool = True) -> Graph:
    ops = [Op(name="in", work=1.0, out_bytes=8.0, param_bytes=3.0),
           Op(name="a", work={"gpu": 2.0, "cpu": 5.0}, out_bytes=4.0, param_bytes=5.0, group="g"),
           Op(name="b", work={"gpu": 3.0, "cpu": 6.0} if cpu else {"gpu": 3.0}, out_bytes=4.0, param_bytes=2.0,
              group="g"),
           Op(name="out", work=0.5, param_bytes=1.0)]
    return Graph(ops, [("in", "a"), ("in", "b"), ("a", "out"), ("b", "out")], name="g")


def _cluster(memories: tuple[float, float] = (20.0, 20.0), speeds: tuple[float, float] = (2.0, 2.0)) -> Cluster:
    return Cluster([Device(name="g0", kind="gpu", memory=memories[0], speed=speeds[0], bandwidth=4.0),
                    Device(name="g1", kind="gpu", memory=memories[1], speed=speeds[1], bandwidth=4.0),
                    Device(name="c0", kind="cpu", speed=0.5)])


def _native(path: Path, graph: Graph, cluster: Cluster) -> Path:
    save_workload(Workload(graph, cluster), path, "native")
    return path


def test_a_written_file_reads_back_to_the_same_problem(tmp_path):
    """Kinds renamed, shared speeds folded into the times and the shared bandwidth into the edge costs: every
    placement has the same objective and validity on both."""
    graph, cluster = _graph(), _cluster()
    save_workload(Workload(graph, cluster), tmp_path / "dnn.json", "dnn-partitioning")
    back = load_workload(tmp_path / "dnn.json")
    assert back.format == "dnn-partitioning" and back.graph.n == graph.n
    for devices in ([0, 1, 1, 2], [2, 0, 0, 1], [0, 0, 0, 0], [2, 2, 2, 2], [1, 0, 1, 0]):
        mine = evaluate(Placement(graph, cluster, devices))
        order = [back.graph.index[op.name] for op in graph.ops]
        theirs_devices = [0] * graph.n
        for i, d in zip(order, devices):
            theirs_devices[i] = d
        theirs = evaluate(Placement(back.graph, back.cluster, theirs_devices))
        assert theirs.valid == mine.valid and theirs.objective == pytest.approx(mine.objective, rel=1e-12)


@pytest.mark.parametrize("case, needle", [
    ("no-cpu", "op 'b'"), ("memory", "unequal memory"), ("speed", "unequal speed")])
def test_convert_refuses_what_the_format_cannot_express(capsys, tmp_path, case, needle):
    graph = _graph(cpu=case != "no-cpu")
    cluster = _cluster(memories=(20.0, 30.0) if case == "memory" else (20.0, 20.0),
                       speeds=(1.0, 2.0) if case == "speed" else (2.0, 2.0))
    native = _native(tmp_path / "w.json", graph, cluster)
    code, out, err = run_cli(capsys, "convert", str(native), str(tmp_path / "x.json"), "--to", "dnn-partitioning")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and needle in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.json"]


def test_convert_of_a_readable_workload_round_trips(capsys, tmp_path):
    native = _native(tmp_path / "w.json", _graph(), _cluster())
    dnn = tmp_path / "x.json"
    assert run_cli(capsys, "convert", str(native), str(dnn), "--to", "dnn-partitioning")[0] == 0
    assert json.loads(dnn.read_text())["maxFPGAs"] == 2 and load_workload(dnn).graph.n == 4
