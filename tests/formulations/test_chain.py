"""The chain formulation: optimum over the DP's class, warm starts, and the validity of the windows."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl import testing
from placement_dsl.bounds import chain_data
from placement_dsl.cluster import Cluster
from placement_dsl.compile import compile
from placement_dsl.constraints import Contiguous, Memory
from placement_dsl.errors import InfeasibleError, SpecError
from placement_dsl.evaluate import evaluate
from placement_dsl.formulations.chain import LoadTarget, certified_bound, chain_problem
from placement_dsl.objectives import PipeDream, Throughput
from placement_dsl.placement import Placement, PlacementClass
from placement_dsl.presets import problem_for_method
from placement_dsl.problem import Problem
from placement_dsl.solve import solve
from placement_dsl.solvers import Status


def in_class(problem: Problem, assign: np.ndarray) -> bool:
    """DAG-ordered with CPUs in gaps, checked without the model: some choice of CPU gaps orders every forward edge.

    Sequence key of a device: accelerator ``b`` -> ``(b, l)``; CPU ``j`` in gap ``t`` -> ``(t, j)``.
    """
    g, c = problem.graph, problem.cluster
    data = chain_data(g, c)
    acc, cpu = np.flatnonzero(~c.host), np.flatnonzero(c.host)
    device = np.zeros(data.size, dtype=np.int64)
    device[data.group] = assign
    for gaps in itertools.product(range(1, data.k + 2), repeat=data.l):
        key = {int(d): (b + 1, data.l) for b, d in enumerate(acc)}
        key.update({int(d): (gaps[j], j) for j, d in enumerate(cpu)})
        if all(key[device[u]] <= key[device[v]] for u, v in data.chain_edges.tolist()):
            return True
    return False


def class_placements(problem: Problem) -> list[tuple[float, Placement]]:
    """Every valid placement of the class with its cost-model objective (brute force)."""
    g, c = problem.graph, problem.cluster
    reps = np.unique(g.group_id)
    where = np.searchsorted(reps, g.group_id)
    model, out = problem.cost_model(), []
    for combo in itertools.product(range(c.size), repeat=len(reps)):
        assign = np.asarray(combo, dtype=np.int64)[where]
        if not in_class(problem, assign):  # the cheap test first: most placements are outside the class
            continue
        placement = problem.placement(assign)
        ev = evaluate(placement, model)  # valid, then the terms' own checks: problem.violations without a 2nd evaluation
        if ev.valid and not any(term.check(placement) for term in problem.constraints):
            out.append((ev.objective, placement))
    return out


def tiny(seed: int, n: int, cpus: int, training: bool = False) -> Problem:
    rng = np.random.default_rng(seed)
    graph = testing.random_graph(rng, n, density=0.5)
    cluster = Cluster.accelerators(2, memory=float(rng.integers(6, 20)), cpus=cpus)
    return Problem(graph, cluster, Throughput(), [Memory(), Contiguous()])


def test_accelerators_cpu_instance():
    problem, optimum = testing.accelerators_cpu()
    result = solve(problem, formulation="chain", solver="highs", time_limit=20, warm_start="none")  # the model's proof
    assert result.objective == pytest.approx(optimum)
    assert result.bound == pytest.approx(optimum, rel=1e-6)


def test_structure_counts():
    """O(Gk) slot variables, O(G l (k+1)) CPU-gap variables, one cut per group."""
    problem, _ = testing.accelerators_cpu()
    size = compile(problem, "chain").size()
    groups, k, l = 3, 2, 1
    assert size["assignment"]["variables"] == groups * k
    assert size["cpu_gaps"]["variables"] == l * (k + 1) + groups * l * (k + 1)
    assert size["ancestor_cuts"]["constraints"] >= groups
    assert "contiguity" not in size


def test_accelerators_that_differ_are_refused_before_building():
    """The chain's slots stand for interchangeable accelerators: one of 5 bytes beside an unlimited one is refused by
    ``accepts`` (it used to accept and raise while building, so ``auto`` and the conformance runs met an error)."""
    from placement_dsl.formulations import get

    problem, _ = testing.overflow_unlimited()
    assert get("chain").accepts(problem) == (
        "formulation 'chain': chain bounds need identical accelerators; got devices ['acc0', 'acc1'] with different "
        "kind, speed, memory or bandwidth; use formulation='throughput'")


def test_cyclic_colocation_is_outside_the_class():
    """A colocation group closing a cycle with a pinned op and a CPU-only op leaves no DAG-ordered split; the chain
    refuses the pin (to one of two interchangeable accelerators) and solves the unpinned problem over its class."""
    from placement_dsl.constraints import Pin
    from placement_dsl.formulations import get

    problem, _ = testing.colocated_pinned()
    assert not class_placements(problem)
    assert "Pin('op1', 'acc1') ties an op to one of 2 interchangeable accelerators" in get("chain").accepts(problem)
    unpinned = testing.without(problem, Pin)
    feasible = class_placements(unpinned)
    result = solve(unpinned, formulation="chain", solver="highs", time_limit=20)
    assert result.objective == pytest.approx(min(obj for obj, _ in feasible))


@settings(max_examples=12)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 5), cpus=st.integers(0, 2))
def test_optimum_is_brute_force_over_the_class_whose_placements_satisfy_the_model(seed, n, cpus):
    """The class's brute force, enumerated once per instance: each placement's warm values satisfy the model's
    rows, and the solved optimum is the class's best."""
    problem = tiny(seed, n, cpus)
    feasible = class_placements(problem)
    compiled = compile(problem, "chain")
    for _, placement in feasible:
        worst, where = compiled.varmap.residual(compiled.varmap.values(placement))
        assert worst <= 1e-9, where
    result = solve(problem, formulation="chain", solver="highs", time_limit=20)
    if not feasible:
        assert result.placement is None
        return
    best = min(obj for obj, _ in feasible)
    assert result.objective == pytest.approx(best, rel=1e-6, abs=1e-9)
    assert in_class(problem, result.placement.assign)


@settings(max_examples=12)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 5), cpus=st.integers(0, 1), slack=st.floats(0.0, 0.3))
def test_windows_keep_every_split_within_the_target(seed, n, cpus, slack):
    problem = tiny(seed, n, cpus)
    feasible = class_placements(problem)
    if not feasible:
        return
    target = min(obj for obj, _ in feasible) * (1 + slack)
    windowed = chain_problem(problem, target)
    compiled = compile(windowed, "chain")
    for obj, placement in feasible:
        if obj <= target:
            worst, where = compiled.varmap.residual(compiled.varmap.values(placement))
            assert worst <= 1e-9, where


def test_windows_certify_below_the_target():
    """With T* below the optimum the windowed model's bound is >= T* (or it is infeasible): min(T*, bound) = T*."""
    problem, optimum = testing.accelerators_cpu()
    target = optimum / 1.01
    windowed = chain_problem(problem, target)
    assert [t.target for t in windowed.find(LoadTarget)] == [target]
    result = solve(windowed, formulation="chain", solver="highs", time_limit=20)
    assert certified_bound(windowed, result.bound) == pytest.approx(target)
    assert certified_bound(problem, 3.0) == 3.0


def test_the_target_is_the_solvers_cutoff(monkeypatch):
    """Only placements below T* matter: the solver gets a cutoff just above T* (in model units), so a placement of
    max load T* survives and min(T*, bound) stays the certificate."""
    import placement_dsl.solve as solve_module
    from placement_dsl.formulations.chain import CUTOFF_SLACK

    seen = []
    real = solve_module.solve_model
    monkeypatch.setattr(solve_module, "solve_model", lambda model, solver, options, start: seen.append(options.cutoff)
                        or real(model, solver, options, start))
    problem, optimum = testing.accelerators_cpu()
    scale = compile(chain_problem(problem, optimum), "chain").objective_scale
    above = solve(chain_problem(problem, optimum * 1.01), formulation="chain", solver="highs", time_limit=20,
                  warm_start="none")  # the target's cutoff alone, not a start's
    assert above.status is Status.OPTIMAL and above.objective == pytest.approx(optimum)
    solve(problem, formulation="chain", solver="highs", time_limit=20, warm_start="none")
    assert seen[0] * scale == pytest.approx(optimum * 1.01 * (1 + CUTOFF_SLACK), rel=1e-12) and seen[1] is None
    assert 0 < CUTOFF_SLACK <= 1e-6


def test_a_term_without_a_rule_is_refused_not_dropped():
    """A load target means windows in the chain formulation; elsewhere it has no rule, which is an error."""
    problem, optimum = testing.accelerators_cpu()
    with pytest.raises(SpecError, match="'throughput': no rule for term LoadTarget"):
        solve(chain_problem(problem, optimum / 2), formulation="throughput", solver="highs", time_limit=20)


def test_training_pipedream_with_colocated_passes():
    """PipeDream loads (forward + backward) with each backward op colocated with its forward op."""
    from placement_dsl.constraints import Colocate

    problem = Problem(testing.training_graph(), Cluster.accelerators(2, cpus=1), PipeDream(),
                      [Contiguous(), Colocate([[f"f{i}", f"g{i}"] for i in range(3)])])
    best = min(obj for obj, _ in class_placements(problem))
    result = solve(problem, formulation="chain", solver="highs", time_limit=20)
    assert result.objective == pytest.approx(best)


@pytest.mark.parametrize("cpus", [0, 1])
def test_training_backward_tensors_leave_the_later_stage(cpus):
    """Colocated passes on two accelerators: the gradient g1 -> g0 runs against the chain's order, so the later
    stage writes it (x(u, d) - x(v, d)); the cumulative form ``x(u, d) - Y[v, b]`` holds for forward edges only
    (it would drop that write: 13 instead of 14). With a CPU, the forward edges' CPU ends keep the plain form."""
    from placement_dsl.constraints import Colocate

    problem = Problem(testing.training_graph(), Cluster.accelerators(2, cpus=cpus), PipeDream(),
                      [Contiguous(), Colocate([[f"f{i}", f"g{i}"] for i in range(3)])])
    best = min(obj for obj, _ in class_placements(problem))
    assert best == (14.0 if cpus == 0 else 9.0)
    result = solve(problem, formulation="chain", solver="highs", time_limit=20)
    assert result.objective == pytest.approx(best) and result.bound == pytest.approx(best)


def test_windows_close_cpu_positions_above_the_target():
    """At T* = the optimum (4) the windows cut the class placements above it that use the CPU in a gap whose
    floor tau_cpu exceeds T*, by their CPU rows (and never a placement at or below T*)."""
    problem, optimum = testing.accelerators_cpu()
    compiled = compile(chain_problem(problem, optimum), "chain")
    rows = set()
    for obj, placement in class_placements(problem):
        worst, where = compiled.varmap.residual(compiled.varmap.values(placement))
        if worst > 1e-9:
            assert obj > optimum
            rows.add(str(where).split("[")[0])
    assert "position_windows.window_cpu" in rows


def test_dp_start_on_bert24_has_zero_residual_and_is_optimal(dnn_partitioning):
    from placement_dsl.heuristics import run
    from placement_dsl.io import load_workload

    path = dnn_partitioning / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
    problem = problem_for_method(load_workload(path), method="ip")
    dp = run("dp", problem.graph, problem.cluster, model=problem.cost_model())
    compiled = compile(problem, "chain")
    assert compiled.varmap.residual(compiled.varmap.values(dp.placement))[0] <= 1e-7
    result = solve(chain_problem(problem, dp.objective / 1.01), formulation="chain", solver="highs", time_limit=30)
    assert certified_bound(chain_problem(problem, dp.objective / 1.01), result.bound) >= dp.objective / 1.01 - 1e-6
    assert math.isfinite(dp.objective)


def test_windowed_solve_certifies_bert24_within_one_percent(dnn_partitioning):
    from placement_dsl.io import load_workload

    path = dnn_partitioning / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
    problem = problem_for_method(load_workload(path), method="ip")
    result = solve(problem, formulation="chain", warm_start="dp", gap=0.01, time_limit=60)
    assert result.objective == pytest.approx(17.79, abs=0.005)  # Tarnawski Table 1, dp_tps
    assert result.gap <= 0.01 + 1e-9 and result.bound <= result.objective
    assert result.status is Status.OPTIMAL and result.bound_scope is PlacementClass.DP
    assert problem.evaluate(result.placement).objective == pytest.approx(result.objective)


def ordered(seed: int, n: int, cpus: int, contiguous: bool) -> Problem:
    """A tiny Throughput problem under DagOrder (the cluster's device order, CPUs listed last)."""
    from placement_dsl.constraints import DagOrder

    rng = np.random.default_rng(seed)
    cluster = Cluster.accelerators(2, memory=float(rng.integers(6, 20)), cpus=cpus)
    return Problem(testing.random_graph(rng, n, density=0.5), cluster, Throughput(),
                   [Memory(), DagOrder(), *([Contiguous()] if contiguous else [])])


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 5), cpus=st.integers(1, 2), contiguous=st.booleans())
def test_dag_order_keeps_cpus_where_the_cluster_lists_them(seed, n, cpus, contiguous):
    # DagOrder orders the cluster's devices as listed, CPUs included; the chain put a CPU in any gap of the
    # accelerators, so an edge from the CPU into an accelerator listed before it came back (EvaluationMismatchError)
    from placement_dsl.brute import brute_force

    problem = ordered(seed, n, cpus, contiguous)
    try:
        best, _ = brute_force(problem)
    except InfeasibleError:
        best = None
    result = solve(problem, formulation="chain", solver="highs", time_limit=20, gap=0.0)
    if best is None:
        assert result.placement is None
        return
    assert result.objective == pytest.approx(best, rel=1e-6, abs=1e-9)
    assert problem.is_valid(result.placement)
    compiled = compile(problem, "chain")  # the optimum, as a start, satisfies the model
    worst, where = compiled.varmap.residual(compiled.varmap.values(result.placement))
    assert worst <= 1e-9, where
