"""The exact formulations: warm values decode to their placement at the cost model's price, every one proves the
known optima and documents its components, and memory, colocation, overflow and pins bind as brute force says.
"""
from __future__ import annotations

import pyomo.environ as pyo
import pytest

from placement_dsl.cluster import Cluster, Device
from placement_dsl.compile import compile
from placement_dsl.conformance import check_documented
from placement_dsl.constraints import Colocate, Memory, Overflow, Pin
from placement_dsl.errors import InfeasibleError
from placement_dsl.formulations import Kind, of_kind
from placement_dsl.graph import Graph, Op
from placement_dsl.objectives import Bottleneck, Throughput
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import Status
from placement_dsl.testing import INSTANCES, brute_force

FORMULATIONS = of_kind(Kind.EXACT)


# ---------------------------------------------------------------------------- block templates' warm starts
def _compiled_at(problem, placement):
    """Every formulation that accepts ``problem``, compiled, with ``placement``'s warm-start values loaded."""
    for name, formulation in sorted(FORMULATIONS.items()):
        if formulation.accepts(problem):
            continue
        c = compile(problem, name)
        c.varmap.set_values(placement)
        yield name, c


@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_warm_values_decode_to_their_placement_and_price_it_like_the_cost_model(instance):
    # every block's warm-start values (assignment, tensor cut, overflow, objective epigraphs) of the
    # brute-force optimum: the model decodes them back to that placement and its objective is the referee's
    problem, optimum = INSTANCES[instance]()
    _, placement = brute_force(problem)
    checked = 0
    for name, c in _compiled_at(problem, placement):
        assert c.varmap.placement().assign.tolist() == placement.assign.tolist(), name
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(optimum, rel=1e-9), name
        checked += 1
    assert checked


@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_every_exact_formulation_proves_the_known_optimum(instance):
    # the blocks' constraints, solved in this process: a dropped or weakened row lowers the bound below the
    # optimum, a wrong one cuts the optimum off or prices it higher
    problem, optimum = INSTANCES[instance]()
    solved = 0
    for name, formulation in sorted(FORMULATIONS.items()):
        if formulation.accepts(problem):
            continue
        r = solve(problem, formulation=name, solver="highs", time_limit=20, gap=1e-9)
        assert r.objective == pytest.approx(optimum, rel=1e-6), name
        assert r.bound == pytest.approx(optimum, rel=1e-6), name
        solved += 1
    assert solved


@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_every_component_of_every_exact_formulation_is_documented(instance):
    problem, _ = INSTANCES[instance]()
    for name, formulation in sorted(FORMULATIONS.items()):
        if not formulation.accepts(problem):
            assert check_documented(compile(problem, name).model) == [], name


def _mixed_kinds_problem(colocate: bool):
    # one accelerator (memory 4) and one CPU (a host: no transfers); p1, p2 need 3 bytes each and run far faster
    # on the accelerator; c runs on the CPU only and holds no memory (its 0 / not-allowed must not hide the
    # accelerator's capacity)
    ops = [Op(name="p1", work={"accelerator": 1, "cpu": 20}, param_bytes=3, out_bytes=1),
           Op(name="p2", work={"accelerator": 1, "cpu": 10}, param_bytes=3, out_bytes=1),
           Op(name="c", work={"cpu": 1})]
    g = Graph(ops, [("p1", "p2"), ("p2", "c")])
    terms = [Memory()] + ([Colocate([["p1", "c"]], shared=False)] if colocate else [])
    return Problem(g, Cluster.accelerators(1, memory=4.0, cpus=1), Throughput(), terms)


@pytest.mark.parametrize("colocate", [False, True])
def test_memory_and_equality_colocation_bind_with_kind_restricted_ops(colocate):
    problem = _mixed_kinds_problem(colocate)
    best, _ = brute_force(problem)
    # both on the accelerator would need 6 > 4 bytes (max load 2). Without colocation: p1 there (load 1 + its
    # tensor 1), p2 and c on the CPU (10 + 1); with p1 colocated with the CPU-only c: p1, c on the CPU (20 + 1)
    assert best == (11.0 if not colocate else 21.0)
    solved = 0
    for name, formulation in sorted(FORMULATIONS.items()):
        if formulation.accepts(problem):
            continue
        r = solve(problem, formulation=name, solver="highs", time_limit=20, gap=1e-9)
        assert (r.objective, r.bound) == (pytest.approx(best), pytest.approx(best)), name
        solved += 1
    assert solved


def test_overflow_is_zero_on_a_device_whose_memory_cannot_overflow():
    # "small" (memory 2) may overflow, "big" (unbounded) never does and gets no overflow variable.
    # a (work 1, 5 bytes, tensor 1) -> b (work 1, 1 byte): a on big and b on small costs max(1 + 1, 1 + 1) = 2,
    # and so does everything on big; a on small overflows by 3
    g = Graph([Op(name="a", work=1, param_bytes=5, out_bytes=1), Op(name="b", work=1, param_bytes=1)], [("a", "b")])
    cluster = Cluster([Device(name="small", memory=2.0), Device(name="big")])
    problem = Problem(g, cluster, Bottleneck(), [Overflow()])
    best, _ = brute_force(problem)
    assert best == 2.0
    for name, formulation in sorted(FORMULATIONS.items()):
        if not formulation.accepts(problem):
            r = solve(problem, formulation=name, solver="highs", time_limit=20, gap=1e-9)
            assert (r.objective, r.bound) == (pytest.approx(2.0), pytest.approx(2.0)), name


def test_a_pin_where_the_group_cannot_run_is_refused_with_the_reason():
    # a may run on the CPU, but its group mate c may not: the pin cannot hold
    ops = [Op(name="a", work={"accelerator": 1, "cpu": 1}), Op(name="c", work={"accelerator": 1})]
    problem = Problem(Graph(ops, [("a", "c")]), Cluster.accelerators(1, cpus=1), Throughput(),
                      [Colocate([["a", "c"]]), Pin("a", "cpu0")])
    with pytest.raises(InfeasibleError, match=r"Pin\('a', 'cpu0'\): op 'a' or an op colocated with it cannot run "
                                              r"there; pin the group to an allowed device"):
        compile(problem, "throughput")


def test_equality_colocation_of_ops_with_no_common_device_is_infeasible():
    # a runs on the accelerator only, c on the CPU only: colocating them leaves no device
    ops = [Op(name="a", work={"accelerator": 1}, out_bytes=1), Op(name="c", work={"cpu": 1})]
    problem = Problem(Graph(ops, [("a", "c")]), Cluster.accelerators(1, cpus=1), Throughput(),
                      [Colocate([["a", "c"]], shared=False)])
    for name, formulation in sorted(FORMULATIONS.items()):
        if not formulation.accepts(problem):
            assert solve(problem, formulation=name, solver="highs", time_limit=20).status is Status.INFEASIBLE, name


def test_warm_start_prices_the_overflow_of_the_optimum():
    # a and b hold 3 bytes each on stages of memory 2: split, each stage streams 1 byte (load 1 + 1 = 2);
    # together they stream 4 (load 2 + 4). The warm start's bottleneck must include the overflow.
    g = Graph([Op(name="a", work=1, param_bytes=3), Op(name="b", work=1, param_bytes=3)], [("a", "b")])
    problem = Problem(g, Cluster.stages(2, memory=2.0), Bottleneck(), [Overflow()])
    best, placement = brute_force(problem)
    assert best == 2.0
    for name, c in _compiled_at(problem, placement):
        assert pyo.value(c.objective) * c.objective_scale == pytest.approx(2.0), name


