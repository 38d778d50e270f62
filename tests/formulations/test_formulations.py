"""Every formulation reproduces the known optima, and equals brute force on random tiny DAGs."""
from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placement_dsl import Cluster, InfeasibleError
from placement_dsl.compile import compile
from placement_dsl.constraints import Contiguous, DagOrder, Memory, Overflow
from placement_dsl.errors import SpecError
from placement_dsl.formulations import Kind, choose, of_kind

FORMULATIONS = of_kind(Kind.EXACT)  # formulations whose optimum is the problem's
from placement_dsl.objectives import Bottleneck, GPipe, PipeDream, Throughput
from placement_dsl.problem import Problem
from placement_dsl.testing import INSTANCES, brute_force, random_graph

pytestmark = pytest.mark.skipif(not pyo.SolverFactory("appsi_highs").available(exception_flag=False),
                                reason="HiGHS (appsi_highs) is not installed")


def solve(problem: Problem, formulation: str, warm=None, expect=pyo.TerminationCondition.optimal):
    """Solve with HiGHS directly; returns (MIP objective in cost units, decoded placement)."""
    c = compile(problem, formulation)
    if warm is not None:
        for v, x in c.varmap.values(warm).items():
            v.set_value(x)
    solver = pyo.SolverFactory("appsi_highs")
    solver.config.time_limit = 20
    solver.config.stream_solver = False
    solver.highs_options = {"threads": 1, "mip_rel_gap": 1e-9}
    result = solver.solve(c.model, load_solutions=expect == pyo.TerminationCondition.optimal)
    assert result.solver.termination_condition == expect
    if expect != pyo.TerminationCondition.optimal:
        return None, None
    return pyo.value(c.objective) * c.objective_scale, c.varmap.placement()


@pytest.mark.parametrize("formulation", sorted(FORMULATIONS))
@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_known_optima(instance, formulation):
    """A formulation that accepts the instance reaches its optimum; one that does not refuses to compile it with
    its reason (a one-line error, not a model that answers something else)."""
    problem, optimum = INSTANCES[instance]()
    reason = FORMULATIONS[formulation].accepts(problem)
    if reason:
        with pytest.raises(SpecError) as refused:
            compile(problem, formulation)
        message = str(refused.value)
        assert message == reason and formulation in message and "\n" not in message
        return
    value, placement = solve(problem, formulation)
    assert value == pytest.approx(optimum, rel=1e-6, abs=1e-9)
    assert problem.is_valid(placement), problem.violations(placement)
    assert problem.evaluate(placement).objective == pytest.approx(optimum, rel=1e-6)


@pytest.mark.parametrize("instance", sorted(INSTANCES))
def test_brute_force_agrees_and_its_optimum_is_a_feasible_warm_start(instance):
    problem, optimum = INSTANCES[instance]()
    best, placement = brute_force(problem)
    assert best == pytest.approx(optimum)
    for name in FORMULATIONS:
        if FORMULATIONS[name].accepts(problem):
            continue
        c = compile(problem, name)
        viol, where = c.varmap.residual(c.varmap.values(placement))
        assert viol <= 1e-9, (name, where)


def test_auto_formulation():
    problem, _ = INSTANCES["chain"]()
    assert choose(problem) == "exact"
    problem, _ = INSTANCES["accelerators_cpu"]()
    assert choose(problem) == "throughput" and compile(problem).formulation.name == "throughput"


OBJECTIVES = {"bottleneck": Bottleneck, "throughput": Throughput, "pipedream": PipeDream, "gpipe": GPipe}
CONSTRAINTS = {"dag": [DagOrder()], "contiguous": [Contiguous()], "memory": [Memory()], "overflow": [Overflow()],
               "none": []}


def random_problem(seed, n, devices, cpus, objective, overlap, structure):
    rng = np.random.default_rng(seed)
    training = objective in ("pipedream", "gpipe")
    g = random_graph(rng, n, density=0.45, training=training)
    memory = float(g.param_bytes.sum()) * 0.6 + 1.0
    cluster = Cluster.accelerators(devices, memory=memory, cpus=cpus)
    return Problem(g, cluster, OBJECTIVES[objective](overlap=overlap), CONSTRAINTS[structure])


problems = st.builds(
    random_problem, seed=st.integers(0, 10_000), n=st.integers(2, 5), devices=st.integers(2, 2),
    cpus=st.integers(0, 1), objective=st.sampled_from(sorted(OBJECTIVES)),
    overlap=st.sampled_from(["none", "half", "full"]), structure=st.sampled_from(sorted(CONSTRAINTS)))


def check_against_brute_force(problem: Problem) -> None:
    try:
        best, placement = brute_force(problem)
    except InfeasibleError:
        for name in FORMULATIONS:
            if not FORMULATIONS[name].accepts(problem):
                solve(problem, name, expect=pyo.TerminationCondition.infeasible)
        return
    for name in FORMULATIONS:
        if FORMULATIONS[name].accepts(problem):
            continue
        value, found = solve(problem, name)
        assert value == pytest.approx(best, rel=1e-6, abs=1e-6), (name, placement.mapping(), found.mapping())
        assert problem.evaluate(found).objective == pytest.approx(best, rel=1e-6, abs=1e-6)


@settings(max_examples=30)
@given(problems)
def test_mip_equals_brute_force(problem):
    check_against_brute_force(problem)


@pytest.mark.slow
@given(st.builds(
    random_problem, seed=st.integers(0, 10_000), n=st.integers(4, 6), devices=st.integers(2, 3),
    cpus=st.integers(0, 1), objective=st.sampled_from(sorted(OBJECTIVES)),
    overlap=st.sampled_from(["none", "half", "full"]), structure=st.sampled_from(sorted(CONSTRAINTS))))
def test_mip_equals_brute_force_larger(problem):
    check_against_brute_force(problem)


@pytest.mark.parametrize("script", ["custom_constraint.py", "custom_formulation.py"])
def test_examples_run(script):
    import runpy
    from pathlib import Path

    runpy.run_path(str(Path(__file__).resolve().parents[2] / "examples" / script), run_name="__main__")
