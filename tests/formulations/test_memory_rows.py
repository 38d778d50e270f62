"""Memory rows stay exact when the devices' capacities differ by many orders of magnitude, and a solver answer the
cost model finds invalid is discarded (with its bound), not reported as the user's error."""
from __future__ import annotations

import pyomo.environ as pyo
import pytest
from pyomo.repn import generate_standard_repn

from placement_dsl import blocks
from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.constraints import Contiguous, Memory
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency, Throughput
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import Status
from placement_dsl.testing import optimum, training_memory_1f1b
from placement_dsl.training_terms import TrainingMemory
from tests.blocks.helpers import accepting


def _small_beside_huge(objective, host_memory: float) -> Problem:
    """``a -> b -> c`` (a, b hold 4 bytes each) on 2 accelerators of 5 bytes and a slow CPU of ``host_memory``."""
    ops = [Op(name="a", work={"accelerator": 1, "cpu": 50}, param_bytes=4, out_bytes=1),
           Op(name="b", work={"accelerator": 1, "cpu": 50}, param_bytes=4, out_bytes=1),
           Op(name="c", work={"accelerator": 4, "cpu": 50})]
    g = Graph(ops, [("a", "b"), ("b", "c")], name="memory")
    cluster = Cluster.accelerators(2, memory=5.0, cpus=1, cpu_memory=host_memory)
    return Problem(g, cluster, objective, [Memory()])


@pytest.mark.parametrize("objective, host_memory", [(Throughput(), 1e3), (Throughput(), 1e9), (Latency(), 1e9)],
                         ids=["throughput-1e3", "throughput-1e9", "latency-1e9"])
def test_a_capacity_of_bytes_beside_one_of_gigabytes_still_binds(objective, host_memory):
    # with every row in units of the largest capacity (1e9), the accelerators' rows held coefficients of 4e-9 against
    # a right-hand side of 5e-9: within the solver's tolerance, so it put a and b on one accelerator (8 > 5 bytes)
    problem = _small_beside_huge(objective, host_memory)
    best = optimum(problem)
    for name in accepting(problem):
        r = solve(problem, formulation=name, time_limit=30)
        assert problem.is_valid(r.placement), name
        assert r.objective == pytest.approx(best), name
        assert r.bound <= best + 1e-9, name


@pytest.mark.parametrize("objective", [Throughput(), Latency()], ids=["throughput", "latency"])
def test_every_memory_row_is_in_units_of_its_device(objective):
    # each capacity row reads "bytes / M_d <= 1": 4-byte ops on a 5-byte device are 0.8 whatever the host's 1e9 bytes
    # (+-0.8 where a formulation writes x as a difference of its y)
    # (in units of the largest capacity they were 4e-9 against 5e-9, under the solver's feasibility tolerance)
    problem = _small_beside_huge(objective, 1e9)
    for name in accepting(problem):
        rows = [row for row in compile(problem, name).model.component_data_objects(pyo.Constraint, active=True)
                if row.parent_component().local_name == "capacity"]
        assert rows, name
        for row in rows:
            repn = generate_standard_repn(row.body)
            assert row.upper == pytest.approx(1.0) and repn.constant == 0, (name, row.name)
            assert [abs(c) for c in repn.linear_coefs] == pytest.approx([0.8] * len(repn.linear_coefs)), (name, row.name)


def test_training_memory_rows_bind_beside_a_huge_host():
    # the 1F1B rows (stashes, reads, capacity) with a host of 1e9 bytes beside three stages of 12: with the stashes
    # and reads in units of the largest capacity, the solver overfilled a stage and broke contiguity
    small, _ = training_memory_1f1b()
    cluster = Cluster(list(Cluster.stages(3, memory=12.0).devices)
                      + [Cluster.stages(1, memory=1e9, kind="cpu").devices[0].model_copy(update={"name": "big"})])
    problem = Problem(small.graph, cluster, small.objective, [Contiguous(), TrainingMemory("1f1b")])
    best = optimum(problem)
    for name in accepting(problem):
        r = solve(problem, formulation=name, time_limit=30)
        assert problem.is_valid(r.placement), name
        assert r.objective == pytest.approx(best), name


def test_a_solver_answer_invalid_for_the_cost_model_is_discarded_with_its_bound(monkeypatch):
    # a formulation that misses the memory rows: the solver answers a and b on one accelerator (objective 5), which
    # the cost model refuses; the answer is a valid placement found without the model, the bound no more than it
    monkeypatch.setattr(blocks.MemoryCapacity, "build", lambda self, blk, ctx: None)
    problem = _small_beside_huge(Throughput(), 1e3)
    r = solve(problem, formulation="chain", time_limit=20)
    assert problem.is_valid(r.placement)
    assert r.status is Status.TIME_LIMIT_FEASIBLE
    assert "invalid" in r.message and "discarded" in r.message
    assert r.bound is None or r.bound <= r.objective
    assert r.bound is None or r.bound <= optimum(problem) + 1e-9
