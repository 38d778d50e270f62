"""The command line on a solver's answer the cost model refuses: not the user's error (exit 2). Memory rows hold on
devices of 5 bytes beside a host of 1e9; an answer that breaks a row is discarded with a warning and a valid placement
answers; a solver objective the cost model contradicts is an internal error (exit 70). A heuristic's bound names the
placements it holds over."""
from __future__ import annotations

import json

import pytest

from placement_dsl import blocks, testing
from placement_dsl.cluster import Cluster
from placement_dsl.compile import Compiled
from placement_dsl.constraints import Contiguous
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics.base import DP_CLASS
from placement_dsl.io import save_workload
from placement_dsl.testing import optimum, run_cli, without
from placement_dsl.workload import Workload


@pytest.fixture
def small_beside_huge(tmp_path):
    """``a -> b -> c`` (a, b hold 4 bytes each) on 2 accelerators of 5 bytes and a slow CPU host of 1e9 bytes: 6."""
    ops = [Op(name="a", work={"accelerator": 1, "cpu": 50}, param_bytes=4, out_bytes=1),
           Op(name="b", work={"accelerator": 1, "cpu": 50}, param_bytes=4, out_bytes=1),
           Op(name="c", work={"accelerator": 4, "cpu": 50})]
    cluster = Cluster.accelerators(2, memory=5.0, cpus=1, cpu_memory=1e9)
    path = tmp_path / "w.json"
    save_workload(Workload(Graph(ops, [("a", "b"), ("b", "c")], name="memory"), cluster), path)
    return str(path)


@pytest.mark.parametrize("method", ["ip", "ip-noncontig", "exact"])
def test_the_ip_methods_solve_devices_of_bytes_beside_a_host_of_gigabytes(capsys, small_beside_huge, method):
    code, out, err = run_cli(capsys, "solve", small_beside_huge, "--method", method, "--objective", "throughput",
                             "--time-limit", "20", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["valid"] is True and answer["objective"] == pytest.approx(6.0)


def test_an_answer_the_cost_model_refuses_is_discarded_with_a_warning(capsys, small_beside_huge, monkeypatch):
    monkeypatch.setattr(blocks.MemoryCapacity, "build", lambda self, blk, ctx: None)  # a formulation missing a row
    code, out, err = run_cli(capsys, "solve", small_beside_huge, "--method", "ip", "--objective", "throughput",
                             "--time-limit", "20", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["valid"] is True and "discarded" in answer["message"]
    assert answer["bound"] is None or answer["bound"] <= answer["objective"]


def test_a_solver_objective_the_cost_model_contradicts_is_an_internal_error(capsys, small_beside_huge, monkeypatch):
    monkeypatch.setattr(Compiled, "objective_scale", property(lambda self: 2.0 * self.scale.time))
    code, out, err = run_cli(capsys, "solve", small_beside_huge, "--method", "ip", "--objective", "throughput",
                             "--time-limit", "20")
    assert code == 70 and out == ""
    assert err.startswith("internal error: EvaluationMismatchError") and len(err.strip().splitlines()) == 1


def test_the_dp_bound_names_the_placements_it_holds_over(capsys, tmp_path):
    # the DP is exact among contiguous splits with an acyclic quotient (the DP class); a non-contiguous one is better here, so the bound is not the problem's
    problem, contiguous_optimum = testing.contiguity_binds()
    assert optimum(without(problem, Contiguous)) < contiguous_optimum  # 6.5 < 7.25
    path = tmp_path / "w.json"
    save_workload(Workload(problem.graph, problem.cluster), path)
    code, out, err = run_cli(capsys, "solve", str(path), "--method", "dp", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["bound"] == pytest.approx(contiguous_optimum) and answer["bound_scope"] == DP_CLASS
    code, out, err = run_cli(capsys, "solve", str(path), "--method", "dp")
    assert code == 0, err
    assert f"bound {contiguous_optimum:g} over {DP_CLASS} placements only" in out
