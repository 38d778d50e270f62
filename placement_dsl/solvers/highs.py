"""HiGHS through highspy: bulk hand-off of the arrays, MIP start by ``setSolution``, and
incumbents, bounds and interrupts through HiGHS's callbacks.

The start is verified, not assumed: HiGHS reports "MIP start solution is feasible" in its log
and its first improving solution at t≈0 carries the start's objective.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..lp import available, new_highs  # noqa: F401  (available: re-exported for the backend table)
from .base import Bound, Capabilities, Emit, Final, HandedOff, Incumbent, Native, SolveOptions, StartVerdict, lookup
from .matrix import LinearModel

NAME = "highs"
CAPABILITIES = Capabilities(mip_start=True, time_limit=True, gap=True, reports_bound=True, streams_incumbents=True)
FEASIBILITY_TOL = 1e-6  # HiGHS's default mip_feasibility_tolerance
ABS_GAP = 1e-6  # HiGHS's default mip_abs_gap


def _status_table() -> dict:
    import highspy

    s = highspy.HighsModelStatus
    return {
        s.kOptimal: Native.OPTIMAL,
        s.kInfeasible: Native.INFEASIBLE,
        s.kUnbounded: Native.UNBOUNDED,
        s.kUnboundedOrInfeasible: Native.INF_OR_UNBD,
        s.kTimeLimit: Native.LIMIT,
        s.kIterationLimit: Native.LIMIT,
        s.kSolutionLimit: Native.LIMIT,
        s.kInterrupt: Native.LIMIT,
        s.kHighsInterrupt: Native.LIMIT,
        s.kObjectiveBound: Native.LIMIT,
        s.kObjectiveTarget: Native.LIMIT,
        s.kLoadError: Native.ERROR,
        s.kModelError: Native.ERROR,
        s.kPresolveError: Native.ERROR,
        s.kSolveError: Native.ERROR,
        s.kPostsolveError: Native.ERROR,
        s.kMemoryLimit: Native.ERROR,
        s.kNotset: Native.UNKNOWN,
        s.kUnknown: Native.UNKNOWN,
    }


def _configure(h, options: SolveOptions, seconds: float) -> None:
    h.setOptionValue("output_flag", bool(options.verbose or options.log_path))
    h.setOptionValue("log_to_console", bool(options.verbose))
    if options.log_path:
        h.setOptionValue("log_file", str(options.log_path))
    h.setOptionValue("threads", int(options.threads))
    h.setOptionValue("time_limit", max(seconds, 0.01))
    h.setOptionValue("mip_rel_gap", float(options.gap))
    if options.cutoff is not None:
        h.setOptionValue("objective_bound", float(options.cutoff))


def _hand_off(h, lm: LinearModel) -> None:
    status = h.passModel(lm.n_cols, lm.n_rows, len(lm.value), 1, 1, 0.0, lm.cost, lm.col_lower, lm.col_upper,
                         lm.row_lower, lm.row_upper, lm.start, lm.index, lm.value, lm.integer.astype(np.int32))
    if str(status) == "HighsStatus.kError":
        raise RuntimeError(f"HiGHS refused the model: {status}")


class _Watch:
    """Callbacks: stream incumbents and bounds, judge the start, interrupt at the deadline."""

    def __init__(self, emit: Emit, deadline: float, start_objective: float | None,
                 tolerance: tuple[float, float] = (FEASIBILITY_TOL, ABS_GAP)):
        self.emit, self.deadline, self.start_objective = emit, deadline, start_objective
        self.rel_tol, self.abs_tol = tolerance
        self.bound = -math.inf
        self.first = True
        self.log_says_feasible = False

    def improving(self, e) -> None:
        out = e.data_out
        obj = float(out.objective_function_value)
        if self.first and self.start_objective is not None:
            same = math.isclose(obj, self.start_objective, rel_tol=self.rel_tol, abs_tol=self.abs_tol)
            evidence = (f"HiGHS's first incumbent (t={out.running_time:.3f}s) "
                        + ("is the start" if same else
                           f"differs from the start: {obj:.10g} vs {self.start_objective:.10g} in model units"))
            if self.log_says_feasible:
                evidence += "; log: MIP start solution is feasible"
            self.emit(StartVerdict(same, evidence))
        self.first = False
        self.emit(Incumbent(float(out.running_time), obj, np.array(out.mip_solution, dtype=float)))
        self._bound(out)

    def logging(self, e) -> None:
        if "MIP start solution is feasible" in e.message:
            self.log_says_feasible = True

    def mip_logging(self, e) -> None:
        self._bound(e.data_out)

    def interrupt(self, e) -> None:
        self._bound(e.data_out)
        if time.monotonic() > self.deadline:
            e.interrupt()

    def _bound(self, out) -> None:
        b = float(out.mip_dual_bound)
        if math.isfinite(b) and b > self.bound + 1e-12 * max(1.0, abs(b)):
            self.bound = b
            self.emit(Bound(float(out.running_time), b))


def _option(h, name: str, default: float) -> float:
    """An option's value; highspy 1.15 answers ``(status, value)``, later versions the value alone."""
    got = h.getOptionValue(name)
    value = got[1] if isinstance(got, tuple) else got
    return float(value) if value is not None else default


def start_tolerance(h) -> tuple[float, float]:
    """Relative and absolute distance within which HiGHS's first incumbent is the start.

    HiGHS accepts a start that is feasible within ``mip_feasibility_tolerance`` and recomputes its
    objective from the values it repairs to that tolerance (a latency start of 5.25 became
    5.250000006), and it cannot tell apart two objectives closer than ``mip_abs_gap``: the first
    incumbent is the start when it lies within those. The relative gap is no test of identity (at
    a gap of 5% another solution would pass as the start).
    """
    feasibility = _option(h, "mip_feasibility_tolerance", FEASIBILITY_TOL)
    return feasibility, max(_option(h, "mip_abs_gap", ABS_GAP), feasibility)


def _subscribe(h, watch: _Watch) -> None:
    h.cbMipImprovingSolution.subscribe(watch.improving)
    h.cbMipLogging.subscribe(watch.mip_logging)
    h.cbMipInterrupt.subscribe(watch.interrupt)
    h.cbLogging.subscribe(watch.logging)


def _final(h, table: dict, seconds: float) -> Final:
    status = h.getModelStatus()
    info = h.getInfo()
    has_x = info.primal_solution_status == 2  # kSolutionStatusFeasible
    x = np.array(h.getSolution().col_value, dtype=float) if has_x else None
    obj = float(info.objective_function_value) if has_x else None
    bound = float(info.mip_dual_bound) if h.getNumCol() and math.isfinite(info.mip_dual_bound) else None
    if bound is None and lookup(table, status) is Native.OPTIMAL and obj is not None:
        bound = obj  # an LP solved to optimality: its value is its own bound
    return Final(lookup(table, status), h.modelStatusToString(status), obj, bound, x, seconds)


def _set_start(h, lm: LinearModel, start: np.ndarray):
    return h.setSolution(lm.n_cols, np.arange(lm.n_cols, dtype=np.int32), start)


def _presolve_alone(h, lm: LinearModel, final: Final) -> bool:
    """A MIP verdict (optimal or infeasible) HiGHS's presolve reached alone: no node, no LP iteration.

    HiGHS 1.15's MIP presolve has declared a feasible 49-row latency IP infeasible, and given a start, the
    start optimal (a 9-row reduction of the model reproduces it): such a verdict is checked once without
    presolve, which costs little on the small models presolve settles alone."""
    info = h.getInfo()
    return (bool(lm.integer.any()) and final.native in (Native.OPTIMAL, Native.INFEASIBLE)
            and info.mip_node_count == 0 and info.simplex_iteration_count == 0)


def run(lm: LinearModel, options: SolveOptions, start: np.ndarray | None, start_objective: float | None,
        deadline: float, emit: Emit) -> None:
    """Solve ``lm`` with HiGHS, reporting progress through ``emit`` and ending with a :class:`Final`."""
    t0 = time.perf_counter()
    h = new_highs(options.verbose)
    _configure(h, options, deadline - time.monotonic())
    _hand_off(h, lm)
    watch = _Watch(emit, deadline, start_objective, start_tolerance(h))
    _subscribe(h, watch)
    if start is not None:
        ok = _set_start(h, lm, start)
        if str(ok) == "HighsStatus.kError":
            emit(StartVerdict(False, "HiGHS setSolution refused the start"))
            watch.start_objective = None
    emit(HandedOff(time.perf_counter() - t0))
    h.setOptionValue("time_limit", max(deadline - time.monotonic(), 0.01))
    t1 = time.perf_counter()
    h.run()
    final = _final(h, _status_table(), time.perf_counter() - t1)
    if _presolve_alone(h, lm, final) and time.monotonic() < deadline:
        h.setOptionValue("presolve", "off")  # HiGHS counts an instance's runs together against its limit
        h.setOptionValue("time_limit", h.getRunTime() + max(deadline - time.monotonic(), 0.01))
        if start is not None:
            _set_start(h, lm, start)
        h.run()
        final = _final(h, _status_table(), time.perf_counter() - t1)
    if start is not None and watch.first and watch.start_objective is not None:
        emit(StartVerdict(False, f"HiGHS reported no incumbent at the start ({final.code})"))
    emit(final)
