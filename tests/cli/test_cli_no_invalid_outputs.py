"""Files the command line writes are answers it stands by: no placement file when the solve has no valid
placement; exit 3 names what broke (the bytes against the devices' memory follow only a memory violation: a split
whose ops cannot run on their device was reported with 'largest: ... with unlimited', as if memory were short), and
under --json stdout is the one JSON document, the reason on stderr."""
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


def _no_one_device(path: Path, case: str) -> Path:
    """A two-op workload no single device takes: by its memory (``"memory"``) or by the ops' kinds (``"kind"``)."""
    if case == "memory":  # every op fits a device, but one device cannot hold them all
        ops = [{"name": "a", "work": 1, "param_bytes": 60}, {"name": "b", "work": 1, "param_bytes": 60}]
        devices = [{"name": "d0", "memory": 100}, {"name": "d1", "memory": 100}]
    else:  # 'b' runs only on the cpu, 'a' only on the accelerator: one device cannot take both; memory is plenty
        ops = [{"name": "a", "work": {"accelerator": 1}}, {"name": "b", "work": {"cpu": 1}}]
        devices = [{"name": "acc", "kind": "accelerator", "memory": 100},
                   {"name": "cpu", "kind": "cpu", "memory": 100}]
    return _workload(path, ops, [["a", "b"]], devices)


@pytest.mark.parametrize("case", ["memory", "kind"])
def test_solve_writes_no_placement_when_it_finds_no_valid_one(capsys, tmp_path, case):
    path = _no_one_device(tmp_path / "w.json", case)
    out = tmp_path / "split.json"
    code, _, err = run_cli(capsys, "solve", str(path), "--method", "one-device", "--out", str(out))
    assert code == 3 and "no valid placement" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.json"]  # neither the file nor a partial one
    assert "not written" in err


@pytest.mark.parametrize("case", ["memory", "kind"])
def test_the_reason_names_the_violation_and_stdout_stays_json(capsys, tmp_path, case):
    path = _no_one_device(tmp_path / "w.json", case)
    code, out, err = run_cli(capsys, "solve", str(path), "--method", "one-device", "--json")
    assert code == 3
    payload = json.loads(out)  # one document, nothing after it
    assert payload["valid"] is False
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: infeasible:")
    if case == "memory":
        assert "capacity" in err and "largest:" in err
    else:
        assert "cannot run on device" in err and "largest:" not in err and "unlimited" not in err


def test_a_long_cycle_is_named_in_a_short_line(capsys, tmp_path):
    names = [f"op{i}" for i in range(200)]
    ops = [{"name": n, "work": 1} for n in names]
    edges = [[a, b] for a, b in zip(names, names[1:] + names[:1])]
    path = _workload(tmp_path / "w.json", ops, edges, [{"name": "d0"}])
    code, _, err = run_cli(capsys, "solve", str(path), "--method", "greedy")
    assert code == 2 and len(err.strip().splitlines()) == 1 and len(err) < 300
    assert "cycle of 200 ops" in err and "op0 -> op1" in err
