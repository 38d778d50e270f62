"""Any solver Pyomo's ``SolverFactory`` knows, by name (``glpk``, ``cbc``, ``gurobi``, ``appsi_highs``,
``scip_direct``, ...), through its legacy ``solve`` call.

The solver works on the Pyomo model itself; the guard runs it in a forked child process that
sends back the column values, so the project's time limit holds here too. These interfaces
report no incumbents while running: a solve stopped by force has no solution to return.
Gap and thread options are passed where the option name of the solver family is known.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np
import pyomo.environ as pyo
from pyomo.common.log import LoggingIntercept
from pyomo.opt import TerminationCondition as TC

from .base import Capabilities, Emit, Final, HandedOff, Native, SolveOptions, lookup
from .matrix import LinearModel

CAPABILITIES = Capabilities(mip_start=False, time_limit=True, gap=True, reports_bound=True, streams_incumbents=False)

STATUS = {
    TC.optimal: Native.OPTIMAL,
    TC.globallyOptimal: Native.OPTIMAL,
    TC.locallyOptimal: Native.OPTIMAL,
    TC.maxTimeLimit: Native.LIMIT,
    TC.maxIterations: Native.LIMIT,
    TC.maxEvaluations: Native.LIMIT,
    TC.userInterrupt: Native.LIMIT,
    TC.resourceInterrupt: Native.LIMIT,
    TC.feasible: Native.LIMIT,
    TC.infeasible: Native.INFEASIBLE,
    TC.invalidProblem: Native.ERROR,
    TC.unbounded: Native.UNBOUNDED,
    TC.infeasibleOrUnbounded: Native.INF_OR_UNBD,
    TC.error: Native.ERROR,
    TC.solverFailure: Native.ERROR,
    TC.internalSolverError: Native.ERROR,
    TC.licensingProblems: Native.ERROR,
    TC.unknown: Native.UNKNOWN,
}

# option names for the gap and the thread count, by solver family (first match of the name)
FAMILY_OPTIONS: dict[str, tuple[str, str]] = {
    "highs": ("mip_rel_gap", "threads"),
    "scip": ("limits/gap", "parallel/maxnthreads"),
    "gurobi": ("MIPGap", "Threads"),
    "cplex": ("mipgap", "threads"),
    "cbc": ("ratioGap", "threads"),
    "glpk": ("mipgap", ""),
    "xpress": ("miprelstop", "threads"),
}


def factory(name: str):
    """Pyomo's solver object for ``name``, or ``None`` when it is unknown or not installed."""
    try:
        with LoggingIntercept(level=logging.CRITICAL):
            opt = pyo.SolverFactory(name)
            ok = opt.available(exception_flag=False)
    except Exception:  # noqa: BLE001 - a Pyomo plugin probed may raise anything; it is then not installed
        return None
    return opt if ok else None


def solver_options(name: str, options: SolveOptions) -> dict[str, Any]:
    """Gap and thread options in the solver family's own names."""
    for family, (gap, threads) in FAMILY_OPTIONS.items():
        if family in name:
            out: dict[str, Any] = {gap: options.gap}
            if threads:
                out[threads] = options.threads
            return out
    return {}


def _call(opt, model, name: str, options: SolveOptions, seconds: float):
    kwargs: dict[str, Any] = {"tee": options.verbose, "load_solutions": False, "timelimit": max(seconds, 0.01)}
    if options.log_path:
        kwargs["logfile"] = str(options.log_path)
    extra = solver_options(name, options)
    if extra:
        kwargs["options"] = extra
    try:
        return opt.solve(model, raise_exception_on_nonoptimal_result=False, **kwargs)
    except TypeError:
        return opt.solve(model, **kwargs)


def _bound(results) -> float | None:
    try:
        b = float(results.problem.lower_bound)
    except (TypeError, ValueError, AttributeError):
        return None
    return b if math.isfinite(b) else None


class PyomoWorker:
    """A guard worker solving the Pyomo model itself with solver ``name``."""

    def __init__(self, name: str, model: pyo.ConcreteModel, lm: LinearModel):
        self.name, self.model, self.columns = name, model, lm.columns

    def __call__(self, lm: LinearModel, options: SolveOptions, start: np.ndarray | None,
                 start_objective: float | None, deadline: float, emit: Emit) -> None:
        t0 = time.perf_counter()
        opt = pyo.SolverFactory(self.name)
        emit(HandedOff(time.perf_counter() - t0))
        t1 = time.perf_counter()
        results = _call(opt, self.model, self.name, options, deadline - time.monotonic())
        seconds = time.perf_counter() - t1
        native = lookup(STATUS, results.solver.termination_condition)
        x = obj = None
        if native in (Native.OPTIMAL, Native.LIMIT) and len(results.solution) > 0:
            self.model.solutions.load_from(results)
            x = np.array([np.nan if v.value is None else float(v.value) for v in self.columns])
            obj = lm.objective(x) - lm.offset if not np.isnan(x).any() else None
            x = x if obj is not None else None
        bound = _bound(results)
        bound = None if bound is None else bound - lm.offset  # reports leave the constant out
        emit(Final(native, str(results.solver.termination_condition), obj, bound, x, seconds))
