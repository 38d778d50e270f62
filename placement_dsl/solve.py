"""``solve``: compile a problem, warm-start it, run a solver under the time limit, and certify the answer.

The formulation is resolved once into an object (:func:`placement_dsl.formulations.get`); its
hooks (:meth:`~placement_dsl.formulations.Formulation.prepare` / ``finish``) are the only place
where a formulation changes how a solve runs. Every answer — the solver's, a kept warm start,
an incumbent at a time limit — passes the problem's full validity check (the cost model's
checks and the terms' own, e.g. pins) and is re-evaluated by the cost model; a solver objective
that disagrees raises :class:`~placement_dsl.errors.EvaluationMismatchError` instead of being reported.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from .errors import EvaluationMismatchError, PlacementError, SpecError
from .evaluate import Evaluation
from .formulations import Formulation, Kind, Plan, get
from .placement import Placement
from .progress import scaled
from .result import Result, Seconds
from .solvers import SolveOptions, SolverOutcome, Status, solve_model

MATCH_TOL = 1e-6  # relative agreement required between solver and cost model


def solve(problem: Any, formulation: str | Formulation = "auto", solver: str = "highs", time_limit: float = 60.0,
          gap: float = 1e-4, threads: int = 1, warm_start: str | Path | Placement | None = None,
          log_path: str | Path | None = None, method: str = "ip", windows: bool | None = None,
          budget: float | None = None) -> Result:
    """Solve ``problem`` with a formulation and a solver; the result is certified by the cost model.

    Parameters
    ----------
    problem
        A :class:`~placement_dsl.problem.Problem`.
    formulation
        A registered formulation name or object (:data:`~placement_dsl.formulations.FORMULATIONS`),
        or ``"auto"`` to let the problem choose. Relaxations are refused: their optima are lower
        bounds, not placements (use :func:`~placement_dsl.certify.certify`).
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
        path of a placement file. A start that is invalid for the problem or violates the
        formulation is refused (and said so), not passed.
    log_path
        File for the solver's log.
    method
        The label of this run in the result (e.g. the command-line method name).
    windows
        An option of the ``"chain"`` restriction (:class:`~placement_dsl.formulations.chain.ChainFormulation`):
        position windows from the warm start. ``None`` leaves the choice to the formulation.
    budget
        Wall-clock seconds for the whole call (warm start and compile included); the solver then
        gets what is left, at most ``time_limit``. ``None``: only ``time_limit`` applies.

    Returns
    -------
    Result
        Status, placement, cost-model objective, bound and its class, gap, timings and the start's fate.
    """
    from .compile import compile

    t0 = time.perf_counter()
    form = get(formulation, problem)
    if form.kind is Kind.RELAXATION:
        raise SpecError(f"solve: {form.name!r} is a relaxation; its optimum is a lower bound, not a placement. "
                        "Use certify(problem, levels=...) or `placement-dsl bounds` for bounds")
    reason = form.accepts(problem)
    if reason:
        raise SpecError(reason)
    start, start_eval, refusal = _warm_start(problem, warm_start)
    options = {} if windows is None else {"windows": windows}
    plan = form.prepare(problem, None if refusal else start, None if refusal else start_eval, gap, options)
    plan.info["label"] = _start_label(warm_start)
    t_start = time.perf_counter() - t0
    compiled = compile(plan.problem, form)
    t_compile = time.perf_counter() - t0 - t_start
    passed = start is not None and not refusal and plan.pass_start
    values = compiled.varmap.values(start) if passed else None
    if budget is not None:
        time_limit = max(min(time_limit, budget - (time.perf_counter() - t0)), 0.1)
    cutoff = None if plan.cutoff is None else plan.cutoff / compiled.objective_scale
    with scaled(compiled.objective_scale):  # progress reports in the problem's units
        outcome = solve_model(compiled.model, solver, SolveOptions(time_limit=time_limit, gap=gap, threads=threads,
                                                                   log_path=log_path, cutoff=cutoff), start=values)
    result = _certify(compiled, outcome, method, solver, gap, plan.cutoff)
    _record_start(result, start_eval, refusal, passed, outcome, warm_start)
    form.finish(result, plan)
    _final_check(problem, result, form)
    result.timings = Seconds(build=t_compile + outcome.timings.build, start=t_start,
                             handoff=outcome.timings.handoff, solve=outcome.timings.solve,
                             total=time.perf_counter() - t0)
    return result


def _start_label(warm_start: Any) -> str:
    return f"warm start ({warm_start})" if isinstance(warm_start, str) and not Path(warm_start).suffix else "warm start"


def _record_start(result: Result, start_eval: Evaluation | None, refusal: str, passed: bool,
                  outcome: SolverOutcome, warm_start: Any) -> None:
    """The start's objective and fate, and who found the answer (the solver, or the start it did not improve)."""
    if start_eval is None and not refusal:
        result.found_by = "solver" if result.objective is not None else ""
        return
    result.start_objective = None if start_eval is None else start_eval.objective
    result.start_accepted = bool(outcome.start_accepted) if passed else (False if refusal else None)
    if refusal:
        result.message = "; ".join(m for m in (refusal, result.message) if m)
    if result.objective is None:
        return
    kept = passed and start_eval is not None and result.objective >= start_eval.objective * (1 - MATCH_TOL)
    result.found_by = _start_label(warm_start) if kept else "solver"


# ---------------------------------------------------------------------------- warm start
def _start_placement(problem: Any, warm_start: str | Path | Placement) -> Placement:
    """The placement a warm-start argument names."""
    if isinstance(warm_start, Placement):
        return warm_start
    from .heuristics.base import METHODS

    if isinstance(warm_start, str) and warm_start in METHODS:
        from .heuristics import run

        return run(warm_start, problem.graph, problem.cluster, model=problem.cost_model()).placement
    path = Path(warm_start)
    if not path.exists():
        raise SpecError(f"warm_start {str(warm_start)!r} is neither a heuristic ({sorted(METHODS)}) "
                        "nor an existing placement file")
    from .io import Workload, load_placement

    return load_placement(path, Workload(problem.graph, problem.cluster))


def _warm_start(problem: Any, warm_start: Any) -> tuple[Placement | None, Evaluation | None, str]:
    """The start placement, its evaluation, and why it is refused ('' if it may be used).

    A heuristic that cannot produce a start (e.g. no split fits the memory) refuses the start
    instead of failing the solve: the solver then decides (e.g. status infeasible).
    """
    if warm_start is None:
        return None, None, ""
    try:
        start = _start_placement(problem, warm_start)
    except SpecError:
        raise
    except PlacementError as err:
        return None, None, f"warm start refused: {warm_start!r} found no placement ({err})"
    ev = problem.evaluate(start)
    violations = problem.violations(start)
    if violations:
        return start, ev, f"warm start refused: it is invalid for the problem ({'; '.join(violations[:3])})"
    return start, ev, ""


# ---------------------------------------------------------------------------- certificate
def _certify(compiled: Any, outcome: SolverOutcome, method: str, solver: str, gap: float,
             cutoff: float | None = None) -> Result:
    """Read the placement back, re-evaluate it, check agreement, and assemble the result."""
    scale = compiled.objective_scale
    notes = [m for m in (outcome.message,) if m]
    placement = ev = objective = None
    if outcome.has_solution:
        placement = compiled.varmap.placement(compiled.model)
        ev = compiled.problem.evaluate(placement)
        objective = ev.objective
        _check_agreement(compiled, outcome, ev, solver, notes, gap, cutoff)
    bound = None if outcome.bound is None else outcome.bound * scale
    if bound is not None and objective is not None:
        bound = min(bound, objective)
    form = compiled.formulation
    return Result(status=outcome.status, placement=placement, objective=objective, bound=bound, method=method,
                  solver=solver, formulation=form.name, log_path=outcome.log_path, evaluation=ev,
                  message="; ".join(notes), bound_scope=form.placement_class(compiled.problem))


def _final_check(problem: Any, result: Result, form: Formulation) -> None:
    """Every answer passes the problem's full validity check (pins, colocation, ... included)."""
    if result.placement is None:
        return
    violations = problem.violations(result.placement)
    if violations:
        raise EvaluationMismatchError(f"formulation {form.name!r}: the answer found by {result.found_by or 'the solver'} "
                                      f"is invalid for the problem ({'; '.join(violations[:3])}); "
                                      "the formulation misses a constraint")
    if result.bound is not None and result.objective is not None:
        result.bound = min(result.bound, result.objective)


def _check_agreement(compiled: Any, outcome: SolverOutcome, ev: Evaluation, solver: str, notes: list[str],
                     gap: float, cutoff: float | None = None) -> None:
    """Raise when the solver's objective and the cost model's disagree in a way that signals a bug.

    A solver objective *below* the cost model's means the model under-counts (e.g. a big-M that
    let schedules overlap): always an error. An incumbent whose objective variable is not tight
    (solver *above* the cost model) is a valid placement: the evaluator's value is kept and the
    difference noted. That happens under a time limit and also at "optimal" within a relative gap
    tolerance (a solver may stop with slack in the max-load variable), and for an answer above the
    solver's ``cutoff`` (cost-model units), which "optimal" does not claim: it proves only that
    nothing lies below the cutoff. Beyond that, an "optimal" claim above the cost model is an error.
    """
    claimed = outcome.objective * compiled.objective_scale
    tol = MATCH_TOL * max(abs(ev.objective), abs(claimed), 1e-9)
    name = f"{compiled.formulation.name!r} with {solver!r}"
    if not ev.valid:
        raise EvaluationMismatchError(f"{name}: the solver's placement is invalid for the cost model "
                                      f"({'; '.join(v.message for v in ev.violations[:3])}); "
                                      "the formulation misses a constraint")
    if not math.isfinite(ev.objective):  # e.g. a tensor over an unreachable route: the model priced it finitely
        raise EvaluationMismatchError(f"{name}: solver objective {claimed:.10g} but the cost model gives "
                                      f"{ev.objective} for its placement; the formulation under-counts it")
    if abs(claimed - ev.objective) <= tol:
        return
    slack_ok = outcome.status is Status.TIME_LIMIT_FEASIBLE or (outcome.status is Status.OPTIMAL and (
        claimed - ev.objective <= gap * claimed + tol or (cutoff is not None and claimed > cutoff)))
    if claimed > ev.objective and slack_ok:
        notes.append(f"incumbent objective {claimed:.10g} was not tight; the cost model gives {ev.objective:.10g}")
        return
    raise EvaluationMismatchError(f"{name}: solver objective {claimed:.10g} (model {outcome.objective:.10g} x scale "
                                  f"{compiled.objective_scale:.6g}) but the cost model gives {ev.objective:.10g}")


__all__ = ["Plan", "solve"]
