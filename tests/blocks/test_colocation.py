"""Colocation by equalities on merged hosts, and a colocated group the latency IP keeps split around a CPU op.
"""
from __future__ import annotations

import pytest

from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.constraints import Colocate
from placement_dsl.formulations.latency import hinted
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import brute_force


# ---------------------------------------------------------------------------- colocation by equalities
def _colocated_around_a_cpu_op(b_on_accelerator: float, cpus: int, shared: bool) -> Problem:
    # a, c (accelerator 1, CPU 5) colocated around b (CPU 1), unit tensors, one accelerator
    ops = [Op(name="a", work={"accelerator": 1, "cpu": 5}, out_bytes=1),
           Op(name="b", work={"accelerator": b_on_accelerator, "cpu": 1}, out_bytes=1),
           Op(name="c", work={"accelerator": 1, "cpu": 5})]
    return Problem(Graph(ops, [("a", "b"), ("b", "c")]), Cluster.accelerators(1, cpus=cpus), Latency(),
                   [Colocate([["a", "c"]], shared=shared)])


def test_equality_colocation_on_merged_hosts_writes_no_row_for_the_represented_host():
    # the latency IP merges the two unbounded CPUs into cpu0, so cpu1 has no variables and a same-device row
    # there would read 0 == 0. a, c on acc0 with b on a CPU take 1 + 1 (tensor) + 1 + 1 (tensor) + 1 = 5, as
    # does everything on acc0 (1 + 3 + 1); on the CPU 11
    problem = _colocated_around_a_cpu_op(3.0, cpus=2, shared=False)
    best, _ = brute_force(problem)
    assert best == 5.0
    r = solve(problem, formulation="latency", solver="highs", time_limit=20, gap=1e-9)
    assert (r.objective, r.bound) == (pytest.approx(5.0), pytest.approx(5.0))
    assert r.placement.mapping()["a"] == r.placement.mapping()["c"] == "acc0"
    rows = compile(hinted(problem, 5.0), "latency").model.colocation.same_device
    assert sorted(rows) == [("c", "acc0"), ("c", "cpu0")]


def test_latency_ip_keeps_a_colocated_group_split_around_a_cpu_op():
    # b costs 4 on the accelerator: a, c on acc0 with b on the CPU (5) beats everything on acc0 (6). With two
    # slots per accelerator c shares a's device, not its slot: the run-path rows once priced c's reads for a's run
    problem = _colocated_around_a_cpu_op(4.0, cpus=1, shared=True)
    best, placement = brute_force(problem)
    assert best == 5.0 and placement.mapping() == {"a": "acc0", "b": "cpu0", "c": "acc0"}
    r = solve(problem, formulation="latency", solver="highs", time_limit=20, gap=1e-9)
    assert r.bound <= 5.0 + 1e-6


