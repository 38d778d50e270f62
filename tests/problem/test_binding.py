"""Instances on which each constraint changes the optimum, and MIP = brute force on draws where they bind.

A formulation that drops a constraint still solves every instance where the constraint is
slack; these instances (listed in ``testing.INSTANCES``, so every formulation and every native
solver solves them in test_formulations.py and test_solve.py) catch it.
"""
from __future__ import annotations

import pyomo.environ as pyo
import pytest
from hypothesis import HealthCheck, given, settings

from placement_dsl import testing
from placement_dsl.constraints import AllowedKinds, Colocate, Contiguous, DagOrder, Memory, Pin
from placement_dsl.formulations import FORMULATIONS
from placement_dsl.solvers import Status
from placement_dsl.testing import BINDING, INSTANCES, binding, brute_force, optimum, record_binding, without

pytestmark = pytest.mark.skipif(not pyo.SolverFactory("appsi_highs").available(exception_flag=False),
                                reason="HiGHS is not installed")


def test_every_constraint_kind_has_a_binding_instance():
    assert {term for _, term, _ in BINDING.values()} >= {Contiguous, DagOrder, Colocate, Pin, AllowedKinds, Memory}
    for name, (instance, _, _) in BINDING.items():
        assert INSTANCES[name] is instance  # so the known-optimum tests solve it with every formulation and solver


@pytest.mark.parametrize("name", sorted(BINDING))
def test_constraint_changes_the_optimum(name):
    instance, term, loose_optimum = BINDING[name]
    problem, known = instance()
    best, placement = brute_force(problem)
    assert best == pytest.approx(known) and problem.is_valid(placement)
    relaxed = without(problem, term)
    loose, loose_placement = brute_force(relaxed)
    assert loose == pytest.approx(loose_optimum)
    assert loose < known - 1e-9, f"{term.__name__} does not bind on {name}"
    assert not problem.is_valid(problem.placement(loose_placement.assign))  # cheaper, so it breaks the constraint
    assert binding(problem, term) == pytest.approx((known, loose_optimum))


@pytest.mark.parametrize("name", sorted(BINDING))
def test_solve_finds_both_optima(name):
    """With the constraint the MIP finds the known optimum; without it the lower one (nothing else holds it up)."""
    from placement_dsl.solve import solve

    instance, term, loose_optimum = BINDING[name]
    problem, known = instance()
    for target, value in ((problem, known), (without(problem, term), loose_optimum)):
        result = solve(target, solver="highs", time_limit=20)
        assert result.status is Status.OPTIMAL, result.message
        assert result.objective == pytest.approx(value, rel=1e-9), (name, target)


def _exact_formulations() -> dict:
    """The formulations whose optimum is the problem's (by kind where the registry records one)."""
    try:
        from placement_dsl.formulations import Kind, of_kind
    except ImportError:
        return dict(FORMULATIONS)
    return of_kind(Kind.EXACT)


def _formulations(problem) -> list[str]:
    """The exact formulations that take ``problem`` (one may refuse it: ``accepts`` gives the reason)."""
    return [name for name, f in sorted(_exact_formulations().items())
            if not getattr(f, "accepts", lambda p: None)(problem)]


def _solve_each_formulation(problem) -> dict[str, float]:
    from placement_dsl.solve import solve

    out = {}
    for name in _formulations(problem):
        result = solve(problem, formulation=name, solver="highs", time_limit=20, gap=1e-9)
        assert result.status is Status.OPTIMAL, (name, result.message)
        assert problem.is_valid(result.placement), (name, problem.violations(result.placement))
        out[name] = result.objective
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(testing.structured_problems())
def test_mip_equals_brute_force_where_structure_binds(problem):
    """Every formulation = brute force on draws where contiguity or DAG order usually changes the optimum.

    ``--hypothesis-show-statistics`` shows how often each constraint bound (``<Term> binds``).
    """
    record_binding(problem)
    best = optimum(problem)
    values = _solve_each_formulation(problem)
    assert len(values) >= 2, f"only {sorted(values)} take {problem!r}"
    for name, value in values.items():
        assert value == pytest.approx(best, rel=1e-6, abs=1e-6), (name, problem)
