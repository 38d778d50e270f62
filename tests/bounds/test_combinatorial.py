"""The chain bound and the position windows (bounds/combinatorial.py): each group's own CPU floor, windows closed
with a relative slack.
"""
from __future__ import annotations

import pytest

from placement_dsl.bounds.combinatorial import chain_bound, position_windows
from placement_dsl.bounds.simple import simple_lower_bound
from placement_dsl.cluster import Cluster
from placement_dsl.graph import Graph, Op
from placement_dsl.problem import Stages

TWO = Cluster.accelerators(2, cpus=1)


# ---------------------------------------------------------------------------- bounds/combinatorial.py


def test_chain_bound_takes_each_groups_own_cpu_floor():
    # v0 -> v1 -> v2 (1 on an accelerator, 10 on the CPU) and a lone x (0.5, 1) on two accelerators and a CPU:
    # rho = 0.5 (x's work per CPU second). v1 at position 1 needs A = 2 within 1 + 0.5 accelerators' worth
    # (4/3), at position 2 D = 2 within 1 + 0.5 (4/3); on the CPU it takes 10: 4/3. x's CPU floor (1) is x's
    ops = [Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 10.0}) for i in range(3)]
    graph = Graph(ops + [Op(name="x", work={"accelerator": 0.5, "cpu": 1.0})], [("v0", "v1"), ("v1", "v2")])
    cluster = Cluster.accelerators(2, cpus=1)
    assert chain_bound(graph, cluster) == pytest.approx(4 / 3)
    assert simple_lower_bound(graph, cluster) < 1.2


def test_position_windows_are_closed_with_a_relative_slack():
    # one op of e = 0.5 + 1e-9 on an accelerator or the CPU: every floor is e (A / (1 + rho) = e / 2 below it),
    # exactly the target 0.5 plus its slack 1e-9: on the edge, inside
    e = 0.5 + 1e-9
    allowed, cpu_ok = position_windows(Graph([Op(name="a", work={"accelerator": e, "cpu": e})]),
                                       Cluster.accelerators(1, cpus=1), 0.5)
    assert allowed.all() and cpu_ok.all()
    # below 1 the slack is 1e-9: an op of 0.5 is outside at 0.5 - 1.5e-9; above, 1e-9 of the target: 100 + 5e-8
    # is inside at 100
    assert not position_windows(Graph([Op(name="a", work=0.5)]), Stages(1), 0.5 - 1.5e-9)[0].any()
    assert position_windows(Graph([Op(name="a", work=100.00000005)]), Stages(1), 100.0)[0].all()

