"""A single-sample solve whose budget cannot fit its closed forms' passes still prices one in O(n + m): the critical
path (and the load on serial devices). Beside a host CPU (a device that runs ops in parallel) it priced none, and a
spent latency solve whose answer was the critical path's own value returned a null bound."""
from __future__ import annotations

import math

import numpy as np
import pytest

from placement_dsl import stopped
from placement_dsl.bounds.makespan import critical_path_bound
from placement_dsl.cluster import Cluster
from placement_dsl.deadline import Deadline
from placement_dsl.objectives import Latency, Makespan
from placement_dsl.problem import Problem
from placement_dsl.testing import random_graph


@pytest.mark.parametrize("objective", [Latency(), Makespan()])
@pytest.mark.parametrize("cpus", [0, 1])
def test_a_spent_budget_keeps_the_critical_path(monkeypatch, objective, cpus):
    graph = random_graph(np.random.default_rng(3), 12, density=0.3)
    problem = Problem(graph, Cluster.accelerators(2, cpus=cpus), objective, [])
    monkeypatch.setattr(stopped, "CLOSED_PER_EDGE", 1e9)  # no pass of the closed forms fits the clock
    bound, by = stopped.closed_form_source(problem, Deadline(0.0))
    assert bound is not None and math.isfinite(bound)
    assert bound >= critical_path_bound(graph, problem.cluster) - 1e-12 and by in ("critical-path", "simple")
