"""A solve's certificate names its class as it is meant: DAG order *in the cluster's device order* where the numbering
matters (``exact`` read "optimal 215.802 over dag-ordered placements" while ``ip`` found 212.802 with the host before
an accelerator), and its JSON lists the violations ``evaluate`` lists, each with whether the problem requires it
(``ip-noncontig --json`` listed none where ``evaluate`` listed six notes)."""
from __future__ import annotations

import json

import pytest

from placement_dsl.cli import main
from placement_dsl.constraints import DagOrder, Memory
from placement_dsl.io import Workload, save_workload
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import invocation_workload


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json", "--quiet"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_exact_latency_certificate_names_the_device_order(tmp_path, capsys):
    g, c = invocation_workload(3)
    path = tmp_path / "w.json"
    save_workload(Workload(g, c), path)
    named = "dag-ordered placements in the device order acc0, acc1, cpu0"
    assert main(["solve", str(path), "--objective", "latency", "--method", "exact", "--time-limit", "20",
                 "--quiet"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()  # DAG order restricts: the class's line, then the family's
    assert f"over {named} only, gap" in lines[-2] and lines[-1].startswith(("outside ", "over all placements"))
    answer = _json(capsys, "solve", str(path), "--objective", "latency", "--method", "exact", "--time-limit", "20")
    assert answer["bound_scope"] == named
    result = solve(Problem(g, c, Latency(), [Memory(), DagOrder()]), time_limit=20)
    assert result.to_dict()["bound_scope"] == named and f"over {named} only," in result.certificate_line()


@pytest.mark.parametrize("seed", (1, 2))
def test_a_solve_lists_the_violations_evaluate_lists(seed, tmp_path, capsys):
    g, c = invocation_workload(seed, n=16, k=3)
    path, split = tmp_path / "w.json", tmp_path / "split.json"
    save_workload(Workload(g, c), path)
    answer = _json(capsys, "solve", str(path), "--objective", "latency", "--method", "ip-noncontig", "--time-limit",
                   "15", "--out", str(split))
    verdict = _json(capsys, "evaluate", str(path), "--objective", "latency", "--split", str(split))
    assert answer["violations"] == verdict["violations"]
    assert all(set(v) == {"check", "message", "required"} for v in answer["violations"])
    heuristic = _json(capsys, "solve", str(path), "--objective", "latency", "--method", "list")
    assert heuristic["violations"] and not any(v["required"] for v in heuristic["violations"])
