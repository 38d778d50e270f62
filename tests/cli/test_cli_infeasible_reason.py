"""Exit 3 names what broke: the bytes against the devices' memory follow only a memory violation (a split whose
ops cannot run on their device was reported with 'largest: ... with unlimited', as if memory were short), and
under --json stdout is the one JSON document, the reason on stderr."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from placement_dsl.testing import run_cli


def _workload(path: Path, ops: list[dict], devices: list[dict]) -> Path:
    data = {"format": "placement_dsl.workload", "version": 1,
            "graph": {"format": "placement_dsl.graph", "version": 1, "name": "g", "ops": ops, "edges": [["a", "b"]]},
            "cluster": {"devices": devices}}
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("case", ["memory", "kind"])
def test_the_reason_names_the_violation_and_stdout_stays_json(capsys, tmp_path, case):
    if case == "memory":  # every op fits a device, but one device cannot hold them all
        ops = [{"name": "a", "work": 1, "param_bytes": 60}, {"name": "b", "work": 1, "param_bytes": 60}]
        devices = [{"name": "d0", "memory": 100}, {"name": "d1", "memory": 100}]
    else:  # 'b' runs only on the cpu, 'a' only on the accelerator; memory is plenty
        ops = [{"name": "a", "work": {"accelerator": 1}}, {"name": "b", "work": {"cpu": 1}}]
        devices = [{"name": "acc", "kind": "accelerator"}, {"name": "cpu", "kind": "cpu"}]
    path = _workload(tmp_path / "w.json", ops, devices)
    code, out, err = run_cli(capsys, "solve", str(path), "--method", "one-device", "--json")
    assert code == 3
    payload = json.loads(out)  # one document, nothing after it
    assert payload["valid"] is False
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: infeasible:")
    if case == "memory":
        assert "capacity" in err and "largest:" in err
    else:
        assert "cannot run on device" in err and "largest:" not in err and "unlimited" not in err
