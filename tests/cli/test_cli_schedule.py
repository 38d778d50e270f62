"""``placement-dsl solve SHEET.xls --objective latency ... --out FILE``: the MOIRAI schedule file, read back and
re-checked by the referee."""
from __future__ import annotations

import json

import numpy as np
import pytest

from placement_dsl.cli import main
from placement_dsl.errors import SpecError
from placement_dsl.io import moirai
from placement_dsl.schedule import check_schedule

pytest.importorskip("xlrd")


def solve_sheet(capsys, path, tmp_path, method, *extra):
    out = tmp_path / f"{method}.json"
    code = main(["solve", str(path), "--objective", "latency", "--method", method, "--out", str(out), "--json",
                 *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out), json.loads(out.read_text())


def reread(path, data, congestion="port"):
    """The file's placement and the referee's verdict on its schedule."""
    w = moirai.load(path)
    placement = moirai.schedule_from_dict(w.graph, w.cluster, data)
    return w, placement, check_schedule(placement, placement.schedule, congestion)


def sheet_ids(w):
    tasks = {op.name for op in w.graph.ops if op.attrs["moirai"] == "operator"}
    flows = {op.name: (w.graph.names[w.graph.predecessors(q)[0]], w.graph.names[w.graph.successors(q)[0]])
             for q, op in enumerate(w.graph.ops) if op.attrs["moirai"] == "communication"}
    return tasks, flows


@pytest.mark.parametrize(("sheet", "method", "extra"), [
    ("example-1", "list", ()), ("GoogLeNet", "list", ("--congestion", "channel")),
    ("example-1", "ip", ("--time-limit", "30")), ("example-1", "schedule-lns", ("--time-limit", "10"))])
def test_out_writes_the_sheets_ids_and_the_referee_accepts_it(capsys, tmp_path, shared_data, sheet, method, extra):
    if method == "schedule-lns":
        pytest.importorskip("ortools")
    path = shared_data / "moirai" / f"{sheet}.xls"
    payload, data = solve_sheet(capsys, path, tmp_path, method, *extra)
    congestion = extra[1] if extra[:1] == ("--congestion",) else "port"
    w, placement, (makespan, bad) = reread(path, data, congestion)
    assert not bad and makespan == pytest.approx(payload["objective"])
    for key in ("objective", "bound", "gap", "status", "seconds"):
        assert key in payload
    tasks, flows = sheet_ids(w)
    assert set(data["assignment"]) == set(data["start"]) == tasks
    assert all(isinstance(d, int) and 0 <= d < w.cluster.size for d in data["assignment"].values())
    crossing = {q for q, (i, j) in flows.items() if data["assignment"][i] != data["assignment"][j]}
    assert set(data["transfer_start"]) == crossing and crossing
    assert np.array_equal(placement.assign, payload_assign(w, payload))


def payload_assign(w, payload):
    return np.array([w.cluster.index[payload["placement"][name]] for name in w.graph.names])


def test_example1_ip_is_the_optimum_30(capsys, tmp_path, shared_data):
    pytest.importorskip("ortools")
    path = shared_data / "moirai" / "example-1.xls"
    payload, data = solve_sheet(capsys, path, tmp_path, "ip", "--solver", "cpsat", "--time-limit", "60")
    assert payload["status"] == "optimal" and payload["objective"] == pytest.approx(30.0)
    assert reread(path, data)[2] == (pytest.approx(30.0), [])


def test_a_bad_schedule_file_names_the_flow_or_the_pair(capsys, tmp_path, shared_data):
    path = shared_data / "moirai" / "example-1.xls"
    _, data = solve_sheet(capsys, path, tmp_path, "list")
    w = moirai.load(path)
    flow = min(data["transfer_start"])
    missing = {**data, "transfer_start": {k: v for k, v in data["transfer_start"].items() if k != flow}}
    with pytest.raises(SpecError, match=f"flow {flow}"):
        moirai.schedule_from_dict(w.graph, w.cluster, missing)
    with pytest.raises(SpecError, match="devices 0..2"):
        moirai.schedule_from_dict(w.graph, w.cluster, {**data, "assignment": {**data["assignment"], "0": 3}})
    # two tasks on one device at the same time: the referee names them
    tasks = [t for t, d in data["assignment"].items() if d == data["assignment"]["26"] and t != "26"]
    late = {**data, "start": {**data["start"], tasks[-1]: data["start"][tasks[0]]}}
    _, _, (_, bad) = reread(path, late)
    assert bad and any(repr(tasks[-1]) in msg or tasks[-1] in msg for msg in bad)


def test_congestion_on_a_throughput_objective_is_a_note(capsys):
    code = main(["solve", "zoo:transformer-small", "--method", "greedy", "--congestion", "channel", "--json"])
    assert code == 0 and "--congestion applies to single-sample objectives" in capsys.readouterr().err


def test_ip_on_a_sheet_starts_from_the_best_heuristic_not_list_scheduling(capsys, tmp_path, shared_data):
    """With no ``--warm-start``, a sheet's makespan solve starts from the best of the makespan heuristics (and
    improves it where its model is too large for the budget); list scheduling alone was HEFT's value, returned
    unchanged on sheets whose model could not be built."""
    path = shared_data / "moirai" / "example-1.xls"
    listed, _ = solve_sheet(capsys, path, tmp_path, "list")
    payload, data = solve_sheet(capsys, path, tmp_path, "ip", "--time-limit", "10")
    assert payload["found_by"].startswith("warm start (auto") or payload["found_by"] == "solver"
    assert payload["objective"] <= listed["objective"] + 1e-9
    assert reread(path, data)[2] == (pytest.approx(payload["objective"]), [])


def test_bounds_and_evaluate_price_the_congestion_solve_was_given(capsys, tmp_path):
    """``--congestion`` is part of the problem: ``bounds`` and ``evaluate`` refused it, so a makespan solved
    without port contention could be neither certified nor re-scored as it was solved."""
    from placement_dsl.graph import Graph, Op
    from placement_dsl.io import save_workload
    from placement_dsl.io.workload import Workload, save_placement
    from placement_dsl.placement import Placement
    from placement_dsl.zoo import moirai_cluster

    cluster = moirai_cluster("intra-server")
    work = {device.kind: 1.0 for device in cluster.devices}
    ops = [Op(name="a", work=work, out_bytes=4e9), Op(name="b", work=work), Op(name="c", work=work)]
    graph = Graph(ops, [("a", "b"), ("a", "c")])  # a's tensor goes to two devices: both leave by a's port
    workload, split = tmp_path / "fork.json", tmp_path / "split.json"
    save_workload(Workload(graph, cluster), workload)
    save_placement(Placement(graph, cluster, [0, 1, 2]), split)
    scores = {}
    for mode in ("port", "none"):
        argv = ["--objective", "makespan", "--congestion", mode, "--json"]
        assert main(["evaluate", str(workload), "--split", str(split), *argv]) == 0
        scores[mode] = json.loads(capsys.readouterr().out)["objective"]
        assert main(["bounds", str(workload), "--time-limit", "10", *argv]) == 0
        assert json.loads(capsys.readouterr().out)["bound"] <= scores[mode] * (1 + 1e-9)
    assert scores["port"] > 1.4 * scores["none"]  # the two transfers wait for each other only at a port


@pytest.mark.parametrize("option", [("--stages", "3", "--memory", "100"), ("--cpus", "1"),
                                    ("--servers", "1", "--per-server", "3", "--intra", "10", "--inter", "1")])
def test_resizing_a_sheet_s_cluster_is_refused_naming_the_option(capsys, shared_data, option):
    """A sheet times each flow between each pair of its own devices: ``--stages 3`` (three copies of d0) read those
    matrices as if the copies were d0, d1 and d2 and answered (29.0, a schedule of devices the sheet does not have),
    while a cluster of another size failed on the first flow's matrix, naming the op rather than the option."""
    path = shared_data / "moirai" / "example-1.xls"
    code = main(["solve", str(path), "--method", "list", "--json", *option])
    err = capsys.readouterr().err
    assert code == 2 and option[0] in err.splitlines()[-1] and "d0, d1, d2" in err
    assert main(["solve", str(path), "--method", "list", "--json", "--memory", "100", "--cpus", "0"]) == 0


def test_a_sweep_s_stages_on_a_sheet_are_refused_naming_them(shared_data):
    """The sweep reads its graphs at each k through the same reader: a sheet at k=3 was scored on three copies of d0
    under the sheet's matrices (list scheduling 44.0), and at k=2 failed on the first flow's matrix."""
    from placement_dsl.presets import read_workload
    from placement_dsl.sweep import tasks

    path = shared_data / "moirai" / "example-1.xls"
    for read in (lambda: read_workload(str(path), stages=3), lambda: tasks._workload(str(path), 3)):
        with pytest.raises(SpecError, match="--stages: graph 'example-1' times each data flow"):
            read()
    assert read_workload(str(path)).cluster.names == ("d0", "d1", "d2")
