"""Terms that restrict a problem to a class (``restricts``: Contiguous, DagOrder, Subgraphs) are what
:meth:`Problem.unrestricted` drops to give the family the certificate speaks of beside the class, and what
:meth:`Problem.class_label` names."""
from __future__ import annotations

from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Colocate, Contiguous, DagOrder, Memory, Subgraphs
from placement_dsl.objectives import Bottleneck, Latency
from placement_dsl.problem import Problem
from placement_dsl.testing import invocation_workload


def test_unrestricted_drops_only_the_restricting_terms():
    g, c = invocation_workload(1)
    keep = [Memory(), Colocate([["o0", "o1"]])]
    problem = Problem(g, c, Latency(), [*keep, Contiguous(), DagOrder(), Subgraphs(2)])
    family = problem.unrestricted()
    assert family is not None and family.constraints == tuple(keep) and family.objective == problem.objective
    assert Problem(g, c, Latency(), keep).unrestricted() is None


def test_the_class_label_names_the_device_order_only_where_it_matters():
    g, c = invocation_workload(1, k=2)
    assert Problem(g, c, Latency(), [DagOrder()]).class_label() == \
        "dag-ordered placements in the device order acc0, acc1, cpu0"
    assert Problem(g, Cluster.stages(3), Bottleneck(), [DagOrder()]).class_label() == "dag-ordered placements"
    many = Cluster.accelerators(8, cpus=1)
    assert Problem(g, many, Latency(), [DagOrder()]).class_label().endswith(
        "in the device order acc0, acc1, acc2, acc3, ..., cpu0")
    assert Problem(g, c, Latency(), [Subgraphs(3)]).class_label() == \
        "placements with at most 3 contiguous subgraphs per accelerator"
    assert Problem(g, c, Latency(), [Contiguous(), Subgraphs(3)]).class_label() == "contiguous placements"
