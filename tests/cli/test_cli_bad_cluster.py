"""Cluster specs and workloads the command line used to accept with a silent reading, or refuse blaming the
wrong thing: each is refused in one line naming the file and the link, route, device field or op, exit 2, and
no ``--out`` file."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from placement_dsl.testing import run_cli


def workload() -> dict[str, Any]:
    """Three accelerators on a line of links, a declared route ``g0 -> g2``; a colocated pair ``e1, e2``."""
    devices = [{"name": f"g{i}", "kind": "accelerator", "memory": 20.0, "bandwidth": 2.0} for i in range(3)]
    links = [{"src": f"g{a}", "dst": f"g{b}", "bandwidth": 2.0, "latency": 0.1}
             for a, b in ((0, 1), (1, 0), (1, 2), (2, 1))]
    ops = [{"name": "in", "work": {"accelerator": 1.0, "cpu": 3.0}, "out_bytes": 1.0},
           {"name": "e1", "work": {"accelerator": 4.0}, "out_bytes": 2.0, "param_bytes": 4.0, "group": "g1"},
           {"name": "e2", "work": {"accelerator": 3.0}, "out_bytes": 1.0, "param_bytes": 5.0, "group": "g1"},
           {"name": "out", "work": 2.0}]
    return {"format": "placement_dsl.workload", "version": 1,
            "graph": {"format": "placement_dsl.graph", "version": 1, "name": "w", "ops": ops,
                      "edges": [["in", "e1"], ["e1", "e2"], ["e2", "out"]]},
            "cluster": {"devices": devices, "links": links,
                        "routes": [{"src": "g0", "dst": "g2", "path": ["g0", "g1", "g2"]}]}}


def _set(*path: Any, value: Any) -> Callable[[dict[str, Any]], Any]:
    def change(w: dict[str, Any]) -> None:
        for key in path[:-1]:
            w = w[key]
        w[path[-1]] = value
    return change


def _dup_link(w: dict[str, Any]) -> None:
    w["cluster"]["links"].append(dict(w["cluster"]["links"][0], bandwidth=7.0))


def _no_name(w: dict[str, Any]) -> None:
    del w["cluster"]["devices"][1]["name"]


CASES = {
    "link declared twice": (_dup_link, "link 'g0' -> 'g1' is declared twice"),
    "link to itself": (_set("cluster", "links", 2, "dst", value="g1"), "link 'g1' -> 'g1': value: src and dst"),
    "route revisits": (_set("cluster", "routes", 0, "path", value=["g0", "g1", "g0", "g1", "g2"]),
                       "route 'g0' -> 'g2': value: path ['g0', 'g1', 'g0', 'g1', 'g2'] passes device 'g0' twice"),
    "memory true": (_set("cluster", "devices", 1, "memory", value=True), "device 'g1': memory: "),
    "speed true": (_set("cluster", "devices", 1, "speed", value=True), "device 'g1': speed: "),
    "device bandwidth false": (_set("cluster", "devices", 0, "bandwidth", value=False), "device 'g0': bandwidth: "),
    "link bandwidth true": (_set("cluster", "links", 0, "bandwidth", value=True), "link 'g0' -> 'g1': bandwidth: "),
    "link latency true": (_set("cluster", "links", 0, "latency", value=True), "link 'g0' -> 'g1': latency: "),
    "op bytes true": (_set("graph", "ops", 1, "param_bytes", value=True), "op 'e1': param_bytes: "),
    "op work true": (_set("graph", "ops", 1, "work", "accelerator", value=True), "op 'e1': work: "),
    "device without name": (_no_name, "device #1 has no 'name'"),
    "version true": (_set("version", value=True), "unsupported version True"),
    "top level list": (lambda w: [w], "expected a JSON object at the top level, got a list"),
    "top level string": (lambda w: "g1", "expected a JSON object at the top level, got a string"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_cluster_spec_is_one_line_naming_the_file_and_item(capsys, tmp_path, case):
    change, needle = CASES[case]
    data = workload()
    data = change(data) or data
    path, out = tmp_path / "w.json", tmp_path / "split.json"
    path.write_text(json.dumps(data))
    code, stdout, err = run_cli(capsys, "solve", str(path), "--method", "greedy", "--out", str(out))
    assert code == 2 and stdout == "", err
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"error: '{path}'") and needle in err, err
    if needle.endswith(": "):  # a boolean where a number goes
        assert "got True" in err or "got False" in err, err
    assert not out.exists()


def _unknown_kind(path: Path) -> Path:
    data = workload()
    data["graph"]["ops"][2]["work"] = {"tpu": 1.0}
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("argv", [["solve", "--method", "greedy"], ["solve", "--method", "dp"],
                                  ["solve", "--method", "ip", "--time-limit", "20"], ["bounds"]])
def test_an_op_no_device_can_run_is_named_with_its_kind_by_every_method(capsys, tmp_path, argv):
    """``e2`` runs only on a kind the cluster lacks: named where the workload is read, not as a colocation group's
    memory (greedy) or as infeasible (exit 3)."""
    path, out = _unknown_kind(tmp_path / "w.json"), tmp_path / "split.json"
    extra = ["--out", str(out)] if argv[0] == "solve" else []
    code, stdout, err = run_cli(capsys, argv[0], str(path), *argv[1:], *extra)
    assert code == 2 and stdout == "", err
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"error: '{path}'"), err
    assert "op 'e2' runs only on kind 'tpu'" in err and "'accelerator'" in err, err
    assert not out.exists()


def test_an_op_for_a_kind_the_options_add_is_not_refused(capsys, tmp_path):
    """The check is on the cluster the command runs on: ``--cpus 1`` gives an op that runs only on a cpu its device
    (the links go: the cpu it adds would have none)."""
    data = workload()
    data["graph"]["ops"][3]["work"] = {"cpu": 1.0}
    del data["cluster"]["links"], data["cluster"]["routes"]
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "solve", str(path), "--method", "greedy")
    assert code == 2 and "op 'out' runs only on kind 'cpu'" in err
    code, _, err = run_cli(capsys, "solve", str(path), "--method", "greedy", "--cpus", "1")
    assert code == 0, err


def test_a_colocation_group_whose_ops_share_no_kind_is_named(capsys, tmp_path):
    """``e1`` runs only on the accelerator and ``e2`` only on the cpu, but they share a device: greedy used to blame
    the group's memory (exit 3)."""
    data = workload()
    data["cluster"] = {"devices": [{"name": "acc", "kind": "accelerator"}, {"name": "cpu", "kind": "cpu"}]}
    data["graph"]["ops"][2]["work"] = {"cpu": 1.0}
    path, out = tmp_path / "w.json", tmp_path / "split.json"
    path.write_text(json.dumps(data))
    code, stdout, err = run_cli(capsys, "solve", str(path), "--method", "greedy", "--out", str(out))
    assert code == 2 and stdout == "" and len(err.strip().splitlines()) == 1, err
    assert "colocation group 'g1'" in err and "'e1' on 'accelerator'; 'e2' on 'cpu'" in err, err
    assert not out.exists()
