"""The latency critical path (bounds/latency.py): a pin its colocation group cannot follow, joins, one op and a
chain.
"""
from __future__ import annotations

from placement_dsl.bounds import latency
from placement_dsl.cluster import Cluster
from placement_dsl.constraints import Pin
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency
from placement_dsl.problem import Problem

TWO = Cluster.accelerators(2, cpus=1)


# ---------------------------------------------------------------------------- bounds/latency.py


def test_latency_critical_path_with_a_pin_its_group_cannot_follow():
    # u (accelerator 1, CPU 3) and v (accelerator only) are colocated; u is pinned to the CPU, so their unit
    # has no device (the problem's checks name that). They count 0 instead of claiming "no placement", and
    # the longest path u -> w is w's 2 (not u's CPU time 3 + 2, which the pin alone would give)
    graph = Graph([Op(name="u", work={"accelerator": 1.0, "cpu": 3.0}, group="g"),
                   Op(name="v", work={"accelerator": 1.0}, group="g"),
                   Op(name="w", work={"accelerator": 2.0, "cpu": 2.0})], [("u", "w")])
    problem = Problem(graph, Cluster.accelerators(1, cpus=1), Latency(), [Pin("u", "cpu0")])
    assert latency.critical_path_bound(problem) == (2.0, ["u", "w"])


def test_latency_critical_path_follows_the_slower_input_of_a_join():
    # c reads a (1) and b (5), listed in that order: the longest path ends b -> c (5 + 1), not a -> c (2)
    graph = Graph([Op(name="a", work=1.0), Op(name="b", work=5.0), Op(name="c", work=1.0)], [("a", "c"), ("b", "c")])
    assert latency.critical_path_bound(Problem(graph, Cluster.accelerators(2), Latency())) == (6.0, ["b", "c"])


def test_latency_critical_path_of_one_op_and_of_a_chain():
    # one op: its fastest time (the CPU's 2 beats the accelerator's 3); a chain: every op on it, first to last
    one = Graph([Op(name="a", work={"accelerator": 3.0, "cpu": 2.0})])
    assert latency.critical_path_bound(Problem(one, Cluster.accelerators(1, cpus=1), Latency())) == (2.0, ["a"])
    chain = Graph([Op(name=n, work=1.0) for n in "pqrs"], [("p", "q"), ("q", "r"), ("r", "s")])
    assert latency.critical_path_bound(Problem(chain, Cluster.accelerators(1), Latency())) == (4.0, list("pqrs"))


