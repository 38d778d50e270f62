"""The SCIP backend (solvers/scip.py): what ``scip.run`` reports while it
solves (hand-off, incumbents, bounds, the start's verdict, the end), the limits it sets from the deadline,
its silence unless asked, and ``_final`` / ``_add_start`` on the paths a clean solve never takes.

Every solve here is in this process (the backend's ``run``, no guard) and takes well under a second.
"""
from __future__ import annotations

import itertools
import math
import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
import pyomo.environ as pyo
import pytest

pytest.importorskip("pyscipopt")

from placement_dsl.solvers import scip
from placement_dsl.solvers.base import Bound, Final, HandedOff, Incumbent, Native, SolveOptions, StartVerdict
from placement_dsl.solvers.matrix import LinearModel, extract
from tests.solvers.test_solvers import makespan


def _makespan(seed: int = 0, n: int = 12, k: int = 3) -> LinearModel:
    """P||Cmax on ``k`` machines: SCIP's dual bound rises in steps (964, 2455, 2460 for seed 0) to the optimum."""
    return extract(makespan(n, k, seed)[0])


def _feasible(lm: LinearModel, x: np.ndarray) -> bool:
    return lm.residual(x)[0] <= 1e-6  # rows, column bounds and integrality


def _run(lm: LinearModel, start=None, start_objective=None, seconds: float = 20.0, **options) -> list:
    events: list = []
    scip.run(lm, SolveOptions(time_limit=seconds, isolate=False, **options), start, start_objective,
             time.monotonic() + seconds, events.append)
    return events


def test_a_solve_reports_its_hand_off_incumbents_rising_bounds_and_end_and_prints_nothing(capfd):
    lm = _makespan()
    t0 = time.perf_counter()
    events = _run(lm)
    wall = time.perf_counter() - t0
    # first the hand-off, last the end; no start given, so no verdict on one
    assert isinstance(events[0], HandedOff) and 0.0 <= events[0].seconds <= wall
    final = events[-1]
    assert isinstance(final, Final) and final.native is Native.OPTIMAL and final.code == "optimal"
    assert final.objective == 2460.0 and final.bound == 2460.0 and _feasible(lm, final.x)
    assert isinstance(final.seconds, float) and 0.0 <= final.seconds <= wall
    assert not any(isinstance(e, StartVerdict) for e in events)
    # every incumbent is a solution of the model at the objective it claims, better than the one before
    incumbents = [e for e in events if isinstance(e, Incumbent)]
    assert len(incumbents) >= 2 and incumbents[-1].objective == 2460.0
    for inc in incumbents:
        assert _feasible(lm, inc.x) and math.isclose(lm.objective(inc.x), inc.objective)
        assert isinstance(inc.seconds, float) and inc.seconds >= 0.0
    assert all(a.objective > b.objective for a, b in itertools.pairwise(incumbents))
    # bounds: finite (SCIP's "infinity" is 1e20), strictly rising, never above the optimum, each with its time;
    # a step of the dual bound is reported when it rises by more than 1e-12 relative, not only when it doubles
    bounds = [e for e in events if isinstance(e, Bound)]
    values = [b.bound for b in bounds]
    assert len(values) >= 2 and values[-1] == 2460.0
    assert all(abs(v) < 1e19 for v in values) and all(a < b for a, b in itertools.pairwise(values))
    assert all(isinstance(b.seconds, float) and b.seconds >= 0.0 for b in bounds)
    # SCIP's and HiGHS's logs (the MPS hand-off) stay off the terminal, and so do SCIP's error messages
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_verbose_echoes_scip_log(capfd):
    _run(_makespan(), verbose=True)
    assert "SCIP Status" in capfd.readouterr().out


def test_a_start_is_judged_once():
    # the optimum as the start: SCIP's log shows it taken, and the verdict is given once, not at every event
    lm = _makespan()
    best = _run(lm)[-1]
    events = _run(lm, best.x, best.objective)
    verdicts = [e for e in events if isinstance(e, StartVerdict)]
    assert len(verdicts) == 1 and verdicts[0].accepted


def test_a_start_scip_does_not_store_is_reported_once_and_never_judged_again(monkeypatch):
    lm = _makespan()
    monkeypatch.setattr(scip, "_add_start", lambda model, cols, start, emit: (
        emit(StartVerdict(False, "refused")), False)[1])
    events = _run(lm, np.zeros(lm.n_cols), 1234.0)
    verdicts = [e for e in events if isinstance(e, StartVerdict)]
    assert verdicts == [StartVerdict(False, "refused")]  # the log is not read for a start SCIP never stored


def test_add_start_reports_a_start_scip_did_not_store():
    # a stand-in model whose addSol refuses: the backend says so, with the reason, and returns False
    values = {}
    model = SimpleNamespace(createSol=lambda: "sol", setSolVal=lambda sol, var, val: values.__setitem__(var, val),
                            addSol=lambda sol, free: False)
    emitted: list = []
    assert scip._add_start(model, ["a", "b"], np.array([1.0, 2.0]), emitted.append) is False
    assert emitted == [StartVerdict(False, "SCIP addSol did not store the start")]
    assert values == {"a": 1.0, "b": 2.0}
    emitted.clear()
    model.addSol = lambda sol, free: True
    assert scip._add_start(model, ["a"], np.array([3.0]), emitted.append) is True and emitted == []


@pytest.mark.parametrize("ahead", [5.0, -1.0])
def test_scip_limit_and_interrupt_timer_are_set_from_the_deadline(monkeypatch, ahead):
    # SCIP's own limit and the timer that interrupts it both end at the deadline (SCIP's at least 0.01 s,
    # which it needs to start); the timer is a daemon, so a solve cannot keep the interpreter alive
    seen, made = {}, []
    final = scip._final

    class SpyTimer(threading.Timer):  # local: a timer kept past the test holds SCIP's model to exit (a crash)
        def __init__(self, interval, function):
            super().__init__(interval, function)
            made.append(self)

    def spy_final(model, cols, seconds):
        seen["limit"], seen["interrupt"] = model.getParam("limits/time"), model.interruptSolve
        return final(model, cols, seconds)

    monkeypatch.setattr(scip, "_final", spy_final)
    monkeypatch.setattr(scip.threading, "Timer", SpyTimer)
    events = []
    deadline = time.monotonic() + ahead
    scip.run(_makespan(), SolveOptions(time_limit=10, isolate=False), None, None, deadline, events.append)
    (timer,) = made
    if ahead > 0:
        assert ahead - 1.0 < seen["limit"] <= ahead and ahead - 1.0 < timer.interval <= ahead
    else:
        assert seen["limit"] == 0.01 and timer.interval == 0.0
    assert timer.function == seen["interrupt"] and timer.daemon is True


def test_final_of_an_infeasible_model_has_no_bound_and_no_solution(tmp_path):
    # SCIP's dual bound of an infeasible model is its infinity (1e20): no bound, no solution
    m = pyo.ConcreteModel()
    m.x = pyo.Var(within=pyo.Binary)
    m.c = pyo.Constraint(expr=m.x >= 2)
    m.obj = pyo.Objective(expr=m.x)
    lm = extract(m)
    model, cols = scip._load(lm, SolveOptions(), tmp_path, tmp_path / "scip.log")
    model.optimize()
    final = scip._final(model, cols, 0.25)
    assert final.native is Native.INFEASIBLE and final.bound is None and final.x is None and final.objective is None
    assert final.seconds == 0.25


def test_final_reads_the_solution_when_scip_stored_exactly_one():
    # a stand-in model that stored one solution (x = 3, objective 3) and proved a bound of 2
    model = SimpleNamespace(getStatus=lambda: "timelimit", getNSols=lambda: 1, getBestSol=lambda: "best",
                            getSolVal=lambda sol, v: {"x": 3.0}[v] if sol == "best" else None,
                            getObjVal=lambda: 3.0, getDualbound=lambda: 2.0)
    final = scip._final(model, ["x"], 1.5)
    assert final == Final(Native.LIMIT, "timelimit", 3.0, 2.0, final.x, 1.5) and final.x.tolist() == [3.0]


def test_available_is_false_without_pyscipopt(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyscipopt", None)  # the import raises ImportError
    assert scip.available() is False
    monkeypatch.undo()
    assert scip.available() is True


def test_the_mps_hand_off_is_silent(tmp_path, capfd):
    scip._write_mps(_makespan(), tmp_path / "m.mps")
    assert (tmp_path / "m.mps").stat().st_size > 0
    assert capfd.readouterr() == ("", "")



@pytest.mark.parametrize("text, start, verdict", [
    # the line SCIP writes when the start from its candidate storage becomes the first incumbent
    ("feasible solution given by solution candidate storage, new primal bound 1.000000e+02\n", 100.0,
     StartVerdict(True, "SCIP log: the start from candidate storage became the incumbent")),
    # within a relative 1e-6 (the log prints seven digits) ...
    ("feasible solution given by solution candidate storage, new primal bound 1.0000005e+02\n", 100.0,
     StartVerdict(True, "SCIP log: the start from candidate storage became the incumbent")),
    # ... and not beyond: another solution entered first
    ("feasible solution given by solution candidate storage, new primal bound 1.00002e+02\n", 100.0,
     StartVerdict(False, "SCIP log: candidate storage gave primal bound 1.00002e+02 (model units), not the start")),
    # a start of objective 0 compares absolutely (1e-9)
    ("feasible solution given by solution candidate storage, new primal bound 5e-10\n", 0.0,
     StartVerdict(True, "SCIP log: the start from candidate storage became the incumbent")),
    ("feasible solution given by solution candidate storage, new primal bound 2e-09\n", 0.0,
     StartVerdict(False, "SCIP log: candidate storage gave primal bound 2e-09 (model units), not the start")),
    ("presolving:\n  (round 1) 0 del vars\n", 100.0, StartVerdict(False, "SCIP's log does not show the start being taken")),
])
def test_start_verdict_read_from_scip_log(tmp_path, text, start, verdict):
    log = tmp_path / "scip.log"
    log.write_bytes(b"\xff\xfe not utf-8 \n" + text.encode())  # a stray byte does not hide the line
    assert scip._verdict(log, start) == verdict


def test_start_verdict_of_an_unreadable_log(tmp_path):
    verdict = scip._verdict(tmp_path / "missing.log", 1.0)
    assert verdict.accepted is False and verdict.evidence.startswith("SCIP log unreadable: ")
    assert "missing.log" in verdict.evidence
