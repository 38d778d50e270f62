"""Files the command line writes are answers it stands by: no placement file when the solve has no valid
placement."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement_dsl.testing import run_cli


def _workload(path: Path, ops: list[dict], edges: list[list[str]], devices: list[dict]) -> Path:
    data = {"format": "placement_dsl.workload", "version": 1,
            "graph": {"format": "placement_dsl.graph", "version": 1, "name": "g", "ops": ops, "edges": edges},
            "cluster": {"devices": devices}}
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("case", ["memory", "kind"])
def test_solve_writes_no_placement_when_it_finds_no_valid_one(capsys, tmp_path, case):
    if case == "memory":  # every op fits a device, but one device cannot hold them all
        ops = [{"name": "a", "work": 1, "param_bytes": 60}, {"name": "b", "work": 1, "param_bytes": 60}]
        devices = [{"name": "d0", "memory": 100}, {"name": "d1", "memory": 100}]
    else:  # 'b' runs only on the cpu, 'a' only on the accelerator: one device cannot take both
        ops = [{"name": "a", "work": {"accelerator": 1}}, {"name": "b", "work": {"cpu": 1}}]
        devices = [{"name": "acc", "kind": "accelerator", "memory": 100},
                   {"name": "cpu", "kind": "cpu", "memory": 100}]
    path = _workload(tmp_path / "w.json", ops, [["a", "b"]], devices)
    out = tmp_path / "split.json"
    code, _, err = run_cli(capsys, "solve", str(path), "--method", "one-device", "--out", str(out))
    assert code == 3 and "no valid placement" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.json"]  # neither the file nor a partial one
    assert "not written" in err


def test_a_long_cycle_is_named_in_a_short_line(capsys, tmp_path):
    names = [f"op{i}" for i in range(200)]
    ops = [{"name": n, "work": 1} for n in names]
    edges = [[a, b] for a, b in zip(names, names[1:] + names[:1])]
    path = _workload(tmp_path / "w.json", ops, edges, [{"name": "d0"}])
    code, _, err = run_cli(capsys, "solve", str(path), "--method", "greedy")
    assert code == 2 and len(err.strip().splitlines()) == 1 and len(err) < 300
    assert "cycle of 200 ops" in err and "op0 -> op1" in err
