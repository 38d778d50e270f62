"""Picking a problem's bound family asks whether Archer's exact MIP writes it; the levels declare the problems it
surely writes (:func:`placement_dsl.levels.base.archer_surely_writes`), so that ``bounds`` on them imports no Pyomo.
The declaration must never claim a problem the formulation refuses."""
from __future__ import annotations

import random

import pytest

from placement_dsl import testing
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Colocate, Contiguous, DagOrder, Memory, Overflow, Pin
from placement_dsl.formulations import get
from placement_dsl.levels.base import archer_surely_writes, archer_writes
from placement_dsl.objectives import GPipe, PipeDream, Throughput
from placement_dsl.problem import Problem


def _problems():
    for name, make in testing.INSTANCES.items():
        yield name, make()[0]
    for name, (make, _, _) in testing.BINDING.items():
        yield f"binding-{name}", make()[0]
    for seed in range(12):
        yield f"structured-{seed}", testing.structured_problem(random.Random(seed))
    g = testing.chain_graph([1.0, 2.0, 3.0, 1.0])
    hier = Cluster.hierarchical(2, 2, intra=4.0, inter=1.0)
    flat = Cluster.accelerators(2, memory=10.0, cpus=1)
    for label, objective in (("throughput", Throughput()), ("pipedream", PipeDream()), ("gpipe", GPipe())):
        for cname, cluster in (("flat", flat), ("routed", hier)):
            terms = [DagOrder(), Memory(), Colocate(groups=[["op1", "op2"]]), Pin("op0", cluster.names[0])] if cname == "flat" else [DagOrder()]
            yield f"{label}-{cname}", Problem(g, cluster, objective, terms)
    yield "overflow-contiguous", Problem(g, flat, Throughput(), [DagOrder(), Overflow(), Contiguous()])


PROBLEMS = dict(_problems())


@pytest.mark.parametrize("name", list(PROBLEMS))
def test_the_declared_problems_are_ones_the_exact_formulation_accepts(name):
    problem = PROBLEMS[name]
    accepted = get("exact").accepts(problem) is None
    if archer_surely_writes(problem):
        assert accepted, name
    assert archer_writes(problem) == accepted


def test_the_declaration_covers_the_plain_dag_ordered_problems():
    """Not vacuous: a chain under DagOrder with memory, and the routed cluster left to the formulation."""
    assert archer_surely_writes(PROBLEMS["throughput-flat"]) and archer_surely_writes(PROBLEMS["pipedream-flat"])
    assert not archer_surely_writes(PROBLEMS["throughput-routed"]) and not archer_surely_writes(PROBLEMS["gpipe-flat"])
