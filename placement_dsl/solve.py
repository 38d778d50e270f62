"""``solve``: compile a problem, warm-start it, run a solver under the time limit, and certify the answer.

Every answer is re-checked by the cost model: the returned objective is the evaluator's value
of the placement read back from the solution, and a solver objective that disagrees with it
raises :class:`~placement_dsl.errors.EvaluationMismatchError` instead of being reported.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from .errors import EvaluationMismatchError, SpecError
from .evaluate import Evaluation, evaluate
from .placement import Placement
from .formulations import FORMULATIONS
from .formulations.chain import certified_bound
from .result import DP_CLASS, Result, Seconds, problem_scope
from .solvers import SolveOptions, SolverOutcome, Status, solve_model

START_TOL = 1e-6  # largest constraint violation of a warm start that is still passed on
MATCH_TOL = 1e-6  # relative agreement required between solver and cost model


def solve(problem: Any, formulation: str = "auto", solver: str = "highs", time_limit: float = 60.0,
          gap: float = 1e-4, threads: int = 1, warm_start: str | Path | Placement | None = None,
          log_path: str | Path | None = None, method: str = "ip", windows: bool | None = None) -> Result:
    """Solve ``problem`` with a formulation and a solver; the result is certified by the cost model.

    Parameters
    ----------
    problem
        A :class:`~placement_dsl.problem.Problem`.
    formulation
        A formulation name (:data:`~placement_dsl.formulations.FORMULATIONS`), the ``"chain"``
        restriction, or ``"auto"`` to let the problem choose. Relaxations are refused: their
        optima are lower bounds, not placements (use :func:`~placement_dsl.certify.certify`).
    solver
        ``"highs"``, ``"scip"`` or any installed Pyomo solver name.
    time_limit
        Seconds for hand-off and search, enforced by the project (a time limit is a status).
    gap
        Relative MIP gap at which to stop (and, with windows, the certificate's target gap).
    threads
        Solver threads.
    warm_start
        A heuristic method name (``"dp"``, ``"slicegraph"``, ...), a :class:`Placement`, or the
        path of a placement file. A start that violates the formulation is refused, not passed.
    log_path
        File for the solver's log.
    method
        The label of this run in the result (e.g. the command-line method name).
    windows
        Position windows for the ``"chain"`` restriction (``docs/strengthening.md``). With a
        valid warm start of value ``UB`` the model is compiled with the target
        ``T* = UB / (1 + gap)``; the start is kept as the fallback answer (the windows cut it off,
        so it is not passed as a MIP start), and the bound is ``min(T*, solver bound)``, valid
        for the DP class. ``None`` (default) switches them on for ``"chain"`` with a warm start;
        ``False`` passes the start as a MIP start instead.

    Returns
    -------
    Result
        Status, placement, cost-model objective, bound and its class, gap, timings and the start's fate.
    """
    from .compile import compile
    from .formulations import RELAXATIONS, get

    name, _ = get(formulation, problem)
    if name in RELAXATIONS:
        raise SpecError(f"solve: {name!r} is a relaxation; its optimum is a lower bound, not a placement. "
                        f"Use certify(problem, levels=...) or `placement-dsl bounds` for bounds, and a formulation "
                        f"from {sorted(FORMULATIONS)} or the 'chain' restriction for placements")
    if _windowed(name, warm_start, windows):
        return _solve_windowed(problem, solver, time_limit, gap, threads, warm_start, log_path, method)
    t0 = time.perf_counter()
    compiled = compile(problem, name)
    t_compile = time.perf_counter() - t0
    start, start_eval, refusal = _warm_start(compiled, warm_start)
    t_start = time.perf_counter() - t0 - t_compile
    options = SolveOptions(time_limit=time_limit, gap=gap, threads=threads, log_path=log_path)
    values = None if start is None or refusal else compiled.varmap.values(start)
    outcome = solve_model(compiled.model, solver, options, start=values)
    result = _certify(compiled, outcome, method, solver, start_eval, refusal, gap)
    result.found_by = _found_by(result, start_eval, refusal, warm_start)
    result.timings = Seconds(build=t_compile + outcome.timings.build, start=t_start,
                             handoff=outcome.timings.handoff, solve=outcome.timings.solve,
                             total=time.perf_counter() - t0)
    return result


def _windowed(name: str, warm_start: Any, windows: bool | None) -> bool:
    """Whether to compile position windows (see ``windows`` in :func:`solve`)."""
    if windows and (name != "chain" or warm_start is None):
        raise SpecError(f"solve: windows=True needs formulation 'chain' and a warm start that sets the target; "
                        f"got formulation {name!r}, warm_start {warm_start!r}")
    return (name == "chain" and warm_start is not None) if windows is None else windows


def _start_label(warm_start: Any) -> str:
    return f"warm start ({warm_start})" if isinstance(warm_start, str) and not Path(warm_start).suffix else "warm start"


def _found_by(result: Result, start_eval: Evaluation | None, refusal: str, warm_start: Any) -> str:
    """``"solver"``, or the warm start when the solver did not improve on it."""
    if result.objective is None:
        return ""
    if start_eval is not None and not refusal and result.objective >= start_eval.objective * (1 - MATCH_TOL):
        return _start_label(warm_start)
    return "solver"


# ---------------------------------------------------------------------------- position windows
def _solve_windowed(problem: Any, solver: str, time_limit: float, gap: float, threads: int, warm_start: Any,
                    log_path: str | Path | None, method: str) -> Result:
    """The ``chain`` restriction with windows at ``T* = UB / (1 + gap)``; the start is the fallback answer."""
    from .compile import compile
    from .formulations.chain import chain_problem

    t0 = time.perf_counter()
    cost_model = problem.cost_model()
    start = _start_placement(problem, cost_model, warm_start)
    start_eval = evaluate(start, cost_model)
    t_start = time.perf_counter() - t0
    if not start_eval.valid or not math.isfinite(start_eval.objective) or start_eval.objective <= 0:
        result = solve(problem, "chain", solver, time_limit, gap, threads, None, log_path, method, windows=False)
        result.start_objective, result.start_accepted = start_eval.objective, False
        result.message = "; ".join(m for m in (f"warm start refused: the cost model finds it invalid or without a "
                                               f"positive max load ({_violations(start_eval)}); solved without "
                                               "windows", result.message) if m)
        return result
    target = start_eval.objective / (1 + gap)
    compiled = compile(chain_problem(problem, target), "chain")
    t_compile = time.perf_counter() - t0 - t_start
    options = SolveOptions(time_limit=time_limit, gap=gap, threads=threads, log_path=log_path)
    outcome = solve_model(compiled.model, solver, options, start=None)
    result = _certify(compiled, outcome, method, solver, start_eval, "", gap)
    _keep_start(result, start, start_eval, target, outcome.status, _start_label(warm_start))
    result.timings = Seconds(build=t_compile + outcome.timings.build, start=t_start,
                             handoff=outcome.timings.handoff, solve=outcome.timings.solve,
                             total=time.perf_counter() - t0)
    return result


def _keep_start(result: Result, start: Placement, start_eval: Evaluation, target: float, native: Status,
                label: str) -> None:
    """Make the start the answer unless the windowed solve beat it; map the status to the certificate's."""
    result.found_by = "solver"
    if result.objective is None or start_eval.objective <= result.objective * (1 + MATCH_TOL):
        result.placement, result.objective, result.evaluation = start, start_eval.objective, start_eval
        result.found_by = label
    if result.bound is not None:
        result.bound = min(result.bound, result.objective)
    result.start_accepted = True  # as the incumbent; the windows cut it off, so it is not a MIP start
    if native in (Status.OPTIMAL, Status.INFEASIBLE):
        result.status = Status.OPTIMAL  # windowed model solved or empty: min(T*, bound) is proven
    elif native in (Status.TIME_LIMIT_FEASIBLE, Status.TIME_LIMIT_NO_SOLUTION):
        result.status = Status.TIME_LIMIT_FEASIBLE
    note = (f"position windows at T* = {target:.6g} (start / (1 + gap)); the start is kept as the incumbent; "
            f"the windowed model ended {native.value}")
    result.message = "; ".join(m for m in (note, result.message) if m)


# ---------------------------------------------------------------------------- warm start
def _start_placement(problem: Any, cost_model: Any, warm_start: str | Path | Placement) -> Placement:
    """The placement a warm-start argument names."""
    if isinstance(warm_start, Placement):
        return warm_start
    from .heuristics.base import METHODS

    if isinstance(warm_start, str) and warm_start in METHODS:
        from .heuristics import run

        return run(warm_start, problem.graph, problem.cluster, model=cost_model).placement
    path = Path(warm_start)
    if not path.exists():
        raise SpecError(f"warm_start {str(warm_start)!r} is neither a heuristic ({sorted(METHODS)}) "
                        "nor an existing placement file")
    from .io import Workload, load_placement

    return load_placement(path, Workload(problem.graph, problem.cluster))


def _warm_start(compiled: Any, warm_start: Any) -> tuple[Placement | None, Evaluation | None, str]:
    """The start placement, its evaluation, and why it is refused ('' if it is passed on)."""
    if warm_start is None:
        return None, None, ""
    start = _start_placement(compiled.problem, compiled.cost_model, warm_start)
    ev = evaluate(start, compiled.cost_model)
    if not ev.valid:
        return start, ev, f"warm start refused: the cost model finds it invalid ({_violations(ev)})"
    worst, where = compiled.varmap.residual(compiled.varmap.values(start))
    if worst > START_TOL:
        return start, ev, (f"warm start refused: it violates {where!r} of formulation "
                           f"{compiled.formulation!r} by {worst:.3g}")
    return start, ev, ""


def _violations(ev: Evaluation) -> str:
    return "; ".join(v.message for v in ev.violations[:3])


# ---------------------------------------------------------------------------- certificate
def _certify(compiled: Any, outcome: SolverOutcome, method: str, solver: str, start_eval: Evaluation | None,
             refusal: str, gap: float) -> Result:
    """Read the placement back, re-evaluate it, check agreement, and assemble the result."""
    scale = compiled.objective_scale
    notes = [m for m in (refusal, outcome.message) if m]
    placement = ev = objective = None
    if outcome.has_solution:
        placement = compiled.varmap.placement(compiled.model)
        ev = evaluate(placement, compiled.cost_model)
        objective = ev.objective
        _check_agreement(compiled, outcome, ev, solver, notes, gap)
    bound = None if outcome.bound is None else outcome.bound * scale
    if compiled.formulation == "chain":
        bound = certified_bound(compiled.problem, bound, infeasible=outcome.status is Status.INFEASIBLE)
    if bound is not None and objective is not None:
        bound = min(bound, objective)
    accepted = outcome.start_accepted if start_eval is not None else None
    if refusal:
        accepted = False
    return Result(status=outcome.status, placement=placement, objective=objective, bound=bound, method=method,
                  solver=solver, formulation=compiled.formulation, log_path=outcome.log_path,
                  start_objective=None if start_eval is None else start_eval.objective, start_accepted=accepted,
                  evaluation=ev, message="; ".join(notes),
                  bound_scope=DP_CLASS if compiled.formulation == "chain" else problem_scope(compiled.problem))


def _check_agreement(compiled: Any, outcome: SolverOutcome, ev: Evaluation, solver: str, notes: list[str],
                     gap: float) -> None:
    """Raise when the solver's objective and the cost model's disagree in a way that signals a bug.

    A solver objective *below* the cost model's means the model under-counts (e.g. a big-M that
    let schedules overlap): always an error. An incumbent whose objective variable is not tight
    (solver *above* the cost model) is a valid placement: the evaluator's value is kept and the
    difference noted. That happens under a time limit and also at "optimal" within a relative gap
    tolerance (a solver may stop with slack in the max-load variable); beyond that tolerance an
    "optimal" claim above the cost model is an error.
    """
    claimed = outcome.objective * compiled.objective_scale
    tol = MATCH_TOL * max(abs(ev.objective), abs(claimed), 1e-9)
    name = f"{compiled.formulation!r} with {solver!r}"
    if not ev.valid:
        raise EvaluationMismatchError(f"{name}: the solver's placement is invalid for the cost model "
                                      f"({_violations(ev)}); the formulation misses a constraint")
    if not math.isfinite(ev.objective) or abs(claimed - ev.objective) <= tol:
        return
    slack_ok = outcome.status is Status.TIME_LIMIT_FEASIBLE or (
        outcome.status is Status.OPTIMAL and claimed - ev.objective <= gap * claimed + tol)
    if claimed > ev.objective and slack_ok:
        notes.append(f"incumbent objective {claimed:.10g} was not tight; the cost model gives {ev.objective:.10g}")
        return
    raise EvaluationMismatchError(f"{name}: solver objective {claimed:.10g} (model {outcome.objective:.10g} x scale "
                                  f"{compiled.objective_scale:.6g}) but the cost model gives {ev.objective:.10g}")
