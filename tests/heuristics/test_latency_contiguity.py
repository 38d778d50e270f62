"""The latency local search under a model requiring contiguity (Tarnawski Def. 3.1 and Fig. 3).

A :class:`~placement_dsl.constraints.Contiguous` term asks every device's ops (accelerators and hosts alike)
to form a contiguous set; the invocation model alone would cut a non-contiguous set into subgraphs
(§4.1) and often run faster so. The search must keep to the sets the model allows.
"""
from __future__ import annotations

import pytest

from placement_dsl.brute import optimum
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Contiguous
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem

FAST, SLOW = 1.0, 20.0


def sandwich(middle_on_cpu: bool) -> Problem:
    """``x -> y -> z`` on one accelerator and one CPU: the ends fast on one kind, the middle on the other.

    Without contiguity the ends share a device around the middle (about 3.2); with it that
    device's ops are not contiguous, and the best contiguous split takes one slow op (about 22).
    """
    ends = {"accelerator": FAST, "cpu": SLOW} if middle_on_cpu else {"accelerator": SLOW, "cpu": FAST}
    middle = {"accelerator": SLOW, "cpu": FAST} if middle_on_cpu else {"accelerator": FAST, "cpu": SLOW}
    ops = [Op(name="x", work=ends, out_bytes=0.1), Op(name="y", work=middle, out_bytes=0.1),
           Op(name="z", work=ends)]
    graph = Graph(ops, [("x", "y"), ("y", "z")], name="sandwich")
    return Problem(graph, Cluster.accelerators(1, cpus=1, bandwidth=1.0), Latency(), [Contiguous()])


@pytest.mark.parametrize("method", ["latency-local-search", "latency-best"])
@pytest.mark.parametrize("middle_on_cpu", [True, False], ids=["accelerator-around-cpu", "cpu-around-accelerator"])
def test_latency_search_keeps_each_device_contiguous(method, middle_on_cpu):
    problem = sandwich(middle_on_cpu)
    model = problem.cost_model()
    res = run(method, problem.graph, problem.cluster, model=model, time_limit=2.0)
    assert problem.violations(res.placement) == []
    assert res.objective == pytest.approx(optimum(problem), rel=1e-9)
    assert res.objective > 20  # the non-contiguous split (about 3.2) is not the answer
