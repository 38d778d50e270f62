"""Tarnawski et al.'s latency IP (NeurIPS 2020, §4, Fig. 3; §4.1, Fig. 4): ``formulation="latency"``.

Every optimum is checked against brute force over all placements scored by the cost model
(:func:`placement_dsl.testing.brute_force`), with HiGHS and SCIP, for one subgraph per accelerator
(Fig. 3), two (Fig. 4) and no limit.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import re

import numpy as np
import pytest

from placement_dsl.blocks.base import Context
from placement_dsl.blocks.latency import InvocationTimes, LatencyAssignment, LatencyObjective, SubgraphSlots
from placement_dsl.blocks.latency_cuts import DeviceOrder, PathCuts, RunFlows
from placement_dsl.blocks.latency_data import bounds, first_use_order, levels, run_path_bound, serial_bound
from placement_dsl.certificate import model_bound
from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.conformance import check_documented
from placement_dsl.constraints import Contiguous, Memory, Pin, Subgraphs, subgraph_counts
from placement_dsl.errors import SpecError
from placement_dsl.evaluate import CostModel, Objective, evaluate
from placement_dsl.formulations import choose, get
from placement_dsl.formulations.latency import LatencyHint, hinted, subgraphs_per_accelerator
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Latency, Throughput, objective_named
from placement_dsl.placement import PlacementClass
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import available_solvers
from placement_dsl.solvers.matrix import extract
from placement_dsl.testing import brute_force, placements
from placement_dsl.testing import host_op as op

SOLVERS = [s for s in ("highs", "scip") if s in available_solvers()]
LIMITS = {"q1": [Subgraphs(1)], "q2": [Subgraphs(2)], "all": [], "contiguous": [Contiguous()]}
# the solves below start from a heuristic by name: "auto" searches for 30 % of the limit (about 17 s of a 60 s one)
# however small the graph, and these tests ask the IP for the optimum, not the start (tests/solve/test_starts.py's)
START = "greedy"


def chain_cpu() -> tuple[Graph, Cluster]:
    """Four ops in a chain; two fit on an accelerator, the CPU runs them 3x slower."""
    g = Graph([op("a", 2, 6, mem=4), op("b", 3, 9, mem=4), op("c", 1, 3, mem=4), op("d", 2, 6, out=0, mem=4)],
              [("a", "b"), ("b", "c"), ("c", "d")], name="chain_cpu")
    return g, Cluster.accelerators(2, memory=8.0, cpus=1)


def diamond() -> tuple[Graph, Cluster]:
    """Two heavy branches: apart on two accelerators they run in parallel."""
    g = Graph([op("s", 1, 2), op("l", 5, 20), op("r", 5, 20), op("t", 1, 2, out=0)],
              [("s", "l"), ("s", "r"), ("l", "t"), ("r", "t")], name="diamond")
    return g, Cluster.accelerators(2, memory=math.inf, cpus=1)


def detour() -> tuple[Graph, Cluster]:
    """``p -> h -> r``: ``p`` and ``r`` fit on the accelerator together, ``h`` only without them.

    With two subgraphs per accelerator ``{p}`` and ``{r}`` run there and ``h`` on the CPU: 1 + 1
    (write) + 1 (CPU) + 1 (read) + 1 = 5; with one subgraph one of them runs 10 on the CPU.
    """
    g = Graph([op("p", 1, 10, mem=4), op("h", 1, 1, mem=5), op("r", 1, 10, out=0, mem=4)],
              [("p", "h"), ("h", "r")], name="detour")
    return g, Cluster.accelerators(1, memory=10.0, cpus=1)


def fork() -> tuple[Graph, Cluster]:
    """A fan-out with a zero-time, zero-byte source and a skip edge, on three identical accelerators and two CPUs."""
    g = Graph([op("in", 0, 0, out=0), op("x", 2, 5, mem=3), op("y", 2, 5, mem=3), op("z", 3, 4, mem=3),
               op("o", 1, 2, out=0, mem=3)],
              [("in", "x"), ("in", "y"), ("x", "z"), ("y", "z"), ("in", "o"), ("z", "o")], name="fork")
    return g, Cluster.accelerators(3, memory=6.0, cpus=2)


INSTANCES = {"chain_cpu": chain_cpu, "diamond": diamond, "detour": detour, "fork": fork}


def problem(instance: str, limit: str) -> Problem:
    g, c = INSTANCES[instance]()
    memory = [Memory()] if np.isfinite(c.memory).any() else []
    return Problem(g, c, Latency(), [*memory, *LIMITS[limit]])


@functools.cache
def _scored(instance: str) -> tuple:
    """Every placement of ``instance`` with its latency and the cost-model checks it fails, evaluated once: the
    limits only add checks (the cost is the same), so each limit's brute force is a filter of this one pass
    (the fork's 3,125 latency evaluations took half a minute per limit)."""
    p = problem(instance, "all")
    model = p.cost_model()
    return tuple((pl, ev.objective, frozenset(v.check for v in ev.violations))
                 for pl in placements(p) for ev in [evaluate(pl, model)])


def _valid_scored(instance: str, limit: str):
    """``(placement, latency)`` of every placement valid under ``limit`` (what ``Problem.is_valid`` accepts)."""
    p, base = problem(instance, limit), problem(instance, "all")
    model, base_model = p.cost_model(), base.cost_model()
    assert dataclasses.replace(model, require=frozenset()) == dataclasses.replace(base_model, require=frozenset())
    for pl, objective, failed in _scored(instance):
        if not failed & model.require and not any(t.check(pl) for t in p.constraints):
            yield pl, objective


@functools.cache
def optimum(instance: str, limit: str) -> float:
    return min(objective for _, objective in _valid_scored(instance, limit))


@functools.cache
def valid_placements(instance: str, limit: str) -> tuple:
    return tuple(pl for pl, _ in _valid_scored(instance, limit))


@pytest.mark.parametrize("limit", sorted(LIMITS))
@pytest.mark.parametrize("instance", ["chain_cpu", "detour", "diamond"])
def test_the_one_pass_reference_is_brute_force(instance, limit):
    """The optimum and the valid placements every test here compares with are brute force's and ``is_valid``'s."""
    p = problem(instance, limit)
    assert optimum(instance, limit) == brute_force(p)[0]
    valid = [pl.assign.tolist() for pl in placements(p) if p.is_valid(pl)]
    assert [pl.assign.tolist() for pl in valid_placements(instance, limit)] == valid


# ---------------------------------------------------------------------------- terms
def test_latency_term_names_the_invocation_cost_model():
    term = objective_named("latency")
    assert isinstance(term, Latency) and term.cost_model() == CostModel.named("latency")
    assert term.cost_model().objective is Objective.LATENCY and not term.bounds_max_load


@pytest.mark.parametrize("q", [0, -1, 1.5, True, "2"])
def test_subgraphs_needs_a_whole_number_at_least_one(q):
    with pytest.raises(SpecError, match="Subgraphs"):
        Subgraphs(q)


def test_subgraphs_check_counts_the_cost_models_contiguous_pieces():
    p = problem("detour", "q1")
    split = p.placement([0, 1, 0])  # p and r on acc0 around h on the CPU: two subgraphs
    assert subgraph_counts(split) == {"acc0": 2}
    assert any("2 contiguous subgraphs" in v for v in p.violations(split))
    assert problem("detour", "q2").violations(split) == []


def test_auto_chooses_the_latency_ip_and_other_objectives_are_refused():
    p = problem("diamond", "q1")
    assert choose(p) == "latency"
    g, c = diamond()
    other = Problem(g, c, Throughput(), [])
    assert choose(other) != "latency"
    assert "latency" in get("latency").accepts(other)
    with pytest.raises(SpecError, match="single-sample latency"):
        solve(other, formulation="latency")


def test_q_comes_from_the_problem():
    assert subgraphs_per_accelerator(problem("detour", "q1")) == 1
    assert subgraphs_per_accelerator(problem("detour", "contiguous")) == 1
    assert subgraphs_per_accelerator(problem("fork", "q2")) == 2
    assert subgraphs_per_accelerator(problem("detour", "all")) == 2  # ceil(3 ops on the longest path / 2)
    assert get("latency").placement_class(problem("detour", "q1")) is PlacementClass.ALL  # Subgraphs(1) is the problem's
    assert get("latency").placement_class(problem("detour", "contiguous")) is PlacementClass.CONTIGUOUS
    assert get("latency").placement_class(problem("detour", "all")) is PlacementClass.ALL


# ---------------------------------------------------------------------------- optimum = brute force
@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("limit", sorted(LIMITS))
@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_optimum_is_the_brute_force_optimum(instance, limit, solver):
    p, best = problem(instance, limit), optimum(instance, limit)
    result = solve(p, formulation="latency", solver=solver, time_limit=60, warm_start=START)
    assert result.status.value == "optimal"
    assert result.objective == pytest.approx(best, rel=1e-6)
    assert result.bound == pytest.approx(best, rel=1e-4)
    assert p.is_valid(result.placement)


# Fig. 3 / Fig. 4 as the paper writes them: the times and the objective without the cuts of latency_cuts
PLAIN = get("latency").derive("latency-plain", rules={Latency: lambda term, p: [InvocationTimes(), LatencyObjective()]},
                              doc="the latency IP without its longest-path and run-flow cuts")


@pytest.mark.parametrize("limit", sorted(LIMITS))
@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_the_ip_without_its_cuts_reaches_the_brute_force_optimum(instance, limit):
    """On these instances the cuts alone bound TotalLatency at the optimum, so the full IP's tests cannot see a
    broken row of Fig. 3 / 4 (a write priced at nothing, say): solved without them it must still be exact."""
    p, best = problem(instance, limit), optimum(instance, limit)
    result = solve(p, formulation=PLAIN, solver="highs", time_limit=60, warm_start=START)
    assert result.status.value == "optimal"
    assert (result.objective, result.bound) == (pytest.approx(best, rel=1e-6), pytest.approx(best, rel=1e-4))


# the longest-path cuts without the run flows, which otherwise dominate the LP bound on the paths both cover
PATH_CUTS = get("latency").derive(
    "latency-path-cuts", rules={Latency: lambda term, p: [InvocationTimes(), PathCuts(), LatencyObjective()]},
    doc="the latency IP with its longest-path cuts and without its run flows")


def test_the_longest_path_rows_carry_a_path_no_span_covers():
    """``s -> a1, a2 -> h -> b1, b2``: a1 and b1 take 2 on the accelerator and 100 on the CPU and fill the accelerator
    alone; h runs on the CPU only, and a1's and h's tensors take 5 to move. The longest path through each op by
    fastest times takes a2 or b2, so no span (and no run flow) covers ``a1 -> h -> b1``; only the rows
    ``done_v >= done_u + t_v(x) + moves`` do. There a1 writes (``leave >= x_a1``) and b1 reads (``enter >= x_b1``),
    so the LP pays ``201 - 93 (x_a1 + x_b1) >= 108``, the optimum (one of a1, b1 on the CPU). Without the rows'
    moves it reads 103."""
    g = Graph([op("s", 0, 0, out=0), op("a1", 2, 100, out=5, mem=4), op("a2", 3, 3, out=0), op("h", None, 1, out=5),
               op("b1", 2, 100, out=0, mem=4), op("b2", 3, 3, out=0)],
              [("s", "a1"), ("s", "a2"), ("a1", "h"), ("a2", "h"), ("h", "b1"), ("h", "b2")])
    p = Problem(g, Cluster.accelerators(1, memory=4.0, cpus=1), Latency(), [Memory()])
    assert brute_force(p)[0] == 108.0
    for formulation in ("latency", PATH_CUTS):
        assert model_bound(p, formulation, "highs", 60, lp=True)[0] == pytest.approx(108.0)


def test_a_span_reads_the_side_inputs_of_its_path():
    """``p1 -> p2 -> v`` (10, 10, then 1 on the accelerator and 1000 on the CPU) with a side input from ``w``, which
    runs on the CPU only and sends 5 bytes: ``v``'s slot reads them, so the span of that path is 10 + 10 + 1 + 5 in
    the LP of the path cuts alone (21 if the span left the side input out); the optimum is 26 too."""
    g = Graph([op("w", None, 1, out=5), op("p1", 10, 10, out=0), op("p2", 10, 10, out=0), op("v", 1, 1000, out=0)],
              [("p1", "p2"), ("p2", "v"), ("w", "v")])  # (w first: an op's index is not its place on the path)
    p = Problem(g, Cluster.accelerators(1, cpus=1), Latency(), [])
    assert brute_force(p)[0] == 26.0
    assert model_bound(p, PATH_CUTS, "highs", 60, lp=True)[0] == pytest.approx(26.0)


def test_run_flows_stay_between_zero_and_one():
    """A chain of four on one accelerator that holds three, with p1 cheap on the CPU: the LP of the whole IP is
    tight at 16 (p0 on the accelerator, p1 on the CPU between two runs, p2 and p3 back on it). A flow below zero
    on a short run would let two overlapping runs stand in for one run of all four ops, which does not fit and
    moves nothing in between: 14.5."""
    spec = [("p0", 3, 11, 2), ("p1", 1, 6, 2), ("p2", 1, 9, 2), ("p3", 2, 13, 0)]
    g = Graph([op(n, a, c, out=o, mem=4) for n, a, c, o in spec], [("p0", "p1"), ("p1", "p2"), ("p2", "p3")])
    p = Problem(g, Cluster.accelerators(1, memory=12.0, cpus=1), Latency(), [Memory()])
    assert brute_force(p)[0] == 16.0
    assert model_bound(p, "latency", "highs", 60, lp=True)[0] == pytest.approx(16.0)


def test_a_slot_holds_each_op_once_and_an_accelerator_runs_its_slots_in_turn():
    """``v1 -> v2 -> v3`` and a lone ``v0`` on one accelerator and a CPU, two subgraphs: the optimum is 13 (v0 on the
    CPU beside the chain). In integer solutions "an op lies in exactly one of its slots" and "slot j starts after
    slot j - 1" follow from the other rows (a level-2 op is reached from slot 1 through the CPU), but the LP needs
    them: the plain IP's LP reads 9.27 with both, 8.09 without the second and 8 without the first; with the cuts
    10.38, 10.32 and 10. (A random search over 1500 small instances found these; three independent ops do not
    show either row.)"""
    g = Graph([op("v1", 1, 19, out=5), op("v2", 6, 24, out=2), op("v3", 7, 1, out=5), op("v0", 7, 13, out=0)],
              [("v1", "v2"), ("v2", "v3")])
    p = Problem(g, Cluster.accelerators(1, cpus=1), Latency(), [Subgraphs(2)])
    assert brute_force(p)[0] == 13.0
    assert model_bound(p, PLAIN, "highs", 60, lp=True)[0] == pytest.approx(9.2743091, rel=1e-6)
    assert model_bound(p, "latency", "highs", 60, lp=True)[0] == pytest.approx(10.3782, rel=1e-4)


@pytest.mark.parametrize("template, link", [(PathCuts, "PathLink"), (RunFlows, "RunLink")])
def test_a_second_provider_of_the_cuts_links_is_named(template, link):
    extra = template(horizon=1000.0)  # not the rule's template(horizon=None), which a formulation would keep once
    extra.name = "second_" + template.name  # a block of its own: only the links collide
    base = get("latency")
    twice = base.derive("twice", skeleton=lambda p: [*base.skeleton(p), extra])
    first, second = repr(template()), repr(extra)
    with pytest.raises(SpecError, match=rf"^formulation: {re.escape(first)} provides {link}, which "
                                        rf"{re.escape(second)} already provides; keep one of them$"):
        compile(problem("fork", "all"), twice)


def test_one_subgraph_per_accelerator_is_the_default_and_prices_its_transfers_by_the_tensor_cut():
    assert repr(SubgraphSlots()) == "SubgraphSlots(q=1)"
    base = get("latency")
    for q, needs in ((1, True), (2, False)):  # q > 1 prices each slot's own CommIn/CommOut
        bare = base.derive(f"bare-q{q}", skeleton=lambda p, q=q: [LatencyAssignment(), SubgraphSlots(q)])
        if needs:
            with pytest.raises(SpecError, match=r"^formulation: template SubgraphSlots\(q=1\) needs "
                                                r"\['TransferLink'\]"):
                compile(problem("fork", "q1"), bare)
        else:
            assert compile(problem("fork", "q2"), bare).model.subgraphs.s


@pytest.mark.parametrize("limit", sorted(LIMITS))
def test_every_component_of_the_latency_ip_is_documented(limit):
    assert check_documented(compile(problem("fork", limit), "latency").model) == []


def _proven(p: Problem, best: float, formulations=("latency",), **options) -> list:
    """Brute force's optimum of ``p`` is ``best``, and every formulation proves it (optimal, bound tight) with HiGHS;
    their results."""
    assert brute_force(p)[0] == best
    options.setdefault("warm_start", START)
    results = [solve(p, formulation=f, solver="highs", time_limit=60, **options) for f in formulations]
    for result in results:
        assert (result.status.value, result.objective, result.bound) == ("optimal", best, pytest.approx(best))
    return results


def test_zero_time_ops_cannot_slip_a_third_subgraph_into_two_slots():
    """p2 and p3 take no time on the accelerator and send nothing, with a CPU op between them: in slot 2 together
    their timing rows close a cycle of length 0, so only Fig. 4's row "no edge enters past level q" keeps the
    third subgraph out. Under Subgraphs(2) one accelerator op moves to the CPU: 11, where three subgraphs give 3."""
    g = Graph([op("p1", 1, 10), op("h1", None, 1, out=0), op("p2", 0, 10, out=0), op("h2", None, 0, out=0),
               op("p3", 0, 10, out=0)],
              [("p1", "h1"), ("h1", "p2"), ("p2", "h2"), ("h2", "p3")])
    for terms, best in (([], 3.0), ([Subgraphs(2)], 11.0)):
        _proven(Problem(g, Cluster.accelerators(1, cpus=1), Latency(), terms), best)


def test_zero_time_ops_cannot_share_one_subgraph_around_a_cpu_op():
    """p1 and p2 take no time on the accelerator and send nothing, with a CPU-only op between them: one slot holding
    both closes a timing cycle of length 0, so only Lemma 4.1's rows (11)-(13) keep the accelerator's set contiguous.
    Under Subgraphs(1) one of them runs on the CPU: 10, where two subgraphs give 0."""
    g = Graph([op("p1", 0, 10, out=0), op("h", None, 0, out=0), op("p2", 0, 10, out=0)], [("p1", "h"), ("h", "p2")])
    for terms, best in (([], 0.0), ([Subgraphs(1)], 10.0)):
        [result] = _proven(Problem(g, Cluster.accelerators(1, cpus=1), Latency(), terms), best, warm_start="greedy")
        if not terms:  # greedy's split (two subgraphs) is then valid: its TotalLatency, 0, is its latency
            assert result.start_accepted is True


def test_a_tensor_enters_a_slot_only_on_the_device_its_consumer_runs_on():
    # each entry of a tensor into a slot of device a has its row "enter <= x(consumer, a)"
    from pyomo.repn import generate_standard_repn

    compiled = compile(problem("detour", "all"), "latency")
    slots, _ = compiled.varmap.block("subgraphs")
    assert len(slots.enter) > 0 and len(slots.enter_v) == len(slots.enter)
    for (u, v, a, j), row in slots.enter_v.items():
        repn = generate_standard_repn(row.body)
        names = {var.name: coef for var, coef in zip(repn.linear_vars, repn.linear_coefs)}
        assert names[slots.enter[u, v, a, j].name] == 1 and row.upper == 0 and len(names) >= 2


def test_an_op_no_accelerator_can_run_lies_in_none_of_their_slots():
    """v1, v2 and v4 run on the CPU only; Fig. 4's slots on two accelerators must count them in no slot, or a slot
    waits for ops it does not hold. The plain IP (no cuts to hide a wrong slot) against brute force."""
    g = Graph([op("v0", 1, 1, out=3), op("v1", None, 5, out=3), op("v2", None, 10, out=0), op("v3", 0, 5, out=0),
               op("v4", None, 5, out=0)], [("v0", "v2"), ("v1", "v3"), ("v1", "v4"), ("v2", "v3")])
    _proven(Problem(g, Cluster.accelerators(2, cpus=1), Latency(), [Subgraphs(3)]), 14.0, (PLAIN, "latency"))


def test_a_latency_of_zero_is_proven_with_tensors_in_flight():
    """Every op takes no time on some device and the only bytes sent stay on one accelerator: latency 0. Its horizon
    0 bounds TotalLatency and every op's Latency_v to (0, 0); without those bounds (or with the serial horizon, which
    counts the bytes) HiGHS leaves them at 1e-9, within its tolerance, and the answer fails solve's check."""
    g = Graph([op("v0", None, 0, out=0), op("v1", 0, 0, out=1), op("v2", 0, 5, out=3), op("v3", None, 0, out=0)],
              [("v0", "v2"), ("v1", "v2")])
    for result in _proven(Problem(g, Cluster.accelerators(2, cpus=1), Latency(), [Subgraphs(2)]), 0.0,
                          (PLAIN, "latency")):
        assert result.bound == 0.0


def test_subgraph_levels_start_at_one():
    """Levels run 1..q. An entry into level 1 (from a level 0) would add itself to the reasons a level-1 op may
    have upstream, which loosens that row in the LP: the whole IP's LP reads 3.02393 with it, 3.02463 without
    (optimum 4; found by a random search over 360 small instances)."""
    g = Graph([op("v0", 2, 5, out=1), op("v1", 0, 10, out=1), op("v2", 1, 0, out=1), op("v3", 4, 0, out=0),
               op("v4", 1, 10, out=3)], [("v0", "v4"), ("v1", "v2"), ("v1", "v3"), ("v3", "v4")])
    p = Problem(g, Cluster.accelerators(2, cpus=1), Latency(), [Subgraphs(2)])
    assert brute_force(p)[0] == 4.0
    assert model_bound(p, "latency", "highs", 60, lp=True)[0] == pytest.approx(3.0246250, rel=1e-6)


def one_slot_diamond(out: float) -> Problem:
    """a -> b, a -> c, b -> d, c -> d, each op 1 on the accelerator and 10 on the CPU, tensors of ``out`` bytes
    (d's none), one accelerator with one subgraph."""
    g = Graph([op(n, 1, 10, out=out if n != "d" else 0) for n in "abcd"],
              [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    return Problem(g, Cluster.accelerators(1, cpus=1), Latency(), [Subgraphs(1)])


def test_a_run_of_one_subgraph_holds_the_ops_between_its_own():
    """A diamond, all four ops 1 on the accelerator and 10 on the CPU, one subgraph per accelerator: a run of the
    longest path a, b, d on the accelerator holds c too (Lemma 4.1), so its arc costs 4 and the LP reads the
    optimum, 4; priced as a, b, d alone it reads 3.857."""
    p = one_slot_diamond(out=0)
    assert brute_force(p)[0] == 4.0
    assert model_bound(p, "latency", "highs", 60, lp=True)[0] == pytest.approx(4.0, rel=1e-9)


def test_total_latency_starts_at_the_dp_over_whole_runs():
    """The diamond again, each tensor 1 byte: the DP over the runs of a, b, d reads 4 when a run holds c (one
    subgraph per accelerator), 3 when it need not (c's tensor is then read for free), and the longest path of
    fastest times is 3. TotalLatency's lower bound is the first: 4, the optimum."""
    p = one_slot_diamond(out=1)
    compiled = compile(p, "latency")
    ctx, scale = compiled.varmap.context, compiled.objective_scale
    assert (run_path_bound(ctx, None, True) * scale, run_path_bound(ctx, None, False) * scale) == pytest.approx((4, 3))
    assert compiled.model.latency.total.lb * scale == pytest.approx(4.0) == brute_force(p)[0]


def test_an_op_too_big_for_every_accelerator_is_kept_on_the_host_by_the_run_flows():
    """big holds 12 bytes and the accelerator 10: no run covers it, so the run flows' cover row (runs covering an op
    = the op on an accelerator) reads 0 = x[big, acc0], where the memory row alone lets the LP put 10/12 of it
    there. The LP reads 33.5 with that row, 29.67 without (optimum 41, one subgraph per accelerator)."""
    g = Graph([op("a", 4, 20), op("b", 1, 5, mem=6), op("big", 1, 10, mem=12), op("d", 4, 20, out=3),
               op("e", 1, 5, out=3, mem=3)], [("a", "b"), ("b", "big"), ("big", "d"), ("d", "e")])
    p = Problem(g, Cluster.accelerators(1, memory=10.0, cpus=1), Latency(), [Memory(), Subgraphs(1)])
    assert brute_force(p)[0] == 41.0
    assert model_bound(p, "latency", "highs", 60, lp=True)[0] == pytest.approx(33.5, rel=1e-6)


def test_run_flows_follow_as_many_longest_paths_as_asked():
    """Four longest paths a -> m_i -> z; the run flows take the first `paths` (3) of them, no more."""
    g = Graph([op("a", 1, 10, out=1), *(op(f"m{i}", 1, 10, out=1) for i in range(4)), op("z", 1, 10, out=0)],
              [e for i in range(4) for e in (("a", f"m{i}"), (f"m{i}", "z"))])
    compiled = compile(Problem(g, Cluster.accelerators(1, cpus=1), Latency(), [Subgraphs(1)]), "latency")
    flows, template = compiled.varmap.block("run_flows")
    assert template.paths == 3 and {k for k, _, _ in flows.arcs} == {0, 1, 2}


def test_devices_left_out_of_the_symmetry_order_follow_it_by_index():
    """DeviceOrder takes the devices of its order first, then the rest by index: acc2 before acc0 and acc1."""
    g = Graph([op("a", 1, 10), op("b", 1, 10, out=0)], [("a", "b")])
    ctx = compile(Problem(g, Cluster.accelerators(3, cpus=1), Latency(), []), "latency").varmap.context
    assert DeviceOrder(("acc2",)).pairs(ctx) == [(2, 0), (0, 1)]
    assert DeviceOrder().pairs(ctx) == [(0, 1), (1, 2)]


def test_the_floor_of_total_latency_lets_host_ops_run_side_by_side():
    """Ten independent ops, each 1 anywhere; the accelerator holds one. The CPU cores run host ops as soon as their
    inputs are ready, all at once: latency 1, though the ops' total over the two devices is 5 (the time scale)."""
    ops = [Op(name=f"o{i}", work={"accelerator": 1, "cpu": 1}, out_bytes=0, param_bytes=1) for i in range(10)]
    p = Problem(Graph(ops, []), Cluster.accelerators(1, memory=1.0, cpus=1), Latency(), [Memory()])
    result = solve(p, formulation="latency", solver="highs", time_limit=60, warm_start=START)
    assert (result.status.value, result.objective, result.bound) == ("optimal", 1.0, pytest.approx(1.0))


def test_two_subgraphs_beat_one_on_the_detour():
    assert optimum("detour", "q2") == pytest.approx(5.0)
    assert optimum("detour", "q1") > 5.0


@pytest.mark.parametrize("limit", ["q1", "q2", "contiguous"])  # contiguous: q = 1 without Lemma 4.1's z
def test_greedy_warm_start_is_accepted(limit):
    p = problem("fork", limit)
    result = solve(p, formulation="latency", warm_start="greedy", time_limit=60)
    assert result.start_accepted is True
    assert result.objective == pytest.approx(optimum("fork", limit))


SAMPLE = 24  # placements per case checked by the fast test; the slow one checks them all


def _check_warm_starts(instance: str, limit: str, sample: int | None) -> None:
    p = problem(instance, limit)
    if sample is None:
        chosen = list(valid_placements(instance, limit))
    else:  # every k-th placement, then the valid ones: checking all 3,125 of the fork's for validity took a minute
        every = list(placements(p))
        chosen = [pl for pl in every[::max(1, len(every) // (2 * sample))] if p.is_valid(pl)]
    horizon = max(p.evaluate(pl).objective for pl in chosen)  # at least each chosen placement's latency
    by_order: dict[tuple[str, ...], list] = {}
    for placement in chosen:
        by_order.setdefault(first_use_order(Context(p), placement.assign), []).append(placement)
    for order, group in by_order.items():
        compiled = compile(hinted(p, horizon, order), "latency")
        for placement in group:
            values = compiled.varmap.values(placement)
            worst, where = compiled.varmap.residual(values)
            assert worst <= 1e-7, (placement.mapping(), where)
            total = values[compiled.model.latency.total] * compiled.objective_scale
            assert total == pytest.approx(p.evaluate(placement).objective, rel=1e-9)


@pytest.mark.parametrize("limit", ["q1", "q2", "all"])
@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_valid_placements_are_exact_warm_starts(instance, limit):
    """Under the hint ``prepare`` derives from a placement (its device order; a horizon at least its latency),
    its values satisfy every row of every block — the cuts hold — and TotalLatency is its latency."""
    _check_warm_starts(instance, limit, SAMPLE)


@pytest.mark.slow
@pytest.mark.parametrize("limit", ["q1", "q2", "all"])
@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_every_valid_placement_is_an_exact_warm_start(instance, limit):
    _check_warm_starts(instance, limit, None)


def test_levels_are_the_cost_models_cut():
    p = problem("detour", "all")
    ctx = Context(p)
    lev = levels(ctx, np.array([0, 1, 0]), [0])
    assert lev[:, 0].tolist() == [1, 1, 2]  # h (on the CPU) inherits p's level; r re-enters: level 2


# ---------------------------------------------------------------------------- structure and big-Ms
def test_block_sizes_follow_the_paper():
    """Fig. 3 on ``chain_cpu`` (n = 4 ops, m = 3 edges, k = 2 accelerators, one CPU)."""
    n, m, k = 4, 3, 2
    size = compile(problem("chain_cpu", "q1"), "latency").size()
    assert size["assignment"] == {"variables": n * (k + 1), "constraints": n}
    assert size["subgraphs"] == {"variables": n * k, "constraints": n * k + 2 * m * k}  # z (11)-(13)
    inv = size["invocations"]  # start, finish per accelerator, Latency_v; (7), (6), (10), (8), (9)
    assert inv == {"variables": 2 * k + n, "constraints": k + m * k + n * k + 1 + m}
    cuts = size["path_cuts"]  # done_v, enter/leave per (edge, accelerator) with 3 rows each, longest path, done <= ready
    assert cuts["variables"] == n + 2 * m * k and cuts["constraints"] >= 6 * m * k + m + n
    flows = size["run_flows"]  # the chain is its one longest path: n host arcs, n + (n - 1) runs of 1 or 2 ops
    assert flows == {"variables": 3 * n - 1, "constraints": (n + 1) + n + 2 * (n - 1)}  # balance, on_acc, starts, ends
    assert size["latency"] == {"variables": 1, "constraints": 1 + n + 1 + 1 + k}  # sink, tails, span, runs, slots
    assert size["symmetry"]["variables"] == n * (k - 1)


def test_two_subgraphs_add_levels_slots_and_their_cut():
    size = compile(problem("detour", "q2"), "latency").size()
    assert "tensor_cut" not in size  # each slot has its own CommIn/CommOut
    assert size["invocations"]["variables"] == 2 * 2 + 3  # two slots on the accelerator


@pytest.mark.parametrize("hint", [None, 12.0])
@pytest.mark.parametrize("limit", ["q1", "q2"])
def test_big_ms_are_derived_from_the_horizon(limit, hint):
    p = problem("fork", limit)
    p = p if hint is None else hinted(p, hint)
    compiled = compile(p, "latency")
    ctx = compiled.varmap.context
    horizon = bounds(ctx, hint).horizon
    assert math.isfinite(horizon)
    assert horizon == pytest.approx(serial_bound(ctx) if hint is None else hint / ctx.scale.time, rel=1e-6)
    lm = extract(compiled.model)
    coefs = np.abs(lm.value)
    rhs = np.abs(np.concatenate([lm.row_lower, lm.row_upper]))
    assert coefs.max() <= 3 * horizon
    assert rhs[np.isfinite(rhs)].max(initial=0.0) <= 3 * horizon


def test_the_hint_is_a_term_of_the_plan_not_of_the_users_problem():
    p = problem("fork", "q1")
    plan = get("latency").prepare(p, None, None, 1e-4, {})
    assert plan.info["horizon"] == "greedy" and plan.problem.find(LatencyHint)
    assert not p.find(LatencyHint)
    for bad in (-1.0, math.nan):  # 0 is a latency: a graph whose ops take no time and send nothing
        with pytest.raises(SpecError, match=r"^LatencyHint\(horizon=.*\): the horizon must be a latency, 0 or more$"):
            LatencyHint(horizon=bad)
    assert LatencyHint(horizon=0.0).horizon == 0.0


def test_pins_keep_their_host_apart():
    g, c = fork()
    p = Problem(g, c, Latency(), [Memory(), Subgraphs(1), Pin("o", "cpu1")])
    result = solve(p, formulation="latency", time_limit=60, warm_start=START)
    assert result.placement.device_of("o") == "cpu1"
    assert result.objective == pytest.approx(brute_force(p)[0])
    assert result.objective == pytest.approx(optimum("fork", "q1"))  # the pin costs nothing here


# ---------------------------------------------------------------------------- Tarnawski Table 4
@pytest.mark.slow
def test_bert24_is_proven_optimal(dnn_partitioning):
    from placement_dsl.io import load_workload

    w = load_workload(dnn_partitioning / "latency-inputs" / "LayerGraphs" / "bert24_inference.json")
    p = Problem(w.graph, w.cluster, Latency(), [Memory(), Subgraphs(1)])
    result = solve(p, formulation="latency", warm_start="greedy", time_limit=300, gap=1e-4)
    assert result.objective == pytest.approx(100.22, abs=5e-3)  # Tarnawski Table 4
    assert result.gap is not None and result.gap <= 1e-4


@pytest.mark.parametrize("cpus", [0, 1])
def test_colocated_neighbours_leave_run_flow_rows_that_constants_decide(cpus):
    # a and b colocated: no run of the critical path starts or ends between them, so the flow's balance
    # at that position has no arc (0 == 0); Pyomo refused the bare True and the IP did not compile
    from placement_dsl.constraints import Colocate

    g = Graph([Op(name=n, work=w, out_bytes=1) for n, w in zip("abcd", [1, 2, 3, 1])],
              [("a", "b"), ("b", "c"), ("c", "d")])
    p = Problem(g, Cluster.accelerators(2, cpus=cpus), Latency(), [Colocate([["a", "b"]])])
    r = solve(p, formulation="latency", solver="highs", time_limit=10, gap=0.0, warm_start=START)
    assert r.status.value == "optimal" and r.objective == pytest.approx(brute_force(p)[0])
