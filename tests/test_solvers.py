"""solve_model on hand-built Pyomo models with known optima, every installed solver, by capability."""
from __future__ import annotations

import itertools
import random
import time

import numpy as np
import pyomo.environ as pyo
import pytest

from placement_dsl.errors import SolverUnavailableError, SpecError
from placement_dsl.solvers import (Backend, Bound, Capabilities, Final, HandedOff, Incumbent, Native, SolveOptions,
                                   Status, available_solvers, backend, solve_model)
from placement_dsl.solvers import NATIVE, highs, scip
from placement_dsl.solvers.base import classify
from placement_dsl.solvers.matrix import extract

SOLVERS = available_solvers()
WITH_START = [s for s in SOLVERS if backend(s).capabilities.mip_start]
STREAMING = [s for s in SOLVERS if backend(s).capabilities.streams_incumbents]
QUICK = SolveOptions(time_limit=20)


# ---------------------------------------------------------------------------- instances
def knapsack(n: int = 12, seed: int = 3) -> tuple[pyo.ConcreteModel, float]:
    """max value s.t. weight <= W, as min -value + 7; optimum by enumeration."""
    r = random.Random(seed)
    w = [r.randint(5, 40) for _ in range(n)]
    v = [r.randint(5, 40) for _ in range(n)]
    cap = sum(w) // 3
    best = max(sum(v[i] for i in S) for k in range(n + 1) for S in itertools.combinations(range(n), k)
               if sum(w[i] for i in S) <= cap)
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), within=pyo.Binary)
    m.cap = pyo.Constraint(expr=sum(w[i] * m.x[i] for i in range(n)) <= cap)
    m.obj = pyo.Objective(expr=7 - sum(v[i] * m.x[i] for i in range(n)))
    return m, 7.0 - best


def assignment(n: int = 5, seed: int = 1) -> tuple[pyo.ConcreteModel, float]:
    """Linear assignment with equality rows; optimum by enumerating permutations."""
    r = random.Random(seed)
    c = [[r.randint(1, 30) for _ in range(n)] for _ in range(n)]
    best = min(sum(c[i][p[i]] for i in range(n)) for p in itertools.permutations(range(n)))
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), range(n), within=pyo.Binary)
    m.row = pyo.Constraint(range(n), rule=lambda m, i: sum(m.x[i, j] for j in range(n)) == 1)
    m.col = pyo.Constraint(range(n), rule=lambda m, j: sum(m.x[i, j] for i in range(n)) == 1)
    m.obj = pyo.Objective(expr=sum(c[i][j] * m.x[i, j] for i in range(n) for j in range(n)))
    return m, float(best)


def makespan(n: int = 60, k: int = 6, seed: int = 0) -> tuple[pyo.ConcreteModel, list[int]]:
    """P||Cmax: its LP bound is sum(p)/k and proving optimality takes far longer than a second."""
    r = random.Random(seed)
    p = [r.randint(100, 999) for _ in range(n)]
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(n), range(k), within=pyo.Binary)
    m.c = pyo.Var(bounds=(0, None))
    m.one = pyo.Constraint(range(n), rule=lambda m, j: sum(m.x[j, i] for i in range(k)) == 1)
    m.cap = pyo.Constraint(range(k), rule=lambda m, i: sum(p[j] * m.x[j, i] for j in range(n)) <= m.c)
    m.obj = pyo.Objective(expr=m.c)
    return m, p


def lpt_start(m: pyo.ConcreteModel, p: list[int], k: int = 6) -> tuple[pyo.ComponentMap, float]:
    """Longest-processing-time-first: a feasible start for :func:`makespan`."""
    loads = [0] * k
    start = pyo.ComponentMap()
    for j in sorted(range(len(p)), key=lambda j: -p[j]):
        i = min(range(k), key=loads.__getitem__)
        loads[i] += p[j]
        for q in range(k):
            start[m.x[j, q]] = float(q == i)
    start[m.c] = float(max(loads))
    return start, float(max(loads))


# ---------------------------------------------------------------------------- known optima
@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("instance", [knapsack, assignment])
def test_known_optimum(solver, instance):
    m, best = instance()
    out = solve_model(m, solver, QUICK)
    assert out.status is Status.OPTIMAL and out.has_solution
    assert out.objective == pytest.approx(best, abs=1e-6)
    assert pyo.value(m.obj) == pytest.approx(best, abs=1e-6)  # values are loaded into the model
    if backend(solver).capabilities.reports_bound:
        assert out.bound is not None and out.bound <= out.objective + 1e-6
        assert out.bound >= best - abs(best) * 1e-4 - 1e-6
    assert out.timings.build >= 0 and out.timings.solve > 0


@pytest.mark.parametrize("solver", SOLVERS)
def test_infeasible_and_unbounded_are_statuses(solver):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(within=pyo.Binary)
    m.c = pyo.Constraint(expr=m.x >= 2)
    m.o = pyo.Objective(expr=m.x)
    assert solve_model(m, solver, QUICK).status is Status.INFEASIBLE
    u = pyo.ConcreteModel()
    u.x = pyo.Var(within=pyo.Integers)
    u.y = pyo.Var(within=pyo.Binary)
    u.c = pyo.Constraint(expr=u.x + u.y <= 3)
    u.o = pyo.Objective(expr=u.x)
    # presolve may not tell unbounded from infeasible; both are honest answers, a solution is not
    assert solve_model(u, solver, QUICK).status in (Status.UNBOUNDED, Status.INFEASIBLE)


@pytest.mark.parametrize("solver", ["highs", "scip"])
def test_continuous_lp_and_offset(solver):
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 4))
    m.y = pyo.Var(bounds=(-1, None))
    m.c = pyo.Constraint(expr=pyo.inequality(1, m.x + m.y, 3))
    m.o = pyo.Objective(expr=2 * m.x + m.y + 10)
    out = solve_model(m, solver, QUICK)
    assert out.status is Status.OPTIMAL
    assert out.objective == pytest.approx(11.0)  # x = 0, y = 1
    assert m.y.value == pytest.approx(1.0)


# ---------------------------------------------------------------------------- errors
def test_unknown_solver_lists_the_available_ones():
    m, _ = knapsack(4)
    with pytest.raises(SolverUnavailableError, match="available here: .*highs"):
        solve_model(m, "no_such_solver", QUICK)


def test_model_without_single_minimize_objective_is_refused():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.o = pyo.Objective(expr=m.x, sense=pyo.maximize)
    with pytest.raises(SpecError, match="maximizes"):
        solve_model(m, "highs", QUICK)
    m.o.deactivate()
    with pytest.raises(SpecError, match="0 active objectives"):
        solve_model(m, "highs", QUICK)


def test_nonlinear_model_is_refused_by_native_backends():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(bounds=(0, 1))
    m.c = pyo.Constraint(expr=m.x * m.x >= 0.5)
    m.o = pyo.Objective(expr=m.x)
    with pytest.raises(SpecError, match="constraint 'c' is nonlinear"):
        solve_model(m, "highs", QUICK)


def test_options_are_validated():
    with pytest.raises(ValueError, match="time_limit"):
        SolveOptions(time_limit=0)
    with pytest.raises(ValueError, match="gap"):
        SolveOptions(gap=1.5)


# ---------------------------------------------------------------------------- status tables
def test_every_highs_status_is_mapped_explicitly():
    import highspy

    table = highs._status_table()
    assert set(highspy.HighsModelStatus.__members__.values()) - {highspy.HighsModelStatus.kModelEmpty} <= set(table)
    assert table[highspy.HighsModelStatus.kUnknown] is Native.UNKNOWN


def test_unknown_native_status_is_an_error_never_a_guess():
    assert scip.STATUS["unknown"] is Native.UNKNOWN
    assert classify(Native.UNKNOWN, True) is Status.ERROR
    assert classify(Native.OPTIMAL, False) is Status.ERROR
    assert classify(Native.LIMIT, True) is Status.TIME_LIMIT_FEASIBLE
    assert classify(Native.LIMIT, False) is Status.TIME_LIMIT_NO_SOLUTION
    assert classify(Native.INF_OR_UNBD, False) is Status.INFEASIBLE


# ---------------------------------------------------------------------------- warm starts
@pytest.mark.parametrize("solver", WITH_START)
def test_mip_start_is_taken_and_never_beaten_by_worse(solver, tmp_path):
    m, p = makespan(40, 4, seed=2)
    start, start_obj = lpt_start(m, p, 4)
    log = tmp_path / f"{solver}.log"
    out = solve_model(m, solver, SolveOptions(time_limit=1.5, log_path=log), start=start)
    assert out.start_objective == pytest.approx(start_obj)
    assert out.start_accepted is True, out.message
    assert out.has_solution and out.objective <= start_obj + 1e-9
    assert log.exists() and log.stat().st_size > 0


@pytest.mark.parametrize("solver", SOLVERS)
def test_infeasible_start_is_refused_with_reason(solver):
    m, best = knapsack(8)
    bad = pyo.ComponentMap((v, 1.0) for v in m.x.values())  # everything packed: over capacity
    out = solve_model(m, solver, QUICK, start=bad)
    assert out.start_accepted is False and "start refused" in out.message and "'cap'" in out.message
    assert out.objective == pytest.approx(best)


def test_start_by_name_and_missing_values():
    m, best = knapsack(6)
    zero = {v.name: 0.0 for v in m.x.values()}
    out = solve_model(m, "highs", QUICK, start=zero)
    assert out.start_objective == pytest.approx(7.0) and out.start_accepted is True
    del zero["x[0]"]
    with pytest.raises(SpecError, match=r"no value for variable 'x\[0\]'"):
        solve_model(m, "highs", QUICK, start=zero)


# ---------------------------------------------------------------------------- time limits
@pytest.mark.parametrize("isolate", [True, False], ids=["process", "in-process"])
@pytest.mark.parametrize("solver", [s for s in ("highs", "scip") if s in SOLVERS])
def test_time_limit_is_a_status_with_incumbent_and_bound(solver, isolate):
    m, p = makespan()
    limit = 1.5
    t0 = time.perf_counter()
    out = solve_model(m, solver, SolveOptions(time_limit=limit, isolate=isolate))
    wall = time.perf_counter() - t0
    assert out.status is Status.TIME_LIMIT_FEASIBLE, out.message
    assert out.bound == pytest.approx(sum(p) / 6, rel=1e-6)  # the LP bound, not closed in 1.5 s
    assert out.bound <= out.objective
    assert wall < limit + SolveOptions().grace + out.timings.build + 0.5
    x = np.array([[m.x[j, i].value for i in range(6)] for j in range(len(p))])
    assert (x.sum(axis=1) == 1).all()
    assert max((x[:, i] * p).sum() for i in range(6)) == pytest.approx(out.objective)


def _stubborn(incumbent: bool, worse: bool = False):
    """A worker that reports once and then ignores the deadline, as an overrunning solver would."""

    def run(lm, options, start, start_objective, deadline, emit):
        emit(HandedOff(0.0))
        if incumbent:
            x = np.ones(lm.n_cols) if worse else np.zeros(lm.n_cols)
            emit(Incumbent(0.0, lm.objective(x) - lm.offset, x))
        emit(Bound(0.0, -1000.0))
        time.sleep(60)
        emit(Final(Native.OPTIMAL, "never", None, None, None, 60.0))

    return run


@pytest.mark.parametrize("incumbent, expected", [(True, Status.TIME_LIMIT_FEASIBLE),
                                                 (False, Status.TIME_LIMIT_NO_SOLUTION)])
def test_guard_stops_an_overrunning_solver(monkeypatch, incumbent, expected):
    fake = Backend("stubborn", Capabilities(reports_bound=True), lambda model, lm: _stubborn(incumbent))
    monkeypatch.setitem(NATIVE, "stubborn", (lambda: True, fake))
    m = pyo.ConcreteModel()
    m.x = pyo.Var([0, 1], within=pyo.Binary)
    m.o = pyo.Objective(expr=m.x[0] + m.x[1] + 1)
    t0 = time.perf_counter()
    out = solve_model(m, "stubborn", SolveOptions(time_limit=0.5, grace=0.3))
    assert time.perf_counter() - t0 < 2.0
    assert out.status is expected and "stopped by the project" in out.message
    assert out.bound == pytest.approx(-999.0)
    assert out.objective == (pytest.approx(1.0) if incumbent else None)


def test_worse_answer_falls_back_to_the_start(monkeypatch):
    fake = Backend("worse", Capabilities(mip_start=True), lambda model, lm: _stubborn(True, worse=True))
    monkeypatch.setitem(NATIVE, "worse", (lambda: True, fake))
    m = pyo.ConcreteModel()
    m.x = pyo.Var([0, 1], within=pyo.Binary)
    m.o = pyo.Objective(expr=m.x[0] + m.x[1] + 1)
    start = pyo.ComponentMap([(m.x[0], 0.0), (m.x[1], 0.0)])
    out = solve_model(m, "worse", SolveOptions(time_limit=0.3, grace=0.2), start=start)
    assert out.status is Status.TIME_LIMIT_FEASIBLE
    assert out.objective == pytest.approx(1.0) and m.x[0].value == 0
    assert "returning the start" in out.message


def test_residual_names_the_violated_row():
    m, _ = knapsack(5)
    lm = extract(m)
    worst, where = lm.residual(np.ones(lm.n_cols))
    assert where == "cap" and worst > 0
    assert lm.residual(np.zeros(lm.n_cols)) == (0.0, "")
    x = np.zeros(lm.n_cols)
    x[2] = 0.25
    assert lm.residual(x) == (0.25, "x[2]")  # integrality
