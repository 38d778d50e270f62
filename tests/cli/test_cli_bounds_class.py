"""``bounds`` certifies by default a class holding the pipelines ``solve`` returns: the DAG-ordered class numbers the
devices in pipeline order, which costs nothing only on identical devices."""
from __future__ import annotations

import json

import pytest

from placement_dsl.cli import main
from placement_dsl.cluster import Cluster, Device
from placement_dsl.graph import Graph, Op
from placement_dsl.io import Workload, save_workload


def _diamond_on_a_fast_second_device() -> Workload:
    ops = [Op(name=n, work={"accelerator": w, "cpu": 10 * w}, out_bytes=1e6) for n, w in
           (("s", 1), ("a", 5), ("b", 5), ("c", 2), ("t", 1))]
    edges = [("s", "a"), ("s", "b"), ("a", "c"), ("b", "c"), ("c", "t")]
    devices = [Device(name="a0", bandwidth=1.6e7), Device(name="a1", speed=2.0, bandwidth=1.6e7),
               Device(name="cpu0", kind="cpu", bandwidth=1.6e7)]
    return Workload(Graph(ops, edges), Cluster(devices))


def _an_op_only_the_host_runs_first() -> Workload:
    ops = [Op(name="x", work={"cpu": 1.0}), Op(name="y", work={"accelerator": 1.0, "cpu": 10.0}, out_bytes=1e6)]
    return Workload(Graph(ops, [("x", "y")]), Cluster.accelerators(3, cpus=1, bandwidth=1.6e7))


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("make", [_diamond_on_a_fast_second_device, _an_op_only_the_host_runs_first])
def test_the_default_bound_is_below_the_pipeline_the_dp_returns(tmp_path, capsys, make):
    """The fast device first (6.125 bounded, 5.625 found), the host first (11 bounded, 1 found): numbered in the
    cluster's order, Archer's MIP proved the optimum of that numbering, above a pipeline in another order."""
    path = tmp_path / "w.json"
    save_workload(make(), path)
    solved = _json(capsys, "solve", str(path), "--method", "dp")
    bounds = _json(capsys, "bounds", str(path), "--time-limit", "20")
    assert solved["valid"] and bounds["bound"] <= solved["objective"] * (1 + 1e-9)
    assert bounds["upper_bound"] <= solved["objective"] * (1 + 1e-9)


def _fork_joins_in_series(forks: int = 4) -> Workload:
    """Fork-joins one after another, each with two long branches: a schedule that runs both branches of every fork
    at once sends tensors back and forth between the two devices, which no DAG-ordered placement does."""
    ops, edges, join = [Op(name="s", work=1.0, out_bytes=1e3)], [], "s"
    for i in range(forks):
        for b in "ab":
            ops.append(Op(name=f"{b}{i}", work=5.0, out_bytes=1e3))
            edges.append((join, f"{b}{i}"))
        ops.append(Op(name=f"j{i}", work=1.0, out_bytes=1e3))
        edges += [(f"a{i}", f"j{i}"), (f"b{i}", f"j{i}")]
        join = f"j{i}"
    devices = [Device(name=f"a{i}", bandwidth=1e6, invocations=False) for i in range(2)]  # one op at a time (MOIRAI)
    return Workload(Graph(ops, edges), Cluster(devices))


def test_the_makespan_certificate_keeps_the_list_schedules_solve_finds(tmp_path, capsys):
    """The makespan's default class was the DAG-ordered one: HEFT's and CPOP's schedules were refused and the
    certificate kept one device's (GoogLeNet: 2.336 where HEFT finds 1.530). It now certifies solve's class, every
    placement, with the passes of solve's start race (GETF among them) and the critical-chain search after them."""
    path = tmp_path / "w.json"
    save_workload(_fork_joins_in_series(), path)
    passes = [_json(capsys, "solve", str(path), "--objective", "makespan", "--method", m)["objective"]
              for m in ("list", "getf")]
    bounds = _json(capsys, "bounds", str(path), "--objective", "makespan", "--time-limit", "10")
    assert bounds["upper_bound"] <= min(passes) * (1 + 1e-9)
    assert bounds["bound"] <= bounds["upper_bound"] * (1 + 1e-9)


def test_bounds_exact_names_which_device_order_each_row_covers(tmp_path, capsys):
    """On a fast second device the exact row proves 6.125, the optimum of the cluster's numbering, while the DP row
    proves 5.625, the optimum over every order of the devices: both read 'dag-ordered placements', as if one class
    had two optima. Each now names its order; on identical devices, where the order costs nothing, neither does."""
    path = tmp_path / "w.json"
    save_workload(_diamond_on_a_fast_second_device(), path)
    rows = {r["level"]: r for r in _json(capsys, "bounds", str(path), "--method", "exact", "--time-limit", "20")["levels"]}
    assert rows["dp"]["bound"] < rows["exact"]["bound"]
    assert rows["dp"]["scope"].endswith("in any device order")
    assert rows["exact"]["scope"].endswith("in the device order a0, a1, cpu0")
    same = tmp_path / "same.json"
    save_workload(Workload(_diamond_on_a_fast_second_device().graph, Cluster.accelerators(2, bandwidth=1.6e7)), same)
    rows = {r["level"]: r for r in _json(capsys, "bounds", str(same), "--method", "exact", "--time-limit", "20")["levels"]}
    assert not any("device order" in r["scope"] for r in rows.values())
