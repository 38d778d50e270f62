"""Every null bound says why, in the text and in the JSON (``no_bound``): a heuristic's answer (a search proves none;
its own reason where it gives one, such as the DP's split the cost model prices above the DP) and a MIP's."""
from __future__ import annotations

import json

import numpy as np
import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.io import save_workload
from placement_dsl.placement import PlacementClass
from placement_dsl.result import Result
from placement_dsl.solvers.base import Status
from placement_dsl.testing import random_graph, run_cli
from placement_dsl.workload import Workload


@pytest.fixture
def workload(tmp_path):
    path = tmp_path / "w.json"
    save_workload(Workload(random_graph(np.random.default_rng(5), 12, density=0.3), Cluster.accelerators(2, cpus=1)),
                  path)
    return str(path)


@pytest.mark.parametrize("method, objective", [("local-search", "throughput"), ("brkga", "throughput"),
                                               ("latency-best", "latency"), ("dp", "latency")])
def test_a_heuristic_without_a_bound_says_why(capsys, workload, method, objective):
    code, out, err = run_cli(capsys, "solve", workload, "--method", method, "--objective", objective,
                             "--time-limit", "5", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["bound"] is None and answer["no_bound"].startswith("no bound: ")
    code, out, err = run_cli(capsys, "solve", workload, "--method", method, "--objective", objective,
                             "--time-limit", "5")
    assert code == 0, err
    assert "no bound: " in out


def test_a_heuristic_with_a_bound_gives_no_reason(capsys, workload):
    code, out, err = run_cli(capsys, "solve", workload, "--method", "dp", "--json")
    assert code == 0, err
    answer = json.loads(out)
    assert answer["bound"] is not None and "no_bound" not in answer


@pytest.mark.parametrize("status, needle", [(Status.TIME_LIMIT_NO_SOLUTION, "within the time limit"),
                                            (Status.INFEASIBLE, "no feasible solution")])
def test_a_mip_answer_without_a_bound_says_why(status, needle):
    result = Result(status, None, None, None, "ip", "highs", "latency", bound_scope=PlacementClass.ALL)
    assert needle in result.to_dict()["no_bound"] and needle in result.summary()
    bounded = Result(Status.OPTIMAL, None, 2.0, 2.0, "ip", "highs", "latency", bound_scope=PlacementClass.ALL)
    assert "no_bound" not in bounded.to_dict() and "no bound" not in bounded.summary()
