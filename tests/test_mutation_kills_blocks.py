"""Hand-computed checks of the block templates' warm starts and rare paths (docs/mutation.md).

Each test pins down a case the known instances never reach — GPipe on an inference graph, a
training optimum that overflows, loads below one model unit, merged hosts, routed and merged
cuts — with numbers worked out by hand in its comments. A warm start is checked three ways: its
values satisfy every row of the model (``residual``), its objective is the cost model's, and the
variables that carry the case have the values computed by hand.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyomo.environ as pyo
import pytest

from placement_dsl.blocks import OrderedAssignment, TensorCut
from placement_dsl.blocks.base import BlockTemplate, Context, Link, Stage, build_order
from placement_dsl.cluster import Cluster, Device
from placement_dsl.compile import compile
from placement_dsl.conformance import check_documented
from placement_dsl.constraints import Colocate, Contiguous, DagOrder, Overflow
from placement_dsl.errors import SpecError
from placement_dsl.formulations import FORMULATIONS, Kind, get
from placement_dsl.formulations.latency import hinted
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, GPipe, Latency, Throughput
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import brute_force, without


def _accepting(problem):
    """The exact formulations and restrictions that accept ``problem`` (a relaxation has no warm start)."""
    names = [name for name, formulation in sorted(FORMULATIONS.items())
             if formulation.kind is not Kind.RELAXATION and not formulation.accepts(problem)]
    assert names, "no formulation accepts the problem"
    return names


def _warm(problem, name, placement):
    """The compiled model of ``name`` holding ``placement``'s warm-start values, checked against every row."""
    c = compile(problem, name)
    values = c.varmap.values(placement)
    worst, where = c.varmap.residual(values)
    assert worst <= 1e-9, (name, where, worst)
    for var, value in values.items():
        var.set_value(value, skip_validation=True)
    return c, values


def _proved_by_every_formulation(problem, best):
    """Every formulation that accepts ``problem`` solves it to a valid ``best`` with ``best`` as its bound."""
    for name in _accepting(problem):
        r = solve(problem, formulation=name, time_limit=30)
        assert (r.objective, r.bound) == (pytest.approx(best), pytest.approx(best)), name
        assert problem.is_valid(r.placement), name


def _by_name(values, suffix):
    """The warm value of the one variable whose name ends with ``suffix``."""
    (value,) = [x for v, x in values.items() if v.name.endswith(suffix)]
    return value


# ---------------------------------------------------------------------------- GPipe
def test_gpipe_on_an_inference_graph_is_the_max_load_with_its_overflow():
    # no backward pass: max FW + max BW = the max load, overflow included. a (work 3, 4 parameter bytes) ->
    # b (2) -> c (2), unit tensors, on 2 stages of memory 2 (bandwidth 1): {a} | {b, c} costs
    # max(3 + 1 + 2 (overflow), 4 + 1) = 6; {a, b} | {c} 5 + 1 + 2 = 8; {a, c} | {b} 5 + 2 + 2 = 9; one stage
    # 7 + 2 = 9. bw_bottleneck bounds nothing and must stay at 0 (its domain)
    g = Graph([Op(name="a", work=3, param_bytes=4, out_bytes=1), Op(name="b", work=2, out_bytes=1),
               Op(name="c", work=2)], [("a", "b"), ("b", "c")])
    problem = Problem(g, Cluster.stages(2, memory=2.0), GPipe(), [Overflow()])
    best, placement = brute_force(problem)
    where = placement.mapping()
    assert best == 6.0 and where["b"] == where["c"] != where["a"]
    for name in _accepting(problem):
        r = solve(problem, formulation=name, solver="highs", time_limit=20, gap=1e-9)
        assert (r.objective, r.bound) == (pytest.approx(6.0), pytest.approx(6.0)), name
        c, values = _warm(problem, name, placement)
        # model time unit: max(largest op 3, total work 7 / 2 stages) = 3.5
        assert c.objective_scale == pytest.approx(3.5)
        assert _by_name(values, "fw_bottleneck") == pytest.approx(6.0 / 3.5), name
        assert _by_name(values, "bw_bottleneck") == 0.0, name
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(6.0), name


def _training_overflow_problem() -> Problem:
    # forward f0 -> f1 (work 4, 3 parameter bytes, tensor 1 each), backward b1 -> b0 (work 1, tensor 1);
    # f0/b0 and f1/b1 colocated; stages of memory 2 and bandwidth 1 may overflow
    ops = [Op(name="f0", work=4, param_bytes=3, out_bytes=1, group="s"),
           Op(name="f1", work=4, param_bytes=3, out_bytes=1, group="t"),
           Op(name="b1", work=1, out_bytes=1, backward=True, group="t"),
           Op(name="b0", work=1, backward=True, group="s")]
    g = Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "b0")])
    return Problem(g, Cluster.stages(2, memory=2.0), GPipe(), [Overflow()])


def test_training_gpipe_warm_start_charges_the_overflow_to_the_forward_pass_only():
    # split {f0, b0} | {f1, b1}: each stage overflows 3 - 2 = 1 byte = 1 time unit, charged to the forward pass:
    #   FW = 4 (compute) + 1 (f0's tensor) + 1 (overflow) = 6 on both; BW = 1 (compute) + 1 (b1's tensor) = 2
    #   GPipe: 6 + 2 = 8. One stage: FW 8 + (6 - 2) = 12, BW 2: 14
    problem = _training_overflow_problem()
    best, placement = brute_force(problem)
    assert best == 8.0
    ev = problem.evaluate(placement)
    assert [(row.overflow, row.load_fw, row.load_bw) for row in ev.devices] == [(1.0, 6.0, 2.0), (1.0, 6.0, 2.0)]
    for name in _accepting(problem):
        c, values = _warm(problem, name, placement)
        # model time unit: max(largest op 4, total work 10 / 2) = 5; BW = 2 / 5 is below one unit
        assert c.objective_scale == pytest.approx(5.0)
        assert _by_name(values, "fw_bottleneck") == pytest.approx(6.0 / 5.0), name
        assert _by_name(values, "bw_bottleneck") == pytest.approx(2.0 / 5.0), name
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(8.0), name


# ---------------------------------------------------------------------------- loads below one unit
def test_warm_start_of_a_free_placement_has_a_zero_bottleneck():
    # ops with no work (reshapes): the time unit is the largest tensor (2 bytes at bandwidth 1); every op on one
    # stage moves nothing, so the bottleneck is 0 — not the 1 unit an epigraph started at 1 would claim
    g = Graph([Op(name="a", out_bytes=2), Op(name="b", out_bytes=1), Op(name="c")], [("a", "b"), ("b", "c")])
    problem = Problem(g, Cluster.stages(2), Bottleneck(), [])
    best, placement = brute_force(problem)
    assert best == 0.0
    for name in _accepting(problem):
        c, _ = _warm(problem, name, placement)
        assert c.objective_scale == pytest.approx(2.0), name
        assert pyo.value(c.objective) == 0.0, name


# ---------------------------------------------------------------------------- representatives
def test_warm_start_reads_an_op_on_a_merged_host_as_its_representative():
    # the latency IP merges the two unbounded CPUs into cpu0 (they are interchangeable): b on cpu1 is encoded as
    # x[b, cpu0] = 1, and cpu1 has no variables. a (acc 1) -> b (cpu 1): latency 1 + 1 (tensor) + 1 = 3
    ops = [Op(name="a", work={"accelerator": 1, "cpu": 5}, out_bytes=1), Op(name="b", work={"cpu": 1})]
    problem = Problem(Graph(ops, [("a", "b")]), Cluster.accelerators(1, cpus=2), Latency(), [])
    placement = problem.placement([0, 2])  # acc0, cpu1
    assert problem.evaluate(placement).objective == 3.0
    # b may not run on the accelerator: the run-flow rows skip it instead of writing 0 == 0
    r = solve(problem, formulation="latency", solver="highs", time_limit=20, gap=1e-9)
    assert (r.objective, r.bound) == (pytest.approx(3.0), pytest.approx(3.0))
    _, values = _warm(hinted(problem, 3.0), "latency", placement)
    x = {v.name: value for v, value in values.items() if v.parent_component().local_name == "x"}
    assert x == {"assignment.x[a,acc0]": 1.0, "assignment.x[a,cpu0]": 0.0, "assignment.x[b,cpu0]": 1.0}


# ---------------------------------------------------------------------------- colocation by equalities
def _colocated_around_a_cpu_op(b_on_accelerator: float, cpus: int, shared: bool) -> Problem:
    # a, c (accelerator 1, CPU 5) colocated around b (CPU 1), unit tensors, one accelerator
    ops = [Op(name="a", work={"accelerator": 1, "cpu": 5}, out_bytes=1),
           Op(name="b", work={"accelerator": b_on_accelerator, "cpu": 1}, out_bytes=1),
           Op(name="c", work={"accelerator": 1, "cpu": 5})]
    return Problem(Graph(ops, [("a", "b"), ("b", "c")]), Cluster.accelerators(1, cpus=cpus), Latency(),
                   [Colocate([["a", "c"]], shared=shared)])


def test_equality_colocation_on_merged_hosts_writes_no_row_for_the_represented_host():
    # the latency IP merges the two unbounded CPUs into cpu0, so cpu1 has no variables and a same-device row
    # there would read 0 == 0. a, c on acc0 with b on a CPU take 1 + 1 (tensor) + 1 + 1 (tensor) + 1 = 5, as
    # does everything on acc0 (1 + 3 + 1); on the CPU 11
    problem = _colocated_around_a_cpu_op(3.0, cpus=2, shared=False)
    best, _ = brute_force(problem)
    assert best == 5.0
    r = solve(problem, formulation="latency", solver="highs", time_limit=20, gap=1e-9)
    assert (r.objective, r.bound) == (pytest.approx(5.0), pytest.approx(5.0))
    assert r.placement.mapping()["a"] == r.placement.mapping()["c"] == "acc0"
    rows = compile(hinted(problem, 5.0), "latency").model.colocation.same_device
    assert sorted(rows) == [("c", "acc0"), ("c", "cpu0")]


def test_latency_ip_keeps_a_colocated_group_split_around_a_cpu_op():
    # b costs 4 on the accelerator: a, c on acc0 with b on the CPU (5) beats everything on acc0 (6). With two
    # slots per accelerator c shares a's device, not its slot: the run-path rows once priced c's reads for a's run
    problem = _colocated_around_a_cpu_op(4.0, cpus=1, shared=True)
    best, placement = brute_force(problem)
    assert best == 5.0 and placement.mapping() == {"a": "acc0", "b": "cpu0", "c": "acc0"}
    r = solve(problem, formulation="latency", solver="highs", time_limit=20, gap=1e-9)
    assert r.bound <= 5.0 + 1e-6


# ---------------------------------------------------------------------------- tensor cuts
def test_warm_start_on_a_routed_cluster_prices_each_route():
    # two servers of one accelerator each, inter-server bandwidth 1: a (work 2, tensor 1) -> b (work 2) split
    # costs 2 + 1 on each side (3); together 4. The reader and the writer each pay the route once
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    problem = Problem(g, Cluster.hierarchical(2, 1, intra=10.0, inter=1.0), Bottleneck(), [])
    best, placement = brute_force(problem)
    assert best == 3.0 and placement.mapping() == {"a": "s0g0", "b": "s1g0"}
    for name in _accepting(problem):
        c, values = _warm(problem, name, placement)
        # model time unit: max(2, 4 / 2) = 2, so the route costs 1 / 2
        routes = {v.name: x for v, x in values.items() if v.parent_component().local_name in ("recv", "send")}
        assert routes == {"tensor_cut.recv[a,s0g0]": 0.0, "tensor_cut.recv[a,s1g0]": 0.5,
                          "tensor_cut.send[a,s0g0]": 0.5, "tensor_cut.send[a,s1g0]": 0.0}, name
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(3.0), name


def test_warm_start_of_archers_merged_cut_counts_a_tensor_leaving_and_entering():
    # Archer's c[u, b] (DAG order, no full-duplex overlap) is 1 where tensor u enters *or* leaves block b:
    # a on stage0 writes its tensor (c = 1 there), b on stage1 reads it (c = 1 there). Load 2 + 1 on both: 3
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    problem = Problem(g, Cluster.stages(2), Bottleneck(), [DagOrder()])
    best, placement = brute_force(problem)
    assert best == 3.0
    c, values = _warm(problem, "exact", placement)
    cut = {v.name: x for v, x in values.items() if v.parent_component().local_name == "cut"}
    assert cut == {"tensor_cut.cut[a,stage0]": 1.0, "tensor_cut.cut[a,stage1]": 1.0}
    assert pyo.value(c.objective) * c.objective_scale == pytest.approx(3.0)


# ---------------------------------------------------------------------------- chain: position windows
def test_position_windows_need_a_positive_target():
    from placement_dsl.blocks.chain import PositionWindows
    from placement_dsl.errors import SpecError

    for bad in (0.0, -1.0):
        with pytest.raises(SpecError, match=rf"^position_windows: target must be a positive max load, got {bad!r}$"):
            PositionWindows(bad)
    assert PositionWindows(0.5).target == 0.5  # a max load below one time unit is a target like any other


def test_position_windows_cut_the_positions_whose_floor_exceeds_the_target():
    from placement_dsl.formulations.chain import chain_problem

    # a (2) -> b (4) -> c (2), unit tensors, on two accelerators in DAG order: {a} | {b, c} costs
    # max(2 + 1, 6 + 1) = 7, as does {a, b} | {c}; one accelerator 8. a on accelerator 2 puts b and c there too,
    # and so does c on accelerator 1: both positions have the floor 8, which a target of 6 windows out (a target
    # read as 6 model units, 24, would window nothing)
    g = Graph([Op(name=n, work=w, out_bytes=1) for n, w in zip("abc", (2, 4, 2))], [("a", "b"), ("b", "c")])
    problem = Problem(g, Cluster.accelerators(2), Bottleneck(), [])
    c = compile(chain_problem(problem, 6.0), "chain")
    assert c.objective_scale == pytest.approx(4.0)  # max(largest op 4, total work 8 / 2 accelerators)
    windows = c.model.position_windows
    assert sorted(windows.window_acc) == [("a", 2), ("c", 1)]
    assert windows.window_acc.doc == "xa[g, b] = 0: its floor tau exceeds the target 6"
    assert windows.window_cpu.doc == "xc[g, j, b] = 0: its floor tau exceeds the target 6"



def test_position_windows_agree_with_the_bound_just_below_a_floor_above_one_model_unit():
    # u0 -> u1 -> u2 -> u3 (work 1, no tensors) on four accelerators: the model unit is the simple bound 1, and u3
    # on the first accelerator has the floor 4 (its four ancestors on one device). A target a relative 1e-10 below a
    # floor is rounding noise: the block keeps the position, as position_windows does (slack 1e-9 of the target)
    from placement_dsl.bounds.combinatorial import position_windows
    from placement_dsl.formulations.chain import chain_problem

    g = Graph([Op(name=f"u{i}", work=1) for i in range(4)], [(f"u{i}", f"u{i + 1}") for i in range(3)])
    problem = Problem(g, Cluster.accelerators(4), Bottleneck(), [])
    for floor in (4.0, 3.0, 2.0):
        target = floor * (1 - 1e-10)
        c = compile(chain_problem(problem, target), "chain")
        assert c.objective_scale == pytest.approx(1.0)
        allowed, _ = position_windows(g, problem.cluster, target)
        cut = {(f"u{i}", b + 1) for i, b in zip(*(~allowed).nonzero())}
        assert set(c.model.position_windows.window_acc) == cut, floor
        assert (("u3", 1) in cut) == (floor < 4)  # the floor-4 position is kept just below 4
    # below one model unit the slack is 1e-9: u0 on the first accelerator has the floor 1 (its descendants over
    # four), cut at 1 - 1.5e-9 like position_windows cuts it
    c = compile(chain_problem(problem, 1 - 1.5e-9), "chain")
    assert ("u0", 1) in set(c.model.position_windows.window_acc)
    assert not position_windows(g, problem.cluster, 1 - 1.5e-9)[0][0, 0]


def test_cpu_windows_keep_a_gap_whose_floor_is_the_target():
    # on the two-op chain with a CPU, a target equal to a CPU floor keeps that gap (a placement there has max load
    # at most the target): the block's CPU windows are position_windows' at every floor taken as the target
    from placement_dsl.blocks.chain import chain_view
    from placement_dsl.bounds.combinatorial import position_windows
    from placement_dsl.formulations.chain import chain_problem

    problem = _two_op_chain()
    view = chain_view(Context(problem))
    scale = compile(problem, "chain").objective_scale
    floors = sorted({float(t) * scale for t in view.tau_cpu.ravel() if np.isfinite(t)})
    assert len(floors) >= 3
    for target in floors:
        c = compile(chain_problem(problem, target), "chain")
        _, cpu_ok = position_windows(problem.graph, problem.cluster, target)
        cut = {(view.names[g], "cpu0", b + 1) for g, b in zip(*(~cpu_ok).nonzero())}
        assert set(c.model.position_windows.window_cpu) == cut, target


# ---------------------------------------------------------------------------- chain: CPUs in gaps
def _in_chain_numbering(problem, **where):
    """Whether the placement ``op=device`` satisfies every row of the chain model (the chain numbers interchangeable
    devices in cluster order, so of two mirror images only one is inside)."""
    from placement_dsl.placement import Placement

    c = compile(problem, "chain")
    worst, _ = c.varmap.residual(c.varmap.values(Placement.from_mapping(problem.graph, problem.cluster, where)))
    return worst <= 1e-9


def test_cpus_sharing_a_gap_run_in_index_order():
    # u -> v -> w (accelerator 1, CPU 2, unit tensors) on one accelerator and two CPUs (hosts: no transfers).
    # u on cpu1, v on cpu0, w on acc0: v reads from a higher-index CPU, so cpu0 needs a later gap than cpu1, yet v
    # feeds the accelerator, so cpu0 sits before it — outside the chain's numbering. Its mirror image (u on cpu0,
    # v on cpu1) is inside, and the chain's optimum, max(2, 2, 1 + 1) = 2, is the DP class's
    ops = [Op(name=n, work={"accelerator": 1, "cpu": 2}, out_bytes=1) for n in "uvw"]
    g = Graph(ops, [("u", "v"), ("v", "w")])
    problem = Problem(g, Cluster.accelerators(1, cpus=2), Bottleneck())
    assert not _in_chain_numbering(problem, u="cpu1", v="cpu0", w="acc0")
    assert _in_chain_numbering(problem, u="cpu0", v="cpu1", w="acc0")
    # one row per forward edge, CPU pair (cpu0, cpu1) and gap (before and after the accelerator)
    assert len(compile(problem, "chain").model.dag_order.cpu_order) == 2 * 1 * 2
    # a CPU sits in one gap: u on cpu0 before the accelerator and w's consumer z on cpu0 after it is outside
    both = Problem(Graph([*ops, Op(name="z", work={"accelerator": 1, "cpu": 2})], [("u", "w"), ("w", "z")]),
                   Cluster.accelerators(1, cpus=2), Bottleneck())
    assert not _in_chain_numbering(both, u="cpu0", v="acc0", w="acc0", z="cpu0")
    assert _in_chain_numbering(both, u="cpu0", v="acc0", w="acc0", z="cpu1")
    # a CPU in the gap before accelerator b cannot consume from it: u on acc0 -> v on cpu0 -> w on acc0 is outside
    assert not _in_chain_numbering(problem, u="acc0", v="cpu0", w="acc0")


def test_chain_refuses_a_pin_to_one_of_interchangeable_devices():
    # u (2) -> v (3) -> w (2), unit tensors, on three accelerators with u pinned to acc1: the chain numbers its slots
    # in cluster order, so u would sit at the second slot, v and w after it (6); the DP class holds {u} on acc1,
    # {v} on acc0, {w} on acc2 (5), pipeline acc1, acc0, acc2. The chain refuses instead of proving 6
    from placement_dsl.constraints import Pin

    g = Graph([Op(name=n, work=w, out_bytes=1) for n, w in zip("uvw", (2, 3, 2))], [("u", "v"), ("v", "w")])
    problem = Problem(g, Cluster.accelerators(3), Bottleneck(), [Contiguous(), Pin("u", "acc1")])
    assert get("chain").accepts(problem) == (
        "chain formulation: Pin('u', 'acc1') ties an op to one of 3 interchangeable accelerators, which the chain's "
        "slots number in cluster order; its optimum would restrict the DP class, not bound it; use "
        "formulation='throughput'")
    assert solve(problem, formulation="throughput", time_limit=20).objective == brute_force(problem)[0] == 5.0
    # a pin to the only CPU, or the only accelerator, singles nothing out
    one_cpu = Problem(g, Cluster.accelerators(2, cpus=1), Bottleneck(), [Pin("u", "cpu0")])
    assert get("chain").accepts(one_cpu) is None
    assert get("chain").accepts(Problem(g, Cluster.accelerators(1, cpus=2), Bottleneck(), [Pin("u", "acc0")])) is None
    assert "one of 2 interchangeable CPUs" in get("chain").accepts(
        Problem(g, Cluster.accelerators(1, cpus=2), Bottleneck(), [Pin("u", "cpu1")]))


def test_warm_start_puts_a_cpu_fed_by_a_higher_index_cpu_one_gap_later():
    # u on cpu1 -> v on cpu0, w alone on the accelerator. CPUs sharing a gap run in index order (cpu0 first), so
    # v cannot share u's gap: cpu1 sits in gap 1 (before acc0), cpu0 in gap 2 (after it). The warm start of this
    # placement must satisfy every row of the chain model; the gaps are the ones read off by hand
    from placement_dsl.blocks.chain import warm_slots
    from placement_dsl.placement import Placement

    ops = [Op(name=n, work={"accelerator": 1, "cpu": 2}, out_bytes=1) for n in "uvw"]
    problem = Problem(Graph(ops, [("u", "v")]), Cluster.accelerators(1, cpus=2), Bottleneck(), [])
    placement = Placement(problem.graph, problem.cluster, [2, 1, 0])  # devices: acc0, cpu0, cpu1
    compiled = compile(problem, "chain")
    worst, where = compiled.varmap.residual(compiled.varmap.values(placement))
    assert worst <= 1e-9, where
    slot, gap = warm_slots(Context(problem), placement.assign)
    assert gap.tolist() == [2, 1] and sorted(slot.tolist()) == [1, 1, 2]


def _two_op_chain():
    """u (accelerator 4, CPU 0.5) -> v (accelerator 2, CPU 8), unit tensor, on two accelerators and a CPU."""
    ops = [Op(name="u", work={"accelerator": 4, "cpu": 0.5}, out_bytes=1),
           Op(name="v", work={"accelerator": 2, "cpu": 8}, out_bytes=1)]
    return Problem(Graph(ops, [("u", "v")]), Cluster.accelerators(2, cpus=1), Bottleneck(), [])


def test_ancestor_cut_keeps_cpu_floors_below_one_time_unit():
    # u on the CPU before acc0, v on acc0: the cut's floor for u there is (0.5 + 2) / 3 = 5/6 (u's CPU time and
    # v's least work, which must follow it, spread over the three devices) — below one time unit, and still cut
    from pyomo.core.expr.visitor import identify_variables

    from placement_dsl.placement import Placement

    problem = _two_op_chain()
    compiled = compile(problem, "chain")
    values = compiled.varmap.values(Placement(problem.graph, problem.cluster, [2, 0]))
    row = compiled.model.ancestor_cuts.ancestor_cut["u"]
    for var in identify_variables(row.body):
        var.set_value(values.get(var, 0.0))
    bottleneck = compiled.model.max_load.bottleneck
    floor = (pyo.value(row.body) + pyo.value(bottleneck)) * compiled.objective_scale
    assert floor == pytest.approx(5 / 6)



def test_ancestor_cut_reads_the_floor_of_each_accelerator_position():
    # each group's row is bottleneck >= sum_b tau[g, b] xa[g, b] + ...: with u and v both on accelerator b, the
    # row of each reads its floor there, in model units: the simple bound's unit 2 makes v's floors 1 (its work 2)
    from pyomo.core.expr.visitor import identify_variables

    from placement_dsl.blocks.chain import chain_view
    from placement_dsl.placement import Placement

    problem = _two_op_chain()
    compiled = compile(problem, "chain")
    view = chain_view(Context(problem))
    assert view.tau.tolist() == [[2.0, 2.0], [1.0, 1.0]]
    for b in range(view.k):
        values = compiled.varmap.values(Placement(problem.graph, problem.cluster, [b, b]))
        for i, g in enumerate(view.names):
            row = compiled.model.ancestor_cuts.ancestor_cut[g]
            for var in identify_variables(row.body):
                var.set_value(values.get(var, 0.0))
            assert pyo.value(row.body) + pyo.value(compiled.model.max_load.bottleneck) == pytest.approx(
                view.tau[i, b]), (g, b)


def test_ancestor_cuts_fix_the_positions_whose_floor_is_infinite():
    # a runs on the accelerator only; g (no work there, 1 on the CPU) cannot sit on the CPU before the accelerator:
    # its ancestor a would have to run on a CPU too (floor a / 0 = inf). That position is fixed to 0 by name
    ops = [Op(name="a", work={"accelerator": 1}, out_bytes=1), Op(name="g", work={"accelerator": 0, "cpu": 1})]
    problem = Problem(Graph(ops, [("a", "g")]), Cluster.accelerators(1, cpus=1), Bottleneck(), [])
    cuts = compile(problem, "chain").model.ancestor_cuts
    assert ("g", "cpu0", 1) in set(cuts.impossible_cpu) and ("g", "cpu0", 2) not in set(cuts.impossible_cpu)
    assert cuts.impossible_cpu.doc == "xc[g, j, b] = 0: position whose floor tau is infinite"
    assert cuts.impossible_acc.doc == "xa[g, b] = 0: position whose floor tau is infinite"
    r = solve(problem, formulation="chain", solver="highs", time_limit=20)
    assert r.objective == brute_force(problem)[0] == 1.0


def test_ancestor_cut_reads_a_finite_cpu_floor_after_an_infinite_one():
    # a (accelerator 1, no CPU) -> g (accelerator 0, CPU 1) on one accelerator and a CPU: no group both runs on
    # the CPU and has work, so rho = 0 and g on the CPU before the accelerator would hold its ancestor a
    # (floor A / 0 = inf); after it, the floor is max(A_g = 1, g's CPU time 1) = 1, which the row must read
    from pyomo.core.expr.visitor import identify_variables

    from placement_dsl.blocks.chain import chain_view
    from placement_dsl.placement import Placement

    ops = [Op(name="a", work={"accelerator": 1}, out_bytes=1), Op(name="g", work={"accelerator": 0, "cpu": 1})]
    problem = Problem(Graph(ops, [("a", "g")]), Cluster.accelerators(1, cpus=1), Bottleneck(), [])
    view = chain_view(Context(problem))
    i = view.names.index("g")
    assert view.tau_cpu[i, 0] == float("inf") and np.isfinite(view.tau_cpu[i, 1])
    compiled = compile(problem, "chain")
    values = compiled.varmap.values(Placement(problem.graph, problem.cluster, [0, 1]))
    row = compiled.model.ancestor_cuts.ancestor_cut["g"]
    for var in identify_variables(row.body):
        var.set_value(values.get(var, 0.0))
    floor = pyo.value(row.body) + pyo.value(compiled.model.max_load.bottleneck)
    assert floor == pytest.approx(view.tau_cpu[i, 1]) and floor * compiled.objective_scale == pytest.approx(1.0)


def test_warm_start_keeps_a_cpu_reading_its_own_tensor_in_its_gap():
    # u -> v both on the CPU, feeding w on the accelerator: the CPU sits in gap 1 (before the accelerator); an edge
    # inside one CPU pushes its gap no later. The start satisfies every row
    from placement_dsl.blocks.chain import warm_slots
    from placement_dsl.placement import Placement

    ops = [Op(name=n, work={"accelerator": 1, "cpu": 2}, out_bytes=1) for n in "uvw"]
    problem = Problem(Graph(ops, [("u", "v"), ("v", "w")]), Cluster.accelerators(1, cpus=1), Bottleneck(), [])
    placement = Placement(problem.graph, problem.cluster, [1, 1, 0])
    compiled = compile(problem, "chain")
    worst, where = compiled.varmap.residual(compiled.varmap.values(placement))
    assert worst <= 1e-9, where
    slot, gap = warm_slots(Context(problem), placement.assign)
    assert gap.tolist() == [1] and slot.tolist() == [1, 1, 1]

def test_chain_tensor_out_row_is_cumulative_for_forward_edges():
    # the out-row of u -> v on accelerator b reads CommOut >= x(u, b) - Y[v, b]: v is in slot <= b (on an
    # accelerator up to b or a CPU in a gap up to b), stronger than - x(v, b); with a CPU, x(v, b) differs
    # from Y[v, b] by v's CPU terms, which the cumulative row leaves out
    from pyomo.repn import generate_standard_repn

    compiled = compile(_two_op_chain(), "chain")
    for b, device in ((1, "acc0"), (2, "acc1")):
        repn = generate_standard_repn(compiled.model.tensor_cut.tensor_out["u", "v", device].body)
        terms = {v.name: c for v, c in zip(repn.linear_vars, repn.linear_coefs)}
        assert terms[f"assignment.Y[v,{b}]"] == -1
        assert not any(name.startswith(("cpu_gaps.xc[v,", f"assignment.Y[v,{b - 1}]")) for name in terms)


def test_chain_keeps_ops_off_devices_they_may_not_run_on():
    # a (accelerator 4 only) -> b (accelerator 3, CPU 8) -> c (CPU 5 only), unit tensors, one accelerator and two
    # CPUs. b on acc0: 4 + 3 + 1 (tensor to c) = 8; b on a CPU: max(4 + 1, 8, 5) = 8. A model that let c onto the
    # accelerator (its time there reads 0) would find 4 + 3 = 7, one that let a onto a CPU max(3 + 1 + 1, 5) = 5
    ops = [Op(name="a", work={"accelerator": 4}, out_bytes=1), Op(name="b", work={"accelerator": 3, "cpu": 8},
                                                                   out_bytes=1), Op(name="c", work={"cpu": 5})]
    problem = Problem(Graph(ops, [("a", "b"), ("b", "c")]), Cluster.accelerators(1, cpus=2), Bottleneck(), [])
    assert brute_force(problem)[0] == 8.0
    r = solve(problem, formulation="chain", solver="highs", time_limit=20, gap=1e-9)
    assert (r.objective, r.bound) == (pytest.approx(8.0), pytest.approx(8.0))


def test_chain_components_are_documented_and_equalities_refused_by_name():
    from placement_dsl.blocks.chain import chain_view
    from placement_dsl.constraints import Memory
    from placement_dsl.errors import SpecError
    from placement_dsl.formulations.chain import chain_problem

    # every block of the chain formulation (CPU gaps, slots, order, cut, ancestor cuts, windows) with CPUs
    ops = [Op(name=n, work={"accelerator": 1, "cpu": 2}, out_bytes=1, param_bytes=1) for n in "uvw"]
    g = Graph(ops, [("u", "v"), ("v", "w")])
    problem = chain_problem(Problem(g, Cluster.accelerators(2, memory=2.0, cpus=2), Bottleneck(), [Memory()]), 4.0)
    model = compile(problem, "chain").model
    assert check_documented(model) == []
    names = {comp.name for comp in model.component_objects(descend_into=True)}
    assert {"cpu_gaps.cpus", "cpu_gaps.gaps", "cpu_gaps.one_gap", "assignment.acc_slot", "assignment.last_slot",
            "dag_order.precedes", "position_windows.window_acc", "ancestor_cuts.impossible_acc",
            "ancestor_cuts.impossible_cpu"} <= names
    # a CPU sits in one gap: gamma is binary (real values such as (1, -1, 1) would put it in two)
    gaps = model.cpu_gaps
    assert all(v.is_binary() for v in gaps.gamma.values()) and all(v.is_binary() for v in gaps.xc.values())
    # the templates refuse equality colocation themselves (a custom formulation may not go through the rule)
    equalities = Problem(g, Cluster.accelerators(2), Bottleneck(), [Colocate([["u", "w"]], shared=False)])
    with pytest.raises(SpecError, match=r"^chain formulation: colocation groups must share variables; "
                                        r"use Colocate\(\.\.\., shared=True\)$"):
        chain_view(Context(equalities))


# ---------------------------------------------------------------------------- tensor cut: passes, options, variables
def _asymmetric_training_problem(objective) -> Problem:
    """f0 -> f1 -> b1 -> b0 with f0/b0 and f1/b1 colocated; the forward tensor (2 bytes) is larger than the
    backward one (1 byte), so a model that counts one pass's tensors in the other's load is wrong."""
    ops = [Op(name="f0", work=4, out_bytes=2, group="a"), Op(name="f1", work=3, group="b"),
           Op(name="b1", work=2, out_bytes=1, backward=True, group="b"), Op(name="b0", work=7, backward=True, group="a")]
    return Problem(Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "b0")]), Cluster.stages(2), objective)


def _whole(message: str) -> str:
    """A pattern matching exactly ``message``."""
    return f"^{re.escape(message)}$"


@pytest.mark.parametrize("objective", [GPipe(), Throughput()], ids=["gpipe", "throughput"])
def test_each_pass_pays_for_its_own_tensors(objective):
    # split {f0, b0} | {f1, b1}: stage0 fw 4 + writes f0's 2 = 6, bw reads b1's 1 + 7 = 8; stage1 fw reads 2 + 3 = 5,
    # bw 2 + writes 1 = 3. GPipe max fw + max bw = 6 + 8 = 14 (one stage: 7 + 9 = 16); throughput max(14, 8) = 14.
    # Counting the forward tensors in the backward pass instead gives the split 6 + 7 = 13.
    problem = _asymmetric_training_problem(objective)
    best, _ = brute_force(problem)
    assert best == 14.0
    _proved_by_every_formulation(problem, 14.0)


def test_tensor_cut_options_and_their_errors():
    assert (TensorCut().form, TensorCut().merged) == ("commio", False)
    with pytest.raises(SpecError, match=_whole("tensor_cut: unknown form 'arch'; choose from ['commio', 'archer']")):
        TensorCut(form="arch")
    with pytest.raises(SpecError, match=_whole("tensor_cut: merged=True needs form='archer' (Archer's single c "
                                                  "variable)")):
        TensorCut(merged=True)


def test_a_merged_cut_refuses_to_split_in_from_out_for_full_overlap():
    merged = get("exact").derive("exact_merged_cut", skeleton=lambda p: [OrderedAssignment(),
                                                                         TensorCut(form="archer", merged=True)])
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    problem = Problem(g, Cluster.stages(2), Bottleneck(overlap="full"), [DagOrder()])
    with pytest.raises(SpecError, match=_whole("tensor_cut: merged c cannot split in from out; use merged=False "
                                                  "for overlap='full'")):
        compile(problem, merged)


def test_only_tensors_with_bytes_get_cut_variables():
    # a's tensor has 1 byte, b's none: only a gets a cut variable per device (b -> c crosses too)
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2), Op(name="c", work=2)], [("a", "b"), ("b", "c")])
    c = compile(Problem(g, Cluster.stages(3), Bottleneck()), "throughput")
    cut = c.model.tensor_cut
    assert sorted(cut.tensors) == [("a", "stage0"), ("a", "stage1"), ("a", "stage2")]
    assert sorted(cut.cut_in) == sorted(cut.cut_out) == sorted(cut.tensors)


def test_archers_merged_cut_variables_are_non_negative():
    # under DAG order every c[u, b] has a row with a non-negative right-hand side at an integer point, but the
    # LP relaxation needs the bound: without it c = y + x - 1 < 0 prices a fractional split below zero
    g = Graph([Op(name="a", work=2, out_bytes=1), Op(name="b", work=2)], [("a", "b")])
    cut = compile(Problem(g, Cluster.stages(2), Bottleneck(), [DagOrder()]), "exact").model.tensor_cut.cut
    assert len(cut) == 2 and all(v.lb == 0 and v.domain is pyo.NonNegativeReals for v in cut.values())


# ---------------------------------------------------------------------------- device loads under overlap
def test_full_overlap_prices_each_pass_with_its_own_tensors_in_and_out():
    # f0 (10, tensor 6) -> f1 (10) -> b1 (2, tensor 5) -> b0 (1), f0/b0 and f1/b1 colocated; full overlap: a pass's
    # load is max(compute, in, out). Split: fw max(10, 6) = 10 on both; bw stage0 max(1, in 5) = 5, stage1
    # max(2, out 5) = 5: GPipe 15 (one stage: 20 + 3 = 23). The forward tensors priced in the backward pass: 16
    ops = [Op(name="f0", work=10, out_bytes=6, group="a"), Op(name="f1", work=10, group="b"),
           Op(name="b1", work=2, out_bytes=5, backward=True, group="b"), Op(name="b0", work=1, backward=True, group="a")]
    problem = Problem(Graph(ops, [("f0", "f1"), ("f1", "b1"), ("b1", "b0")]), Cluster.stages(2), GPipe(overlap="full"))
    best, _ = brute_force(problem)
    assert best == 15.0
    _proved_by_every_formulation(problem, 15.0)


@pytest.mark.parametrize("overlap", ["half", "full"])
def test_overflow_counts_on_the_transfer_side_of_an_overlapped_load(overlap):
    # a (work 1, 3 parameter bytes, tensor 2) -> b (work 1, 3 bytes) on stages of memory 2, bandwidth 1:
    # split, each stage streams 1 byte: half max(1, 2 + 1) = 3; full max(1, 0, 2 + 1) = 3 on the writer.
    # One stage streams 4: max(2, 4) = 4. Subtracting the overflow would price the split at 1 (half) or 2 (full)
    g = Graph([Op(name="a", work=1, param_bytes=3, out_bytes=2), Op(name="b", work=1, param_bytes=3)], [("a", "b")])
    problem = Problem(g, Cluster.stages(2, memory=2.0), Bottleneck(overlap=overlap), [Overflow()])
    best, _ = brute_force(problem)
    assert best == 3.0
    _proved_by_every_formulation(problem, 3.0)


def test_training_gpipe_solves_with_the_overflow_in_the_forward_pass():
    # the problem of the warm-start test above, solved: 8 (without the forward overflow the model would say 6)
    problem = _training_overflow_problem()
    _proved_by_every_formulation(problem, 8.0)


# ---------------------------------------------------------------------------- contiguity of the backward pass
def _backward_contiguity_problem(objective, cpu: bool = False) -> Problem:
    """f (1) -> b1 (2) -> b2 (4) -> b3 (2), b1..b3 backward, no tensors, two stages: {f, b1, b3} | {b2} balances at 5
    but leaves stage0's backward part and comes back; contiguous, the best is {f, b1} | {b2, b3} = 6 (throughput).
    ``cpu``: an accelerator and a CPU, f runs on the accelerator only."""
    ops = [Op(name="f", work={"accelerator": 1.0} if cpu else 1), Op(name="b1", work=2, backward=True),
           Op(name="b2", work=4, backward=True), Op(name="b3", work=2, backward=True)]
    g = Graph(ops, [("f", "b1"), ("b1", "b2"), ("b2", "b3")])
    return Problem(g, Cluster.accelerators(1, cpus=1) if cpu else Cluster.stages(2), objective, [Contiguous()])


def _contiguity_binds(problem, best, loose):
    """Contiguity lifts the brute-force optimum from ``loose`` to ``best``, which every formulation proves."""
    assert brute_force(problem)[0] == best and brute_force(without(problem, Contiguous))[0] == loose
    _proved_by_every_formulation(problem, best)


@pytest.mark.parametrize("objective, best", [(Throughput(), 6.0), (GPipe(), 7.0)], ids=["throughput", "gpipe"])
def test_backward_contiguity_binds_in_every_formulation(objective, best):
    _contiguity_binds(_backward_contiguity_problem(objective), best, 5.0)


def test_contiguity_warm_start_marks_what_each_op_reaches():
    # the contiguous optimum {b2, b3} | {f, b1} (the backward pass flows back to stage0, as the chain model lays it
    # out): z[v, d, p] = 1 iff an op of (d, p) is reachable from v, v included
    problem = _backward_contiguity_problem(Throughput())
    placement = problem.placement([1, 1, 0, 0])
    assert problem.is_valid(placement) and problem.evaluate(placement).objective == 6.0
    for name in _accepting(problem):
        c, values = _warm(problem, name, placement)
        z = {v.name.split("z[")[1].rstrip("]"): x for v, x in values.items()
             if v.parent_component().local_name == "z"}
        if not z:  # the chain formulation orders the stages instead
            continue
        assert z["f,stage1,forward"] == 1 and z["b1,stage1,forward"] == 0, name
        assert z["f,stage1,backward"] == z["b1,stage1,backward"] == 1 and z["b2,stage1,backward"] == 0, name
        assert z["f,stage0,backward"] == z["b3,stage0,backward"] == 1 and z["b3,stage0,forward"] == 0, name
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(6.0), name


def _pass_crossing_problem(grouped: bool) -> Problem:
    """f1 -> b -> f2 with b a backward op feeding a forward one: a device holding f1 and f2 leaves its forward set
    through b and comes back, whether or not b sits on it too.

    ``grouped=False``: works 2, 3, 1, no tensors: {f1, f2} | {b} balances at 3 but is not contiguous; contiguous,
    {f1} | {b, f2} = 4. ``grouped=True``: f1 and b colocated, 10-byte tensors, works 1: one stage (3) is not
    contiguous either; the best split {f1, b} | {f2} pays 1 + 1 + 10 = 12 on stage0."""
    if grouped:
        ops = [Op(name="f1", work=1, out_bytes=10, group="g"), Op(name="b", work=1, out_bytes=10, backward=True,
                                                                   group="g"), Op(name="f2", work=1)]
    else:
        ops = [Op(name="f1", work=2), Op(name="b", work=3, backward=True), Op(name="f2", work=1)]
    return Problem(Graph(ops, [("f1", "b"), ("b", "f2")]), Cluster.stages(2), Throughput(), [Contiguous()])


@pytest.mark.parametrize("grouped, best", [(False, 4.0), (True, 12.0)])
def test_a_forward_set_left_through_a_backward_op_is_not_contiguous(grouped, best):
    _contiguity_binds(_pass_crossing_problem(grouped), best, 3.0)


def test_contiguity_holds_per_pass_not_for_both_passes_at_once():
    # the training split {f0, b0} | {f1, b1} of the asymmetric problem: each pass is contiguous on each stage, but
    # f0 -> f1 -> b1 -> b0 leaves stage0 and comes back, so one set over both passes would refuse it (one stage: 16)
    problem = _asymmetric_training_problem(GPipe())
    problem = Problem(problem.graph, problem.cluster, problem.objective, [Contiguous()])
    assert brute_force(problem)[0] == 14.0
    _proved_by_every_formulation(problem, 14.0)


def test_chain_refuses_a_forward_op_that_reads_a_backward_one():
    # its answer on this graph broke contiguity (solve's re-check refused it): the DP class mirrors the backward
    # ops on the forward chain, which a gradient feeding a forward op does not follow
    problem = _pass_crossing_problem(False)
    reason = get("chain").accepts(problem)
    assert reason is not None and reason.startswith("chain formulation: forward op 'f2' reads backward op 'b', ")
    with pytest.raises(SpecError, match="forward op 'f2' reads backward op 'b'"):
        solve(problem, formulation="chain")


def test_backward_contiguity_holds_on_a_device_no_forward_op_may_use():
    # f runs on the accelerator only; the CPU takes backward ops. {f, b2} | {b1, b3} balances at 5 but the CPU's
    # backward part is left through the accelerator and re-entered; contiguous, the best is 6
    _contiguity_binds(_backward_contiguity_problem(Throughput(), cpu=True), 6.0, 5.0)


def test_chain_refuses_templates_of_cluster_order_by_name():
    # the chain orders slots (Y), not devices: a template that asks for y(v, b) (here Archer's cut) is refused
    from placement_dsl.blocks.chain import AncestorCuts, ChainAssignment, ChainOrder, CpuGaps

    with_y = get("chain").derive("chain_with_archers_cut", skeleton=lambda p: [
        CpuGaps(), ChainAssignment(), ChainOrder(), TensorCut(form="archer"), AncestorCuts()])
    g = Graph([Op(name="u", work=1, out_bytes=1), Op(name="v", work=1)], [("u", "v")])
    with pytest.raises(SpecError, match=_whole(
            "chain formulation: y (device b or earlier in cluster order) is undefined; the chain's order is over "
            "slots (Y), so templates of cluster order (dag_order, Archer's cut) do not apply")):
        compile(Problem(g, Cluster.stages(2), Bottleneck()), with_y)


# ---------------------------------------------------------------------------- blocks/base.py
def test_activation_bytes_count_toward_memory_in_the_model():
    # a -> b, 1 parameter byte and 3 activation bytes each, 5 bytes per accelerator: together (load 2) they do not
    # fit, so b reads a's 10-byte tensor on the other accelerator: 1 + 10
    from placement_dsl.constraints import Memory

    ops = [Op(name="a", work=1, param_bytes=1, activation_bytes=3, out_bytes=10),
           Op(name="b", work=1, param_bytes=1, activation_bytes=3)]
    problem = Problem(Graph(ops, [("a", "b")]), Cluster.accelerators(2, memory=5.0), Throughput(), [Memory()])
    r = solve(problem, formulation="throughput", solver="highs", time_limit=30)
    assert (r.objective, r.bound) == (11.0, pytest.approx(11.0)) and brute_force(problem)[0] == 11.0


def test_ops_colocated_with_no_common_device_are_named():
    from placement_dsl.errors import InfeasibleError

    ops = [Op(name="a", work={"accelerator": 1}), Op(name="b", work={"cpu": 1}), Op(name="c", work=1)]
    problem = Problem(Graph(ops), Cluster.accelerators(1, cpus=1), Throughput(), [Colocate([["a", "b"]])])
    with pytest.raises(InfeasibleError) as err:
        Context(problem)
    assert str(err.value) == ("op(s) ['a', 'b'] have no device they may all run on; relax AllowedKinds/colocation "
                              "or add a device of a suitable kind")


@dataclass(frozen=True)
class Ping(Link):
    """A link no library template provides (for the build-order tests)."""


@dataclass(frozen=True)
class Pong(Link):
    """A second such link."""


def test_links_missing_twice_provided_or_in_a_cycle_are_named():
    class Needs(BlockTemplate):
        def __init__(self, provides, needs):
            self.provides, self.needs = provides, needs

        def __repr__(self):
            return f"Needs({[k.__name__ for k in self.needs]})"

    with pytest.raises(SpecError) as err:
        build_order([Needs((), (Ping,))])
    assert str(err.value) == ("formulation: template Needs(['Ping']) needs ['Ping'], which no template of the "
                              "formulation provides; add the template that provides it")
    with pytest.raises(SpecError) as err:
        build_order([Needs((Ping,), (Pong,)), Needs((Pong,), (Ping,))])
    assert str(err.value) == ("formulation: templates [\"Needs(['Pong'])\", \"Needs(['Ping'])\"] need links from one "
                              "another in a cycle")
    ctx = Context(Problem(Graph([Op(name="a", work=1)]), Cluster.accelerators(1), Throughput()))
    ctx.provide(Ping())
    with pytest.raises(SpecError) as err:
        ctx.provide(Ping())
    assert str(err.value) == ("formulation: a template provides Ping, which another template already provides; keep "
                              "one of them")
    with pytest.raises(SpecError) as err:
        ctx.link(Pong)
    assert str(err.value) == ("formulation: Pong is needed but no template provides it; add a template that does "
                              "(see BlockTemplate.provides)")


def test_ready_templates_are_built_lower_stage_first_then_in_the_given_order():
    """The model reads like the paper's figure (variables, structure, cuts, costs, objective) whatever order a
    derived formulation lists its templates in; links still come first (``Late`` needs what ``Cut`` provides)."""
    def template(name, stage, provides=(), needs=()):
        return type(name, (BlockTemplate,), {"stage": stage, "provides": provides, "needs": needs,
                                             "__repr__": lambda self: name})()

    listed = [template("Objective", Stage.OBJECTIVE), template("Late", Stage.ASSIGN, needs=(Ping,)),
              template("Cut", Stage.CUT, provides=(Ping,)), template("Assign", Stage.ASSIGN),
              template("Structure", Stage.STRUCTURE), template("Assign2", Stage.ASSIGN)]
    assert [repr(t) for t in build_order(listed)] == ["Assign", "Assign2", "Structure", "Cut", "Late", "Objective"]


# ---------------------------------------------------------------------------- model units and the library
def test_bytes_are_in_units_of_the_largest_capacity():
    # capacities 16e9 and 8e9 bytes (a host without a limit): bytes divide by 16e9, so the largest capacity is 1 and
    # an op of 4e9 parameter and 4e9 activation bytes is 0.5 (unscaled, rows would mix 1e9 with unit times)
    g = Graph([Op(name="a", work=1, param_bytes=4e9, activation_bytes=4e9), Op(name="b", work=1, param_bytes=2e9)],
              [("a", "b")])
    devs = [Device(name="big", memory=16e9), Device(name="small", memory=8e9),
            Device(name="cpu", kind="cpu", host=True)]
    ctx = Context(Problem(g, Cluster(devs), Throughput()))
    assert ctx.scale.memory == 16e9
    np.testing.assert_allclose(ctx.capacity, [1.0, 0.5, np.inf])
    np.testing.assert_allclose(ctx.mem, [0.5, 0.125])


def test_a_problem_with_no_cost_at_all_solves_to_zero():
    # no work and no bytes anywhere: the time unit falls back to 1 (a zero unit would divide every row by 0)
    g = Graph([Op(name="a", work=0, out_bytes=0), Op(name="b", work=0)], [("a", "b")])
    problem = Problem(g, Cluster.accelerators(2), Throughput(), [Contiguous()])
    assert Context(problem).scale.time == 1.0
    _proved_by_every_formulation(problem, 0.0)


def test_a_host_streams_no_overflow():
    # soft memory: a (100 parameter bytes) runs in 1 on the CPU (a host of 1 byte, which pays no overflow) and in 1 on
    # the 1-byte accelerator, where its 99 bytes beyond memory stream at bandwidth 1: the CPU is the optimum, 1
    g = Graph([Op(name="a", work=1, param_bytes=100)])
    devs = [Device(name="acc", memory=1.0, bandwidth=1.0), Device(name="cpu", kind="cpu", host=True, memory=1.0)]
    problem = Problem(g, Cluster(devs), Throughput(), [Overflow()])
    best, placement = brute_force(problem)
    assert best == 1.0 and placement.mapping() == {"a": "cpu"}
    assert Context(problem).overflow_rate[1] == 0.0
    _proved_by_every_formulation(problem, 1.0)


def test_a_registered_template_is_listed_by_its_block_name_and_a_nameless_one_refused():
    from placement_dsl.blocks.base import TEMPLATES, register

    class Named(BlockTemplate):
        name = "named_for_the_test"

    class Nameless(BlockTemplate):
        pass

    try:
        assert register(Named) is Named and TEMPLATES[Named] == "named_for_the_test"
        with pytest.raises(SpecError) as err:
            register(Nameless)
        assert str(err.value) == "template Nameless needs a block name" and Nameless not in TEMPLATES
    finally:
        TEMPLATES.pop(Named, None)


def test_the_schedule_a_placement_carries_is_its_warm_start():
    # a (1) and b (2) on one accelerator: list scheduling runs b first (higher upward rank); a placement that
    # carries "a at 0, b at 1" (valid, same makespan 3) starts the schedule MILP from that order, not the list one
    from placement_dsl.objectives import Makespan
    from placement_dsl.placement import Placement
    from placement_dsl.schedule import Schedule, list_schedule

    g = Graph([Op(name="a", work=1), Op(name="b", work=2)])
    problem = Problem(g, Cluster.accelerators(1), Makespan())
    assert list_schedule(Placement(g, problem.cluster, [0, 0])).start.tolist() == [2.0, 0.0]
    carried = Placement(g, problem.cluster, [0, 0], schedule=Schedule(np.array([0.0, 1.0]), {}))
    c, values = _warm(problem, "schedule", carried)
    assert c.objective_scale == 3.0  # model time unit: the total work on the one device
    assert (_by_name(values, "S[a]"), _by_name(values, "S[b]")) == (0.0, pytest.approx(1 / 3))
    assert _by_name(values, "first[a,b].binary_indicator_var") == 1.0


def test_warm_start_on_a_routed_cluster_prices_each_pass_with_its_own_tensors():
    # training on two servers (inter-server bandwidth 1): forward fa (2) -> fb (2) sends 1 byte, backward gb (1) ->
    # ga (1) sends a 3-byte gradient; {fa, ga} | {fb, gb}. The backward routes cost 3, the forward ones 1, so the
    # warm start's objective is the cost model's only if each pass reads its own tensors' routes
    ops = [Op(name="fa", work=2, out_bytes=1, group="a"), Op(name="fb", work=2, out_bytes=1, group="b"),
           Op(name="gb", work=1, out_bytes=3, backward=True, group="b"),
           Op(name="ga", work=1, backward=True, group="a")]
    g = Graph(ops, [("fa", "fb"), ("fb", "gb"), ("gb", "ga")])
    problem = Problem(g, Cluster.hierarchical(2, 1, intra=10.0, inter=1.0), Throughput(), [Contiguous()])
    placement = problem.placement([0, 1, 1, 0])
    cost = problem.evaluate(placement).objective
    assert cost == 7.0  # each server: compute 3, the forward tensor 1 and the gradient 3 (no overlap)
    names = _accepting(problem)
    for name in names:
        c, _ = _warm(problem, name, placement)
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(cost), name
