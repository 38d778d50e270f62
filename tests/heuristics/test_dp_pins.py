"""The DP over ideals honours pins: a device some op is pinned to is a class of its own and a stage holding a pinned
op goes to its device only, so a pinned problem gets the DP's exact answer and its bound over the DP class that keeps
the pins (before, the DP placed the stage on the first device of its class and claimed nothing)."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_dsl import Cluster, Memory, Pin, Problem, Throughput
from placement_dsl.brute import optimum
from placement_dsl.errors import InfeasibleError
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.base import DP_CLASS
from placement_dsl.heuristics.ideal_lattice import device_classes
from placement_dsl.placement import PlacementClass

TOL = 1e-9


def _graph(n: int, seed: int, zero: bool = False) -> Graph:
    """A random DAG of ``n`` ops (some of zero work when ``zero``), each with a CPU time."""
    rng = random.Random(seed)
    ops = []
    for i in range(n):
        a = 0.0 if zero and rng.random() < 0.3 else round(rng.uniform(0.5, 4.0), 2)
        ops.append(Op(name=f"v{i}", work={"accelerator": a, "cpu": round(a * rng.uniform(1.5, 4), 2)},
                      param_bytes=round(rng.uniform(1, 4), 1), out_bytes=round(rng.uniform(0.1, 2.0), 2)))
    edges = [(f"v{j}", f"v{i}") for i in range(1, n) for j in rng.sample(range(i), k=min(i, rng.randint(1, 2)))]
    return Graph(ops, sorted(set(edges)), name=f"pins{n}s{seed}")


def test_a_pinned_device_is_a_class_of_its_own_banning_the_ops_pinned_elsewhere():
    c = Cluster.accelerators(3, cpus=1)
    assert [cls.devices for cls in device_classes(c)] == [(0, 1, 2), (3,)]
    classes = device_classes(c, {0: "acc1", 4: "cpu0"})
    assert sorted(cls.devices for cls in classes) == [(0, 2), (1,), (3,)]
    banned = {cls.devices: cls.banned for cls in classes}
    assert banned[(1,)] == (4,) and banned[(3,)] == (0,) and banned[(0, 2)] == (0, 4)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(5, 7), seed=st.integers(0, 10_000), cpus=st.integers(0, 1), pins=st.integers(1, 2),
       zero=st.booleans(), tight=st.booleans())
def test_the_dp_is_exact_over_its_class_with_pins(n, seed, cpus, pins, zero, tight):
    g = _graph(n, seed, zero)
    rng = random.Random(seed + 1)
    memory = (float(g.param_bytes.sum() + g.activation_bytes.sum()) / 2.0) if tight else math.inf
    c = Cluster.accelerators(2, memory=memory, cpus=cpus)
    chosen = rng.sample(range(n), pins)
    terms = [Memory()] + [Pin(f"v{i}", rng.choice(c.names)) for i in chosen]
    problem = Problem(g, c, Throughput(), terms)
    best = optimum(problem, PlacementClass.DP)
    if not math.isfinite(best):  # no split of the class keeps the pins and fits: the DP finds none either
        with pytest.raises(InfeasibleError, match="pins"):
            run("dp", problem.graph, problem.cluster, model=problem.cost_model())
        return
    res = run("dp", problem.graph, problem.cluster, model=problem.cost_model())
    assert not problem.violations(res.placement), problem.violations(res.placement)
    assert problem.class_of(res.placement) in PlacementClass.DP
    assert res.exact_among == DP_CLASS and res.bound is not None and "pins" not in res.info
    assert res.objective == pytest.approx(best, rel=TOL, abs=TOL)
    assert res.bound <= best * (1 + TOL) + TOL


def test_a_binding_pin_moves_the_answer_and_keeps_the_bound():
    """Unpinned, the DP's split puts a heavy op first on acc0; pinned to acc1 it must go there, and the class optimum
    with the pin (brute force) is what the DP answers and proves."""
    g = Graph([Op(name=f"v{i}", work=w, out_bytes=1.0) for i, w in enumerate((4.0, 1.0, 1.0, 4.0, 1.0))],
              [(f"v{i}", f"v{i + 1}") for i in range(4)])
    c = Cluster.accelerators(3)
    free = run("dp", g, c)
    on = c.names[int(free.placement.assign[3])]
    other = next(d for d in c.names if d != on)
    problem = Problem(g, c, Throughput(), [Pin("v3", other), Pin("v0", on)])
    res = run("dp", problem.graph, problem.cluster, model=problem.cost_model())
    assert not problem.violations(res.placement)
    assert res.bound == pytest.approx(optimum(problem, PlacementClass.DP)) == pytest.approx(res.objective)
