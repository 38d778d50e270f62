"""Conformance over the registries: every registered formulation and template, on the known-optimum instances.

A formulation or template registered anywhere in the package is covered here without a test of
its own (:mod:`placement_dsl.conformance`).
"""
from __future__ import annotations

from itertools import islice

import pytest

from placement_dsl import testing
from placement_dsl.blocks import TEMPLATES
from placement_dsl.compile import compile
from placement_dsl.conformance import check_formulation, check_template_rows, represented, templates_built
from placement_dsl.errors import InfeasibleError, SpecError
from placement_dsl.formulations import FORMULATIONS, Kind, LoadTarget
from placement_dsl.formulations.chain import chain_problem
from placement_dsl.problem import Problem

SOLVERS = ("highs", "scip")


def _feasible(problem: Problem) -> list:
    return [p for p in testing.placements(problem) if problem.is_valid(p)]


_FEASIBLE: dict[str, list] = {}


def _feasible_of(name: str, problem: Problem) -> list:
    """The feasible placements of the variant ``name`` (the instances are rebuilt alike), enumerated once per run."""
    if name not in _FEASIBLE:
        _FEASIBLE[name] = _feasible(problem)
    return _FEASIBLE[name]


def _instances():
    for name in sorted(testing.INSTANCES):
        problem, optimum = testing.INSTANCES[name]()
        yield name, problem, optimum


def _variants():
    """The instances, plus a variant with a load target (position windows) where the chain applies."""
    for name, problem, optimum in _instances():
        yield name, problem, optimum
        if FORMULATIONS["chain"].accepts(problem) is None and not problem.has(LoadTarget):
            yield f"{name}+target", chain_problem(problem, optimum * 1.5), optimum


CASES = [(form, name) for form in sorted(FORMULATIONS) for name, problem, _ in _variants()
         if FORMULATIONS[form].accepts(problem) is None]


@pytest.mark.parametrize("formulation, instance", CASES)
def test_every_formulation_conforms(formulation, instance):
    problem, optimum = next((p, o) for n, p, o in _variants() if n == instance)
    form = FORMULATIONS[formulation]
    placements = _feasible_of(instance, problem)
    try:
        # exact formulations' optima are solved by test_formulations.test_known_optima; here their rows
        problems = check_formulation(form, problem, optimum, placements, solver="highs",
                                     solve=form.kind is not Kind.EXACT)
    except SpecError as err:  # found while building (e.g. pins on merged superblocks): refused, never wrong
        pytest.skip(f"{formulation} refused {instance} while building: {err}")
    assert not problems, problems


@pytest.mark.slow
@pytest.mark.parametrize("formulation, instance", [c for c in CASES if FORMULATIONS[c[0]].kind is not Kind.RELAXATION])
def test_every_formulation_conforms_with_scip(formulation, instance):
    problem, optimum = next((p, o) for n, p, o in _variants() if n == instance)
    form = FORMULATIONS[formulation]
    if form.accepts(problem) is not None:
        pytest.skip(form.accepts(problem))
    try:
        problems = check_formulation(form, problem, optimum, _feasible(problem), solver="scip")
    except SpecError as err:
        pytest.skip(str(err))
    assert not problems, problems


def test_every_registered_template_is_built_and_conforms():
    """Each template class in the library appears in some registered formulation on some instance,
    and (outside relaxations, whose variables a placement does not determine) its values satisfy its rows."""
    seen = set()
    variants = [(problem, _feasible_of(name, problem)) for name, problem, _ in _variants()]
    for form in FORMULATIONS.values():
        for problem, feasible in variants:
            if form.accepts(problem) is not None:
                continue
            try:
                compiled = compile(problem, form)
            except (SpecError, InfeasibleError):
                continue
            seen |= templates_built(compiled)
            if form.kind is Kind.RELAXATION:
                continue
            inside = islice((p for p in feasible if represented(compiled, p)), 3)  # the first three it holds
            for placement in inside:
                assert not check_template_rows(compiled, placement), (form.name, problem.graph.name)
    missing = sorted(cls.__name__ for cls in TEMPLATES if cls not in seen)
    assert not missing, f"registered templates no formulation builds on the testing instances: {missing}"


def test_a_broken_template_is_caught():
    """The check fails when a template's warm values do not satisfy its rows (mutation: drop a term of the cut)."""
    problem, _ = testing.contiguity_binds()
    compiled = compile(problem, "throughput")
    placement = next(p for p in _feasible(problem) if len(set(p.assign.tolist())) == 2)
    values = compiled.varmap.values(placement)
    cut = compiled.model.tensor_cut.cut_in
    for var in cut.values():
        values[var] = 0.0  # a cut nobody pays for
    assert compiled.varmap.residual(values, compiled.model.tensor_cut)[0] > 0.5


def test_the_conformance_solves_search_the_model_from_no_start(monkeypatch):
    """A formulation conforms by its own model: its solves ask for no start. Without one asked for, a solve races
    the heuristics first, and an empty class's check would read their start as the model's answer."""
    from types import SimpleNamespace

    from placement_dsl import conformance, solve
    from placement_dsl.solvers import Status
    from placement_dsl.starts import NONE

    asked = []

    def recorded(problem, form, **options):
        asked.append(options.get("warm_start"))
        return SimpleNamespace(objective=1.0, bound=1.0, status=Status.INFEASIBLE)

    monkeypatch.setattr(solve, "solve", recorded)
    problem, _ = testing.INSTANCES[min(testing.INSTANCES)]()
    form = FORMULATIONS["exact"]
    assert conformance._check_optimum(form, problem, 1.0, "highs", 1.0) == []
    assert conformance._check_empty(form, problem, "highs", 1.0) == []
    assert asked == [NONE, NONE]
