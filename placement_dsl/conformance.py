"""Conformance checks every registered template and formulation must pass.

Like Pyomo's ``common_tests.check_*(self, "bigm")`` run against every transformation, these
functions take a formulation and a problem with a known optimum and check what the
formulation promises; the test suite runs them over the whole registry
(:data:`~placement_dsl.formulations.FORMULATIONS` × :data:`~placement_dsl.testing.INSTANCES`),
so a newly registered formulation or template is covered without a test of its own:

* :func:`check_template_rows` — for every block of the model, the values its template gives
  a feasible placement satisfy the block's own rows (the warm start is exact);
* :func:`check_formulation` — an exact formulation reaches the brute-force optimum; a
  restriction's optimum is that of the placements it represents (those whose values satisfy
  its rows) and never below the problem's; a relaxation's bound never exceeds it; and every
  component a template made says what it is (:func:`check_documented`).

Users who author a formulation call them on their own instances.
"""
from __future__ import annotations

from typing import Any

import pyomo.environ as pyo

from .compile import Compiled, compile
from .errors import SpecError
from .formulations import Formulation, Kind, get
from .placement import Placement
from .problem import Problem

TOL = 1e-7


def represented(compiled: Compiled, placement: Placement) -> bool:
    """The placement's values satisfy every row of the model (it lies in the formulation's class)."""
    try:
        values = compiled.varmap.values(placement)
    except SpecError:
        return False
    return compiled.varmap.residual(values)[0] <= TOL


def check_template_rows(compiled: Compiled, placement: Placement) -> list[str]:
    """Blocks whose template's values for ``placement`` violate the block's own rows (empty when all hold).

    ``placement`` must be feasible for the formulation (e.g. the brute-force optimum of an
    exact formulation's problem).
    """
    values = compiled.varmap.values(placement)
    bad = []
    for blk, template in compiled.varmap.built:
        worst, where = compiled.varmap.residual(values, blk)
        if worst > TOL:
            bad.append(f"{template!r} (block {blk.local_name!r}): {where!r} violated by {worst:.3g}")
    return bad


# components Pyomo makes itself: gdp's indicator variables, bigm's relaxed rows and the "exactly one" row
PYOMO_MADE = ("indicator_var", "binary_indicator_var", "transformedConstraints")


def check_documented(model: Any) -> list[str]:
    """Components of ``model`` (a Pyomo block) that a template made without a ``doc``: every set, variable,
    constraint, expression, objective, block, disjunct and disjunction, inside disjuncts too. Pyomo's own
    are left out: implicit ``*_index`` sets, :data:`PYOMO_MADE`, a disjunction's ``*_xor`` row and the
    transformations' ``_pyomo_*`` blocks."""
    from pyomo.gdp import Disjunct, Disjunction

    kinds = (pyo.Set, pyo.RangeSet, pyo.Var, pyo.Constraint, pyo.Expression, pyo.Objective, pyo.Block, Disjunct,
             Disjunction)
    return [comp.name for comp in model.component_objects(kinds, descend_into=(pyo.Block, Disjunct))
            if not (comp.doc or comp.local_name.endswith(("_index", "_xor")) or "_pyomo_" in comp.name
                    or comp.local_name in PYOMO_MADE)]


def check_formulation(formulation: str | Formulation, problem: Problem, optimum: float, placements: list[Placement],
                      solver: str = "highs", time_limit: float = 30.0, solve: bool = True) -> list[str]:
    """What ``formulation`` gets wrong on ``problem`` (empty when it conforms).

    ``placements`` are the problem's feasible placements (brute force) and ``optimum`` their
    best objective. ``solve=False`` skips the solver run (the rows and the class only).
    """
    form = get(formulation, problem)
    if form.kind is Kind.RELAXATION:
        return _check_relaxation(form, problem, optimum, solver, time_limit)
    compiled = compile(problem, form)
    inside = [p for p in placements if represented(compiled, p)]
    problems = [f"{form.name}: {name} has no doc" for name in check_documented(compiled.model)]
    if form.kind is Kind.EXACT:
        best = min(placements, key=lambda p: problem.evaluate(p).objective)
        if best not in inside:
            problems.append(f"{form.name}: the optimal placement {best.mapping()} violates the model")
        problems += check_template_rows(compiled, best) if best in inside else []
        target = optimum
    else:
        if not inside:  # the class is empty here: the solver must find nothing
            return _check_empty(form, problem, solver, time_limit)
        problems += check_template_rows(compiled, inside[0])
        target = min(problem.evaluate(p).objective for p in inside)
    return problems + (_check_optimum(form, problem, target, solver, time_limit) if solve else [])


def _check_optimum(form: Formulation, problem: Problem, target: float, solver: str, time_limit: float) -> list[str]:
    from .solve import solve

    result = solve(problem, form, solver=solver, time_limit=time_limit, gap=1e-9)
    if result.objective is None or abs(result.objective - target) > 1e-6 * max(1.0, abs(target)):
        return [f"{form.name} with {solver}: objective {result.objective} != {target} over its class"]
    if result.bound is not None and result.bound > target * (1 + 1e-6) + 1e-9:
        return [f"{form.name} with {solver}: bound {result.bound} above the optimum {target}"]
    return []


def _check_empty(form: Formulation, problem: Problem, solver: str, time_limit: float) -> list[str]:
    from .solve import solve
    from .solvers.base import Status

    result = solve(problem, form, solver=solver, time_limit=time_limit)
    if result.status is not Status.INFEASIBLE:
        return [f"{form.name} with {solver}: represents none of the problem's placements but ended "
                f"{result.status.value} with objective {result.objective}"]
    return []


def _check_relaxation(form: Formulation, problem: Problem, optimum: float, solver: str,
                      time_limit: float) -> list[str]:
    from .certify import model_bound

    problems = [f"{form.name}: {name} has no doc" for name in check_documented(compile(problem, form).model)]
    bound, _ = model_bound(problem, form.name, solver, time_limit)
    if bound is not None and bound > optimum * (1 + 1e-6) + 1e-9:
        problems.append(f"{form.name} with {solver}: bound {bound} exceeds the optimum {optimum}")
    return problems


def templates_built(compiled: Compiled) -> set[type[Any]]:
    """The template classes a compiled model is made of."""
    return {type(template) for _, template in compiled.varmap.built}
