"""The single-sample family composes: every objective name (latency, makespan) with every constraint term on every
kind of cluster either answers the brute-force optimum or is refused with a SpecError naming the term.

The clusters: identical accelerators and accelerators with a CPU (no links: the accelerators run invocations,
Tarnawski's restriction; the CPU runs ops in parallel), heterogeneous devices on a line of links with a declared
two-hop route, and a hierarchical cluster (links: devices run one op at a time with transfer tasks, MOIRAI's
model). The brute force and the referee see every term (pins, colocation and allowed kinds choose the placements,
the cost model checks memory, contiguity and subgraphs, and schedules under the congestion mode), so a term the
solve ignored would show as an answer below or above the optimum.
"""
from __future__ import annotations

import functools
import itertools

import pytest

from placement_dsl.brute import placements
from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.constraints import Colocate, Congestion, Contiguous, Memory, Pin, Subgraphs
from placement_dsl.errors import InfeasibleError, SpecError
from placement_dsl.evaluate import evaluate, execution
from placement_dsl.graph import Graph, Op
from placement_dsl.heuristics import run
from placement_dsl.objectives import Latency, Makespan
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import optimum

TOL = 1e-6


def diamond() -> Graph:
    """``a -> (b, c) -> d`` with tensors, parameters and a CPU that is slower on b and c."""
    ops = [Op(name="a", work={"accelerator": 2, "cpu": 3}, out_bytes=2, param_bytes=1),
           Op(name="b", work={"accelerator": 3, "cpu": 6}, out_bytes=1, param_bytes=2),
           Op(name="c", work={"accelerator": 3, "cpu": 5}, out_bytes=1, param_bytes=2),
           Op(name="d", work={"accelerator": 1, "cpu": 2}, param_bytes=1)]
    return Graph(ops, [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")], name="diamond")


def heterogeneous() -> Cluster:
    """A fast and a slow accelerator and a CPU on a line ``fast - slow - cpu``; ``fast -> cpu`` declared over the
    slow accelerator (two hops, each with latency)."""
    devices = [Device(name="fast", speed=2.0, memory=4.0), Device(name="slow", memory=4.0),
               Device(name="cpu", kind="cpu")]
    links = [Link(src=a, dst=b, bandwidth=2.0, latency=0.5) for a, b in
             (("fast", "slow"), ("slow", "fast"), ("slow", "cpu"), ("cpu", "slow"))]
    return Cluster(devices, links, routes={("fast", "cpu"): ["fast", "slow", "cpu"],
                                           ("cpu", "fast"): ["cpu", "slow", "fast"]})


CLUSTERS = {
    "identical": lambda: Cluster.accelerators(2, memory=4.0),
    "accelerators+cpu": lambda: Cluster.accelerators(2, memory=4.0, cpus=1),
    "heterogeneous-links": heterogeneous,
    "hierarchical": lambda: Cluster.hierarchical(2, 2, intra=4.0, inter=1.0, memory=4.0),
}

TERMS = {
    "none": lambda c: [],
    "memory": lambda c: [Memory()],  # 6 bytes of parameters, 4 per device: at least two devices
    "contiguous": lambda c: [Contiguous()],
    "colocate": lambda c: [Colocate([["b", "c"]])],
    "pin": lambda c: [Pin("b", c.names[1])],
    "subgraphs": lambda c: [Subgraphs(1)],
    "congestion-port": lambda c: [Congestion("port")],
    "congestion-channel": lambda c: [Congestion("channel")],
    "congestion-link": lambda c: [Congestion("link")],
    "congestion-none": lambda c: [Congestion(None)],
}

OBJECTIVES = {"latency": Latency, "makespan": Makespan}


def problem(objective: str, term: str, cluster: str) -> Problem:
    c = CLUSTERS[cluster]()
    return Problem(diamond(), c, OBJECTIVES[objective](), TERMS[term](c))


def _term_names(p: Problem) -> list[str]:
    return [type(t).__name__ for t in p.constraints]


@functools.cache
def best(term: str, cluster: str) -> float:
    """The brute-force optimum (``inf`` when no placement is valid), once per term and cluster: both names score
    every placement alike (:func:`test_both_names_are_one_objective`)."""
    return optimum(problem("latency", term, cluster))


@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
@pytest.mark.parametrize("term", sorted(TERMS))
def test_both_names_are_one_objective(term, cluster):
    """Latency and makespan score every placement alike: one referee, one cost model up to the name."""
    lat, mk = problem("latency", term, cluster), problem("makespan", term, cluster)
    assert lat.cost_model().congestion == mk.cost_model().congestion
    assert lat.cost_model().require == mk.cost_model().require
    for k, placement in enumerate(placements(lat)):
        if k % 7 == 0:  # a sample of the placements (the IP test below meets every case's optimum)
            a, b = lat.evaluate(placement), mk.evaluate(placement)
            assert (a.objective, a.valid, lat.violations(placement)) == (b.objective, b.valid, mk.violations(placement))


def _ip(p: Problem):
    """The IP of the problem's formulation ("auto"), or the SpecError refusing it."""
    try:
        return solve(p, time_limit=8, warm_start="one-device"), None
    except SpecError as err:
        return None, err


# every term on every cluster once, the two names taking turns (both score alike: test_both_names_are_one_objective)
CASES = [(("latency", "makespan")[i % 2], term, cluster)
         for i, (term, cluster) in enumerate(itertools.product(sorted(TERMS), sorted(CLUSTERS)))]


@pytest.mark.parametrize("objective, term, cluster", CASES)
def test_the_ip_answers_the_brute_force_optimum_or_refuses_naming_the_term(objective, term, cluster):
    p = problem(objective, term, cluster)
    optimum = best(term, cluster)
    result, refusal = _ip(p)
    if refusal is not None:
        names = _term_names(p)
        assert any(name in str(refusal) for name in names), refusal
        assert "\n" not in str(refusal)
        return
    assert result.placement is not None and p.is_valid(result.placement), p.violations(result.placement)
    assert evaluate(p._rebased(result.placement), p.cost_model()).objective == pytest.approx(result.objective)
    if result.status.value == "optimal":
        if execution(p.cluster) == "invocations":  # the placement fixes the schedule: brute force is exact
            assert result.objective == pytest.approx(optimum, rel=TOL)
        else:  # brute force scores each placement's list schedule (an upper bound); the MILP chooses the schedule too
            assert result.objective <= optimum * (1 + TOL)
    assert result.bound is None or result.bound <= result.objective * (1 + TOL)


@pytest.mark.parametrize("cluster", sorted(CLUSTERS))
@pytest.mark.parametrize("term", sorted(TERMS))
def test_the_family_heuristics_answer_valid_placements_no_better_than_the_optimum(term, cluster):
    p = problem("latency", term, cluster)
    optimum = best(term, cluster)
    model = p.cost_model()
    for method in ("latency-best", "list"):
        try:
            found = run(method, p.graph, p.cluster, model=model, time_limit=0.5)
        except (SpecError, InfeasibleError):
            continue  # the method does not take the problem: a reason, never a wrong answer
        placement = Placement(p.graph, p.cluster, found.placement.assign, schedule=found.placement.schedule)
        ev = p.evaluate(placement)
        assert ev.objective == pytest.approx(found.objective, rel=1e-9)
        if p.is_valid(placement) and execution(p.cluster) == "invocations":
            assert ev.objective >= optimum * (1 - TOL)


def test_a_cluster_mixing_invocations_and_ops_is_refused_naming_its_devices():
    c = Cluster([Device(name="inv", invocations=True), Device(name="ops", invocations=False)])
    p = Placement(diamond(), c, [0, 0, 1, 1])
    with pytest.raises(SpecError, match=r"devices \['inv'\] run invocations .* devices \['ops'\] run one op"):
        evaluate(p, "latency")


def test_makespan_is_latency_under_its_papers_name():
    assert issubclass(Makespan, Latency) and Makespan().names == ("makespan",)
    assert Makespan().cost_model().name == "makespan"
    assert Problem.from_dict(Problem(diamond(), Cluster.accelerators(2), Makespan()).to_dict()).objective == Makespan()


def test_host_cpus_run_ops_in_parallel_in_both_models():
    """Two independent ops on one CPU: at once whether the accelerators run invocations or ops one at a time."""
    g = Graph([Op(name="x", work={"cpu": 3}), Op(name="y", work={"cpu": 3})], [])
    flat = Cluster.accelerators(1, cpus=1)
    linked = Cluster([Device(name="acc0"), Device(name="cpu0", kind="cpu")],
                     [Link(src="acc0", dst="cpu0", bandwidth=1.0), Link(src="cpu0", dst="acc0", bandwidth=1.0)])
    for c in (flat, linked):
        for name in ("latency", "makespan"):
            assert evaluate(Placement(g, c, [1, 1]), name).objective == 3.0


def test_the_gantt_bars_follow_the_devices_not_the_name():
    from placement_dsl.evaluate import CostModel
    from placement_dsl.viz.single_sample import bars

    flat = Placement(diamond(), Cluster.accelerators(2), [0, 0, 1, 0])
    linked = Placement(diamond(), heterogeneous(), [0, 0, 1, 0])
    for name in ("latency", "makespan"):
        assert {b.label for b in bars(flat, CostModel.named(name))} >= {"acc0#1", "acc1#1"}  # invocations
        assert {b.label for b in bars(linked, CostModel.named(name)) if not b.transfer} == {"a", "b", "c", "d"}


def test_a_model_is_sized_by_the_formulation_that_writes_it_whatever_the_name():
    from placement_dsl.formulations import get
    from placement_dsl.sizing import build_seconds, estimate_nonzeros, resources, unordered_pairs

    n, m, D = 4, 4, 4
    for name in ("latency", "makespan"):
        p = problem(name, "none", "hierarchical")
        ops, tasks = unordered_pairs(p.graph, p.cluster)  # MOIRAI's MILP: its disjunctive pairs
        assert estimate_nonzeros(p, get("schedule")) == 12.0 * (n + m) * D + 4.0 * D * ops + 10.0 * resources(p) * tasks
        assert build_seconds(p, get("schedule")) != build_seconds(p, get("latency"))
