"""Brute force up to swaps of interchangeable devices (brute.interchangeable): one placement per orbit gives the same
optimum and the same first best placement as every placement, and devices that differ in anything the problem reads
(an attribute, a link, a pin, the pipeline order) are never swapped."""
from __future__ import annotations

import math
import random
from itertools import pairwise

import numpy as np
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from placement_dsl.brute import brute_force, interchangeable, placements
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.constraints import Colocate, Congestion, Contiguous, DagOrder, Memory, Pin
from placement_dsl.errors import InfeasibleError
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, GPipe, Latency, Makespan, PipeDream, Throughput
from placement_dsl.problem import Problem


def problem(seed: int) -> Problem:
    """Three or four ops on two to four devices of two templates one attribute apart (so often equal), without links,
    with a full mesh or a line (one link wider, or none); any objective; memory, and contiguity, DAG order,
    colocation, a pin and congestion drawn. Deterministic in ``seed``."""
    rng = random.Random(seed)
    n = rng.randint(3, 4)

    def small() -> float:
        return float(rng.randint(0, 3))

    ops = [Op(name=f"v{i}", work={"accelerator": small(), "cpu": small() * 3.0}, param_bytes=small(),
              out_bytes=small()) for i in range(n)]
    edges = [(f"v{i}", f"v{j}") for i in range(n) for j in range(i + 1, n) if rng.random() < 0.5]
    base = {"kind": rng.choice(["accelerator", "accelerator", "cpu"]), "memory": rng.choice([math.inf, 4.0]),
            "speed": rng.choice([1.0, 2.0]), "bandwidth": rng.choice([1.0, 2.0])}
    apart = rng.choice(["kind", "memory", "speed", "bandwidth"])  # the one attribute the second template changes
    other = {"kind": "cpu" if base["kind"] != "cpu" else "accelerator", "memory": 3.0, "speed": 3.0, "bandwidth": 3.0}
    templates = [base, {**base, apart: other[apart]}]
    devices = [Device(name=f"d{i}", **templates[rng.random() < 0.25]) for i in range(rng.randint(2, 4))]
    names = [d.name for d in devices]
    wiring = rng.choice(["none", "none", "mesh", "line"])
    pairs = [(a, b) for a in names for b in names if a != b] if wiring == "mesh" else \
        [p for a, b in pairwise(names) for p in ((a, b), (b, a))] if wiring == "line" else []
    wide = rng.choice([None, *pairs])  # one link wider than the others, or none
    links = [Link(src=a, dst=b, bandwidth=2.0 if (a, b) == wide else 1.0) for a, b in pairs]
    objective = rng.choice([Throughput(), Bottleneck(), Latency(), Makespan(), Latency(), Throughput(), GPipe(),
                            GPipe(microbatches=2), PipeDream()])
    terms = [Memory()] + [t for t, p in ((Contiguous(), 0.5), (DagOrder(), 0.25), (Colocate([["v0", "v1"]]), 0.25))
                          if rng.random() < p]
    if links:
        terms.append(Congestion(rng.choice(["port", "link", "channel"])))
    pin = rng.choice(names)
    if rng.random() < 0.25 and math.isfinite(ops[-1].time_on(next(d.kind for d in devices if d.name == pin))):
        terms.append(Pin(f"v{n - 1}", pin))
    return Problem(Graph(ops, edges), Cluster(devices, links), objective, terms)


def best(problem: Problem, up_to_swaps: bool) -> tuple[float, list[int] | None]:
    try:
        value, placement = brute_force(problem, up_to_swaps=up_to_swaps)
    except InfeasibleError:
        return math.inf, None
    return value, placement.assign.tolist()


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32 - 1))
def test_one_placement_per_orbit_gives_the_same_optimum_and_placement_as_all(seed):
    drawn = problem(seed)
    event(f"{type(drawn.objective).__name__}: {'swaps' if interchangeable(drawn) else 'no swaps'}")
    assert best(drawn, True) == best(drawn, False)  # bit-identical value, the same first best placement


def test_three_equal_accelerators_leave_one_placement_per_partition():
    # three ops on three equal accelerators and a CPU: 4^3 = 64 placements; up to swaps, the ops on the accelerators
    # split into at most three unlabelled blocks, sum over the ops on them of C(3, s) * Bell(s) = 1 + 3 + 6 + 5 = 15
    g = Graph([Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 3.0}) for i in range(3)], [("v0", "v1"), ("v1", "v2")])
    p = Problem(g, Cluster.accelerators(3, cpus=1), Latency(), [Memory()])
    assert interchangeable(p) == [[0, 1, 2]]
    assert len(list(placements(p))) == 64
    assert len(list(placements(p, up_to_swaps=True))) == 15


def test_what_tells_devices_apart_keeps_them_apart():
    g = Graph([Op(name=f"v{i}", work={"accelerator": 1.0, "cpu": 3.0}) for i in range(3)], [("v0", "v1"), ("v1", "v2")])
    acc3 = Cluster.accelerators(3, cpus=1)
    assert interchangeable(Problem(g, acc3, Throughput())) == [[0, 1, 2]]
    # the pipeline order, a pin, and an order-reading objective
    assert interchangeable(Problem(g, acc3, Throughput(), [DagOrder()])) == []
    assert interchangeable(Problem(g, acc3, Latency(), [Pin("v0", "acc1")])) == [[0, 2]]
    assert interchangeable(Problem(g, acc3, GPipe(microbatches=4))) == []
    # an attribute
    slow = Cluster([Device(name="a"), Device(name="b"), Device(name="c", speed=2.0)])
    assert interchangeable(Problem(g, slow, Latency())) == [[0, 1]]
    for attr, value in (("memory", 3.0), ("bandwidth", 2.0), ("kind", "cpu"), ("server", "s1")):
        apart = Cluster([Device(name="a"), Device(name="b", **{attr: value})])
        assert interchangeable(Problem(g, apart, Throughput())) == [], attr
    # links: a line a - b - c swaps its ends, not the middle; a wider link b -> c keeps every device apart
    line = [Link(src=x, dst=y, bandwidth=1.0) for x, y in (("a", "b"), ("b", "a"), ("b", "c"), ("c", "b"))]
    same = [Device(name=x) for x in "abc"]
    assert interchangeable(Problem(g, Cluster(same, line), Latency())) == [[0, 2]]
    wide = [lk if (lk.src, lk.dst) != ("b", "c") else Link(src="b", dst="c", bandwidth=2.0) for lk in line]
    assert interchangeable(Problem(g, Cluster(same, wide), Latency())) == []
    p = Problem(g, Cluster(same, wide), Latency())
    assert np.array_equal(brute_force(p)[1].assign, brute_force(p, up_to_swaps=False)[1].assign)
