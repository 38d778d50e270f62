"""The simple bounds (bounds/simple.py): each op at its fastest device, and the replicated bound's ring over the
accelerators at the slower direction of a link.
"""
from __future__ import annotations

from placement_dsl.bounds.simple import replicated_lower_bound, simple_lower_bound
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.graph import Graph, Op


# ---------------------------------------------------------------------------- bounds/simple.py
def test_simple_bound_takes_each_op_at_its_fastest_device():
    fast_and_slow = Cluster([Device(name="fast", speed=2.0), Device(name="slow")])
    # times fast/slow: a 3/6, b 1/2, c 1/2 -> t = (3, 1, 1): max 3 beats the sum 5 over 2 devices
    g = Graph([Op(name="a", work=6), Op(name="b", work=2), Op(name="c", work=2)])
    assert simple_lower_bound(g, fast_and_slow) == 3.0
    # four ops of work 2: t = (1, 1, 1, 1), the sum 4 over 2 devices (2) beats the max (1)
    g = Graph([Op(name=f"v{i}", work=2) for i in range(4)])
    assert simple_lower_bound(g, fast_and_slow) == 2.0


def _asymmetric_pair() -> Cluster:
    # acc0 -> acc1 at 0.5, acc1 -> acc0 at 0.25: a ring of the two runs at the slower direction, 0.25
    return Cluster([Device(name="acc0"), Device(name="acc1")],
                   [Link(src="acc0", dst="acc1", bandwidth=0.5), Link(src="acc1", dst="acc0", bandwidth=0.25)])


def test_replicated_bound_rings_at_the_slower_direction_of_a_link():
    c = _asymmetric_pair()
    # a (work 10, 1 parameter byte) on both: 10/2 + 2 * (1/2) * 1 / 0.25 = 5 + 4 = 9 < 10 alone;
    # the sum 10 over 2 devices is 5. (Ringing at 0.5 would give 7, at the diagonal's inf 5, at 1.0 6.)
    assert replicated_lower_bound(Graph([Op(name="a", work=10, param_bytes=1)]), c, 2) == 9.0
    # replicas capped at 1: no replication, the bound is Lemma 3.3's 10
    assert replicated_lower_bound(Graph([Op(name="a", work=10, param_bytes=1)]), c, 1) == 10.0
    # overlapped, 2 parameter bytes: max(10/2, 2 * (1/2) * 2 / 0.25) = max(5, 8) = 8 (without overlap 5 + 8 > 10)
    g = Graph([Op(name="a", work=10, param_bytes=2)])
    assert replicated_lower_bound(g, c, 2, "full") == 8.0
    assert replicated_lower_bound(g, c, 2) == 10.0


def test_replicated_bound_rings_over_accelerators_only():
    # two accelerators and a CPU (host): at most 2 replicas even if 3 are allowed;
    # a (work 12, 1 byte) on 2: 12/2 + 2 * (1/2) * 1 / 1 = 7; the sum 12 over 3 devices is 4
    # (3 replicas would give 4 + 2 * (2/3) = 5.33; the CPU alone as the ring, none: 12)
    g = Graph([Op(name="a", work=12, param_bytes=1)])
    assert replicated_lower_bound(g, Cluster.accelerators(2, cpus=1), 3) == 7.0


def test_replicated_bound_without_a_ring():
    # CPUs only: no accelerator to replicate on; t = (3, 1), max 3 beats the sum 4 over 2 devices
    g = Graph([Op(name="a", work=3), Op(name="b", work=1)])
    assert replicated_lower_bound(g, Cluster.accelerators(0, cpus=2), 2) == 3.0
    # two accelerators that cannot reach each other (links only to the CPU: their route bandwidth is 0)
    # form no ring: no replicas, the bound is a's 4 (with an empty ring, 2 * (1/2) * 0 / 0 would be nan)
    c = Cluster([Device(name="acc0"), Device(name="acc1"), Device(name="cpu", kind="cpu")],
                [Link(src="acc0", dst="cpu", bandwidth=1.0), Link(src="cpu", dst="acc0", bandwidth=1.0)])
    assert c.route_bandwidth[0, 1] == c.route_bandwidth[1, 0] == 0.0
    assert replicated_lower_bound(Graph([Op(name="a", work=4)]), c, 2) == 4.0


def test_replicated_bound_below_one_time_unit():
    # one op of work 0.5 on one stage: no ring, the bound is 0.5 (not the max's initial value)
    assert replicated_lower_bound(Graph([Op(name="a", work=0.5)]), Cluster.stages(1), 3) == 0.5
    # the sum binds: three ops of work 3 on 3 accelerators without parameters: each at 3/3 = 1 on
    # 3 replicas, the sum 9 over 3 devices is 3
    g = Graph([Op(name=f"v{i}", work=3) for i in range(3)])
    assert replicated_lower_bound(g, Cluster.accelerators(3), 3) == 3.0


