"""What the latency heuristics and the latency family's closed-form levels claim holds against brute force on tiny
graphs with a host and two accelerators, where a contiguous split whose quotient has a cycle (host -> accelerator ->
host) may beat every split of the DP's class (a chain of ideals): no latency heuristic claims a class or a bound, the
DP under a latency model claims none either, and under max load it claims the DP class only."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement_dsl import Cluster, Contiguous, Latency, Memory, Problem, Throughput
from placement_dsl.brute import optimum
from placement_dsl.conformance import check_heuristic, check_level
from placement_dsl.deadline import Deadline
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.heuristics.base import DP_CLASS
from placement_dsl.heuristics.registry import methods_for
from placement_dsl.placement import PlacementClass
from placement_dsl.starts import resolve

LEVELS = ("critical-path", "route-path", "device-work", "cut-spine", "segment-path", "run-paths", "latency-lp",
          "latency")  # the latency family's default levels


def _graph(n: int, seed: int) -> Graph:
    """A random DAG of ``n`` ops, a few of them sources of a branch of their own (so cyclic quotients exist), CPU
    times 1.5-6 times the accelerators'."""
    rng = random.Random(seed)
    ops = []
    for i in range(n):
        a = round(rng.uniform(0.5, 4.0), 2)
        ops.append(Op(name=f"v{i}", work={"accelerator": a, "cpu": round(a * rng.uniform(1.5, 6), 2)},
                      param_bytes=round(rng.uniform(1, 4), 1), out_bytes=round(rng.uniform(0.1, 3.0), 2)))
    edges = {(f"v{j}", f"v{i}") for i in range(1, n) if rng.random() < 0.8
             for j in rng.sample(range(i), k=min(i, rng.randint(1, 2)))}
    return Graph(ops, sorted(edges), name=f"claims{n}s{seed}")


def _problem(g: Graph, tight: bool, objective=Latency) -> Problem:
    memory = float(g.param_bytes.sum() + g.activation_bytes.sum()) / 2.0 if tight else math.inf
    return Problem(g, Cluster.accelerators(2, memory=memory, cpus=1), objective(), [Memory(), Contiguous()])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(5, 7), seed=st.integers(0, 10_000), tight=st.booleans())
def test_the_latency_heuristics_claims_hold_against_brute_force(n, seed, tight):
    problem = _problem(_graph(n, seed), tight)
    for method in [*methods_for("latency"), "dp", "dpl", "greedy"]:
        assert check_heuristic(method, problem, time_limit=2.0) == []
        found = run(method, problem.graph, problem.cluster, model=problem.cost_model(), time_limit=2.0)
        assert found.exact_among is None and found.bound is None  # none searches the contiguous class whole


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(5, 6), seed=st.integers(0, 10_000), tight=st.booleans())
def test_the_latency_levels_bounds_hold_over_the_class_they_name(n, seed, tight):
    problem = _problem(_graph(n, seed), tight)
    for level in LEVELS:
        assert check_level(level, problem, budget=3.0) == []


def _cyclic_wins() -> tuple[Graph, float]:
    """Two branches ``a -> b`` and ``c -> d`` whose ends run best on the host and middles on one accelerator: the
    host holds ``{a, d}`` and the accelerator ``{b, c}`` (each set contiguous, the quotient host -> acc -> host a
    cycle); the DP class must give one of the ends another device or run a middle on the host."""
    ops = [Op(name="a", work={"accelerator": 5.0, "cpu": 1.0}, out_bytes=0.1),
           Op(name="b", work={"accelerator": 1.0, "cpu": 5.0}, out_bytes=0.1),
           Op(name="c", work={"accelerator": 1.0, "cpu": 5.0}, out_bytes=0.1),
           Op(name="d", work={"accelerator": 5.0, "cpu": 1.0}, out_bytes=0.1)]
    return Graph(ops, [("a", "b"), ("c", "d")], name="cyclic"), 2.2


@pytest.mark.parametrize("objective", [Throughput, Latency])
def test_a_cyclic_quotient_beats_the_dp_class_and_no_claim_covers_it(objective):
    g, _ = _cyclic_wins()
    problem = Problem(g, Cluster.accelerators(1, cpus=1), objective(), [Contiguous()])
    contiguous, dag = optimum(problem, PlacementClass.CONTIGUOUS), optimum(problem, PlacementClass.DP)
    assert contiguous < dag - 1e-9  # the class the DP searches misses the best contiguous split
    dp = run("dp", problem.graph, problem.cluster, model=problem.cost_model())
    if objective is Throughput:
        assert dp.exact_among == DP_CLASS and dp.bound == pytest.approx(dag)  # exact over its own class only
        assert resolve(problem, "dp", deadline=Deadline(10.0), keep=0.0).bound is None  # not the problem's
    else:
        assert dp.bound is None and dp.exact_among is None
    for method in methods_for("latency") if objective is Latency else ():
        found = run(method, problem.graph, problem.cluster, model=problem.cost_model(), time_limit=2.0)
        assert found.bound is None and found.exact_among is None
        assert found.objective >= contiguous - 1e-9
