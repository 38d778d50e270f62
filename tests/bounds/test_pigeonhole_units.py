"""The pigeonhole bound (bounds/pigeonhole.py) on its edge cases: one accelerator or one op, none, host-only ops,
the units slowest on the host first, times below one unit.
"""
from __future__ import annotations

from placement_dsl.bounds.pigeonhole import pigeonhole_bound
from placement_dsl.cluster import Cluster
from placement_dsl.graph import Graph, Op


# ---------------------------------------------------------------------------- bounds/pigeonhole.py
def _units(*works: dict) -> Graph:
    return Graph([Op(name=f"v{i}", work=w) for i, w in enumerate(works)])


def test_pigeonhole_with_one_accelerator_or_one_op():
    # K = 1: the three units with host time 10 all sit on the accelerator below T = 10: f = 1 + 1 + 1 = 3
    g = _units(*[{"accelerator": 1.0, "cpu": 10.0}] * 3)
    assert pigeonhole_bound(g, Cluster.accelerators(1, cpus=1)) == 3.0
    # a single op (a = 2, h = 10) on two accelerators: ceil(1 / 2) = 1 op on one of them, 2
    assert pigeonhole_bound(_units({"accelerator": 2.0, "cpu": 10.0}), Cluster.accelerators(2, cpus=1)) == 2.0


def test_pigeonhole_without_accelerators_or_with_a_host_only_op():
    g = _units({"accelerator": 2.0, "cpu": 3.0})
    assert pigeonhole_bound(g, Cluster.accelerators(0, cpus=1)) == 0.0  # hosts only
    # an op only the CPU runs (3): its accelerator time reads as the largest float, so below T = 3 it
    # must sit on the accelerator at that cost (f far above 3) and from 3 on nothing must: T = 3, its optimum
    assert pigeonhole_bound(_units({"cpu": 3.0}), Cluster.accelerators(1, cpus=1)) == 3.0


def test_pigeonhole_takes_the_units_slowest_on_the_host_first():
    # K = 1; u: a = 1, h = 100; w: a = 5, h = 2. Below T = 2 both share the accelerator (f = 6 > 2);
    # in [2, 100) only u must (f = 1): T = max(2, 1) = 2, the optimum (u on the accelerator, w on the CPU).
    # Taking w as the unit that must stay would give 5.
    g = _units({"accelerator": 1.0, "cpu": 100.0}, {"accelerator": 5.0, "cpu": 2.0})
    assert pigeonhole_bound(g, Cluster.accelerators(1, cpus=1)) == 2.0


def test_pigeonhole_below_one_time_unit():
    # a = 0.5, h = 10 on one accelerator: 0.5
    assert pigeonhole_bound(_units({"accelerator": 0.5, "cpu": 10.0}), Cluster.accelerators(1, cpus=1)) == 0.5
    # a = 5, h = 0.5: below T = 0.5 the unit must sit on the accelerator (5 > 0.5); from 0.5 on nothing
    # must, f = 0: T = 0.5 (the CPU alone)
    assert pigeonhole_bound(_units({"accelerator": 5.0, "cpu": 0.5}), Cluster.accelerators(1, cpus=1)) == 0.5
