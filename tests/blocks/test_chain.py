"""The chain templates (blocks/chain.py): position windows, CPUs in the gaps between accelerators, ancestor cuts,
the tensor-out rows, and the pins and templates the chain refuses by name.
"""
from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest

from placement_dsl.blocks.base import Context
from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.conformance import check_documented
from placement_dsl.constraints import Colocate, Contiguous
from placement_dsl.formulations import get
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.testing import brute_force


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
        "formulation 'chain': Pin('u', 'acc1') ties an op to one of 3 interchangeable accelerators, which the chain's "
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


