"""An op only the host runs: the methods that leave hosts out say so, and an invalid answer's violation is said once."""
from __future__ import annotations

import pytest

from placement_dsl.cli import main
from placement_dsl.cluster import Cluster
from placement_dsl.errors import InfeasibleError
from placement_dsl.evaluate import CostModel
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.io import Workload, save_workload


def _host_first() -> tuple[Graph, Cluster]:
    ops = [Op(name="x", work={"cpu": 1.0}), Op(name="y", work={"accelerator": 1.0, "cpu": 10.0}, out_bytes=1e6)]
    return Graph(ops, [("x", "y")]), Cluster.accelerators(3, cpus=1, bandwidth=1.6e7)


def test_pipedream_names_the_devices_it_slices_onto_and_the_host_it_leaves_out():
    """It said 'op 'x' may run on none of the devices' while the CPU runs it."""
    g, c = _host_first()
    with pytest.raises(InfeasibleError, match=r"none of the devices this method slices onto \['acc0', 'acc1', "
                                              r"'acc2'\]; it runs on \['cpu0'\], which this method leaves out"):
        run("pipedream", g, c, model=CostModel())


def test_an_invalid_answer_names_its_violation_once(tmp_path, capsys):
    """One device puts every op on an accelerator, which cannot run x (y runs on accelerators only, so no device
    takes both): the report listed the violation and the command's error repeated it; the error now points at the
    report (with --json, which has no table, it names it)."""
    ops = [Op(name="x", work={"cpu": 1.0}), Op(name="y", work={"accelerator": 1.0}, out_bytes=1e6)]
    g, c = Graph(ops, [("x", "y")]), Cluster.accelerators(3, cpus=1, bandwidth=1.6e7)
    path = tmp_path / "w.json"
    save_workload(Workload(g, c), path)
    assert main(["solve", str(path), "--method", "one-device"]) == 3
    out, err = capsys.readouterr()
    assert (out + err).count("op 'x' cannot run on device 'acc0'") == 1 and "1 violation(s) listed above" in err
    assert main(["solve", str(path), "--method", "one-device", "--json"]) == 3
    assert "op 'x' cannot run on device 'acc0'" in capsys.readouterr().err


def test_one_device_takes_the_host_where_no_accelerator_runs_every_op():
    """Only the CPU runs x: one device put every op on an accelerator anyway (invalid), where all on the CPU is valid."""
    from placement_dsl.evaluate import evaluate

    g, c = _host_first()
    found = run("one-device", g, c, model=CostModel())
    assert set(found.placement.assign.tolist()) == {c.names.index("cpu0")} and evaluate(found.placement).valid
