"""The RINS-style neighbourhood (search/rins.py): relabelling, pins where splits agree, never worse."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous, Pin
from placement_dsl.errors import SpecError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.objectives import Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.search.rins import agreement, relabel, rins
from placement_dsl.testing import optimum, structured_problems, without


def four_layers() -> Problem:
    g = Graph([Op(name=f"v{i}", work={"accelerator": w, "cpu": 10 * w}) for i, w in enumerate([8, 3, 3, 3])],
              [("v0", "v1"), ("v1", "v2"), ("v2", "v3")])
    return Problem(g, Cluster.accelerators(2, cpus=1), Throughput(), [])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=12), st.permutations(range(4)))
def test_a_relabelled_copy_agrees_everywhere(assign, perm):
    cluster = Cluster.accelerators(4, cpus=1)  # devices 0..3 interchangeable, 4 the CPU
    ref = np.array(assign)
    mapping = np.array([*perm, 4])
    assert (relabel(mapping[ref], ref, cluster) == ref).all()


def test_splits_that_agree_up_to_labels_are_kept_although_better_exist():
    """Every unit agrees (the second split is the first with the accelerators swapped): all pinned, 11 stays."""
    problem = four_layers()
    a, b = (Placement(problem.graph, problem.cluster, x) for x in ([0, 0, 1, 1], [1, 1, 0, 0]))
    assert agreement([a, b], problem.cluster)[1].all()
    result = rins(problem, [a, b], time_limit=10)
    assert problem.evaluate(result).objective == pytest.approx(11.0)
    assert optimum(problem) < 11.0 - 1e-9


def test_the_disagreeing_units_are_re_solved_to_the_optimum():
    problem = four_layers()
    a, b = (Placement(problem.graph, problem.cluster, x) for x in ([0, 1, 1, 0], [0, 1, 0, 1]))
    _, agree = agreement([a, b], problem.cluster)
    assert agree.tolist() == [True, True, False, False]
    result = rins(problem, [a, b], time_limit=10)
    assert problem.evaluate(result).objective == pytest.approx(9.0) == pytest.approx(optimum(problem))
    assert result.assign[0] == 0 and result.assign[1] == 1  # the agreed units keep their devices


@settings(max_examples=8, deadline=None)
@given(structured_problems("contiguous"))
def test_never_worse_than_the_best_split_and_valid(problem):
    free = without(problem, Contiguous)
    model = free.cost_model()
    starts = [run(m, free.graph, free.cluster, model=model, seed=0).placement for m in ("dp", "greedy")]
    result = rins(free, starts, time_limit=10)
    assert free.violations(result) == []
    assert optimum(free) - 1e-6 <= free.evaluate(result).objective <= min(
        free.evaluate(s).objective for s in starts if free.is_valid(s)) + 1e-9


def test_refuses_when_no_split_is_valid():
    free = four_layers()
    problem = Problem(free.graph, free.cluster, Throughput(), [Pin("v0", free.cluster.names[0])])
    with pytest.raises(SpecError, match="valid"):
        rins(problem, [Placement(problem.graph, problem.cluster, [1, 1, 1, 1])])
