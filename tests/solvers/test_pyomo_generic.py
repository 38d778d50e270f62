"""The generic Pyomo backend (solvers/pyomo_generic.py): the factory, the options
and time limit handed to ``SolverFactory(...).solve``, the bound read from Pyomo's results, and what the
worker reports — driven by stand-ins for the solver and its results, so every path runs without one.
"""
from __future__ import annotations

import logging
import math
import time
from types import SimpleNamespace

import numpy as np
import pytest
from pyomo.opt import TerminationCondition as TC

from placement_dsl.solvers import pyomo_generic
from placement_dsl.solvers.base import Final, HandedOff, Native, SolveOptions


class FakeOpt:
    """A Pyomo solver stand-in: records the ``solve`` call and returns ``results``."""

    def __init__(self, results=None, available=True, old_signature=False):
        self.results, self._available, self.old = results, available, old_signature
        self.calls: list[tuple[tuple, dict]] = []
        self.available_kwargs: dict = {}

    def available(self, **kwargs):
        self.available_kwargs = kwargs
        return self._available

    def solve(self, *args, **kwargs):
        if self.old and "raise_exception_on_nonoptimal_result" in kwargs:
            raise TypeError("unexpected keyword argument")  # an interface without the v2 flag
        self.calls.append((args, kwargs))
        return self.results


def test_factory_gives_the_solver_only_when_available(monkeypatch):
    opt = FakeOpt()
    monkeypatch.setattr(pyomo_generic.pyo, "SolverFactory", lambda name: opt if name == "fake" else None)
    assert pyomo_generic.factory("fake") is opt
    assert opt.available_kwargs == {"exception_flag": False}  # asked, not raised
    opt._available = False
    assert pyomo_generic.factory("fake") is None
    assert pyomo_generic.factory("missing") is None  # SolverFactory gave None: .available raises, caught


def test_factory_of_an_unknown_name_logs_nothing(caplog):
    # Pyomo warns about an unknown solver name; asking whether one exists must stay quiet
    with caplog.at_level(logging.DEBUG):
        assert pyomo_generic.factory("no_such_solver_anywhere") is None
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert pyomo_generic.factory("appsi_highs") is not None


@pytest.mark.parametrize("seconds, limit", [(5.0, 5.0), (-1.0, 0.01), (0.001, 0.01)])
def test_call_hands_the_options_time_limit_and_log_to_the_solver(tmp_path, seconds, limit):
    opt = FakeOpt(results="results")
    options = SolveOptions(gap=0.02, threads=3, verbose=True, log_path=tmp_path / "log.txt")
    assert pyomo_generic._call(opt, "model", "gurobi_direct", options, seconds) == "results"
    ((args, kwargs),) = opt.calls
    assert args == ("model",)
    assert kwargs == {"tee": True, "load_solutions": False, "timelimit": limit, "logfile": str(tmp_path / "log.txt"),
                      "options": {"MIPGap": 0.02, "Threads": 3}, "raise_exception_on_nonoptimal_result": False}


def test_call_without_a_log_or_known_family_and_on_an_older_interface():
    opt = FakeOpt(results="results", old_signature=True)
    assert pyomo_generic._call(opt, "model", "mystery", SolveOptions(), 2.0) == "results"
    # the v2 flag was refused (TypeError), so the call is made again without it; no log, no family options
    assert opt.calls == [(("model",), {"tee": False, "load_solutions": False, "timelimit": 2.0})]


@pytest.mark.parametrize("value, bound", [(1.5, 1.5), (float("-inf"), None), (float("inf"), None),
                                          (float("nan"), None), (None, None), ("x", None)])
def test_bound_from_pyomo_results(value, bound):
    assert pyomo_generic._bound(SimpleNamespace(problem=SimpleNamespace(lower_bound=value))) == bound
    assert pyomo_generic._bound(SimpleNamespace()) is None  # no problem section at all


def _worker(monkeypatch, condition, solution, values, lower_bound=3.0):
    """A worker over two columns whose solve returns ``condition`` and loads ``values``; its reports."""
    columns = [SimpleNamespace(value=None), SimpleNamespace(value=None)]
    results = SimpleNamespace(solver=SimpleNamespace(termination_condition=condition), solution=solution,
                              problem=SimpleNamespace(lower_bound=lower_bound))
    opt = FakeOpt(results)

    def load_from(res):
        assert res is results
        for col, v in zip(columns, values):
            col.value = v

    model = SimpleNamespace(solutions=SimpleNamespace(load_from=load_from))
    # the objective is x0 + 2 x1 plus a constant 5, which the reports leave out
    lm = SimpleNamespace(columns=columns, offset=5.0, objective=lambda x: float(x[0] + 2 * x[1]) + 5.0)
    monkeypatch.setattr(pyomo_generic.pyo, "SolverFactory", lambda name: opt)
    worker = pyomo_generic.PyomoWorker("fake", model, lm)
    events: list = []
    t0 = time.perf_counter()
    worker(lm, SolveOptions(), None, None, time.monotonic() + 7.0, events.append)
    return events, opt, time.perf_counter() - t0


def test_worker_reports_hand_off_and_the_solution_without_the_constant(monkeypatch):
    events, opt, wall = _worker(monkeypatch, TC.optimal, [object()], [1.0, 2.0])
    handed, final = events
    assert isinstance(handed, HandedOff) and 0.0 <= handed.seconds <= wall
    assert isinstance(final, Final) and final.native is Native.OPTIMAL and final.code == "optimal"
    assert final.objective == 5.0 and final.x.tolist() == [1.0, 2.0]
    assert final.bound == 3.0 - 5.0  # Pyomo's bound includes the constant too
    assert 0.0 <= final.seconds <= wall
    ((_, kwargs),) = opt.calls
    assert 6.0 < kwargs["timelimit"] <= 7.0  # what is left of the deadline


def test_worker_without_a_solution_or_with_a_column_left_unset(monkeypatch):
    # a limit with no solution in the results: nothing is loaded
    events, _, _ = _worker(monkeypatch, TC.maxTimeLimit, [], [1.0, 2.0])
    assert events[-1].native is Native.LIMIT and events[-1].x is None and events[-1].objective is None
    # a column the solver left without a value: no solution either (not a half-filled one)
    events, _, _ = _worker(monkeypatch, TC.optimal, [object()], [1.0, None])
    assert events[-1].x is None and events[-1].objective is None
    # an infeasible end never reads a solution, and its infinite bound is none
    events, _, _ = _worker(monkeypatch, TC.infeasible, [object()], [1.0, 2.0], lower_bound=math.inf)
    final = events[-1]
    assert final.native is Native.INFEASIBLE and final.x is None and final.bound is None
    assert np.isfinite(final.seconds)
