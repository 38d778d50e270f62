"""A contracted step sizes its coarse model by its build and its search (placement_dsl.search.contracted.
SEARCH_PER_BUILD times the build), and reads the clock again after each contraction: sized by the build alone (a
third of a 12 s step) a 146-op transformer's latency step picked a coarse model of 74 ops that a loaded machine did
not search in the step's time."""
from __future__ import annotations

import time

import numpy as np

from placement_dsl.constraints import Memory
from placement_dsl.formulations import get
from placement_dsl.heuristics import run
from placement_dsl.objectives import Latency
from placement_dsl.placement import Placement
from placement_dsl.problem import Problem
from placement_dsl.search import contracted
from placement_dsl.search.anytime import search
from placement_dsl.sizing import build_seconds, fitting_ops
from placement_dsl.zoo import default_cluster, transformer
from tests.solve.sheets import layered_sheet

LIMIT = 12.0


def _problem() -> Problem:
    g = transformer(layers=12, hidden=768, heads=12, seq_len=256, batch=4, granularity="operator").graph
    return Problem(g, default_cluster(3, 1), Latency(), [Memory()])


def _start(problem: Problem) -> Placement:
    acc = int(np.flatnonzero(~problem.cluster.host)[0])
    return Placement(problem.graph, problem.cluster, acc + np.arange(problem.graph.n) % 2)


def test_fitting_ops_leaves_the_search_its_multiple_of_the_build(monkeypatch):
    monkeypatch.setattr("placement_dsl.sizing.contention", lambda: 1.0)
    problem = _problem()
    form = get("auto", problem)
    alone, searched = fitting_ops(problem, form, 4.0), fitting_ops(problem, form, 4.0, per_build=9.0)
    assert searched == fitting_ops(problem, form, 0.4) and 2 <= searched < alone


def test_a_steps_coarse_model_builds_and_is_searched_within_the_step(monkeypatch):
    monkeypatch.setattr("placement_dsl.sizing.contention", lambda: 1.0)  # the same estimate inside and here
    monkeypatch.setattr(contracted, "solve", lambda small, **kw: _Stop())  # the size is the test, not the search
    problem = _problem()
    _, info = contracted.step(problem, _start(problem), None, LIMIT)
    assert info["coarse_ops"] >= 2
    coarse = problem.graph.n if info["coarse_ops"] == problem.graph.n else info["coarse_ops"]
    form = get("auto", problem)
    assert info["target"] == fitting_ops(problem, form, LIMIT - contracted.EXPAND * problem.graph.n,
                                         contracted.SEARCH_PER_BUILD)
    small = contracted.coarse_problem(problem, contracted.contract(problem.graph, contracted.intervals(
        problem, _start(problem), None, coarse)), [], _start(problem))
    assert build_seconds(small, get("auto", small)) * (1 + contracted.SEARCH_PER_BUILD) <= LIMIT


def test_a_contraction_that_spends_the_steps_time_builds_no_model(monkeypatch):
    real = contracted.contract

    def slow(graph, groups, **kw):
        time.sleep(1.7)
        return real(graph, groups, **kw)

    monkeypatch.setattr(contracted, "contract", slow)
    monkeypatch.setattr(contracted, "solve", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("solved")))
    problem = _problem()
    t0 = time.perf_counter()
    found, info = contracted.step(problem, _start(problem), None, 1.8, target=20)
    assert found is None and info["skipped"] == "no time left for the coarse model"
    assert time.perf_counter() - t0 < 1.8 + 1.0


class _Stop:
    """A solve's answer with nothing found."""

    status = type("S", (), {"value": "time_limit_no_solution"})()
    objective = None
    message = ""
    placement = None


def test_a_window_search_whose_cpsat_model_stays_too_large_hands_its_time_back(monkeypatch):
    """Outside its window a step keeps the incumbent's runs of one device along its order; where they alone are more
    coarse ops than CP-SAT searches in a step (a 1,000-task sheet: 1,915), no window is solved and the search ends at
    once, stalled, for its caller to spend the time otherwise."""
    problem = layered_sheet(40, 5, 0)
    start = run("list", problem.graph, problem.cluster, model=problem.cost_model()).placement
    monkeypatch.setattr(contracted, "CPSAT_WINDOW_OPS", 10)
    monkeypatch.setattr(contracted, "solve", lambda *a, **kw: (_ for _ in ()).throw(AssertionError("solved")))
    found, info = search(problem, start, 30.0, coarse=False, solver="cpsat")
    assert found is start and info["stalled"] and info["steps"] == 1
    assert info["oversized"].startswith(contracted.OVERSIZED)
