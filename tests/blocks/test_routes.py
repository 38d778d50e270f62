"""Routed transfers (Tarnawski App. C.3, blocks/routes.py): the routed IP against brute force, what it charges to
accelerators and hosts, tensors between devices with no route, and its warm starts route by route.
"""
from __future__ import annotations

import itertools
import math

import pyomo.environ as pyo
import pytest

from placement_dsl.cluster import Cluster, Device, Link
from placement_dsl.compile import compile
from placement_dsl.conformance import check_documented
from placement_dsl.constraints import DagOrder
from placement_dsl.evaluate import evaluate
from placement_dsl.formulations import choose, get
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Throughput
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import brute_force
from tests.blocks.helpers import warm


def _chain(works, sizes):
    names = [f"v{i}" for i in range(len(works))]
    return Graph([Op(name=n, work=w, out_bytes=b) for n, w, b in zip(names, works, sizes)],
                 list(itertools.pairwise(names)))


def _solved_like_brute_force(problem, formulation="throughput"):
    """The IP's optimum and bound are brute force's (the bound within the MIP gap); the answer is valid."""
    best = brute_force(problem)[0]
    r = solve(problem, formulation=formulation, solver="highs", time_limit=60)
    assert r.objective == pytest.approx(best) and r.bound == pytest.approx(best, rel=1e-4)  # within the MIP gap
    assert problem.is_valid(r.placement)
    return r


# ---------------------------------------------------------------------------- blocks/routes.py
@pytest.mark.parametrize("overlap", ["none", "half", "full"])
def test_routed_throughput_ip_equals_brute_force(overlap):
    # two servers of two accelerators, 4 bytes per time unit inside a server and 0.5 between: a tensor of 1 byte
    # costs 0.25 inside and 2 across; the IP prices each tensor over its route like the cost model
    problem = Problem(_chain([4, 3, 5, 2], [2, 1, 3, 1]), Cluster.hierarchical(2, 2, intra=4.0, inter=0.5),
                      Throughput(overlap=overlap))
    _solved_like_brute_force(problem)


def _host_cluster():
    """Accelerators a0 (server s0) and a1 (server s1) and a host CPU on s0: 4 bytes per time unit inside s0,
    0.5 between the servers."""
    devices = [Device(name="a0", server="s0"), Device(name="a1", server="s1"),
               Device(name="cpu", kind="cpu", server="s0")]
    bw = {("a0", "cpu"): 4.0, ("a0", "a1"): 0.5, ("a1", "cpu"): 0.5}
    links = [Link(src=a, dst=b, bandwidth=w) for (x, y), w in bw.items() for a, b in ((x, y), (y, x))]
    return Cluster(devices, links)


def test_routed_ip_charges_accelerators_and_not_the_host():
    # u -> v -> w, 4 on an accelerator, 5 on the CPU, 2-byte tensors: the host pays no transfers, the accelerators
    # pay theirs over the route. Brute force's optimum, proved; the cut has variables for the payers only
    ops = [Op(name=n, work={"accelerator": 4, "cpu": 5}, out_bytes=2) for n in "uvw"]
    problem = Problem(Graph(ops, [("u", "v"), ("v", "w")]), _host_cluster(), Throughput())
    _solved_like_brute_force(problem)
    cut = compile(problem, "throughput").model.tensor_cut
    payers = {(u, d) for u in "uv" for d in ("a0", "a1")}  # w's tensor crosses no edge
    assert set(cut.recv) == set(cut.send) == payers


def test_routed_ip_cuts_only_tensors_with_bytes():
    # v0's tensor has no bytes: no variables for it; v1's single byte is priced like any other
    problem = Problem(_chain([4, 4, 4], [0, 1, 0]), Cluster.hierarchical(3, 1, intra=4.0, inter=0.5), Throughput())
    cut = compile(problem, "throughput").model.tensor_cut
    assert {u for u, _ in cut.recv} == {u for u, _ in cut.send} == {"v1"}
    _solved_like_brute_force(problem)  # all on one device 12; v0, v1 | v2 costs 8 + 2 = 10, the optimum


def _unreachable():
    """a0 and a1 on server s0 (4 bytes per time unit), b0 alone on s1 with no link to either."""
    devices = [Device(name="a0", server="s0"), Device(name="a1", server="s0"), Device(name="b0", server="s1")]
    return Cluster(devices, [Link(src="a0", dst="a1", bandwidth=4.0), Link(src="a1", dst="a0", bandwidth=4.0)])


def test_no_tensor_crosses_a_pair_of_devices_with_no_route():
    # u -> v, work 4 each, one byte: between b0 and s0 there is no route, so the tensor's time there is infinite
    # (the IP once priced it at 0 and answered inf with a bound of 4). The best keeps u, v on s0: 4 + 0.25
    g = Graph([Op(name="u", work=4, out_bytes=1), Op(name="v", work=4)], [("u", "v")])
    problem = Problem(g, _unreachable(), Throughput())
    assert evaluate(Placement(g, problem.cluster, [2, 1])).objective == math.inf
    r = _solved_like_brute_force(problem)
    assert r.objective == 4.25
    blocked = compile(problem, "throughput").model.tensor_cut.no_route
    assert sorted(blocked) == [("u", "v", a, b) for a, b in (("a0", "b0"), ("a1", "b0"), ("b0", "a0"), ("b0", "a1"))]
    assert blocked.doc == "no tensor between devices with no route: its time would be infinite"


def test_a_tensor_of_no_bytes_needs_no_route():
    # the same graph with an empty tensor: u on b0 and v on a1 costs 4 (not 0, not nan: nothing is sent)
    g = Graph([Op(name="u", work=4), Op(name="v", work=4)], [("u", "v")])
    problem = Problem(g, _unreachable(), Throughput())
    assert evaluate(Placement(g, problem.cluster, [2, 1])).objective == 4.0
    assert _solved_like_brute_force(problem).objective == 4.0
    assert len(compile(problem, "throughput").model.tensor_cut.no_route) == 0


def test_routed_warm_start_reads_each_route():
    # u (2 bytes) on s0g0 -> v on s1g0, w on s0g0 reading u too: v reads u over the 0.5 route (4), w nothing;
    # the writer pays its slowest route (4). The values satisfy every row and give the cost model's objective
    g = Graph([Op(name=n, work=4, out_bytes=2 if n == "u" else 0) for n in "uvw"], [("u", "v"), ("u", "w")])
    problem = Problem(g, Cluster.hierarchical(2, 1, intra=4.0, inter=0.5), Throughput())
    placement = Placement(g, problem.cluster, [0, 1, 0])
    c, values = warm(problem, "throughput", placement)
    cut, scale = c.model.tensor_cut, c.objective_scale
    got = {(k, side): values[var[k]] * scale for side, var in (("in", cut.recv), ("out", cut.send)) for k in var}
    assert got == {(("u", "s0g0"), "in"): 0.0, (("u", "s1g0"), "in"): pytest.approx(4.0),
                   (("u", "s0g0"), "out"): pytest.approx(4.0), (("u", "s1g0"), "out"): 0.0}
    assert pyo.value(c.model.max_load.bottleneck) * scale == pytest.approx(evaluate(placement).objective) == 12.0



def _warm_holds(problem, placement, formulation="throughput"):
    """The start's values satisfy every row and its bottleneck is the cost model's objective; returns the values."""
    c, values = warm(problem, formulation, placement)
    assert pyo.value(c.model.max_load.bottleneck) * c.objective_scale == pytest.approx(
        evaluate(placement, problem.cost_model()).objective)
    return c, values


def _routed_training(objective=None, terms=(), memory=math.inf):
    """f0 (2) -> f1 (2) forward with a 2-byte tensor, b1 (4) -> b0 (4) backward with an 80-byte tensor, each backward
    op with its forward mate, on two servers of two accelerators (4 bytes per time unit inside, 0.5 between)."""
    ops = [Op(name="f0", work=2, out_bytes=2, group="c0"), Op(name="f1", work=2, group="c1"),
           Op(name="b1", work=4, out_bytes=80, backward=True, group="c1"),
           Op(name="b0", work=4, backward=True, group="c0")]
    g = Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "b0")])
    return Problem(g, Cluster.hierarchical(2, 2, intra=4.0, inter=0.5, memory=memory),
                   objective or Throughput(overlap="half"), list(terms))


def test_routed_ip_prices_each_pass_with_its_own_tensors():
    # the backward tensor (80 bytes) is forty times the forward one: a split inside a server costs max(6, 0.5 + 20)
    # (half overlap), so all on one device (12) is the optimum; priced with the forward tensors only, a split would
    # look like 6. The IP and its warm starts price each pass with its own tensors, like brute force
    problem = _routed_training()
    assert _solved_like_brute_force(problem).objective == 12.0
    for assign in ([0, 1, 1, 0], [0, 2, 2, 0]):
        _warm_holds(problem, Placement(problem.graph, problem.cluster, assign))


def test_routed_warm_start_stashes_what_each_stage_reads():
    # 1F1B memory per stage counts the forward bytes the stage reads (its in-transfer times its bandwidth): f1's
    # stage on s1g0 reads f0's 2 bytes over the 0.5 route (4 time units at bandwidth 4: 16 bytes); f0's stage reads
    # nothing and writes 4. The start's stash values hold every row of the memory template
    from placement_dsl.objectives import PipeDream
    from placement_dsl.training_terms import TrainingMemory

    problem = _routed_training(PipeDream(), [TrainingMemory("1f1b")], memory=1000.0)
    warm(problem, "throughput", Placement(problem.graph, problem.cluster, [0, 2, 2, 0]))


def test_routed_warm_start_keeps_reads_and_writes_apart():
    # u (2 bytes) on s0g0 read by v on s1g0 (over 0.5: 4) and x on s0g1 (over 4: 0.5): the writer pays its slowest
    # route once (4), each reader its own; loads 1 + 4, 1 + 4 and 1 + 0.5 (no overlap)
    g = Graph([Op(name=n, work=1, out_bytes=2 if n == "u" else 0) for n in "uvx"], [("u", "v"), ("u", "x")])
    problem = Problem(g, Cluster.hierarchical(2, 2, intra=4.0, inter=0.5), Throughput())
    placement = Placement(g, problem.cluster, [0, 2, 1])
    c, _ = _warm_holds(problem, placement)
    assert evaluate(placement).objective == 5.0
    cost = c.model.device_load.device_cost
    loads = {d: pyo.value(cost[d, "total", "total"]) * c.objective_scale for d in ("s0g0", "s0g1", "s1g0")}
    assert loads == {"s0g0": pytest.approx(5.0), "s0g1": pytest.approx(1.5), "s1g0": pytest.approx(5.0)}


def test_routed_warm_start_beside_a_host_and_across_no_route():
    # beside a host CPU the start's values hold every row (the host pays nothing); a start that sends a tensor
    # between devices with no route gets finite values (0 for that tensor) and breaks only the no_route row
    ops = [Op(name=n, work={"accelerator": 4, "cpu": 5}, out_bytes=2) for n in "uvw"]
    problem = Problem(Graph(ops, [("u", "v"), ("v", "w")]), _host_cluster(), Throughput())
    _warm_holds(problem, Placement(problem.graph, problem.cluster, [2, 0, 1]))
    g = Graph([Op(name="u", work=4, out_bytes=1), Op(name="v", work=4)], [("u", "v")])
    unreachable = Problem(g, _unreachable(), Throughput())
    c = compile(unreachable, "throughput")
    values = c.varmap.values(Placement(g, unreachable.cluster, [2, 1]))
    assert values[c.model.tensor_cut.recv["u", "a1"]] == 0.0 and values[c.model.tensor_cut.send["u", "b0"]] == 0.0
    worst, where = c.varmap.residual(values)
    assert worst == pytest.approx(1.0) and "no_route" in where

def test_routed_cluster_refuses_archers_cut_before_building():
    # Archer's cut prices transfers per device: on a routed cluster 'exact' refuses with the reason, and 'auto'
    # takes the throughput IP for a DAG-ordered problem instead of failing at compile time
    problem = Problem(_chain([4, 3], [1, 0]), Cluster.hierarchical(2, 1, intra=4.0, inter=0.5), Throughput(),
                      [DagOrder()])
    assert get("exact").accepts(problem) == (
        "formulation 'exact': tensor_cut: a routed cluster needs form='commio' (Archer's DAG-ordered cut prices "
        "transfers per device, not per route)")
    assert choose(problem) == "throughput"
    assert choose(Problem(problem.graph, Cluster.stages(2), Throughput(), [DagOrder()])) == "exact"


def test_every_component_of_the_routed_cut_is_documented():
    problem = Problem(Graph([Op(name=n, work={"accelerator": 4, "cpu": 5}, out_bytes=1) for n in "uv"],
                            [("u", "v")]), _unreachable(), Throughput())
    model = compile(problem, "throughput").model
    assert check_documented(model.tensor_cut) == []
    assert {"recv", "send", "route_in", "route_out", "no_route"} <= {c.local_name for c in model.tensor_cut.component_objects()}


def test_certify_proves_a_dag_ordered_problem_on_a_routed_cluster_with_the_throughput_ip():
    # Archer's levels cannot write a routed cluster; the throughput IP (with its DAG-order rows) proves the optimum
    # where the simple bound alone left 5 against 7.25
    from placement_dsl.certify import certify, default_levels

    problem = Problem(_chain([4, 3, 5, 2], [2, 1, 3, 1]), Cluster.hierarchical(2, 2, intra=4.0, inter=0.5),
                      Throughput(), [DagOrder()])
    assert default_levels(problem) == ("simple", "capacity", "dp", "throughput")
    cert = certify(problem, budget=60)
    assert cert.objective == pytest.approx(brute_force(problem)[0]) == 7.25
    assert cert.bound == pytest.approx(7.25, rel=1e-4) and cert.proved_by == "throughput"




def test_links_that_reach_no_device_keep_tensors_off_the_pairs_they_do_not_join():
    """Links declared between a0 and a1 only (no servers): no tensor reaches a2. The cost model priced no link for
    a tensor sent there and called a 3-stage chain valid; the IP let it cross for free."""
    g = _chain([3, 3, 3], [1.0, 1.0, 0.0])
    links = [Link(src=a, dst=b, bandwidth=1.0) for a, b in (("a0", "a1"), ("a1", "a0"))]
    cluster = Cluster([Device(name=f"a{i}", bandwidth=1.0) for i in range(3)], links)
    problem = Problem(g, cluster, Throughput())
    ev = evaluate(Placement(g, cluster, [0, 1, 2]))
    assert not ev.valid and any("no route from device 'a1' to 'a2'" in v.message for v in ev.violations)
    r = _solved_like_brute_force(problem)
    assert 2 not in set(r.placement.assign[:2].tolist()) and r.objective == 7.0  # v0 | v1 v2 on a0 | a1: 3 + 1 | 6 + 1
    assert ("v1", "a1", "a2", "v2") in set(compile(problem, "throughput").model.link_loads.no_route)
